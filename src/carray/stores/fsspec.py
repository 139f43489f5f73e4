"""Any fsspec file system (``s3://``, ``gs://``, ``memory://``, ...) as a store.

Reads are byte ranges (``cat_file`` with start and end), so a chunk -- or a
few blocks of one -- is fetched without the rest of its object; recently read
ranges are kept in a small cache.  Object stores cannot change part of an
object, so a handle opened for writing loads the object on its first write and
puts it back whole on ``sync``; every put is one request, which object stores
apply atomically (on a local file system: a temporary file, then a rename).
"""

from __future__ import annotations

import errno
import threading
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from carray.stores.base import Handle, Parts, Store, iter_parts, typed_errors
from carray.stores.files import atomic_create
from carray.stores.tempnames import temporary_name

#: Bytes of recently read ranges kept per store, and the largest range kept.
CACHE_BYTES = 32 * 2**20
CACHE_ITEM = 4 * 2**20
#: Concurrent requests when fetching many independent ranges.
FETCH_THREADS = 16


class RangeCache:
    """Recently read ``(path, offset) -> bytes``, least recently used dropped first."""

    def __init__(self, budget: int = CACHE_BYTES) -> None:
        self.budget = budget
        self._items: OrderedDict[tuple[str, int], bytes] = OrderedDict()
        self._by_path: dict[str, set[int]] = {}
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, path: str, offset: int, n: int) -> bytes | None:
        with self._lock:
            data = self._items.get((path, offset))
            if data is not None and n <= len(data):  # the usual case: the same read again
                self._items.move_to_end((path, offset))
                return data[:n]
            for start in self._by_path.get(path, ()):
                data = self._items[(path, start)]
                if start <= offset and offset + n <= start + len(data):
                    self._items.move_to_end((path, start))
                    return data[offset - start:offset - start + n]
        return None

    def add(self, path: str, offset: int, data: bytes) -> None:
        if len(data) > CACHE_ITEM or len(data) > self.budget:
            return
        with self._lock:
            old = self._items.pop((path, offset), None)
            if old is not None:
                self._bytes -= len(old)
            self._items[(path, offset)] = data
            self._by_path.setdefault(path, set()).add(offset)
            self._bytes += len(data)
            while self._bytes > self.budget:
                (p, o), d = self._items.popitem(last=False)
                self._bytes -= len(d)
                self._drop_key(p, o)

    def _drop_key(self, path: str, offset: int) -> None:
        starts = self._by_path.get(path)
        if starts is not None:
            starts.discard(offset)
            if not starts:
                del self._by_path[path]

    def forget(self, path: str | None = None) -> None:
        with self._lock:
            if path is None:
                self._items.clear()
                self._by_path.clear()
                self._bytes = 0
                return
            prefix = path.rstrip("/") + "/"
            for p in [p for p in self._by_path if p == path or p.startswith(prefix)]:
                for o in self._by_path.pop(p):
                    self._bytes -= len(self._items.pop((p, o)))


class FsspecHandle(Handle):
    """An object read by ranges; written objects are held whole and put back on sync."""

    def __init__(self, store: FsspecStore, path: str, mode: str) -> None:
        if mode not in ("r", "r+"):
            raise ValueError(f"mode must be 'r' or 'r+', got {mode!r}")
        self.store = store
        self.path = path
        self.writable = mode == "r+"
        self.size = store.size(path)
        self._buf: bytearray | None = None  # the whole object, once written to
        self._dirty = False

    def pread(self, n: int, offset: int) -> bytes:
        buf = self._buf  # once: another thread may close this handle meanwhile
        if buf is not None:
            return bytes(buf[offset:offset + n])
        n = max(0, min(n, self.size - offset))
        if n == 0:
            return b""
        return self.store.read_range(self.path, offset, n)

    def _load(self) -> bytearray:
        if self._buf is None:
            self._buf = bytearray(self.store.read_range(self.path, 0, self.size)
                                  if self.size else b"")
        return self._buf

    def pwrite(self, data: Any, offset: int) -> None:
        if not self.writable:
            super().pwrite(data, offset)
        buf = self._load()
        data = memoryview(data).cast("B")
        if offset > len(buf):
            buf.extend(bytes(offset - len(buf)))
        buf[offset:offset + len(data)] = data
        self.size = len(buf)
        self._dirty = True

    def truncate(self, size: int) -> None:
        if not self.writable:
            super().truncate(size)
        buf = self._load()
        if size < len(buf):
            del buf[size:]
        else:
            buf.extend(bytes(size - len(buf)))
        self.size = size
        self._dirty = True

    def sync(self) -> None:
        if self._dirty and self._buf is not None:
            self.store.put(self.path, bytes(self._buf))
            self._dirty = False

    def close(self) -> None:
        # No upload here: close may run in a finalizer, on any thread (even the one
        # serving the requests), and writes that matter were synced by their commit.
        self._buf = None


class FsspecStore(Store):
    """Objects in an fsspec file system ``fs``; paths are the file system's own."""

    remote = True

    def __init__(self, fs: Any, cache_bytes: int = CACHE_BYTES) -> None:
        self.fs = fs
        self.cache = RangeCache(cache_bytes)
        protocols = set(_protocols(fs))
        # Local file systems write files in place and rename directories whole.
        self._in_place = bool({"file", "local"} & protocols)
        self.conditional = bool((_EXCLUSIVE | {"file", "local", "memory"}) & protocols)
        self.rewrites = not self._in_place

    def __getstate__(self) -> dict[str, Any]:
        return {"fs": self.fs, "cache_bytes": self.cache.budget}

    def __setstate__(self, state: dict[str, Any]) -> None:
        FsspecStore.__init__(self, state["fs"], state["cache_bytes"])

    def url(self, path: str) -> str:
        return str(self.fs.unstrip_protocol(path))

    @property
    def identity(self) -> Any:
        return (type(self), id(self.fs))  # fsspec shares one instance per options

    def _missing(self, path: str) -> FileNotFoundError:
        return FileNotFoundError(errno.ENOENT, "no such object", self.url(path))

    # -- reads ----------------------------------------------------------------------------

    @typed_errors
    def read_range(self, path: str, offset: int, n: int) -> bytes:
        """``n`` bytes at ``offset`` (the caller clamps to the object's size)."""
        if n <= 0:
            return b""  # object stores refuse empty ranges
        data = self.cache.get(path, offset, n)
        if data is None:
            data = self.fs.cat_file(path, start=offset, end=offset + n)
            self.cache.add(path, offset, data)
        return data

    def open(self, path: str, mode: str = "r") -> FsspecHandle:
        # The object's size as it is now: a listing cached by the file system may predate
        # another process's put of it.
        self.fs.invalidate_cache(path)
        return FsspecHandle(self, path, mode)

    @typed_errors
    def get(self, path: str) -> bytes:
        try:
            return bytes(self.fs.cat_file(path))
        except FileNotFoundError:
            raise self._missing(path) from None

    def get_many(self, paths: Sequence[str]) -> list[bytes]:
        if len(paths) <= 1:
            return [self.get(p) for p in paths]
        with ThreadPoolExecutor(min(FETCH_THREADS, len(paths))) as pool:
            return list(pool.map(self.get, paths))

    def get_ranges(self, requests: Sequence[tuple[str, int, int]]) -> list[bytes]:
        if len(requests) <= 1:
            return [self.read_range(*r) for r in requests]
        with ThreadPoolExecutor(min(FETCH_THREADS, len(requests))) as pool:
            return list(pool.map(lambda r: self.read_range(*r), requests))

    @typed_errors
    def size(self, path: str) -> int:
        try:
            info = self.fs.info(path)
        except FileNotFoundError:
            raise self._missing(path) from None
        if info.get("type") == "directory":
            raise IsADirectoryError(f"{self.url(path)}: is a directory")
        return int(info["size"])

    def exists(self, path: str) -> bool:
        return bool(self.fs.exists(path))

    def isfile(self, path: str) -> bool:
        return bool(self.fs.isfile(path))

    def isdir(self, path: str) -> bool:
        return bool(self.fs.isdir(path))

    def listdir(self, path: str) -> list[str]:
        try:
            entries = self.fs.ls(path, detail=False)
        except (FileNotFoundError, NotADirectoryError):
            return []
        base = path.rstrip("/")
        return sorted({e.rstrip("/").rsplit("/", 1)[-1] for e in entries
                       if e.rstrip("/") != base})

    def stamp(self, path: str) -> tuple[int, int]:
        # A listing cached by the file system would hide a rewrite by another writer.
        self.fs.invalidate_cache(path)
        try:
            info = self.fs.info(path)
        except FileNotFoundError:
            return (-1, -1)
        mark = tuple(str(info.get(k))
                     for k in ("ETag", "LastModified", "mtime", "created", "ino"))
        return (int(info.get("size", 0)), hash(mark) & 0x7FFFFFFFFFFFFFFF)

    # -- writes ---------------------------------------------------------------------------

    @typed_errors
    def put(self, path: str, data: Parts, *, fsync: bool = True) -> None:
        blob = data if isinstance(data, bytes) else \
            b"".join(memoryview(p).cast("B") for p in iter_parts(data))
        self.cache.forget(path)
        if not self._in_place:
            self.fs.pipe_file(path, blob)  # one request: object stores apply it whole
            return
        # A file system writing in place would show readers a half-written file.
        tmp = temporary_name(path)
        try:
            self.fs.pipe_file(tmp, blob)
            self.fs.mv(tmp, path)
        except BaseException:
            if self.fs.exists(tmp):
                self.fs.rm_file(tmp)
            raise

    @typed_errors
    def put_if_absent(self, path: str, data: Parts, *, fsync: bool = True) -> bool:
        blob = data if isinstance(data, bytes) else \
            b"".join(memoryview(p).cast("B") for p in iter_parts(data))
        self.cache.forget(path)
        if self._in_place:
            return atomic_create(self.fs._strip_protocol(path), blob, fsync=fsync)
        if not self.conditional:
            return super().put_if_absent(path, blob, fsync=fsync)
        try:
            if "memory" in _protocols(self.fs):
                with _MEMORY_CREATE:  # one process: its threads race through one lock
                    self.fs.pipe_file(path, blob, mode="create")
            else:
                self.fs.pipe_file(path, blob, mode="create")
        except FileExistsError:
            return False
        finally:
            self.fs.invalidate_cache(path)
        return True

    def makedirs(self, path: str) -> None:
        # Object stores have no directories: a prefix exists while objects sit under it.
        if _OBJECT_STORES & set(_protocols(self.fs)):
            return
        self.fs.makedirs(path, exist_ok=True)

    @typed_errors
    def delete(self, path: str) -> None:
        self.cache.forget(path)
        if not self.fs.isfile(path):
            raise self._missing(path)
        self.fs.rm_file(path)

    @typed_errors
    def rmtree(self, path: str) -> None:
        self.cache.forget(path)
        if self.fs.isdir(path):
            self.fs.rm(path, recursive=True)
        elif self.fs.exists(path):
            self.fs.rm_file(path)
        else:
            raise self._missing(path)
        self.fs.invalidate_cache(path)

    @typed_errors
    def rename(self, src: str, dst: str) -> None:
        self.cache.forget(src)
        self.cache.forget(dst)
        if not self.fs.isdir(src):
            self.fs.mv(src, dst)
        else:
            if self.fs.exists(dst):
                self.fs.rm(dst, recursive=True)
            if self._in_place:
                self.fs.mv(src, dst, recursive=True)  # a real directory: one rename
            else:
                # Object stores copy object by object; fsspec's recursive move also tries
                # to copy the prefixes themselves, which are no objects.
                base = src.rstrip("/")
                files = self.fs.find(base)
                if files:
                    self.fs.copy(files, [dst.rstrip("/") + f[len(base):] for f in files])
                self.fs.rm(src, recursive=True)
        self.fs.invalidate_cache(src)
        self.fs.invalidate_cache(dst)

    def invalidate(self, path: str | None = None) -> None:
        self.cache.forget(path)
        self.fs.invalidate_cache(path)

    def close(self) -> None:
        self.cache.forget()


#: Protocols of object stores, where directories are only prefixes of object names.
_OBJECT_STORES = {"s3", "s3a", "gs", "gcs", "abfs", "az", "adl", "oss"}
#: Object stores whose fsspec drivers create an object only if absent, atomically
#: (``pipe_file(mode="create")``: S3 ``If-None-Match: *``, GCS ``ifGenerationMatch=0``,
#: Azure ``If-None-Match: *``).
_EXCLUSIVE = {"s3", "s3a", "gs", "gcs", "abfs", "az"}
_MEMORY_CREATE = threading.Lock()


def _protocols(fs: Any) -> tuple[str, ...]:
    proto = fs.protocol
    return (proto,) if isinstance(proto, str) else tuple(proto)
