"""Per-chunk summaries ("zone maps") of numeric arrays: min/max and statistics.

A query that compares a column with a constant can skip every chunk whose
[min, max] range cannot satisfy the comparison, without decoding it; a
whole-array reduction (sum, mean, var...) merges the chunks' statistics
(:mod:`carray.engine.chunkstats`, :mod:`carray.compute.stats`) instead of decoding
them.  The map is kept up to date by the array on every chunk it writes (the
statistics are worked out where the chunk is compressed) and persisted beside
the array (``meta/zonemap_NNNNNN.npy``, docs/formats/zonemap.md) at flush.  Other writers (bcolz itself) do not
know about it, so each entry also records the size and modification time of
the chunk file it summarises: an entry whose file has changed is ignored and
recomputed the next time that chunk is decoded.  Every row of a segment also holds
the CRC-32 of the whole segment (that column read as zeros), so a damaged segment is
never trusted: like a missing one, it is rebuilt as chunks are read or written.
"""

from __future__ import annotations

import io
import re
import time
import zlib
from typing import TYPE_CHECKING

import numpy as np

from carray.engine import chunkstats
from carray.engine.chunkstats import ChunkStats
from carray.errors import FormatError

if TYPE_CHECKING:
    from carray.engine import ArrayEngine

_SEGMENT_NAME = re.compile(r"zonemap_(\d{6})\.npy")


def _segment_name(segment: int) -> str:
    return f"zonemap_{segment:06d}.npy"

# Kinds whose order numpy and numexpr agree on; datetimes are left out because
# NaT sorts as the smallest value in numpy but compares false everywhere.
SUMMARISED_KINDS = "biuf"


def summarised(dtype: np.dtype, atomshape: tuple[int, ...]) -> bool:
    """Whether an array of this dtype gets a zone map (N-d arrays, whose rows have shape
    ``atomshape``, included: their chunks are numbered in C order of the chunk grid)."""
    del atomshape  # every row shape: statistics are over each chunk's items
    return dtype.kind in SUMMARISED_KINDS and dtype.isnative


def _field_view(name: str) -> property:
    """A read-only property: the used part of the field array ``_<name>``."""

    def get(self: ZoneMap) -> np.ndarray:
        self._ensure()
        return np.asarray(getattr(self, "_" + name)[:len(self)])

    return property(get)


class ZoneMap:
    """Min, max, has-NaN and the statistics of each chunk (see
    :class:`~carray.engine.chunkstats.ChunkStats`), plus the stamp of the chunk
    summarised.  ``known`` says the min/max are trusted; ``full`` that the
    statistics are too (rows of segments written before statistics have only min/max)."""

    _FIELDS = ("lo", "hi", "nan", "known", "checked", "stamp", "full", "count", "nnan",
               "nonzero", "total", "fsum", "m2")

    def __init__(self, dtype: np.dtype, nchunks: int = 0) -> None:
        self.dtype = np.dtype(dtype)
        self._pending_load: ArrayEngine | None = None
        self._dirty_segments: set[int] = set()
        self._saved: set[int] = set()
        self._n = 0
        self._alloc(max(nchunks, 16))
        self._n = nchunks
        self.dirty = False
        self._saved_at = -float("inf")

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
        self._full = np.zeros(capacity, dtype=bool)
        self._count = np.zeros(capacity, dtype=np.int64)
        self._nnan = np.zeros(capacity, dtype=np.int64)
        self._nonzero = np.zeros(capacity, dtype=np.int64)
        self._total = np.zeros(capacity, dtype=chunkstats.total_dtype(self.dtype))
        self._fsum = np.zeros(capacity, dtype=np.float64)
        self._m2 = np.zeros(capacity, dtype=np.float64)
        for f, arr in old.items():
            if arr is not None:
                getattr(self, "_" + f)[:self._n] = arr[:self._n]

    lo, hi, nan = _field_view("lo"), _field_view("hi"), _field_view("nan")
    known, checked, stamp = _field_view("known"), _field_view("checked"), _field_view("stamp")
    full, count, nnan = _field_view("full"), _field_view("count"), _field_view("nnan")
    nonzero, total = _field_view("nonzero"), _field_view("total")
    fsum, m2 = _field_view("fsum"), _field_view("m2")

    def __len__(self) -> int:
        self._ensure()
        return self._n

    def is_known(self, nchunk: int) -> bool:
        """Whether chunk ``nchunk`` has a trusted summary."""
        self._ensure()
        return nchunk < self._n and bool(self._known[nchunk])

    def _grow(self, nchunks: int) -> None:
        self._ensure()
        if nchunks <= self._n:
            return
        if nchunks > len(self._lo):
            self._alloc(max(nchunks, 2 * len(self._lo)))
        # Entries past the old end are unknown (stale values may linger after truncate).
        self._known[self._n:nchunks] = self._full[self._n:nchunks] = False
        self._checked[self._n:nchunks] = False
        self._n = nchunks

    def update(self, nchunk: int, stats: ChunkStats | None,
               stamp: tuple[int, int] | None) -> None:
        """Keep the statistics of the values just written as chunk ``nchunk`` (None: the
        chunk has none, its entry is unknown; past :data:`MAX_CHUNKS`, none is kept)."""
        self._ensure()
        if nchunk >= self.MAX_CHUNKS:
            return
        self._grow(nchunk + 1)
        if stats is None or stats.count == 0:
            self.forget(nchunk)
            return
        self._lo[nchunk], self._hi[nchunk] = stats.lo, stats.hi
        self._nan[nchunk] = stats.nnan > 0
        self._count[nchunk], self._nnan[nchunk] = stats.count, stats.nnan
        self._nonzero[nchunk], self._total[nchunk] = stats.nonzero, stats.total
        self._fsum[nchunk], self._m2[nchunk] = stats.fsum, stats.m2
        self._known[nchunk] = self._full[nchunk] = True
        self._checked[nchunk] = True
        self._stamp[nchunk] = stamp if stamp is not None else (0, 0)
        self._mark(nchunk)

    def learn(self, nchunk: int, values: np.ndarray, stamp: tuple[int, int] | None) -> None:
        """Summarise chunk ``nchunk`` from its items inside the array, decoded for another
        reason."""
        self.update(nchunk, chunkstats.of_values(values) if values.size else None, stamp)

    def has_stats(self, first: int, stop: int) -> bool:
        """Whether chunks ``[first, stop)`` all have trusted statistics."""
        self._ensure()
        return stop <= self._n and bool(self._full[first:stop].all())

    def _mark(self, nchunk: int) -> None:
        self._dirty_segments.add(nchunk // self.SEGMENT)
        self.dirty = True

    def forget(self, nchunk: int) -> None:
        self._ensure()
        if nchunk < self._n and self._known[nchunk]:
            self._known[nchunk] = self._full[nchunk] = False
            self._mark(nchunk)

    def truncate(self, nchunks: int) -> None:
        """Drop entries for chunks ``nchunks`` and above."""
        self._ensure()
        if nchunks < self._n:
            self._n = nchunks
            if nchunks % self.SEGMENT:
                self._mark(nchunks - 1)
            self.dirty = True

    def validate(self, first: int, stop: int, stamp_of) -> None:
        """Check the stamps of entries ``[first, stop)`` not checked yet this session
        (those the map has: the others are unknown)."""
        self._ensure()
        stop = min(stop, self._n)
        todo = np.flatnonzero(self._known[first:stop] & ~self._checked[first:stop]) + first
        if len(todo):
            now = np.array([stamp_of(n) for n in todo.tolist()], dtype=np.int64)
            changed = (now != self._stamp[todo]).any(axis=1)
            self._known[todo[changed]] = self._full[todo[changed]] = False
            self._checked[todo] = True

    # -- persistence ------------------------------------------------------------------------
    #
    # Persisted in segments of SEGMENT chunks, so a flush rewrites only the segments
    # that changed (appending to a dataset of a million chunks touches one), and
    # loaded only when first needed, so opening a large dataset does not read them.

    SEGMENT = 512
    SAVE_EVERY = 1.0  # seconds between saves of a writer committing often
    #: Chunks a map summarises at most (about 100 bytes of memory each): chunks past them
    #: are read when a query or reduction needs them.
    MAX_CHUNKS = 2**22
    _ROW = [("nan", "?"), ("known", "?"), ("size", "<i8"), ("mtime", "<i8"), ("crc", "<u4")]
    #: The format marker of segments with statistics (every row holds it; CRC-covered).
    FORMAT = 2
    _STATS = [("format", "u1"), ("full", "?"), ("count", "<i8"), ("nnan", "<i8"),
              ("nonzero", "<i8"), ("fsum", "<f8"), ("m2", "<f8")]

    def _row_dtype(self, stats: bool = True) -> np.dtype:
        """The row of a segment: format 1 (min/max only) or, with ``stats``, format 2."""
        extra = [("total", chunkstats.total_dtype(self.dtype)), *self._STATS] if stats else []
        return np.dtype([("lo", self.dtype), ("hi", self.dtype), *self._ROW, *extra])

    @classmethod
    def attach(cls, engine: ArrayEngine) -> ZoneMap | None:
        """The summaries of an array's chunks, read from its sidecars on first use and kept
        up to date as a listener of its engine (None for dtypes not summarised)."""
        if not summarised(engine.dtype, engine.shape[1:]):
            return None
        zm = cls(engine.dtype)
        zm._pending_load = engine
        engine.add_listener(zm)
        return zm

    # -- the engine's listener protocol ---------------------------------------------------

    def chunk_written(self, nchunk: int, stats: ChunkStats | None,
                      stamp: tuple[int, int] | None) -> None:
        self.update(nchunk, stats, stamp)

    def chunks_absent(self, first: int, count: int) -> None:
        """Their entries stay unknown: chunks read when a query or reduction needs them
        (entries for a lazily grown array of any length would cost its length)."""

    def chunks_dropped(self, first: int) -> None:
        self.truncate(first)

    def chunks_restored(self, nchunks: list[int]) -> None:
        for nchunk in nchunks:
            self.forget(nchunk)

    def committing(self, engine: ArrayEngine, final: bool) -> None:
        if not self.dirty:
            return
        self.truncate(engine.nfull * engine.per_row)
        # A cache need not be written by every commit of a writer committing many times
        # a second: readers check each row's stamp, and rebuild what is missing.
        if final or time.monotonic() - self._saved_at >= self.SAVE_EVERY:
            self.save(engine)
            self._saved_at = time.monotonic()

    def _ensure(self) -> None:
        if self._pending_load is not None:
            self._load_now()

    def _load_now(self) -> None:
        engine, self._pending_load = self._pending_load, None
        assert engine is not None
        saved = [int(m.group(1)) for m in map(_SEGMENT_NAME.fullmatch, engine.sidecar_names())
                 if m]
        self._saved = set(saved)
        for k in saved:
            data = engine.load_sidecar(_segment_name(k))
            if data is None:
                continue
            try:
                table = self._parse(data, engine.describe())
            except FormatError:
                continue  # only a cache: rebuilt as chunks are written or read
            first = k * self.SEGMENT
            self._grow(first + len(table))
            rows = slice(first, first + len(table))
            self._lo[rows], self._hi[rows] = table["lo"], table["hi"]
            self._nan[rows], self._known[rows] = table["nan"], table["known"]
            self._stamp[rows, 0], self._stamp[rows, 1] = table["size"], table["mtime"]
            self._checked[rows] = False
            if "full" in (table.dtype.names or ()):
                self._full[rows] = table["full"] & table["known"]
                for f in ("count", "nnan", "nonzero", "total", "fsum", "m2"):
                    getattr(self, "_" + f)[rows] = table[f]
            else:  # a segment of format 1: min/max only
                self._full[rows] = False
        self._dirty_segments = set()

    def _parse(self, data: bytes, where: str) -> np.ndarray:
        shape, fortran, dtype, start = _header(data, where)
        want = self._row_dtype(stats=dtype != self._row_dtype(stats=False))
        if dtype != want or fortran or len(shape) != 1 or not 0 <= shape[0] <= self.SEGMENT \
                or len(data) != start + shape[0] * want.itemsize:
            raise FormatError(f"zone map segment of {dtype} {shape} in {len(data)} bytes, "
                              f"expected up to {self.SEGMENT} items of {want}", where)
        table = np.frombuffer(data, want, shape[0], start)
        if len(table) and (table["crc"] != _crc(table)).any():
            raise FormatError("zone map segment does not match its CRC-32", where)
        if "format" in (want.names or ()) and len(table) and (table["format"] != self.FORMAT).any():
            raise FormatError(f"zone map segment rows are not of format {self.FORMAT}", where)
        return table

    def _segment_bytes(self, k: int) -> bytes | None:
        rows = slice(k * self.SEGMENT, min((k + 1) * self.SEGMENT, self._n))
        if rows.start >= rows.stop:
            return None
        table = np.empty(rows.stop - rows.start, dtype=self._row_dtype())
        table["lo"], table["hi"] = self._lo[rows], self._hi[rows]
        table["nan"], table["known"] = self._nan[rows], self._known[rows]
        table["size"], table["mtime"] = self._stamp[rows, 0], self._stamp[rows, 1]
        table["format"] = self.FORMAT
        for f in ("full", "count", "nnan", "nonzero", "total", "fsum", "m2"):
            table[f] = getattr(self, "_" + f)[rows]
        table["crc"] = _crc(table)
        buf = io.BytesIO()
        np.save(buf, table, allow_pickle=False)
        return buf.getvalue()

    def save(self, engine: ArrayEngine) -> None:
        """Write the segments changed since the last save; delete those past the end."""
        if not self.dirty:
            return
        self._ensure()
        nseg = -(-self._n // self.SEGMENT)
        saved = self._saved
        stale = {k for k in saved if k >= nseg}
        for k in sorted(self._dirty_segments | stale):
            data = self._segment_bytes(k) if k < nseg else None
            engine.save_sidecar(_segment_name(k), data)
            (saved.add if data is not None else saved.discard)(k)
        self._saved, self._dirty_segments, self.dirty = saved, set(), False


def _crc(table: np.ndarray) -> int:
    """The CRC-32 of a zone map segment, its ``crc`` column read as zeros."""
    bare = table.copy()
    bare["crc"] = 0
    return zlib.crc32(bare.tobytes())


# Parsed .npy headers by their bytes: every full segment of a zone map has the same
# header, and numpy's parser (a literal_eval) costs more than the segment's CRC.
_HEADERS: dict[bytes, tuple[tuple[int, ...], bool, np.dtype, int]] = {}


def _header(data: bytes, where: str) -> tuple[tuple[int, ...], bool, np.dtype, int]:
    """``(shape, fortran order, dtype, where the items start)`` of the .npy ``data``."""
    wide = data[6:7] != b"\x01"  # format 1.0: a 2-byte header length, else 4 bytes
    start = (12 + int.from_bytes(data[8:12], "little")) if wide else \
        (10 + int.from_bytes(data[8:10], "little"))
    got = _HEADERS.get(data[:start])
    if got is not None:
        return got
    f = io.BytesIO(data)
    try:
        version = np.lib.format.read_magic(f)
        read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else \
            np.lib.format.read_array_header_2_0
        shape, fortran, dtype = read_header(f)
    except Exception as exc:  # noqa: BLE001 - numpy's header parser raises anything
        raise FormatError(f"zone map is unreadable: {exc}", where) from None
    got = (shape, fortran, dtype, f.tell())
    if f.tell() == start and len(_HEADERS) < 64:
        _HEADERS[data[:start]] = got
    return got
