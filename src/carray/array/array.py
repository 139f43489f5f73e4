"""``carray``: a compressed N-d array in chunks, in memory or on disk.

A carray is a facade over an :class:`carray.engine.ArrayEngine`, which owns the
storage state (layout, chunk grid, the decoded tail of rows, caches, sizes).  The
facade turns numpy keys into selections (:mod:`carray.chunks.keys`), values into the
array's dtype and row shape, and offers bcolz's API on top.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

import numpy as np

from carray.array import bcolz_methods as _bcolz_array
from carray.array import portable as _portable
from carray.array import rechunk as rechunking
from carray.array import rows as _rows
from carray.array import transfer
from carray.array.container import (
    Container,
    check_mode,
    pinned_mode,
    refuse_own_source,
    version_asked,
)
from carray.array.indexers import Indexer, is_int, plain
from carray.array.meta import fortran_meta, new_meta, object_items, object_meta, wants_objects
from carray.array.order import check_order, stored_ckey, stored_okey
from carray.attrs.mapping import Attrs
from carray.chunks.grid import NDGrid
from carray.chunks.keys import CoordKey, OrthoKey, coordinate_key, needs_coordinates, orthogonal_key
from carray.compute import ComputeMixin, masks, register_array_type
from carray.compute.zonemap import ZoneMap
from carray.core.defaults import defaults
from carray.core.dtypes import fitted_text
from carray.core.params import CParams
from carray.core.util import whole_count
from carray.engine import ArrayEngine
from carray.engine.chunkstats import ChunkStats, of_values
from carray.errors import (
    ContainerNotFoundError,
    FormatError,
    StorageError,
    ValueConversionError,
)
from carray.layouts import FORMATS, ArrayMeta, default_format
from carray.stores import LOCAL, resolve

_T = TypeVar("_T")
# Reads redone in mode 'r' when files changed under a reader of an array without
# versions (bcolz, b2nd: files a writer rewrites in place), and what that raises.
_REREADS = 3
_CHANGED_UNDER_US = (FormatError, StorageError, FileNotFoundError)


class carray(Container, ComputeMixin):  # noqa: N801 - bcolz's name
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
        Layout options: ``verify`` (True: reads check digests; "full": ranged
        reads check whole chunks; False: no checks) and ``lock_timeout`` (seconds a
        writer waits for another process's writer to close, default 10; see
        :mod:`carray.stores.lock`) for every layout on disk; for 'superchunk'
        ``superchunksize``, ``checksum``, ``spare``, ``blosc1``; for 'b2nd'
        ``contiguous``.
    safe : bool
        Kept for bcolz compatibility; conversions are always checked.
    mode : {'a', 'r', 'w'}, optional
        'r' reads and never writes anything; 'a' (the default) reads and writes
        (creating refuses to overwrite); 'w' replaces what is there (see
        :func:`carray.open`).  An earlier version opens with 'r' (the default then).
    allow_pickle : bool
        Allow storing and opening bcolz ``object`` arrays, whose items are pickles (an
        array of objects in memory needs no opt-in: it keeps the objects themselves).
    fsync : bool
        Make flushed data durable with fsync (default True).
    storage_options : dict, optional
        Passed to the fsspec file system of a URL ``rootdir`` (credentials,
        endpoint, ...).
    version, tag, as_of : optional
        Open an earlier version of a stored array, read-only: by its id, by a tag
        :meth:`snapshot` gave it, or the newest made at or before a time (a
        ``datetime``, ``date``, ``numpy.datetime64``, ``pandas.Timestamp`` or ISO 8601
        string; naive times are local time).  A writable ``mode`` with one of them
        raises :class:`carray.errors.ModeError`.

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
                 safe: bool = True, mode: str | None = None, *, chunks: Any = None,
                 blocks: Any = None,
                 allow_pickle: bool = False, fsync: bool = True,
                 format: str | None = None,  # noqa: A002
                 storage: dict | None = None, storage_options: dict | None = None,
                 order: str = "C", version: str | None = None, tag: str | None = None,
                 as_of: Any = None) -> None:
        at = version_asked(version, tag, as_of)
        mode = check_mode(pinned_mode(mode, at) or "a")  # an earlier version: read-only
        check_order(order)
        self._safe = bool(safe)
        self._view_of: carray | None = None
        if format is not None and format not in FORMATS:
            raise ValueError(f"format must be one of {FORMATS}, got {format!r}")
        self._storage = dict(storage or {})
        self._mode = mode
        rootdir = os.fspath(rootdir) if rootdir is not None else None
        self._rootdir = rootdir
        self._storage_options = storage_options
        store, path = resolve(rootdir, storage_options) if rootdir is not None \
            else (LOCAL, None)
        # In memory the objects are kept as they are: only files hold pickles.
        objects = (allow_pickle or rootdir is None) and \
            wants_objects(array.dtype if isinstance(array, (carray, np.ndarray)) else None, dtype)
        if format is None:
            # '.b2nd' paths are frames; pickled objects live in bcolz directories only; a
            # table's column takes its table's format, never the process-wide default.
            stored = rootdir is not None and "member" not in self._storage
            format = "bcolz" if objects and rootdir is not None else \
                default_format(rootdir, defaults.format if stored else None)  # noqa: A001
        if rootdir is not None and array is None and path is not None and store.exists(path):
            engine = ArrayEngine.open(path, store=store, mode=mode, fsync=fsync,
                                      allow_pickle=allow_pickle, storage=self._storage, at=at)
            self._attach(engine)
            if mode == "w":
                self.resize(0)
            return
        if mode == "r":
            if rootdir is None:
                raise ValueError("mode 'r' needs an existing rootdir")
            raise ContainerNotFoundError(f"{rootdir}: no such carray directory")
        if objects:
            data = object_items(array[:] if isinstance(array, carray) else array)
            meta = object_meta(cparams, expectedlen, format if rootdir else None)
        else:
            data = self._initial_data(array, dtype)
            meta = new_meta(data, np.dtype(dtype) if dtype is not None else data.dtype,
                            cparams, dflt, expectedlen, chunklen, chunks, blocks, format)
        if order == "F":
            meta = fortran_meta(meta, format)
        refuse_own_source(rootdir, [array])
        engine = ArrayEngine.create(path, meta, store=store, format=format, mode=mode,
                                    fsync=fsync, storage=self._storage)
        self._attach(engine)
        try:
            self._fill(data, meta, objects)
        except BaseException:
            # Hold no lock or file: a traceback may keep this half-made array.
            with contextlib.suppress(Exception):
                self.discard()
            raise

    def _fill(self, data: Any, meta: ArrayMeta, objects: bool) -> None:
        """A new array's first items, flushed."""
        if not meta.shape:
            self._engine.write(orthogonal_key((), ()), np.asarray(data, dtype=meta.dtype))
        elif objects:
            self.append(data)
        elif len(data):
            if isinstance(data, carray):
                for block in data.iterblocks():
                    self.append(block)
            else:
                self.append(data.reshape((len(data), *self.shape[1:])))
        self.flush()

    # -- construction ---------------------------------------------------------------------

    @staticmethod
    def _initial_data(array: Any, dtype: Any) -> Any:
        """What a new array starts with: a carray to copy block by block, else an ndarray."""
        data: Any
        if array is None:
            data = np.empty(0, dtype=np.dtype(dtype) if dtype is not None else np.float64)
        elif isinstance(array, carray) and array.shape:
            data = array
            if dtype is not None and np.dtype(dtype) != array.dtype:
                data = array[:].astype(dtype)
        elif isinstance(array, carray):
            data = np.asarray(array[()], dtype=array.dtype)
        else:
            data = np.asarray(array, dtype=dtype)
        return data

    def _attach(self, engine: ArrayEngine) -> None:
        self._engine = engine
        engine.on_takeover(self.abandon)  # a later mode='w' open here closes this handle
        engine.on_handover(self._yield_writing)  # a later bcolz open here takes writing
        self._attrs = Attrs(engine, self._mode)
        self._zones = ZoneMap.attach(engine)

    def _history(self) -> Any:
        return self._engine.history

    def storage_kind(self) -> str:
        """What this array is as a table's column (see :mod:`carray.table.store`)."""
        return "array"

    @property
    def version(self) -> str | None:
        """The id of the version this array shows (None where there are no versions)."""
        return self._engine.version_id

    @property
    def engine(self) -> ArrayEngine:
        """The engine holding this array's storage state (for integrations and tables)."""
        return self._engine

    def reopen(self) -> None:
        """Drop this handle's state and read the array again from storage (after other
        processes wrote it, e.g. :func:`carray.integrations.dask.store`).  A reader of a
        versioned array reads the version it holds again (:meth:`refresh` moves it)."""
        if self._rootdir is None:
            return
        held = self._held_version()
        self._engine.release()
        store, path = resolve(self._rootdir, self._storage_options)
        assert path is not None
        mode = "a" if self._mode == "w" else self._mode
        self._attach(ArrayEngine.open(path, store=store, mode=mode, fsync=self._engine.fsync,
                                      allow_pickle=self._engine.objects is not None,
                                      storage=self._storage,
                                      at=None if held is None else {"version": held}))

    def _yield_writing(self, reason: str) -> None:
        """Flush, then go on reading only (mode 'r'): a later writable open of this process
        took writing over (bcolz directories: see :mod:`carray.stores.lock`); a write
        raises :class:`~carray.errors.ReadOnlyError` saying ``reason``."""
        self.flush()
        self._mode = "r"
        self.reopen()  # the lock is no longer this handle's: releasing it does nothing
        self._engine.refuse_writes(reason)

    def _held_version(self) -> str | None:
        """The version a reader holds (None: a writer, or an array without versions)."""
        return self._engine.version_id if self._mode == "r" else None

    def reopen_args(self) -> dict[str, Any]:
        """Keyword arguments that open this stored array again (mode 'a' or 'r')."""
        # A table's column reopens on its own (read-only): its table is not sent along.
        storage = {k: v for k, v in self._storage.items() if k != "member"}
        args = dict(rootdir=self._rootdir, mode="r" if self._mode == "r" or
                    "member" in self._storage else "a",
                    allow_pickle=self._engine.objects is not None, fsync=self._engine.fsync,
                    storage=storage, storage_options=self._storage_options)
        held = self._held_version()
        if held is not None:
            args["version"] = held  # the version it holds, not whatever is newest
        return args

    # -- properties -----------------------------------------------------------------------

    @property
    def dtype(self) -> np.dtype:
        """The dtype of one item."""
        return self._engine.dtype

    @property
    def shape(self) -> tuple[int, ...]:
        shape = self._engine.shape
        return shape[::-1] if self._engine.order == "F" else shape

    @property
    def order(self) -> str:
        """'C', or 'F' for an array stored (and read back) in Fortran order."""
        return self._engine.order

    @property
    def ndim(self) -> int:
        return len(self._engine.shape)  # the same in either order

    @property
    def size(self) -> int:
        return math.prod(self._engine.shape)

    @property
    def len(self) -> int:
        return len(self)

    def __len__(self) -> int:
        shape = self.shape
        if not shape:
            raise TypeError("len() of a 0-d carray")
        return shape[0]

    @property
    def itemsize(self) -> int:
        return self._engine.dtype.itemsize

    @property
    def nbytes(self) -> int:
        """Uncompressed size in bytes."""
        return self.size * self._engine.dtype.itemsize

    @property
    def cbytes(self) -> int:
        """Compressed size in bytes: stored chunks, plus rows not compressed yet."""
        return self._engine.cbytes

    def __sizeof__(self) -> int:
        """What ``sys.getsizeof`` reports: the compressed size, as bcolz reports it."""
        return self.cbytes

    @property
    def cratio(self) -> float:
        return self.nbytes / self.cbytes if self.cbytes else 0.0

    @property
    def chunklen(self) -> int:
        """Rows per chunk: the chunk size along the first axis."""
        if not self.ndim:
            return 1
        # The engine's own chunks: never 0, as a Blosc2 frame may record on an empty axis.
        chunks = self._engine.chunks
        return chunks[-1] if self._engine.order == "F" else chunks[0]

    @property
    def chunks(self) -> tuple[int, ...]:
        """The chunk shape (as the file records it: a Blosc2 frame may say 0 along an
        empty axis)."""
        chunks = self._engine.declared_chunks
        return chunks[::-1] if self._engine.order == "F" else chunks

    @property
    def blocks(self) -> tuple[int, ...] | None:
        """The block shape inside a chunk (None: Blosc's own blocks over C order)."""
        blocks = self._engine.blocks
        if blocks is None:
            return None
        if self._engine.order == "F":
            blocks = blocks[::-1]
        return tuple(0 if c == 0 else b for c, b in zip(self.chunks, blocks, strict=True))

    @property
    def grid(self) -> NDGrid:
        """The chunk grid (chunks and blocks along every axis)."""
        return self._engine.grid

    @property
    def nchunks(self) -> int:
        """Number of compressed chunks in complete runs of rows (bcolz: full chunks)."""
        return self._engine.nfull * self._engine.per_row

    @property
    def leftover(self) -> int:
        """Rows in the last, partial run of chunk rows (0 for a Fortran-order array of
        several axes: its rows are the stored array's last axis, always written whole)."""
        if self._engine.order == "F" and self.ndim > 1:
            return 0
        return self._engine.leftover

    nleftover = leftover

    @property
    def partitions(self) -> list[tuple[int, int]]:
        """``(start, stop)`` row ranges of every run of chunk rows, the partial one included."""
        if not self.ndim:
            return []
        cl, n = self.chunklen, len(self)
        return [(i, min(i + cl, n)) for i in range(0, n, cl)]

    @property
    def cparams(self) -> CParams:
        return self._engine.cparams

    @property
    def dflt(self) -> Any:
        return self._engine.dflt[()]

    @property
    def expectedlen(self) -> int:
        return self._engine.expectedlen

    @property
    def layout(self) -> str:
        """The storage layout: 'Memory', 'Superchunk', 'Bcolz' or 'B2nd'."""
        return self._engine.layout_name()

    @property
    def oindex(self) -> Indexer:
        """Orthogonal indexing: every axis indexed on its own (``np.ix_`` semantics)."""
        return Indexer(self, "o")

    @property
    def vindex(self) -> Indexer:
        """numpy's advanced indexing: index arrays broadcast together and pick items."""
        return Indexer(self, "v")

    # -- reading --------------------------------------------------------------------------

    def read_rows(self, rows: range, out: np.ndarray | None = None) -> np.ndarray:
        """Whole rows ``rows`` (a range, any step) as an array, into ``out`` if given."""
        if self._engine.order == "C":
            return self._retrying(lambda: self._engine.read_rows(rows, out))
        if rows.step < 0:
            got = self.read_rows(rows[::-1])[::-1]
        else:
            shape = self.shape
            got = self.read_selection(OrthoKey(shape, (rows, *(range(n) for n in shape[1:])),
                                               (), (), (len(rows), *shape[1:])))
        if out is None:
            return got
        out[...] = got
        return out

    def read_selection(self, okey: OrthoKey) -> np.ndarray:
        """The items an orthogonal key on this array selects (Fortran-contiguous when the
        array is stored in Fortran order)."""
        if self._engine.order == "C":
            return self._engine.read(okey)
        return okey.finish(self._engine.read(stored_okey(okey)).T)

    def read_points(self, ckey: CoordKey) -> np.ndarray:
        """The items at a coordinate key's positions, in its output shape."""
        if self._engine.order == "C":
            return self._engine.read_coords(ckey)
        return self._engine.read_coords(stored_ckey(ckey))

    def write_selection(self, okey: OrthoKey, values: np.ndarray) -> None:
        """Assign ``values`` (of the dtype, broadcastable to the key) to a selection."""
        if self._engine.order == "C":
            self._engine.write(okey, values)
        else:
            sokey = stored_okey(okey)
            self._engine.write(sokey, okey.expand_values(values).T)

    def write_points(self, ckey: CoordKey, values: np.ndarray) -> None:
        """Assign ``values`` (broadcast to the key's shape) at a coordinate key's positions."""
        if self._engine.order == "C":
            self._engine.write_coords(ckey, values)
        else:
            self._engine.write_coords(stored_ckey(ckey), values)

    def take(self, indices: Any) -> np.ndarray:
        """The rows at ``indices`` (ints, any order, repeats allowed)."""
        return self.read_selection(orthogonal_key(np.asarray(indices, dtype=np.intp),
                                                self.shape))

    def _rereads(self) -> bool:
        """Whether a failed read is tried again on the files as last committed: only by a
        reader of an array without versions (bcolz, b2nd, a superchunk directory written
        before versions), whose writer rewrites or drops chunk files in place.  A version
        is immutable and held, so a read of one that fails is damage (or the version was
        dropped): raised, never answered from another version."""
        return self._mode == "r" and self._rootdir is not None and \
            self._engine.version_id is None

    def _retrying(self, read: Callable[[], _T]) -> _T:
        """``read()``; a reader of an array without versions whose files a writer changed
        meanwhile (a chunk rewritten in place, or dropped) reads them again as last
        committed instead of failing (a few times: a busy writer may change them again;
        damage fails every time)."""
        for _ in range(_REREADS):
            try:
                return read()
            except _CHANGED_UNDER_US:
                if not self._rereads():
                    raise
                self.reopen()
        return read()

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):  # bcolz's: a boolean expression over the caller's names
            key = _bcolz_array.expression_mask(self, key, 1)
        if not isinstance(key, (int, slice, tuple)) and masks.is_mask_key(self, key):
            return masks.select(self, key)  # numpy's N-d boolean mask, streamed
        key = plain(key)
        try:  # the first try inline: a[i] in a loop is a few microseconds in all
            return self._get(key)
        except _CHANGED_UNDER_US:
            if not self._rereads():
                raise
        self.reopen()  # then as _retrying does
        return self._retrying(lambda: self._get(key))

    def _get(self, key: Any) -> Any:
        engine = self._engine
        if isinstance(key, tuple):
            if len(key) == engine.ndim > 1 and all(is_int(k) for k in key):
                return engine.read_index(key)
        elif is_int(key) and engine.ndim == 1:
            return engine.read_index((key,))
        if engine.objects is not None:
            return engine.objects[key]
        shape = self.shape
        if needs_coordinates(key):
            result = self.read_points(coordinate_key(key, shape))
        else:
            result = self.read_selection(orthogonal_key(key, shape))
        return result[()] if result.ndim == 0 else result

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        out = np.asarray(self[...])
        return out if dtype is None else out.astype(dtype, copy=False)

    def null_count(self) -> int:
        """How many rows are missing: 0, as a carray holds no missing values (a table's
        column that does is a :class:`carray.NullableColumn`; a NaN is a value here)."""
        return 0

    # -- writing --------------------------------------------------------------------------

    def as_values(self, value: Any) -> np.ndarray:
        """``value`` as an array of this array's dtype (carrays read whole); text longer
        than fixed-width text items hold is refused, never cut."""
        return self._typed(plain(value))

    def _typed(self, values: Any) -> np.ndarray:
        if self.dtype.kind in "US":
            return fitted_text(values, self.dtype, str(self.rootdir or "carray"))
        try:
            return np.asarray(values, dtype=self.dtype)
        except (TypeError, ValueError) as exc:
            raise ValueConversionError(f"{self.rootdir or 'carray'}: cannot write "
                                       f"{type(values).__name__} values as {self.dtype} "
                                       f"items ({exc})") from exc

    def _as_rows(self, array: Any) -> np.ndarray:
        arr = self._typed(array[:] if isinstance(array, carray) else array)
        atom = self.shape[1:]
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
        self._engine.check_writable()
        if not self.ndim:
            raise TypeError("cannot append to a 0-d carray (it has no rows)")
        objects = self._engine.objects
        if objects is not None:
            items = object_items(array[:] if isinstance(array, carray) else array)
            self._engine.replace_objects(np.concatenate([objects, items]), len(objects))
            return
        if isinstance(array, carray) and transfer.append_carray(self, array):
            return
        rows = self._as_rows(array)
        if self._engine.order == "C" or self.ndim == 1:
            self._engine.append(rows)
            return
        # Rows of a Fortran-order array are the stored array's last axis: it grows (the
        # chunks along it are rewritten), then the new items are written.
        n = len(self)
        with self._engine.transaction():
            self._engine.resize((*self._engine.shape[:-1], n + len(rows)))
            shape = self.shape
            self.write_selection(OrthoKey(shape, (range(n, n + len(rows)),
                                                  *(range(m) for m in shape[1:])),
                                          (), (), rows.shape), rows)

    def __setitem__(self, key: Any, value: Any) -> None:
        self._engine.check_writable()
        if isinstance(key, str):  # bcolz's: a boolean expression over the caller's names
            key = _bcolz_array.expression_mask(self, key, 1)
        if not isinstance(key, (int, slice, tuple)) and masks.is_mask_key(self, key) and \
                self._engine.objects is None:
            masks.assign(self, key, value)
            return
        key = plain(key)
        objects = self._engine.objects
        if objects is not None:
            changed = objects.copy()
            changed[key] = value
            touched = np.arange(len(objects))[key]
            self._engine.replace_objects(changed, int(np.min(touched, initial=len(objects))))
            return
        values = self.as_values(value)
        if needs_coordinates(key):
            self.write_points(coordinate_key(key, self.shape), values)
        else:
            self.write_selection(orthogonal_key(key, self.shape), values)

    # -- resizing -------------------------------------------------------------------------

    def resize(self, shape: int | tuple[int, ...]) -> None:
        """Grow (with ``dflt``) or shrink to ``shape``: a new length, or a whole new shape.

        Any axis may grow or shrink; the chunk and block shapes stay.  Growing or
        shrinking the first axis touches only the chunks at the end; other axes
        move and rewrite chunks (the bcolz layout, rows only, refuses them).
        """
        self._engine.check_writable()
        old = self.shape
        new = (int(shape), *old[1:]) if is_int(shape) else tuple(shape)  # type: ignore[arg-type]
        if len(new) != len(old) or not all(is_int(n) for n in new):
            raise ValueError(f"cannot resize a {self.ndim}-d carray to {shape!r}")
        new = tuple(int(n) for n in new)
        if any(n < 0 for n in new):
            raise ValueError(f"new shape {new} has a negative length")
        objects = self._engine.objects
        if objects is not None:  # grown with None, bcolz's fill for objects
            grown = np.empty(new[0], dtype=object)
            grown[:min(new[0], len(objects))] = objects[:new[0]]
            self._engine.replace_objects(grown, min(new[0], len(objects)))
            self._engine.flush()
            return
        self._engine.resize(new[::-1] if self._engine.order == "F" else new)

    def trim(self, nitems: int) -> None:
        """Remove the last ``nitems`` rows (a negative count grows the array)."""
        nitems = whole_count(nitems, "nitems")
        if nitems > len(self):
            raise ValueError(f"cannot trim {nitems} rows from a carray of {len(self)}")
        self.resize(len(self) - nitems)

    # -- persistence ----------------------------------------------------------------------

    def flush(self) -> None:
        """Write the partial last run of chunks and the sizes; nothing in mode 'r'.

        In memory a partial chunk of rows stays decoded, as bcolz keeps it; the
        several chunks of a partial run of N-d chunks are compressed, so the
        decoded tail lives only between appends and the next flush.
        """
        self._engine.flush()

    def _release(self) -> None:
        if self._view_of is None:  # a view leaves the storage to the array it views
            self._engine.close()

    def discard(self) -> None:
        if self._view_of is None:
            self._engine.release()

    def reset(self) -> None:
        """Drop every change not committed: the array shows its newest version again (what
        a failed :func:`carray.transaction` does to each array it touched)."""
        self._engine.reset_to_newest()
        self._attrs.forget()

    def rebase(self, newer: Any) -> None:
        """Put the changes not committed on top of version ``newer`` (a manifest another
        writer published); :class:`carray.errors.ConflictError` when they overlap."""
        self._engine.rebase(newer)
        self._attrs.forget()

    def _parts(self) -> list[Any]:
        return [self._engine]

    @property
    def safe(self) -> bool:
        """bcolz's safe mode: values are always converted and checked, whatever it says."""
        return self._safe

    def view(self) -> carray:
        """A light second handle on the same storage (bcolz's view): writes through either
        are seen by both; closing the view leaves the array open."""
        other = object.__new__(type(self))
        other.__dict__.update(self.__dict__)
        other._view_of = self
        return other

    def purge(self) -> None:
        """Delete the stored array (its directory or frame file); nothing in memory.

        The handle is released first and cannot be used afterwards.
        """
        if self._rootdir is None:
            return
        self._engine.check_writable()
        self._engine.release()
        store, path = resolve(self._rootdir, self._storage_options)
        assert path is not None
        if store.isdir(path):
            store.rmtree(path)
        elif store.exists(path):
            store.delete(path)
        else:
            raise ContainerNotFoundError(f"{self._rootdir}: nothing to delete (removed "
                                         "already)")

    def free_cachemem(self) -> None:
        """Drop the decoded-chunk cache."""
        self._engine.drop_cache()

    def copy(self, **kwargs: Any) -> carray:
        """A new carray with the same items and attributes; keyword arguments as for the
        constructor (``cparams=`` recompresses every chunk, ``rootdir=`` puts it on disk)."""
        refuse_own_source(kwargs.get("rootdir"), [self])
        attrs = self.attrs.checked()  # refused before anything is written
        return self._copy_items(attrs, **kwargs)

    def _copy_items(self, attrs: dict[str, Any], **kwargs: Any) -> carray:
        if self._engine.objects is not None or not self.shape:
            kwargs.setdefault("cparams", self.cparams)
            out = type(self)(self[:], dtype=object, allow_pickle=True, **kwargs) \
                if self._engine.objects is not None else \
                type(self)(self[()], dtype=kwargs.pop("dtype", self.dtype), **kwargs)
            out.attrs.update(attrs)
            out.flush()  # the attributes are part of the copy
            return out
        return transfer.copy_of(self, attrs, **kwargs)[0]

    rechunk = rechunking.rechunk  # a new carray with other chunks, within max_mem

    def _repr_html_(self) -> str:
        """An HTML summary for notebooks: shape, chunks, sizes and the first and last rows
        (only those are read)."""
        return _bcolz_array.html_summary(self)

    # -- bcolz's row API, pickling, display ---------------------------------------------------

    def __iter__(self) -> Iterator[Any]:
        if not self.ndim:
            raise TypeError("iteration over a 0-d carray")
        return _rows.iter_rows(self)

    def iter(self, start: int = 0, stop: int | None = None, step: int = 1,
             limit: int | None = None, skip: int = 0) -> Iterator[Any]:
        """Iterate over rows ``start:stop:step``, skipping ``skip`` and yielding at most
        ``limit``."""
        return _rows.iter_rows(self, start, stop, step, limit, skip)

    def iterblocks(self, blen: int | None = None, start: int = 0,
                   stop: int | None = None) -> Iterator[np.ndarray]:
        """Iterate over consecutive blocks of ``blen`` rows (default: the chunk length)."""
        return _rows.iter_blocks(self, blen, start, stop)

    def where(self, boolarr: Any, limit: int | None = None, skip: int = 0) -> Iterator[Any]:
        """Iterate over the values where ``boolarr`` (same length, bool) is true."""
        return _rows.where(self, boolarr, limit, skip)

    def wheretrue(self, limit: int | None = None, skip: int = 0) -> Iterator[int]:
        """Iterate over the indices where this (bool) array is true."""
        return _rows.wheretrue(self, limit, skip)

    def reshape(self, *newshape: Any, **kwargs: Any) -> carray:
        """A new carray holding the same items (in C order) in shape ``newshape``.

        Parameters
        ----------
        *newshape : int or tuple of int
            The new shape, as one tuple or as ints; one axis may be -1 (worked out
            from the size).
        **kwargs
            As for :class:`carray` (``rootdir``, ``cparams``, ...); the default is an
            array in memory with this array's cparams.

        Notes
        -----
        Items are copied a block at a time, never all decoded at once.  Unlike
        bcolz, the original array on disk is left as it is: the result goes where
        ``rootdir`` says.
        """
        return _bcolz_array.reshape(self, newshape[0] if len(newshape) == 1 else newshape,
                                    **kwargs)

    @property
    def leftover_array(self) -> np.ndarray:
        """The decoded last partial chunk of rows, ``chunklen`` rows long (read-only;
        rows past :attr:`leftover_elements` are not items)."""
        return _bcolz_array.leftover_array(self)

    @property
    def leftover_elements(self) -> int:
        """Rows in the last, partial chunk."""
        return self.leftover

    @property
    def leftover_bytes(self) -> int:
        """Bytes of items in the last, partial chunk."""
        return self.leftover * math.prod(self.shape[1:]) * self.dtype.itemsize

    @property
    def leftover_ptr(self) -> int:
        """The address of :attr:`leftover_array`'s data (valid while the array is
        unchanged)."""
        return int(self.leftover_array.ctypes.data)

    def __reduce__(self) -> tuple:
        """Pickle a stored array as what reopens it, an in-memory one as its data."""
        return _portable.reduce_array(self)

    def to_dask(self, chunks: Any = None) -> Any:
        """A dask array whose tasks each read one region (see :mod:`carray.integrations.dask`)."""
        from carray.integrations.dask_read import to_dask

        return to_dask(self, chunks)

    def __repr__(self) -> str:
        return _bcolz_array.described(self)

    def __str__(self) -> str:
        return _bcolz_array.printed(self)

    # -- chunk summaries ------------------------------------------------------------------

    def zone_map(self) -> ZoneMap | None:
        """Min/max summaries of the full chunks (1-d numeric arrays), checked against the
        stored chunks; None for other arrays."""
        return self.chunk_stats() if len(self.shape) == 1 else None

    def chunk_stats(self) -> ZoneMap | None:
        """The summaries and statistics of the chunks in whole runs of chunk rows (numeric
        arrays of any number of dimensions; chunks numbered in C order of the chunk grid),
        checked against the stored chunks; None for other arrays.  The last, partial run
        of rows is not in it (see :func:`carray.compute.stats.whole`)."""
        zones = self._zones
        if zones is None or not self.shape:
            return None
        self._engine.settle()  # chunks still being compressed get their statistics
        stored = self._engine.nfull * self._engine.per_row
        zones.validate(0, stored, self._engine.chunk_stamp)
        zones.truncate(stored)
        return zones

    def keep_chunk_stats(self, stats: Mapping[int, ChunkStats]) -> None:
        """Keep the statistics of chunks written outside this handle (parallel unit
        writers, which work them out from the values they compress); saved on flush."""
        zones, engine = self._zones, self._engine
        if zones is None or not stats:
            return
        stored = engine.nfull * engine.per_row
        for nchunk, value in stats.items():
            if nchunk < stored:
                zones.update(nchunk, value, engine.chunk_stamp(nchunk))
        if self._mode == "r" or engine.in_memory:
            zones.dirty = False
        else:
            engine.mark_pending()

    def learn_zone(self, nchunk: int, values: np.ndarray) -> None:
        """Summarise chunk ``nchunk`` (in whole runs of chunk rows) from its items inside the
        array, ``values``, decoded for another reason (saved on flush); nothing when it
        already has a summary."""
        zones, grid = self._zones, self._engine.grid
        if zones is not None and self.shape and values.size and \
                not zones.has_stats(nchunk, nchunk + 1) and \
                values.size == math.prod(grid.valid_shape(grid.chunk_coords(nchunk))):
            self.keep_chunk_stats({nchunk: of_values(values)})


register_array_type(carray)
