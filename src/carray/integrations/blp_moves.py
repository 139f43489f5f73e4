"""Bloscpack files whose chunks are whole rows of an array, moved into carrays as bytes.

A Bloscpack file holding a numpy array (``container: numpy`` metadata, C order)
stores it as Blosc1 chunks of ``chunk_size`` bytes each, the last one holding
what is left: when ``chunk_size`` is a whole number of rows, those are the bytes a
bcolz chunk of that many rows holds (and bcolz truncates its last chunk the same
way), so they move into bcolz directories without being decoded.  Each moved
chunk is checked by the file's checksum (when it keeps one) and its Blosc header.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from typing import Any

import numpy as np

from carray import registry
from carray.array import transfer
from carray.chunks.grid import NDGrid
from carray.codecs import blosc
from carray.codecs import parallel as _parallel
from carray.core.params import CParams
from carray.engine.moves import ChunkFormat
from carray.errors import ChecksumError, FormatError
from carray.formats.bloscpack.chunks import write_chunks
from carray.formats.bloscpack.frame import array_spec
from carray.formats.bloscpack.read import BlpFile, ChunkSpan


class BlpChunks:
    """A Bloscpack array file's chunks, with the interface of
    :class:`carray.engine.moves.StoredChunks`."""

    def __init__(self, f: BlpFile, spans: list[ChunkSpan], dtype: np.dtype,
                 shape: tuple[int, ...], rows: int, cparams: CParams, checksum: Any) -> None:
        self._f, self._spans, self._dtype, self._ck = f, spans, dtype, checksum
        chunks = (rows, *(max(n, 1) for n in shape[1:]))
        self.grid = NDGrid(shape, chunks, chunks, max(dtype.itemsize, 1))
        self.format = ChunkFormat(dtype, chunks, None, cparams, "C", True, True, False, None,
                                  self.grid.chunk_nbytes)

    def refused(self, target: ChunkFormat) -> str | None:
        return self.format.move_refused(target)

    def _read(self, nchunk: int) -> tuple[bytes, ChunkSpan]:
        s = self._spans[nchunk]
        dsize = self._ck.size
        raw = self._f.pread(s.cbytes + dsize, s.offset, f"chunk {s.index}")
        chunk = raw[:s.cbytes]
        if dsize and self._ck.digest(chunk) != raw[s.cbytes:]:
            raise ChecksumError(f"chunk {s.index}: {self._ck.name} checksum mismatch",
                                self._f.path, s.offset)
        return chunk, s

    def stored(self, nchunk: int) -> tuple[bytes, int | None] | None:
        chunk, s = self._read(nchunk)
        h = blosc.read_header(chunk, self._f.path, s.offset, size=len(chunk))
        if h.typesize != blosc.blosc_typesize(self._dtype):
            raise FormatError(f"chunk {s.index}: Blosc type size {h.typesize} for items of "
                              f"{self._dtype.itemsize} bytes", self._f.path, s.offset)
        return chunk, h.blocksize

    def region(self, nchunk: int) -> np.ndarray:
        chunk, s = self._read(nchunk)
        valid = self.grid.valid_shape(self.grid.chunk_coords(nchunk))
        out = np.empty(valid, dtype=self._dtype)
        self._f.decode(chunk, out.reshape(-1).view(np.uint8), s)
        return out


class BlpSource:
    """A Bloscpack array file as a source of :func:`carray.array.transfer.fill`."""

    order = "C"

    def __init__(self, f: BlpFile, chunks: BlpChunks, values: Any) -> None:
        self._f, self._chunks, self._values = f, chunks, values
        self.shape, self.dtype = chunks.grid.shape, chunks.format.dtype
        self.ndim, self.nchunks = len(self.shape), chunks.grid.nchunks

    @property
    def chunks(self) -> tuple[int, ...]:
        return self._chunks.grid.chunks

    blocks = None

    def chunk_source(self) -> BlpChunks:
        return self._chunks

    def __getitem__(self, key: Any) -> Any:
        return self._values[key]

    def close(self) -> None:
        self._f.__exit__(None, None, None)


def source_of(values: Any, location: str, storage_options: dict | None) -> BlpSource | None:
    """The Bloscpack file at ``location`` (whose items :func:`carray.integrations.convert.open_array`
    gave as ``values``) as a source whose chunks may move; None when it is not a
    Bloscpack file of a C-ordered array chunked by whole rows."""
    if not location or os.path.splitext(location.rstrip("/"))[1].lower() != ".blp" or \
            registry.guess(location, storage_options).name != "bloscpack":
        return None
    f = BlpFile(location, storage_options)
    try:
        lay = f.layout(verify=True)
        spans = f.spans(lay)
        dtype, shape, order = array_spec(lay.metadata, f.path)
        rowbytes = math.prod(shape[1:]) * dtype.itemsize
        size = lay.header.chunk_size
        if order != "C" or not shape or rowbytes == 0 or size <= 0 or size % rowbytes or \
                dtype.hasobject or len(spans) != -(-shape[0] // (size // rowbytes)):
            f.__exit__(None, None, None)
            return None
        cparams = registry.file_cparams(location, storage_options) or CParams()
        chunks = BlpChunks(f, spans, dtype, tuple(shape), size // rowbytes, cparams,
                           lay.header.checksum_impl)
    except BaseException:
        f.__exit__(None, None, None)
        raise
    return BlpSource(f, chunks, values)


def copy_to_blp(source: Any, location: str, chunklen: int | None, cparams: CParams | None,
                storage_options: dict | None) -> transfer.MoveStats:
    """Write ``source`` (a carray, or any array sliced by rows) as a new Bloscpack file
    at ``location``, a run of ``chunklen`` rows per chunk (default: the source's chunk
    length).  A bcolz directory's chunks (Blosc1, runs of whole rows) move as bytes
    when the codec and chunk length agree; everything else is decoded a run at a time
    and compressed again as Blosc1 chunks."""
    shape, dtype = tuple(source.shape), np.dtype(source.dtype)
    if not shape:
        raise ValueError("a 0-d array has no rows to pack")
    stored = source.engine.chunk_source() if hasattr(source, "engine") and \
        source.order == "C" else None
    own = stored.format if stored is not None else None
    run = chunklen or (own.chunks[0] if own is not None else
                       max(1, (1 << 20) // max(math.prod(shape[1:]) * dtype.itemsize, 1)))
    cparams = cparams or (own.cparams if own is not None else CParams())
    rows = (run, *(max(n, 1) for n in shape[1:]))
    target = ChunkFormat(dtype, rows, None, cparams, "C", True, True, False, None,
                         math.prod(rows) * max(dtype.itemsize, 1))
    why = "no carray chunks" if own is None else own.move_refused(target)
    stats = transfer.MoveStats()
    rowbytes = math.prod(shape[1:]) * dtype.itemsize

    def work(start: int) -> tuple[Any, str | None]:
        if why is None:
            assert stored is not None
            got = stored.stored(start // run)
            if got is not None:
                return bytes(got[0]), None
        return np.ascontiguousarray(source[start:start + run], dtype=dtype), \
            why or "not stored as a chunk (rows held decoded)"

    def chunks() -> Iterator[bytes]:
        for data, reason in _parallel.pipeline(work, range(0, max(shape[0], 1), run)):
            if reason is None:
                stats.moved += 1
                yield data
            else:
                stats.decoded += 1
                stats.reasons[reason] += 1
                yield blosc.compress1(data, blosc.blosc_typesize(dtype), cparams)

    write_chunks(location, dtype, shape, max(run * rowbytes, 1), chunks(),
                 storage_options=storage_options)
    return stats
