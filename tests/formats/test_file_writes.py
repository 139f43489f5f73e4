"""Single files written once (ds, Bloscpack): the fsync defaults, the write-back that
overlaps the disk with compression, and what a failure or a kill leaves at the name.

Every write path of these files (a small ds file, a large one, the streamed ds writer;
a Bloscpack pack with and without fsync, an append, an unpack to a file; the early
write-back requests among them) is failed at each of its storage calls in turn (a full
disk, an I/O error), and the small ds file and the pack are killed (SIGKILL) at each
of theirs in a forked child: the name then holds the old file, whole and verified, or
the new one, never a part, and nothing is left beside it after a failure.
"""

from __future__ import annotations

import errno
import inspect
import os
import sys
from concurrent.futures import Future

import numpy as np
import pytest

from carray.errors import ChecksumError, StorageError
from carray.formats import bloscpack as bp
from carray.formats import ds, merge
from carray.formats import local_write as _local_write
from carray.formats import writeback as _writeback
from carray.formats.ds.stream import StreamWriter
from carray.stores import files as _fileio
from carray.stores.tempnames import is_temporary

LINUX = sys.platform.startswith("linux")
TESTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if TESTS_DIR not in sys.path:
    sys.path.insert(0, TESTS_DIR)


# -- fsync defaults ---------------------------------------------------------------------------

def test_ds_writers_do_not_fsync_by_default():
    assert inspect.signature(ds.write).parameters["fsync"].default is False
    assert inspect.signature(StreamWriter).parameters["fsync"].default is False
    assert inspect.signature(merge.merge_files).parameters["fsync"].default is None
    assert "default False" in (ds.write.__doc__ or "")


def test_xarray_to_ds_does_not_fsync_by_default():
    xarray_backend = pytest.importorskip(
        "carray.integrations.xarray_backend", reason="to_ds needs xarray")
    assert inspect.signature(xarray_backend.to_ds).parameters["fsync"].default is False


def test_bloscpack_writes_once_without_fsync_but_appends_with_it():
    for fn in (bp.pack_array, bp.pack_bytes, bp.pack_npy, bp.unpack_file):
        assert inspect.signature(fn).parameters["fsync"].default is False, fn.__name__
    assert inspect.signature(bp.append).parameters["fsync"].default is True


class Syncs:
    """Records the fsyncs (of which path) and the renames (to which name)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.events: list[tuple[str, str]] = []
        real_fsync, real_replace = os.fsync, _local_write.replace

        def fsync(fd):
            name = os.readlink(f"/proc/self/fd/{fd}")
            if "inputs" not in name:
                self.events.append(("fsync", name))
            real_fsync(fd)

        def replace(src, dst, **kw):
            if "inputs" not in dst:
                self.events.append(("rename", dst))
            return real_replace(src, dst, **kw)

        monkeypatch.setattr(os, "fsync", fsync)
        monkeypatch.setattr(_local_write, "replace", replace)

    def kinds(self) -> list[str]:
        return [kind for kind, _ in self.events]


def _small(path, **kw):
    ds.write(path, {"x": np.arange(3)}, **kw)


def _large(path, **kw):  # over the size joined into one write: written part by part
    ds.write(path, {"x": np.arange(300_000.0), "y": np.arange(5)}, **kw)


def _streamed(path, **kw):
    with StreamWriter(path, **kw) as w:
        w.add("x", {}, ["n"], "int64", [4], [np.arange(4)])
        w.close({})


def _merged(path, **kw):
    inputs = os.path.join(os.path.dirname(path), "..", "inputs")
    os.makedirs(inputs, exist_ok=True)
    parts = [os.path.join(inputs, f"in{i}.ds") for i in range(2)]
    for i, part in enumerate(parts):  # (written in the places Syncs does not record)
        ds.write(part, {"x": np.arange(3) + i, ".": {"x": {".dims": ["n"]}}})
    merge.merge_files(parts, "n", path, **kw)


DS_WRITERS = {"small": _small, "large": _large, "streamed": _streamed, "merged": _merged}


@pytest.mark.skipif(not LINUX, reason="names the synced files through /proc")
@pytest.mark.parametrize("writer", sorted(DS_WRITERS))
def test_ds_default_waits_for_no_disk(tmp_path, monkeypatch, writer):
    syncs = Syncs(monkeypatch)
    (tmp_path / "out").mkdir()
    DS_WRITERS[writer](tmp_path / "out" / "f.ds")
    assert syncs.kinds() == ["rename"]


@pytest.mark.skipif(not LINUX, reason="names the synced files through /proc")
@pytest.mark.parametrize("writer", sorted(DS_WRITERS))
def test_ds_fsync_true_syncs_the_file_then_its_directory(tmp_path, monkeypatch, writer):
    syncs = Syncs(monkeypatch)
    (tmp_path / "out").mkdir()
    path = tmp_path / "out" / "f.ds"
    DS_WRITERS[writer](path, fsync=True)
    (k1, synced), (k2, renamed), (k3, directory) = syncs.events
    assert (k1, k2, k3) == ("fsync", "rename", "fsync")
    assert is_temporary(os.path.basename(synced), path.name)
    assert os.path.dirname(synced) == str(path.parent)
    assert renamed == str(path) and directory == str(path.parent)


@pytest.mark.skipif(not LINUX, reason="names the synced files through /proc")
@pytest.mark.parametrize("writer", sorted(DS_WRITERS))
def test_a_file_replaced_without_fsync_is_synced_before_it_is(tmp_path, monkeypatch, writer):
    (tmp_path / "out").mkdir()
    path = tmp_path / "out" / "f.ds"
    DS_WRITERS[writer](path)
    syncs = Syncs(monkeypatch)
    DS_WRITERS[writer](path)
    (k1, renamed), (k2, synced), (k3, directory) = syncs.events
    # The replace call is recorded first; inside it the new file is synced before the
    # exchange, and the directory after it.
    assert (k1, k2, k3) == ("rename", "fsync", "fsync")
    assert is_temporary(os.path.basename(synced), path.name)
    assert os.path.dirname(synced) == str(path.parent)
    assert renamed == str(path) and directory == str(path.parent)


def test_bloscpack_pack_replacing_a_file_syncs_it_first(tmp_path, monkeypatch):
    path = str(tmp_path / "a.blp")
    bp.pack_array(np.arange(1000), path)
    synced: list[str] = []
    real = _local_write.fsync_path
    monkeypatch.setattr(_local_write, "fsync_path", lambda p: (synced.append(p), real(p)))
    bp.pack_array(np.arange(2000), path)
    assert [p for p in synced if is_temporary(os.path.basename(p), "a.blp")]
    assert str(tmp_path) in synced
    np.testing.assert_array_equal(bp.unpack_array(path), np.arange(2000))


# -- the early write-back ---------------------------------------------------------------------

def _noisy(nbytes: int, seed: int = 0) -> np.ndarray:
    """A float64 ramp with noise: compresses, but not to nothing."""
    n = nbytes // 8
    rng = np.random.default_rng(seed)
    return np.linspace(0, 1000, n) + rng.normal(0, 0.01, n)


@pytest.fixture
def small_steps(monkeypatch):
    """Write-back requests every 16 KiB, so small files make many of them."""
    monkeypatch.setattr(_writeback, "STEP", 16 << 10)
    starts: list[tuple[int, int]] = []
    real = _writeback.start_write
    monkeypatch.setattr(_writeback, "start_write",
                        lambda fd, at, n: starts.append((at, n)) or real(fd, at, n))
    return starts


def test_pack_with_fsync_starts_the_write_back_as_it_goes(tmp_path, small_steps):
    a = _noisy(400_000)
    path = tmp_path / "a.blp"
    bp.pack_array(a, path, chunk_size=32 << 10, fsync=True)
    assert len(small_steps) >= 2
    # In order, without gaps or overlaps, within the file.
    ends = [at + n for at, n in small_steps]
    assert [at for at, _ in small_steps] == [0, *ends[:-1]]
    assert ends[-1] <= path.stat().st_size
    np.testing.assert_array_equal(bp.unpack_array(path), a)
    bp.pack_array(a, tmp_path / "b.blp", chunk_size=32 << 10, fsync=False)
    assert (tmp_path / "b.blp").read_bytes() == path.read_bytes()


def test_no_write_back_without_fsync(tmp_path, small_steps):
    bp.pack_array(_noisy(400_000), tmp_path / "a.blp", chunk_size=32 << 10, fsync=False)
    assert small_steps == []


def test_chunks_written_with_write_back_are_verified_on_read(tmp_path, small_steps):
    path = tmp_path / "a.blp"
    bp.pack_array(_noisy(200_000), path, chunk_size=32 << 10, fsync=True)
    info = bp.info(path)
    raw = bytearray(path.read_bytes())
    raw[info["offsets"][3] + 100] ^= 0x10
    path.write_bytes(bytes(raw))
    with pytest.raises(ChecksumError):
        bp.unpack_array(path)


# -- failures at every storage call -----------------------------------------------------------

#: The ``os`` functions the writers create, write, sync, rename and close files through.
_CALLS = ("open", "write", "writev", "pwrite", "fsync", "fdatasync", "replace", "rename",
          "close")


def _written(fd: int) -> bool:
    """Whether ``fd`` is the file being written (under its temporary name)."""
    try:
        return is_temporary(os.path.basename(os.readlink(f"/proc/self/fd/{fd}")))
    except OSError:
        return False


class Faults:
    """Fails the ``at``-th storage call (an ``os`` function of :data:`_CALLS`, a rename
    exchange or a write-back request) with ``err``."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, at: int, err: int) -> None:
        self.at, self.count, self.err, self.fired = at, 0, err, False
        self.which = ""  # the call failed
        for name in _CALLS:
            if hasattr(os, name):
                monkeypatch.setattr(os, name, self._wrap(name, getattr(os, name)))
        if _fileio._renameat2 is not None:
            real = _fileio._renameat2
            monkeypatch.setattr(_fileio, "_renameat2",
                                lambda *a: -1 if self._fail("renameat2") else real(*a))
        real_start = _writeback.start_write
        monkeypatch.setattr(_writeback, "start_write", self._wrap("start", real_start))

    def _fail(self, name: str) -> bool:
        self.count += 1
        if self.count == self.at:
            self.fired, self.which = True, name
            return True
        return False

    def _wrap(self, name, func):
        def call(*args, **kwargs):
            if name == "open" and not (len(args) > 1 and args[1] & os.O_CREAT):
                return func(*args, **kwargs)  # only the opens that create
            if name == "close" and not _written(args[0]):
                return func(*args, **kwargs)  # only the closes of the file written
            if self._fail(name):
                if name == "close":  # a failing close still releases the descriptor
                    func(*args, **kwargs)
                raise OSError(self.err, os.strerror(self.err))
            return func(*args, **kwargs)
        return call


def _blp_new(path, fsync):
    bp.pack_array(_noisy(160_000, seed=1), path, chunk_size=16 << 10, fsync=fsync)


_OLD = np.arange(7.0)


def _inline(pool, fn, *args):
    done: Future = Future()
    try:
        done.set_result(fn(*args))
    except BaseException as exc:  # noqa: BLE001 - handed over by the future, as the pool does
        done.set_exception(exc)
    return done


def _blp_appended(path):
    bp.append(path, _noisy(80_000, seed=2))


def _blp_unpacked(path):
    src = str(path) + ".src.blp"
    if not os.path.exists(src):  # (made once, before the faults: see _prepare)
        raise AssertionError("no source")
    bp.unpack_file(src, path, fsync=True)


# name -> (extension, write the old file, write the new one over it, read either)
WRITES = {
    "ds small": (".ds", lambda p: ds.write(p, {"x": _OLD}), _small, None),
    "ds small fsync": (".ds", lambda p: ds.write(p, {"x": _OLD}),
                       lambda p: _small(p, fsync=True), None),
    "ds large fsync": (".ds", lambda p: ds.write(p, {"x": _OLD}),
                       lambda p: _large(p, fsync=True), None),
    "ds streamed fsync": (".ds", lambda p: ds.write(p, {"x": _OLD}),
                          lambda p: _streamed(p, fsync=True), None),
    "blp": (".blp", lambda p: bp.pack_array(_OLD, p, fsync=False),
            lambda p: _blp_new(p, False), None),
    "blp fsync": (".blp", lambda p: bp.pack_array(_OLD, p, fsync=False),
                  lambda p: _blp_new(p, True), None),
    "blp append fsync": (".blp", lambda p: bp.pack_array(_noisy(40_000, seed=4), p,
                                                         chunk_size=16 << 10, fsync=False),
                         _blp_appended, None),
    "blp unpack_file fsync": (".npy", lambda p: np.save(p, _OLD), _blp_unpacked, np.load),
}


def _read(path, reader=None):
    if reader is not None:
        return reader(path)
    return bp.unpack_array(path) if str(path).endswith(".blp") else ds.read(path)["x"]


@pytest.mark.parametrize("err", [errno.ENOSPC, errno.EIO], ids=["full", "eio"])
@pytest.mark.parametrize("what", sorted(WRITES))
def test_a_failure_at_any_call_keeps_the_old_file(tmp_path, monkeypatch, small_steps, what,
                                                  err):
    # Write-back requests made here and now, so every run makes the same calls.
    monkeypatch.setattr(_writeback, "submit", _inline)
    ext, write_old, write_new, reader = WRITES[what]
    work, ref = tmp_path / "work", tmp_path / "ref"
    work.mkdir()
    ref.mkdir()
    path, expected = work / f"f{ext}", ref / f"f{ext}"
    for p in (path, expected):
        bp.pack_array(_noisy(160_000, seed=3), str(p) + ".src.blp", fsync=False)
        write_old(p)
    write_new(expected)  # what a write without faults leaves
    old, new = np.asarray(_read(path, reader)), np.asarray(_read(expected, reader))
    before = sorted(os.listdir(work))
    failed = set()
    at = 0
    while True:
        at += 1
        with monkeypatch.context() as mp:
            faults = Faults(mp, at, err)
            try:
                write_new(path)
            except StorageError as exc:
                assert exc.errno == err and str(path) in str(exc)
            assert sorted(os.listdir(work)) == before, at  # nothing left beside it
        if not faults.fired:
            break
        failed.add(faults.which)
        # Only a failure after the rename (the directory's sync) leaves the new file.
        got = np.asarray(_read(path, reader))
        assert np.array_equal(got, old) or np.array_equal(got, new), at
        write_old(path)
    assert {"open", "close"} <= failed and failed & {"write", "writev"}, failed
    if "fsync" in what:
        assert "fsync" in failed
        if "small" not in what and "streamed" not in what:  # (small: nothing to start early)
            assert "start" in failed, failed
    np.testing.assert_array_equal(_read(path, reader), new)


# -- kill -9 ----------------------------------------------------------------------------------

def drive_kills(root: str) -> dict:
    """Driver (a fresh interpreter): write each file over an old one, killed at every
    storage call in turn; after each kill the name must read as the old or the new."""
    from kill_points import HOW, count_calls, in_child

    _writeback.STEP = 16 << 10  # write-back requests between the chunks
    results: dict[str, list] = {}
    for what, write in (("ds", lambda p: _small(p, fsync=True)),
                        ("blp", lambda p: _blp_new(p, True))):
        path = os.path.join(root, f"f.{what}")

        def old(path=path, what=what):
            if what == "blp":
                bp.pack_array(np.arange(7.0), path, fsync=False)
            else:
                ds.write(path, {"x": np.arange(7.0)})

        def calls(path=path, write=write):
            count = count_calls()
            write(path)
            return count[0]

        in_child(old)
        total = in_child(calls).result
        seen = []
        for at in range(1, total + 1):
            how = HOW[at % len(HOW)]
            in_child(old)
            child = in_child(write, path, at=at, how=how)

            def state(path=path, what=what):
                got = np.asarray(_read(path)).ravel()
                return "old" if len(got) == 7 else "new"

            seen.append([at, how, child.killed, in_child(state).result])
        results[what] = seen
    return results


@pytest.mark.skipif(not hasattr(os, "fork"), reason="kills forked children")
def test_a_kill_at_any_call_leaves_the_old_or_the_new_file(tmp_path):
    from kill_points import run_driver

    out = run_driver("formats.test_file_writes", "drive_kills", str(tmp_path), timeout=300)
    for what, seen in out.items():
        assert len(seen) >= 4, what
        states = [state for _, _, _, state in seen]
        assert set(states) <= {"old", "new"}, (what, seen)  # a part never reads
        assert states[0] == "old" and "new" in states, (what, seen)


# -- the plain path of ds.encode --------------------------------------------------------------

PLAIN = [
    {"x": np.arange(3)},
    {"x": np.array([1], dtype=np.int64), ".": {"x": {".dims": ["x0"]}}},
    {"b": np.ones((2, 3), ">f4"), "a": np.arange(3, dtype=np.uint16),
     ".": {"a": {".dims": ["n"]}, ".": {}}},
    {"s": np.array(2.5), "e": np.zeros((0, 4), np.int8)},
    {"t": np.arange(12.0).reshape(3, 4).T, ".hidden": "skipped", ".": {"t": {".dims": ["j", "i"]}}},
    {"big": np.arange(20_000, dtype="<i8"), "n": np.arange(20_000.0),
     ".": {"big": {".dims": ["k"]}, "n": {".dims": ["k"]}}},
]
NOT_PLAIN = [
    {"x": np.ma.MaskedArray([1, 2], mask=[0, 1])},
    {"x": np.array([True, False])},
    {"x": np.array(["a", "b"], dtype=object)},
    {"x": np.arange(3), ".": {".": {"title": "t"}}},
    {"x": np.arange(3), ".": {"x": {".dims": ["n"], "units": "m"}}},
    {"x": np.arange(3), ".": {"x": {".dims": ("n",)}}},
    {"\\.x": np.arange(3)},
    {"x": [1, 2, 3]},
    {"x": np.arange(3), "y": np.arange(4), ".": {"x": {".dims": ["n"]}, "y": {".dims": ["n"]}}},
    {"x": np.arange(3, dtype=np.float16)},
    {"x": np.arange(3), ".": {"x": {".dims": ["a", "b"]}}},
]


@pytest.mark.parametrize("d", PLAIN, ids=range(len(PLAIN)))
def test_the_plain_path_writes_what_the_general_one_does(tmp_path, d):
    plain = ds._encode_plain(d)
    assert plain is not None
    assert b"".join(bytes(p) for p in plain) == b"".join(bytes(p) for p in ds._encode_any(d))
    ds.write(tmp_path / "p.ds", d)
    back = ds.read(tmp_path / "p.ds")
    for name in ds.variables(d):
        np.testing.assert_array_equal(back[name], d[name])


@pytest.mark.parametrize("d", NOT_PLAIN, ids=range(len(NOT_PLAIN)))
def test_other_datasets_take_the_general_path(d):
    assert ds._encode_plain(d) is None


def test_a_file_system_without_range_write_back_still_gets_the_file(tmp_path, small_steps,
                                                                    monkeypatch):
    calls = []

    def unsupported(fd, at, n):
        calls.append(at)
        raise OSError(errno.EINVAL, "not here")

    monkeypatch.setattr(_writeback, "start_write", unsupported)
    a = _noisy(400_000)
    bp.pack_array(a, tmp_path / "a.blp", chunk_size=32 << 10, fsync=True)
    assert len(calls) == 1  # asked once, then written without
    np.testing.assert_array_equal(bp.unpack_array(tmp_path / "a.blp"), a)
