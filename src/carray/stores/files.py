"""Durable file writes: write to a temporary name (:mod:`carray.stores.tempnames`), fsync,
rename into place."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from carray.stores.tempnames import temporary_name


def atomic_write(path: str | os.PathLike[str], data: bytes | bytearray | memoryview | Iterable[Any],
                 *, fsync: bool = True, finish: Callable[[int], None] | None = None,
                 gap: bool = False) -> None:
    """Replace ``path`` with ``data`` so a reader sees either the old or the new file.

    ``data`` may be one bytes-like object or an iterable of them (written in order).
    ``finish(fd)``, if given, runs after the last part and before the fsync, to patch
    bytes whose values were only known at the end (e.g. an index written up front).
    ``gap``: remove the old file before the new one takes its name, so a reader may
    find neither for a moment (caches: renaming over a file makes some file systems
    write the new one out at once, which costs more than the rest).
    """
    path = os.fspath(path)
    tmp = temporary_name(path)
    parts: Iterable[Any] = (data,) if isinstance(data, (bytes, bytearray, memoryview)) \
        else data
    try:
        # Raw descriptors: a Python file object costs more than the write for small files.
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            for part in parts:
                view = memoryview(part).cast("B")
                while view:
                    view = view[os.write(fd, view):]
            if finish is not None:
                finish(fd)
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        if gap:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


# renameat2(2): names a rename may not replace, and two names swapped in one step.
_AT_FDCWD = -100
_RENAME_NOREPLACE = 1
_RENAME_EXCHANGE = 2


def _load_renameat2() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):  # an old C library
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                   ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


_renameat2 = _load_renameat2()


def _rename2(src: str, dst: str, flags: int) -> bool:
    """``renameat2(src, dst, flags)``; False where it failed or is not available."""
    if _renameat2 is None:
        return False
    return bool(_renameat2(_AT_FDCWD, os.fsencode(src), _AT_FDCWD, os.fsencode(dst), flags) == 0)


def rename_noreplace(src: str, dst: str) -> bool:
    """Rename ``src`` to ``dst`` unless something is at ``dst``; False where that failed
    (``dst`` exists) or the system cannot tell (not Linux, a file system without it)."""
    return _rename2(src, dst, _RENAME_NOREPLACE)


def exchange(src: str, dst: str) -> bool:
    """Swap the names ``src`` and ``dst`` (files or directories) in one step; False where
    that is not possible."""
    return _rename2(src, dst, _RENAME_EXCHANGE)


def atomic_create(path: str | os.PathLike[str], data: bytes | bytearray | memoryview
                  | Iterable[Any], *, fsync: bool = True) -> bool:
    """Create ``path`` holding ``data`` unless it exists; True when this call created it.

    The data goes to a temporary name first and is linked to ``path`` in one step, so
    a reader sees the whole file or none, and of two writers racing for one name
    exactly one wins (``link`` fails when the name exists, as ``O_EXCL`` does).
    """
    path = os.fspath(path)
    tmp = temporary_name(path)
    parts: Iterable[Any] = (data,) if isinstance(data, (bytes, bytearray, memoryview)) \
        else data
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            for part in parts:
                view = memoryview(part).cast("B")
                while view:
                    view = view[os.write(fd, view):]
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        except OSError as exc:
            if exc.errno not in _NO_LINKS:
                raise
            return _create_exclusive(path, tmp, fsync)
        return True
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


# A file system without hard links (FAT, some network and FUSE mounts) says so thus.
_NO_LINKS = {errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS, errno.EMLINK}


def _create_exclusive(path: str, tmp: str, fsync: bool) -> bool:
    """:func:`atomic_create` without ``link``: ``O_EXCL`` decides the race, then the
    bytes are copied in (a reader may see the file before it is whole: what carray
    publishes this way carries a checksum, so a partial file reads as damaged, and
    its writer finishes it before returning)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return False
    try:
        with open(tmp, "rb") as src:
            while block := src.read(1 << 20):
                pwrite_all(fd, block, os.lseek(fd, 0, os.SEEK_END))
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)
    return True


def fsync_path(path: str | os.PathLike[str]) -> None:
    """Flush a file (or a directory entry list) that was written earlier to stable storage."""
    flags = os.O_RDONLY
    if os.path.isdir(path):
        flags |= getattr(os, "O_DIRECTORY", 0)
    fd = os.open(path, flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def pread_full(fd: int, n: int, offset: int) -> bytes:
    """Up to ``n`` bytes at ``offset``, retrying short reads (short only at end of file)."""
    data = os.pread(fd, n, offset)
    while len(data) < n:
        more = os.pread(fd, n - len(data), offset + len(data))
        if not more:
            break
        data += more
    return data


def pread_into(fd: int, buf: Any, offset: int) -> int:
    """Fill ``buf`` from ``offset``, retrying short reads; returns the bytes read
    (fewer only at end of file)."""
    view = memoryview(buf).cast("B")
    done = 0
    while done < len(view):
        n = os.preadv(fd, [view[done:]], offset + done)
        if n <= 0:
            break
        done += n
    return done


def preadv_into(fd: int, bufs: Sequence[Any], offset: int) -> int:
    """Fill the buffers ``bufs`` one after another from ``offset`` with one scatter read
    (short reads retried); returns the bytes read (fewer only at end of file)."""
    views = [memoryview(b).cast("B") for b in bufs]
    done = os.preadv(fd, views, offset)
    pos = 0
    for view in views:
        end = pos + len(view)
        if done < end:  # a short read: the rest of this buffer on its own
            done += pread_into(fd, view[done - pos:], offset + done)
            if done < end:
                return done  # the end of the file
        pos = end
    return done


def pwrite_all(fd: int, data: Any, offset: int) -> None:
    """Write all of ``data`` at ``offset``, retrying short writes."""
    view = memoryview(data).cast("B")
    while view:
        n = os.pwrite(fd, view, offset)
        view, offset = view[n:], offset + n


# sync_file_range(2): SYNC_FILE_RANGE_WRITE starts writing the range out and returns.
_SYNC_FILE_RANGE_WRITE = 2


def _load_sync_file_range() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        fn = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError):  # pragma: no cover - every Linux libc has it
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


_sync_file_range = _load_sync_file_range()


def data_sync(fd: int) -> None:
    """Make the bytes written to ``fd`` (and its size) durable: ``fdatasync`` where
    the OS has it (it skips the timestamps ``fsync`` also writes), else ``fsync``."""
    sync = getattr(os, "fdatasync", None)
    (sync or os.fsync)(fd)


def start_writeback(fd: int, offset: int, nbytes: int) -> None:
    """Have the OS start writing ``nbytes`` of ``fd`` from ``offset`` to the device, so
    a later :func:`data_sync` finds little left to write.  Linux starts it without
    waiting (``sync_file_range``); elsewhere the bytes are synced now (callers run this
    off the caller's thread).  Raises ``OSError`` where the file system refuses; only
    a hint on Linux otherwise: what fails to reach the disk shows at the sync."""
    if _sync_file_range is not None:
        if _sync_file_range(fd, offset, nbytes, _SYNC_FILE_RANGE_WRITE) != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))
        return
    data_sync(fd)  # pragma: no cover - not Linux


class StreamedFile:
    """A new file written part by part (from one thread at a time) under a temporary
    name and renamed into place once whole, so a reader finds the whole file or none.

    With ``fsync``, every part written is sent on towards the device at once
    (:func:`start_writeback`) and :meth:`commit` syncs what is left before the rename.
    Errors are ``OSError``; :meth:`abort` removes the temporary file.
    """

    def __init__(self, path: str, fsync: bool = True) -> None:
        self.path = path
        self._tmp = temporary_name(path)
        self._fsync = fsync
        self._fd = -1
        self._pos = 0

    def write(self, parts: Iterable[Any]) -> None:
        """Append ``parts`` (bytes-like) to the file."""
        if self._fd < 0:
            self._fd = os.open(self._tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        start = self._pos
        for part in parts:
            view = memoryview(part).cast("B")
            while view:
                n = os.write(self._fd, view)
                view, self._pos = view[n:], self._pos + n
        if self._fsync and self._pos > start:
            with contextlib.suppress(OSError):  # a hint: the sync at the commit decides
                start_writeback(self._fd, start, self._pos - start)

    def commit(self) -> None:
        """Sync what is left (with ``fsync``) and give the file its name."""
        if self._fd < 0:
            self.write(())
        try:
            if self._fsync:
                data_sync(self._fd)
        finally:
            fd, self._fd = self._fd, -1
            os.close(fd)
        os.replace(self._tmp, self.path)

    def abort(self) -> None:
        """Close and remove the temporary file (never raises)."""
        fd, self._fd = self._fd, -1
        with contextlib.suppress(OSError):
            if fd >= 0:
                os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(self._tmp)
