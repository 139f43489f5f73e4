"""Moving items between numpy arrays and the compressed chunks a layout stores.

A stored chunk is a Blosc buffer holding the chunk's extended shape (see
:mod:`carray.chunks.grid`) in *stored order*: block after block when the array has a
block shape, plain C order otherwise.  Two exceptions, both legal to read:

* in layouts that do not pad (everything but Blosc2 frames), a C-ordered chunk
  of the last, partial run of rows holds only the rows written so far;
* a chunk written by another library may use other Blosc block sizes; reads
  then decode it whole.

Reads decode as little as they can: a piece that is one contiguous run of a
C-ordered chunk and of the output is decoded straight into the output; other
pieces decode only the byte range (C order) or the blocks (block order) they
touch, fetching from disk only the bytes those need.  Everything here is safe
to call from several threads at once (each has its own decoder and scratch).
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import partial
from typing import Any, Protocol

import numpy as np

from carray.chunks import geometry as geo
from carray.chunks.grid import (
    NDGrid,
    Piece,
    c_bounds,
    c_run,
    gather,
    gather_blocked,
    outer_index,
    scatter,
    scatter_blocked,
)
from carray.codecs import blosc, ranged
from carray.codecs import parallel as _parallel
from carray.codecs.fill import fill_chunk, special_item
from carray.codecs.pipeline import decode_error
from carray.core.params import CParams
from carray.core.util import quantize
from carray.errors import CArrayError, FormatError

# A piece needing more than this share of its chunk decodes the chunk whole.
_WHOLE_SHARE = 0.5
_BLOSC1_LOCK = threading.Lock()

# Chunks smaller than this are compressed on the calling thread alone.
_THREADED_CHUNK = 512 * 2**10


class ChunkReader:
    """Ranged reads of one stored chunk of ``size`` bytes: ``reader(offset, length)``.

    ``read(offset, length)`` returns the bytes (fewer only past the end);
    ``read_into(offset, out)`` fills a writable buffer instead, which layouts
    reading files do without an intermediate copy.
    """

    def __init__(self, size: int, read: Callable[[int, int], bytes],
                 read_into: Callable[[int, Any], int] | None = None,
                 memo: dict | None = None) -> None:
        self.size = size
        self.read = read
        self._read_into = read_into
        #: Where a decoder may keep what it parsed from this chunk (header, block
        #: table) for the next read of the same chunk; None when not kept.
        self.memo = memo

    def __call__(self, offset: int, length: int) -> bytes:
        return self.read(offset, length)

    def read_into(self, offset: int, out: Any) -> int:
        """Fill ``out`` from ``offset``; returns the bytes read."""
        if self._read_into is not None:
            return self._read_into(offset, out)
        data = self.read(offset, len(out))
        memoryview(out).cast("B")[:len(data)] = data
        return len(data)



class ChunkSource(Protocol):
    """Where a :class:`ChunkIO` finds stored chunks: a layout, or a frame being read."""

    blosc1: bool
    in_memory: bool
    concurrent_reads: bool
    pads_edges: bool

    def read_chunk(self, nchunk: int) -> Any: ...

    def read_chunk_into(self, nchunk: int, scratch: Callable[[int], np.ndarray]) -> Any: ...

    def chunk_reader(self, nchunk: int) -> tuple[Any, int]: ...

    def chunk_path(self, nchunk: int) -> str | None: ...

    def special_chunk(self, nchunk: int) -> bytes | None: ...


class ChunkIO:
    """Encodes, stores, fetches and decodes the chunks of one array.

    Parameters
    ----------
    layout : Layout
        Where the chunks live.
    dtype : numpy.dtype
        Item type.
    blocks : tuple of int or None
        The array's block shape (None: chunks in C order, Blosc's own blocks).
    cparams : CParams
        How chunks are compressed.
    fill : numpy.ndarray, optional
        The array's fill value (0-d): a chunk holding only it is encoded as a
        Blosc2 special chunk (layouts record those without storing them) and
        padding is filled with it.  None: chunks are always compressed.
    """

    def __init__(self, layout: ChunkSource, dtype: np.dtype, blocks: tuple[int, ...] | None,
                 cparams: CParams, fill: np.ndarray | None = None) -> None:
        self.layout = layout
        self.dtype = dtype
        self.blocks = blocks
        self.cparams = cparams
        self.itemsize = max(dtype.itemsize, 1)
        self.typesize = blosc.blosc_typesize(dtype)
        self._blocked: dict[tuple[int, ...], bool] = {}
        self.fill = None if fill is None else np.asarray(fill, dtype=dtype).reshape(())
        # Special chunks are Blosc2: layouts that need Blosc1 chunks get real ones.
        self._lazy = self.fill is not None and not layout.blosc1 and dtype.itemsize > 0 \
            and not dtype.hasobject
        self._fill_values: dict[bytes, np.ndarray] = {}

    def blocked(self, grid: NDGrid) -> bool:
        """Whether stored chunks are in block order that differs from C order."""
        ext = grid.ext_chunks
        known = self._blocked.get(ext)
        if known is None:
            known = self._blocked[ext] = self.blocks is not None and \
                not geo.blocked_is_c_order(ext, self.blocks)
        return known

    def truncates(self, grid: NDGrid) -> bool:
        """Whether the last partial run of rows is stored with only its rows."""
        return not self.layout.pads_edges and not self.blocked(grid)

    def path(self, nchunk: int) -> _ChunkPath:
        """Where chunk ``nchunk`` lives, for messages (worked out only if one is made)."""
        return _ChunkPath(self.layout, nchunk)

    # -- encoding -------------------------------------------------------------------------

    def encode(self, raw: np.ndarray, grid: NDGrid, nthreads: int | None = None,
               scratch: Callable[[int], np.ndarray] | None = None) -> bytes:
        """Compress a chunk already in stored order (flat, or any C-contiguous shape).

        ``nthreads``: Blosc threads for this chunk (default: the process-wide count);
        ``scratch(nbytes)``: a byte buffer to compress into, where the codec can use one.
        """
        if self._lazy and self.is_fill(raw):
            special = self.fill_chunk(grid)
            if special is not None:
                return special
        data = raw
        if self.cparams.quantize and self.dtype.kind == "f":
            data = quantize(data, self.cparams.quantize)
        if self.layout.blosc1:
            return blosc.compress1(data, self.typesize, self.cparams)
        blocksize = grid.block_nbytes if self.blocks is not None else None
        if nthreads is None and data.nbytes < _THREADED_CHUNK:
            nthreads = 1  # waking Blosc's threads costs more than a small chunk takes
        return blosc.compress2(data, self.typesize, self.cparams, blocksize=blocksize,
                               nthreads=nthreads, scratch=scratch)

    def encode_all(self, chunks: Iterable[tuple[int, np.ndarray]], grid: NDGrid,
                   parallel: bool = True,
                   summarise: Callable[[int, np.ndarray], Any] | None = None,
                   digest: Callable[[bytes], bytes | None] | None = None
                   ) -> Iterator[tuple[int, np.ndarray, bytes, Any, bytes | None]]:
        """``(nchunk, raw, compressed, summarise(nchunk, raw), digest(compressed))`` (None for
        either when not given) for every ``(nchunk, raw)``, in order.

        With ``parallel``, several chunks are compressed (summarised, digested) at once on
        worker threads, each on a single-threaded Blosc context (no meeting of
        Blosc's threads at the end of every chunk), while the caller stores the ones
        already done; a few chunks are in flight at most
        (:func:`carray.codecs.parallel.pipeline`).
        """
        def encode(item: tuple[int, np.ndarray]
                   ) -> tuple[int, np.ndarray, bytes, Any, bytes | None]:
            nchunk, raw = item
            summary = summarise(nchunk, raw) if summarise is not None else None
            if not parallel:
                return nchunk, raw, self.encode(raw, grid), summary, None
            data = self.encode_on_worker(raw, grid)
            return nchunk, raw, data, summary, digest(data) if digest is not None else None

        if not parallel:
            yield from map(encode, chunks)
            return
        yield from _parallel.pipeline(encode, chunks)

    def encode_on_worker(self, raw: np.ndarray, grid: NDGrid) -> bytes:
        """:meth:`encode` on a worker thread, one of several compressing at once (each
        on its own single-threaded Blosc context, into the thread's scratch buffer:
        only the compressed bytes are new)."""
        if self.layout.blosc1:
            # c-blosc 1.x takes the block size from process-wide state: one at a time.
            with _BLOSC1_LOCK:
                return self.encode(raw, grid)
        return self.encode(raw, grid, nthreads=1, scratch=_encode_scratch)

    # -- fill chunks ----------------------------------------------------------------------

    def is_fill(self, raw: np.ndarray) -> bool:
        """Whether every item of ``raw`` (a chunk in stored order) is the fill value,
        bit for bit (so a NaN fill matches, and -0.0 is not 0.0)."""
        fill = self.fill
        if fill is None or raw.size == 0:
            return False
        if _repeats(raw):
            raw = raw.reshape(-1)[:1]  # one item, repeated
        flat = np.ascontiguousarray(raw).reshape(-1)
        size = self.dtype.itemsize
        items: np.ndarray
        if size in (1, 2, 4, 8):
            kind = np.dtype(f"u{size}")
            items, value = flat.view(kind), fill.reshape(1).view(kind)[0]
        else:
            items = flat.view(np.uint8).reshape(-1, size)
            value = fill.reshape(1).view(np.uint8)
        # The ends first: a chunk that is not constant almost always differs there.
        if not (np.array_equal(items[0], value) and np.array_equal(items[-1], value)):
            return False
        return bool((items == value).all())

    def fill_chunk(self, grid: NDGrid) -> bytes | None:
        """The special chunk standing for a chunk of the fill value (None: none exists,
        or this array's layout needs real chunks)."""
        if not self._lazy:
            return None
        assert self.fill is not None
        blocksize = grid.block_nbytes if self.blocks is not None else grid.chunk_nbytes
        return fill_chunk(self.fill.tobytes(), grid.chunk_nbytes, blocksize)

    def fill_of(self, nchunk: int) -> np.ndarray | None:
        """The value chunk ``nchunk`` repeats when its layout records it as a special
        chunk (nothing to fetch or decode), else None."""
        special = self.layout.special_chunk(nchunk)
        if special is None:
            return None
        item = special_item(special, self.dtype)
        if item is None:
            return None
        value = self._fill_values.get(item)
        if value is None:
            value = self._fill_values[item] = np.frombuffer(item, self.dtype).reshape(())
        return value

    @property
    def padding(self) -> Any:
        """What the padding of edge chunks holds (see :meth:`stored_from_region`)."""
        return self.fill if self._lazy else 0

    def stored_from_region(self, region: np.ndarray, grid: NDGrid,
                           rows: int | None = None) -> np.ndarray:
        """A chunk in stored order from the array items it holds (``region``).

        ``region`` is the chunk's valid part (shape ``valid_shape``).  ``rows``
        truncates the chunk to that many rows where the layout allows it.
        """
        ext = grid.ext_chunks
        if self._lazy and _repeats(region) and self.is_fill(region.reshape(-1)[:1]):
            # A broadcast run of the fill value (np.broadcast_to): never materialised.
            size = grid.chunk_items if rows is None or not self.truncates(grid) else \
                rows * math.prod(ext[1:])
            assert self.fill is not None  # _lazy needs one
            return np.broadcast_to(self.fill, (size,))
        if rows is not None and self.truncates(grid) and region.shape[1:] == ext[1:]:
            return np.ascontiguousarray(region[:rows])
        if region.shape == ext:
            if self.blocked(grid):  # one copy, straight from the (strided) region
                assert self.blocks is not None
                return geo.to_blocked(region, self.blocks).reshape(-1)
            chunk = np.ascontiguousarray(region)
        else:
            # Padding is zeros, as b2nd writes it: it compresses to nothing.  With a
            # fill value it is that value, so an edge chunk of it stays a special chunk.
            chunk = np.zeros(ext, dtype=self.dtype) if not self._lazy else \
                np.full(ext, self.fill, dtype=self.dtype)
            chunk[tuple(slice(0, n) for n in region.shape)] = region
        if self.blocked(grid):
            assert self.blocks is not None
            return geo.to_blocked(chunk, self.blocks).reshape(-1)
        return chunk

    # -- fetching -------------------------------------------------------------------------

    def fetch(self, nchunk: int, slot: str = "read"):
        """The whole stored chunk, read into this thread's scratch buffer ``slot`` where
        possible (valid until that slot is used again)."""
        if self.layout.concurrent_reads:
            return self.layout.read_chunk_into(nchunk, partial(_parallel.scratch, slot=slot))
        with _parallel.io_lock:
            return bytes(self.layout.read_chunk(nchunk))

    def _reader(self, nchunk: int):
        if self.layout.concurrent_reads:
            return self.layout.chunk_reader(nchunk)
        with _parallel.io_lock:
            reader, size = self.layout.chunk_reader(nchunk)

        def read(offset: int, length: int) -> bytes:
            with _parallel.io_lock:
                return reader(offset, length)

        def read_into(offset: int, out) -> int:
            with _parallel.io_lock:
                return reader.read_into(offset, out)

        return ChunkReader(size, read, read_into), size

    # -- decoding -------------------------------------------------------------------------

    def open(self, nchunk: int, items: int, slot: str) -> OpenChunk:
        """Stored chunk ``nchunk`` (of ``items`` items) fetched and checked into this
        thread's scratch buffer ``slot``, for decoding piece by piece."""
        value = self.fill_of(nchunk)
        if value is not None:
            return OpenChunk(items, self.itemsize, values=value)
        return OpenChunk(items, self.itemsize, chunk=self.fetch(nchunk, slot),
                         path=self.path(nchunk))

    def decode_whole(self, nchunk: int, out: np.ndarray) -> int:
        """Decode chunk ``nchunk`` into the flat buffer ``out``; returns the items decoded.

        ``out`` holds a full chunk; a truncated chunk fills only its start.
        """
        value = self.fill_of(nchunk)
        if value is not None:
            out[...] = value
            return out.size
        chunk = self.fetch(nchunk)
        path = self.path(nchunk)
        h = blosc.read_header(chunk, path)
        nbytes = out.nbytes
        if h.nbytes > nbytes or h.nbytes % self.itemsize:
            raise FormatError(f"chunk {nchunk} holds {h.nbytes} bytes, expected at most "
                              f"{nbytes}", path)
        items = h.nbytes // self.itemsize
        _parallel.decoder().decompress_into(chunk, out.reshape(-1)[:items], path)
        return items

    def decode_range(self, nchunk: int, start: int, out: np.ndarray, whole: bool) -> None:
        """Items ``[start, start + out.size)`` of a C-ordered chunk into contiguous ``out``."""
        value = self.fill_of(nchunk)
        if value is not None:
            out[...] = value
            return
        path = self.path(nchunk)
        dest = out.reshape(-1)
        if whole:
            chunk = self.fetch(nchunk)
            h = blosc.read_header(chunk, path)
            if h.nbytes == dest.nbytes:
                _parallel.decoder().decompress_into(chunk, dest, path)
                return
            if h.nbytes < dest.nbytes:
                raise FormatError(f"chunk {nchunk} holds {h.nbytes} bytes, expected "
                                  f"{dest.nbytes}", path)
            # A chunk that filled after the last commit: its first items are ours.
            _parallel.decoder().getitem_into(chunk, 0, dest, path)
            return
        try:
            if self.layout.in_memory:
                _parallel.decoder().getitem_into(self.layout.read_chunk(nchunk),
                                                 start * self.itemsize, dest, path)
            else:
                read_at, size = self._reader(nchunk)
                # One read of the blocks holding the range when it can; else the
                # general ranged decode.
                if not _parallel.decoder().decode_point(read_at, size, start * self.itemsize,
                                                        dest, path):
                    ranged.getitem_ranged(read_at, start * self.itemsize, dest, size, path)
        except ValueError as exc:  # a range past what the chunk holds
            if isinstance(exc, CArrayError):
                raise
            raise FormatError(f"chunk {nchunk}: {exc}", path) from None

    def item(self, nchunk: int, offset: int) -> Any:
        """Item ``offset`` (in stored order) of chunk ``nchunk``, a numpy scalar: the short
        path of ``a[i]``, one ``pread`` of the block holding it where the layout reads
        files, decoded into the thread's context and taken from there."""
        value = self.fill_of(nchunk)
        if value is not None:
            return value[()]
        if not self.layout.in_memory and self.layout.concurrent_reads:
            reader, size = self.layout.chunk_reader(nchunk)
            got = _parallel.decoder().point_bytes(reader, size, offset * self.itemsize,
                                                  self.itemsize, self.path(nchunk))
            if got is not None:
                return got.view(self.dtype)[0]
        out = np.empty(1, dtype=self.dtype)
        self.decode_range(nchunk, offset, out, False)
        return out[0]

    def item_offset(self, grid: NDGrid, local: Sequence[int]) -> int:
        """The stored-order offset of the item at chunk-local coordinates ``local``."""
        if len(local) == 1:
            return local[0]
        if not self.blocked(grid):
            off = 0
            for x, n in zip(local, grid.ext_chunks, strict=True):
                off = off * n + x
            return off
        block = inner = 0
        for x, b, n in zip(local, grid.blocks, grid.blocks_per_chunk, strict=True):
            q, r = divmod(x, b)
            block = block * n + q
            inner = inner * b + r
        return block * math.prod(grid.blocks) + inner

    def decode_blocks(self, nchunk: int, blocks: np.ndarray, out: np.ndarray,
                      grid: NDGrid) -> None:
        """Decode the listed blocks of a block-ordered chunk into the full-size ``out``."""
        value = self.fill_of(nchunk)
        if value is not None:
            out[...] = value
            return
        path = self.path(nchunk)
        dest = out.reshape(-1).view(np.uint8)
        if self.layout.in_memory:
            chunk = self.layout.read_chunk(nchunk)
        else:
            read_at, size = self._reader(nchunk)
            first, last = int(blocks[0]), int(blocks[-1])
            if last - first + 1 == len(blocks):
                # One run of blocks (a plane across the chunk): one read, one decode.
                lo = first * grid.block_nbytes
                hi = min((last + 1) * grid.block_nbytes, dest.nbytes)
                if _parallel.decoder().decode_point(read_at, size, lo, dest[lo:hi], path):
                    return
            chunk = ranged.fetch_blocks(read_at, size, blocks, path,
                                       blocksize=grid.block_nbytes,
                                       scratch=_parallel.scratch)
            if chunk is None:
                chunk = self.fetch(nchunk)
        h = blosc.validate_chunk(chunk, dest.nbytes, path)
        if h.blocksize != grid.block_nbytes:
            # Not our block layout: decode it all.
            _parallel.decoder().decompress_into(chunk, dest, path)
            return
        _parallel.decoder().decompress_blocks(chunk, dest, blocks, path, h)

    # -- pieces ---------------------------------------------------------------------------

    def decode_cost(self, grid: NDGrid, piece: Piece) -> int:
        """About how many bytes reading ``piece`` decodes (what decides threading)."""
        if self.blocked(grid):
            blocks = piece.nblocks
            return grid.chunk_nbytes if blocks > _WHOLE_SHARE * grid.nblocks else \
                blocks * grid.block_nbytes
        lo, hi = c_bounds(piece.local, grid.ext_chunks)
        return (hi - lo) * self.itemsize

    def read_piece(self, grid: NDGrid, piece: Piece, out: np.ndarray) -> None:
        """Copy a piece of chunk ``piece.nchunk`` into ``out`` (the selection's array)."""
        ext = grid.ext_chunks
        n = piece.nchunk
        value = self.fill_of(n)
        if value is not None:  # nothing stored: no fetch, no decode
            out[outer_index(piece.out)] = value
            return
        if not self.blocked(grid):
            start = c_run(piece.local, ext)
            if start is not None:
                ostart = c_run(piece.out, out.shape)
                if ostart is not None and out.flags.c_contiguous:
                    count = math.prod(piece.shape)
                    dest = out.reshape(-1)[ostart:ostart + count]
                    # All a chunk holds is read whole, so its checksum is checked (the
                    # partial last chunk included).
                    self.decode_range(n, start, dest, piece.full or (
                        start == 0 and count == grid.chunk_items))
                    return
            lo, hi = c_bounds(piece.local, ext)
            buf = _parallel.scratch(grid.chunk_nbytes, "decoded")[:grid.chunk_nbytes]
            items = buf.view(self.dtype)
            if piece.full or hi - lo > _WHOLE_SHARE * grid.chunk_items:
                self.decode_whole(n, items)
            else:
                self.decode_range(n, lo, items[lo:hi], False)
            gather(piece, items.reshape(ext), out)
            return
        buf = _parallel.scratch(grid.chunk_nbytes, "decoded")[:grid.chunk_nbytes]
        items = buf.view(self.dtype)
        if piece.full or piece.nblocks > _WHOLE_SHARE * grid.nblocks:
            self.decode_whole(n, items)
        else:
            self.decode_blocks(n, piece.blocks, items, grid)
        gather_blocked(piece, items, grid, out)

    def decoded(self, nchunk: int, grid: NDGrid) -> np.ndarray:
        """A new flat array holding chunk ``nchunk`` in stored order (for rewriting it)."""
        out = np.zeros(grid.chunk_items, dtype=self.dtype)
        self.decode_whole(nchunk, out)
        return out

    def scatter_piece(self, grid: NDGrid, piece: Piece, values: np.ndarray,
                      raw: np.ndarray) -> None:
        """Write a piece of ``values`` (the selection's array) into a stored-order chunk."""
        if self.blocked(grid):
            scatter_blocked(piece, values, raw, grid)
        else:
            scatter(piece, values, raw.reshape(grid.ext_chunks))

    def item_offsets(self, grid: NDGrid, local: Sequence[np.ndarray]) -> np.ndarray:
        """Flat stored-order offsets of items at chunk-local coordinates ``local``."""
        if not self.blocked(grid):
            return np.ravel_multi_index(tuple(local), grid.ext_chunks)
        q = [x // b for x, b in zip(local, grid.blocks, strict=True)]
        r = [x % b for x, b in zip(local, grid.blocks, strict=True)]
        block = np.ravel_multi_index(tuple(q), grid.blocks_per_chunk)
        return block * math.prod(grid.blocks) + np.ravel_multi_index(tuple(r), grid.blocks)



def _encode_scratch(nbytes: int) -> np.ndarray:
    """This thread's buffer to compress a chunk into."""
    return _parallel.scratch(nbytes, "encoded")


def _repeats(arr: np.ndarray) -> bool:
    """Whether ``arr`` is one item repeated by its strides (``np.broadcast_to``)."""
    return arr.size > 1 and not any(arr.strides)


class _ChunkPath(os.PathLike):
    """A chunk's file name, looked up only when an error message needs it."""

    __slots__ = ("_layout", "_nchunk")

    def __init__(self, layout: ChunkSource, nchunk: int) -> None:
        self._layout, self._nchunk = layout, nchunk

    def __fspath__(self) -> str:
        return self._layout.chunk_path(self._nchunk) or "(memory)"

    def __str__(self) -> str:
        return self.__fspath__()


# -- one chunk held open --------------------------------------------------------------


class OpenChunk:
    """The items of one chunk, in stored order, decoded on demand.

    Build with :meth:`ArrayEngine.open_chunk <carray.engine.ArrayEngine.open_chunk>`;
    valid until the thread that opened it reuses the scratch slot it was read into.

    Attributes
    ----------
    items : int
        How many items the chunk holds (padding included).
    """

    __slots__ = ("_chunk", "_fast", "_header", "_itemsize", "_path", "_values", "items")

    def __init__(self, items: int, itemsize: int, *, chunk: Any = None, path: Any = None,
                 values: np.ndarray | None = None) -> None:
        self.items = items
        self._itemsize = max(itemsize, 1)
        self._chunk = chunk
        self._path = path
        self._values = values
        self._header = None
        self._fast = None
        if chunk is not None:
            h = blosc.validate_chunk(chunk, None, path)
            if h.nbytes % self._itemsize or h.nbytes > items * self._itemsize:
                raise FormatError(f"chunk of {h.nbytes} bytes is not at most {items} items "
                                  f"of {self._itemsize} bytes", path)
            self._header = h
            self._fast = _parallel.decoder().item_reader(chunk, h, self._itemsize)

    @property
    def stored_items(self) -> int:
        """Items actually stored (a truncated last chunk holds fewer than :attr:`items`)."""
        if self._header is None:
            return self.items
        return self._header.nbytes // self._itemsize

    @property
    def block_items(self) -> int | None:
        """Items per Blosc block (None: values in hand, no blocks to pick)."""
        h = self._header
        if h is None or h.blocksize % self._itemsize:
            return None
        return h.blocksize // self._itemsize

    def read(self, start: int, out: np.ndarray) -> np.ndarray:
        """Items ``[start, start + out.size)`` into the contiguous ``out``; returns ``out``.

        Items past the end of a truncated chunk (the last run of rows of a C-ordered
        array, stored with only its rows) are outside the array: they read as zeros.
        """
        if start < 0 or start + out.size > self.items:
            raise ValueError(f"items [{start}, {start + out.size}) outside a chunk of "
                             f"{self.items}")
        stored = self.stored_items
        if start + out.size > stored:
            out[max(stored - start, 0):] = 0
            if start >= stored:
                return out
            self.read(start, out[:stored - start])
            return out
        values = self._values
        if values is not None:
            if values.ndim == 0:
                out[...] = values
            else:
                out[...] = values[start:start + out.size]
            return out
        nbytes = out.nbytes
        fast = self._fast
        if fast is not None and out.flags.c_contiguous:
            n = fast(start, out.size, out.ctypes.data)
            if n != nbytes:
                raise decode_error(self._chunk, self._path, "decode items", n)
            return out
        offset = start * out.itemsize
        assert self._header is not None  # values in hand returned above
        if offset == 0 and nbytes == self._header.nbytes:
            _parallel.decoder().decompress_into(self._chunk, out, self._path)
        else:
            _parallel.decoder().getitem_into(self._chunk, offset, out, self._path,
                                             self._header)
        return out
