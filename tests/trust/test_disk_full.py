"""A disk that fills up in the middle of appends large enough for the compressing threads.

Appends of arrays and tables, on every layout (superchunk, bcolz, ``.b2nd`` frames;
tables of both column layouts), with flushes every other append.  Their sizes are
chosen so that some fill the last chunk and hand it to the compressing threads (stored
at the engine's next call: see :mod:`carray.engine.handoff`; a versioned table's
appends store theirs before returning) and some store whole runs of chunks compressed
on several threads at once.  From the ``at``-th write on, every
write and fsync fails with ENOSPC (:class:`injection.DiskFull`, below the stores, where
:class:`injection.Faults` injects single failures), until space returns.  Then:

* the call that met the full disk raises :class:`carray.errors.StorageError` (an
  ``OSError`` carrying ENOSPC), and so does a flush while the disk is still full;
* a reader opened while the disk is full sees the last flushed state, whole;
* once space returns, the object shows every append that returned, plus all or none
  of the one that failed, and a flush makes exactly that durable: nothing handed to
  the compressing threads is lost.

CI tries a few dozen points where the disk fills; ``CARRAY_SOAK=1`` every one.
"""

from __future__ import annotations

import contextlib
import errno
import os

import numpy as np
import pytest
from injection import DiskFull

import carray as ca
from carray.engine.handoff import Handoff
from carray.errors import CArrayError, StorageError

SOAK = os.environ.get("CARRAY_SOAK") == "1"
POINTS = None if SOAK else 6  # points where the disk fills, per case (None: every one)
CHUNKLEN = 1000
# Appends of 700 and 400 items fill the tail now and then (handed over); 2500 and 3700
# carry whole runs of chunks (compressed together).
APPEND_SIZES = (700, 2500, 400, 3700, 700, 1300, 400, 2600)
# -- arrays and tables behind one interface ---------------------------------------------

def _path(tmp_path, kind: str, name: str) -> str:
    return str(tmp_path / (name + ".b2nd" if kind == "b2nd" else name))


def _values(start: int, n: int) -> np.ndarray:
    return np.arange(start, start + n, dtype=np.int64)


def _create(path: str, kind: str) -> None:
    first = _values(0, 1500)  # a chunk and a half: the tail is part full
    if kind.startswith("table"):  # (text of one width: a bcolz table's is fixed-width)
        ca.ctable({"x": first, "y": first * 0.5,
                   "s": np.array([f"s{v:06d}" for v in first], dtype=object)},
                  rootdir=path, mode="w", chunklen=CHUNKLEN,
                  format="bcolz" if kind == "table-bcolz" else None).close()
    else:
        ca.carray(first, rootdir=path, mode="w", chunklen=CHUNKLEN,
                  format="bcolz" if kind == "bcolz" else None).close()


def _open(path: str, kind: str, mode: str):
    if kind.startswith("table"):
        return ca.ctable(rootdir=path, mode=mode, auto_flush=False)
    return ca.open(path, mode=mode)


def _append(obj, kind: str, values: np.ndarray) -> None:
    if kind.startswith("table"):
        obj.append({"x": values, "y": values * 0.5,
                    "s": np.array([f"s{v:06d}" for v in values], dtype=object)})
    else:
        obj.append(values)


def _contents(obj, kind: str) -> np.ndarray:
    """An array's items, or a table's x column after checking its rows are whole."""
    if not kind.startswith("table"):
        return obj[:]
    lengths = {name: len(c) for name, c in obj.cols.items()}
    assert set(lengths.values()) == {len(obj)}, f"columns of {lengths} in {len(obj)} rows"
    rows = obj[:]
    x = rows["x"]
    assert (rows["y"] == x * 0.5).all(), "a row mixes appends"
    assert rows["s"].tolist() == [f"s{v:06d}" for v in x.tolist()], "a string column is torn"
    return x


def _run(obj, kind: str, shown: dict) -> None:
    """The appends, a flush after every other one; ``shown`` follows the object: what it
    shows ("now"), would show if the append being made lands ("landing"), the state
    last flushed ("flushed") and the one being flushed ("flushing")."""
    n = len(shown["now"])
    for i, size in enumerate(APPEND_SIZES):
        values = _values(n, size)
        shown["landing"] = np.concatenate([shown["now"], values])
        _append(obj, kind, values)
        shown["now"], n = shown["landing"], n + size
        if i % 2:
            shown["flushing"] = shown["now"]
            obj.flush()
            shown["flushed"], shown["flushing"] = shown["now"], None


KINDS = ["superchunk", "bcolz", "b2nd", "table", "table-bcolz"]


def _points(total: int) -> list[int]:
    if POINTS is None or total <= POINTS:
        return list(range(1, total + 1))
    return sorted({int(round(x)) for x in np.linspace(1, total, POINTS)})


@pytest.mark.parametrize("kind", KINDS)
def test_a_full_disk_keeps_what_was_flushed(tmp_path, monkeypatch, kind):
    counting = _path(tmp_path, kind, "count")
    _create(counting, kind)
    obj = _open(counting, kind, "a")
    handed = [0]
    submit = Handoff.submit

    def counted_submit(self, *args, **kwargs):
        handed[0] += 1
        return submit(self, *args, **kwargs)

    monkeypatch.setattr(Handoff, "submit", counted_submit)
    full = DiskFull(monkeypatch, None)
    start = _contents(obj, kind)
    _run(obj, kind, {"now": start, "landing": start, "flushed": start, "flushing": None})
    total = full.count  # the writes of the appends and flushes (the last append is flushed)
    full.space_returns()
    obj.close()
    # A versioned table's append is one change of all its columns, stored before it
    # returns; everything else hands chunks over.
    assert (handed[0] > 0) == (kind != "table"), handed
    for at in _points(total):
        _fill_at(tmp_path, monkeypatch, kind, at)


def _fill_at(tmp_path, monkeypatch, kind: str, at: int) -> None:
    """The appends with the disk full from write ``at`` on, and the checks of the module
    doc."""
    path = _path(tmp_path, kind, f"d{at}")
    _create(path, kind)
    obj = _open(path, kind, "a")
    start = _contents(obj, kind)
    shown = {"now": start, "landing": start, "flushed": start, "flushing": None}
    full = DiskFull(monkeypatch, at)
    where = f"disk full from write {at} on"
    try:
        _run(obj, kind, shown)
    except StorageError as exc:
        assert isinstance(exc, OSError) and isinstance(exc, CArrayError)
        assert exc.errno == errno.ENOSPC, (where, exc)
    # What may be durable: the last flush, the one that failed (a flush that fails after
    # its commit point has published: the disk decides), or, when a flush while the disk
    # is still full returns, what the object shows (it had nothing left to write).
    durable = [shown["flushed"]] + ([shown["flushing"]] if shown["flushing"] is not None
                                    else [])
    try:
        obj.flush()
        durable = [_contents(obj, kind)]
    except StorageError as exc:
        assert exc.errno in (errno.ENOSPC, errno.EIO), (where, exc)
    reader = _open(path, kind, "r")
    seen = _contents(reader, kind)
    reader.close()
    assert any(np.array_equal(seen, d) for d in durable), \
        f"{where}: a reader sees {len(seen)} items, not a flushed state"
    full.space_returns()
    try:
        obj.flush()
    except StorageError as exc:
        # A bcolz table whose failed change could not be undone on the full disk asks
        # to be reopened, which rolls it back to its last flush.
        assert kind == "table-bcolz" and "reopen" in str(exc), (where, exc)
        with contextlib.suppress(StorageError):
            obj.close()
        now = seen
    else:
        now = _contents(obj, kind)
        if kind == "table-bcolz":
            # A bcolz table's failed change puts the table back to what is committed
            # (changes not flushed yet go with it: TableTxn.guard).
            assert any(np.array_equal(now, d) for d in durable), \
                f"{where}: the table shows {len(now)} rows, not a committed state"
        else:
            # An array or a table keeps every append that returned while the process
            # lives (a failed commit publishes nothing and keeps them pending), those
            # handed to the compressing threads too (carray.engine.handoff).
            assert np.array_equal(now, shown["now"]) or \
                np.array_equal(now, shown["landing"]), \
                f"{where}: the array shows {len(now)} items, not the {len(shown['now'])} " \
                "appended"
        obj.close()
    back = _open(path, kind, "r")
    np.testing.assert_array_equal(_contents(back, kind), now,
                                  err_msg=f"{where}: not what the object showed")
    back.close()
