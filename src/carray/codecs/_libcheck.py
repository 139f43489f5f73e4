"""The ctypes layer over the blosc2 wheel's libblosc2: loading, a check, and what replaces it.

:mod:`carray.codecs.blosc` calls libblosc2 through ctypes with argument types and a
``blosc2_dparams`` layout read from the wheel's ``blosc2.h`` (both set here).  A blosc2 release that
moves the library, renames a function or changes the struct would make those calls
fail or, worse, decode wrongly.  So at import the layer decodes chunks made by
python-blosc2's (and python-blosc's) public API, whole and in part, and compares;
when anything differs or fails, :class:`PublicLibrary` answers the same calls
through python-blosc2's public functions instead (slower: each call decodes the
whole chunk into a new buffer), and a warning says why.
"""

from __future__ import annotations

import ctypes
import os
import re
import struct
import warnings
from typing import Any

import blosc as _blosc1
import blosc2 as _blosc2
import numpy as np

from carray.errors import LibraryFallbackWarning

#: Items of the sample decoded by the check (several Blosc blocks of int32).
_SAMPLE_ITEMS = 50_000
#: The part decoded alone: items [start, start + count).
_PART = (12_345, 1_000)


def load_library() -> ctypes.CDLL:
    """The blosc2 wheel's own libblosc2, with the argument types of the library-wide
    calls set."""
    libdir = os.path.join(os.path.dirname(_blosc2.__file__), "lib")
    for name in ("libblosc2.so", "libblosc2.dylib", "blosc2.dll", "libblosc2.so.9"):
        path = os.path.join(libdir, name)
        if os.path.exists(path):
            lib = ctypes.CDLL(path)
            break
    else:  # pragma: no cover - every supported wheel ships it
        raise ImportError(f"libblosc2 not found in {libdir}; reinstall the blosc2 package")
    vp, i32 = ctypes.c_void_p, ctypes.c_int32
    lib.blosc2_init.argtypes = []
    lib.blosc2_decompress.argtypes = [vp, i32, vp, i32]
    lib.blosc2_decompress.restype = ctypes.c_int
    lib.blosc2_getitem.argtypes = [vp, i32, ctypes.c_int, ctypes.c_int, vp, i32]
    lib.blosc2_getitem.restype = ctypes.c_int
    lib.blosc2_set_nthreads.argtypes = [ctypes.c_int16]
    lib.blosc2_set_nthreads.restype = ctypes.c_int16
    lib.blosc2_init()
    return lib


def header_text() -> str | None:
    """The ``blosc2.h`` shipped with this libblosc2 (None: not there)."""
    header = os.path.join(os.path.dirname(_blosc2.__file__), "include", "blosc2.h")
    try:
        with open(header, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def struct_fields(name: str, text: str | None = None) -> list[str] | None:
    """Field names, in order, of the struct typedef ``name`` in ``blosc2.h`` (arrays by
    their bare names).

    Structs passed by value (``blosc2_dparams``, ``blosc2_cparams``) must match the
    library's layout exactly; without the header, the calls taking them are off.
    """
    text = header_text() if text is None else text
    if text is None:
        return None
    end = text.find(f"}} {name};")
    start = text.rfind("typedef struct {", 0, end)
    if end < 0 or start < 0:
        return None
    body = re.sub(r"//[^\n]*|/\*.*?\*/", "", text[start + 16:end], flags=re.S)
    return [decl.split()[-1].lstrip("*").split("[")[0]
            for decl in body.split(";") if decl.strip()]


_DPARAMS_TYPES = {"nthreads": ctypes.c_int16, "schunk": ctypes.c_void_p,
                  "postfilter": ctypes.c_void_p, "postparams": ctypes.c_void_p,
                  "typesize": ctypes.c_int32}


def dparams_type(lib: Any) -> type | None:
    """The ctypes ``blosc2_dparams`` of ``lib`` (None: its layout is unknown), with the
    argument types of the per-context calls set."""
    fields = struct_fields("blosc2_dparams")
    if not fields or fields[0] != "nthreads" or any(f not in _DPARAMS_TYPES for f in fields):
        return None
    cls = type("DParams", (ctypes.Structure,),
               {"_fields_": [(f, _DPARAMS_TYPES[f]) for f in fields]})
    lib.blosc2_create_dctx.argtypes = [cls]
    lib.blosc2_create_dctx.restype = ctypes.c_void_p
    lib.blosc2_free_ctx.argtypes = [ctypes.c_void_p]
    lib.blosc2_free_ctx.restype = None
    lib.blosc2_decompress_ctx.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int32,
                                           ctypes.c_void_p, ctypes.c_int32]
    lib.blosc2_decompress_ctx.restype = ctypes.c_int
    lib.blosc2_getitem_ctx.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int32,
                                        ctypes.c_int, ctypes.c_int, ctypes.c_void_p,
                                        ctypes.c_int32]
    lib.blosc2_getitem_ctx.restype = ctypes.c_int
    lib.blosc2_set_maskout.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
    lib.blosc2_set_maskout.restype = ctypes.c_int
    return cls


def _buffer(src: Any, size: int) -> bytes:
    """The ``size`` bytes at ``src`` (a bytes object or an address)."""
    if isinstance(src, (bytes, bytearray)):
        return bytes(src[:size])
    return ctypes.string_at(src, size)


class PublicLibrary:
    """The libblosc2 functions :mod:`carray.codecs.blosc` calls, through python-blosc2.

    Only the library-wide functions exist (no per-thread contexts: callers see
    ``blosc2_create_dctx`` missing and use these).  Results follow libblosc2's
    convention: bytes written, or a negative number on failure.
    """

    def blosc2_init(self) -> None:
        pass

    def blosc2_set_nthreads(self, nthreads: int) -> int:
        previous = _blosc2.nthreads
        _blosc2.set_nthreads(int(nthreads))
        return int(previous)

    def blosc2_decompress(self, src: Any, srcsize: int, dest: int, destsize: int) -> int:
        try:
            data = _blosc2.decompress2(_buffer(src, srcsize))
        except (RuntimeError, ValueError):
            return -1
        if len(data) > destsize:
            return -1
        ctypes.memmove(dest, data, len(data))
        return len(data)

    def blosc2_getitem(self, src: Any, srcsize: int, start: int, nitems: int, dest: int,
                       destsize: int) -> int:
        chunk = _buffer(src, srcsize)
        typesize = max(chunk[3], 1) if len(chunk) > 3 else 1
        lo, n = start * typesize, nitems * typesize
        try:
            data = _blosc2.decompress2(chunk)
        except (RuntimeError, ValueError):
            return -1
        if lo < 0 or lo + n > len(data) or n > destsize:
            return -1
        ctypes.memmove(dest, data[lo:lo + n], n)
        return n


def _decode_all(lib: Any, chunk: bytes, nbytes: int) -> bytes:
    out = ctypes.create_string_buffer(nbytes)
    n = lib.blosc2_decompress(chunk, len(chunk), ctypes.addressof(out), nbytes)
    if n != nbytes:
        raise ValueError(f"blosc2_decompress returned {n}, expected {nbytes}")
    return out.raw


def _decode_part(lib: Any, chunk: bytes, typesize: int, ctx: Any = None) -> bytes:
    start, count = _PART
    out = ctypes.create_string_buffer(count * typesize)
    if ctx is None:
        n = lib.blosc2_getitem(chunk, len(chunk), start, count, ctypes.addressof(out),
                               len(out.raw))
    else:
        n = lib.blosc2_getitem_ctx(ctx, chunk, len(chunk), start, count,
                                   ctypes.addressof(out), len(out.raw))
    if n != count * typesize:
        raise ValueError(f"blosc2_getitem returned {n}, expected {count * typesize}")
    return out.raw


def _check_context(lib: Any, dparams: type, chunk: bytes, sample: np.ndarray) -> None:
    ctx = lib.blosc2_create_dctx(dparams(nthreads=1))
    if not ctx:
        raise ValueError("blosc2_create_dctx returned NULL")
    try:
        out = np.zeros_like(sample)
        n = lib.blosc2_decompress_ctx(ctx, chunk, len(chunk), out.ctypes.data, out.nbytes)
        if n != out.nbytes or not np.array_equal(out, sample):
            raise ValueError("blosc2_decompress_ctx decoded other values")
        start, count = _PART
        if _decode_part(lib, chunk, sample.itemsize, ctx) != \
                sample[start:start + count].tobytes():
            raise ValueError("blosc2_getitem_ctx decoded other values")
    finally:
        lib.blosc2_free_ctx(ctx)


def self_check(lib: Any, dparams: type | None) -> str | None:
    """What is wrong with calling ``lib`` (libblosc2 through ctypes), or None when chunks
    made by python-blosc2 and python-blosc decode through it, whole and in part, and
    through a context of its own when ``dparams`` (the ``blosc2_dparams`` struct) is
    known."""
    sample = (np.arange(_SAMPLE_ITEMS, dtype=np.int32) * 7) % 1009
    start, count = _PART
    try:
        chunks = {
            "Blosc2": bytes(_blosc2.compress2(sample, typesize=sample.itemsize)),
            "Blosc1": _blosc1.compress(sample.tobytes(), typesize=sample.itemsize),
        }
        for name, chunk in chunks.items():
            if struct.unpack_from("<i", chunk, 4)[0] != sample.nbytes:
                raise ValueError(f"python-blosc{'2' if name == 'Blosc2' else ''} wrote an "
                                 "unexpected header")
            if _decode_all(lib, chunk, sample.nbytes) != sample.tobytes():
                raise ValueError(f"a {name} chunk decoded to other values")
            if _decode_part(lib, chunk, sample.itemsize) != \
                    sample[start:start + count].tobytes():
                raise ValueError(f"part of a {name} chunk decoded to other values")
        if dparams is not None:
            _check_context(lib, dparams, chunks["Blosc2"], sample)
    except (ValueError, OSError, AttributeError, TypeError, ctypes.ArgumentError) as exc:
        return str(exc)
    return None


def fallback(reason: str) -> PublicLibrary:
    """Warn that libblosc2 cannot be called directly (``reason``) and return the stand-in."""
    warnings.warn(
        f"carray: the blosc2 {_blosc2.__version__} wheel's libblosc2 cannot be used directly "
        f"({reason}); decoding through python-blosc2's public API instead, which is slower "
        "for partial reads. Install a blosc2 release carray supports (see its "
        "requirements) to restore direct decoding.", LibraryFallbackWarning, stacklevel=3)
    return PublicLibrary()
