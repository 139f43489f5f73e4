"""The store interface: named byte objects under ``/``-separated paths.

Every layout and single-file format reads and writes through a :class:`Store`,
so the same dataset code runs on a local disk and on an object store.  A store
offers whole-object puts (atomic: a reader sees the old object or the new one),
ranged reads through :class:`Handle`, and the few directory operations the
layouts need.  Paths are the store's own (an OS path for :class:`LocalStore`,
``bucket/key`` for S3); :meth:`Store.url` turns one back into what a user
typed, for messages.
"""

from __future__ import annotations

import abc
import contextlib
import functools
import posixpath
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

from carray.errors import CArrayError, StorageError

Parts = bytes | bytearray | memoryview | Iterable[Any]


class Handle(abc.ABC):
    """An open object: positioned reads, and in mode ``'r+'`` writes.

    ``size`` is the object's size as last seen (grown by writes past the end).
    """

    path: str
    size: int

    @abc.abstractmethod
    def pread(self, n: int, offset: int) -> bytes:
        """Up to ``n`` bytes at ``offset`` (fewer only past the end)."""

    def pread_into(self, buf: Any, offset: int) -> int:
        """Fill ``buf`` from ``offset``; returns the bytes read (fewer only past the end)."""
        view = memoryview(buf).cast("B")
        data = self.pread(len(view), offset)
        view[:len(data)] = data
        return len(data)

    def preadv_into(self, bufs: Sequence[Any], offset: int) -> int:
        """Fill the buffers ``bufs`` one after another from ``offset``; returns the bytes
        read (fewer only past the end)."""
        done = 0
        for buf in bufs:
            got = self.pread_into(buf, offset + done)
            done += got
            if got < memoryview(buf).nbytes:
                break
        return done

    def pwrite(self, data: Any, offset: int) -> None:
        """Write ``data`` at ``offset`` (mode ``'r+'`` only)."""
        raise PermissionError(f"{self.path}: opened for reading only")

    def truncate(self, size: int) -> None:
        """Cut the object to ``size`` bytes (mode ``'r+'`` only)."""
        raise PermissionError(f"{self.path}: opened for reading only")

    def sync(self) -> None:  # noqa: B027 - read handles have nothing to flush
        """Make the writes so far durable (fsync, or upload the object)."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release the handle.  Writes not yet :meth:`sync`-ed may be lost (on object
        stores they are: only ``sync`` puts the object back)."""

    def __enter__(self) -> Handle:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class BytesHandle(Handle):
    """A read-only handle on an object already fetched whole (no further requests)."""

    def __init__(self, path: str, data: bytes) -> None:
        self.path, self._data, self.size = path, data, len(data)

    def pread(self, n: int, offset: int) -> bytes:
        return self._data[offset:offset + n]

    def close(self) -> None:
        self._data = b""


class Store(abc.ABC):
    """Byte objects under paths, with atomic whole-object puts.

    Attributes
    ----------
    remote : bool
        True when every access is a network round trip: callers then fetch
        independent pieces concurrently and keep what they read.
    conditional : bool
        True when :meth:`put_if_absent` is atomic among every process that may write
        the store (of two writers racing for a name, exactly one wins): what lets
        several processes commit to one dataset (docs/spec/commit.md).
    rewrites : bool
        True when writing part of an object rewrites all of it (object stores):
        writers then never write into an object that something else may refer to.
    """

    remote: bool = False
    conditional: bool = False
    rewrites: bool = False

    # -- paths ----------------------------------------------------------------------------

    @staticmethod
    def join(*parts: str) -> str:
        return posixpath.join(*parts)

    @staticmethod
    def dirname(path: str) -> str:
        return posixpath.dirname(path.rstrip("/"))

    @staticmethod
    def basename(path: str) -> str:
        return posixpath.basename(path.rstrip("/"))

    def url(self, path: str) -> str:
        """``path`` as a user would write it (for messages and for reopening)."""
        return path

    @property
    def identity(self) -> Any:
        """Equal for stores that reach the same objects by the same paths."""
        return type(self)

    # -- objects --------------------------------------------------------------------------

    @abc.abstractmethod
    def open(self, path: str, mode: str = "r") -> Handle:
        """A handle on an existing object; ``mode`` 'r' or 'r+'.  FileNotFoundError if none."""

    def get(self, path: str) -> bytes:
        """The whole object.  FileNotFoundError if none."""
        with self.open(path) as h:
            return h.pread(h.size, 0)

    def get_many(self, paths: Sequence[str]) -> list[bytes]:
        """Whole objects, in order (fetched concurrently where that helps).
        FileNotFoundError if one is missing."""
        return [self.get(p) for p in paths]

    def get_ranges(self, requests: Sequence[tuple[str, int, int]]) -> list[bytes]:
        """``[(path, offset, length), ...]`` read in one go (concurrently where that helps)."""
        out = []
        for path, offset, length in requests:
            with self.open(path) as h:
                out.append(h.pread(length, offset))
        return out

    @abc.abstractmethod
    def put(self, path: str, data: Parts, *, fsync: bool = True) -> None:
        """Replace (or create) the object at ``path`` with ``data`` (bytes, or an iterable
        of bytes-like parts written in order), atomically."""

    def put_if_absent(self, path: str, data: Parts, *, fsync: bool = True) -> bool:
        """Create the object at ``path`` holding ``data`` unless one exists; True when this
        call created it.  Whole or nothing, like :meth:`put`; atomic against other
        writers only where :attr:`conditional` says so (here: checked, then put)."""
        if self.exists(path):
            return False
        self.put(path, data, fsync=fsync)
        return True

    def stream(self, path: str, *, fsync: bool = True) -> Any:
        """A new object at ``path`` written part by part, or None where objects are
        written whole only (then :meth:`put` them).

        What it returns has ``write(parts)``, ``commit()`` (the object appears whole,
        durable with ``fsync``) and ``abort()`` (nothing appears), as
        :class:`carray.stores.files.StreamedFile`; use it from one thread at a time.
        """
        return None

    def put_cache(self, path: str, data: bytes) -> None:
        """Replace a cache file: never half-written, possibly missing for a moment, not
        durable."""
        self.put(path, data, fsync=False)

    def overwrite(self, path: str, data: bytes) -> None:
        """Write ``data`` over the start of ``path`` (created if missing), neither atomic
        nor durable: for hints a reader checks, which a rename would make slower to
        write (some file systems flush a file renamed over another)."""
        self.put(path, data, fsync=False)

    @abc.abstractmethod
    def size(self, path: str) -> int:
        """The object's size in bytes.  FileNotFoundError if none."""

    @abc.abstractmethod
    def exists(self, path: str) -> bool:
        """True for an object or a directory (a prefix holding objects)."""

    @abc.abstractmethod
    def isfile(self, path: str) -> bool:
        """True for an object."""

    @abc.abstractmethod
    def isdir(self, path: str) -> bool:
        """True for a directory (on object stores: a prefix holding objects)."""

    @abc.abstractmethod
    def listdir(self, path: str) -> list[str]:
        """Names directly under ``path`` (empty, not an error, when there are none)."""

    @abc.abstractmethod
    def makedirs(self, path: str) -> None:
        """Make ``path`` a directory (nothing to do on object stores)."""

    @abc.abstractmethod
    def delete(self, path: str) -> None:
        """Remove one object.  FileNotFoundError if none."""

    @abc.abstractmethod
    def rmtree(self, path: str) -> None:
        """Remove a directory and everything under it, or a single object.
        FileNotFoundError if neither."""

    @abc.abstractmethod
    def rename(self, src: str, dst: str) -> None:
        """Move an object or a directory, replacing an object at ``dst``."""

    def sync_dir(self, path: str) -> None:  # noqa: B027 - object stores have no entries
        """Make the names created or removed under ``path`` durable."""

    def sync_file(self, path: str) -> None:  # noqa: B027 - puts are durable on object stores
        """Make an object written with ``put(..., fsync=False)`` durable."""

    @abc.abstractmethod
    def stamp(self, path: str) -> tuple[int, int]:
        """Something that changes whenever the object is rewritten; (-1, -1) if none."""

    def invalidate(self, path: str | None = None) -> None:  # noqa: B027 - no cache here
        """Forget anything cached about ``path`` (or about everything)."""

    def close(self) -> None:  # noqa: B027 - optional
        """Release connections and caches."""


# Failures that say something about the path, not the storage: callers rely on them.
_KEPT = (CArrayError, FileNotFoundError, FileExistsError, IsADirectoryError,
         NotADirectoryError, PermissionError)


def storage_error(exc: OSError, path: str) -> OSError:
    """What a store raises for ``exc`` met at ``path``: a :class:`StorageError` for
    failures of the storage itself (ENOSPC, EIO, ...), ``exc`` itself otherwise."""
    return exc if isinstance(exc, _KEPT) else StorageError.wrap(exc, path)


@contextlib.contextmanager
def writing_to(path: str) -> Iterator[None]:
    """Failures of the storage met inside (a full disk, an I/O error, raised as a bare
    ``OSError`` by a library that writes its own files: zarr, pyarrow, h5py...) as a
    :class:`StorageError` naming ``path``, the file being made, and keeping the errno."""
    try:
        yield
    except OSError as exc:
        if isinstance(exc, _KEPT):
            raise
        inner = f" ({exc.filename})" if exc.filename and exc.filename != path else ""
        error = StorageError(exc.errno, f"{exc.strerror or exc}{inner}", path)
        raise error from exc


def discard_partial(store: Store, path: str, settle: float = 0.1, tries: int = 30) -> bool:
    """Remove what a failed write left at ``path``, never raising; whether it is gone.

    A library writing on threads of its own (zarr) may still finish writes that were in
    flight when another failed, recreating files: removed, the path must stay absent
    for ``settle`` seconds, else it is removed again (``tries`` times at most)."""
    for _ in range(tries):
        try:
            store.invalidate(path)
            if store.exists(path):
                store.rmtree(path)
        except OSError:
            pass  # a file written meanwhile: try again
        time.sleep(settle)
        store.invalidate(path)
        if not store.exists(path):
            return True
    return False


_F = TypeVar("_F", bound=Callable[..., Any])


def typed_errors(method: _F) -> _F:
    """``method(self, path, ...)`` of a store, raising :func:`storage_error` of what fails."""

    @functools.wraps(method)
    def run(self: Any, path: str, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, path, *args, **kwargs)
        except OSError as exc:
            raise storage_error(exc, path) from None

    return run  # type: ignore[return-value]


def iter_parts(data: Parts) -> Iterable[Any]:
    """``data`` as an iterable of bytes-like parts."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        return (data,)
    return data
