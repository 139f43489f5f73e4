"""Chunks moved between arrays as their stored (compressed) bytes.

Two arrays whose chunks mean the same bytes (same dtype, chunk and block shapes,
codec parameters and Blosc chunk format) can hand each other stored chunks
without decoding them: a copy, a concatenation or an append then costs about
what copying the files costs.  :class:`StoredChunks` is an array's read side
(its stored chunks, checked by their digests as every read is; or a chunk's
items decoded where bytes cannot move), :class:`ChunkSink` the write side (new
whole chunks after the stored rows, compressed here or handed over as bytes,
all under one transaction of the writer).

Whether bytes may move is decided by :meth:`ChunkFormat.move_refused`; which chunks
move is the caller's plan (:mod:`carray.array.transfer`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from carray.chunks.grid import NDGrid, deblock
from carray.chunks.io import ChunkIO
from carray.codecs import blosc
from carray.codecs.blosc import ChunkBytes
from carray.core.params import CParams
from carray.engine.description import ArrayDescription
from carray.engine.writer import Writer
from carray.errors import FormatError
from carray.layouts.base import Layout


@dataclass(frozen=True)
class ChunkFormat:
    """What the stored bytes of an array's chunks mean.

    Attributes
    ----------
    dtype, chunks, blocks, cparams, order
        As the array's description holds them (``chunks`` in stored axis order).
    blosc1 : bool
        Chunks are Blosc1 buffers (bcolz directories), else Blosc2.
    truncates : bool
        A chunk of the last, partial run of rows holds only its rows; else it is
        stored at its full, padded size.
    blocked : bool
        Chunks hold their items block after block, in an order other than C order.
    block_nbytes : int or None
        The Blosc block size every chunk must have (None: any; Blosc chose it).
    chunk_nbytes : int
        Decoded bytes of a whole stored chunk: the chunk shape rounded up to whole
        blocks where the format pads chunks so.
    """

    dtype: np.dtype
    chunks: tuple[int, ...]
    blocks: tuple[int, ...] | None
    cparams: CParams
    order: str
    blosc1: bool
    truncates: bool
    blocked: bool
    block_nbytes: int | None
    chunk_nbytes: int

    def move_refused(self, target: ChunkFormat) -> str | None:
        """Why chunks stored in this format cannot be stored as they are by an array of
        format ``target`` (None: they can, given that each chunk's Blosc block size is
        one ``target`` takes: see :meth:`takes_blocksize`)."""
        if self.dtype != target.dtype:
            return f"dtype {self.dtype} -> {target.dtype}"
        if self.order != target.order:
            return f"order {self.order} -> {target.order}"
        if self.chunks != target.chunks:
            return f"chunks {self.chunks} -> {target.chunks}"
        if (self.blocked or target.blocked) and self.blocks != target.blocks:
            return f"blocks {self.blocks} -> {target.blocks}"
        if self.chunk_nbytes != target.chunk_nbytes:
            return (f"a chunk holds {self.chunk_nbytes} -> {target.chunk_nbytes} bytes "
                    "(padded to whole blocks)")
        if self.blosc1 != target.blosc1:
            names = {True: "Blosc1", False: "Blosc2"}
            return f"chunk format {names[self.blosc1]} -> {names[target.blosc1]}"
        if _codec(self.cparams) != _codec(target.cparams):
            return "compression parameters differ"
        return None

    def takes_blocksize(self, blocksize: int) -> bool:
        """Whether a chunk whose Blosc blocks are ``blocksize`` bytes may be stored."""
        return self.block_nbytes is None or blocksize == self.block_nbytes


def _codec(cparams: CParams) -> tuple[object, ...]:
    """What of the compression parameters the stored bytes depend on."""
    return (cparams.cname, cparams.clevel, cparams.shuffle, cparams.filters,
            cparams.quantize)


def _format(layout: Layout, io: ChunkIO, d: ArrayDescription, grid: NDGrid) -> ChunkFormat:
    return ChunkFormat(d.dtype, tuple(d.chunks), d.blocks, d.cparams, d.order,
                       bool(layout.blosc1), io.truncates(grid), io.blocked(grid),
                       None if d.blocks is None else grid.block_nbytes, grid.chunk_nbytes)


class StoredChunks:
    """An array's chunks to move elsewhere: their stored bytes, or their items.

    Safe to use from several threads at once (reads go through :class:`ChunkIO`);
    the array must not change meanwhile.
    """

    def __init__(self, layout: Layout, io: ChunkIO, writer: Writer,
                 description: ArrayDescription) -> None:
        writer.settle()
        self._layout, self._io, self._w, self._d = layout, io, writer, description
        self._grid = writer.grid
        self.format = _format(layout, io, description, self._grid)

    @property
    def grid(self) -> NDGrid:
        """The chunk grid of the array's stored shape."""
        return self._grid

    def refused(self, target: ChunkFormat) -> str | None:
        """Why these chunks cannot be stored as they are in format ``target`` (None:
        they can)."""
        return self.format.move_refused(target)

    def _in_tail(self, nchunk: int) -> bool:
        w = self._w
        return w.nleft > 0 and nchunk >= w.nfull * w.per_row and w.tail is not None

    def stored(self, nchunk: int) -> tuple[ChunkBytes, int | None] | None:
        """Chunk ``nchunk`` as stored, checked (its digest where the layout keeps one,
        its Blosc header always), and the size of its Blosc blocks (None: a special
        chunk, one value repeated); None when its items are not stored yet (a tail
        held decoded)."""
        if self._in_tail(nchunk) and self._w.tail_unstored:
            return None
        special = self._layout.special_chunk(nchunk)
        if special is not None:
            return special, None
        data = self._layout.read_chunk(nchunk) if self._layout.concurrent_reads else \
            bytes(self._io.fetch(nchunk))
        path = self._layout.chunk_path(nchunk)
        h = blosc.read_header(data, path, size=len(data))
        if h.cbytes != len(data) or h.nbytes > self._grid.chunk_nbytes or \
                h.nbytes % max(self._d.dtype.itemsize, 1):
            raise FormatError(f"chunk {nchunk}: a Blosc header of {h.cbytes} compressed, "
                              f"{h.nbytes} decoded bytes in {len(data)} stored bytes of a "
                              f"chunk of {self._grid.chunk_nbytes} bytes", path)
        return data, h.blocksize

    def region(self, nchunk: int) -> np.ndarray:
        """The items of chunk ``nchunk`` inside the array (its valid shape), decoded."""
        grid, coords = self._grid, self._grid.chunk_coords(nchunk)
        valid = grid.valid_shape(coords)
        if self._in_tail(nchunk):
            return np.array(self._w.tail_view(coords)[tuple(slice(0, v) for v in valid)])
        value = self._io.fill_of(nchunk)
        if value is not None:
            return np.full(valid, value, dtype=self._d.dtype)
        raw = self._io.decoded(nchunk, grid)
        chunk = deblock(raw, grid) if self._io.blocked(grid) else raw.reshape(grid.ext_chunks)
        return chunk[tuple(slice(0, v) for v in valid)]


class ChunkSink:
    """Whole chunks appended to an array after its stored rows, from bytes or items.

    The array's rows must end on a run of whole chunks (no partial tail).  The
    compressing and digest methods are safe from worker threads; :meth:`append`
    stores, in chunk order, under one transaction (all or nothing).
    """

    def __init__(self, layout: Layout, io: ChunkIO, writer: Writer,
                 description: ArrayDescription, changed: Callable[[], None]) -> None:
        writer.settle()
        self._changed = changed  # the engine notes unflushed changes
        if writer.nleft:
            raise ValueError(f"{layout.describe()}: chunks are appended after whole runs "
                             f"of rows only ({writer.nleft} rows of a partial run stored)")
        self._layout, self._io, self._w, self._d = layout, io, writer, description
        self.format = _format(layout, io, description, writer.grid)

    @property
    def length(self) -> int:
        """Rows stored so far (a multiple of the chunk length)."""
        return self._w.shape[0]

    def grid(self, rows: int) -> NDGrid:
        """The chunk grid once ``rows`` more rows are appended."""
        shape = self._w.shape
        return self._w.grid.with_shape((shape[0] + rows, *shape[1:]))

    def digest(self, data: ChunkBytes) -> bytes | None:
        """The layout's digest of chunk bytes ``data`` (from any thread)."""
        return self._layout.chunk_digest(data)  # type: ignore[arg-type]

    def encode(self, region: np.ndarray, grid: NDGrid, on_worker: bool = True) -> bytes:
        """Compress a chunk of ``grid`` from its items ``region`` (its valid shape).

        ``on_worker``: on a worker thread, one of several compressing at once.
        Blosc1 chunks (bcolz) are compressed one at a time on Blosc's own threads,
        since their block size is process-wide state.
        """
        ext = grid.ext_chunks
        rows = region.shape[0] if region.shape[0] < ext[0] else None
        raw = self._io.stored_from_region(region, grid, rows)
        if on_worker and not self._layout.blosc1:
            return self._io.encode_on_worker(raw, grid)
        return self._io.encode(raw, grid)

    def append(self, rows: int, chunks: Iterable[tuple[int, ChunkBytes, bytes | None]]) -> int:
        """Store ``(nchunk, data, digest)`` for every chunk of ``rows`` more rows, in
        chunk order (``digest``: :meth:`digest` of ``data``, or None to work it out
        here), then take the rows as the array's; returns the chunks stored.

        On any error, every chunk stored here is dropped and the array is as before.
        """
        first = self._w.nfull * self._w.per_row
        expect = self.grid(rows).nchunks
        try:
            self._store(rows, chunks, first, expect)
        finally:
            self._changed()
        return expect - first

    def _store(self, rows: int, chunks: Iterable[tuple[int, ChunkBytes, bytes | None]],
               first: int, expect: int) -> None:
        w, count = self._w, 0
        with w.transaction():
            for nchunk, data, digest in chunks:
                if nchunk != first + count:
                    raise ValueError(f"chunk {nchunk} given where chunk {first + count} "
                                     "comes next")
                w.store_moved(nchunk, data, digest)
                count += 1
            if first + count != expect:
                raise ValueError(f"{rows} rows need {expect - first} chunks, got {count}")
            w.extend_rows(rows)

