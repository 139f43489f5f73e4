"""Per-chunk min/max summaries ("zone maps") of numeric columns.

A query that compares a column with a constant can skip every chunk whose
[min, max] range cannot satisfy the comparison, without decoding it.  The map
is kept up to date by the array on every chunk it writes and persisted beside
the column (``meta/zonemap.npy``) at flush.  Other writers (bcolz itself) do not
know about it, so each entry also records the size and modification time of
the chunk file it summarises: an entry whose file has changed is ignored and
recomputed the next time that chunk is decoded.
"""

from __future__ import annotations

import io

import numpy as np

from carray.errors import FormatError

# Kinds whose order numpy and numexpr agree on; datetimes are left out because
# NaT sorts as the smallest value in numpy but compares false everywhere.
SUMMARISED_KINDS = "biuf"


def summarised(dtype: np.dtype, atomshape: tuple[int, ...]) -> bool:
    """Whether a column of this dtype gets a zone map."""
    return dtype.kind in SUMMARISED_KINDS and not atomshape and dtype.isnative


class ZoneMap:
    """Min, max and has-NaN per chunk, plus the stamp of the chunk file summarised."""

    _FIELDS = ("lo", "hi", "nan", "known", "checked", "stamp")

    def __init__(self, dtype: np.dtype, nchunks: int = 0) -> None:
        self.dtype = np.dtype(dtype)
        self._n = 0
        self._alloc(max(nchunks, 16))
        self._n = nchunks
        self.dirty = False

    def _alloc(self, capacity: int) -> None:
        # Arrays grow by doubling, so summarising chunk after chunk stays linear.
        old = {f: getattr(self, "_" + f, None) for f in self._FIELDS}
        self._lo = np.zeros(capacity, dtype=self.dtype)
        self._hi = np.zeros(capacity, dtype=self.dtype)
        self._nan = np.zeros(capacity, dtype=bool)
        self._known = np.zeros(capacity, dtype=bool)
        # Stamps are checked against the files once per session (see validate()).
        self._checked = np.zeros(capacity, dtype=bool)
        # (size, mix of inode and times) of the chunk file; zeros in memory.
        self._stamp = np.zeros((capacity, 2), dtype=np.int64)
        for f, arr in old.items():
            if arr is not None:
                getattr(self, "_" + f)[:self._n] = arr[:self._n]

    lo = property(lambda self: self._lo[:self._n])
    hi = property(lambda self: self._hi[:self._n])
    nan = property(lambda self: self._nan[:self._n])
    known = property(lambda self: self._known[:self._n])
    checked = property(lambda self: self._checked[:self._n])
    stamp = property(lambda self: self._stamp[:self._n])

    def __len__(self) -> int:
        return self._n

    def _grow(self, nchunks: int) -> None:
        if nchunks <= self._n:
            return
        if nchunks > len(self._lo):
            self._alloc(max(nchunks, 2 * len(self._lo)))
        # Entries past the old end are unknown (stale values may linger after truncate).
        self._known[self._n:nchunks] = False
        self._checked[self._n:nchunks] = False
        self._n = nchunks

    def update(self, nchunk: int, data: np.ndarray, stamp: tuple[int, int] | None) -> None:
        """Summarise the values just written as chunk ``nchunk``."""
        self._grow(nchunk + 1)
        if len(data) == 0:
            self._known[nchunk] = False
            return
        if self.dtype.kind == "f":
            lo, hi = np.fmin.reduce(data), np.fmax.reduce(data)
            # fmin ignores NaN unless every value is NaN, so NaN bounds mean "all NaN".
            has_nan = bool(np.isnan(lo) or np.isnan(hi)) or bool(np.isnan(data.sum()))
        else:
            lo, hi, has_nan = data.min(), data.max(), False
        self._lo[nchunk], self._hi[nchunk], self._nan[nchunk] = lo, hi, has_nan
        self._known[nchunk] = True
        self._checked[nchunk] = True
        self._stamp[nchunk] = stamp if stamp is not None else (0, 0)
        self.dirty = True

    def forget(self, nchunk: int) -> None:
        if nchunk < self._n and self._known[nchunk]:
            self._known[nchunk] = False
            self.dirty = True

    def truncate(self, nchunks: int) -> None:
        """Drop entries for chunks ``nchunks`` and above."""
        if nchunks < self._n:
            self._n = nchunks
            self.dirty = True

    def validate(self, first: int, stop: int, stamp_of) -> None:
        """Check the stamps of entries ``[first, stop)`` not checked yet this session."""
        self._grow(stop)
        todo = np.flatnonzero(self._known[first:stop] & ~self._checked[first:stop]) + first
        for nchunk in todo:
            if tuple(self._stamp[nchunk]) != stamp_of(int(nchunk)):
                self._known[nchunk] = False
            self._checked[nchunk] = True

    # -- persistence ------------------------------------------------------------------------

    @classmethod
    def load(cls, layout, meta) -> ZoneMap | None:
        """The summaries a layout keeps for an array (a fresh map when none are usable)."""
        if not summarised(meta.dtype, meta.atomshape):
            return None
        stored = layout.load_zonemap()
        if stored is not None:
            try:
                return cls.from_bytes(stored, meta.dtype, layout.describe())
            except FormatError:
                pass  # only a cache: rebuilt as chunks are written or read
        return cls(meta.dtype)

    def to_bytes(self) -> bytes:
        table = np.empty(len(self.lo), dtype=[("lo", self.dtype), ("hi", self.dtype),
                                              ("nan", "?"), ("known", "?"),
                                              ("size", "<i8"), ("mtime", "<i8")])
        table["lo"], table["hi"], table["nan"], table["known"] = \
            self.lo, self.hi, self.nan, self.known
        table["size"], table["mtime"] = self.stamp[:, 0], self.stamp[:, 1]
        buf = io.BytesIO()
        np.save(buf, table, allow_pickle=False)
        return buf.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes, dtype: np.dtype, path: str) -> ZoneMap:
        try:
            table = np.load(io.BytesIO(data), allow_pickle=False)
            if table.ndim != 1 or table.dtype.names != ("lo", "hi", "nan", "known", "size",
                                                         "mtime"):
                raise ValueError(f"unexpected layout {table.dtype}")
            zm = cls(dtype, len(table))
            zm.lo[:] = table["lo"]
            zm.hi[:] = table["hi"]
        except (ValueError, TypeError, OSError, EOFError) as exc:
            raise FormatError(f"zone map is unreadable: {exc}", path) from None
        zm.nan[:], zm.known[:] = table["nan"], table["known"]
        zm.stamp[:, 0], zm.stamp[:, 1] = table["size"], table["mtime"]
        zm.checked[:] = False
        return zm
