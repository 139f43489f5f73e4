"""bcolz 1.x directories, byte-compatible with bcolz 1.2.1 both ways.

Facts relied on (docs/formats/bcolz-dir.md):

* A carray is a directory: ``meta/storage`` (JSON written once at creation:
  dtype, cparams, chunklen, expectedlen, dflt, in that key order),
  ``meta/sizes`` (JSON ``{"shape", "nbytes", "cbytes"}``, rewritten by every
  flush; ``shape[0]`` is the only authoritative length), ``__attrs__`` (a JSON
  object of values as bcolz writes them; their exact types beside it, see
  :mod:`._bcolz_attrs`) and ``data/__N.blp`` (N in decimal, no padding).
* Every JSON file is ``json.dumps(obj, ensure_ascii=True)`` plus one newline;
  ``storage`` may hold the bare tokens ``NaN``/``Infinity`` in ``dflt``.
* A chunk file is a 16-byte Bloscpack version-1 header (``b"blpk"``, u8 1, three
  zero bytes, int64 LE chunk count = 1) followed by one Blosc1 chunk.
* ``data/__N.blp`` holds rows ``[N*chunklen, (N+1)*chunklen)``; the last,
  partial chunk holds only the rows that exist.  Files beyond
  ``ceil(len/chunklen)`` are stale and ignored; an empty array has none.
* ``dtype`` is ``str(dtype)`` of the base dtype (the item shape is in
  ``shape[1:]``); bcolz writes structured dtypes as a Python repr, parsed
  literally here, which bcolz itself cannot reopen (it passes the entry to
  ``np.dtype``).  carray writes a record dtype as numpy's fields form instead
  (``{"names", "formats", "offsets", "itemsize"}``), which ``np.dtype`` reads, so
  bcolz 1.x opens a column of records carray wrote.
* ``object`` arrays hold one pickle per file, ``chunklen`` ignored.

Commits are crash-safe without changing what bcolz reads: chunks replacing
committed ones are staged under other names and renamed into place by a
journaled commit that writes ``meta/sizes`` last (see :mod:`._bcolz_journal`).

Reads are checked without changing what bcolz reads either: every chunk file carray
writes ends in a trailer of digests after the Blosc chunk, and ``meta/sizes`` gets a
``carray_check`` key (see :mod:`._bcolz_check`); files bcolz wrote have neither and
read as before.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import pickle
import struct
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy as np

from carray.codecs import blosc
from carray.codecs import parallel as _parallel
from carray.codecs.blosc import ChunkBytes
from carray.codecs.checksums import get_checksum
from carray.codecs.pages import PAGE_SIZE, ChunkDigests
from carray.codecs.pipeline import check_blosc1_filters
from carray.core.checkedjson import check_keys
from carray.core.dtypes import (
    MAX_DESCR_CHARS,
    MAX_DESCR_DEPTH,
    MAX_ITEMSIZE,
    check_dtype,
    checked_shape,
    parse_descr,
)
from carray.core.params import CNAMES, CParams
from carray.core.safejson import load_json
from carray.errors import (
    ContainerNotFoundError,
    FormatError,
    ReadOnlyError,
    UnsafeDataError,
)
from carray.layouts.base import ArrayMeta, ChunkReader, Layout, Sidecars, clear_for_create
from carray.layouts.bcolz import attrs as _bcolz_attrs
from carray.layouts.bcolz.check import (
    SIZES_KEY,
    build_trailer,
    check_chunk,
    check_sizes,
    parse_trailer,
    seal_sizes,
)
from carray.layouts.bcolz.journal import JOURNAL_FILE, Journal, is_leftover, staged_name
from carray.stores import LOCAL, Handle, Store

DATA_DIR, META_DIR = "data", "meta"
SIZES_FILE, STORAGE_FILE, ATTRS_FILE = "sizes", "storage", "__attrs__"
# The keys bcolz writes in meta/storage, its cparams and meta/sizes (carray adds its
# checksum key to meta/sizes: see ._bcolz_check).
_STORAGE_KEYS = frozenset({"dtype", "cparams", "chunklen", "expectedlen", "dflt"})
_CPARAMS_KEYS = frozenset({"clevel", "shuffle", "cname", "quantize"})
_SIZES_KEYS = frozenset({"shape", "nbytes", "cbytes", SIZES_KEY})
CHUNK_HEADER = struct.Struct("<4sB3xq")
CHUNK_HEADER_SIZE = CHUNK_HEADER.size  # 16
_OPEN_CHUNKS = 64


def chunk_name(nchunk: int) -> str:
    return f"__{nchunk}.blp"


def is_bcolz_carray(path: str, store: Store = LOCAL) -> bool:
    return store.isfile(store.join(path, META_DIR, STORAGE_FILE))


def _dumps(obj: Any) -> bytes:
    return (json.dumps(obj, ensure_ascii=True) + "\n").encode("ascii")


def read_json(path: str, what: str, store: Store = LOCAL) -> Any:
    """Parse a JSON metadata file, naming it in every error."""
    try:
        text = store.get(path)
    except FileNotFoundError:
        raise FormatError(f"{what} file is missing", store.url(path)) from None
    return load_json(text, store.url(path), what=what)


def storage_dtype(dtype: np.dtype) -> Any:
    """The ``dtype`` entry of ``meta/storage``: ``str(dtype)``, and a record dtype in
    numpy's fields form (see the module docstring), nested records nested; a record
    holding sub-arrays of records keeps the repr (no string names those fields)."""
    if dtype.names is None:
        return str(dtype)
    fields: Any = dtype.fields
    formats: list[Any] = []
    for name in dtype.names:
        field = fields[name][0]
        if field.names is not None:
            formats.append(storage_dtype(field))
        elif field.subdtype is None:
            formats.append(field.str)
        elif field.base.names is None:
            formats.append(f"{field.shape}{field.base.str}")
        else:
            return str(dtype)
    return {"names": list(dtype.names), "formats": formats,
            "offsets": [fields[n][1] for n in dtype.names], "itemsize": dtype.itemsize}


def _fields_dtype(spec: dict[str, Any], path: str, depth: int = 0) -> np.dtype:
    """A record dtype from its fields form, every part checked before numpy sees it."""
    if depth > MAX_DESCR_DEPTH or len(json.dumps(spec)) > MAX_DESCR_CHARS:
        raise FormatError("dtype fields form is too deep or too long", path)
    names: Any = spec.get("names")
    formats: Any = spec.get("formats")
    offsets, itemsize = spec.get("offsets"), spec.get("itemsize")
    ok = set(spec) <= {"names", "formats", "offsets", "itemsize"} and \
        isinstance(names, list) and isinstance(formats, list) and \
        len(names) == len(formats) and all(isinstance(n, str) for n in names) and \
        (offsets is None or isinstance(offsets, list) and len(offsets) == len(names) and
         all(type(o) is int and 0 <= o <= MAX_ITEMSIZE for o in offsets)) and \
        (itemsize is None or type(itemsize) is int and 0 <= itemsize <= MAX_ITEMSIZE)
    if not ok:
        raise FormatError(f"dtype {json.dumps(spec)[:80]} is not a fields form "
                          "(names, formats, offsets, itemsize)", path)
    parts: dict[str, Any] = {"names": names, "formats": [
        _fields_dtype(f, path, depth + 1) if isinstance(f, dict) else parse_descr(f, path)
        for f in formats]}
    parts.update({k: v for k, v in (("offsets", offsets), ("itemsize", itemsize))
                  if v is not None})
    try:
        return np.dtype(parts)  # type: ignore[call-overload, no-any-return]
    except (TypeError, ValueError) as exc:
        raise FormatError(f"dtype {json.dumps(spec)[:80]} is not a NumPy dtype ({exc})"[:300],
                          path) from None


def parse_dtype(text: Any, path: str, allow_pickle: bool = False) -> np.dtype:
    """``str(dtype)`` as bcolz writes it, including the repr of structured dtypes, and
    the fields form carray writes for them (see :func:`storage_dtype`).

    Checked by :func:`carray.core.dtypes.checked_dtype`; ``allow_pickle`` admits only
    bcolz's own object arrays (plain ``object``, one pickle per chunk file).  A
    sub-array type is refused: rows of several items are recorded in the shape.
    """
    if isinstance(text, dict):
        dtype = _fields_dtype(text, path)
    elif not isinstance(text, str):
        raise FormatError(f"dtype must be a string, got {text!r}", path)
    else:
        dtype = parse_descr(text, path)
    check_dtype(dtype, source=path, allow_object=allow_pickle and dtype == np.dtype(object))
    if dtype.subdtype is not None:
        raise FormatError(f"dtype {text[:80]!r} is a sub-array type; the item type of "
                          "an array is a scalar or a record", path)
    return dtype


def encode_dflt(dflt: np.ndarray) -> Any:
    """The JSON value bcolz would store for a default value (extended to complex/timedelta)."""

    def plain(v: Any) -> Any:
        if isinstance(v, bytes):
            return v.decode("latin-1")
        if isinstance(v, complex):
            return [v.real, v.imag]
        if isinstance(v, np.ndarray):  # a sub-array field of a record
            return plain(v.tolist())
        if isinstance(v, (tuple, list)):
            return [plain(x) for x in v]
        return v

    if dflt.dtype.kind in "mM":
        return int(dflt.astype(np.int64))
    return plain(dflt.tolist())


def decode_dflt(value: Any, dtype: np.dtype, path: str) -> np.ndarray:
    """Turn the stored JSON default back into a scalar of ``dtype``."""

    def typed(v: Any, dt: np.dtype) -> Any:
        if dt.names:
            return tuple(typed(x, dt[n]) for x, n in zip(v, dt.names, strict=True))
        if dt.kind in "SV" and isinstance(v, str):  # bytes are kept as latin-1 text
            return v.encode("latin-1")
        if dt.kind == "c" and isinstance(v, list):
            return complex(*v)
        return v

    try:
        if value is None:
            return np.zeros((), dtype=dtype)
        if dtype.kind in "mM" and isinstance(value, int):
            out = np.array(value, dtype=np.int64).view(dtype)
        else:
            out = np.array(typed(value, dtype), dtype=dtype)
    except (TypeError, ValueError, OverflowError, UnicodeEncodeError) as exc:
        raise FormatError(f"dflt {value!r} does not fit dtype {dtype}: {exc}", path) from None
    if out.shape != ():  # a list where one item belongs: the fill value of every chunk
        raise FormatError(f"dflt {value!r:.80} is not one item of dtype {dtype}", path)
    return out


def _require(cond: bool, message: str, path: str) -> None:
    if not cond:
        raise FormatError(message, path)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _nfiles(meta: ArrayMeta) -> int:
    """Chunk files the sizes in ``meta`` refer to (rows of no items are stored as none)."""
    if meta.dtype == np.dtype(object):
        return meta.length
    return -(-meta.length // meta.chunklen) if math.prod(meta.atomshape) else 0


class BcolzLayout(Layout):
    """A bcolz 1.x carray directory."""

    blosc1 = True
    in_memory = False
    rows_only = True
    hands_over = True  # bcolz lets a process open a directory several times
    concurrent_reads = True  # each read opens, reads and closes its own file
    unit_chunks = 1  # one file per chunk

    def __init__(self, rootdir: str, readonly: bool = False, fsync: bool = True,
                 store: Store = LOCAL, verify: bool | str = True) -> None:
        super().__init__(readonly)
        self.store = store
        self.rootdir = rootdir
        self.fsync = fsync
        #: True: check the digests of what is read; "full": ranged reads fetch and check
        #: the whole chunk first; False: no checks.
        self.verify = verify
        self._ck = get_checksum("adler32")
        self._storage = b""  # meta/storage as stored: meta/sizes carries its digest
        self._datadir = store.join(self.rootdir, DATA_DIR)
        # Our chunk summaries live beside bcolz's own metadata (bcolz ignores them).
        self.sidecars = Sidecars(store, store.join(self.rootdir, META_DIR), readonly)
        self._pending: set[str] = set()  # files written since the last commit
        self._committed_n = 0  # chunk files the committed meta/sizes refers to
        # Chunks replacing committed ones since the last commit: number -> staged file.
        self._staged: dict[int, str] = {}
        # Read-only view through a journal not applied yet: number -> staged file.
        self._overlay: dict[int, str] = {}
        self._dropped = False  # chunks were dropped: delete files past the end at commit
        # Chunk files kept open for ranged reads, per thread so that threads reading
        # at once never close a handle another is using: number -> handle.
        self._local = threading.local()
        self._file_caches: list[OrderedDict[int, tuple[Handle, ChunkReader]]] = []
        self._files_lock = threading.Lock()

    # -- creation and opening ---------------------------------------------------------------

    @classmethod
    def create(cls, rootdir: str, meta: ArrayMeta, mode: str = "a",
               fsync: bool = True, store: Store = LOCAL,
               verify: bool | str = True) -> BcolzLayout:
        """Make a new, empty carray directory holding ``meta`` (chunked by rows)."""
        rootdir = os.fspath(rootdir)
        if not meta.row_chunked:
            raise ValueError(f"the bcolz layout chunks by whole rows; chunks {meta.chunks} "
                             f"and blocks {meta.blocks} do not fit it")
        check_blosc1_filters(meta.cparams, store.url(rootdir))
        clear_for_create(store, rootdir, mode)
        store.makedirs(store.join(rootdir, DATA_DIR))
        store.makedirs(store.join(rootdir, META_DIR))
        layout = cls(rootdir, fsync=fsync, store=store, verify=verify)
        storage = {
            "dtype": storage_dtype(meta.dtype),
            "cparams": meta.cparams.to_dict(),
            "chunklen": meta.chunklen,
            "expectedlen": meta.expectedlen,
            "dflt": encode_dflt(np.asarray(meta.dflt)),
        }
        layout._storage = _dumps(storage)
        store.put(store.join(rootdir, META_DIR, STORAGE_FILE), layout._storage, fsync=fsync)
        layout.save_attrs({})
        layout.commit(meta, 0)
        return layout

    @classmethod
    def open(cls, rootdir: str, readonly: bool = False, fsync: bool = True,
             allow_pickle: bool = False, store: Store = LOCAL, verify: bool | str = True
             ) -> tuple[BcolzLayout, ArrayMeta, int]:
        """Open an existing directory; returns the layout, its metadata and its cbytes."""
        rootdir = os.fspath(rootdir)
        if not store.isdir(rootdir):
            raise ContainerNotFoundError(f"{store.url(rootdir)}: no such carray directory")
        layout = cls(rootdir, readonly=readonly, fsync=fsync, store=store, verify=verify)
        meta, cbytes = layout._read_meta(allow_pickle)
        return layout, meta, cbytes

    def _read_meta(self, allow_pickle: bool) -> tuple[ArrayMeta, int]:
        store = self.store
        storage_path = store.url(store.join(self.rootdir, META_DIR, STORAGE_FILE))
        try:
            self._storage = store.get(store.join(self.rootdir, META_DIR, STORAGE_FILE))
        except FileNotFoundError:
            raise FormatError("meta/storage file is missing", storage_path) from None
        storage = load_json(self._storage, storage_path, what="meta/storage")
        sizes = self._committed_sizes()
        sizes_path = store.url(store.join(self.rootdir, META_DIR, SIZES_FILE))
        _require(isinstance(storage, dict), "meta/storage must hold a JSON object", storage_path)
        _require(isinstance(sizes, dict), "meta/sizes must hold a JSON object", sizes_path)
        # Exactly what bcolz writes (and carray's checksum key in meta/sizes): a damaged
        # or misspelt key is an error, never ignored.
        check_keys(storage, _STORAGE_KEYS, storage_path, "meta/storage")
        check_keys(sizes, _SIZES_KEYS, sizes_path, "meta/sizes")
        for key in ("dtype", "cparams", "chunklen"):
            _require(key in storage, f"meta/storage lacks {key!r}", storage_path)
        if storage["dtype"] == "object" and not allow_pickle:
            raise UnsafeDataError(
                f"{store.url(self.rootdir)}: holds Python objects stored as pickles; unpickling runs "
                "arbitrary code, so pass allow_pickle=True only for files you trust")
        dtype = parse_dtype(storage["dtype"], storage_path, allow_pickle)
        chunklen = storage["chunklen"]
        _require(_is_int(chunklen) and chunklen >= 1,
                 f"chunklen must be an int >= 1, got {chunklen!r}", storage_path)
        shape = sizes.get("shape")
        _require(isinstance(shape, list) and len(shape) >= 1,
                 f"shape must be a non-empty list of ints >= 0, got {shape!r}", sizes_path)
        shape = list(checked_shape(shape, itemsize=dtype.itemsize, source=sizes_path))
        # A chunk is one Blosc1 buffer: a bigger one only comes from a damaged header,
        # and must be refused before anything is allocated for it.
        _require(dtype == np.dtype(object) or chunklen * dtype.itemsize * math.prod(shape[1:])
                 <= blosc.MAX_BUFFERSIZE,
                 f"chunks of {chunklen} rows of shape {tuple(shape[1:])} and dtype {dtype} "
                 f"exceed Blosc's {blosc.MAX_BUFFERSIZE} bytes", storage_path)
        # The length is only a claim until the file of its last chunk is seen.
        last = -(-shape[0] // chunklen) - 1
        # (Rows of no items are stored as no chunks at all.)
        _require(dtype == np.dtype(object) or last < 0 or not math.prod(shape[1:])
                 or store.isfile(self._path(last)) or last in self._overlay,
                 f"shape[0] is {shape[0]}, but the file of its last chunk, "
                 f"{DATA_DIR}/{chunk_name(last)}, is missing", sizes_path)
        cp = storage["cparams"]
        _require(isinstance(cp, dict), "cparams must be a JSON object", storage_path)
        check_keys(cp, _CPARAMS_KEYS, storage_path, "meta/storage cparams")
        cname = cp.get("cname", "blosclz")
        if cname == "snappy":
            cname = "lz4"  # only the metadata; chunks say their own codec
        _require(cname in CNAMES, f"unknown codec {cname!r}", storage_path)
        try:
            cparams = CParams(clevel=cp.get("clevel", 5), cname=cname,
                              shuffle=cp.get("shuffle", 1), quantize=cp.get("quantize") or 0)
        except (TypeError, ValueError) as exc:
            raise FormatError(f"bad cparams: {exc}", storage_path) from None
        # A statistic only (no read depends on it; a failed write may leave it off):
        # taken as 0 when it is not a size, as before.
        cbytes = sizes.get("cbytes", 0)
        cbytes = cbytes if _is_int(cbytes) and cbytes >= 0 else 0
        expectedlen = storage.get("expectedlen", shape[0])
        _require(expectedlen is None or (_is_int(expectedlen) and expectedlen >= 0),
                 f"expectedlen must be an int >= 0, got {expectedlen!r}", storage_path)
        meta = ArrayMeta.rows(
            dtype, tuple(shape[1:]), shape[0], chunklen,
            cparams=cparams, dflt=decode_dflt(storage.get("dflt"), dtype, storage_path),
            expectedlen=expectedlen if _is_int(expectedlen) else shape[0])
        if self.verify:
            # Last: metadata that is not what its checksum says gets the message of the
            # first check above that fails, if one does.
            check_sizes(sizes, self._storage, sizes_path, storage_path)
        self._committed_n = _nfiles(meta)
        return meta, cbytes

    # -- the journal ----------------------------------------------------------------------

    def _committed_sizes(self) -> Any:
        """``meta/sizes`` as the last complete commit left it.

        A complete journal is finished first (mode 'a') or read through (mode 'r');
        a damaged one is the trace of a commit that never started applying.
        """
        store = self.store
        sizes_key = store.join(self.rootdir, META_DIR, SIZES_FILE)
        jkey = store.join(self.rootdir, META_DIR, JOURNAL_FILE)
        try:
            journal = Journal.decode(store.get(jkey))
        except FileNotFoundError:
            journal = None
        else:
            if journal is None and not self.readonly:
                store.delete(jkey)
        if journal is None:
            return read_json(sizes_key, "meta/sizes", store)
        if self.readonly:
            self._overlay = {n: self._staged_path(n) for n in journal.renames}
            return load_json(journal.sizes, store.url(jkey), what="journal sizes")
        self._apply(journal.renames, missing_ok=True)
        store.put(sizes_key, journal.sizes, fsync=self.fsync)
        store.delete(jkey)
        return read_json(sizes_key, "meta/sizes", store)

    def _apply(self, renames: Sequence[int], missing_ok: bool = False) -> None:
        """Rename staged chunk files over their chunk files (a journal's step 3)."""
        store = self.store
        for n in renames:
            self._forget(n)
            try:
                store.rename(self._staged_path(n), self._path(n))
            except FileNotFoundError:
                if not missing_ok:
                    raise
            self._staged.pop(n, None)  # in place now, should a later step fail
        if renames and self.fsync:
            store.sync_dir(self._datadir)

    def remove_leftovers(self) -> None:
        """Delete staged and temporary files of writes no commit refers to (the caller
        holds the writer's lock, so no other writer is making them now)."""
        if self.readonly:
            raise ReadOnlyError(f"{self.describe()}: opened read-only")
        for name in self.store.listdir(self._datadir):
            if is_leftover(name):
                with contextlib.suppress(FileNotFoundError):
                    self.store.delete(self.store.join(self._datadir, name))

    def read_objects(self, length: int) -> np.ndarray:
        """An ``object`` carray: one pickle per chunk file (the caller opted in)."""
        out = np.empty(length, dtype=object)
        for i in range(length):
            out[i] = pickle.loads(blosc.decompress(self.read_chunk(i), self.chunk_path(i)))
        return out

    def write_objects(self, objects: np.ndarray, first: int, cparams: CParams) -> int:
        """Items ``first`` and on, each pickled into its own chunk file, as bcolz does."""
        delta = 0
        for i in range(first, len(objects)):
            data = np.frombuffer(pickle.dumps(objects[i], pickle.HIGHEST_PROTOCOL), np.uint8)
            delta += self.write_chunk(i, blosc.compress1(data, 1, cparams))
        return delta

    # -- chunks ---------------------------------------------------------------------------

    def _path(self, nchunk: int) -> str:
        return self.store.join(self._datadir, chunk_name(nchunk))

    def _staged_path(self, nchunk: int) -> str:
        return self.store.join(self._datadir, staged_name(nchunk))

    def _source(self, nchunk: int) -> str:
        """The file holding chunk ``nchunk`` now: staged, seen through a journal, or its own."""
        return self._staged.get(nchunk) or self._overlay.get(nchunk) or self._path(nchunk)

    def chunk_path(self, nchunk: int) -> str:
        return self.store.url(self._source(nchunk))

    def _missing(self, nchunk: int) -> FormatError:
        return FormatError(f"chunk file {chunk_name(nchunk)} is missing", self.chunk_path(nchunk))

    def _open_chunk(self, nchunk: int) -> Handle:
        try:
            return self.store.open(self._source(nchunk))
        except FileNotFoundError:
            if nchunk not in self._overlay:
                raise self._missing(nchunk) from None
        # The writer renamed the staged file into place since this reader looked.
        try:
            return self.store.open(self._path(nchunk))
        except FileNotFoundError:
            raise self._missing(nchunk) from None

    def _get_chunk(self, nchunk: int) -> bytes:
        try:
            return self.store.get(self._source(nchunk))
        except FileNotFoundError:
            if nchunk not in self._overlay:
                raise self._missing(nchunk) from None
        try:
            return self.store.get(self._path(nchunk))
        except FileNotFoundError:
            raise self._missing(nchunk) from None

    def _check_header(self, buf: bytes | memoryview, path: str, size: int | None = None) -> None:
        size = len(buf) if size is None else size
        if size < CHUNK_HEADER_SIZE + blosc.BLOSC1_HEADER:
            raise FormatError(
                f"chunk file truncated: {size} bytes, at least "
                f"{CHUNK_HEADER_SIZE + blosc.BLOSC1_HEADER} needed", path)
        magic, version, nchunks = CHUNK_HEADER.unpack_from(buf, 0)
        if magic != b"blpk":
            raise FormatError(f"not a bcolz chunk file (magic {magic!r})", path, 0)
        if version != 1:
            raise FormatError(f"unsupported chunk file version {version} (expected 1)", path, 4)
        if nchunks != 1:
            raise FormatError(f"chunk file claims {nchunks} chunks (expected 1)", path, 8)

    def _cbytes(self, head: bytes | memoryview, path: str, size: int) -> int:
        """The size of the Blosc chunk of a chunk file of ``size`` bytes starting ``head``
        (its prefix checked first)."""
        self._check_header(head, path, size)
        return blosc.read_header(memoryview(head)[CHUNK_HEADER_SIZE:], path, CHUNK_HEADER_SIZE,
                                 size=size - CHUNK_HEADER_SIZE).cbytes

    def _digests(self, cbytes: int, size: int, read_tail: Callable[[int, int], bytes],
                 path: str) -> ChunkDigests | None:
        """The digests of a chunk file of ``size`` bytes holding a chunk of ``cbytes``
        (None: written by bcolz, or not checked); ``read_tail(offset, length)`` reads it."""
        end = CHUNK_HEADER_SIZE + cbytes
        if size == end or not self.verify:
            return None
        return parse_trailer(read_tail(end, size - end), cbytes, path, end)

    def _checked(self, buf: memoryview, path: str) -> memoryview:
        """The Blosc chunk of the whole chunk file ``buf``, checked against its digest."""
        cbytes = self._cbytes(buf, path, len(buf))
        chunk = buf[CHUNK_HEADER_SIZE:CHUNK_HEADER_SIZE + cbytes]
        digests = self._digests(cbytes, len(buf), lambda o, n: bytes(buf[o:o + n]), path)
        if digests is not None:
            check_chunk(buf, CHUNK_HEADER_SIZE, digests, path)
        return chunk

    def stored_digests(self, nchunk: int) -> ChunkDigests | None:
        """The digests chunk ``nchunk``'s file carries (None: a file bcolz wrote), for
        verifiers, which check every page digest as well as the chunk's."""
        buf, path = memoryview(self._get_chunk(nchunk)), self.chunk_path(nchunk)
        cbytes = self._cbytes(buf, path, len(buf))
        end = CHUNK_HEADER_SIZE + cbytes
        return None if len(buf) == end else parse_trailer(bytes(buf[end:]), cbytes, path, end)

    def read_chunk(self, nchunk: int) -> memoryview:
        return self._checked(memoryview(self._get_chunk(nchunk)), self.chunk_path(nchunk))

    def read_chunk_into(self, nchunk: int, scratch: Callable[[int], np.ndarray]) -> memoryview:
        with self._open_chunk(nchunk) as h:
            view = scratch(h.size).data[:h.size]
            view = view[:h.pread_into(view, 0)]
        return self._checked(view.cast("B"), self.chunk_path(nchunk))

    def _open_files(self) -> OrderedDict[int, tuple[Handle, ChunkReader]]:
        """This thread's cache of open chunk files."""
        files = getattr(self._local, "files", None)
        if files is None:
            files = self._local.files = OrderedDict()
            with self._files_lock:
                self._file_caches.append(files)
        return files

    def chunk_reader(self, nchunk: int) -> tuple[Callable[[int, int], bytes], int]:
        if self.verify == "full":
            # Ranged reads fetch the whole chunk too, so its digest is checked first.
            chunk = bytes(self.read_chunk(nchunk))
            return ChunkReader(len(chunk), lambda o, n: chunk[o:o + n]), len(chunk)
        open_files = self._open_files()
        cached = open_files.get(nchunk)
        if cached is None:
            h = self._open_chunk(nchunk)
            try:
                cached = (h, self._ranged(h, self.chunk_path(nchunk)))
            except BaseException:
                h.close()
                raise
            open_files[nchunk] = cached
            if len(open_files) > _OPEN_CHUNKS:
                open_files.popitem(last=False)[1][0].close()
        else:
            open_files.move_to_end(nchunk)
        reader = cached[1]
        return reader, reader.size

    def _ranged(self, h: Handle, path: str) -> ChunkReader:
        """Ranged reads of the chunk in the open chunk file ``h``: through its page
        digests when it has them, so every byte handed out is checked."""
        base = CHUNK_HEADER_SIZE
        # The prefix and the chunk's first page (its header and, usually, block table)
        # in one read; decoders ask for that page first.
        first = h.pread(base + PAGE_SIZE, 0)
        cbytes = self._cbytes(first, path, h.size)
        head = first[base:base + cbytes]
        digests = self._digests(cbytes, h.size, lambda o, n: h.pread(n, o), path)
        if digests is not None:
            paged = digests.reader(lambda offset, length: h.pread(length, base + offset),
                                   path, base, lambda offset, out: h.pread_into(out, base + offset),
                                   head)
            return ChunkReader(cbytes, paged.read, paged.read_into, {})

        def read_at(offset: int, length: int) -> bytes:
            stop = min(offset + length, cbytes)
            if stop <= len(head):
                return head[offset:stop]
            return h.pread(max(0, stop - offset), base + offset)

        return ChunkReader(cbytes, read_at, lambda offset, out: h.pread_into(
            memoryview(out).cast("B")[:max(0, cbytes - offset)], base + offset), {})

    def _forget(self, nchunk: int) -> None:
        with self._files_lock:
            for files in self._file_caches:
                cached = files.pop(nchunk, None)
                if cached is not None:
                    cached[0].close()

    def write_chunk(self, nchunk: int, data: bytes, digest: bytes | None = None) -> int:
        if self.readonly:
            raise ReadOnlyError(f"{self.describe()}: opened read-only")
        self._forget(nchunk)
        try:
            old = self.store.size(self._source(nchunk))
        except FileNotFoundError:
            old = 0
        # A chunk the committed sizes refer to is only replaced by the next commit.
        path = self._staged_path(nchunk) if nchunk < self._committed_n else self._path(nchunk)
        header = CHUNK_HEADER.pack(b"blpk", 1, 1)
        trailer = self.chunk_digest(data) if digest is None else digest
        self.store.put(path, (header, data, trailer), fsync=False)
        self._pending.add(path)
        if nchunk < self._committed_n:
            self._staged[nchunk] = path
        return len(header) + len(data) + len(trailer) - old

    def chunk_digest(self, data: ChunkBytes) -> bytes:
        """The trailer of digests written after chunk ``data`` (see :mod:`._bcolz_check`)."""
        return build_trailer(data, self._ck)

    def write_unit(self, unit: int, chunks: Sequence[ChunkBytes], digests: Any = None) -> int:
        if len(chunks) != 1:
            raise ValueError(f"a bcolz unit is one chunk, got {len(chunks)}")
        header = CHUNK_HEADER.pack(b"blpk", 1, 1)
        trailer = digests[0] if digests is not None else self.chunk_digest(chunks[0])
        self.store.put(self._path(unit), (header, chunks[0], trailer), fsync=self.fsync)
        return len(header) + len(chunks[0]) + len(trailer)

    def adopt(self, meta: ArrayMeta, cbytes: int) -> None:
        self._close_files()
        self.store.invalidate(self.rootdir)
        self.commit(meta, cbytes)

    def drop_chunks(self, first: int) -> int:
        """Forget chunks ``first`` and above: staged and uncommitted files go now, committed
        ones when the next commit has recorded the shorter length."""
        removed, n = 0, max(first, 0)
        while True:
            self._forget(n)
            staged = self._staged.pop(n, None)
            path = staged or self._path(n)
            try:
                removed += self.store.size(path)
                if staged is not None or n >= self._committed_n:
                    self.store.delete(path)
            except FileNotFoundError:
                if n >= self._committed_n:
                    break
            self._pending.discard(path)
            n += 1
        self._dropped = True
        return -removed

    # -- metadata -------------------------------------------------------------------------

    def commit(self, meta: ArrayMeta, cbytes: int, message: str | None = None) -> None:
        """Make the chunks written since the last commit durable and record ``meta``,
        through the journal when committed chunk files are replaced (see
        :mod:`._bcolz_journal`)."""
        if self.readonly:
            raise ReadOnlyError(f"{self.describe()}: opened read-only")
        store = self.store
        new_n = _nfiles(meta)
        for n in [n for n in self._staged if n >= new_n]:  # past the new end: not needed
            self._forget(n)
            with contextlib.suppress(FileNotFoundError):
                store.delete(self._staged.pop(n))
        if self.fsync and not store.remote:
            # One file per chunk: their syncs wait on the disk, so many at once (the
            # journal commits them together) take about the time of one.
            _parallel.run([partial(_sync_if_there, store, p) for p in sorted(self._pending)],
                          width=_parallel.IO_THREADS)
            if self._pending:
                store.sync_dir(self._datadir)
        sizes = _dumps(seal_sizes({"shape": list(meta.shape), "nbytes": meta.length * meta.rowsize,
                                   "cbytes": int(cbytes)}, self._storage, self._ck))
        renames = sorted(self._staged)
        jkey = store.join(self.rootdir, META_DIR, JOURNAL_FILE)
        if renames:
            store.put(jkey, Journal(tuple(renames), sizes).encode(), fsync=self.fsync)
            if self.fsync:
                store.sync_dir(store.join(self.rootdir, META_DIR))
            self._apply(renames)
        store.put(store.join(self.rootdir, META_DIR, SIZES_FILE), sizes, fsync=self.fsync)
        self._staged.clear()
        self._pending.clear()
        old_n, self._committed_n = self._committed_n, new_n
        # Committed from here on: what follows only tidies up, and what a failure leaves
        # (the journal, files past the end) the next writable open or commit removes.
        with contextlib.suppress(OSError):
            if renames:
                store.delete(jkey)
            if self._dropped or new_n < old_n:
                self._delete_past(new_n)

    def _delete_past(self, first: int) -> None:
        """Remove the chunk files from ``first`` on (nothing committed refers to them)."""
        self._dropped = False
        n, removed = first, False
        while True:
            self._forget(n)
            try:
                self.store.delete(self._path(n))
            except FileNotFoundError:
                break
            removed, n = True, n + 1
        if removed and self.fsync:
            self.store.sync_dir(self._datadir)

    def chunk_stamp(self, nchunk: int) -> tuple[int, int] | None:
        return self.store.stamp(self._source(nchunk))

    def load_attrs(self) -> dict[str, Any]:
        return _bcolz_attrs.load(self.store, self.rootdir)

    def save_attrs(self, attrs: dict[str, Any]) -> None:
        _bcolz_attrs.save(self.store, self.rootdir, attrs, self.fsync)

    def _close_files(self) -> None:
        with self._files_lock:
            for files in self._file_caches:
                while files:
                    files.popitem()[1][0].close()

    def close(self) -> None:
        self._close_files()
        self.release_lock()

    def describe(self) -> str:
        return f"bcolz directory {self.store.url(self.rootdir)!r}"


def _sync_if_there(store: Store, path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        store.sync_file(path)
