"""Factories and ``open``: the bcolz 1.x top-level API."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from carray.array import carray
from carray.errors import ContainerNotFoundError, FormatError
from carray.layouts.b2frame import is_b2nd_frame
from carray.shapes import calc_chunklen
from carray.stores import resolve


def _shape_and_dtype(shape: int | tuple[int, ...], dtype: Any) -> tuple[int, np.dtype]:
    """bcolz factories take an N-d shape: rows along the first axis, the rest in the dtype."""
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    if not shape:
        raise ValueError("shape must have at least one dimension")
    dt = np.dtype(dtype)
    if len(shape) > 1:
        dt = np.dtype((dt, shape[1:]))
    return int(shape[0]), dt


def fill(shape: int | tuple[int, ...], dflt: Any = None, dtype: Any = float,
         **kwargs: Any) -> carray:
    """A carray of ``shape`` filled with ``dflt``; other arguments as for :class:`carray`."""
    n, dt = _shape_and_dtype(shape, dtype)
    kwargs.setdefault("expectedlen", n)
    a = carray(np.empty(0, dtype=dt), dflt=dflt, **kwargs)
    if n:
        a.resize(n)
    return a


def zeros(shape: int | tuple[int, ...], dtype: Any = float, **kwargs: Any) -> carray:
    """A carray of zeros."""
    return fill(shape, None, dtype, **kwargs)


def ones(shape: int | tuple[int, ...], dtype: Any = float, **kwargs: Any) -> carray:
    """A carray of ones."""
    base = np.dtype(dtype)
    return fill(shape, np.ones((), dtype=base.base)[()], dtype, **kwargs)


def arange(start: Any = None, stop: Any = None, step: Any = None, dtype: Any = None,
           **kwargs: Any) -> carray:
    """Like ``numpy.arange``, built chunk by chunk (never the whole range in memory)."""
    if stop is None:
        start, stop = 0, start
    start = 0 if start is None else start
    step = 1 if step is None else step
    n = len(range(0, int(np.ceil((stop - start) / step)))) if step else 0
    dt = np.dtype(dtype) if dtype is not None else np.arange(start, start + step, step).dtype
    kwargs.setdefault("expectedlen", n)
    a = carray(np.empty(0, dtype=dt), **kwargs)
    blen = a.chunklen
    for i in range(0, n, blen):
        m = min(blen, n - i)
        a.append(np.arange(m, dtype=dt) * dt.type(step) + dt.type(start + i * step)
                 if dt.kind not in "mM" else np.arange(start + i * step, start + (i + m) * step,
                                                      step, dtype=dt))
    a.flush()
    return a


def fromiter(iterable: Iterable, dtype: Any, count: int = -1, **kwargs: Any) -> Any:
    """A carray from an iterable, read ``count`` items at a time (-1: until exhausted).

    A structured ``dtype`` makes a ctable with one column per field.
    """
    dt = np.dtype(dtype)
    if dt.names:
        return _table_fromiter(iterable, dt, count, kwargs)
    if count is not None and count >= 0:
        kwargs.setdefault("expectedlen", count)
    a = carray(np.empty(0, dtype=dt), **kwargs)
    it = iter(iterable)
    remaining = count if count is not None and count >= 0 else None
    blen = a.chunklen
    while remaining is None or remaining > 0:
        take = blen if remaining is None else min(blen, remaining)
        block = list(itertools.islice(it, take))
        if not block:
            break
        a.append(np.array(block, dtype=dt))
        if remaining is not None:
            remaining -= len(block)
    if remaining:
        raise ValueError(f"iterable too short: {remaining} items missing of {count}")
    a.flush()
    return a


def _table_fromiter(iterable: Iterable, dt: np.dtype, count: int, kwargs: dict) -> Any:
    from carray.table import ctable

    if count is not None and count >= 0:
        kwargs.setdefault("expectedlen", count)
        iterable = itertools.islice(iterable, count)
    t = ctable(np.empty(0, dtype=dt), **kwargs)
    blen = min(c.chunklen for c in t.cols.values()) if t.names else 1024
    it = iter(iterable)
    n = 0
    while True:
        block = list(itertools.islice(it, blen))
        if not block:
            break
        t.append(np.array(block, dtype=dt))
        n += len(block)
    if count is not None and count >= 0 and n < count:
        raise ValueError(f"iterable too short: {count - n} items missing of {count}")
    t.flush()
    return t


def eval(expression: str, user_dict: dict | None = None, vm: str | None = None,  # noqa: A001
         out_flavor: str = "carray", blen: int | None = None, **kwargs: Any) -> Any:
    """Evaluate an expression over carrays, arrays and scalars, block by block.

    Names are looked up in ``user_dict``, then in the caller's variables (as
    bcolz does).  Operands must have equal lengths; only one block of each is
    decoded at a time.

    Parameters
    ----------
    expression : str
        numexpr syntax, e.g. ``"a * 2 + sin(b)"`` or ``"(x < 0.1) & (y > 0.5)"``.
    vm : {None, 'numexpr', 'python'}
        The evaluator (default numexpr when installed).
    out_flavor : {'carray', 'numpy'}
        The result's type; other keyword arguments go to the result carray.
    """
    from carray.query import BlockEvaluator, caller_scope

    scope = caller_scope(1)
    scope.update(user_dict or {})
    ev = BlockEvaluator(expression, {}, scope, vm=vm, blen=blen, prune=False)
    return collect_result(ev, out_flavor, kwargs)


def collect_result(ev: Any, out_flavor: str, kwargs: dict) -> Any:
    """Gather the blocks of an evaluation into a carray or a numpy array."""
    if out_flavor not in ("carray", "bcolz", "numpy"):
        raise ValueError(f"out_flavor must be 'carray' or 'numpy', got {out_flavor!r}")
    if ev.length is None:
        value = ev.constant()
        return value[()] if isinstance(value, np.ndarray) and value.ndim == 0 else value
    out: Any = None
    parts = []
    for _, _, result, _ in ev.blocks():
        if out_flavor == "numpy":
            parts.append(np.array(result))
            continue
        if out is None:
            kwargs.setdefault("expectedlen", ev.length)
            out = carray(np.empty((0, *result.shape[1:]), dtype=result.dtype), **kwargs)
        out.append(result)
    if out_flavor == "numpy":
        return np.concatenate(parts) if parts else np.empty(0)
    if out is None:
        out = carray(np.empty(0), **kwargs)
    out.flush()
    return out


def iterblocks(cobj: carray, blen: int | None = None, start: int = 0,
               stop: int | None = None) -> Iterator[np.ndarray]:
    """Iterate over ``cobj`` in blocks of ``blen`` rows (bcolz's top-level form)."""
    return cobj.iterblocks(blen, start, stop)


def open(rootdir: str | os.PathLike, mode: str = "a", *,  # noqa: A001
         storage_options: dict | None = None, **kwargs: Any) -> Any:
    """Open a dataset (a carray or a ctable); the layout is told by what is stored.

    Parameters
    ----------
    rootdir : str or path
        A local path or any fsspec URL (``s3://bucket/data``, ``memory://x``).
    mode : {'a', 'r', 'w'}
        'r' never writes.
    storage_options : dict, optional
        Passed to the fsspec file system of a URL (credentials, endpoint, ...).
    **kwargs
        As for :class:`carray` or :class:`ctable`.
    """
    rootdir = os.fspath(rootdir)
    store, path = resolve(rootdir, storage_options)
    store.invalidate(path)
    if not store.exists(path):
        raise ContainerNotFoundError(f"{store.url(path)}: no such dataset")
    if store.isfile(store.join(path, "__rootdirs__")):
        from carray.table import ctable

        return ctable(rootdir=rootdir, mode=mode, storage_options=storage_options, **kwargs)
    if store.isfile(store.join(path, "meta", "storage")) or is_b2nd_frame(path, store):
        return carray(rootdir=rootdir, mode=mode, storage_options=storage_options, **kwargs)
    raise FormatError("not a carray dataset (no meta/storage, not a Blosc2 frame)",
                      store.url(path))


__all__ = ["arange", "calc_chunklen", "eval", "fill", "fromiter", "iterblocks", "ones", "open",
           "zeros"]
