"""kill -9 at the N-th storage call, in forked children of one clean process.

A test that kills writers many times runs a *driver*: a fresh interpreter that imports
carray (which starts no threads) and forks a child for every writer it kills and for
every check it makes.  Forking a process that runs threads (compressing pools, test
plugins) can leave their locks held in the child, so the driver itself never touches
data: it copies directories and forks.  A fork costs milliseconds where a new
interpreter costs a second, which is what makes hundreds of kills per test affordable.

A child counts the calls of the ``os`` functions that change files (:data:`WRITERS`)
and kills itself with SIGKILL at the ``at``-th: before it runs, after it, or, for a
write, after writing only the first half of its bytes (a write the kill tore).
"""

from __future__ import annotations

import contextlib
import glob
import importlib
import json
import os
import signal
import subprocess
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: The ``os`` functions through which carray's stores write, sync, rename and delete.
WRITERS = ("write", "writev", "pwrite", "fsync", "replace", "rename", "link", "unlink",
           "rmdir", "ftruncate")
#: The functions themselves, before any child replaces them.
REAL = {name: getattr(os, name) for name in WRITERS}
#: Where a kill lands relative to the call it counts.
HOW = ("before", "after", "torn")
TESTS_DIR = os.path.dirname(os.path.abspath(__file__))

_report_fd = -1


def report(value: Any) -> None:
    """Send ``value`` (JSON) from a child to its parent; never counted as a write."""
    data = (json.dumps(value) + "\n").encode()
    while data:
        data = data[REAL["write"](_report_fd, data):]


def count_calls() -> list[int]:
    """Count the calls of :data:`WRITERS` in this process from now on: ``[count]``."""
    count = [0]

    def wrap(func: Callable) -> Callable:
        def call(*args: Any, **kwargs: Any) -> Any:
            count[0] += 1
            return func(*args, **kwargs)
        return call

    for name in WRITERS:
        setattr(os, name, wrap(REAL[name]))
    return count


def _torn(name: str, args: tuple) -> None:
    """Write the first half of what a write call was given (its other arguments kept)."""
    if name == "writev":
        fd, buffers = args[0], [memoryview(b).cast("B") for b in args[1]]
        data = b"".join(bytes(b) for b in buffers)
        REAL["write"](fd, data[:len(data) // 2])
    elif name in ("write", "pwrite"):
        view = memoryview(args[1]).cast("B")
        REAL[name](args[0], view[:len(view) // 2], *args[2:])


def kill_at(at: int, how: str) -> list[int]:
    """SIGKILL this process at its ``at``-th call of :data:`WRITERS`.

    Parameters
    ----------
    at : int
        The call to die at, counting from 1.
    how : {'before', 'after', 'torn'}
        Die before the call runs, after it, or after writing half of a write's bytes.

    Returns
    -------
    list of int
        ``[calls so far]``, kept up to date.
    """
    if how not in HOW:
        raise ValueError(how)
    count = [0]

    def wrap(name: str, func: Callable) -> Callable:
        def call(*args: Any, **kwargs: Any) -> Any:
            count[0] += 1
            if count[0] == at:
                if how == "torn":
                    _torn(name, args)
                if how != "after":
                    os.kill(os.getpid(), signal.SIGKILL)
                out = func(*args, **kwargs)
                os.kill(os.getpid(), signal.SIGKILL)
                return out
            return func(*args, **kwargs)
        return call

    for name in WRITERS:
        setattr(os, name, wrap(name, REAL[name]))
    return count


@dataclass
class Child:
    """What a forked child did: whether it was killed, the values it reported, and its
    return value or the traceback it died of."""

    killed: bool
    reports: list[Any] = field(default_factory=list)
    result: Any = None
    error: str | None = None


def in_child(func: Callable[..., Any], *args: Any, at: int | None = None,
             how: str = "after") -> Child:
    """Run ``func(*args)`` in a forked child; :func:`report` there sends values back.

    Parameters
    ----------
    func : callable
        What the child runs; its return value (JSON) comes back as ``result``.
    at : int, optional
        Kill the child at its ``at``-th storage call (see :func:`kill_at`).
    how : str
        Where the kill lands (see :func:`kill_at`).

    Returns
    -------
    Child
        Whether it was killed, what it reported, returned or raised.
    """
    global _report_fd
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        os.close(read_end)
        _report_fd = write_end
        code = 0
        try:
            if at is not None:
                kill_at(at, how)
            report({"result": func(*args)})
        except BaseException:  # noqa: BLE001 - the parent reports it
            report({"error": traceback.format_exc()})
            code = 1
        os._exit(code)
    os.close(write_end)
    parts = []
    while chunk := os.read(read_end, 1 << 16):
        parts.append(chunk)
    os.close(read_end)
    _, status = os.waitpid(pid, 0)
    child = Child(os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL)
    for line in b"".join(parts).decode().splitlines():
        value = json.loads(line)
        if isinstance(value, dict) and "result" in value:
            child.result = value["result"]
        elif isinstance(value, dict) and "error" in value:
            child.error = value["error"]
        else:
            child.reports.append(value)
    if not child.killed and child.error is None and os.WIFSIGNALED(status):
        child.error = f"died of signal {os.WTERMSIG(status)}"
    return child


def warm_up() -> None:
    """Import in the driver what carray imports on first use (pandas and pyarrow, to
    recognise their tables), so that each forked child does not import it again."""
    for name in ("pandas", "pyarrow", "pyarrow.compute"):
        with contextlib.suppress(ImportError):
            importlib.import_module(name)


def run_driver(module: str, function: str, *args: Any, timeout: float = 3000) -> Any:
    """Run ``module.function(*args)`` in a fresh interpreter (see the module doc).

    Parameters
    ----------
    module, function : str
        A module of the tests directory and its function (the driver).
    *args
        JSON arguments of the function.
    timeout : float
        Seconds before the driver is given up.

    Returns
    -------
    object
        What the function returned (JSON).
    """
    # A plain name is looked for in the folders that mirror the packages; a dotted one
    # (``formats.test_x``) is imported from the tests directory as it is.
    found = [os.path.join(TESTS_DIR, *module.split(".")) + ".py"] if "." in module else \
        sorted(glob.glob(os.path.join(TESTS_DIR, "**", f"{module}.py"), recursive=True))
    if not found or not os.path.exists(found[0]):
        raise AssertionError(f"no test module {module!r} under {TESTS_DIR}")
    here = TESTS_DIR if "." in module else os.path.dirname(found[0])
    code = (f"import json, sys; sys.path[:0] = [{here!r}, {TESTS_DIR!r}]; import {module}; "
            f"import kill_points; kill_points.warm_up(); print(json.dumps({module}.{function}(*json.loads(sys.argv[1]))))")
    out = subprocess.run([sys.executable, "-c", code, json.dumps(list(args))],
                         capture_output=True, text=True, timeout=timeout)
    if out.returncode != 0:
        raise AssertionError(f"the driver failed:\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def points(total: int, limit: int | None, rng: Any) -> list[tuple[int, str]]:
    """Storage calls to kill at, with how (see :data:`HOW`): every one of ``total``, the
    ways in turn, or ``limit`` drawn at random by ``rng`` (a numpy Generator)."""
    if limit is None:
        return [(at, HOW[at % len(HOW)]) for at in range(1, total + 1)]
    ats = sorted({int(x) for x in rng.integers(1, total + 1, size=limit)})
    return [(at, HOW[int(rng.integers(0, len(HOW)))]) for at in ats]
