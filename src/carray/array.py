"""``carray``: a compressed array chunked along its first axis, in memory or on disk.

Rows live in compressed chunks of ``chunklen`` rows, except the last partial
chunk (the *tail*), which stays uncompressed in memory so appends are cheap; it
is compressed and written when it fills, and on ``flush()``/close.  Reads decode
only the chunks a key touches, and inside a chunk only the Blosc blocks of the
rows asked for.  All key handling is in :mod:`carray.grid`.
"""

from __future__ import annotations

import atexit
import os
import weakref
from collections.abc import Iterator
from functools import partial
from typing import Any

import numpy as np

from carray import _parallel
from carray._util import human, quantize, skip_and_limit
from carray.attrs import Attrs
from carray.codecs import blosc
from carray.errors import FormatError, ReadOnlyError, UnsupportedDTypeError
from carray.grid import RowGrid, calc_chunklen, select
from carray.layouts import FORMATS, create_layout, open_layout
from carray.layouts.base import ArrayMeta, Layout
from carray.params import CParams
from carray.zonemap import ZoneMap

_MODES = ("r", "a", "w")
# Reading this many rows or fewer from one chunk goes row by row (one block each).
_SPARSE_ROWS = 8
# An array started empty without expectedlen is assumed to grow this long, so
# row-by-row appends fill chunks of a useful size (bcolz would pick 16 KiB).
_DEFAULT_EXPECTEDLEN = 2**20

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


class carray:  # noqa: N801 - the bcolz name users know
    """A compressed, chunked N-d array, chunked along its first axis.

    Parameters
    ----------
    array : array_like, optional
        Initial content.  Without it, open ``rootdir`` or start empty.
    cparams : CParams or dict, optional
        Compression parameters (default lz4, clevel 5, byte shuffle).
    dtype : dtype, optional
        Convert ``array`` to this dtype (default: its own, or float64 when empty).
    dflt : scalar, optional
        Value for rows added by ``resize`` (default zero).
    expectedlen : int, optional
        How many rows the array is expected to hold; sizes the chunks as bcolz
        does.  Default: the initial length, or 2**20 rows when starting empty.
    chunklen : int, optional
        Rows per chunk (overrides ``expectedlen``).
    rootdir : str or path, optional
        Directory on disk; ``None`` keeps it in memory.
    format : {'superchunk', 'bcolz'}, optional
        On-disk layout of a new ``rootdir`` (default 'superchunk': few files,
        checksums, crash-safe commits; 'bcolz' is bcolz 1.x's one file per
        chunk).  An existing directory is opened in whatever layout it holds.
    storage : dict, optional
        Options of the superchunk layout: ``superchunksize``, ``checksum``,
        ``spare``, ``blosc1`` (at creation) and ``verify`` (also when opening).
    safe : bool
        Kept for bcolz compatibility; conversions are always checked.
    mode : {'a', 'r', 'w'}
        'r' reads and never writes anything; 'a' reads and writes (creating
        refuses to overwrite); 'w' replaces what is there.
    allow_pickle : bool
        Allow opening bcolz ``object`` arrays, whose items are pickles.
    fsync : bool
        Make flushed data durable with fsync (default True).

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
                 safe: bool = True, mode: str = "a", *, allow_pickle: bool = False,
                 fsync: bool = True, format: str | None = None,  # noqa: A002
                 storage: dict | None = None) -> None:
        if mode not in _MODES:
            raise ValueError(f"mode must be one of {_MODES}, got {mode!r}")
        if format is not None and format not in FORMATS:
            raise ValueError(f"format must be one of {FORMATS}, got {format!r}")
        self._format, self._storage = format, dict(storage or {})
        self._mode = mode
        self._objects: np.ndarray | None = None
        self._cache: tuple[int, np.ndarray] | None = None
        self._tail_dirty = False
        rootdir = os.fspath(rootdir) if rootdir is not None else None
        self._rootdir = rootdir

        if rootdir is not None and array is None and os.path.exists(rootdir):
            self._open(rootdir, mode, allow_pickle, fsync)
            if mode == "w":
                self.resize(0)
            return
        if mode == "r":
            if rootdir is None:
                raise ValueError("mode 'r' needs an existing rootdir")
            from carray.errors import ContainerNotFoundError

            raise ContainerNotFoundError(f"{rootdir}: no such carray directory")
        self._create(array, cparams, dtype, dflt, expectedlen, chunklen, rootdir, mode, fsync)

    # -- construction ---------------------------------------------------------------------

    def _create(self, array, cparams, dtype, dflt, expectedlen, chunklen, rootdir, mode,
                fsync) -> None:
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
        atomshape = atom + tuple(data.shape[1:])
        if base == np.dtype(object):
            raise UnsupportedDTypeError(
                "object arrays cannot be stored: their items would have to be pickled")
        if base.itemsize == 0 and base.kind in "SUV":
            raise UnsupportedDTypeError(f"dtype {base} has zero-size items")
        cp = CParams.coerce(cparams)
        length = len(data)
        if expectedlen is not None:
            expected = int(expectedlen)
        else:
            expected = length or _DEFAULT_EXPECTEDLEN
        rowsize = base.itemsize * int(np.prod(atomshape, dtype=np.int64))
        if chunklen is None:
            chunklen = calc_chunklen(expected, rowsize)
        elif not isinstance(chunklen, (int, np.integer)) or chunklen < 1:
            raise ValueError(f"chunklen must be a positive int, got {chunklen!r}")
        dflt_arr = np.zeros((), dtype=base) if dflt is None else np.asarray(dflt, dtype=base)
        if dflt_arr.ndim:
            raise ValueError("dflt must be a scalar")
        meta = ArrayMeta(dtype=base, atomshape=atomshape, length=0, chunklen=int(chunklen),
                         cparams=cp, dflt=dflt_arr, expectedlen=expected)
        layout = create_layout(rootdir, meta, format=self._format, mode=mode, fsync=fsync,
                               storage=self._storage)
        self._init_state(layout, meta, cbytes=0)
        if length:
            if isinstance(data, carray):
                for block in data.iterblocks():
                    self.append(block)
            else:
                self.append(data.reshape((length, *atomshape)))
        if not layout.in_memory:
            self.flush()

    def _open(self, rootdir: str, mode: str, allow_pickle: bool, fsync: bool) -> None:
        layout, meta, cbytes = open_layout(rootdir, readonly=(mode == "r"), fsync=fsync,
                                           allow_pickle=allow_pickle, storage=self._storage)
        self._init_state(layout, meta, cbytes)
        if meta.dtype == np.dtype(object):
            self._objects = layout.read_objects(meta.length)
            return
        if self._nleft:
            self._load_tail()

    def _init_state(self, layout: Layout, meta: ArrayMeta, cbytes: int) -> None:
        self._layout = layout
        self._dtype = meta.dtype
        self._atomshape = meta.atomshape
        self._chunklen = meta.chunklen
        self._cparams = meta.cparams
        self._dflt = np.asarray(meta.dflt, dtype=meta.dtype)
        self._expectedlen = meta.expectedlen
        self._rowsize = meta.rowsize
        self._grid = RowGrid(meta.chunklen)
        self._typesize = blosc.blosc_typesize(meta.dtype)
        self._len = meta.length
        self._nfull = meta.length // meta.chunklen
        self._cbytes = cbytes
        self._tail = np.zeros((meta.chunklen, *meta.atomshape), dtype=meta.dtype)
        self._attrs = Attrs(layout, self._mode)
        self._zones = ZoneMap.load(layout, meta)

    def _load_tail(self) -> None:
        """Decode the persisted partial chunk into the tail buffer."""
        chunk = self._layout.read_chunk(self._nfull)
        path = self._chunk_path(self._nfull)
        header = blosc.validate_chunk(chunk, None, path)
        want = self._nleft * self._rowsize
        if header.nbytes == want:
            blosc.decompress_into(chunk, self._tail[: self._nleft], path)
        elif want < header.nbytes <= self._chunklen * self._rowsize and \
                header.nbytes % self._rowsize == 0:
            # A chunk that filled after the last flush: its first rows are ours.
            rows = header.nbytes // self._rowsize
            blosc.decompress_into(chunk, self._tail[:rows], path)
        else:
            raise FormatError(
                f"last chunk holds {header.nbytes} bytes, expected {want}", path)

    # -- properties -----------------------------------------------------------------------

    @property
    def _nleft(self) -> int:
        return self._len - self._nfull * self._chunklen

    @property
    def dtype(self) -> np.dtype:
        """The dtype of one value (the base dtype; rows may hold several)."""
        return self._dtype

    @property
    def shape(self) -> tuple[int, ...]:
        return (self._len, *self._atomshape)

    @property
    def ndim(self) -> int:
        return 1 + len(self._atomshape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def len(self) -> int:
        return self._len

    def __len__(self) -> int:
        return self._len

    @property
    def itemsize(self) -> int:
        return self._dtype.itemsize

    @property
    def nbytes(self) -> int:
        """Uncompressed size in bytes."""
        return self._len * self._rowsize

    @property
    def cbytes(self) -> int:
        """Compressed size in bytes (the uncompressed tail buffer counts in full, as bcolz)."""
        return self._cbytes + self._tail.nbytes

    @property
    def cratio(self) -> float:
        return self.nbytes / self.cbytes if self.cbytes else 0.0

    @property
    def chunklen(self) -> int:
        return self._chunklen

    @property
    def chunks(self) -> tuple[int, ...]:
        """The chunk shape."""
        return (self._chunklen, *self._atomshape)

    @property
    def nchunks(self) -> int:
        """Number of full, compressed chunks."""
        return self._nfull

    @property
    def leftover(self) -> int:
        """Rows in the last, partial chunk."""
        return self._nleft

    nleftover = leftover

    @property
    def partitions(self) -> list[tuple[int, int]]:
        """``(start, stop)`` row ranges of every chunk, the partial one included."""
        cl = self._chunklen
        return [(i * cl, min((i + 1) * cl, self._len)) for i in range(self._grid.nchunks(self._len))]

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

    # -- reading --------------------------------------------------------------------------

    def _chunk_path(self, nchunk: int) -> str | None:
        return self._layout.chunk_path(nchunk)

    def _decoded_chunk(self, nchunk: int) -> np.ndarray:
        """Chunk ``nchunk`` decoded (cached: the last one decoded is kept)."""
        if self._cache is not None and self._cache[0] == nchunk:
            return self._cache[1]
        out = np.empty((self._chunklen, *self._atomshape), dtype=self._dtype)
        blosc.decompress_into(self._layout.read_chunk(nchunk), out, self._chunk_path(nchunk))
        self._cache = (nchunk, out)
        return out

    def _decode_rows(self, nchunk: int, start: int, stop: int, out: np.ndarray) -> None:
        """Rows ``[start, stop)`` of full chunk ``nchunk`` into ``out`` (C-contiguous)."""
        if self._cache is not None and self._cache[0] == nchunk:
            out[...] = self._cache[1][start:stop]
        elif start == 0 and stop == self._chunklen:
            blosc.decompress_into(self._layout.read_chunk(nchunk), out,
                                  self._chunk_path(nchunk))
        elif self._layout.in_memory:
            chunk = self._layout.read_chunk(nchunk)
            header = blosc.validate_chunk(chunk, self._chunklen * self._rowsize)
            blosc.getitem_into(chunk, start * self._rowsize, out, None, header)
        else:
            read_at, size = self._layout.chunk_reader(nchunk)
            blosc.getitem_ranged(read_at, start * self._rowsize, out, size,
                                 self._chunk_path(nchunk), self._chunklen * self._rowsize)

    def _read_span(self, nchunk: int, start: int, stop: int, step: int,
                   out: np.ndarray) -> None:
        if nchunk >= self._nfull:
            out[...] = self._tail[start:stop:step]
        elif step == 1:
            self._decode_rows(nchunk, start, stop, out)
        elif self._cache is not None and self._cache[0] == nchunk:
            out[...] = self._cache[1][start:stop:step]
        elif stop - start == self._chunklen or (stop - start) > self._chunklen // 2:
            out[...] = self._decoded_chunk(nchunk)[start:stop:step]
        else:
            tmp = np.empty((stop - start, *self._atomshape), dtype=self._dtype)
            self._decode_rows(nchunk, start, stop, tmp)
            out[...] = tmp[::step]

    def _read_range(self, rows: range, out: np.ndarray | None = None) -> np.ndarray:
        if rows.step < 0:
            return self._read_range(rows[::-1])[::-1]
        if out is None:
            out = np.empty((len(rows), *self._atomshape), dtype=self._dtype)
        if not len(rows):
            return out
        whole = []
        for s in self._grid.spans(rows.start, rows.stop, rows.step):
            dest = out[s.out_start:s.out_start + s.count]
            if s.step == 1 and s.start == 0 and s.stop == self._chunklen and \
                    s.nchunk < self._nfull and not (self._cache and self._cache[0] == s.nchunk):
                whole.append((s.nchunk, dest))
            else:
                self._read_span(s.nchunk, s.start, s.stop, s.step, dest)
        # Blosc's own threads meet at the end of every chunk, which costs more than it
        # saves at these sizes: whole chunks decode single-threaded, several at once.
        _parallel.run([partial(self._decode_whole, n, dest) for n, dest in whole])
        return out

    def _decode_whole(self, nchunk: int, out: np.ndarray) -> None:
        """A full chunk into ``out`` on this thread's own context (safe in parallel).

        Layouts that keep unshared state fetch the bytes in turns; decoding, the
        expensive part, never waits.
        """
        if self._layout.concurrent_reads:
            chunk = self._layout.read_chunk_into(nchunk, _parallel.scratch)
        else:
            with _parallel.io_lock:
                chunk = self._layout.read_chunk(nchunk)
        _parallel.decoder().decompress_into(chunk, out, self._chunk_path(nchunk))

    def _read_row(self, row: int) -> np.ndarray:
        nchunk, local = divmod(row, self._chunklen)
        if nchunk >= self._nfull:
            return self._tail[local].copy()
        out = np.empty((1, *self._atomshape), dtype=self._dtype)
        self._decode_rows(nchunk, local, local + 1, out)
        return out[0]

    def _read_rows(self, rows: np.ndarray) -> np.ndarray:
        out = np.empty((len(rows), *self._atomshape), dtype=self._dtype)
        for nchunk, local, pos in self._grid.groups(rows):
            if nchunk >= self._nfull:
                out[pos] = self._tail[local]
            elif len(local) <= _SPARSE_ROWS:
                for r, p in zip(local.tolist(), pos.tolist(), strict=True):
                    self._decode_rows(nchunk, r, r + 1, out[p:p + 1])
            else:
                lo, hi = int(local[0]), int(local[-1]) + 1
                tmp = np.empty((hi - lo, *self._atomshape), dtype=self._dtype)
                self._decode_rows(nchunk, lo, hi, tmp)
                out[pos] = tmp[local - lo]
        return out

    def _read(self, rows: int | range | np.ndarray) -> np.ndarray:
        if isinstance(rows, int):
            return self._read_row(rows)
        if isinstance(rows, range):
            return self._read_range(rows)
        return self._read_rows(rows)

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, carray):
            key = key[:]
        if isinstance(key, str):
            raise TypeError("string (expression) keys need a ctable; use carray.eval")
        if self._objects is not None:
            return self._objects[key]
        sel = select(key, self.shape)
        result = self._read(sel.rows)
        if sel.post is not None:
            result = result[sel.post]
        return result

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        out = self[:]
        return out if dtype is None else out.astype(dtype, copy=False)

    def __iter__(self) -> Iterator[Any]:
        return self.iter()

    def iter(self, start: int = 0, stop: int | None = None, step: int = 1,
             limit: int | None = None, skip: int = 0) -> Iterator[Any]:
        """Iterate over rows ``start:stop:step``, skipping ``skip`` and yielding at most ``limit``."""
        if step <= 0:
            raise NotImplementedError("iter needs a positive step")
        rows = range(self._len)[start:stop:step]
        blen = max(self._chunklen, 1)
        blocks = (self._read_range(rows[i:i + blen]) for i in range(0, len(rows), blen))
        return skip_and_limit(blocks, skip, limit)

    def iterblocks(self, blen: int | None = None, start: int = 0,
                   stop: int | None = None) -> Iterator[np.ndarray]:
        """Iterate over consecutive blocks of ``blen`` rows (default: the chunk length)."""
        blen = blen or self._chunklen
        if blen < 1:
            raise ValueError("blen must be positive")
        rows = range(self._len)[start:stop]
        for i in range(0, len(rows), blen):
            if self._objects is not None:
                yield self._objects[rows[i:i + blen].start:rows[i:i + blen].stop]
            else:
                yield self._read_range(rows[i:i + blen])

    def where(self, boolarr: Any, limit: int | None = None, skip: int = 0) -> Iterator[Any]:
        """Iterate over the values where ``boolarr`` (same length, bool) is true."""
        if self.ndim != 1:
            raise NotImplementedError("where works on 1-d arrays")
        if len(boolarr) != self._len:
            raise ValueError(f"boolarr has length {len(boolarr)}, expected {self._len}")
        mask_src = boolarr if isinstance(boolarr, carray) else np.asarray(boolarr)
        if mask_src.dtype != bool:
            raise TypeError("boolarr must be of bool dtype")
        def blocks() -> Iterator[np.ndarray]:
            for i in range(0, self._len, self._chunklen):
                mask = np.asarray(mask_src[i:i + self._chunklen])
                if mask.any():
                    yield self._read_range(range(i, min(i + self._chunklen, self._len)))[mask]

        return skip_and_limit(blocks(), skip, limit)

    def wheretrue(self, limit: int | None = None, skip: int = 0) -> Iterator[int]:
        """Iterate over the indices where this (bool) array is true."""
        if self._dtype.kind != "b" or self.ndim != 1:
            raise TypeError("wheretrue needs a 1-d bool carray")
        blocks = (np.flatnonzero(self._read_range(range(i, min(i + self._chunklen, self._len))))
                  + i for i in range(0, self._len, self._chunklen))
        return (int(i) for i in skip_and_limit(blocks, skip, limit))

    def sum(self, dtype: Any = None) -> Any:
        """Sum of all values, computed chunk by chunk."""
        if self._dtype.kind in "SUVO":
            raise TypeError(f"cannot sum values of dtype {self._dtype}")
        acc_dtype = np.dtype(dtype) if dtype is not None else \
            np.sum(np.zeros(1, dtype=self._dtype)).dtype
        total = acc_dtype.type(0)
        for block in self.iterblocks():
            total = total + block.sum(dtype=acc_dtype)
        return acc_dtype.type(total)

    # -- writing --------------------------------------------------------------------------

    def _writable(self) -> None:
        if self._mode == "r":
            raise ReadOnlyError(f"{self._rootdir or 'carray'}: opened in mode 'r'")
        if self._objects is not None:
            raise UnsupportedDTypeError("object carrays are read-only")

    def _compress(self, data: np.ndarray, quantized: bool = False) -> bytes:
        if self._cparams.quantize and self._dtype.kind == "f" and not quantized:
            data = quantize(data, self._cparams.quantize)
        if self._layout.blosc1:
            return blosc.compress1(data, self._typesize, self._cparams)
        return blosc.compress2(data, self._typesize, self._cparams)

    def _store_chunk(self, nchunk: int, data: np.ndarray) -> None:
        if self._cparams.quantize and self._dtype.kind == "f":
            data = quantize(data, self._cparams.quantize)
        self._cbytes += self._layout.write_chunk(nchunk, self._compress(data, quantized=True))
        if self._cache is not None and self._cache[0] == nchunk:
            self._cache = None
        if self._zones is not None:
            self._zones.update(nchunk, data, self._layout.chunk_stamp(nchunk))

    def _mark_dirty(self) -> None:
        self._tail_dirty = True
        if not self._layout.in_memory:
            _unflushed.add(self)

    def _as_rows(self, array: Any) -> np.ndarray:
        arr = array[:] if isinstance(array, carray) else array
        arr = np.asarray(arr, dtype=self._dtype)
        if arr.shape == self._atomshape:
            arr = arr.reshape((1, *self._atomshape))
        if arr.shape[1:] != self._atomshape:
            raise ValueError(
                f"cannot append rows of shape {arr.shape[1:]} to a carray whose rows have "
                f"shape {self._atomshape}")
        return arr

    def append(self, array: Any) -> None:
        """Append rows (or a single row) at the end.

        Only full chunks are compressed and stored; the rest waits in the tail
        until it fills or the array is flushed.
        """
        self._writable()
        arr = self._as_rows(array)
        n = len(arr)
        if n == 0:
            return
        cl, pos = self._chunklen, 0
        nleft = self._nleft
        if nleft:
            take = min(cl - nleft, n)
            self._tail[nleft:nleft + take] = arr[:take]
            pos = take
            self._len += take
            if nleft + take == cl:  # the tail just filled
                self._store_chunk(self._nfull, self._tail)
                self._nfull += 1
                self._tail_dirty = False
            else:
                self._mark_dirty()
        while n - pos >= cl:
            self._store_chunk(self._nfull, arr[pos:pos + cl])
            self._nfull += 1
            self._len += cl
            pos += cl
        if pos < n:
            rest = n - pos
            self._tail[:rest] = arr[pos:]
            self._len += rest
            self._mark_dirty()

    def _write_chunk_rows(self, nchunk: int, local: Any, values: np.ndarray) -> None:
        """Assign ``values`` to rows ``local`` (slice or int array) of chunk ``nchunk``."""
        if nchunk >= self._nfull:
            self._tail[local] = values
            self._mark_dirty()
            return
        if isinstance(local, slice) and local == slice(0, self._chunklen, 1):
            self._store_chunk(nchunk, np.ascontiguousarray(values))
            return
        chunk = self._decoded_chunk(nchunk).copy()
        chunk[local] = values
        self._store_chunk(nchunk, chunk)
        self._cache = (nchunk, chunk)

    def _write(self, rows: int | range | np.ndarray, values: np.ndarray) -> None:
        if isinstance(rows, int):
            nchunk, local = divmod(rows, self._chunklen)
            self._write_chunk_rows(nchunk, slice(local, local + 1), values.reshape(
                (1, *self._atomshape)))
        elif isinstance(rows, range):
            if rows.step < 0:
                rows, values = rows[::-1], values[::-1]
            if len(rows) == 0:
                return
            for s in self._grid.spans(rows.start, rows.stop, rows.step):
                self._write_chunk_rows(s.nchunk, slice(s.start, s.stop, s.step),
                                       values[s.out_start:s.out_start + s.count])
        else:
            for nchunk, local, pos in self._grid.groups(rows):
                self._write_chunk_rows(nchunk, local, values[pos])

    def __setitem__(self, key: Any, value: Any) -> None:
        self._writable()
        if isinstance(key, carray):
            key = key[:]
        sel = select(key, self.shape)
        if sel.post is None:
            row_shape = self._atomshape if isinstance(sel.rows, int) else \
                (sel.nrows, *self._atomshape)
            values = np.broadcast_to(np.asarray(value, dtype=self._dtype), row_shape)
        else:
            values = self._read(sel.rows)
            values[sel.post] = value
        self._write(sel.rows, values)

    def resize(self, nitems: int) -> None:
        """Grow (with ``dflt``) or shrink to ``nitems`` rows."""
        self._writable()
        if nitems < 0:
            raise ValueError("nitems must be >= 0")
        if nitems > self._len:
            self._grow(nitems)
        elif nitems < self._len:
            self._shrink(nitems)
        self.flush()

    def _grow(self, nitems: int) -> None:
        cl = self._chunklen
        nleft = self._nleft
        if nleft:
            fill = min(cl - nleft, nitems - self._len)
            self.append(np.broadcast_to(self._dflt, (fill, *self._atomshape)))
        full = np.broadcast_to(self._dflt, (cl, *self._atomshape))
        nchunks = (nitems - self._len) // cl
        if nchunks:
            chunk = self._compress(np.ascontiguousarray(full))
            for _ in range(nchunks):  # one compressed chunk, written many times
                self._cbytes += self._layout.write_chunk(self._nfull, chunk)
                if self._zones is not None:
                    self._zones.update(self._nfull, full[:1], self._layout.chunk_stamp(self._nfull))
                self._nfull += 1
                self._len += cl
        if nitems > self._len:
            self.append(full[: nitems - self._len])

    def _shrink(self, nitems: int) -> None:
        cl = self._chunklen
        new_full, new_left = divmod(nitems, cl)
        if new_full < self._nfull:
            if new_left:
                self._tail[:new_left] = self._decoded_chunk(new_full)[:new_left]
            self._cache = None
            # On disk the chunk holding the new tail stays until flush rewrites it.
            keep = 1 if new_left and not self._layout.in_memory else 0
            self._nfull, self._len = new_full, nitems
            self._tail_dirty = bool(new_left)
            # Record the shorter length before deleting files, so a crash in between
            # leaves a readable array (readers ignore files past the length).
            self.flush()
            self._cbytes += self._layout.drop_chunks(new_full + keep)
            if self._zones is not None:
                self._zones.truncate(new_full)
        else:
            self._len = nitems
            self._mark_dirty()

    def trim(self, nitems: int) -> None:
        """Remove the last ``nitems`` rows (a negative count grows the array)."""
        if nitems > self._len:
            raise ValueError(f"cannot trim {nitems} rows from a carray of {self._len}")
        self.resize(self._len - nitems)

    def flush(self) -> None:
        """Write the partial last chunk and the sizes; no-op in memory or mode 'r'."""
        if self._mode == "r" or self._layout.in_memory or self._objects is not None:
            return
        if self._tail_dirty and self._nleft:
            self._cbytes += self._layout.write_chunk(self._nfull, self._compress(
                self._tail[: self._nleft]))
        self._tail_dirty = False
        if self._zones is not None and self._zones.dirty:
            self._zones.truncate(self._nfull)
            self._zones.save(self._layout)
        self._layout.commit(self._meta(), self._cbytes)
        _unflushed.discard(self)

    def _meta(self) -> ArrayMeta:
        return ArrayMeta(dtype=self._dtype, atomshape=self._atomshape, length=self._len,
                         chunklen=self._chunklen, cparams=self._cparams, dflt=self._dflt,
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
            if self._tail_dirty:
                self.flush()
        except Exception:  # noqa: BLE001 - never raise from a finalizer
            pass

    def _clip(self, nitems: int) -> None:
        """Hide rows past ``nitems`` without writing anything (read-only table views)."""
        if nitems >= self._len:
            return
        self._len, self._nfull, self._cache = nitems, nitems // self._chunklen, None
        if self._nleft:
            self._load_tail()

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

    # -- copies ---------------------------------------------------------------------------

    def copy(self, **kwargs: Any) -> carray:
        """A new carray with the same rows; keyword arguments as for the constructor."""
        args = dict(cparams=self._cparams, dflt=self._dflt[()], expectedlen=self._len,
                    chunklen=self._chunklen)
        if "expectedlen" in kwargs and "chunklen" not in kwargs:
            args.pop("chunklen")
        args.update(kwargs)
        dtype = args.pop("dtype", None)
        base = np.dtype((self._dtype, self._atomshape)) if self._atomshape else self._dtype
        out = carray(np.empty((0,), dtype=base), dtype=dtype, **args)
        for block in self.iterblocks():
            out.append(block if dtype is None else block.astype(out.dtype))
        out.flush()
        return out

    def __repr__(self) -> str:
        where = f"\n  rootdir := {self._rootdir!r}\n  mode    := {self._mode!r}" \
            if self._rootdir else ""
        return (f"carray({self.shape}, {self._dtype})\n"
                f"  nbytes := {human(self.nbytes)}; cbytes := {human(self.cbytes)}; "
                f"ratio: {self.cratio:.2f}\n"
                f"  cparams := {self._cparams!r}\n"
                f"  chunklen := {self._chunklen}; chunksize: {self._chunklen * self._rowsize}"
                f"{where}\n{self}")

    def __str__(self) -> str:
        if self._len <= 20:
            return np.array2string(self[:])
        head = np.array2string(self[:3])[:-1]
        tail = np.array2string(self[-3:])[1:]
        return f"{head} ... {tail}"
