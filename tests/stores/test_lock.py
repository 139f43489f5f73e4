"""One writer at a time: each writable handle's lock, on every layout and on tables."""

from __future__ import annotations

import gc
import hashlib
import os
import socket
import subprocess
import sys
import textwrap
import threading
import time
import weakref

import numpy as np
import pytest

import carray as ca
from carray.errors import CArrayError, HandleClosedError, LockError
from carray.stores import LOCAL
from carray.stores import lock as lock_module
from carray.stores.lock import LOCK_SUFFIX, WriteLock

KINDS = ["superchunk", "bcolz", "b2nd", "sparse", "table", "bcolz-table"]
# bcolz directories let a second writable open of this process take writing over
# (test_lock_handover.py); the others refuse it.
HANDING_OVER = {"bcolz", "bcolz-table"}
ONE_WRITER = [k for k in KINDS if k not in HANDING_OVER]

_HOLDER = textwrap.dedent("""
    import sys
    import carray as ca
    kind, path = sys.argv[1], sys.argv[2]
    if kind == "group":
        obj = ca.open_group(path, mode="a")
    elif kind.endswith("table"):
        obj = ca.ctable(rootdir=path, mode="a")
    else:
        obj = ca.open(path, mode="a")
    print("locked", flush=True)
    sys.stdin.readline()
""")


def _make(tmp_path, kind: str) -> str:
    if kind.endswith("table"):
        path = str(tmp_path / "t")
        ca.ctable({"a": np.arange(10), "b": np.arange(10.0)}, rootdir=path,
                  format="bcolz" if kind == "bcolz-table" else None).close()
        return path
    path = str(tmp_path / ("x.b2nd" if kind in ("b2nd", "sparse") else "x"))
    storage = {"contiguous": False} if kind == "sparse" else None
    ca.carray(np.arange(10), rootdir=path, format="bcolz" if kind == "bcolz" else None,
              chunklen=4, storage=storage).close()
    return path


def _writer(path: str, kind: str):
    return ca.ctable(rootdir=path, mode="a") if kind.endswith("table") else ca.open(path, mode="a")


def _reader(path: str, kind: str):
    return ca.ctable(rootdir=path, mode="r") if kind.endswith("table") else ca.open(path, mode="r")


def _append(obj, kind: str) -> None:
    obj.append({"a": np.arange(3), "b": np.arange(3.0)} if kind.endswith("table") else np.arange(3))


def _files(root) -> dict[str, str]:
    """Every file under ``root`` (or beside a single-file dataset) -> a hash of its bytes."""
    out = {}
    for dirpath, _, names in os.walk(root):
        for name in names:
            full = os.path.join(dirpath, name)
            with open(full, "rb") as f:
                out[os.path.relpath(full, root)] = hashlib.sha256(f.read()).hexdigest()
    return out


@pytest.mark.parametrize("kind", ONE_WRITER)
def test_a_second_writer_in_this_process_gets_lock_error(tmp_path, kind):
    path = _make(tmp_path, kind)
    first = _writer(path, kind)
    with pytest.raises(LockError, match="already open for writing") as info:
        _writer(path, kind)
    message = str(info.value)
    assert path in message and "close" in message and "mode='r'" in message
    assert isinstance(info.value, BlockingIOError)
    # Readers never need the lock.
    with _reader(path, kind) as reader:
        assert len(reader) == 10
    _append(first, kind)  # the first writer is unharmed
    first.close()
    with _writer(path, kind) as again:  # released by close()
        _append(again, kind)
    with _writer(path, kind) as again:  # and by leaving the with block
        assert len(again) == 16
    assert len(_reader(path, kind)) == 16


@pytest.mark.parametrize("kind", KINDS)
def test_a_dropped_handle_releases_its_lock(tmp_path, kind):
    path = _make(tmp_path, kind)
    gc.disable()  # so that only the lock's retry collects it
    try:
        first = _writer(path, kind)
        dropped = weakref.ref(first)
        del first
        assert dropped() is None  # its lock (and takeover hook) keep no cycle alive
        _writer(path, kind).close()
        # A handle only a reference cycle keeps alive is collected before refusing (a
        # bcolz handle hands writing over, as a live one would).
        cycle = {"handle": _writer(path, kind)}
        cycle["self"] = cycle
        handle = weakref.ref(cycle["handle"])
        del cycle
        assert handle() is not None
        _writer(path, kind).close()
        assert handle() is None or (kind in HANDING_OVER and handle().mode == "r")
    finally:
        gc.enable()


@pytest.mark.parametrize("kind", ["superchunk", "bcolz", "b2nd", "sparse"])
def test_a_replaced_name_can_be_opened_again(tmp_path, kind):
    path = _make(tmp_path, kind)
    a = ca.carray(np.arange(5), rootdir=path, mode="w",
                  format="bcolz" if kind == "bcolz" else None)
    a = None  # noqa: F841 - dropped, not closed
    with ca.open(path, mode="a") as b:
        assert len(b) == 5


def _replace(path: str, kind: str, n: int = 3):
    """A mode='w' open replacing the dataset at ``path`` with ``n`` items."""
    if kind.endswith("table"):
        return ca.ctable({"z": np.arange(n)}, rootdir=path, mode="w",
                         format="bcolz" if kind == "bcolz-table" else None)
    return ca.carray(np.arange(n), rootdir=path, mode="w",
                     format="bcolz" if kind == "bcolz" else None)


@pytest.mark.parametrize("kind", KINDS)
def test_mode_w_takes_the_dataset_over_from_this_process_older_handle(tmp_path, kind):
    path = _make(tmp_path, kind)
    old = _writer(path, kind)
    _append(old, kind)  # not flushed: dropped by the takeover
    new = _replace(path, kind)
    assert len(new) == 3
    uses = [lambda: old[:], lambda: old[0], lambda: _append(old, kind), old.flush,
            lambda: old.attrs["units"], lambda: old.attrs.update(units="m")]
    for use in uses:
        with pytest.raises(HandleClosedError, match="later mode='w' open") as info:
            use()
        assert str(info.value).startswith(f"{path}: ")
        assert isinstance(info.value, CArrayError) and isinstance(info.value, ValueError)
    new.flush()
    before = _files(tmp_path)
    old.close()  # closed already: nothing more happens
    old.close()
    assert _files(tmp_path) == before
    if kind in HANDING_OVER:  # mode 'a' takes writing over, after a flush
        _writer(path, kind).close()
        assert new.mode == "r"
    else:
        with pytest.raises(LockError):  # mode 'a' never takes over: the new handle keeps it
            _writer(path, kind)
    new.close()
    with _reader(path, kind) as reader:
        assert len(reader) == 3 and (kind.endswith("table") or list(reader[:]) == [0, 1, 2])


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("mode", ["a", "r"])
def test_mode_w_refuses_to_copy_from_the_dataset_it_replaces(tmp_path, kind, mode):
    path = _make(tmp_path, kind)
    source = _writer(path, kind) if mode == "a" else _reader(path, kind)
    before = _files(tmp_path)
    with pytest.raises(ValueError, match="cannot be replaced by data read from"):
        if kind.endswith("table"):
            ca.ctable(source[["a"]], rootdir=path, mode="w")
        else:
            ca.carray(source, rootdir=path, mode="w")
    with pytest.raises(ValueError, match="cannot be replaced by data read from"):
        source.copy(rootdir=path, mode="w")
    assert _files(tmp_path) == before
    assert len(source[:]) == 10  # still open
    source.close()


@pytest.mark.parametrize("kind", KINDS)
def test_a_cell_run_again_with_mode_w_replaces_its_own_dataset(tmp_path, kind):
    path = _make(tmp_path, kind)
    runs = [_replace(path, kind, n) for n in (4, 5, 6)]  # every handle still alive
    with pytest.raises(HandleClosedError):
        runs[0][:]
    runs[-1].close()
    assert len(_reader(path, kind)) == 6


@pytest.mark.parametrize("kind", ["superchunk", "bcolz", "b2nd", "sparse"])
def test_opening_an_existing_array_with_mode_w_takes_it_over(tmp_path, kind):
    path = _make(tmp_path, kind)
    old = _writer(path, kind)
    for _ in range(6):  # appends that fill the last chunk hand it to compressing threads
        old.append(np.arange(3))
    new = ca.open(path, mode="w")
    assert len(new) == 0
    new.append(np.arange(7))
    with pytest.raises(HandleClosedError):
        old.append(np.arange(3))
    new.close()
    assert list(ca.open(path, mode="r")[:]) == list(range(7))


def test_a_table_is_taken_over_with_its_string_and_nested_columns(tmp_path):
    path = str(tmp_path / "t")
    nested = np.zeros(3, dtype=[("p", "i4"), ("q", "f8")])
    columns = {"s": np.array(["a", "bb", ""], dtype=object), "n": nested}
    old = ca.ctable(columns, rootdir=path, mode="w")
    new = ca.ctable(columns, rootdir=path, mode="w")
    for column in (old.cols["s"], old.cols["n"], old.cols["n"].cols["p"]):
        with pytest.raises(HandleClosedError):
            column[0]
    new.append({"s": ["x"], "n": nested[:1]})
    new.close()
    old.close()
    with ca.ctable(rootdir=path, mode="a") as again:  # no lock left behind
        assert list(again["s"][:]) == ["a", "bb", "", "x"]


def test_a_column_of_a_table_this_process_writes_is_not_taken_over(tmp_path):
    path = _make(tmp_path, "table")
    ca.ctable({"s": np.array(["x", "yy"], dtype=object)}, rootdir=str(tmp_path / "u")).close()
    with ca.ctable(rootdir=path, mode="a") as t, \
            ca.ctable(rootdir=str(tmp_path / "u"), mode="a") as u:
        with pytest.raises(LockError):  # the table's lock covers its columns
            ca.carray(np.arange(3), rootdir=os.path.join(path, "a"), mode="w")
        with pytest.raises(LockError):
            ca.StringColumn(["z"], rootdir=str(tmp_path / "u" / "s"), mode="w")
        _append(t, "table")
        assert list(u["s"][:]) == ["x", "yy"]
    assert len(_reader(path, "table")) == 13


def test_a_new_dataset_is_locked_by_its_creator(tmp_path):
    path = str(tmp_path / "x")
    a = ca.carray(np.arange(4), rootdir=path, mode="w")
    with pytest.raises(LockError):
        ca.open(path, mode="a")
    a.close()
    t = ca.ctable({"a": np.arange(4)}, rootdir=str(tmp_path / "t"), mode="w")
    with pytest.raises(LockError):
        ca.ctable(rootdir=str(tmp_path / "t"), mode="a")
    with pytest.raises(LockError):  # a column belongs to its table's writer
        ca.open(str(tmp_path / "t" / "a"), mode="a")
    t.close()


@pytest.mark.parametrize("kind", KINDS)
def test_a_replaced_dataset_is_locked_by_its_replacer(tmp_path, kind):
    path = _make(tmp_path, kind)
    if kind.endswith("table"):
        new = ca.ctable({"z": np.arange(3)}, rootdir=path, mode="w",
                        format="bcolz" if kind == "bcolz-table" else None)
    else:
        new = ca.carray(np.arange(3), rootdir=path, mode="w",
                        format="bcolz" if kind == "bcolz" else None)
    if kind in HANDING_OVER:  # bcolz's own: writing is handed over, not refused
        _writer(path, kind).close()
    else:
        with pytest.raises(LockError, match=f"^{path}: "):  # the dataset's own lock
            _writer(path, kind)
    new.close()
    with _writer(path, kind) as again:
        assert len(again) == 3


def test_a_refused_table_open_keeps_no_lock(tmp_path):
    path = _make(tmp_path, "table")
    column = ca.open(os.path.join(path, "b"), mode="a")  # a writer of one column
    with pytest.raises(LockError, match="already open for writing") as refused:
        ca.ctable(rootdir=path, mode="a")
    column.close()
    # The failed table is still reachable from the traceback (as in an interactive
    # session), yet it holds no lock.
    assert refused.tb is not None
    with ca.ctable(rootdir=path, mode="a") as t:
        _append(t, "table")
    assert len(_reader(path, "table")) == 13


def test_a_table_and_its_columns_do_not_lock_each_other_out(tmp_path):
    path = _make(tmp_path, "table")
    with ca.ctable(rootdir=path, mode="a") as t:
        t.addcol(np.arange(10) * 2, name="c")
        t.append({"a": [1], "b": [1.0], "c": [2]})
        t.delcol("b")
        t.resize(5)
    with ca.ctable(rootdir=path, mode="r") as t:
        assert t.names == ["a", "c"] and len(t) == 5


@pytest.mark.parametrize("kind", KINDS)
def test_a_writer_in_another_process_locks_us_out(tmp_path, monkeypatch, kind):
    monkeypatch.setattr(lock_module, "DEFAULT_TIMEOUT", 0.2)  # waited for, then refused
    path = _make(tmp_path, kind)
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, kind, path],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(LockError, match="already open for writing"):
            _writer(path, kind)
        before = _files(tmp_path)
        with pytest.raises(LockError, match="already open for writing"):
            _replace(path, kind)  # mode 'w' takes over only this process's handles
        assert _files(tmp_path) == before
        with _reader(path, kind) as reader:
            assert len(reader) == 10
    finally:
        holder.stdin.write("\n")
        holder.stdin.close()
        holder.wait()
    # Released when the holder went away: writing works again.
    with _writer(path, kind) as obj:
        _append(obj, kind)


def test_coordinated_writers_skip_the_lock(tmp_path):
    path = _make(tmp_path, "superchunk")
    with ca.open(path, mode="a"):
        b = ca.open(path, mode="a", storage={"lock": False})
        assert b.mode == "a"
        b.close()


def test_lock_file_of_a_single_file_dataset_goes_away(tmp_path):
    path = _make(tmp_path, "b2nd")
    a = ca.open(path, mode="a")
    assert os.path.exists(path + LOCK_SUFFIX)
    with pytest.raises(LockError):
        ca.open(path, mode="a")
    assert os.path.exists(path + LOCK_SUFFIX)  # the refused writer left it to its holder
    a.close()
    assert sorted(os.listdir(tmp_path)) == ["x.b2nd"]


def test_two_locks_on_one_directory_exclude_each_other(tmp_path):
    path = _make(tmp_path, "bcolz")
    before = sorted(os.listdir(path))
    lock = WriteLock.acquire(LOCAL, path)
    assert lock is not None and lock.held
    assert sorted(os.listdir(path)) == before  # no extra files
    with pytest.raises(LockError):
        WriteLock.acquire(LOCAL, path)
    with pytest.raises(LockError):  # no handle registered to be closed by a takeover
        WriteLock.acquire(LOCAL, path, take_over=True)
    lock.release()
    assert not lock.held
    lock.release()  # twice is harmless
    again = WriteLock.acquire(LOCAL, path)
    assert again is not None and again.held
    again.release()


def test_no_lock_where_nothing_can_be_locked(tmp_path):
    assert WriteLock.acquire(LOCAL, str(tmp_path / "missing")) is None


# -- waiting for another process's writer --------------------------------------------------------

WAITERS = ["superchunk", "b2nd", "table", "group"]


def _make_any(tmp_path, kind: str) -> str:
    if kind != "group":
        return _make(tmp_path, kind)
    path = str(tmp_path / "g")
    with ca.group(path, mode="w") as g:
        g.create_array("x", np.arange(10))
    return path


def _open_writer(path: str, kind: str, timeout: float):
    storage = {"lock_timeout": timeout}
    if kind == "group":
        return ca.open_group(path, mode="a", storage=storage)
    if kind.endswith("table"):
        return ca.ctable(rootdir=path, mode="a", storage=storage)
    return ca.open(path, mode="a", storage=storage)


class _Holder:
    """A process holding the writer's lock of the dataset at ``path`` until
    :meth:`release` (or the end of the ``with`` block)."""

    def __init__(self, path: str, kind: str) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", _HOLDER, kind, path],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout.readline().strip() == "locked"

    def release(self) -> None:
        if self.proc.stdin.closed:
            return
        self.proc.stdin.write("\n")
        self.proc.stdin.close()
        self.proc.wait()

    def __enter__(self) -> _Holder:
        return self

    def __exit__(self, *exc) -> None:
        self.release()


@pytest.mark.parametrize("kind", WAITERS)
def test_a_second_writer_waits_for_the_holder_to_close(tmp_path, kind):
    # docs/spec/commit.md [C6]
    path = _make_any(tmp_path, kind)
    with _Holder(path, kind) as holder:
        threading.Timer(0.6, holder.release).start()
        start = time.monotonic()
        writer = _open_writer(path, kind, timeout=20)
        waited = time.monotonic() - start
    assert holder.proc.wait() == 0
    assert 0.5 <= waited < 15, waited
    assert not writer.readonly if kind == "group" else writer.mode == "a"
    writer.close()


@pytest.mark.parametrize("kind", WAITERS)
def test_a_writer_that_waited_in_vain_is_told_who_holds_the_lock(tmp_path, kind):
    # docs/spec/commit.md [C6]
    path = _make_any(tmp_path, kind)
    with _Holder(path, kind) as holder:
        before = _files(tmp_path)
        start = time.monotonic()
        with pytest.raises(LockError) as info:
            _open_writer(path, kind, timeout=0.4)
        waited = time.monotonic() - start
        message = str(info.value)
        if sys.platform.startswith("linux"):  # /proc/locks names the holder
            assert f"process {holder.proc.pid} on {socket.gethostname()}" in message, message
        assert "waited 0.4 s" in message and "lock_timeout" in message, message
        assert _files(tmp_path) == before
    assert 0.4 <= waited < 5, waited


def test_this_process_own_writer_is_refused_at_once(tmp_path):
    path = _make(tmp_path, "superchunk")
    with ca.open(path, mode="a"):
        start = time.monotonic()
        with pytest.raises(LockError, match="another handle in this process"):
            ca.open(path, mode="a", storage={"lock_timeout": 30})
        assert time.monotonic() - start < 2  # waiting for ourselves would never end


@pytest.mark.parametrize("value", [-1, "10", float("nan"), True])
def test_a_lock_timeout_must_be_seconds(tmp_path, value):
    path = _make(tmp_path, "superchunk")
    with pytest.raises(ValueError, match="lock_timeout"):
        ca.open(path, mode="a", storage={"lock_timeout": value})
    with pytest.raises(ValueError, match="lock_timeout"):
        ca.group(str(tmp_path / "g"), mode="w", storage={"lock_timeout": value})
    with pytest.raises(ValueError, match="takes lock_timeout, versions and grace"):
        ca.group(str(tmp_path / "g"), mode="w", storage={"verify": False})


# -- mode 'w' takes the lock before it touches anything -----------------------------------------

def _replacements(tmp_path, kind: str, path: str) -> dict:
    """Everything that replaces the dataset at ``path``, by name."""
    import xarray as xr

    from carray.integrations.convert import convert

    source = str(tmp_path / "elsewhere")
    ca.carray(np.arange(5), rootdir=source, mode="w").close()
    out = {"convert": lambda: convert(source, path, overwrite=True)}
    if kind == "group":
        out["group"] = lambda: ca.group(path, mode="w")
        out["from_xarray"] = lambda: ca.from_xarray(xr.Dataset({"v": ("n", np.arange(3))}),
                                                    path, mode="w")
        out["copy_group"] = lambda: ca.copy_group(str(tmp_path / "g2"), path, overwrite=True)
        with ca.group(str(tmp_path / "g2"), mode="w") as g:
            g.create_array("y", np.arange(3))
        del out["convert"]
    elif kind.endswith("table"):
        out["ctable"] = lambda: ca.ctable({"z": np.arange(3)}, rootdir=path, mode="w")
        out["copy"] = lambda: ca.ctable({"z": np.arange(3)}).copy(rootdir=path, mode="w")
        del out["convert"]
    else:
        out["carray"] = lambda: ca.carray(np.arange(3), rootdir=path, mode="w")
        out["copy"] = lambda: ca.carray(np.arange(3)).copy(rootdir=path, mode="w")
        out["rechunk_in_place_of"] = lambda: ca.open(source, mode="r").rechunk(
            (2,), rootdir=path)
    return out


@pytest.mark.parametrize("kind", WAITERS)
def test_mode_w_leaves_a_dataset_another_process_writes_untouched(tmp_path, monkeypatch, kind):
    # docs/spec/commit.md [C7]
    from carray.stores.tempnames import is_temporary

    monkeypatch.setattr(lock_module, "DEFAULT_TIMEOUT", 0.2)
    path = _make_any(tmp_path, kind)
    replacements = _replacements(tmp_path, kind, path)
    with _Holder(path, kind):
        before = _files(path) if os.path.isdir(path) else _files(tmp_path)
        for name, replace in replacements.items():
            with pytest.raises((LockError, ca.ContainerExistsError)) as info:
                replace()
            if name != "rechunk_in_place_of":  # (a rechunk never replaces)
                assert isinstance(info.value, LockError), name
            after = _files(path) if os.path.isdir(path) else _files(tmp_path)
            assert after == before, name
            left = [n for n in os.listdir(tmp_path) if is_temporary(n) or "replaced" in n]
            assert left == [], (name, left)
    replacements["group" if kind == "group" else "copy" if kind != "b2nd" else "carray"]()
