"""Compressing Blosc2 chunks on a context of one's own, with the GIL released.

python-blosc2's ``compress2`` holds the GIL while it compresses, so threads that
compress chunks at the same time take turns: two of them are no faster than one.
This module calls libblosc2's ``blosc2_create_cctx`` and ``blosc2_compress_ctx``
through ctypes, which lets the GIL go for the call, so each worker thread
compresses on its own core.

``blosc2_cparams`` is passed by value, so its layout must match the library's
exactly: it is used only when the wheel's ``blosc2.h`` declares the fields this
module knows, in that order, and when, at import, the chunks it makes are byte for
byte those python-blosc2 makes for the same data and parameters.  Otherwise
:func:`available` is False and callers keep python-blosc2.
"""

from __future__ import annotations

import ctypes
import re
from collections.abc import Callable, Sequence
from typing import Any

import blosc2 as _blosc2
import numpy as np

from carray.codecs._libcheck import header_text, load_library, struct_fields

_MAX_FILTERS = 6
_MAX_OVERHEAD = 32  # BLOSC2_MAX_OVERHEAD: an extended header
_FORWARD_COMPAT_SPLIT = 4

_u8, _vp = ctypes.c_uint8, ctypes.c_void_p
_FIELDS: list[tuple[str, Any]] = [
    ("compcode", _u8), ("compcode_meta", _u8), ("clevel", _u8), ("use_dict", ctypes.c_int),
    ("typesize", ctypes.c_int32), ("nthreads", ctypes.c_int16),
    ("blocksize", ctypes.c_int32), ("splitmode", ctypes.c_int32), ("schunk", _vp),
    ("filters", _u8 * _MAX_FILTERS), ("filters_meta", _u8 * _MAX_FILTERS),
    ("prefilter", _vp), ("preparams", _vp), ("tuner_params", _vp),
    ("tuner_id", ctypes.c_int), ("instr_codec", ctypes.c_bool), ("codec_params", _vp),
    ("filter_params", _vp * _MAX_FILTERS),
]


class _CParams(ctypes.Structure):
    _fields_ = _FIELDS


def _header_fields() -> list[str] | None:
    """Field names of ``blosc2_cparams`` in the header shipped with the library."""
    text = header_text()
    if text is None or not re.search(rf"BLOSC2_MAX_FILTERS\s*=\s*{_MAX_FILTERS}\b", text):
        return None
    return struct_fields("blosc2_cparams", text)


def _load() -> Any:
    if _header_fields() != [name for name, _ in _FIELDS]:
        return None
    try:
        lib = load_library()
        lib.blosc2_create_cctx.argtypes = [_CParams]
        lib.blosc2_create_cctx.restype = ctypes.c_void_p
        lib.blosc2_compress_ctx.argtypes = [_vp, _vp, ctypes.c_int32, _vp, ctypes.c_int32]
        lib.blosc2_compress_ctx.restype = ctypes.c_int
        lib.blosc2_free_ctx.argtypes = [_vp]
        lib.blosc2_free_ctx.restype = None
    except (ImportError, OSError, AttributeError):
        return None
    return lib


_lib = _load()


def _code(value: Any) -> int:
    """A codec or filter code given as an int or as one of python-blosc2's enums."""
    return int(getattr(value, "value", value))


def compress(data: np.ndarray, typesize: int, codec: Any, clevel: int,
             filters: Sequence[Any], filters_meta: Sequence[int], blocksize: int,
             scratch: Callable[[int], np.ndarray] | None = None) -> bytes:
    """A Blosc2 chunk of ``data`` (C-contiguous) compressed on this thread alone, as
    python-blosc2's ``compress2(..., nthreads=1)`` makes it.

    ``scratch(nbytes)``, when given, lends a byte buffer of at least ``nbytes`` to
    compress into (e.g. one kept per thread), so only the compressed bytes are new.

    Raises
    ------
    ValueError
        libblosc2 refused (the code it returned is in the message).
    """
    params = _CParams(compcode=_code(codec), clevel=clevel, typesize=typesize, nthreads=1,
                      blocksize=blocksize, splitmode=_FORWARD_COMPAT_SPLIT)
    for i, (code, meta) in enumerate(zip(filters, filters_meta, strict=True)):
        params.filters[i], params.filters_meta[i] = _code(code), meta
    nbytes = data.nbytes
    size = nbytes + _MAX_OVERHEAD
    dest = np.empty(size, dtype=np.uint8) if scratch is None else scratch(size)[:size]
    ctx = _lib.blosc2_create_cctx(params)
    if not ctx:
        raise ValueError("blosc2_create_cctx returned NULL")
    try:
        n = _lib.blosc2_compress_ctx(ctx, data.ctypes.data, nbytes, dest.ctypes.data,
                                     len(dest))
    finally:
        _lib.blosc2_free_ctx(ctx)
    if n <= 0:
        raise ValueError(f"blosc2_compress_ctx returned {n}")
    return dest[:n].tobytes()


def _agrees_with_python_blosc2() -> bool:
    """Whether this module's chunks are python-blosc2's, byte for byte, on a sample."""
    sample = np.cumsum(np.arange(40_000, dtype=np.int64) % 7 - 3)
    cases = [(_blosc2.Codec.LZ4, 5, [_blosc2.Filter.SHUFFLE], [0], 16384),
             (_blosc2.Codec.ZSTD, 3, [_blosc2.Filter.BITSHUFFLE], [0], 65536),
             (_blosc2.Codec.BLOSCLZ, 9, [_blosc2.Filter.DELTA, _blosc2.Filter.SHUFFLE],
              [0, 0], 8192)]
    try:
        for codec, clevel, filters, metas, blocksize in cases:
            ours = compress(sample, 8, codec, clevel, filters, metas, blocksize)
            theirs = _blosc2.compress2(sample, typesize=8, clevel=clevel, codec=codec,
                                       filters=filters, filters_meta=metas,
                                       blocksize=blocksize, nthreads=1)
            if ours != bytes(theirs):
                return False
    except (ValueError, TypeError, RuntimeError):
        return False
    return True


_usable = _lib is not None and _agrees_with_python_blosc2()


# Codes from here up are plugins, registered with python-blosc2's own setup: left to it.
_FIRST_PLUGIN = 32


def available() -> bool:
    """Whether :func:`compress` may be used at all (see the module docstring)."""
    return _usable


def handles(codec: Any, filters: Sequence[Any]) -> bool:
    """Whether :func:`compress` may be used for this codec and filter pipeline (see the
    module docstring; libblosc2's built-in codecs and filters only)."""
    return _usable and _code(codec) < _FIRST_PLUGIN and \
        all(_code(f) < _FIRST_PLUGIN for f in filters)
