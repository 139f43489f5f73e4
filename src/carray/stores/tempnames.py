"""One rule for temporary names: every new file or dataset carray writes is first made
under a temporary name beside its target, then renamed to the target once whole.

The temporary name of ``<dir>/<name>`` is ``<dir>/.<name>.<host>-<pid>-<nonce>.tmp``:
hidden, ending in ``.tmp``, naming its target, the machine (six hex digits of a hash
of the host name) and the process that writes it, and a nonce no other writer of this
process uses.  The lock file of a single-file dataset built under such a name
(``<temporary>.lock``, see :mod:`carray.stores.lock`) counts as one too.  A process killed while writing leaves such a name behind; the next
writer of the target removes it (:func:`carray.stores.staging.sweep`) once
:func:`owner_gone` says the process that made it is gone: it ran on this machine and
no process of that id runs any more, or the one running now started after the
temporary was last written (its id was reused).  A leftover of another machine is
left alone: carray cannot tell whether its writer still runs.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import re
import secrets
import socket
from dataclasses import dataclass

SUFFIX = ".tmp"
# (``.lock``: the lock file of a single-file dataset built under a temporary name.)
_NAME = re.compile(r"\.(?P<target>.+)\.(?P<host>[0-9a-f]{6})-(?P<pid>[0-9]+)-[0-9a-f]+\.tmp"
                   r"(?:\.lock)?")


def _host_tag() -> str:
    return hashlib.blake2s(socket.gethostname().encode(), digest_size=3).hexdigest()


HOST = _host_tag()
# The writer's part of every name: asked once per process (and again in a forked child),
# since small files are written often and a system call per name would show.
_prefix = ""
_nonces = itertools.count()


def _new_process() -> None:
    global _prefix, _nonces
    _prefix = f"{HOST}-{os.getpid()}-{secrets.token_hex(2)}"
    _nonces = itertools.count()


_new_process()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_process)


def temporary_name(path: str) -> str:
    """The temporary name to write ``path`` under (see the module doc): beside it, in the
    same directory, unique to this call."""
    head, name = os.path.split(path.rstrip("/"))
    tmp = f".{name}.{_prefix}{next(_nonces):x}{SUFFIX}"
    return os.path.join(head, tmp) if head else tmp


@dataclass(frozen=True)
class Temporary:
    """What a temporary name says: the target's name, the machine and the process."""

    target: str
    host: str
    pid: int


def parse(name: str) -> Temporary | None:
    """What the file name ``name`` (no directory) says, or None when it is not a
    temporary name of this rule."""
    m = _NAME.fullmatch(name)
    if m is None:
        return None
    return Temporary(m["target"], m["host"], int(m["pid"]))


def is_temporary(name: str, target: str | None = None) -> bool:
    """Whether the file name ``name`` is a temporary name (of ``target``'s, if given)."""
    found = parse(name)
    return found is not None and (target is None or found.target == target)


def owner_gone(name: str, modified: float | None) -> bool:
    """Whether the process that made the temporary ``name`` is gone (see the module doc);
    ``modified``: when the temporary was last written (None: unknown)."""
    found = parse(name)
    if found is None or found.host != HOST or found.pid == os.getpid() or os.name != "posix":
        return False  # (elsewhere os.kill ends the process it names)
    try:
        os.kill(found.pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass  # another user's process: it runs
    except OSError:
        return False
    started = process_start(found.pid)
    # One second of slack: the boot time the start is counted from is in whole seconds.
    return started is not None and modified is not None and started > modified + 1.0


def process_start(pid: int) -> float | None:
    """When process ``pid`` started (seconds since the epoch), where the system says
    (Linux ``/proc``); None elsewhere or when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        with open("/proc/stat", "rb") as f:
            boot = next(int(line.split()[1]) for line in f if line.startswith(b"btime"))
    except (OSError, IndexError, ValueError, StopIteration):
        return None
    # Field 22 of stat (the 20th after the name): start time in clock ticks since boot.
    return boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")
