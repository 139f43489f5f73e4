"""``carray``: a compressed N-d array in chunks, in memory or on disk.

A carray is a facade over an :class:`carray.engine.ArrayEngine`, which owns the
storage state (layout, chunk grid, the decoded tail of rows, caches, sizes).  The
facade turns numpy keys into selections (:mod:`carray.keys`), values into the
array's dtype and row shape, and offers bcolz's API on top.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from carray._bcolz_array import BcolzArrayAPI
from carray._order import check_order, stored_ckey, stored_okey
from carray._portable import PortableArray
from carray._rows import RowIteration
from carray.attrs import Attrs
from carray.compute import ComputeMixin, register_array_type
from carray.container import Container, check_mode, refuse_own_source
from carray.defaults import resolve_cparams
from carray.engine import ArrayEngine
from carray.errors import (
    ContainerNotFoundError,
    FormatError,
    IndexingError,
    StorageError,
    UnsupportedDTypeError,
)
from carray.grid import NDGrid
from carray.keys import CoordKey, OrthoKey, coordinate_key, needs_coordinates, orthogonal_key
from carray.layouts import FORMATS, default_format
from carray.layouts.base import ArrayMeta
from carray.params import CParams
from carray.shapes import choose_grid
from carray.stores import LOCAL, resolve
from carray.zonemap import ZoneMap

# An array started empty without expectedlen is assumed to grow this long, so
# row-by-row appends fill chunks of a useful size (bcolz would pick 16 KiB).
_DEFAULT_EXPECTEDLEN = 2**20


_T = TypeVar("_T")
# Reads redone in mode 'r' when files changed under a reader, and what that raises.
_REREADS = 3
_CHANGED_UNDER_US = (FormatError, StorageError, FileNotFoundError)


def _wants_objects(array: Any, dtype: Any) -> bool:
    """Whether a new array is to hold Python objects (dtype object, asked or found)."""
    if dtype is not None:
        return np.dtype(dtype) == np.dtype(object)
    if isinstance(array, carray):
        return array.dtype == np.dtype(object)
    return isinstance(array, np.ndarray) and array.dtype == np.dtype(object)


def _object_items(values: Any) -> np.ndarray:
    """``values`` (a sequence, or a carray) as a 1-d object array, one item per element:
    lists and tuples stay whole items, as bcolz keeps them."""
    seq = values[:] if isinstance(values, carray) else values
    if seq is None:
        return np.empty(0, dtype=object)
    items = list(seq) if not isinstance(seq, np.ndarray) or seq.ndim else [seq[()]]
    out = np.empty(len(items), dtype=object)
    for i, item in enumerate(items):
        out[i] = item
    return out


def _is_int(k: Any) -> bool:
    return isinstance(k, (int, np.integer)) and not isinstance(k, (bool, np.bool_))


def _plain(key: Any) -> Any:
    """A key with carrays in it replaced by their values."""
    if isinstance(key, carray):
        return key[:]
    if isinstance(key, tuple):
        return tuple(k[:] if isinstance(k, carray) else k for k in key)
    return key


class Indexer:
    """``a.oindex[...]`` / ``a.vindex[...]``: one indexing rule, named explicitly."""

    def __init__(self, array: carray, kind: str) -> None:
        self._array, self._kind = array, kind

    def __getitem__(self, key: Any) -> Any:
        a = self._array
        if self._kind == "v":
            out = a.read_points(coordinate_key(_plain(key), a.shape))
        else:
            out = a.read_selection(orthogonal_key(_plain(key), a.shape))
        return out[()] if out.ndim == 0 else out

    def __setitem__(self, key: Any, value: Any) -> None:
        a = self._array
        values = a.as_values(value)
        if self._kind == "v":
            a.write_points(coordinate_key(_plain(key), a.shape), values)
        else:
            a.write_selection(orthogonal_key(_plain(key), a.shape), values)


class carray(Container, PortableArray, RowIteration, ComputeMixin,  # noqa: N801 - bcolz's name
             BcolzArrayAPI):
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
        reads check whole chunks; False: no checks) for every layout on disk; for
        'superchunk' ``superchunksize``, ``checksum``, ``spare``, ``blosc1``; for
        'b2nd' ``contiguous``.
    safe : bool
        Kept for bcolz compatibility; conversions are always checked.
    mode : {'a', 'r', 'w'}
        'r' reads and never writes anything; 'a' reads and writes (creating
        refuses to overwrite); 'w' replaces what is there (see :func:`carray.open`).
    allow_pickle : bool
        Allow opening bcolz ``object`` arrays, whose items are pickles.
    fsync : bool
        Make flushed data durable with fsync (default True).
    storage_options : dict, optional
        Passed to the fsspec file system of a URL ``rootdir`` (credentials,
        endpoint, ...).
    version, tag, as_of : optional
        Open an earlier version of a stored array, read-only: by its id, by a tag
        :meth:`snapshot` gave it, or the newest made at or before a datetime.

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
                 storage: dict | None = None, storage_options: dict | None = None,
                 order: str = "C", version: str | None = None, tag: str | None = None,
                 as_of: Any = None) -> None:
        at = {k: v for k, v in (("version", version), ("tag", tag), ("as_of", as_of))
              if v is not None}
        if at:  # an earlier version: read-only
            mode = "r"
        check_mode(mode)
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
        objects = allow_pickle and _wants_objects(array, dtype)
        if format is None:
            # '.b2nd' paths are frames; pickled objects live in bcolz directories only.
            format = "bcolz" if objects and rootdir is not None else \
                default_format(rootdir)  # noqa: A001
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
            data = _object_items(array)
            meta = self._object_meta(cparams, expectedlen, format if rootdir else None)
        else:
            data, meta = self._new_meta(array, cparams, dtype, dflt, expectedlen, chunklen,
                                        chunks, blocks, format)
        if order == "F":
            meta = self._fortran_meta(meta, format)
        refuse_own_source(rootdir, [array])
        engine = ArrayEngine.create(path, meta, store=store, format=format, mode=mode,
                                    fsync=fsync, storage=self._storage)
        self._attach(engine)
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

    def _new_meta(self, array: Any, cparams: Any, dtype: Any, dflt: Any,
                  expectedlen: int | None, chunklen: int | None, chunks: Any, blocks: Any,
                  format: str | None) -> tuple[Any, ArrayMeta]:  # noqa: A002
        """The initial data and the metadata of a new array."""
        data: Any
        if array is None:
            data = np.empty(0, dtype=np.dtype(dtype) if dtype is not None else np.float64)
        elif isinstance(array, carray) and array.shape:
            data = array
        elif isinstance(array, carray):
            data = np.asarray(array[()], dtype=array.dtype)
        else:
            data = np.asarray(array, dtype=dtype)
        dt = np.dtype(dtype) if dtype is not None else data.dtype
        if isinstance(data, carray) and dtype is not None and dt != data.dtype:
            data = data[:].astype(dt)
        base, atom = dt.subdtype or (dt, ())  # ('i4', (3,)): rows of shape (3,) of int32
        if isinstance(data, np.ndarray) and data.ndim == 0 and not atom:
            return data, self._scalar_meta(data, base, cparams, dflt, format)
        atomshape = tuple(atom) + tuple(data.shape[1:])
        if base == np.dtype(object):
            raise UnsupportedDTypeError(
                "object arrays cannot be stored: their items would have to be pickled")
        if base.itemsize == 0 and base.kind in "SUV":
            raise UnsupportedDTypeError(f"dtype {base} has zero-size items")
        cp = resolve_cparams(cparams)
        length = len(data)
        expected = int(expectedlen) if expectedlen is not None else \
            (length or _DEFAULT_EXPECTEDLEN)
        chunks, blocks = choose_grid(base, atomshape, expected, chunklen=chunklen, chunks=chunks,
                                     blocks=blocks, rows_only=format == "bcolz",
                                     needs_blocks=format in ("b2nd", "caterva"))
        dflt_arr = np.zeros((), dtype=base) if dflt is None else np.asarray(dflt, dtype=base)
        if dflt_arr.ndim:
            raise ValueError("dflt must be a scalar")
        meta = ArrayMeta(dtype=base, shape=(0, *atomshape), chunks=chunks, blocks=blocks,
                         cparams=cp, dflt=dflt_arr, expectedlen=expected)
        meta.grid  # noqa: B018 - validates the shapes before anything is created
        return data, meta

    @staticmethod
    def _object_meta(cparams: Any, expectedlen: int | None,
                     format: str | None) -> ArrayMeta:  # noqa: A002
        """The metadata of a new array of Python objects (its creator opted in to pickles)."""
        if format not in (None, "bcolz"):
            raise UnsupportedDTypeError(f"object arrays are stored only as bcolz directories "
                                        f"(one pickle per file), not as {format}")
        return ArrayMeta(dtype=np.dtype(object), shape=(0,), chunks=(1,), blocks=None,
                         cparams=resolve_cparams(cparams), dflt=None,
                         expectedlen=int(expectedlen or 0))

    @staticmethod
    def _fortran_meta(meta: ArrayMeta, format: str | None) -> ArrayMeta:  # noqa: A002
        """``meta`` of a new array for the stored array of an order-'F' one: its transpose."""
        if format in ("bcolz", "b2nd", "caterva"):
            raise ValueError(f"the {format} format has no Fortran order (python-blosc2 and "
                             "bcolz read C order only); use the superchunk format")
        blocks = None if meta.blocks is None else tuple(meta.blocks)[::-1]
        return meta.replace(shape=tuple(meta.shape)[::-1], chunks=tuple(meta.chunks)[::-1],
                            blocks=blocks, order="F")

    @staticmethod
    def _scalar_meta(data: np.ndarray, base: np.dtype, cparams: Any, dflt: Any,
                     format: str | None) -> ArrayMeta:  # noqa: A002
        """The metadata of a 0-d array: one chunk of one item."""
        if format == "bcolz":
            raise ValueError("the bcolz layout stores rows: a 0-d array needs another format")
        if base == np.dtype(object):
            raise UnsupportedDTypeError("object arrays cannot be stored: their items would "
                                        "have to be pickled")
        dflt_arr = np.zeros((), dtype=base) if dflt is None else np.asarray(dflt, dtype=base)
        return ArrayMeta(dtype=base, shape=(), chunks=(), blocks=(), cparams=resolve_cparams(
            cparams), dflt=dflt_arr, expectedlen=1)

    def _attach(self, engine: ArrayEngine) -> None:
        self._engine = engine
        engine.on_takeover(self.abandon)  # a later mode='w' open here closes this handle
        self._attrs = Attrs(engine, self._mode)
        self._zones = ZoneMap.attach(engine)

    def _history(self) -> Any:
        return self._engine.history

    def storage_kind(self) -> str:
        """What this array is as a table's column (see :mod:`carray.table_store`)."""
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
        processes wrote it, e.g. :func:`carray.integrations.dask.store`)."""
        if self._rootdir is None:
            return
        self._engine.release()
        store, path = resolve(self._rootdir, self._storage_options)
        assert path is not None
        mode = "a" if self._mode == "w" else self._mode
        self._attach(ArrayEngine.open(path, store=store, mode=mode, fsync=self._engine.fsync,
                                      allow_pickle=self._engine.objects is not None,
                                      storage=self._storage))

    def reopen_args(self) -> dict[str, Any]:
        """Keyword arguments that open this stored array again (mode 'a' or 'r')."""
        # A table's column reopens on its own (read-only): its table is not sent along.
        storage = {k: v for k, v in self._storage.items() if k != "member"}
        return dict(rootdir=self._rootdir, mode="r" if self._mode == "r" or
                    "member" in self._storage else "a",
                    allow_pickle=self._engine.objects is not None, fsync=self._engine.fsync,
                    storage=storage, storage_options=self._storage_options)

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

    def _retrying(self, read: Callable[[], _T]) -> _T:
        """``read()``; a reader whose files a writer changed meanwhile (a chunk rewritten in
        place, or dropped) reads them again as last committed instead of failing (a few
        times: a busy writer may change them again; damage fails every time)."""
        for _ in range(_REREADS):
            try:
                return read()
            except _CHANGED_UNDER_US:
                if self._mode != "r" or self._rootdir is None:
                    raise
                self.reopen()
        return read()

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            raise TypeError("string (expression) keys need a ctable; use carray.eval")
        key = _plain(key)
        try:  # the first try inline: a[i] in a loop is a few microseconds in all
            return self._get(key)
        except _CHANGED_UNDER_US:
            if self._mode != "r" or self._rootdir is None:
                raise
        self.reopen()  # then as _retrying does
        return self._retrying(lambda: self._get(key))

    def _get(self, key: Any) -> Any:
        engine = self._engine
        if engine.objects is not None:
            return engine.objects[key]
        shape = self.shape
        if _is_int(key) and len(shape) == 1:
            n = shape[0]
            if not -n <= key < n:
                raise IndexingError(f"index {int(key)} is out of bounds for axis 0 with size {n}")
            return engine.read_item((int(key) % n,))
        if isinstance(key, tuple) and len(key) == len(shape) and len(key) > 1 \
                and all(_is_int(k) for k in key):
            index = []
            for ax, (k, n) in enumerate(zip(key, shape, strict=True)):
                if not -n <= k < n:
                    raise IndexingError(f"index {int(k)} is out of bounds for axis {ax} "
                                        f"with size {n}")
                index.append(int(k) % n)
            return engine.read_item(tuple(index[::-1]) if engine.order == "F"
                                    else tuple(index))
        if needs_coordinates(key):
            result = self.read_points(coordinate_key(key, shape))
        else:
            result = self.read_selection(orthogonal_key(key, shape))
        return result[()] if result.ndim == 0 else result

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        out = np.asarray(self[...])
        return out if dtype is None else out.astype(dtype, copy=False)

    # -- writing --------------------------------------------------------------------------

    def as_values(self, value: Any) -> np.ndarray:
        """``value`` as an array of this array's dtype (carrays read whole)."""
        return np.asarray(_plain(value), dtype=self.dtype)

    def _as_rows(self, array: Any) -> np.ndarray:
        arr = np.asarray(array[:] if isinstance(array, carray) else array, dtype=self.dtype)
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
            self._engine.replace_objects(np.concatenate([objects, _object_items(array)]),
                                         len(objects))
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
        key = _plain(key)
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
        new = (int(shape), *old[1:]) if _is_int(shape) else tuple(shape)  # type: ignore[arg-type]
        if len(new) != len(old) or not all(_is_int(n) for n in new):
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

    def free_cachemem(self) -> None:
        """Drop the decoded-chunk cache."""
        self._engine.drop_cache()

    def copy(self, **kwargs: Any) -> carray:
        """A new carray with the same items and attributes; keyword arguments as for the
        constructor (``cparams=`` recompresses every chunk, ``rootdir=`` puts it on disk)."""
        refuse_own_source(kwargs.get("rootdir"), [self])
        attrs = self.attrs.checked()  # refused before anything is written
        out = self._copy_items(**kwargs)
        out.attrs.update(attrs)
        return out

    def _copy_items(self, **kwargs: Any) -> carray:
        if self._engine.objects is not None:
            kwargs.setdefault("cparams", self.cparams)
            return type(self)(self[:], dtype=object, allow_pickle=True, **kwargs)
        if not self.shape:
            kwargs.setdefault("cparams", self.cparams)
            return type(self)(self[()], dtype=kwargs.pop("dtype", self.dtype), **kwargs)
        chunks, blocks = self._engine.chunks, self._engine.blocks
        if self.order == "F":  # given in the user's axis order
            chunks, blocks = chunks[::-1], None if blocks is None else blocks[::-1]
        args = dict(cparams=self.cparams, dflt=self.dflt, expectedlen=len(self),
                    chunks=chunks, blocks=blocks, order=self.order)
        if ("expectedlen" in kwargs or "chunklen" in kwargs) and "chunks" not in kwargs:
            args.pop("chunks")
            args.pop("blocks")
        args.update(kwargs)
        dtype = args.pop("dtype", None)
        out = type(self)(np.empty((0, *self.shape[1:]), dtype=self.dtype), dtype=dtype,
                         **args)
        for block in self.iterblocks():
            out.append(block if dtype is None else block.astype(out.dtype))
        out.flush()
        return out

    def _repr_html_(self) -> str:
        """An HTML summary for notebooks: shape, chunks, sizes and the first and last rows
        (only those are read)."""
        from carray._html import edge_rows, summary_html
        from carray._util import human

        first, last = edge_rows(len(self) if self.ndim else 0)
        ratio = self.nbytes / self.cbytes if self.cbytes else 0.0
        facts = [("shape", self.shape), ("dtype", self.dtype), ("chunks", self.chunks),
                 ("blocks", self.blocks), ("codec", f"{self.cparams.cname} "
                                                    f"level {self.cparams.clevel}"),
                 ("nbytes", human(self.nbytes)), ("cbytes", human(self.cbytes)),
                 ("ratio", f"{ratio:.2f}"), ("rootdir", self.rootdir or "memory")]
        if not self.ndim:  # a 0-d array: its one value is the preview
            return summary_html("carray", [*facts, ("value", self[()])])
        head = [[i, v] for i, v in zip(first, self[first.start:first.stop], strict=True)]
        tail = [[i, v] for i, v in zip(last, self[last.start:last.stop], strict=True)]
        return summary_html("carray", facts, ["", "value"], head, tail)

    # -- chunk summaries ------------------------------------------------------------------

    def zone_map(self) -> ZoneMap | None:
        """Min/max summaries of the full chunks (1-d numeric arrays), checked against the
        stored chunks; None for other arrays."""
        zones = self._zones
        if zones is None:
            return None
        nfull = self._engine.nfull
        zones.validate(0, nfull, self._engine.chunk_stamp)
        zones.truncate(nfull)
        return zones

    def learn_zone(self, nchunk: int, values: np.ndarray) -> None:
        """Summarise full chunk ``nchunk``, decoded for another reason (saved on flush);
        nothing when it already has a summary."""
        zones = self._zones
        if zones is not None and nchunk < self._engine.nfull and not zones.is_known(nchunk):
            zones.update(nchunk, values, self._engine.chunk_stamp(nchunk))
            if self._mode == "r" or self._engine.in_memory:
                zones.dirty = False
            else:
                self._engine.mark_pending()


register_array_type(carray)
