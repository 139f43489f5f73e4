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

    def __init__(self, dtype: np.dtype, nchunks: int = 0) -> None:
        self.dtype = np.dtype(dtype)
        self.lo = np.zeros(nchunks, dtype=self.dtype)
        self.hi = np.zeros(nchunks, dtype=self.dtype)
        self.nan = np.zeros(nchunks, dtype=bool)
        self.known = np.zeros(nchunks, dtype=bool)
        # (size, mtime_ns) of the chunk file; zeros in memory.
        self.stamp = np.zeros((nchunks, 2), dtype=np.int64)
        # Stamps are checked against the files once per session (see validate()).
        self.checked = np.zeros(nchunks, dtype=bool)
        self.dirty = False

    def __len__(self) -> int:
        return len(self.lo)

    def _grow(self, nchunks: int) -> None:
        extra = nchunks - len(self.lo)
        if extra <= 0:
            return
        self.lo = np.concatenate([self.lo, np.zeros(extra, dtype=self.dtype)])
        self.hi = np.concatenate([self.hi, np.zeros(extra, dtype=self.dtype)])
        self.nan = np.concatenate([self.nan, np.zeros(extra, dtype=bool)])
        self.known = np.concatenate([self.known, np.zeros(extra, dtype=bool)])
        self.checked = np.concatenate([self.checked, np.zeros(extra, dtype=bool)])
        self.stamp = np.concatenate([self.stamp, np.zeros((extra, 2), dtype=np.int64)])

    def update(self, nchunk: int, data: np.ndarray, stamp: tuple[int, int] | None) -> None:
        """Summarise the values just written as chunk ``nchunk``."""
        self._grow(nchunk + 1)
        if len(data) == 0:
            self.known[nchunk] = False
            return
        if self.dtype.kind == "f":
            lo, hi = np.fmin.reduce(data), np.fmax.reduce(data)
            # fmin ignores NaN unless every value is NaN, so NaN bounds mean "all NaN".
            has_nan = bool(np.isnan(lo) or np.isnan(hi)) or bool(np.isnan(data.sum()))
        else:
            lo, hi, has_nan = data.min(), data.max(), False
        self.lo[nchunk], self.hi[nchunk], self.nan[nchunk] = lo, hi, has_nan
        self.known[nchunk] = True
        self.checked[nchunk] = True
        self.stamp[nchunk] = stamp if stamp is not None else (0, 0)
        self.dirty = True

    def forget(self, nchunk: int) -> None:
        if nchunk < len(self.known) and self.known[nchunk]:
            self.known[nchunk] = False
            self.dirty = True

    def truncate(self, nchunks: int) -> None:
        """Drop entries for chunks ``nchunks`` and above."""
        if nchunks < len(self.lo):
            for name in ("lo", "hi", "nan", "known", "checked", "stamp"):
                setattr(self, name, getattr(self, name)[:nchunks])
            self.dirty = True

    def validate(self, first: int, stop: int, stamp_of) -> None:
        """Check the stamps of entries ``[first, stop)`` not checked yet this session."""
        self._grow(stop)
        todo = np.flatnonzero(self.known[first:stop] & ~self.checked[first:stop]) + first
        for nchunk in todo:
            if tuple(self.stamp[nchunk]) != stamp_of(int(nchunk)):
                self.known[nchunk] = False
            self.checked[nchunk] = True

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
        return zm
