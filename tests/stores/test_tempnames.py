"""The one rule for temporary names (carray/_tempnames.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from carray.stores.tempnames import HOST, Temporary, is_temporary, owner_gone, parse, temporary_name


def test_a_temporary_name_is_hidden_beside_its_target_and_says_who_writes_it(tmp_path):
    target = str(tmp_path / "data.b2nd")
    tmp = temporary_name(target)
    assert os.path.dirname(tmp) == str(tmp_path)
    name = os.path.basename(tmp)
    assert name.startswith(".data.b2nd.") and name.endswith(".tmp")
    assert parse(name) == Temporary("data.b2nd", HOST, os.getpid())
    assert is_temporary(name, "data.b2nd") and not is_temporary(name, "data")
    assert is_temporary(name + ".lock", "data.b2nd")  # a single-file dataset's lock file
    assert temporary_name(target) != tmp  # unique per call
    assert parse(temporary_name("x/")).target == "x"  # a directory named with its slash
    for plain in ("data", ".data", "data.tmp", "a.1234.tmp", ".data.zz-1-0.tmp"):
        assert parse(plain) is None, plain


@pytest.mark.skipif(not hasattr(os, "fork"), reason="forks")
def test_a_forked_child_names_its_temporaries_as_its_own():
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.write(write, temporary_name("t").encode())
        os._exit(0)
    os.waitpid(pid, 0)
    child = os.read(read, 1000).decode()
    assert parse(child).pid == pid
    assert child != temporary_name("t")


@pytest.mark.skipif(os.name != "posix", reason="tells live processes by their id")
def test_the_owner_is_gone_when_its_process_is_or_its_id_was_reused(tmp_path):
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    dead = int(done.stdout)
    live = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                            stdin=subprocess.PIPE)
    try:
        ours = os.path.basename(temporary_name("t"))
        of = {pid: ours.replace(f"-{os.getpid()}-", f"-{pid}-") for pid in (dead, live.pid)}
        now = time.time()
        assert owner_gone(of[dead], now)
        assert not owner_gone(of[live.pid], now)  # still writing
        if sys.platform.startswith("linux"):  # the start time of a process is known
            # Last written an hour before the live process started: its id was reused.
            assert owner_gone(of[live.pid], now - 3600)
        assert not owner_gone(ours, now - 3600)  # this process's own
        other_host = f"{(int(HOST, 16) + 1) % 2**24:06x}"
        assert not owner_gone(of[dead].replace(HOST, other_host, 1), now)
        assert not owner_gone("not-a-temporary", now)
    finally:
        live.stdin.close()
        live.wait()
