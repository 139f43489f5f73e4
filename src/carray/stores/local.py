"""The local file system: OS paths, positioned reads, atomic renames, fsync."""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from typing import Any

from carray.stores.base import Handle, Parts, Store, storage_error, typed_errors
from carray.stores.files import (
    StreamedFile,
    atomic_create,
    atomic_write,
    fsync_path,
    pread_full,
    pread_into,
    preadv_into,
    pwrite_all,
)

_O_BINARY = getattr(os, "O_BINARY", 0)
_typed = typed_errors

class LocalHandle(Handle):
    """A file descriptor: reads and writes go straight to ``pread``/``pwrite``.

    Failures of the storage raise :class:`carray.errors.StorageError`.
    """

    def __init__(self, path: str, mode: str) -> None:
        if mode not in ("r", "r+"):
            raise ValueError(f"mode must be 'r' or 'r+', got {mode!r}")
        self.path = path
        self.writable = mode == "r+"
        self.fd = -1
        try:
            self.fd = os.open(path, (os.O_RDWR if self.writable else os.O_RDONLY) | _O_BINARY)
            self.size = os.fstat(self.fd).st_size
        except OSError as exc:
            raise storage_error(exc, path) from None
        self._dirty = False

    def pread(self, n: int, offset: int) -> bytes:
        try:
            return pread_full(self.fd, n, offset)
        except OSError as exc:
            raise storage_error(exc, self.path) from None

    def pread_into(self, buf: Any, offset: int) -> int:
        try:
            return pread_into(self.fd, buf, offset)
        except OSError as exc:
            raise storage_error(exc, self.path) from None

    def preadv_into(self, bufs: Sequence[Any], offset: int) -> int:
        try:  # one system call for them all
            return preadv_into(self.fd, bufs, offset)
        except OSError as exc:
            raise storage_error(exc, self.path) from None

    def pwrite(self, data: Any, offset: int) -> None:
        if not self.writable:
            super().pwrite(data, offset)
        self._dirty = True
        try:
            pwrite_all(self.fd, data, offset)
        except OSError as exc:
            raise storage_error(exc, self.path) from None
        self.size = max(self.size, offset + memoryview(data).nbytes)

    def truncate(self, size: int) -> None:
        if not self.writable:
            super().truncate(size)
        self._dirty = True
        try:
            os.ftruncate(self.fd, size)
        except OSError as exc:
            raise storage_error(exc, self.path) from None
        self.size = size

    def sync(self) -> None:
        if self._dirty:
            try:
                os.fsync(self.fd)
            except OSError as exc:
                raise storage_error(exc, self.path) from None
            self._dirty = False

    def close(self) -> None:
        if self.fd >= 0:
            fd, self.fd = self.fd, -1
            os.close(fd)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - never raise from a finalizer
            pass


class LocalStream(StreamedFile):
    """A :class:`StreamedFile` whose failures raise :class:`carray.errors.StorageError`."""

    def write(self, parts: Any) -> None:
        try:
            super().write(parts)
        except OSError as exc:
            raise storage_error(exc, self.path) from None

    def commit(self) -> None:
        try:
            super().commit()
        except OSError as exc:
            raise storage_error(exc, self.path) from None


class LocalStore(Store):
    """Files and directories on this machine; paths are OS paths.

    Failures of the storage (ENOSPC, EIO, ...) raise :class:`carray.errors.StorageError`;
    a missing file stays ``FileNotFoundError``.
    """

    remote = False
    conditional = True

    join = staticmethod(os.path.join)  # type: ignore[assignment]
    dirname = staticmethod(lambda p: os.path.dirname(os.path.abspath(p)))  # type: ignore
    basename = staticmethod(lambda p: os.path.basename(os.path.normpath(p)))  # type: ignore

    def open(self, path: str, mode: str = "r") -> LocalHandle:
        return LocalHandle(path, mode)

    @_typed
    def get(self, path: str) -> bytes:
        with open(path, "rb") as f:
            return f.read()

    @_typed
    def put(self, path: str, data: Parts, *, fsync: bool = True) -> None:
        atomic_write(path, data, fsync=fsync)

    @_typed
    def put_if_absent(self, path: str, data: Parts, *, fsync: bool = True) -> bool:
        return atomic_create(path, data, fsync=fsync)

    def stream(self, path: str, *, fsync: bool = True) -> LocalStream:
        return LocalStream(path, fsync)

    @_typed
    def put_cache(self, path: str, data: bytes) -> None:
        atomic_write(path, data, fsync=False, gap=True)

    @_typed
    def overwrite(self, path: str, data: bytes) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            os.pwrite(fd, data, 0)
        finally:
            os.close(fd)

    @_typed
    def size(self, path: str) -> int:
        return os.stat(path).st_size

    def exists(self, path: str) -> bool:
        return os.path.lexists(path)

    def isfile(self, path: str) -> bool:
        return os.path.isfile(path)

    def isdir(self, path: str) -> bool:
        return os.path.isdir(path)

    def listdir(self, path: str) -> list[str]:
        try:
            return os.listdir(path)
        except (FileNotFoundError, NotADirectoryError):
            return []

    @_typed
    def makedirs(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)

    @_typed
    def delete(self, path: str) -> None:
        os.unlink(path)

    @_typed
    def rmtree(self, path: str) -> None:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)

    @_typed
    def rename(self, src: str, dst: str) -> None:
        os.replace(src, dst)

    @_typed
    def sync_dir(self, path: str) -> None:
        fsync_path(path)

    @_typed
    def sync_file(self, path: str) -> None:
        fsync_path(path)

    def stamp(self, path: str) -> tuple[int, int]:
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return (-1, -1)
        # Size plus a mix of inode and modification time: a rewrite by any writer changes
        # it, a rename into place (which only touches ctime) does not.
        return (st.st_size, hash((st.st_ino, st.st_mtime_ns)) & 0x7FFFFFFFFFFFFFFF)

    def __reduce__(self) -> tuple[type[LocalStore], tuple[()]]:
        return (LocalStore, ())


#: The one local store everybody shares (it holds no state).
LOCAL = LocalStore()
