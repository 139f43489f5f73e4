"""Pieces of the b2nd layout: telling frames apart, sparse chunk files, the
``carray`` metalayer and the frame-header cparams.

Facts relied on (docs/formats/b2frame.md, "Header" and "vlmeta"): a metalayer's
value can be rewritten in place only at its original length, so every field
here is fixed-width for a given dtype; python-blosc2 decodes metalayers it
knows with msgpack and ignores the others; the frame header's codec byte holds
the compcode (low nibble) and clevel (high nibble), its six filter slots the
pipeline (python-blosc2 puts the shuffle in the last one, with filters_meta 4
for ``U`` dtypes).
"""

from __future__ import annotations

import os
import struct
import weakref
from typing import Any

import msgpack
import numpy as np

from carray.chunks.geometry import CATERVA_MAX_DIM
from carray.chunks.grid import NDGrid
from carray.codecs.checksums import get_checksum
from carray.codecs.pages import PAGE_SIZE
from carray.core.dtypes import checked_dtype
from carray.core.params import FILTER_CODES, CParams, Shuffle
from carray.errors import FormatError
from carray.layouts.b2nd import chunk as _chunk
from carray.layouts.b2nd.digests import NOT_STORED, build_record, seal, set_mark
from carray.layouts.b2nd.header import (
    MAGIC,
    SPARSE_INDEX,
    build_header,
    build_nd_meta,
    build_trailer,
    dtype_string,
)
from carray.layouts.b2nd.write import COMPCODES, offsets_chunk
from carray.layouts.base import ArrayMeta
from carray.stores import LOCAL, Store

#: Name of our own metalayer: ``{"version": 1, "dflt": <item bytes>, "expectedlen":
#: int64, "cbytes": int64}``.
CARRAY_META = "carray"
_CNAMES = {code: name for name, code in COMPCODES.items()}
_FILTER_NAMES = {code: name for name, code in FILTER_CODES.items()}


def _dflt_bytes(dtype: np.dtype, dflt: Any) -> bytes:
    value = np.zeros((), dtype) if dflt is None else np.array(dflt, dtype=dtype).reshape(())
    return value.tobytes()


def carray_meta(dtype: np.dtype, dflt: Any, expectedlen: int, cbytes: int,
                with_dtype: bool = False) -> bytes:
    """The ``carray`` metalayer: a msgpack map whose length depends only on ``dtype``.

    ``with_dtype`` adds a ``dtype`` entry (the b2nd dtype string), for caterva
    frames, whose own metalayer records only the item size.
    """
    out = bytearray(b"\x85" if with_dtype else b"\x84")
    out += msgpack.packb("version") + b"\x01"
    if with_dtype:
        out += msgpack.packb("dtype") + msgpack.packb(dtype_string(dtype))
    out += msgpack.packb("dflt") + msgpack.packb(_dflt_bytes(dtype, dflt), use_bin_type=True)
    for key, value in (("expectedlen", expectedlen), ("cbytes", cbytes)):
        # int64 always (D3), never msgpack's shortest form: the length must not change.
        out += msgpack.packb(key) + b"\xd3" + struct.pack(">q", max(int(value), 0))
    return bytes(out)


def recorded_dtype(raw: bytes, dtype: np.dtype, path: str, offset: int) -> np.dtype:
    """The dtype a ``carray`` metalayer records (caterva frames we made), else ``dtype``.

    Raises
    ------
    FormatError
        The recorded dtype is not a string, or its items are not ``dtype``'s size.
    """
    try:
        obj = msgpack.unpackb(raw, raw=False, strict_map_key=False)
    except (ValueError, msgpack.UnpackException, TypeError, RecursionError):
        return dtype  # parse_carray_meta says what is wrong
    if not isinstance(obj, dict) or "dtype" not in obj:
        return dtype
    text = obj["dtype"]
    if not isinstance(text, str):
        raise FormatError(f"{CARRAY_META} metalayer: dtype {text!r} is not a string", path,
                          offset)
    found = checked_dtype(text, source=f"{path} ({CARRAY_META} metalayer at offset {offset})")
    if found.itemsize != dtype.itemsize:
        raise FormatError(f"{CARRAY_META} metalayer: dtype {text} has {found.itemsize}-byte "
                          f"items, the frame {dtype.itemsize}", path, offset)
    return found


def nd_layer(kind: str, shape: tuple[int, ...], chunks: tuple[int, ...],
             blocks: tuple[int, ...], dtype: np.dtype) -> tuple[str, bytes]:
    """The N-d metalayer of a new frame: ``b2nd`` (python-blosc2's, with the dtype) or
    ``caterva`` (caterva 0.7's: no dtype, at most 8 dimensions).

    Raises
    ------
    ValueError
        An unknown kind, or too many dimensions for a caterva frame.
    """
    if kind not in ("b2nd", "caterva"):
        raise ValueError(f"a Blosc2 frame's N-d metalayer is 'b2nd' or 'caterva', not {kind!r}")
    if kind == "caterva" and len(shape) > CATERVA_MAX_DIM:
        raise ValueError(f"caterva frames hold at most {CATERVA_MAX_DIM} dimensions, "
                         f"not {len(shape)}")
    return kind, build_nd_meta(shape, chunks, blocks, dtype if kind == "b2nd" else None)


def parse_carray_meta(raw: bytes, dtype: np.dtype, path: str,
                      offset: int) -> tuple[np.ndarray, int, int]:
    """``(dflt, expectedlen, cbytes)`` from a ``carray`` metalayer.

    Raises
    ------
    FormatError
        Not a map, a dflt that is not one item, or sizes that are not ints >= 0.
    """
    try:
        obj = msgpack.unpackb(raw, raw=False, strict_map_key=False)
    except (ValueError, msgpack.UnpackException, TypeError, RecursionError):
        obj = None
    if not isinstance(obj, dict):
        raise FormatError(f"{CARRAY_META} metalayer is not a msgpack map", path, offset)
    dflt = obj.get("dflt")
    if not isinstance(dflt, bytes) or len(dflt) != dtype.itemsize:
        raise FormatError(f"{CARRAY_META} metalayer: dflt is not {dtype.itemsize} bytes",
                          path, offset)
    counts = []
    for name in ("expectedlen", "cbytes"):
        v = obj.get(name)
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise FormatError(f"{CARRAY_META} metalayer: {name} {v!r} is not an int >= 0",
                              path, offset)
        counts.append(v)
    return np.frombuffer(dflt, dtype=dtype).reshape(()).copy(), counts[0], counts[1]


def header_filters(dtype: np.dtype, cp: CParams) -> tuple[bytes, bytes]:
    """The frame header's six filters and filters_meta for new frames."""
    # python-blosc2's default pipeline puts the shuffle in the last slot; U dtypes
    # shuffle 4-byte code units (filters_meta 4).
    if not cp.single_shuffle:
        # A longer pipeline fills the slots from the first, as python-blosc2 stores
        # a filters list it is given.
        pipeline = cp.filters or ()  # never None once a CParams is made
        return (bytes(FILTER_CODES[name] for name, _ in pipeline).ljust(6, b"\0"),
                bytes(meta for _, meta in pipeline).ljust(6, b"\0"))
    meta = 4 if dtype.kind == "U" and cp.shuffle == Shuffle.SHUFFLE else 0
    return bytes([0, 0, 0, 0, 0, int(cp.shuffle or 0)]), bytes([0, 0, 0, 0, 0, meta])


def cparams_of(compcode: int, clevel: int, filters: tuple[int, ...],
               filters_meta: tuple[int, ...] = ()) -> CParams:
    """The compression parameters a frame header records, for the chunks we write into it.

    Filters of the pipeline that carray cannot apply itself (NDCELL, NDMEAN,
    plugins) are left out: chunks already stored keep theirs in their own
    headers, and new chunks are written without them.
    """
    # A codec this build lacks (a plugin) only matters for the chunks we write
    # ourselves (offsets, vlmeta); the caller's chunks say their own codec.
    metas = tuple(filters_meta) + (0,) * (len(filters) - len(filters_meta))
    pipeline = tuple(
        (_FILTER_NAMES[code], meta if code == FILTER_CODES["trunc_prec"] else 0)
        for code, meta in zip(filters, metas, strict=True) if code in _FILTER_NAMES)
    if not any(name == "trunc_prec" and not 1 <= meta <= 64 for name, meta in pipeline):
        return CParams(clevel=min(clevel, 9), cname=_CNAMES.get(compcode, CParams().cname),
                       filters=pipeline)
    shuffle = next((f for f in reversed(filters) if f in (1, 2)), 0)
    return CParams(clevel=min(clevel, 9), cname=_CNAMES.get(compcode, CParams().cname),
                   shuffle=Shuffle(shuffle))


def is_b2nd_frame(path: str | os.PathLike[str], store: Store = LOCAL) -> bool:
    """True for a Blosc2 frame file (by its magic) or a sparse frame directory."""
    path = os.fspath(path)
    if store.isdir(path):
        return store.isfile(store.join(path, SPARSE_INDEX))
    try:
        with store.open(path) as h:
            return h.pread(len(MAGIC), 0) == MAGIC
    except OSError:
        return False


def chunk_file_name(number: int) -> str:
    """The name of sparse chunk file ``number`` (``%08X.chunk``, c-blosc2's spelling)."""
    return f"{number:08X}.chunk"


class _ChunkFile:
    """Ranged reads of one sparse chunk file through a handle of its own.

    The handle lives as long as the reader, so on a local disk a chunk replaced
    (and its file deleted) meanwhile still reads as it was.
    """

    def __init__(self, store: Store, name: str) -> None:
        self._h = store.open(name)
        weakref.finalize(self, self._h.close)
        self.size = self._h.size

    def __call__(self, offset: int, length: int) -> bytes:
        offset = max(0, min(offset, self.size))
        return self._h.pread(max(0, min(length, self.size - offset)), offset)

    def read_into(self, offset: int, out: Any) -> int:
        view = memoryview(out).cast("B")[:max(0, self.size - offset)]
        return self._h.pread_into(view, offset)


def new_frame_parts(meta: ArrayMeta, grid: NDGrid, contiguous: bool,
                    kind: str) -> tuple[bytes, bytes, bytes]:
    """``(header, offsets chunk, end)`` of a new frame of ``meta`` whose chunks are all
    zeros (not stored), with our ``carray`` metalayer: ``end`` is the trailer and, after
    the frame, the record of digests (:mod:`carray.layouts.b2nd.digests`)."""
    dtype = np.dtype(meta.dtype)
    cp = meta.cparams
    n = grid.nchunks
    index = offsets_chunk(np.full(n, _chunk.special_offset(_chunk.ZERO), np.int64), cp) if n else b""
    checksum = get_checksum("adler32")
    trailer = build_trailer([])
    filters, filters_meta = header_filters(dtype, cp)
    layers = [nd_layer(kind, grid.shape, grid.chunks, grid.blocks, dtype),
              (CARRAY_META, carray_meta(dtype, meta.dflt, meta.expectedlen, 0,
                                        with_dtype=kind == "caterva"))]
    header = build_header(
        frame_type=0 if contiguous else 1, nbytes=n * grid.chunk_nbytes, cbytes=0,
        typesize=dtype.itemsize, blocksize=grid.block_nbytes, chunksize=grid.chunk_nbytes,
        compcode=COMPCODES[cp.cname], clevel=cp.clevel, filters=filters,
        filters_meta=filters_meta, has_vlmeta=False, metalayers=layers,
        data_len=len(index), trailer_len=len(trailer))
    marked = bytearray(header)
    set_mark(marked, True)
    record = build_record([NOT_STORED] * n, checksum, PAGE_SIZE)
    return bytes(marked), index, trailer + seal(marked, index + trailer, record, checksum)
