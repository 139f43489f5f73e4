"""Compressing chunks: Blosc2 chunks (ours), Blosc1 chunks (for readers that need them).

The decoding side, headers and checks are :mod:`carray.codecs.blosc`, which
re-exports these functions.
"""

from __future__ import annotations

from collections.abc import Callable

import blosc as _blosc1
import blosc2 as _blosc2
import numpy as np

from carray.codecs import _encoder
from carray.codecs.pipeline import blosc2_filters, check_blosc1_filters
from carray.core.params import CParams
from carray.errors import CodecError

BLOSC2_HEADER = 32
MAX_BUFFERSIZE = 2**31 - 1 - BLOSC2_HEADER
MAX_TYPESIZE = 255

_BLOSC2_CODECS = {
    "blosclz": _blosc2.Codec.BLOSCLZ,
    "lz4": _blosc2.Codec.LZ4,
    "lz4hc": _blosc2.Codec.LZ4HC,
    "zlib": _blosc2.Codec.ZLIB,
    "zstd": _blosc2.Codec.ZSTD,
}


def blosc_typesize(dtype: np.dtype) -> int:
    """The typesize Blosc is told for a dtype, as bcolz chooses it."""
    if dtype.kind == "S":
        return 1
    if dtype.kind == "U":
        return 4
    size = dtype.base.itemsize
    return size if 0 < size <= MAX_TYPESIZE else 1


# Blocks are what a partial read decodes: small enough that reading one value
# is cheap, large enough that codecs keep their ratio and speed.  For lz4 and
# blosclz 16 KiB: against 64 KiB (1 MiB chunks of int64 and float64, one thread)
# ratios within 2%, whole chunks decode 7-18% faster, one item 1.5-1.8x faster,
# compression 3-15% slower.  zstd and zlib pay more per block (16 KiB decodes whole
# chunks 1.4-1.7x slower), so they keep 64 KiB, as do Blosc1 chunks.
_BLOCK = 16 * 1024
_BLOCK_DENSE = 64 * 1024
_BLOCK1 = 64 * 1024


def default_blocksize(cname: str) -> int:
    """Bytes per Blosc block for codec ``cname`` (Blosc2 chunks)."""
    return _BLOCK_DENSE if cname in ("zstd", "zlib") else _BLOCK


def compress1(data: np.ndarray, typesize: int, cparams: CParams) -> bytes:
    """Compress to a Blosc1 (format version 2) chunk that c-blosc 1.x can read.

    Raises
    ------
    CodecError
        ``cparams.filters`` is more than one shuffle: a Blosc1 chunk has no room
        for a filter pipeline.
    """
    check_blosc1_filters(cparams)
    data = np.ascontiguousarray(data)
    if data.nbytes > MAX_BUFFERSIZE:
        raise CodecError(f"a chunk of {data.nbytes} bytes exceeds Blosc's 2 GiB limit")
    if not data.nbytes:
        return bytes(_blosc1.compress(b"", typesize, cparams.clevel, int(cparams.shuffle or 0),
                                      cparams.cname))
    blocksize = _BLOCK1
    if cparams.cname != "zstd":
        # c-blosc 1.x multiplies a forced blocksize by the typesize when it splits
        # blocks into byte streams (every codec but zstd), with a 64 KiB floor.
        blocksize = max(blocksize // max(typesize, 1), 1)
    _blosc1.set_blocksize(blocksize)
    try:
        return bytes(_blosc1.compress_ptr(data.ctypes.data, data.nbytes // typesize, typesize,
                                          cparams.clevel, int(cparams.shuffle or 0),
                                          cparams.cname))
    finally:
        _blosc1.set_blocksize(0)


def compress2(data: np.ndarray, typesize: int, cparams: CParams,
              blocksize: int | None = None, nthreads: int | None = None,
              scratch: Callable[[int], np.ndarray] | None = None) -> bytes:
    """Compress to a Blosc2 chunk (faster, and carries the filter pipeline in its header).

    ``nthreads`` is the threads Blosc uses for this chunk (default: the process-wide
    setting); writers compressing several chunks at once pass 1.  ``scratch(nbytes)``
    lends a byte buffer to compress into where it can be used (see
    :func:`carray.codecs._encoder.compress`).

    Raises
    ------
    CodecError
        The chunk is too large, or libblosc2 refuses the filters for this data
        (e.g. ``trunc_prec`` on items that are not 4- or 8-byte floats).
    """
    data = np.ascontiguousarray(data)
    if data.nbytes > MAX_BUFFERSIZE:
        raise CodecError(f"a chunk of {data.nbytes} bytes exceeds Blosc's 2 GiB limit")
    if blocksize is None:
        blocksize = default_blocksize(cparams.cname)
    if blocksize and typesize > 1 and blocksize % typesize:
        # libblosc2 (2.x) shuffles a block whose size is not a multiple of the typesize
        # wrongly: the chunk then decodes to other values than were compressed.
        blocksize = max(blocksize - blocksize % typesize, typesize)
    filters, filters_meta = blosc2_filters(cparams)
    if len(filters) > 2:
        # libblosc2 (3.3) uses the source as scratch space once a pipeline passes
        # through more than two buffers: give it a copy, never the caller's array.
        data = data.copy()
    try:
        codec = _BLOSC2_CODECS[cparams.cname]
        if nthreads == 1 and _encoder.handles(codec, filters):  # let the GIL go meanwhile
            return _encoder.compress(data, typesize, codec, cparams.clevel, filters,
                                     filters_meta, blocksize, scratch)
        return bytes(_blosc2.compress2(
            data, typesize=typesize, clevel=cparams.clevel,
            codec=_BLOSC2_CODECS[cparams.cname], filters=filters, filters_meta=filters_meta,
            blocksize=blocksize, nthreads=nthreads or _blosc2.nthreads))
    except (RuntimeError, ValueError) as exc:
        raise CodecError(f"Blosc2 cannot compress {data.nbytes} bytes of typesize {typesize} "
                         f"with filters {list(cparams.filters or ())}: {exc}") from None
