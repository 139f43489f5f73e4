"""``concatenate``: arrays joined along an axis, whole chunks moved where grids line up.

The result takes the chunk and block shapes, codec and fill value of the first
carray given (or carray's defaults), unless keyword arguments say otherwise.
A chunk of the result that is exactly one chunk of one input, stored in the
same chunk format, is moved as its compressed bytes (checked on the way); the
others are decoded and compressed again (see :mod:`carray.array.transfer`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from carray.array import transfer
from carray.array.array import carray
from carray.array.container import built_whole, refuse_own_source
from carray.layouts import default_format


def concatenate(arrays: Sequence[Any], axis: int = 0, rootdir: str | os.PathLike | None = None,
                **kwargs: Any) -> carray:
    """Join ``arrays`` along ``axis`` into a new carray, as :func:`numpy.concatenate` does.

    Parameters
    ----------
    arrays : sequence of carray or array-like
        At least one; all of as many axes, of the same shape except along ``axis``.
    axis : int
        The axis to join along (negative counts from the end).
    rootdir : path or URL, optional
        Where to store the result (default: in memory).
    **kwargs
        As for the :class:`carray` constructor (``chunks``, ``blocks``, ``cparams``,
        ``dtype``, ``mode``, ``format``, ...).  Defaults: the first carray's chunk and
        block shapes, codec and fill value; the dtype numpy's concatenation gives.

    Returns
    -------
    carray
        The joined array, flushed.

    Raises
    ------
    ValueError
        No arrays, 0-d arrays, shapes that differ off ``axis``, an axis out of range, or
        ``rootdir`` holds one of the inputs.
    """
    if len(arrays) == 0:
        raise ValueError("need at least one array to concatenate")
    refuse_own_source(rootdir, arrays)
    inputs = [a if isinstance(a, carray) else np.asarray(a) for a in arrays]
    ndim = inputs[0].ndim
    if ndim == 0 or any(a.ndim != ndim for a in inputs):
        raise ValueError("concatenate needs arrays of one number of axes, at least 1; got "
                         f"{[a.ndim for a in inputs]}")
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis {axis} is out of bounds for arrays of {ndim} axes")
    axis %= ndim
    shape = list(inputs[0].shape)
    for a in inputs[1:]:
        if any(n != m for i, (n, m) in enumerate(zip(a.shape, shape, strict=True))
               if i != axis):
            raise ValueError(f"shapes {tuple(shape)} and {a.shape} differ off axis {axis}")
    shape[axis] = sum(a.shape[axis] for a in inputs)
    dtype = np.dtype(kwargs.pop("dtype", None) or np.result_type(*[a.dtype for a in inputs]))
    args = _template(inputs, {**kwargs, "rootdir": rootdir})

    def build(args: dict[str, Any]) -> carray:
        out = carray(np.empty((0, *shape[1:]), dtype=dtype), **args)
        try:
            sources = [a if isinstance(a, carray) else _wrapped(a, out) for a in inputs]
            if out.order == "C" and not dtype.hasobject:
                transfer.append_from(out, sources, axis)
            else:
                _by_rows(out, sources, axis)
            out.flush()
        except BaseException:
            out.discard()
            raise
        return out

    if rootdir is None:
        return build(args)
    # The temporary name built under has no telling extension.
    args.setdefault("format", default_format(rootdir))
    return built_whole(rootdir, args, build)


def _template(inputs: list[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    """Constructor arguments of the result: the first carray's grid and codec, then
    ``kwargs``."""
    first = next((a for a in inputs if isinstance(a, carray)), None)
    args: dict[str, Any] = {}
    if first is not None and first.order == "C" and "chunklen" not in kwargs and \
            "expectedlen" not in kwargs:
        args = dict(chunks=first.chunks, blocks=first.blocks, cparams=first.cparams,
                    dflt=first.dflt)
        fmt = kwargs.get("format") or default_format(kwargs.get("rootdir"))
        if fmt == "bcolz":
            args["chunklen"] = args.pop("chunks")[0]
            args.pop("blocks")
    elif first is not None:
        args = dict(cparams=first.cparams)
    if "chunks" in kwargs and "blocks" not in kwargs:
        args.pop("blocks", None)
    return {**args, **kwargs}


def _wrapped(values: np.ndarray, like: carray) -> carray:
    """``values`` as a carray in memory with ``like``'s grid and codec (so its chunks are
    the result's)."""
    if like.order != "C" or like.ndim == 0:
        return carray(values)
    return carray(np.ascontiguousarray(values, dtype=like.dtype), chunks=like.chunks,
                  blocks=like.blocks, cparams=like.cparams)


def _by_rows(out: carray, sources: list[carray], axis: int) -> None:
    """Append the concatenation a run of rows at a time (results in Fortran order)."""
    if axis == 0:
        for s in sources:
            for block in s.iterblocks():
                out.append(block)
        return
    step = max(out.chunklen, 1)
    for start in range(0, sources[0].shape[0], step):
        out.append(np.concatenate([s[start:start + step] for s in sources], axis=axis))
