"""Writing Blosc2 ``b2nd`` frames (contiguous files and sparse directories).

Format facts relied on are listed in :mod:`carray.formats.b2frame`; the ones this
half depends on most: every stored chunk is ``chunkshape`` rounded up to whole
blocks, zero-padded, blocks in C order; the frame's blocksize is one N-d block
(specs/caterva-b2nd.md §2); a chunk that is entirely zero need not be stored at
all, its int64 offset being ``bit 63 | 1 << 56`` (blosc2-chunk-and-frame.md §2.3);
the ``b2nd`` metalayer carries the dtype as a str32 (fixtures/QUIRKS.md).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from typing import Any

import msgpack
import numpy as np

from carray.codecs.blosc import BLOSC2_HEADER, compress2
from carray.errors import ContainerExistsError, UnsupportedDTypeError
from carray.formats import _b2frame_chunk as _chunk
from carray.formats import _b2nd_geometry as geo
from carray.formats._b2frame_header import (
    SPARSE_INDEX,
    build_header,
    build_nd_meta,
    build_trailer,
)
from carray.params import CParams
from carray.shapes import default_blocks, default_chunks_blocks

#: Codec name -> the compcode frame headers and chunk byte 22 carry.
COMPCODES = {"blosclz": 0, "lz4": 1, "lz4hc": 2, "zlib": 4, "zstd": 5}


def _copy_dtype(itemsize: int) -> np.dtype:
    """A dtype to move items of this size as raw bytes, using numpy's fast integer copies."""
    return np.dtype(f"u{itemsize}") if itemsize in (1, 2, 4, 8) else np.dtype(f"V{itemsize}")



def pack_value(value: Any) -> bytes:
    """msgpack bytes of a metadata value, as python-blosc2 packs ``meta``/``vlmeta``.

    numpy scalars and arrays become Python numbers and lists.

    Raises
    ------
    TypeError
        A value msgpack cannot hold.
    """
    def default(obj):
        if isinstance(obj, np.generic):
            return obj.item()
        if isinstance(obj, np.ndarray):
            return obj.tolist()
        raise TypeError(f"cannot store {type(obj).__name__} in Blosc2 metadata")

    return msgpack.packb(value, use_bin_type=True, default=default)


def encode_vlmeta(value: Any, cparams: CParams) -> bytes:
    """A vlmeta entry as python-blosc2's ``vlmeta[k] = v`` stores it: msgpack, then a
    Blosc2 chunk of typesize 1."""
    return compress2(np.frombuffer(pack_value(value), np.uint8), 1, cparams)


def _write_all(fd: int, data) -> None:
    view = memoryview(data).cast("B")
    while view:
        view = view[os.write(fd, view):]


class _ChunkMaker:
    """Cuts an array into stored (padded, block-ordered) chunks and compresses them."""

    def __init__(self, arr: np.ndarray, g: geo.Geometry, cparams: CParams) -> None:
        self.items = arr.view(_copy_dtype(g.itemsize))
        self.g, self.cparams = g, cparams
        self.c_order = geo.blocked_is_c_order(g.extchunk, g.blockshape)

    def __call__(self, coords: tuple[int, ...]) -> bytes:
        g = self.g
        box = geo.chunk_box(coords, g.shape, g.chunkshape)
        region = self.items[tuple(slice(a, b) for a, b in box) + (Ellipsis,)]
        if region.shape != g.extchunk:
            padded = np.zeros(g.extchunk, region.dtype)  # b2nd pads with zeros
            padded[tuple(slice(0, n) for n in region.shape)] = region
            region = padded
        data = region if self.c_order else geo.to_blocked(region, g.blockshape)
        return compress2(data, g.itemsize, self.cparams, blocksize=g.block_nbytes)


def special_code_of(chunk) -> int:
    """The special-value code of a Blosc2 chunk with an extended header (0 if none)."""
    if len(chunk) < BLOSC2_HEADER or chunk[0] < 3 or (chunk[2] & 0x05) != 0x05:
        return 0
    return (chunk[31] >> 4) & 0x07


def _is_zero_special(chunk: bytes) -> bool:
    return special_code_of(chunk) == _chunk.ZERO


def _replace_path(tmp: str, path: str) -> None:
    """Move ``tmp`` to ``path``, replacing a previous frame file or sparse directory."""
    if os.path.isdir(path):
        if not os.path.exists(os.path.join(path, SPARSE_INDEX)):
            raise ContainerExistsError(f"{path} is a directory that is not a sparse frame; "
                                       "refusing to replace it")
        old = f"{path}.{os.getpid()}.old"
        os.rename(path, old)
        os.rename(tmp, path)
        shutil.rmtree(old)
    elif os.path.isdir(tmp) and os.path.lexists(path):
        os.unlink(path)
        os.rename(tmp, path)
    else:
        os.replace(tmp, path)


def write_array(array, path: str | os.PathLike, *, chunks=None, blocks=None,
                cparams: CParams | Mapping | None = None, contiguous: bool = True,
                vlmeta: Mapping[str, Any] | None = None, meta: Mapping[str, Any] | None = None,
                fsync: bool = True) -> None:
    """Write an array as a Blosc2 ``b2nd`` frame that python-blosc2 opens.

    Parameters
    ----------
    array : array_like
        Any dtype but object; up to 16 dimensions (b2nd's limit).
    path : str or os.PathLike
        File to write (``contiguous=True``) or directory (sparse frame). An
        existing frame there is replaced; the new one appears atomically.
    chunks, blocks : tuple of int, optional
        Chunk and block shapes; the defaults are carray's
        (:func:`carray.shapes.default_chunks_blocks`).
    cparams : CParams or dict, optional
        Codec, level and shuffle (``quantize`` is not supported here).
    contiguous : bool
        One file, or a directory with ``chunks.b2frame`` and one file per chunk.
    vlmeta : mapping, optional
        User attributes (msgpack-able values), stored as python-blosc2 does.
    meta : mapping, optional
        Extra fixed metalayers, msgpack-packed like python-blosc2's ``meta=``.
    fsync : bool
        Flush the data to disk before the rename.

    Raises
    ------
    ValueError
        Inconsistent shapes, more than 16 dimensions, too many or badly named metadata.
    UnsupportedDTypeError
        Object or zero-size item dtypes.
    """
    arr = np.asarray(array)
    path = os.fspath(path)
    if arr.dtype.hasobject:
        raise UnsupportedDTypeError("object arrays cannot be stored in a Blosc2 frame")
    itemsize = arr.dtype.itemsize
    if itemsize == 0:
        raise UnsupportedDTypeError(f"dtype {arr.dtype} has zero-size items")
    cp = CParams.coerce(cparams)
    if cp.quantize:
        raise ValueError("quantize is not supported when writing Blosc2 frames")
    if chunks is None:
        chunks, dblocks = default_chunks_blocks(arr.shape, itemsize)
        blocks = dblocks if blocks is None else blocks
    chunks = tuple(int(c) for c in chunks)
    if blocks is None:
        blocks = default_blocks(chunks, itemsize) if all(chunks) else chunks
    blocks = tuple(int(b) for b in blocks)
    reason = geo.check_geometry(arr.shape, chunks, blocks, itemsize)
    if reason:
        raise ValueError(reason)
    g = geo.Geometry(tuple(arr.shape), chunks, blocks, itemsize)
    if g.block_nbytes > _chunk.MAX_BLOCKSIZE:
        raise ValueError(f"blocks of {g.block_nbytes} bytes exceed Blosc2's limit of "
                         f"{_chunk.MAX_BLOCKSIZE}")
    metalayers = [("b2nd", build_nd_meta(g.shape, chunks, blocks, arr.dtype))]
    metalayers += [(str(k), pack_value(v)) for k, v in (meta or {}).items()]
    vl = [(str(k), encode_vlmeta(v, cp)) for k, v in (vlmeta or {}).items()]
    trailer = build_trailer(vl)
    nchunks = g.nchunks
    header_args = dict(
        frame_type=0 if contiguous else 1, typesize=itemsize,
        blocksize=g.block_nbytes if nchunks else 0, chunksize=g.chunk_nbytes if nchunks else 0,
        compcode=COMPCODES[cp.cname], clevel=cp.clevel, has_vlmeta=bool(vl),
        metalayers=metalayers, trailer_len=len(trailer))
    make = _ChunkMaker(arr, g, cp)
    tmp = f"{path}.{os.getpid()}.tmp"
    if contiguous:
        _write_cframe(tmp, make, g, cp, header_args, trailer, fsync)
    else:
        _write_sframe(tmp, make, g, cp, header_args, trailer, fsync)
    try:
        _replace_path(tmp, path)
    except BaseException:
        _cleanup(tmp)
        raise


def _cleanup(tmp: str) -> None:
    if os.path.isdir(tmp):
        shutil.rmtree(tmp, ignore_errors=True)
    elif os.path.lexists(tmp):
        os.unlink(tmp)


def _filters_of(chunk: bytes | None, cp: CParams) -> tuple[bytes, bytes]:
    if chunk is None:
        return bytes([int(cp.shuffle)]), b""
    return chunk[16:22], chunk[24:30]


def offsets_chunk(offsets: np.ndarray, cp: CParams) -> bytes:
    """The offsets chunk of a frame: its int64 LE offsets as one Blosc2 chunk."""
    return compress2(offsets.astype("<i8"), 8, cp)


def _write_cframe(tmp, make, g, cp, header_args, trailer, fsync) -> None:
    nchunks = g.nchunks
    placeholder = build_header(nbytes=0, cbytes=0, filters=b"", filters_meta=b"", data_len=0,
                               **header_args)
    header_len = len(placeholder)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        _write_all(fd, placeholder)
        offsets = np.empty(nchunks, np.int64)
        pos, sample = 0, None
        for i, coords in enumerate(np.ndindex(*g.grid) if nchunks else ()):
            chunk = make(coords)
            if _is_zero_special(chunk):
                offsets[i] = _chunk.special_offset(_chunk.ZERO)
                continue
            sample = sample or chunk
            offsets[i] = pos
            _write_all(fd, chunk)
            pos += len(chunk)
        index = offsets_chunk(offsets, cp) if nchunks else b""
        _write_all(fd, index)
        _write_all(fd, trailer)
        filters, filters_meta = _filters_of(sample, cp)
        header = build_header(nbytes=nchunks * g.chunk_nbytes, cbytes=pos, filters=filters,
                              filters_meta=filters_meta, data_len=pos + len(index),
                              **header_args)
        assert len(header) == header_len
        os.pwrite(fd, header, 0)
        if fsync:
            os.fsync(fd)
    except BaseException:
        os.close(fd)
        _cleanup(tmp)
        raise
    os.close(fd)


def _write_file(name: str, parts, fsync: bool) -> None:
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for p in parts:
            _write_all(fd, p)
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)


def _write_sframe(tmp, make, g, cp, header_args, trailer, fsync) -> None:
    nchunks = g.nchunks
    _cleanup(tmp)
    os.mkdir(tmp)
    try:
        offsets = np.empty(nchunks, np.int64)
        nfiles, cbytes, sample = 0, 0, None
        for i, coords in enumerate(np.ndindex(*g.grid) if nchunks else ()):
            chunk = make(coords)
            if _is_zero_special(chunk):
                offsets[i] = _chunk.special_offset(_chunk.ZERO)
                continue
            sample = sample or chunk
            _write_file(os.path.join(tmp, f"{nfiles:08X}.chunk"), [chunk], fsync)
            offsets[i] = nfiles
            nfiles += 1
            cbytes += len(chunk)
        index = offsets_chunk(offsets, cp) if nchunks else b""
        filters, filters_meta = _filters_of(sample, cp)
        header = build_header(nbytes=nchunks * g.chunk_nbytes, cbytes=cbytes, filters=filters,
                              filters_meta=filters_meta, data_len=len(index), **header_args)
        _write_file(os.path.join(tmp, SPARSE_INDEX), [header, index, trailer], fsync)
    except BaseException:
        _cleanup(tmp)
        raise
