"""``carray``: a compressed N-d array in chunks, in memory or on disk.

The array is tiled by the chunk grid of :mod:`carray.grid` (chunks along every
axis, each split into blocks); a bcolz-style array chunked by runs of rows is
the case whose chunks span every axis but the first.  The chunks of the last,
partial run of rows along the first axis (the *tail*) are kept decoded in
memory, so appends are cheap; they are compressed and written when the run
fills, and on ``flush()``/close.  Reads decode only the chunks a key touches,
and inside a chunk only the blocks of the items asked for (:mod:`carray.chunkio`).
"""

from __future__ import annotations

import atexit
import math
import os
import threading
import warnings
import weakref
from functools import partial
from typing import Any

import numpy as np

from carray import _parallel
from carray._points import Indexer, read_points, write_points
from carray._portable import PortableArray
from carray._resize import grow_rows, resize_trailing, shrink_rows
from carray._rows import RowIteration
from carray._util import human
from carray.attrs import Attrs
from carray.chunkio import ChunkIO
from carray.errors import ContainerNotFoundError, ReadOnlyError, UnsupportedDTypeError
from carray.grid import NDGrid, gather, gather_blocked, plan, scatter
from carray.keys import OrthoKey, coordinate_key, needs_coordinates, orthogonal_key
from carray.layouts import FORMATS, create_layout, open_layout
from carray.layouts.base import ArrayMeta, Layout
from carray.params import CParams
from carray.shapes import choose_grid
from carray.stores import LOCAL, resolve
from carray.zonemap import ZoneMap

_MODES = ("r", "a", "w")
# An array started empty without expectedlen is assumed to grow this long, so
# row-by-row appends fill chunks of a useful size (bcolz would pick 16 KiB).
_DEFAULT_EXPECTEDLEN = 2**20
# A tail (the last partial run of chunk rows) bigger than this is not kept
# decoded between writes: it is written out and decoded again when needed.
_TAIL_BUDGET = 64 * 2**20
# Reads decoding at least this much per chunk spread the chunks over threads.
_THREADED_BYTES = 512 * 2**10

# Disk arrays with unwritten rows, flushed at interpreter exit if still alive.
_unflushed: weakref.WeakSet = weakref.WeakSet()


@atexit.register
def _flush_all() -> None:
    for arr in list(_unflushed):
        try:
            arr.flush()
        except Exception:  # noqa: BLE001 - nothing can be reported at exit
            pass


def _split_dtype(dtype: np.dtype) -> tuple[np.dtype, tuple[int, ...]]:
    """A sub-array dtype ``('i4', (3,))`` means rows of shape (3,) of int32."""
    if dtype.subdtype is not None:
        base, shape = dtype.subdtype
        return base, shape
    return dtype, ()


def _is_int(k: Any) -> bool:
    return isinstance(k, (int, np.integer)) and not isinstance(k, (bool, np.bool_))


class carray(PortableArray, RowIteration):  # noqa: N801 - the bcolz name users know
    """A compressed, chunked N-d array.

    Parameters
    ----------
    array : array_like, optional
        Initial content.  Without it, open ``rootdir`` or start empty.
    cparams : CParams or dict, optional
        Compression parameters (default lz4, clevel 5, byte shuffle).
    dtype : dtype, optional
        Convert ``array`` to this dtype (default: its own, or float64 when empty).
    dflt : scalar, optional
        Value for items added by ``resize`` (default zero).
    expectedlen : int, optional
        How long the first axis is expected to grow; sizes default chunks.
        Default: the initial length, or 2**20 rows when starting empty.
    chunklen : int, optional
        Chunk by runs of this many whole rows (bcolz's layout).
    chunks : tuple of int, optional
        The chunk shape, one size per axis.  Default: runs of rows sized as bcolz
        does for 1-d arrays; for N-d arrays, near-cubic chunks of a quarter of the
        CPU's L3 cache, except that axes too short to share are taken whole.
    blocks : tuple of int, optional
        The block shape inside each chunk: a read decodes only the blocks it
        touches.  Default: chosen from the dtype, the chunk shape and the L2 cache
        for N-d chunks; 1-d and row chunks use Blosc's own byte blocks.
    rootdir : str or path, optional
        Where on disk (a directory, or a ``.b2nd`` file), or any fsspec URL
        (``s3://bucket/data``, ``memory://x``); ``None`` keeps it in memory.
    format : {'superchunk', 'bcolz', 'b2nd'}, optional
        On-disk layout of a new ``rootdir``: 'superchunk' (the default: few files,
        checksums, crash-safe commits), 'bcolz' (bcolz 1.x, one file per chunk,
        rows only) or 'b2nd' (a python-blosc2 frame; the default for ``*.b2nd``).
        An existing ``rootdir`` is opened in whatever layout it holds.
    storage : dict, optional
        Layout options: for 'superchunk' ``superchunksize``, ``checksum``,
        ``spare``, ``blosc1`` and ``verify``; for 'b2nd' ``contiguous``.
    safe : bool
        Kept for bcolz compatibility; conversions are always checked.
    mode : {'a', 'r', 'w'}
        'r' reads and never writes anything; 'a' reads and writes (creating
        refuses to overwrite); 'w' replaces what is there.
    allow_pickle : bool
        Allow opening bcolz ``object`` arrays, whose items are pickles.
    fsync : bool
        Make flushed data durable with fsync (default True).
    storage_options : dict, optional
        Passed to the fsspec file system of a URL ``rootdir`` (credentials,
        endpoint, ...).

    Notes
    -----
    ``a[key]`` indexes every axis on its own (``np.ix_`` semantics): with at most
    one index array that is numpy's meaning; ``a[[0, 2], [1, 3]]`` is a 2x2
    block.  ``a.vindex[key]`` follows numpy's advanced indexing (index arrays
    broadcast together and pick single items), as does a key holding an N-d
    boolean mask; ``a.oindex[key]`` is the orthogonal rule by name.

    Examples
    --------
    >>> import carray as ca
    >>> a = ca.carray(np.arange(10))
    >>> a.append([10, 11])
    >>> a[::4]
    array([0, 4, 8])
    """

    def __init__(self, array: Any = None, cparams: CParams | dict | None = None,
                 dtype: Any = None, dflt: Any = None, expectedlen: int | None = None,
                 chunklen: int | None = None, rootdir: str | os.PathLike | None = None,
                 safe: bool = True, mode: str = "a", *, chunks: Any = None, blocks: Any = None,
                 allow_pickle: bool = False, fsync: bool = True,
                 format: str | None = None,  # noqa: A002
                 storage: dict | None = None, storage_options: dict | None = None) -> None:
        if mode not in _MODES:
            raise ValueError(f"mode must be one of {_MODES}, got {mode!r}")
        if format is not None and format not in FORMATS:
            raise ValueError(f"format must be one of {FORMATS}, got {format!r}")
        self._storage = dict(storage or {})
        self._mode = mode
        self._objects: np.ndarray | None = None
        rootdir = os.fspath(rootdir) if rootdir is not None else None
        self._rootdir = rootdir
        self._storage_options = storage_options
        self._store, self._path = resolve(rootdir, storage_options) if rootdir is not None \
            else (LOCAL, None)
        if format is None and rootdir is not None and rootdir.endswith(".b2nd"):
            format = "b2nd"  # noqa: A001 - python-blosc2's file extension
        self._format = format

        if rootdir is not None and array is None and self._store.exists(self._path):
            self._open(rootdir, mode, allow_pickle, fsync)
            if mode == "w":
                self.resize(0)
            return
        if mode == "r":
            if rootdir is None:
                raise ValueError("mode 'r' needs an existing rootdir")
            raise ContainerNotFoundError(f"{rootdir}: no such carray directory")
        self._create(array, cparams, dtype, dflt, expectedlen, chunklen, chunks, blocks,
                     rootdir, mode, fsync)

    # -- construction ---------------------------------------------------------------------

    def _create(self, array, cparams, dtype, dflt, expectedlen, chunklen, chunks, blocks,
                rootdir, mode, fsync) -> None:
        if array is None:
            data = np.empty(0, dtype=np.dtype(dtype) if dtype is not None else np.float64)
        elif isinstance(array, carray):
            data = array
        else:
            data = np.asarray(array, dtype=dtype)
        dt = np.dtype(dtype) if dtype is not None else data.dtype
        if isinstance(data, carray) and dtype is not None and dt != data.dtype:
            data = data[:].astype(dt)
        base, atom = _split_dtype(dt)
        if isinstance(data, np.ndarray) and data.ndim == 0:
            raise ValueError("a carray needs at least one dimension; got a 0-d value")
        atomshape = tuple(atom) + tuple(data.shape[1:])
        if base == np.dtype(object):
            raise UnsupportedDTypeError(
                "object arrays cannot be stored: their items would have to be pickled")
        if base.itemsize == 0 and base.kind in "SUV":
            raise UnsupportedDTypeError(f"dtype {base} has zero-size items")
        cp = CParams.coerce(cparams)
        length = len(data)
        expected = int(expectedlen) if expectedlen is not None else \
            (length or _DEFAULT_EXPECTEDLEN)
        chunks, blocks = choose_grid(base, atomshape, expected, chunklen=chunklen, chunks=chunks,
                                     blocks=blocks, rows_only=self._format == "bcolz",
                                     needs_blocks=self._format == "b2nd")
        dflt_arr = np.zeros((), dtype=base) if dflt is None else np.asarray(dflt, dtype=base)
        if dflt_arr.ndim:
            raise ValueError("dflt must be a scalar")
        meta = ArrayMeta(dtype=base, shape=(0, *atomshape), chunks=chunks, blocks=blocks,
                         cparams=cp, dflt=dflt_arr, expectedlen=expected)
        meta.grid  # noqa: B018 - validates the shapes before anything is created
        layout = create_layout(self._path, meta, format=self._format, mode=mode, fsync=fsync,
                               storage=self._storage, store=self._store)
        self._init_state(layout, meta, cbytes=0)
        if length:
            if isinstance(data, carray):
                for block in data.iterblocks():
                    self.append(block)
            else:
                self.append(data.reshape((length, *atomshape)))
        self.flush()

    def _open(self, rootdir: str, mode: str, allow_pickle: bool, fsync: bool) -> None:
        layout, meta, cbytes = open_layout(self._path, readonly=(mode == "r"), fsync=fsync,
                                           allow_pickle=allow_pickle, storage=self._storage,
                                           store=self._store)
        if not meta.shape:
            layout.close()
            raise UnsupportedDTypeError(
                f"{rootdir}: a 0-d array is not a carray; read it with "
                "carray.formats.b2frame.read_array")
        self._init_state(layout, meta, cbytes)
        if meta.dtype == np.dtype(object):
            self._objects = layout.read_objects(meta.length)
            return
        if self._nleft and self._per_row == 1:
            self._ensure_tail()

    def _init_state(self, layout: Layout, meta: ArrayMeta, cbytes: int) -> None:
        self._layout = layout
        self._dtype = meta.dtype
        self._shape = tuple(meta.shape)
        self._chunks = tuple(meta.chunks)
        self._blocks = None if meta.blocks is None else tuple(meta.blocks)
        self._cparams = meta.cparams
        self._dflt = np.asarray(meta.dflt if meta.dflt is not None else 0, dtype=meta.dtype)
        self._expectedlen = meta.expectedlen
        self._io = ChunkIO(layout, meta.dtype, self._blocks, meta.cparams)
        self._grid_memo: NDGrid | None = None
        self._nfull = self._shape[0] // self._chunks[0]
        self._tail: np.ndarray | None = None
        self._tail_dirty = False
        self._cache: tuple[int, np.ndarray] | None = None
        self._cbytes = cbytes
        self._attrs = Attrs(layout, self._mode)
        self._zones = ZoneMap.load(layout, meta)

    # -- geometry -------------------------------------------------------------------------

    def _grid(self) -> NDGrid:
        g = self._grid_memo
        if g is None or g.shape != self._shape:
            g = self._grid_memo = NDGrid(self._shape, self._chunks, self._blocks or self._chunks,
                                         max(self._dtype.itemsize, 1))
        return g

    @property
    def _per_row(self) -> int:
        """Chunks in one run of chunk rows (1 when chunks span every axis but the first)."""
        return math.prod(-(-n // c) for n, c in zip(self._shape[1:], self._chunks[1:],
                                                    strict=True))

    @property
    def _nleft(self) -> int:
        return self._shape[0] - self._nfull * self._chunks[0]

    def _set_length(self, n: int) -> None:
        self._shape = (n, *self._shape[1:])

    # -- properties -----------------------------------------------------------------------

    @property
    def dtype(self) -> np.dtype:
        """The dtype of one item."""
        return self._dtype

    @property
    def shape(self) -> tuple[int, ...]:
        return self._shape

    @property
    def ndim(self) -> int:
        return len(self._shape)

    @property
    def size(self) -> int:
        return math.prod(self._shape)

    @property
    def len(self) -> int:
        return self._shape[0]

    def __len__(self) -> int:
        return self._shape[0]

    @property
    def itemsize(self) -> int:
        return self._dtype.itemsize

    @property
    def nbytes(self) -> int:
        """Uncompressed size in bytes."""
        return self.size * self._dtype.itemsize

    @property
    def cbytes(self) -> int:
        """Compressed size in bytes (a decoded tail counts in full, as in bcolz)."""
        return self._cbytes + (self._tail.nbytes if self._tail is not None else 0)

    @property
    def cratio(self) -> float:
        return self.nbytes / self.cbytes if self.cbytes else 0.0

    @property
    def chunklen(self) -> int:
        """Rows per chunk: the chunk size along the first axis."""
        return self._chunks[0]

    @property
    def chunks(self) -> tuple[int, ...]:
        """The chunk shape."""
        return self._chunks

    @property
    def blocks(self) -> tuple[int, ...] | None:
        """The block shape inside a chunk (None: Blosc's own blocks over C order)."""
        return self._blocks

    @property
    def nchunks(self) -> int:
        """Number of compressed chunks in complete runs of rows (bcolz: full chunks)."""
        return self._nfull * self._per_row

    @property
    def leftover(self) -> int:
        """Rows in the last, partial run of chunk rows."""
        return self._nleft

    nleftover = leftover

    @property
    def partitions(self) -> list[tuple[int, int]]:
        """``(start, stop)`` row ranges of every run of chunk rows, the partial one included."""
        cl, n = self._chunks[0], self._shape[0]
        return [(i, min(i + cl, n)) for i in range(0, n, cl)]

    @property
    def cparams(self) -> CParams:
        return self._cparams

    @property
    def dflt(self) -> Any:
        return self._dflt[()]

    @property
    def expectedlen(self) -> int:
        return self._expectedlen

    @property
    def rootdir(self) -> str | None:
        return self._rootdir

    @property
    def mode(self) -> str:
        return self._mode

    @property
    def attrs(self) -> Attrs:
        """User attributes (JSON-serialisable values), persisted on every change."""
        return self._attrs

    @property
    def oindex(self) -> Indexer:
        """Orthogonal indexing: every axis indexed on its own (``np.ix_`` semantics)."""
        return Indexer(self, "o")

    @property
    def vindex(self) -> Indexer:
        """numpy's advanced indexing: index arrays broadcast together and pick items."""
        return Indexer(self, "v")

    # -- reading --------------------------------------------------------------------------

    def _plain_key(self, key: Any) -> Any:
        if isinstance(key, carray):
            return key[:]
        if isinstance(key, tuple):
            return tuple(k[:] if isinstance(k, carray) else k for k in key)
        return key

    def _tail_view(self, coords: tuple[int, ...]) -> np.ndarray:
        """The tail's items of chunk ``coords`` (in the last run of rows), origin at 0."""
        box = tuple(slice(c * s, (c + 1) * s) for c, s in zip(coords[1:], self._chunks[1:],
                                                                strict=True))
        return self._tail[(slice(None), *box)]

    def _in_tail(self, coords: tuple[int, ...]) -> bool:
        return self._tail is not None and coords[0] == self._nfull and self._nleft > 0

    def _read_ortho(self, okey: OrthoKey, out: np.ndarray | None = None) -> np.ndarray:
        if out is None:
            out = np.empty(okey.sel_shape, dtype=self._dtype)
        if okey.size == 0:
            return okey.finish(out)
        grid = self._grid()
        io = self._io
        tail_row = self._nfull if self._tail is not None and self._nleft else -1
        cached = self._cache[0] if self._cache is not None else -1
        pieces = []
        for piece in plan(grid, okey):
            if piece.coords[0] == tail_row:
                gather(piece, self._tail_view(piece.coords), out)
            elif piece.nchunk == cached:
                raw = self._cache[1]
                if io.blocked(grid):
                    gather_blocked(piece, raw, grid, out)
                else:
                    gather(piece, raw.reshape(grid.ext_chunks), out)
            else:
                pieces.append(piece)
        # Threads pay off only when each has real decoding to do: below that, handing
        # pieces over and contending for the GIL costs more than it saves.
        if pieces and self._layout.remote:
            # Fetches from an object store wait on the network: few, and many at once.
            with self._layout.prefetched([p.nchunk for p in pieces]):
                _parallel.run([partial(io.read_piece, grid, p, out) for p in pieces],
                              width=_parallel.IO_THREADS)
        elif len(pieces) > 1 and sum(io.decode_cost(grid, p) for p in pieces) >= \
                _THREADED_BYTES * len(pieces):
            _parallel.run([partial(io.read_piece, grid, p, out) for p in pieces])
        else:
            for piece in pieces:
                io.read_piece(grid, piece, out)
        return okey.finish(out)

    def _read_item(self, index: tuple[int, ...]) -> Any:
        """One item, by non-negative coordinates (the fast path of ``a[i]``)."""
        c0 = self._chunks[0]
        row = index[0] - self._nfull * c0
        if self._tail is not None and row >= 0:
            return self._tail[(row, *index[1:])].copy()
        grid = self._grid()
        coords = tuple(i // c for i, c in zip(index, self._chunks, strict=True))
        local = [np.array([i - x * c]) for i, x, c in zip(index, coords, self._chunks,
                                                          strict=True)]
        nchunk = grid.chunk_index(coords)
        offset = int(self._io.item_offsets(grid, local)[0])
        if self._cache is not None and self._cache[0] == nchunk:
            return self._cache[1][offset].copy()
        out = np.empty(1, dtype=self._dtype)
        self._io.decode_range(nchunk, offset, out, False)
        return out[0]

    def _row_key(self, rows: range) -> OrthoKey:
        """The selection of whole rows ``rows`` (positive step)."""
        axes = (rows, *(range(n) for n in self._shape[1:]))
        return OrthoKey(self._shape, axes, (), (), (len(rows), *self._shape[1:]))

    def _read_range(self, rows: range, out: np.ndarray | None = None) -> np.ndarray:
        """Whole rows ``rows`` (any step) as an array (tables read columns this way)."""
        if rows.step < 0:
            return self._read_range(rows[::-1])[::-1]
        if self._objects is not None:
            return self._objects[rows.start:rows.stop:rows.step]
        return self._read_ortho(self._row_key(rows), out)

    def _read(self, rows: int | range | np.ndarray) -> np.ndarray:
        if isinstance(rows, range):
            return self._read_range(rows)
        return self._read_ortho(orthogonal_key(rows, self._shape))

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            raise TypeError("string (expression) keys need a ctable; use carray.eval")
        key = self._plain_key(key)
        if self._objects is not None:
            return self._objects[key]
        if _is_int(key) and len(self._shape) == 1:
            n = self._shape[0]
            if not -n <= key < n:
                raise IndexError(f"index {int(key)} is out of bounds for axis 0 with size {n}")
            return self._read_item((int(key) % n,))
        if isinstance(key, tuple) and len(key) == len(self._shape) and len(key) > 1 \
                and all(_is_int(k) for k in key):
            index = []
            for ax, (k, n) in enumerate(zip(key, self._shape, strict=True)):
                if not -n <= k < n:
                    raise IndexError(f"index {int(k)} is out of bounds for axis {ax} with "
                                     f"size {n}")
                index.append(int(k) % n)
            return self._read_item(tuple(index))
        if needs_coordinates(key):
            result = read_points(self, coordinate_key(key, self._shape))
        else:
            result = self._read_ortho(orthogonal_key(key, self._shape))
        return result[()] if result.ndim == 0 else result

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        out = self[:]
        return out if dtype is None else out.astype(dtype, copy=False)

    # -- writing --------------------------------------------------------------------------

    def _writable(self) -> None:
        if self._mode == "r":
            raise ReadOnlyError(f"{self._rootdir or 'carray'}: opened in mode 'r'")
        if self._objects is not None:
            raise UnsupportedDTypeError("object carrays are read-only")

    def _mark_dirty(self) -> None:
        self._tail_dirty = True
        if not self._layout.in_memory:
            _unflushed.add(self)

    def _store_chunk(self, nchunk: int, raw: np.ndarray, grid: NDGrid) -> None:
        """Compress and store a chunk given in stored order."""
        self._cbytes += self._layout.write_chunk(nchunk, self._io.encode(raw, grid))
        if self._cache is not None and self._cache[0] == nchunk:
            self._cache = None
        if self._zones is not None and nchunk < self._nfull:
            self._zones.update(nchunk, raw.reshape(-1)[:self._chunks[0]],
                               self._layout.chunk_stamp(nchunk))

    def _store_row(self, row: int, slab: np.ndarray, rows: int | None = None) -> None:
        """Store the chunks of run ``row`` of chunk rows, from its items ``slab``.

        ``rows`` (the tail's) stores only that many rows where the layout allows.
        """
        grid = self._grid()
        per_row = self._per_row
        for t, trailing in enumerate(np.ndindex(*grid.grid_shape[1:])):
            box = tuple(slice(c * s, (c + 1) * s) for c, s in zip(trailing, self._chunks[1:],
                                                                    strict=True))
            region = slab[(slice(None), *box)]
            raw = self._io.stored_from_region(region, grid, rows)
            self._store_chunk(row * per_row + t, raw, grid)

    def _ensure_tail(self) -> None:
        """Decode the last partial run of chunk rows into the tail buffer."""
        if self._tail is not None:
            return
        tail = np.zeros((self._chunks[0], *self._shape[1:]), dtype=self._dtype)
        nleft = self._nleft
        if nleft:
            start = self._nfull * self._chunks[0]
            self._read_ortho(self._row_key(range(start, start + nleft)), tail[:nleft])
        self._tail = tail

    def _flush_tail(self) -> None:
        """Write the tail's chunks (only its rows where the layout allows)."""
        if self._tail_dirty and self._nleft:
            nleft = self._nleft
            self._store_row(self._nfull, self._tail[:nleft], rows=nleft)
        self._tail_dirty = False

    def _release_big_tail(self) -> None:
        if self._tail is not None and self._tail.nbytes > _TAIL_BUDGET and self._per_row > 1:
            self._flush_tail()
            self._tail = None

    def _as_rows(self, array: Any) -> np.ndarray:
        arr = array[:] if isinstance(array, carray) else array
        arr = np.asarray(arr, dtype=self._dtype)
        atom = self._shape[1:]
        if arr.shape == atom:
            arr = arr.reshape((1, *atom))
        if arr.shape[1:] != atom:
            raise ValueError(
                f"cannot append rows of shape {arr.shape[1:]} to a carray whose rows have "
                f"shape {atom}")
        return arr

    def append(self, array: Any) -> None:
        """Append rows (or a single row) along the first axis.

        Only complete runs of chunk rows are compressed and stored; the rest
        waits in the tail until it fills or the array is flushed.
        """
        self._writable()
        arr = self._as_rows(array)
        n = len(arr)
        if n == 0:
            return
        c0 = self._chunks[0]
        nleft = self._nleft
        if self._tail is not None and nleft + n < c0:  # the common case: fill the tail
            self._tail[nleft:nleft + n] = arr
            self._set_length(self._shape[0] + n)
            self._mark_dirty()
            return
        pos = 0
        if nleft:
            self._ensure_tail()
            take = min(c0 - nleft, n)
            self._tail[nleft:nleft + take] = arr[:take]
            pos = take
            self._set_length(self._shape[0] + take)
            if nleft + take == c0:  # the tail just filled
                self._nfull += 1
                self._store_row(self._nfull - 1, self._tail)
                self._tail_dirty = False
            else:
                self._mark_dirty()
        while n - pos >= c0:
            self._set_length(self._shape[0] + c0)
            self._nfull += 1
            self._store_row(self._nfull - 1, arr[pos:pos + c0])
            pos += c0
        if pos < n:
            self._ensure_tail()
            rest = n - pos
            self._tail[:rest] = arr[pos:]
            self._set_length(self._shape[0] + rest)
            self._mark_dirty()
        self._release_big_tail()

    def _write_ortho(self, okey: OrthoKey, value: Any) -> None:
        values = okey.expand_values(np.asarray(self._plain_key(value), dtype=self._dtype))
        if okey.size == 0:
            return
        grid = self._grid()
        for piece in plan(grid, okey):
            if piece.coords[0] == self._nfull and self._nleft:
                self._ensure_tail()
                scatter(piece, values, self._tail_view(piece.coords))
                self._mark_dirty()
                continue
            if piece.full:
                raw = np.zeros(grid.chunk_items, dtype=self._dtype)
            elif self._cache is not None and self._cache[0] == piece.nchunk:
                raw = self._cache[1].copy()
            else:
                raw = self._io.decoded(piece.nchunk, grid)
            self._io.scatter_piece(grid, piece, values, raw)
            self._store_chunk(piece.nchunk, raw, grid)
            self._cache = (piece.nchunk, raw)
        self._release_big_tail()

    def __setitem__(self, key: Any, value: Any) -> None:
        self._writable()
        key = self._plain_key(key)
        if needs_coordinates(key):
            write_points(self, coordinate_key(key, self._shape), value)
        else:
            self._write_ortho(orthogonal_key(key, self._shape), value)

    # -- resizing -------------------------------------------------------------------------

    def resize(self, shape: int | tuple[int, ...]) -> None:
        """Grow (with ``dflt``) or shrink to ``shape``: a new length, or a whole new shape.

        Any axis may grow or shrink; the chunk and block shapes stay.  Growing or
        shrinking the first axis touches only the chunks at the end; other axes
        move and rewrite chunks (the bcolz layout, rows only, refuses them).
        """
        self._writable()
        new = (shape,) if _is_int(shape) else tuple(shape)
        if _is_int(shape):
            new = (int(shape), *self._shape[1:])
        if len(new) != len(self._shape) or not all(_is_int(n) for n in new):
            raise ValueError(f"cannot resize a {self.ndim}-d carray to {shape!r}")
        new = tuple(int(n) for n in new)
        if any(n < 0 for n in new):
            raise ValueError(f"new shape {new} has a negative length")
        if new[1:] != self._shape[1:]:
            resize_trailing(self, new[1:])
        if new[0] > self._shape[0]:
            grow_rows(self, new[0])
        elif new[0] < self._shape[0]:
            shrink_rows(self, new[0])
        self.flush()

    def trim(self, nitems: int) -> None:
        """Remove the last ``nitems`` rows (a negative count grows the array)."""
        if nitems > self._shape[0]:
            raise ValueError(f"cannot trim {nitems} rows from a carray of {self._shape[0]}")
        self.resize(self._shape[0] - nitems)

    # -- persistence ----------------------------------------------------------------------

    def flush(self) -> None:
        """Write the partial last run of chunks and the sizes; nothing in mode 'r'.

        In memory a partial chunk of rows stays decoded, as bcolz keeps it; the
        several chunks of a partial run of N-d chunks are compressed, so the
        decoded tail lives only between appends and the next flush.
        """
        if self._mode == "r" or self._objects is not None:
            return
        if self._per_row > 1:
            self._flush_tail()
            self._tail = None
        if self._layout.in_memory:
            return
        self._flush_tail()
        if self._zones is not None and self._zones.dirty:
            self._zones.truncate(self._nfull)
            self._zones.save(self._layout)
        self._layout.commit(self._meta(), self._cbytes)
        _unflushed.discard(self)

    def _meta(self) -> ArrayMeta:
        return ArrayMeta(dtype=self._dtype, shape=self._shape, chunks=self._chunks,
                         blocks=self._blocks, cparams=self._cparams, dflt=self._dflt,
                         expectedlen=self._expectedlen)

    def close(self) -> None:
        """Flush and release file handles."""
        self.flush()
        self._layout.close()

    def __enter__(self) -> carray:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            if not self._tail_dirty:
                return
            if self._layout.remote and threading.current_thread() is not \
                    threading.main_thread():
                # A request from a finalizer on another thread can wait forever (on the
                # very thread that would answer it): say so rather than hang.
                warnings.warn(f"{self._rootdir}: garbage-collected with unflushed writes "
                              "off the main thread; they are lost (flush() or use 'with')",
                              ResourceWarning, stacklevel=1)
                return
            self.flush()
        except Exception:  # noqa: BLE001 - never raise from a finalizer
            pass

    def _clip(self, nitems: int) -> None:
        """Hide rows past ``nitems`` without writing anything (read-only table views)."""
        if nitems >= self._shape[0]:
            return
        self._set_length(nitems)
        self._nfull, self._cache, self._tail = nitems // self._chunks[0], None, None
        if self._nleft and self._per_row == 1:
            self._ensure_tail()

    def _zone_map(self) -> ZoneMap | None:
        """The chunk summaries, with entries whose chunk file changed since dropped."""
        if self._zones is None:
            return None
        self._zones.validate(0, self._nfull, self._layout.chunk_stamp)
        self._zones.truncate(self._nfull)
        return self._zones

    def _learn_zone(self, nchunk: int, data: np.ndarray) -> None:
        """Summarise a full chunk decoded for another reason (kept in memory; saved on flush)."""
        if self._zones is not None and nchunk < self._nfull:
            self._zones.update(nchunk, data, self._layout.chunk_stamp(nchunk))
            if self._mode == "r" or self._layout.in_memory:
                self._zones.dirty = False
            else:
                _unflushed.add(self)

    def free_cachemem(self) -> None:
        """Drop the decoded-chunk cache."""
        self._cache = None

    # -- display --------------------------------------------------------------------------

    def __repr__(self) -> str:
        where = f"\n  rootdir := {self._rootdir!r}\n  mode    := {self._mode!r}" \
            if self._rootdir else ""
        blocks = f"; blocks := {self._blocks}" if self._blocks is not None else ""
        return (f"carray({self.shape}, {self._dtype})\n"
                f"  nbytes := {human(self.nbytes)}; cbytes := {human(self.cbytes)}; "
                f"ratio: {self.cratio:.2f}\n"
                f"  cparams := {self._cparams!r}\n"
                f"  chunks := {self._chunks}{blocks}; chunksize: "
                f"{math.prod(self._chunks) * self._dtype.itemsize}"
                f"{where}\n{self}")

    def __str__(self) -> str:
        if len(self) <= 20:
            return np.array2string(self[:])
        head = np.array2string(self[:3])[:-1]
        tail = np.array2string(self[-3:])[1:]
        return f"{head} ... {tail}"
