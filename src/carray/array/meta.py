"""The metadata of a new carray: its dtype, shape, chunk and block shapes, codec and fill
value, from what the constructor was given."""

from __future__ import annotations

from typing import Any

import numpy as np

from carray.chunks.shapes import choose_grid
from carray.core.defaults import resolve_cparams
from carray.errors import UnsupportedDTypeError
from carray.layouts.base import ArrayMeta

# An array started empty without expectedlen is assumed to grow this long, so
# row-by-row appends fill chunks of a useful size (bcolz would pick 16 KiB).
DEFAULT_EXPECTEDLEN = 2**20


def wants_objects(found: np.dtype | None, dtype: Any) -> bool:
    """Whether a new array is to hold Python objects (dtype object, asked, or ``found`` in
    the initial data)."""
    if dtype is not None:
        return np.dtype(dtype) == np.dtype(object)
    return found == np.dtype(object)


def object_items(values: Any) -> np.ndarray:
    """``values`` (a sequence) as a 1-d object array, one item per element: lists and
    tuples stay whole items, as bcolz keeps them."""
    if values is None:
        return np.empty(0, dtype=object)
    items = list(values) if not isinstance(values, np.ndarray) or values.ndim else \
        [values[()]]
    out = np.empty(len(items), dtype=object)
    for i, item in enumerate(items):
        out[i] = item
    return out


def new_meta(data: Any, dt: np.dtype, cparams: Any, dflt: Any, expectedlen: int | None,
             chunklen: int | None, chunks: Any, blocks: Any,
             format: str | None) -> ArrayMeta:  # noqa: A002
    """The metadata of a new array of item type ``dt`` starting with ``data`` (anything
    with a length and a shape)."""
    base, atom = dt.subdtype or (dt, ())  # ('i4', (3,)): rows of shape (3,) of int32
    if isinstance(data, np.ndarray) and data.ndim == 0 and not atom:
        return scalar_meta(base, cparams, dflt, format)
    atomshape = tuple(atom) + tuple(data.shape[1:])
    if base == np.dtype(object):
        raise UnsupportedDTypeError(
            "object arrays cannot be stored: their items would have to be pickled")
    if base.hasobject:  # chunks would hold the objects' addresses, not the objects
        raise UnsupportedDTypeError(
            f"dtype {base} holds Python objects inside records; use dtype=object (one "
            "object per item) or a table with an object column")
    if base.itemsize == 0 and base.kind in "SUV":
        raise UnsupportedDTypeError(f"dtype {base} has zero-size items")
    cp = resolve_cparams(cparams)
    if cp.quantize and base.kind != "f":  # it would be ignored: refused, as bcolz does
        raise UnsupportedDTypeError(f"quantize={cp.quantize} keeps significant digits of "
                                    f"floating-point items; dtype {base} has none")
    length = len(data)
    expected = int(expectedlen) if expectedlen is not None else \
        (length or DEFAULT_EXPECTEDLEN)
    chunks, blocks = choose_grid(base, atomshape, expected, chunklen=chunklen, chunks=chunks,
                                 blocks=blocks, rows_only=format == "bcolz",
                                 needs_blocks=format in ("b2nd", "caterva"))
    dflt_arr = np.zeros((), dtype=base) if dflt is None else np.asarray(dflt, dtype=base)
    if dflt_arr.ndim:
        raise ValueError("dflt must be a scalar")
    meta = ArrayMeta(dtype=base, shape=(0, *atomshape), chunks=chunks, blocks=blocks,
                     cparams=cp, dflt=dflt_arr, expectedlen=expected)
    meta.grid  # noqa: B018 - validates the shapes before anything is created
    return meta


def object_meta(cparams: Any, expectedlen: int | None,
                format: str | None) -> ArrayMeta:  # noqa: A002
    """The metadata of a new array of Python objects (its creator opted in to pickles)."""
    if format not in (None, "bcolz"):
        raise UnsupportedDTypeError(f"object arrays are stored only as bcolz directories "
                                    f"(one pickle per file), not as {format}")
    return ArrayMeta(dtype=np.dtype(object), shape=(0,), chunks=(1,), blocks=None,
                     cparams=resolve_cparams(cparams), dflt=None,
                     expectedlen=int(expectedlen or 0))


def fortran_meta(meta: ArrayMeta, format: str | None) -> ArrayMeta:  # noqa: A002
    """``meta`` of a new array for the stored array of an order-'F' one: its transpose."""
    if format in ("bcolz", "b2nd", "caterva"):
        raise ValueError(f"the {format} format has no Fortran order (python-blosc2 and "
                         "bcolz read C order only); use the superchunk format")
    blocks = None if meta.blocks is None else tuple(meta.blocks)[::-1]
    return meta.replace(shape=tuple(meta.shape)[::-1], chunks=tuple(meta.chunks)[::-1],
                        blocks=blocks, order="F")


def scalar_meta(base: np.dtype, cparams: Any, dflt: Any,
                format: str | None) -> ArrayMeta:  # noqa: A002
    """The metadata of a 0-d array: one chunk of one item."""
    if format == "bcolz":
        raise ValueError("the bcolz layout stores rows: a 0-d array needs another format")
    if base == np.dtype(object):
        raise UnsupportedDTypeError("object arrays cannot be stored: their items would "
                                    "have to be pickled")
    dflt_arr = np.zeros((), dtype=base) if dflt is None else np.asarray(dflt, dtype=base)
    return ArrayMeta(dtype=base, shape=(), chunks=(), blocks=(), cparams=resolve_cparams(
        cparams), dflt=dflt_arr, expectedlen=1)
