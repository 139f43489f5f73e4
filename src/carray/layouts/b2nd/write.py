"""Writing Blosc2 ``b2nd`` frames (contiguous files and sparse directories).

Format facts relied on are listed in :mod:`carray.layouts.b2nd.frame`; the ones this
half depends on most: every stored chunk is ``chunkshape`` rounded up to whole
blocks, zero-padded, blocks in C order; the frame's blocksize is one N-d block
(docs/formats/b2frame.md, "N-d layout"); a chunk that is entirely zero need not be
stored at all, its int64 offset being ``bit 63 | 1 << 56`` ("Data chunks and the
offsets chunk"); the ``b2nd`` metalayer carries the dtype as a str32 ("N-d arrays").

Frames go through a :class:`carray.stores.Store`, so ``path`` may be a local path
or any fsspec URL; :func:`write_array` says how each is made to appear whole.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from typing import Any

import msgpack
import numpy as np

from carray.attrs import pack as attrpack
from carray.chunks import geometry as geo
from carray.chunks.shapes import default_blocks, default_chunks_blocks
from carray.codecs.blosc import BLOSC2_HEADER, compress2
from carray.codecs.checksums import get_checksum
from carray.codecs.pages import PAGE_SIZE, ChunkDigests
from carray.core.params import FILTER_CODES, CParams
from carray.errors import ContainerExistsError, UnsupportedDTypeError
from carray.layouts.b2nd import chunk as _chunk
from carray.layouts.b2nd.digests import (
    NOT_STORED,
    Entry,
    build_record,
    seal,
    set_mark,
)
from carray.layouts.b2nd.header import (
    SPARSE_INDEX,
    build_header,
    build_nd_meta,
    build_trailer,
)
from carray.stores import Store, resolve
from carray.stores.staging import remove_quietly, staged

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
    """A vlmeta entry as python-blosc2's ``vlmeta[k] = v`` stores it: msgpack
    (:mod:`carray.attrs.pack`), then a Blosc2 chunk of typesize 1.

    Raises
    ------
    UnstorableAttributeError
        A value carray does not store.
    """
    return compress2(np.frombuffer(attrpack.pack(value), np.uint8), 1, cparams.lossless)


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



def write_array(array, path: str | os.PathLike, *, chunks=None, blocks=None,
                cparams: CParams | Mapping | None = None, contiguous: bool = True,
                vlmeta: Mapping[str, Any] | None = None, meta: Mapping[str, Any] | None = None,
                fsync: bool = True, storage_options: dict | None = None) -> None:
    """Write an array as a Blosc2 ``b2nd`` frame that python-blosc2 opens.

    Parameters
    ----------
    array : array_like
        Any dtype but object; up to 16 dimensions (b2nd's limit).
    path : str or os.PathLike
        File to write (``contiguous=True``) or directory (sparse frame): a local
        path or any fsspec URL (``s3://bucket/x.b2nd``, ``memory://x.b2nd``). An
        existing frame there is replaced.
    chunks, blocks : tuple of int, optional
        Chunk and block shapes; the defaults are carray's
        (:func:`carray.chunks.shapes.default_chunks_blocks`).
    cparams : CParams or dict, optional
        Codec, level and shuffle (``quantize`` is not supported here).
    contiguous : bool
        One file, or a directory with ``chunks.b2frame`` and one file per chunk.
    vlmeta : mapping, optional
        User attributes (msgpack-able values), stored as python-blosc2 does.
    meta : mapping, optional
        Extra fixed metalayers, msgpack-packed like python-blosc2's ``meta=``.
    fsync, storage_options
        Flush the data before the rename (local paths); the options of a URL's file system.

    Notes
    -----
    Locally the frame is written under a temporary name and renamed into place,
    chunks streamed to disk as they are compressed.  On an object store a contiguous
    frame is one object, put once (its compressed chunks held until then); a sparse
    one is written chunk files first and ``chunks.b2frame`` last.

    Raises
    ------
    ValueError
        Inconsistent shapes, more than 16 dimensions, too many or badly named metadata.
    UnsupportedDTypeError
        Object or zero-size item dtypes.
    ContainerExistsError
        ``path`` is a directory that is not a sparse frame.
    """
    arr = np.asarray(array)
    if arr.dtype.hasobject:
        raise UnsupportedDTypeError("object arrays cannot be stored in a Blosc2 frame")
    if arr.dtype.itemsize == 0:
        raise UnsupportedDTypeError(f"dtype {arr.dtype} has zero-size items")
    cp = CParams.coerce(dict(cparams) if isinstance(cparams, Mapping) else cparams)
    if cp.quantize:
        raise ValueError("quantize is not supported when writing Blosc2 frames")
    g = _frame_geometry(arr, chunks, blocks)
    chunks, blocks, itemsize = g.chunkshape, g.blockshape, g.itemsize
    metalayers = [("b2nd", build_nd_meta(g.shape, chunks, blocks, arr.dtype))]
    metalayers += [(str(k), pack_value(v)) for k, v in (meta or {}).items()]
    vl = [(str(k), encode_vlmeta(v, cp)) for k, v in (vlmeta or {}).items()]
    trailer = build_trailer(vl)  # (the limits, checked before anything is written)
    nchunks = g.nchunks
    header_args = dict(
        frame_type=0 if contiguous else 1, typesize=itemsize,
        blocksize=g.block_nbytes if nchunks else 0, chunksize=g.chunk_nbytes if nchunks else 0,
        compcode=COMPCODES[cp.cname], clevel=cp.clevel, has_vlmeta=bool(vl),
        metalayers=metalayers, trailer_len=len(trailer))
    store, key = resolve(path, storage_options)
    _check_target(store, key)
    frame = _FrameBuilder(_ChunkMaker(arr, g, cp), g, cp, header_args, vl)
    if store.remote:
        _put_remote(store, key, frame, contiguous, fsync)
        return
    with staged(store, key, overwrite=True, fsync=fsync) as staging:
        if contiguous:
            _write_cframe(store, staging.tmp, frame, fsync)
        else:
            _write_sframe(store, staging.tmp, frame, fsync)


def _frame_geometry(arr: np.ndarray, chunks: Any, blocks: Any) -> geo.Geometry:
    """The frame's geometry: the given chunk and block shapes, or carray's defaults."""
    itemsize = arr.dtype.itemsize
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
    return g


def _filters_of(chunk: bytes | None, cp: CParams) -> tuple[bytes, bytes]:
    if chunk is None:
        if not cp.single_shuffle:
            pipeline = cp.filters or ()  # never None once a CParams is made
            return (bytes(FILTER_CODES[name] for name, _ in pipeline),
                    bytes(meta for _, meta in pipeline))
        return bytes([int(cp.shuffle or 0)]), b""
    return chunk[16:22], chunk[24:30]


def offsets_chunk(offsets: np.ndarray, cp: CParams) -> bytes:
    """The offsets chunk of a frame: its int64 LE offsets as one Blosc2 chunk (never
    through a lossy filter)."""
    return compress2(offsets.astype("<i8"), 8, cp.lossless)


class _FrameBuilder:
    """The chunks of a frame being written, then its offsets chunk, header and trailer.

    The header holds sizes known only once every chunk is compressed, and the trailer
    the record of their digests (:mod:`._b2frame_digests`), so :meth:`finish` is
    called after :meth:`chunks` is exhausted.
    """

    def __init__(self, make: _ChunkMaker, g: geo.Geometry, cp: CParams,
                 header_args: dict, vlmeta: list[tuple[str, bytes]]) -> None:
        self.make, self.g, self.cp = make, g, cp
        self.header_args, self.vlmeta = header_args, vlmeta
        self.offsets = np.empty(g.nchunks, np.int64)
        self.cbytes = 0
        self._sample: bytes | None = None  # the first stored chunk: its filters go in the header
        self._checksum = get_checksum("adler32")
        self._entries: list[Entry] = []  # per chunk: its digests, or NOT_STORED

    def placeholder(self) -> bytes:
        """A header of the final one's length (its size fields change, not its length)."""
        return build_header(nbytes=0, cbytes=0, filters=b"", filters_meta=b"", data_len=0,
                            **self.header_args)

    def chunks(self, contiguous: bool) -> Iterator[bytes]:
        """The stored chunks in order; all-zero chunks are not stored but marked special.

        A stored chunk's offset is its byte position (contiguous) or file number (sparse).
        """
        stored = 0
        for i, coords in enumerate(np.ndindex(*self.g.grid) if self.g.nchunks else ()):
            chunk = self.make(coords)
            if _is_zero_special(chunk):
                self.offsets[i] = _chunk.special_offset(_chunk.ZERO)
                self._entries.append(NOT_STORED)
                continue
            self._entries.append(ChunkDigests.of(chunk, self._checksum))
            self._sample = self._sample or chunk
            self.offsets[i] = self.cbytes if contiguous else stored
            stored += 1
            self.cbytes += len(chunk)
            yield chunk

    def index(self) -> bytes:
        return offsets_chunk(self.offsets, self.cp) if self.g.nchunks else b""

    def finish(self, data_len: int, index: bytes) -> tuple[bytes, bytes]:
        """``(header, end)`` once every chunk is made; ``data_len`` is what lies between
        them (chunks and offsets chunk), ``end`` the trailer and, after the frame,
        carray's record of digests (the header carries carray's mark)."""
        trailer = build_trailer(list(self.vlmeta))
        args = {**self.header_args, "trailer_len": len(trailer),
                "has_vlmeta": bool(self.vlmeta)}
        filters, filters_meta = _filters_of(self._sample, self.cp)
        header = bytearray(build_header(
            nbytes=self.g.nchunks * self.g.chunk_nbytes, cbytes=self.cbytes, filters=filters,
            filters_meta=filters_meta, data_len=data_len, **args))
        set_mark(header, True)
        record = build_record(self._entries, self._checksum, PAGE_SIZE)
        return bytes(header), trailer + seal(header, index + trailer, record, self._checksum)


def _chunk_file(number: int) -> str:
    return f"{number:08X}.chunk"


def _check_target(store: Store, key: str) -> None:
    if store.isdir(key) and not store.isfile(store.join(key, SPARSE_INDEX)):
        raise ContainerExistsError(f"{store.url(key)} is a directory that is not a sparse "
                                   "frame; refusing to replace it")


def _write_cframe(store: Store, tmp: str, frame: _FrameBuilder, fsync: bool) -> None:
    """Stream a contiguous frame to ``tmp`` behind a placeholder header, then patch it."""
    placeholder = frame.placeholder()
    done = []

    def parts() -> Iterator[bytes]:
        yield placeholder
        yield from frame.chunks(contiguous=True)
        index = frame.index()
        header, trailer = frame.finish(frame.cbytes + len(index), index)
        done.append(header)
        yield index
        yield trailer

    store.put(tmp, parts(), fsync=False)
    header = done[0]
    assert len(header) == len(placeholder)
    with store.open(tmp, "r+") as h:
        h.pwrite(header, 0)
        if fsync:
            h.sync()


def _write_sframe(store: Store, root: str, frame: _FrameBuilder, fsync: bool) -> None:
    """Chunk files, then ``chunks.b2frame`` (which is what makes the directory a frame)."""
    remove_quietly(store, root)
    store.makedirs(root)
    for number, chunk in enumerate(frame.chunks(contiguous=False)):
        store.put(store.join(root, _chunk_file(number)), chunk, fsync=fsync)
    index = frame.index()
    header, trailer = frame.finish(len(index), index)
    store.put(store.join(root, SPARSE_INDEX), [header, index, trailer], fsync=fsync)


def _put_remote(store: Store, key: str, frame: _FrameBuilder, contiguous: bool,
                fsync: bool) -> None:
    if contiguous:
        # One put is atomic on an object store; the header needs every chunk's size first.
        body = list(frame.chunks(contiguous=True))
        index = frame.index()
        header, trailer = frame.finish(frame.cbytes + len(index), index)
        if store.isdir(key):  # a sparse frame (checked) the new file replaces
            store.rmtree(key)
        store.put(key, [header, *body, index, trailer], fsync=fsync)
        return
    try:
        _write_sframe(store, key, frame, fsync)
    except BaseException:
        remove_quietly(store, key)
        raise
