"""Reading variables (whole or a selection) out of an open ds file, touching only their bytes.

What is read for a selection (``index``, one key per axis, applied per axis as
"outer" indexing like xarray's, unlike numpy's broadcasting of several arrays):

* The first axis picks a span of rows, from the first to the last selected row
  (a slice with a step, or an index array, reads the whole span between its ends).
  In C order those rows are one contiguous byte range, and that range is all that is read
  of the values. Keys on the other axes are applied in memory to the rows read.
* bool values are bit-packed: the bytes holding the span's bits are read.
* Masked variables store only the unmasked values after the bit mask, so the position of
  a row's first stored value depends on every mask bit before it: the whole mask
  (``ceil(count/8)`` bytes) is read first, then just the stored values of the span.
* str/unicode variables keep a table of uint64 byte lengths before the strings: the
  table is read up to the span's last value (the strings' positions are its running
  sum), then only the span's string bytes.
* Files whose string ``.len`` ds-format 5.0.2 over-counted (see :mod:`carray.formats.ds`)
  have every later ``.offset`` too large. When the header is laid out back to back, the
  reader measures each earlier string variable (its mask and length table) and moves the
  later offsets back by the excess.
"""

from __future__ import annotations

import operator
from collections.abc import Iterator
from typing import Any

import numpy as np

from carray.errors import FormatError
from carray.formats.ds import header as H
from carray.formats.ds.header import NUMERIC_TYPES, STRING_TYPES, VarLayout, unescape
from carray.stores import Location, resolve

#: Mask bits unpacked at a time when a whole mask is counted (1 MiB of bools).
_MASK_SLICE = 1 << 20


class Reader:
    """An open ds file: its checked header and positioned reads of its variables.

    ``path`` is a local path or a URL (``storage_options`` go to its file system);
    :attr:`path` is then what names the file in messages.
    """

    def __init__(self, path: Location, storage_options: dict[str, Any] | None = None) -> None:
        store, key = resolve(path, storage_options)
        self.path = store.url(key)
        self.handle = store.open(key)
        try:
            self.header = H.parse(self.handle, self.path)
        except BaseException:
            self.handle.close()
            raise
        self._offsets: dict[str, int] | None = None

    def close(self) -> None:
        self.handle.close()

    def __enter__(self) -> Reader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- raw bytes --------------------------------------------------------------------------

    def _fail(self, v: VarLayout, message: str, offset: int | None = None) -> FormatError:
        return FormatError(f"variable {unescape(v.key)!r}: {message}", path=self.path,
                           offset=offset)

    def read_array(self, v: VarLayout, dtype, n: int, offset: int) -> np.ndarray:
        """``n`` items of ``dtype`` at absolute ``offset``, as a new writable array."""
        dtype = np.dtype(dtype)
        nbytes = n * dtype.itemsize
        if offset + nbytes > self.header.file_size:
            raise self._fail(v, f"data ({nbytes} bytes) runs past the end of the file "
                                f"({self.header.file_size} bytes)", offset)
        prefix = self.header.prefix
        if offset + nbytes <= len(prefix):
            return np.frombuffer(prefix, dtype, n, offset).copy()
        out = np.empty(n, dtype)
        if nbytes and H.pread_into(self.handle, out, offset) < nbytes:
            raise self._fail(v, "file ends inside the data (was it truncated?)", offset)
        return out

    # -- layout -------------------------------------------------------------------------------

    def data_offset(self, v: VarLayout) -> int:
        """Absolute offset of ``v``'s bytes, corrected for ds-format's string .len bug."""
        header = self.header
        if not header.needs_repair:
            return v.offset
        if self._offsets is None:
            offsets, shift = {}, 0
            for key, s in header.layouts.items():
                offsets[key] = s.offset - shift
                if s.type in STRING_TYPES and s.count:
                    actual = self._string_extent(s, offsets[key])
                    if actual > s.length:
                        raise self._fail(s, f".len {s.length} is smaller than its data "
                                            f"({actual} bytes)", offsets[key])
                    shift += s.length - actual
            self._offsets = offsets
        return self._offsets[v.key]

    def _string_extent(self, v: VarLayout, offset: int) -> int:
        """Bytes a string variable really occupies: mask, length table and strings."""
        n = v.count
        if v.missing:
            n -= int(np.count_nonzero(self._mask(v, offset)))
        lengths = self._lengths(v, offset + v.mask_len, n, n)
        return v.mask_len + 8 * n + int(lengths.sum(dtype=np.uint64))

    def _mask(self, v: VarLayout, offset: int) -> np.ndarray:
        packed = self.read_array(v, np.uint8, v.mask_len, offset)
        return np.unpackbits(packed, count=v.count).view(np.bool_)

    def _lengths(self, v: VarLayout, offset: int, n_stored: int, upto: int) -> np.ndarray:
        """The first ``upto`` entries of a string variable's length table, checked."""
        lengths = self.read_array(v, np.dtype("u8").newbyteorder(v.byteorder), upto, offset)
        room = self.header.file_size - offset - 8 * n_stored
        # Each length is at most the file size, so the running sum cannot wrap around
        # before some partial sum exceeds the file size: checking the largest sum suffices.
        if upto and (int(lengths.max()) > room
                     or int(np.cumsum(lengths, dtype=np.uint64).max()) > room):
            raise self._fail(v, "string lengths run past the end of the file", offset)
        return lengths

    # -- values -------------------------------------------------------------------------------

    def read_span(self, v: VarLayout, e0: int, e1: int) -> np.ndarray:
        """Flat values ``e0:e1`` (C order) of ``v``; a masked array if ``v`` is masked."""
        offset = self.data_offset(v)
        if not v.missing:
            return self._stored(v, offset, v.count, e0, e1)
        mask = self._mask(v, offset)
        n_stored = v.count - int(np.count_nonzero(mask))
        if v.length is not None and v.type not in STRING_TYPES \
                and v.length != v.mask_len + v.payload(n_stored):
            raise self._fail(v, f".len {v.length} disagrees with its mask "
                                f"({v.mask_len + v.payload(n_stored)} bytes expected)")
        if offset + v.mask_len + v.payload(n_stored) > self.header.file_size:
            raise self._fail(v, "data runs past the end of the file", offset)
        keep = ~mask[e0:e1]
        s0 = e0 - int(np.count_nonzero(mask[:e0]))
        s1 = s0 + int(np.count_nonzero(keep))
        values = self._stored(v, offset + v.mask_len, n_stored, s0, s1)
        if v.type in STRING_TYPES:
            out = np.full(e1 - e0, "" if v.type == "unicode" else b"", dtype=object)
        else:
            out = np.zeros(e1 - e0, values.dtype)
        out[keep] = values
        return np.ma.MaskedArray(out, mask=~keep)

    def _stored(self, v: VarLayout, offset: int, n_stored: int, s0: int, s1: int):
        """Stored values ``s0:s1`` of ``v`` whose first stored value is at ``offset``."""
        if v.type == "bool":
            b0 = s0 // 8
            packed = self.read_array(v, np.uint8, (s1 + 7) // 8 - b0, offset + b0)
            bits = np.unpackbits(packed).view(np.bool_)
            return bits[s0 - 8 * b0:s1 - 8 * b0]
        if v.type not in STRING_TYPES:
            size = v.dtype.itemsize
            return self.read_array(v, v.dtype, s1 - s0, offset + s0 * size)
        if s1 == s0:
            return np.empty(0, dtype=object)
        lengths = self._lengths(v, offset, n_stored, s1)
        if s0 == 0 and s1 == n_stored and v.length is not None:
            actual = v.mask_len + 8 * n_stored + int(lengths.sum(dtype=np.uint64))
            if actual > v.length:
                raise self._fail(v, f".len {v.length} is smaller than its data "
                                    f"({actual} bytes)")
        first = int(lengths[:s0].sum(dtype=np.uint64))
        return self._strings(v, offset + 8 * n_stored + first, lengths[s0:s1])

    def _strings(self, v: VarLayout, start: int, lengths: np.ndarray) -> np.ndarray:
        """The strings of ``lengths`` bytes each stored one after another from ``start``,
        as an object array (of str for unicode, bytes for str)."""
        ends = np.cumsum(lengths, dtype=np.uint64).tolist()
        blob = self.read_array(v, np.uint8, ends[-1] if ends else 0, start).tobytes()
        raw = [blob[a:b] for a, b in zip([0, *ends[:-1]], ends, strict=True)]
        pieces: list[bytes] | list[str] = raw
        if v.type == "unicode":
            try:
                pieces = [p.decode("utf-8") for p in raw]
            except UnicodeDecodeError as exc:
                raise self._fail(v, f"string is not valid UTF-8 ({exc.reason})", start) from None
        out = np.empty(len(pieces), dtype=object)
        out[:] = pieces
        return out

    # -- rows in order, a block at a time ---------------------------------------------

    def iter_rows(self, v: VarLayout, step: int) -> Iterator[Any]:
        """``v``'s rows (along its first axis), ``step`` of them at a time and in order,
        as :meth:`read_variable` returns them (masked where the file has a mask).

        Each block reads only its own bytes: its bits of the mask, its stored values
        (and, for strings, its entries of the length table), keeping count of the values
        stored before it.  Memory follows ``step``, never the variable's size (but for a
        first pass counting a mask's missing values, a slice of it at a time).  A 0-d
        variable is one block; a variable without data, none.
        """
        if v.shape is None:
            return
        if not v.shape:
            yield self.read_variable(v)
            return
        rows = v.shape[0]
        rowsize = v.count // rows if rows else 0
        offset = self.data_offset(v)
        n_stored = self._stored_count(v, offset) if v.missing else v.count
        values_at = offset + v.mask_len
        s0 = first = 0  # values stored before the block; for strings, their bytes
        for r0 in range(0, rows, max(step, 1)):
            r1 = min(r0 + max(step, 1), rows)
            e0, e1 = r0 * rowsize, r1 * rowsize
            keep = ~self._mask_bits(v, offset, e0, e1) if v.missing else None
            s1 = s0 + (int(np.count_nonzero(keep)) if keep is not None else e1 - e0)
            if v.type in STRING_TYPES:
                lengths = self._lengths_run(v, values_at, n_stored, s0, s1)
                values = self._strings(v, values_at + 8 * n_stored + first, lengths) \
                    if s1 > s0 else np.empty(0, dtype=object)
                first += int(lengths.sum(dtype=np.uint64))
            else:
                values = self._stored(v, values_at, n_stored, s0, s1)
            s0 = s1
            shape = (r1 - r0, *v.shape[1:])
            if keep is None:
                yield values.reshape(shape)
                continue
            out = np.full(e1 - e0, "" if v.type == "unicode" else b"", dtype=object) \
                if v.type in STRING_TYPES else np.zeros(e1 - e0, values.dtype)
            out[keep] = values
            yield np.ma.MaskedArray(out, mask=~keep).reshape(shape)

    def _mask_bits(self, v: VarLayout, offset: int, e0: int, e1: int) -> np.ndarray:
        """Bits ``e0:e1`` of ``v``'s missing-value mask (True: missing)."""
        b0 = e0 // 8
        packed = self.read_array(v, np.uint8, (e1 + 7) // 8 - b0, offset + b0)
        return np.unpackbits(packed).view(np.bool_)[e0 - 8 * b0:e1 - 8 * b0]

    def _stored_count(self, v: VarLayout, offset: int) -> int:
        """How many values ``v`` stores (its mask's zero bits), counted a slice of the
        mask at a time, and checked against ``.len`` and the file's size."""
        missing = 0
        for e0 in range(0, v.count, _MASK_SLICE):
            missing += int(np.count_nonzero(
                self._mask_bits(v, offset, e0, min(e0 + _MASK_SLICE, v.count))))
        n_stored = v.count - missing
        if v.length is not None and v.type not in STRING_TYPES \
                and v.length != v.mask_len + v.payload(n_stored):
            raise self._fail(v, f".len {v.length} disagrees with its mask "
                                f"({v.mask_len + v.payload(n_stored)} bytes expected)")
        if offset + v.mask_len + v.payload(n_stored) > self.header.file_size:
            raise self._fail(v, "data runs past the end of the file", offset)
        return n_stored

    def _lengths_run(self, v: VarLayout, offset: int, n_stored: int, s0: int,
                     s1: int) -> np.ndarray:
        """Entries ``s0:s1`` of a string variable's length table (at ``offset``)."""
        lengths = self.read_array(v, np.dtype("u8").newbyteorder(v.byteorder), s1 - s0,
                                  offset + 8 * s0)
        if s1 > s0 and int(lengths.max()) > self.header.file_size:
            raise self._fail(v, "string lengths run past the end of the file", offset)
        return lengths

    def read_variable(self, v: VarLayout, index: tuple | None = None):
        """Values of ``v``: all of them, or the outer selection ``index`` (one key per axis).

        Returns None for a variable without data, a numpy scalar (or str/bytes) for an
        unmasked 0-d variable, otherwise an array (masked if the file has a mask).
        """
        if v.shape is None:
            return None
        shape = v.shape
        keys = normalize_index(index, shape) if index is not None else None
        if keys is None and not v.missing and v.type in NUMERIC_TYPES:
            # The common case, kept short: many tiny files make per-call costs count.
            out = self.read_array(v, v.dtype, v.count, self.data_offset(v))
            return out.reshape(shape) if shape else out[0]
        if keys is None or all(isinstance(k, slice) and k == slice(0, n, 1)
                               for k, n in zip(keys, shape, strict=True)):
            out = self.read_span(v, 0, v.count).reshape(shape)
            if not shape and not v.missing:
                return out[()]
            return out
        rowsize = v.count // shape[0] if shape[0] else 0
        lo, hi, local = _row_span(keys[0], shape[0])
        rows = self.read_span(v, lo * rowsize, hi * rowsize).reshape((hi - lo, *shape[1:]))
        out = apply_outer(rows, (local, *keys[1:]))
        if out is np.ma.masked:
            # numpy's masked constant forgets the dtype: keep a 0-d masked array instead.
            fill = np.ma.getdata(rows).flat[0] if rows.dtype == object else 0
            return np.ma.MaskedArray(np.array(fill, dtype=rows.dtype), mask=True)
        return out


def _row_span(key, n: int) -> tuple[int, int, object]:
    """Rows [lo, hi) that cover the first-axis key, and the key relative to lo."""
    if isinstance(key, int):
        return key, key + 1, 0
    if isinstance(key, slice):
        rows = range(*key.indices(n))
        if not rows:
            return 0, 0, slice(0, 0)
        lo, hi = min(rows[0], rows[-1]), max(rows[0], rows[-1]) + 1
        if rows.step == 1:
            return lo, hi, slice(0, hi - lo)
        return lo, hi, slice(rows.start - lo, (rows.stop - lo) if rows.stop - lo >= 0 else None,
                             rows.step)
    if key.size == 0:
        return 0, 0, key
    lo, hi = int(key.min()), int(key.max()) + 1
    return lo, hi, key - lo


def normalize_index(index, shape: tuple[int, ...]) -> tuple:
    """One key per axis: an int (drops the axis), a slice, or a 1-d int64 array."""
    if not isinstance(index, tuple):
        index = (index,)
    if len(index) > len(shape):
        raise IndexError(f"too many indices ({len(index)}) for {len(shape)} dimensions")
    index = index + (slice(None),) * (len(shape) - len(index))
    keys: list[int | slice | np.ndarray] = []
    for axis, (key, n) in enumerate(zip(index, shape, strict=True)):
        if isinstance(key, slice):
            start, stop, step = key.indices(n)
            # indices() gives stop -1 for a reversed slice to the start; as a slice, -1
            # would mean the last element.
            keys.append(slice(start, None if stop < 0 else stop, step))
            continue
        if not isinstance(key, (bool, np.bool_)):
            try:
                i = operator.index(key)
            except TypeError:
                pass
            else:
                if not -n <= i < n:
                    raise IndexError(f"index {i} out of range for axis {axis} of size {n}")
                keys.append(i % n)
                continue
        arr = np.asarray(key)
        if arr.dtype == np.bool_:
            if arr.shape != (n,):
                raise IndexError(f"boolean index of shape {arr.shape} for axis {axis} of size {n}")
            arr = np.flatnonzero(arr)
        elif arr.size == 0:
            arr = arr.astype(np.int64)
        elif arr.dtype.kind not in "iu" or arr.ndim != 1:
            raise IndexError(f"axis {axis}: expected an int, a slice or a 1-d array of ints, "
                             f"not {key!r}")
        arr = arr.astype(np.int64).ravel()
        if arr.size and (arr.min() < -n or arr.max() >= n):
            raise IndexError(f"index out of range for axis {axis} of size {n}")
        keys.append(np.where(arr < 0, arr + n, arr))
    return tuple(keys)


def apply_outer(arr, keys: tuple):
    """Apply one key per axis independently (outer indexing), last axis first so that
    integer keys, which drop their axis, do not shift the axes still to be indexed."""
    for axis in range(len(keys) - 1, -1, -1):
        key = keys[axis]
        if isinstance(key, slice):
            if key != slice(0, arr.shape[axis], 1):
                arr = arr[(slice(None),) * axis + (key,)]
        elif isinstance(key, int):
            arr = arr[(slice(None),) * axis + (key,)]
        else:
            arr = arr.take(key, axis=axis)
    return arr
