"""numpy functions carrays and lazy expressions implement beyond the plain reductions,
looked up by ``ComputeMixin.__array_function__``.

* Functions returning arrays shaped like their input stay lazy or stream into
  a new carray whatever the size: ``np.transpose``, ``np.clip``, ``np.round``
  / ``np.around`` (:mod:`.transpose`), ``np.cumsum``, ``np.cumprod``,
  ``np.nancumsum``, ``np.nancumprod`` (:mod:`.scans`: a new carray).
* Functions returning small results run numpy's own function on
  ``np.asarray`` while the operands are small (``carray.compute.FALLBACK_BYTES``)
  and stream beyond that: the NaN-ignoring reductions (:mod:`.nanreduce`),
  quantiles, percentiles and medians (:mod:`.quantiles`), ``np.histogram``
  and ``np.histogram_bin_edges`` (:mod:`.histogram`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from carray.compute import histogram, nanreduce, protocols, quantiles, scans, transpose
from carray.compute import masks as _masks  # noqa: F401 - registers the mask methods
from carray.compute.slabs import small

Handler = Callable[[Any, tuple, dict], Any]


def _streamed(impl: Callable[..., Any], **fixed: Any) -> Handler:
    """numpy's own function on small operands, ``impl`` (same arguments) otherwise."""

    def handler(func: Any, args: tuple, kwargs: dict) -> Any:
        if not args or not protocols.is_ours(args[0]) or small(*args, *kwargs.values()):
            return protocols.fallback(func, args, kwargs)
        return impl(*args, **kwargs, **fixed)

    return handler


def _lazy(impl: Callable[..., Any], **fixed: Any) -> Handler:
    """``impl`` whenever the first operand is a carray or expression."""

    def handler(func: Any, args: tuple, kwargs: dict) -> Any:
        if not args or not protocols.is_ours(args[0]):
            return protocols.fallback(func, args, kwargs)
        return impl(*args, **kwargs, **fixed)

    return handler


def _real_only(impl: Callable[..., Any]) -> Handler:
    """As :func:`_streamed`, for functions not streamed for complex items (numpy orders
    complex numbers lexicographically, which the reductions do not)."""
    streamed = _streamed(impl)

    def handler(func: Any, args: tuple, kwargs: dict) -> Any:
        if args and protocols.is_ours(args[0]) and np.dtype(args[0].dtype).kind == "c":
            return protocols.fallback(func, args, kwargs)
        return streamed(func, args, kwargs)

    return handler


def _nan_scan(op: str, fill: int) -> Callable[..., Any]:
    def impl(a: Any, axis: int | None = None, dtype: Any = None, out: Any = None) -> Any:
        return scans.scan_op(op, nanreduce.nan_filled(a, fill), axis, dtype, out)

    return impl


def _scan(op: str) -> Callable[..., Any]:
    def impl(a: Any, axis: int | None = None, dtype: Any = None, out: Any = None) -> Any:
        return scans.scan_op(op, a, axis, dtype, out)

    return impl


HANDLERS: dict[Any, Handler] = {
    np.nansum: _streamed(nanreduce.nansum),
    np.nanprod: _streamed(nanreduce.nanprod),
    np.nanmean: _streamed(nanreduce.nanmean),
    np.nanvar: _streamed(nanreduce.nanvar),
    np.nanstd: _streamed(nanreduce.nanstd),
    np.nanmin: _real_only(nanreduce.nanmin),
    np.nanmax: _real_only(nanreduce.nanmax),
    np.nanargmin: _real_only(nanreduce.nanargmin),
    np.nanargmax: _real_only(nanreduce.nanargmax),
    np.quantile: _streamed(quantiles.quantile),
    np.percentile: _streamed(quantiles.percentile),
    np.median: _streamed(quantiles.median),
    np.nanquantile: _streamed(quantiles.quantile, nan=True),
    np.nanpercentile: _streamed(quantiles.percentile, nan=True),
    np.nanmedian: _streamed(quantiles.median, nan=True),
    np.histogram: _streamed(histogram.histogram),
    np.histogram_bin_edges: _streamed(histogram.histogram_bin_edges),
    np.cumsum: _lazy(_scan("cumsum")),
    np.cumprod: _lazy(_scan("cumprod")),
    np.nancumsum: _lazy(_nan_scan("cumsum", 0)),
    np.nancumprod: _lazy(_nan_scan("cumprod", 1)),
    np.transpose: _lazy(transpose.transpose),
    np.clip: _lazy(transpose.clip),
    np.round: _lazy(transpose.around),
    np.around: _lazy(transpose.around),
}

protocols.register_functions(HANDLERS)
