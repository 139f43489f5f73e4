"""Writing a local file of a file format under a temporary name and putting it in place.

The new file replaces the old one atomically: a reader opening the path sees the old file
or the new one, never a mix.  It is put in place by exchanging the two names (Linux
``renameat2`` with ``RENAME_EXCHANGE``) and unlinking the old file, not by a plain rename
over it: ext4 (``auto_da_alloc``) starts writing the new file's data out and waits for
the block allocation when a rename replaces a file, which costs about as much as
writing 150 MB to the page cache costs in all, and which a caller who passed
``fsync=False`` asked not to wait for.  Where the exchange is not available (another
OS, a file system without it, no file to replace) it is a plain ``os.replace``.

So, without fsync, a crash of the machine may leave a new file empty or short (the data
never reached the disk).  A file that replaces another is synced before the exchange
whatever ``fsync`` says, so a crash leaves the old file or the new one whole: data
once written is never lost to a write that replaces it.  With fsync the new file is on disk before its name is, and its name (the
directory) before the call returns.  A file written in parts with fsync has its
write-back started as it goes (:mod:`carray.formats.writeback`), so the final fsync
waits for its last few MiB only.  Small files take :func:`write_bytes`: one ``open``,
``write``, ``close`` and ``rename`` each.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from carray.codecs.parallel import in_background
from carray.formats.writeback import WriteBack
from carray.stores.base import storage_error
from carray.stores.files import exchange, fsync_path, rename_noreplace
from carray.stores.local import LOCAL
from carray.stores.staging import sweep_directory
from carray.stores.tempnames import temporary_name

#: Groups of parts, each written with one ``writev`` call: a chunk and its digest, say.
Parts = Iterable[Sequence[Any]]
#: Most buffers one ``writev`` takes (POSIX guarantees at least 16; Linux takes 1024).
_IOV_MAX = 1024 if sys.platform.startswith("linux") else 16


def replace(src: str, dst: str, *, sync_before_replacing: bool = False) -> bool:
    """Rename ``src`` to ``dst``, replacing a regular file there atomically (without the
    file system's flush of ``src``, see the module docstring); like ``os.replace``.

    Returns whether a file was replaced.  With ``sync_before_replacing``, ``src`` is
    synced first when it replaces a file: a file written without fsync may be lost to a
    power cut, but the data it replaces must not be lost with it.
    """
    # Most often nothing is there yet: one call renames, where asking first would cost
    # a failed lookup (and a Python exception) per file, a share of a tiny file's write.
    if rename_noreplace(src, dst):
        return False
    try:
        regular = stat.S_ISREG(os.lstat(dst).st_mode)
    except FileNotFoundError:
        regular = False
    if sync_before_replacing and os.path.lexists(dst):
        fsync_path(src)
    if regular and exchange(src, dst):
        _discard(src)  # the old file, now under the temporary name
        return True
    replaced = os.path.lexists(dst)
    os.replace(src, dst)
    return replaced


def _discard(path: str) -> None:
    """Unlink ``path`` now and free its blocks on the cleanup thread.

    The blocks of an unlinked file are freed (and its cached pages dropped) when its
    last descriptor closes, about 10 ms per 100 MB on ext4: holding one open across the
    unlink leaves that work to the thread that closes it.
    """
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        fd = -1
    os.unlink(path)
    if fd >= 0:
        in_background(os.close, fd)


_CREATE = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_BINARY", 0)


def _write_parts(fd: int, parts: Sequence[Any]) -> int:
    """Write the bytes-like ``parts`` in order, one ``writev`` per ``_IOV_MAX`` of them;
    return how many bytes that was."""
    total = 0
    for at in range(0, len(parts), _IOV_MAX):
        total += _write_views(fd, [memoryview(p).cast("B") for p in parts[at:at + _IOV_MAX]])
    return total


def _write_views(fd: int, views: list[memoryview]) -> int:
    total = sum(view.nbytes for view in views)
    done = os.writev(fd, views) if len(views) > 1 else os.write(fd, views[0])
    if done == total:
        return total
    for view in views:  # short writes (a signal, a full disk): finish piece by piece
        if done >= len(view):
            done -= len(view)
            continue
        view = view[done:]
        done = 0
        while view:
            view = view[os.write(fd, view):]
    return total


# Directories whose leftovers this process removed (see _placed).
_swept: set[str] = set()


@contextlib.contextmanager
def _placed(tmp: str, path: str, fsync: bool) -> Iterator[None]:
    """Put the file the block writes at ``tmp`` in place at ``path`` (:func:`replace`),
    its directory synced where the name must last; on any failure remove ``tmp`` and
    leave the old file as it was (storage failures raise ``StorageError``).

    The first write of this process into a directory removes what killed writers left
    there (:func:`carray.stores.staging.sweep_directory`): once, since programs write
    thousands of small files into one directory."""
    parent = os.path.dirname(os.path.abspath(path))
    if parent not in _swept:
        _swept.add(parent)
        sweep_directory(LOCAL, parent)
    try:
        yield
        replaced = replace(tmp, path, sync_before_replacing=not fsync)
        if fsync or replaced:  # the new name too: a power cut must not undo it
            fsync_path(os.path.dirname(os.path.abspath(path)))
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise storage_error(exc, path) from None
        raise


def write_bytes(path: str, data: bytes, *, fsync: bool) -> None:
    """:func:`write_file` of one bytes object: the path of small files, kept to one
    ``open``, ``write``, ``close`` and ``rename`` (and the syncs with ``fsync``)."""
    tmp = temporary_name(path)
    with _placed(tmp, path, fsync):
        fd = os.open(tmp, _CREATE, 0o644)
        try:
            done = os.write(fd, data)
            if done < len(data):  # a short write (a signal, a nearly full disk)
                _write_views(fd, [memoryview(data)[done:]])
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)


def write_file(path: str, groups: Parts, *, fsync: bool,
               patch: Callable[[], tuple[bytes, int]] | None = None) -> None:
    """Write ``path`` from ``groups`` (sequences of bytes-like parts, each sequence one
    system call) under a temporary name, then put it in place with :func:`replace`.

    ``patch()``, if given, is called after the last group and returns bytes and the
    offset to write them at (a table whose values were only known at the end).  On any
    failure the temporary file is removed and the old file, if any, is left as it was.
    Storage failures raise :class:`carray.errors.StorageError`.
    """
    tmp = temporary_name(path)
    with _placed(tmp, path, fsync):
        fd = os.open(tmp, _CREATE, 0o644)
        # With fsync, the disk starts on what is written while the rest is produced.
        writeback = WriteBack(fd) if fsync else None
        try:
            end = 0
            for group in groups:
                if group:
                    end += _write_parts(fd, group)
                    if writeback is not None:
                        writeback.wrote(end)
            if patch is not None:
                data, offset = patch()
                view = memoryview(data).cast("B")
                while view:
                    n = os.pwrite(fd, view, offset)
                    view, offset = view[n:], offset + n
            if writeback is not None:
                writeback.finish()
                os.fsync(fd)
        finally:
            if writeback is not None:
                writeback.abandon()
            os.close(fd)
