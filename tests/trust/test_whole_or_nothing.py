"""Every operation that makes a new dataset or file makes it whole or not at all.

Copies, conversions to every output format, exports and rechunks are built under a
temporary name (:mod:`carray.stores.tempnames`) and moved into place at the end
(:mod:`carray.stores.staging`).  Here each one meets

* ENOSPC from the ``at``-th write on (the disk is full until the test ends) and EIO at
  the ``at``-th write or rename alone, injected below carray in the ``os`` calls: it
  raises :class:`carray.errors.StorageError` naming the target, leaves no target and no
  temporary, and a target it was to replace reads as before;
* a file size limit (``RLIMIT_FSIZE``) in a child process, which fails the writes of the
  libraries that write some formats themselves (Zarr, pyarrow, netCDF4, h5py,
  PyTables): the same, with their own errors made a ``StorageError``;
* ``kill -9`` at a storage call: the target is absent or whole, and the next writer of
  the target removes what the killed one left.

CI tries a few points per operation; ``CARRAY_SOAK=1`` every one.
"""

from __future__ import annotations

import errno
import functools
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import carray as ca
from carray.errors import StorageError
from carray.integrations.convert import convert, read_any
from carray.layouts.b2nd.frame import write_array
from carray.stores.tempnames import is_temporary, temporary_name

SOAK = os.environ.get("CARRAY_SOAK") == "1"
POINTS = None if SOAK else 5  # injection points per operation (None: every one)
KILLS = None if SOAK else 4  # kill points per operation
# The os calls that give a file its bytes: a full disk refuses them.
SPACE_USERS = ("write", "writev", "pwrite", "fsync", "fdatasync", "ftruncate")
# ...and those that fail with EIO too: the renames that put a file in place.
IO_CALLS = SPACE_USERS + ("rename", "replace")
N = 12_011  # rows: several chunks and a partial one


# -- the sources, made once -------------------------------------------------------------------

def _values() -> np.ndarray:
    return np.linspace(0.0, 1.0, N) + np.sin(np.arange(N))


def make_sources(root: str) -> None:
    """An array, a table, a bcolz table, a group, a ds and a NetCDF dataset under ``root``."""
    x = _values()
    a = ca.carray(x, rootdir=f"{root}/a", mode="w", chunklen=2048)
    a.attrs["units"] = "m"
    a.close()
    cols = {"x": x, "i": np.arange(N), "s": np.array([f"r{k % 97}" for k in range(N)],
                                                      dtype=object)}
    ca.ctable(cols, rootdir=f"{root}/t", mode="w", chunklen=2048).close()
    ca.ctable({"x": x, "i": np.arange(N)}, rootdir=f"{root}/tb", mode="w",
              format="bcolz", chunklen=2048).close()
    with ca.group(f"{root}/g", mode="w") as g:
        g.create_array("x", x, chunks=(2048,))
        g.create_array("y", x[:6000].reshape(60, 100), chunks=(16, 50))
    ca.ds.write(f"{root}/d.ds", {"v": x, ".": {"v": {".dims": ["n"]}}})
    convert(f"{root}/d.ds", f"{root}/d.nc")
    ca.open(f"{root}/t", mode="r").to_csv(f"{root}/t.csv")


def _array(root: str) -> ca.carray:
    return ca.open(f"{root}/a", mode="r")


def _table(root: str, name: str = "t") -> ca.ctable:
    return ca.open_table(f"{root}/{name}", mode="r")


# Each operation: (what it writes, given the sources' root and the target's path; the
# target's name; how to read what it wrote, compared with the source).
Op = tuple[Callable[[str, str], object], str, Callable[[str, str], bool]]


def _same_array(root: str, path: str) -> bool:
    if path.endswith(".npy"):
        got = np.load(path)
    elif path.endswith(".blp"):
        got = ca.bloscpack.unpack_array(path)
    elif path.endswith(".zarr"):
        import zarr
        got = zarr.open_array(path, mode="r")[:]
    else:
        with ca.open(path, mode="r") as b:
            got = b[:]
    return np.array_equal(got, _values())


def _same_table(root: str, path: str) -> bool:
    if path.endswith(".csv"):
        import pandas as pd
        return np.allclose(pd.read_csv(path)["x"].to_numpy(), _values())
    if path.endswith(".parquet"):
        import pyarrow.parquet as pq
        return np.array_equal(pq.read_table(path)["x"].to_numpy(), _values())
    if path.endswith(".h5"):
        return np.array_equal(ca.ctable.fromhdf5(path)["x"][:], _values())
    if path.endswith((".ds", ".nc")):
        return np.array_equal(np.asarray(read_any(path)["x"]), _values())
    with ca.open_table(path, mode="r") as t:
        return np.array_equal(t["x"][:], _values()) and len(t) == N


def _same_group(root: str, path: str) -> bool:
    if path.endswith((".nc", ".h5", ".zarr", ".ds")):
        back = f"{path}.back"
        shutil.rmtree(back, ignore_errors=True)
        convert(path, back, "group")
        path = back
    with ca.open_group(path, mode="r") as g:
        ok = np.array_equal(g["x"][:], _values())
    if path.endswith(".back"):
        shutil.rmtree(path)
    return ok


def _same_dataset(root: str, path: str) -> bool:
    return np.array_equal(np.asarray(read_any(path)["v"]), _values())


def _convert(source: str, overwrite: bool | None = True) -> Callable[[str, str], object]:
    """``convert`` of the source ``source`` to the target, replacing one there (datasets
    take no ``overwrite``: they always replace)."""
    def run(root: str, path: str) -> object:
        options = {} if overwrite is None else {"overwrite": overwrite}
        return convert(f"{root}/{source}", path, **options)
    return run


def _rechunk_in_two_passes(root: str, path: str) -> object:
    """A rechunk through an intermediate array (a plan of two passes)."""
    from carray.array import rechunk as module

    real = module.plan
    module.plan = functools.partial(real, min_passes=2)
    try:
        return _array(root).rechunk((1500,), rootdir=path)
    finally:
        module.plan = real


def _to_ds(path: str) -> None:
    import xarray as xr

    from carray.integrations.xarray_backend import to_ds

    to_ds(xr.Dataset({"v": ("n", _values())}), path, fsync=True)


def _from_xarray(root: str, path: str) -> object:
    import xarray as xr
    return ca.from_xarray(xr.Dataset({"x": ("n", _values())}), path, mode="w")


OPS: dict[str, Op] = {
    "copy": (lambda r, p: _array(r).copy(rootdir=p, mode="w"), "c", _same_array),
    "copy-bcolz": (lambda r, p: _array(r).copy(rootdir=p, mode="w", format="bcolz"), "c",
                   _same_array),
    "copy-b2nd": (lambda r, p: _array(r).copy(rootdir=p, mode="w"), "c.b2nd", _same_array),
    "ctable.copy": (lambda r, p: _table(r).copy(rootdir=p, mode="w"), "t", _same_table),
    "ctable.copy-bcolz": (lambda r, p: _table(r, "tb").copy(rootdir=p, mode="w",
                                                            format="bcolz"), "t",
                          _same_table),
    "rechunk": (lambda r, p: _array(r).rechunk((3000,), rootdir=p), "r", _same_array),
    "rechunk-2-passes": (lambda r, p: _rechunk_in_two_passes(r, p), "r", _same_array),
    "concatenate": (lambda r, p: ca.concatenate([_array(r)], rootdir=p), "c", _same_array),
    "convert-carray": (_convert("a"), "c", _same_array),
    "convert-bcolz": (_convert("a"), "c.bcolz", _same_array),
    "convert-b2nd": (_convert("a"), "c.b2nd", _same_array),
    "convert-npy": (_convert("a"), "c.npy", _same_array),
    "convert-blp": (_convert("a"), "c.blp", _same_array),
    "convert-zarr": (_convert("a"), "c.zarr", _same_array),
    "convert-rechunk": (lambda r, p: convert(f"{r}/a", p, overwrite=True, chunks=(3000,)),
                        "c", _same_array),
    "convert-table": (_convert("t"), "t.ctable", _same_table),
    "convert-parquet": (_convert("t"), "t.parquet", _same_table),
    "convert-csv": (_convert("t"), "t.csv", _same_table),
    "convert-table-ds": (_convert("tb"), "t.ds", _same_table),
    "convert-table-nc": (_convert("tb"), "t.nc", _same_table),
    "convert-csv-table": (_convert("t.csv"), "t.ctable", _same_table),
    "convert-ds-nc": (_convert("d.ds", overwrite=None), "d.nc", _same_dataset),
    "convert-nc-ds": (_convert("d.nc", overwrite=None), "d.ds", _same_dataset),
    "copy_group": (lambda r, p: ca.copy_group(f"{r}/g", p, overwrite=True), "g",
                   _same_group),
    "convert-group-nc": (_convert("g"), "g.nc", _same_group),
    "convert-group-h5": (_convert("g"), "g.h5", _same_group),
    "convert-group-zarr": (_convert("g"), "g.zarr", _same_group),
    "to_csv": (lambda r, p: _table(r).to_csv(p), "t.csv", _same_table),
    "tohdf5": (lambda r, p: _table(r, "tb").tohdf5(p), "t.h5", _same_table),
    "from_csv": (lambda r, p: ca.ctable.from_csv(f"{r}/t.csv", rootdir=p, mode="w"), "t",
                 _same_table),
    "from_xarray": (_from_xarray, "g", _same_group),
    "convert-group-ds": (_convert("g"), "g.ds", _same_group),
    "to_ds": (lambda r, p: _to_ds(p), "x.ds", _same_dataset),
    "pack_array": (lambda r, p: ca.bloscpack.pack_array(_values(), p, fsync=True), "x.blp",
                   _same_array),
    "write_b2nd": (lambda r, p: write_array(_values(), p, chunks=(2048,), blocks=(512,)),
                   "x.b2nd", _same_array),
}
# Outputs replaced in place of an old one (the others are made new).
REPLACING = {"copy", "ctable.copy", "convert-npy", "convert-b2nd", "copy_group", "to_csv",
             "convert-ds-nc", "to_ds", "pack_array", "write_b2nd",
             "convert-group-h5", "from_xarray", "tohdf5"}


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> str:
    root = str(tmp_path_factory.mktemp("sources"))
    make_sources(root)
    return root


def _listing(root: str) -> dict[str, bytes | None]:
    """Every file under ``root`` with its bytes (directories: None)."""
    out: dict[str, bytes | None] = {}
    for d, dirs, files in os.walk(root):
        for name in dirs:
            out[os.path.relpath(os.path.join(d, name), root)] = None
        for name in files:
            out[os.path.relpath(os.path.join(d, name), root)] = Path(d, name).read_bytes()
    return out


# -- injected failures ------------------------------------------------------------------------

class Failing:
    """Counts the calls of ``calls``; with ``at``, fails the ``at``-th with ``err`` (ENOSPC:
    every one from then on, as a full disk does)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, calls: tuple[str, ...],
                 at: int | None = None, err: int = errno.ENOSPC) -> None:
        self.count, self.at, self.err, self.fired = 0, at, err, False
        for name in calls:
            if hasattr(os, name):
                monkeypatch.setattr(os, name, self._wrap(getattr(os, name)))

    def _wrap(self, func):
        def call(*args, **kwargs):
            self.count += 1
            if self.at is not None and (self.count == self.at or (
                    self.err == errno.ENOSPC and self.count > self.at)):
                self.fired = True
                raise OSError(self.err, os.strerror(self.err))
            return func(*args, **kwargs)
        return call


def _points(total: int, limit: int | None) -> list[int]:
    if limit is None or total <= limit:
        return list(range(1, total + 1))
    return sorted({int(round(x)) for x in np.linspace(1, total, limit)})


def _emptied(out: Path) -> None:
    for entry in out.iterdir():
        shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()


@pytest.mark.parametrize("err", [errno.ENOSPC, errno.EIO], ids=["enospc", "eio"])
@pytest.mark.parametrize("name", sorted(OPS))
def test_a_failed_write_leaves_no_target_and_no_temporary(tmp_path, monkeypatch, sources,
                                                          name, err):
    # docs/spec/commit.md [C22]
    op, target, same = OPS[name]
    out = tmp_path / "out"
    out.mkdir()
    path = str(out / target)
    replacing = name in REPLACING
    calls = IO_CALLS if err == errno.EIO else SPACE_USERS
    src_before = _listing(sources)
    if replacing:
        op(sources, path)  # the old target, which the runs below replace
    with monkeypatch.context() as mp:
        counter = Failing(mp, calls)
        op(sources, path)
    total = counter.count
    assert total > 0, name
    for at in _points(total, POINTS):
        where = f"{name}: {os.strerror(err)} at call {at} of {total}"
        _emptied(out)
        if replacing:
            op(sources, path)
        before = _listing(str(out))
        with monkeypatch.context() as mp:
            failing = Failing(mp, calls, at, err)
            try:
                op(sources, path)
            except StorageError as exc:
                assert failing.fired, where
                assert exc.errno == err, (where, exc)
                assert path in str(exc), (where, exc)
            else:
                # A failure the operation does not depend on (a hint to start writing
                # back), or one after the new target is in place: it is whole.
                assert same(sources, path), where
                continue
        after = _listing(str(out))
        assert not [n for n in after if is_temporary(os.path.basename(n))], (where, after)
        # No target, or the old one as it was; or, for a failure once the new one was in
        # place (opening it again to hand it back), the new one whole.
        assert after == before or same(sources, path), where
    assert _listing(sources) == src_before, name
    _emptied(out)
    op(sources, path)
    assert same(sources, path), name


def test_no_memory_map_writes_a_npy_file(tmp_path, monkeypatch, sources):
    """A memory map of a file whose blocks the disk cannot give turns a full disk into
    SIGBUS, which kills the process: .npy files are written with plain writes."""
    def refuse(*args, **kwargs):
        raise AssertionError("a .npy file written through a memory map")
    monkeypatch.setattr(np, "memmap", refuse)
    monkeypatch.setattr(np.lib.format, "open_memmap", refuse)
    convert(f"{sources}/a", str(tmp_path / "x.npy"))
    np.testing.assert_array_equal(np.load(tmp_path / "x.npy"), _values())
    big = np.arange(24).reshape(2, 3, 4).astype(">i2")  # a header numpy reads back
    ca.carray(big, rootdir=str(tmp_path / "b"), mode="w").close()
    convert(str(tmp_path / "b"), str(tmp_path / "b.npy"))
    back = np.load(tmp_path / "b.npy")
    assert back.dtype == big.dtype and np.array_equal(back, big)


def test_a_table_copy_on_a_full_disk_leaves_no_table(tmp_path, monkeypatch, sources):
    """The case that made this module: a table copy that met a full disk left a table
    with a third of the rows, which opened and verified."""
    t = _table(sources)
    dst = str(tmp_path / "copy")
    with monkeypatch.context() as mp:
        Failing(mp, SPACE_USERS, 40)
        with pytest.raises(StorageError) as info:
            t.copy(rootdir=dst)
    assert info.value.errno == errno.ENOSPC and dst in str(info.value)
    assert os.listdir(tmp_path) == []
    with pytest.raises(ca.ContainerNotFoundError):
        ca.open(dst, mode="r")


# -- a file size limit: the peer libraries' own writes fail -----------------------------------

# Operations whose output a peer library writes itself (carray's injection above only
# reaches the calls carray makes).
PEER_WRITTEN = ["convert-zarr", "convert-parquet", "convert-csv", "to_csv", "tohdf5",
                "convert-group-nc", "convert-group-h5", "convert-group-zarr",
                "convert-table-nc", "convert-npy", "copy"]


def drive_file_size_limits(sources: str, root: str, names: list[str],
                           limits: list[int]) -> dict:
    """Driver (a fresh interpreter): each operation in a child whose files may not grow
    past ``limit`` bytes (writes past it fail with EFBIG; SIGXFSZ ignored)."""
    import resource
    import signal

    from kill_points import in_child

    results: dict[str, list] = {}
    for name in names:
        op, target, _ = OPS[name]
        seen = []
        for limit in limits:
            out = os.path.join(root, f"{name}-{limit}")
            os.makedirs(out)

            def limited(out=out, op=op, target=target, limit=limit):
                signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
                resource.setrlimit(resource.RLIMIT_FSIZE,
                                   (limit, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
                try:
                    op(sources, os.path.join(out, target))
                except Exception as exc:  # noqa: BLE001 - reported to the parent
                    return [type(exc).__name__, getattr(exc, "errno", None), str(exc)]
                return None

            child = in_child(limited)
            seen.append([limit, child.killed, child.error, child.result, os.listdir(out)])
        results[name] = seen
    return results


@pytest.mark.skipif(not hasattr(os, "fork"), reason="limits a forked child's file size")
def test_a_file_size_limit_fails_every_writer_cleanly(tmp_path, sources):
    from kill_points import run_driver

    limits = [4096, 60_000, 200_000]
    out = run_driver("test_whole_or_nothing", "drive_file_size_limits", sources,
                     str(tmp_path), PEER_WRITTEN, limits, timeout=600)
    for name, seen in out.items():
        for limit, killed, error, result, left in seen:
            where = f"{name} with files limited to {limit} bytes"
            assert not killed and error is None, (where, error)  # no signal, no crash
            assert left == [] or result is None, (where, left)
            if result is None:  # it fitted: the output is whole
                continue
            kind, code, message = result
            assert kind == "StorageError", (where, result)
            assert code in (errno.EFBIG, errno.EIO, errno.ENOSPC), (where, result)
            assert OPS[name][1] in message, (where, result)


# -- kill -9 ------------------------------------------------------------------------------------

# Operations killed at storage calls (one of each way a new thing is made).
KILLED = ["copy", "copy-b2nd", "ctable.copy", "rechunk-2-passes", "convert-npy",
          "convert-bcolz", "copy_group", "to_csv", "from_xarray", "convert-parquet"]


def _run(op: Callable[[str, str], object], sources: str, path: str) -> None:
    """``op`` for a child, which reports what it returns (nothing here)."""
    op(sources, path)


def drive_kills(sources: str, root: str, names: list[str], limit: int | None) -> dict:
    """Driver (a fresh interpreter): each operation killed at storage calls; after each
    kill the target must be absent or whole, and after the next writer of the target
    (the same operation run again) whole, with no temporary left."""
    from kill_points import count_calls, in_child, points

    rng = np.random.default_rng(33)
    results: dict[str, list] = {}
    for name in names:
        op, target, same = OPS[name]
        out = os.path.join(root, name)
        os.makedirs(out)
        path = os.path.join(out, target)

        def counted(path=path, op=op):
            count = count_calls()
            _run(op, sources, path)
            return count[0]

        total = in_child(counted).result
        seen = []
        for at, how in points(total, limit, rng):
            for entry in os.listdir(out):
                full = os.path.join(out, entry)
                shutil.rmtree(full) if os.path.isdir(full) else os.unlink(full)
            child = in_child(_run, op, sources, path, at=at, how=how)

            def state(path=path, out=out, same=same):
                there = os.path.lexists(path)
                return [there and bool(same(sources, path)), there,
                        sorted(n for n in os.listdir(out) if is_temporary(n))]

            after_kill = in_child(state).result
            again = in_child(_run, op, sources, path)  # the next writer of the target
            seen.append([at, how, child.killed, after_kill, again.error,
                         in_child(state).result])
        results[name] = [total, seen]
    return results


@pytest.mark.skipif(not hasattr(os, "fork"), reason="kills forked children")
def test_a_kill_leaves_the_target_whole_or_absent_and_the_next_writer_cleans_up(tmp_path,
                                                                              sources):
    # docs/spec/commit.md [C22]
    from kill_points import run_driver

    out = run_driver("test_whole_or_nothing", "drive_kills", sources, str(tmp_path), KILLED,
                     KILLS, timeout=1200)
    for name, (total, seen) in out.items():
        assert total > 0 and seen, name
        for at, how, _, (whole, there, _), error, (whole_again, _, left) in seen:
            where = f"{name} killed {how} storage call {at} of {total}"
            assert whole or not there, where  # never a part under the target's name
            assert error is None, (where, error)
            assert whole_again and left == [], (where, left)
        assert any(killed for _, _, killed, *_ in seen), name


# -- the next writer removes only what dead writers left --------------------------------------

def test_the_next_writer_removes_only_dead_writers_temporaries(tmp_path, sources):
    import subprocess
    import sys

    dst = str(tmp_path / "c")
    # A temporary of a process that is gone, one of a process still running, and one
    # of another machine.
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    gone = temporary_name(dst).replace(f"-{os.getpid()}-", f"-{dead}-")
    live = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                            stdin=subprocess.PIPE)
    try:
        running = temporary_name(dst).replace(f"-{os.getpid()}-", f"-{live.pid}-")
        name = os.path.basename(temporary_name(dst))
        host = name.split(".")[2][:6]
        other_host = f"{(int(host, 16) + 1) % 2**24:06x}"
        elsewhere = str(tmp_path / name.replace(host, other_host, 1))
        for leftover in (gone, running, elsewhere):
            os.makedirs(os.path.join(leftover, "data"))
        other = temporary_name(str(tmp_path / "other"))  # another target's: not ours
        os.makedirs(other.replace(f"-{os.getpid()}-", f"-{dead}-"))
        _array(sources).copy(rootdir=dst).close()
        left = sorted(os.listdir(tmp_path))
        assert os.path.basename(gone) not in left
        assert os.path.basename(running) in left and os.path.basename(elsewhere) in left
        assert len([n for n in left if is_temporary(n, "other")]) == 1
    finally:
        live.stdin.close()
        live.wait()
