"""Variable-length UTF-8 string columns: Arrow's layout on two carrays.

A column of ``n`` strings is an ``int64`` carray of ``n + 1`` offsets (the first
is 0) and a ``uint8`` carray holding the UTF-8 bytes back to back, so string
``i`` is ``values[offsets[i]:offsets[i + 1]]`` - the layout of an Arrow
``large_string`` array, which :meth:`StringColumn.to_arrow` wraps without a copy
of the bytes per row.  On disk the column directory holds ``offsets/`` and
``values/`` (carray directories in the superchunk layout, or bcolz's with
``format="bcolz"``) and a ``__vlstring__`` marker.

Writes append the bytes first and the offsets last, so the offsets are the
record of what exists: bytes past the last offset (from an interrupted append)
are ignored, and cut off when the column is next opened for writing.  A writable
column holds the writer's lock on its directory (:mod:`carray.stores.lock`), as
its two carrays do on theirs.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import numpy as np

from carray.array.array import carray
from carray.array.container import Container, refuse_own_source
from carray.attrs.mapping import Attrs, PlainAttrsFile
from carray.chunks.keys import select
from carray.compute.protocols import registered_method
from carray.core.checkedjson import dumps_checked, load_marker
from carray.core.params import CParams
from carray.errors import ContainerExistsError, FormatError, ReadOnlyError
from carray.layouts import refuse_member
from carray.layouts.memory import MemoryLayout
from carray.stores import LOCAL, Store, resolve
from carray.stores.lock import WriteLock
from carray.versions.dataset import Membership

MARKER = "__vlstring__"
#: The marker: version 2 carries a checksum; columns of version 1 read as before.
_MARKER_BYTES = dumps_checked({"format": "utf8", "offsets": "int64", "version": 2})
STRING_DTYPE = np.dtypes.StringDType()
# Rows decoded at once in the numpy-only path bound the padded matrix to ~this size.
_PAD_BUDGET = 1 << 24


def is_string_column(path: str | os.PathLike, store: Store = LOCAL) -> bool:
    return store.isfile(store.join(os.fspath(path), MARKER))


def check_string_marker(store: Store, path: str) -> None:
    """Raise FormatError unless ``path/__vlstring__`` is a marker this build reads
    (ChecksumError: a damaged one)."""
    key = store.join(path, MARKER)
    marker = load_marker(store.get(key), store.url(key), MARKER, version_key="version",
                         readable=(1, 2), checked_from=2, known=("format", "offsets"))
    if marker.get("format") != "utf8" or marker.get("offsets") != "int64":
        raise FormatError(f"unsupported string column {marker!r:.80}", store.url(key))


def wants_string_column(values: Any) -> bool:
    """Whether ``values`` (an array or column) should become a variable-length column."""
    if isinstance(values, StringColumn) or _is_arrow_strings(values):
        return True
    dtype = getattr(values, "dtype", None)
    return dtype is not None and (dtype == STRING_DTYPE or dtype == np.dtype(object))


# -- UTF-8 encoding and decoding, whole arrays at a time ---------------------------------------


def _pyarrow():
    try:
        import pyarrow
    except ImportError:  # the numpy-only path below does the same, slower
        return None
    return pyarrow


def encode(values: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(lengths int64, utf8 bytes uint8)`` for a sequence of ``str``."""
    arr = np.asarray(values)
    if arr.size == 0:  # no strings, whatever dtype numpy gave it ([] is float64)
        return np.zeros(0, np.int64), np.zeros(0, np.uint8)
    if arr.dtype.kind not in "OUT" and arr.dtype != STRING_DTYPE:
        raise TypeError(f"a string column holds str values, got dtype {arr.dtype}")
    arr = arr.reshape(-1)
    pa = _pyarrow()
    if pa is not None:
        src = arr if arr.dtype == np.dtype(object) else arr.astype(object)
        try:  # pyarrow checks every value's type in C
            parr = pa.array(src, type=pa.large_string(), from_pandas=False)
        except (pa.ArrowTypeError, pa.ArrowInvalid):
            parr = None
        if parr is None or parr.null_count:
            _check_str(arr)
        offs = np.frombuffer(parr.buffers()[1], dtype=np.int64)[parr.offset:parr.offset
                                                                 + len(parr) + 1]
        data_buf = parr.buffers()[2]
        data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else \
            np.zeros(0, np.uint8)
        data = data[offs[0]:offs[-1]]
        return np.diff(offs), data.copy()
    return _encode_numpy(arr)


def _check_str(arr: np.ndarray) -> None:
    if arr.dtype == np.dtype(object):
        bad = next((v for v in arr if not isinstance(v, str)), None)
        if bad is not None or any(v is None for v in arr):
            raise TypeError(f"a string column holds str values only, got {bad!r}")


def _encode_numpy(arr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    _check_str(arr)
    text = arr.astype(STRING_DTYPE)
    lengths = np.zeros(len(text), dtype=np.int64)
    parts = []
    for lo, hi in _batches(np.strings.str_len(text) * 4):
        raw = np.strings.encode(text[lo:hi], "utf-8")
        lens = np.strings.str_len(raw).astype(np.int64)
        width = raw.dtype.itemsize
        mat = raw.view(np.uint8).reshape(hi - lo, width) if width else \
            np.zeros((hi - lo, 0), np.uint8)
        # Fixed-width bytes drop trailing NULs; fix those rows one by one.
        nul = np.flatnonzero(np.strings.endswith(text[lo:hi], "\x00"))
        if len(nul):
            exact = [text[lo + i].encode("utf-8") for i in nul]
            lens[nul] = [len(b) for b in exact]
            width = max(width, int(lens.max()))
            wide = np.zeros((hi - lo, width), np.uint8)
            wide[:, :mat.shape[1]] = mat
            for i, b in zip(nul, exact, strict=True):
                wide[i, :len(b)] = np.frombuffer(b, np.uint8)
            mat = wide
        parts.append(mat[np.arange(mat.shape[1]) < lens[:, None]])
        lengths[lo:hi] = lens
    return lengths, (np.concatenate(parts) if parts else np.zeros(0, np.uint8))


def _batches(widths: np.ndarray) -> Iterator[tuple[int, int]]:
    """Row ranges whose padded matrix (rows x widest) stays near the budget."""
    n, lo = len(widths), 0
    while lo < n:
        hi = min(n, lo + max(1, _PAD_BUDGET // max(1, int(widths[lo:lo + 4096].max()))))
        while hi - lo > 1 and (hi - lo) * int(widths[lo:hi].max()) > _PAD_BUDGET:
            hi = lo + (hi - lo) // 2
        yield lo, hi
        lo = hi


def decode(offsets: np.ndarray, data: np.ndarray, path: str | None = None,
           as_object: bool = False) -> np.ndarray:
    """Strings ``data[offsets[i]-offsets[0]:offsets[i+1]-offsets[0]]`` as a StringDType array."""
    n = len(offsets) - 1
    rel = offsets - offsets[0]
    pa = _pyarrow()
    try:
        if pa is not None:
            parr = pa.LargeStringArray.from_buffers(
                n, pa.py_buffer(np.ascontiguousarray(rel)), pa.py_buffer(data))
            parr.validate(full=True)
            obj = parr.to_numpy(zero_copy_only=False)
            return obj if as_object else obj.astype(STRING_DTYPE)
        out = _decode_numpy(rel, data)
    except (UnicodeDecodeError, ValueError) as exc:
        if pa is not None and not isinstance(exc, pa.ArrowInvalid):
            raise
        raise FormatError(f"string column holds invalid UTF-8: {exc}", path) from None
    return out.astype(object) if as_object else out


def _decode_numpy(rel: np.ndarray, data: np.ndarray) -> np.ndarray:
    lens = np.diff(rel)
    out = np.empty(len(lens), dtype=STRING_DTYPE)
    for lo, hi in _batches(lens):
        width = int(lens[lo:hi].max()) if hi > lo else 0
        mat = np.zeros((hi - lo, max(width, 1)), np.uint8)
        mask = np.arange(mat.shape[1]) < lens[lo:hi, None]
        mat[mask] = data[rel[lo]:rel[hi]]
        raw = mat.view(f"S{mat.shape[1]}").reshape(-1)
        out[lo:hi] = np.strings.decode(raw, "utf-8")
        # Fixed-width bytes drop trailing NULs: restore those rows from the bytes.
        ends = rel[lo + 1:hi + 1] - 1
        nul = np.flatnonzero((lens[lo:hi] > 0) & (data[np.maximum(ends, 0)] == 0)) if \
            len(data) else np.zeros(0, np.intp)
        for i in nul:
            out[lo + i] = bytes(data[rel[lo + i]:rel[lo + i + 1]]).decode("utf-8")
    return out


# -- the column ---------------------------------------------------------------------------


class StringColumn(Container):
    """A column of variable-length ``str`` values (UTF-8), in memory or on disk.

    Reads return numpy ``StringDType`` arrays (``read(key, as_object=True)`` for
    ``object`` arrays of ``str``); :meth:`to_arrow` gives a ``pyarrow.LargeStringArray``.
    """

    def __init__(self, values: Any = None, *, rootdir: str | os.PathLike | None = None,
                 mode: str = "a", cparams: Any = None, expectedlen: int | None = None,
                 fsync: bool = True, storage_options: dict | None = None,
                 format: str | None = None,  # noqa: A002
                 membership: Membership | None = None) -> None:
        self._rootdir = os.fspath(rootdir) if rootdir is not None else None
        # A column of a versioned table: its two arrays are members of the table's dataset.
        self._membership = membership
        self._storage_options = storage_options
        self._store: Store = LOCAL
        self._path = ""  # in memory
        if self._rootdir is not None:
            self._store, self._path = resolve(self._rootdir, storage_options)
        self._mode = mode
        self._lock: WriteLock | None = None
        if self._rootdir is not None and values is None and self._store.exists(self._path):
            try:
                self._open(fsync)
            except BaseException:
                self._release_lock()  # a traceback may keep this object: hold no lock
                raise
            return
        if mode == "r":
            raise ValueError("mode 'r' needs an existing string column")
        expected = expectedlen or (len(values) if values is not None else 0) or 2**16
        kw = dict(cparams=cparams, fsync=fsync, mode="w" if mode == "w" else "a",
                  format=format or "superchunk",
                  storage_options=storage_options)
        if self._rootdir is not None:
            if self._store.exists(self._path):
                if mode != "w":
                    raise ContainerExistsError(f"{self._rootdir}: already exists")
                refuse_own_source(self._rootdir, [values])
                # Not while another writer holds it; this process's older handles of it
                # are closed (taken over). A table's member is covered by the table's lock.
                old = None
                if membership is None:
                    refuse_member(self._store, self._store.join(self._path, "offsets"))
                    old = WriteLock.acquire(self._store, self._path, take_over=True)
                self._store.rmtree(self._path)
                if old is not None:
                    old.release()  # it locked the removed directory
            self._store.makedirs(self._path)
            self._hold()
            kw["mode"] = "a"
        self._offsets = carray(np.zeros(1, np.int64), expectedlen=expected + 1,
                               rootdir=self._sub("offsets"), storage=self._member("offsets"),
                               **kw)
        self._values = carray(np.zeros(0, np.uint8), expectedlen=max(expected * 16, 1024),
                              rootdir=self._sub("values"), storage=self._member("values"), **kw)
        if self._rootdir is not None:
            self._store.put(self._store.join(self._path, MARKER), _MARKER_BYTES,
                            fsync=fsync)
        self._attrs = Attrs(self._attrs_layout(fsync), mode)
        if self._rootdir is not None:
            self._attrs_layout(fsync).save_attrs({})
        if values is not None:
            self.append(values)
            self.flush()

    def _member(self, name: str) -> dict[str, Any] | None:
        """The storage option that makes array ``name`` a member of the table's dataset."""
        m = self._membership
        return None if m is None else {"member": Membership(m.dataset, f"{m.name}/{name}")}

    def engines(self) -> list[Any]:
        """The engines of the column's two arrays."""
        return [self._offsets.engine, self._values.engine]

    def storage_kind(self) -> str:
        return "string"

    def _sub(self, name: str) -> str | None:
        if self._rootdir is None:
            return None
        return self._store.url(self._store.join(self._path, name))

    def _hold(self, take_over: bool = False) -> None:
        """Take the writer's lock on the column directory (``take_over``: mode 'w'); a
        later mode='w' open here closes this column (:meth:`abandon`); a versioned
        table's column is covered by the table's lock."""
        if self._membership is not None:
            return
        self._lock = WriteLock.acquire(self._store, self._path, take_over=take_over,
                                       on_takeover=self.abandon)

    def _release_lock(self) -> None:
        lock, self._lock = self._lock, None
        if lock is not None:
            lock.release()

    def _attrs_layout(self, fsync: bool):
        if self._rootdir is None:
            if not hasattr(self, "_mem_layout"):
                self._mem_layout = MemoryLayout()
            return self._mem_layout
        return PlainAttrsFile(self._store, self._path, fsync)

    def _open(self, fsync: bool) -> None:
        if not is_string_column(self._path, self._store):
            raise FormatError("not a string column (no __vlstring__ marker)", self._rootdir)
        check_string_marker(self._store, self._path)
        mode = "r" if self._mode == "r" else "a"
        if mode == "a":
            self._hold(take_over=self._mode == "w")
        opts = self._storage_options
        self._offsets = carray(rootdir=self._sub("offsets"), mode=mode, fsync=fsync,
                               storage_options=opts, storage=self._member("offsets"))
        self._values = carray(rootdir=self._sub("values"), mode=mode, fsync=fsync,
                              storage_options=opts, storage=self._member("values"))
        if self._offsets.dtype != np.int64 or self._values.dtype != np.uint8 or \
                len(self._offsets) < 1 or self._offsets.ndim != 1:
            raise FormatError("string column offsets/values have the wrong dtype or shape",
                              self._rootdir)
        end = int(self._offsets[-1])
        if end > len(self._values) or int(self._offsets[0]) != 0:
            raise FormatError(f"offsets end at byte {end}, but only {len(self._values)} bytes "
                              "are stored", self._rootdir)
        if end < len(self._values) and mode == "a":
            self._values.resize(end)  # bytes of an append that did not complete
        self._attrs = Attrs(self._attrs_layout(fsync), self._mode)
        if self._mode == "w":
            self.resize(0)

    # -- properties ---------------------------------------------------------------------------

    dtype = STRING_DTYPE
    ndim = 1
    atomshape: tuple[int, ...] = ()

    def __len__(self) -> int:
        return len(self._offsets) - 1

    @property
    def len(self) -> int:
        return len(self)

    @property
    def shape(self) -> tuple[int]:
        return (len(self),)

    @property
    def nbytes(self) -> int:
        """Bytes of the UTF-8 data plus the offsets (what Arrow would hold)."""
        return self._offsets.nbytes + int(self._offsets[-1])

    @property
    def cbytes(self) -> int:
        return self._offsets.cbytes + self._values.cbytes

    @property
    def chunklen(self) -> int:
        return self._offsets.chunklen

    @property
    def cparams(self) -> CParams:
        return self._values.cparams

    # -- reading ------------------------------------------------------------------------------

    def read_rows(self, rows: range, as_object: bool = False) -> np.ndarray:
        """Rows ``rows`` (a range with a positive step) as a StringDType array (or an
        ``object`` array of ``str``)."""
        if rows.step != 1:
            picked = np.arange(rows.start, rows.stop, rows.step, dtype=np.int64)
            return self.take(picked, as_object)
        offs = self._offsets[rows.start:rows.stop + 1]
        data = self._values[int(offs[0]):int(offs[-1])] if len(offs) else np.zeros(0, np.uint8)
        if len(offs) == 0:
            offs = np.zeros(1, np.int64)
        return decode(offs, data, self._rootdir, as_object)

    def take(self, rows: Any, as_object: bool = False) -> np.ndarray:
        """The rows at positions ``rows`` (any order, repeats allowed)."""
        rows = np.asarray(rows, dtype=np.int64)
        if len(rows) == 0:
            return decode(np.zeros(1, np.int64), np.zeros(0, np.uint8), None, as_object)
        lo, hi = int(rows.min()), int(rows.max())
        if hi - lo < 4 * len(rows):  # dense: one range, then pick
            return self.read_rows(range(lo, hi + 1), as_object)[rows - lo]
        starts, stops = self._offsets[rows], self._offsets[rows + 1]
        lens = stops - starts
        offs = np.zeros(len(rows) + 1, np.int64)
        np.cumsum(lens, out=offs[1:])
        # Every byte position wanted, in order: one gather from the values carray.
        pos = np.repeat(starts - offs[:-1], lens) + np.arange(offs[-1])
        return decode(offs, self._values[pos], self._rootdir, as_object)

    def read(self, key: Any = slice(None), as_object: bool = False) -> Any:
        """Rows ``key`` as a StringDType array (or ``object`` array of ``str``)."""
        sel = select(key, self.shape)
        if isinstance(sel.rows, int):
            return str(self.read_rows(range(sel.rows, sel.rows + 1), True)[0])
        if isinstance(sel.rows, range):
            if sel.rows.step < 0:
                out = self.read_rows(sel.rows[::-1], as_object)[::-1]
            else:
                out = self.read_rows(sel.rows, as_object)
        else:
            out = self.take(sel.rows, as_object)
        return out if sel.post is None else out[sel.post]

    def __getitem__(self, key: Any) -> Any:
        return self.read(key)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        out = self.read()
        return out if dtype is None else out.astype(dtype)

    def null_count(self) -> int:
        """How many rows are missing: 0 (a string column with missing values is a
        :class:`carray.NullableColumn` of strings)."""
        return 0

    def __iter__(self) -> Iterator[str]:
        for block in self.iterblocks():
            yield from (str(s) for s in block)

    def iterblocks(self, blen: int | None = None, start: int = 0,
                   stop: int | None = None) -> Iterator[np.ndarray]:
        blen = blen or self.chunklen
        rows = range(len(self))[start:stop]
        for i in range(0, len(rows), blen):
            yield self.read_rows(rows[i:i + blen])

    def isin(self, values: Any, invert: bool = False) -> np.ndarray:
        """Booleans, True where the string is one of ``values``, as pandas' ``isin``.

        Parameters
        ----------
        values : list-like
            The members (values that are not strings never match).
        invert : bool
            True where the string is *not* one of them.

        Returns
        -------
        numpy.ndarray of bool
        """
        return registered_method("isin")(self, values, invert)

    def to_arrow(self):
        """A ``pyarrow.LargeStringArray`` built from the stored offsets and bytes."""
        import pyarrow as pa

        offs, data = self._offsets[:], self._values[:int(self._offsets[-1])]
        return pa.LargeStringArray.from_buffers(len(self), pa.py_buffer(offs),
                                                pa.py_buffer(data))

    def arrow_rows(self, start: int, stop: int):
        """Rows ``[start, stop)`` as a ``pyarrow.LargeStringArray``, from the stored offsets
        and bytes of just those rows (no Python string per row)."""
        import pyarrow as pa

        stop = max(start, min(stop, len(self)))
        offs = np.asarray(self._offsets[start:stop + 1], dtype=np.int64)
        if len(offs) == 0:
            offs = np.zeros(1, np.int64)
        data = self._values[int(offs[0]):int(offs[-1])] if offs[-1] > offs[0] else \
            np.zeros(0, np.uint8)
        return pa.LargeStringArray.from_buffers(len(offs) - 1, pa.py_buffer(offs - offs[0]),
                                                pa.py_buffer(np.ascontiguousarray(data)))

    # -- writing ------------------------------------------------------------------------------

    def _writable(self) -> None:
        self._check_open()
        if self._mode == "r":
            raise ReadOnlyError(f"{self._rootdir or 'string column'}: opened in mode 'r'")

    def append(self, values: Any) -> None:
        """Append ``str`` values (a single ``str`` is one row)."""
        self._writable()
        if isinstance(values, str):
            values = [values]
        elif isinstance(values, StringColumn):
            values = values.read(as_object=True)
        elif hasattr(values, "to_numpy") and not isinstance(values, np.ndarray) and \
                not _is_arrow_strings(values):
            values = values.to_numpy(zero_copy_only=False) if _is_arrow(values) else \
                values.to_numpy()
        lengths, data = _arrow_parts(values) if _is_arrow_strings(values) else encode(values)
        self._append_encoded(lengths, data)

    def _append_encoded(self, lengths: np.ndarray, data: np.ndarray) -> None:
        """Append rows given as their UTF-8 lengths and bytes back to back."""
        if len(lengths) == 0:
            return
        ends = np.cumsum(lengths) + int(self._offsets[-1])
        self._values.append(data)
        self._offsets.append(ends)

    def __setitem__(self, key: Any, value: Any) -> None:
        """Replace rows (numpy's keys and broadcasting); the rows from the first one whose
        value changes are rewritten, so writing the values already there writes nothing.

        Every new value is checked before anything is written: a value that is not a
        ``str`` raises TypeError and leaves the column as it was.
        """
        self._writable()
        n = len(self)
        rows = np.atleast_1d(np.arange(n)[key])  # numpy's rules: negatives, steps, masks
        lo = int(rows.min()) if rows.size else n
        old = self.read_rows(range(lo, n), as_object=True)
        new = old.copy()
        new[rows - lo] = value
        lengths, data = encode(new)
        changed = np.flatnonzero(new != old)
        if not len(changed):
            return
        first = int(changed[0])
        self.resize(lo + first)
        self._append_encoded(lengths[first:], data[int(lengths[:first].sum()):])
        self.flush()

    def resize(self, nitems: int) -> None:
        """Shrink to ``nitems`` rows, or grow with empty strings."""
        self._writable()
        n = len(self)
        if nitems < n:
            self._offsets.resize(nitems + 1)
            self._values.resize(int(self._offsets[-1]))
        elif nitems > n:
            self.append(np.full(nitems - n, "", dtype=object))
        self.flush()

    def trim(self, nitems: int) -> None:
        self.resize(len(self) - nitems)

    def flush(self) -> None:
        # Bytes before offsets: the offsets are the record of what is complete.
        self._values.flush()
        self._offsets.flush()

    def _release(self) -> None:
        self._values.close()
        self._offsets.close()
        self._release_lock()

    def _parts(self) -> list[Any]:
        return [self._offsets, self._values]

    def discard(self) -> None:
        self._values.discard()
        self._offsets.discard()
        self._release_lock()

    def clip(self, nitems: int) -> None:
        """Hide rows past ``nitems`` without writing anything (read-only table views)."""
        self._offsets.engine.clip(nitems + 1)

    def free_cachemem(self) -> None:
        self._values.free_cachemem()
        self._offsets.free_cachemem()

    def copy(self, **kwargs: Any) -> StringColumn:
        """A copy, attributes included (``rootdir``, ``mode``, ``cparams`` as for the
        constructor)."""
        refuse_own_source(kwargs.get("rootdir"), [self])
        attrs = self.attrs.checked()  # refused before anything is written
        out = StringColumn(rootdir=kwargs.get("rootdir"), mode=kwargs.get("mode", "a"),
                           cparams=kwargs.get("cparams", self.cparams),
                           expectedlen=max(len(self), 1))
        for block in self.iterblocks():
            out.append(block)
        out.attrs.update(attrs)
        out.flush()
        return out

    def __repr__(self) -> str:
        where = f", rootdir={self._rootdir!r}" if self._rootdir else ""
        return f"StringColumn({len(self)} rows{where})"


def _is_arrow(values: Any) -> bool:
    return type(values).__module__.startswith("pyarrow")


def _is_arrow_strings(values: Any) -> bool:
    if not _is_arrow(values) or not hasattr(values, "type"):
        return False
    import pyarrow as pa

    return pa.types.is_string(values.type) or pa.types.is_large_string(values.type)


def _arrow_parts(values: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(lengths, bytes)`` of an Arrow string array, straight from its buffers."""
    import pyarrow as pa

    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if values.null_count:
        raise ValueError(f"string column values hold {values.null_count} nulls; "
                         "string columns cannot hold nulls")
    values = values.cast(pa.large_string())
    offs = np.frombuffer(values.buffers()[1], dtype=np.int64)[
        values.offset:values.offset + len(values) + 1]
    buf = values.buffers()[2]
    data = np.frombuffer(buf, dtype=np.uint8)[offs[0]:offs[-1]] if buf is not None and \
        len(offs) else np.zeros(0, np.uint8)
    return np.diff(offs), data
