"""The interface every layout implements, and the metadata an array persists."""

from __future__ import annotations

import abc
import contextlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from carray.errors import ContainerExistsError, ReadOnlyError
from carray.grid import NDGrid
from carray.params import CParams
from carray.shapes import row_chunk_tail
from carray.stores import LOCAL, Store


@dataclass(frozen=True)
class ArrayMeta:
    """What an array needs to know to read its chunks back.

    Parameters
    ----------
    dtype : numpy.dtype
        The item type.
    shape : tuple of int
        The array's shape; the first axis is the one ``append`` grows.
    chunks : tuple of int
        The chunk shape (see :class:`carray.grid.NDGrid`).
    blocks : tuple of int or None
        The block shape: each chunk is stored as its blocks one after another,
        each block one Blosc block.  None stores a chunk in plain C order and
        lets the codec choose its block size (bcolz's way).
    cparams, dflt, expectedlen
        Compression parameters, the value new items get on growth, and the
        expected length along the first axis.
    """

    dtype: np.dtype
    shape: tuple[int, ...]
    chunks: tuple[int, ...]
    blocks: tuple[int, ...] | None = None
    cparams: CParams = field(default_factory=CParams)
    dflt: Any = None
    expectedlen: int = 0

    @classmethod
    def rows(cls, dtype: np.dtype, atomshape: tuple[int, ...], length: int, chunklen: int,
             **kwargs: Any) -> ArrayMeta:
        """An array chunked by runs of ``chunklen`` whole rows (bcolz's layout)."""
        atomshape = tuple(atomshape)
        return cls(dtype=dtype, shape=(length, *atomshape),
                   chunks=(chunklen, *row_chunk_tail(atomshape)), **kwargs)

    @property
    def length(self) -> int:
        return self.shape[0]

    @property
    def atomshape(self) -> tuple[int, ...]:
        return self.shape[1:]

    @property
    def chunklen(self) -> int:
        return self.chunks[0]

    @property
    def rowsize(self) -> int:
        """Bytes per row."""
        return self.dtype.itemsize * int(np.prod(self.atomshape, dtype=np.int64))

    @property
    def row_chunked(self) -> bool:
        """Whether every chunk is a run of whole rows in C order (bcolz-compatible)."""
        return self.blocks is None and self.chunks[1:] == row_chunk_tail(self.atomshape)

    @property
    def grid(self) -> NDGrid:
        return NDGrid(self.shape, self.chunks, self.blocks or self.chunks,
                      max(self.dtype.itemsize, 1))

    @property
    def nchunks(self) -> int:
        return self.grid.nchunks

    @property
    def chunk_nbytes(self) -> int:
        """Decoded bytes of one full stored chunk."""
        return self.grid.chunk_nbytes

    def replace(self, **changes: Any) -> ArrayMeta:
        return replace(self, **changes)


class ChunkReader:
    """Ranged reads of one stored chunk of ``size`` bytes: ``reader(offset, length)``.

    ``read(offset, length)`` returns the bytes (fewer only past the end);
    ``read_into(offset, out)`` fills a writable buffer instead, which layouts
    reading files do without an intermediate copy.
    """

    def __init__(self, size: int, read: Callable[[int, int], bytes],
                 read_into: Callable[[int, Any], int] | None = None,
                 memo: dict | None = None) -> None:
        self.size = size
        self.read = read
        if read_into is not None:
            self.read_into = read_into
        #: Where a decoder may keep what it parsed from this chunk (header, block
        #: table) for the next read of the same chunk; None when not kept.
        self.memo = memo

    def __call__(self, offset: int, length: int) -> bytes:
        return self.read(offset, length)

    def read_into(self, offset: int, out) -> int:
        data = self.read(offset, len(out))
        memoryview(out).cast("B")[:len(data)] = data
        return len(data)


class Layout(abc.ABC):
    """Compressed chunks, numbered from 0, plus metadata and user attributes.

    Chunks are opaque Blosc buffers to a layout.  ``blosc1`` says whether the
    chunks it stores must be Blosc1 (so older readers can decode them).
    """

    #: True when chunks must be Blosc1 (format version 2) for other readers.
    blosc1: bool = False
    #: True when the layout keeps chunks in this process only.
    in_memory: bool = True
    #: True when ``read_chunk`` may be called from several threads at once.
    concurrent_reads: bool = False
    #: True when every chunk must be stored at its full (padded) size, as Blosc2
    #: frames require; otherwise the last chunk of a row-chunked array holds
    #: only its rows.
    pads_edges: bool = False
    #: True when the layout can store only row-chunked arrays (bcolz 1.x).
    rows_only: bool = False
    #: Where the bytes live (layouts in memory keep the local store as a placeholder).
    store: Store = LOCAL
    #: Chunks per file a worker can write on its own with :meth:`write_unit`
    #: (0: the layout keeps a shared index, so it cannot be written in parallel).
    unit_chunks: int = 0

    def __init__(self, readonly: bool = False) -> None:
        self.readonly = readonly

    @property
    def remote(self) -> bool:
        """True when every read is a network round trip (fetch chunks concurrently)."""
        return not self.in_memory and self.store.remote

    @abc.abstractmethod
    def read_chunk(self, nchunk: int):
        """The whole compressed chunk ``nchunk`` as a bytes-like object."""

    def read_chunk_into(self, nchunk: int, scratch: Callable[[int], np.ndarray]):
        """Chunk ``nchunk``, possibly placed in ``scratch(nbytes)`` (a reusable buffer).

        The result is only valid until ``scratch`` is called again; callers decode
        it at once.  Layouts that read files override this to skip an allocation.
        """
        return self.read_chunk(nchunk)

    def prefetched(self, nchunks: Sequence[int]) -> contextlib.AbstractContextManager:
        """A context within which reads of chunks ``nchunks`` may be served from fewer,
        larger fetches (layouts on object stores override it)."""
        return contextlib.nullcontext()

    def chunk_reader(self, nchunk: int) -> tuple[Callable[[int, int], bytes], int]:
        """Ranged access to chunk ``nchunk``: ``(read_at(offset, length), size)``.

        Partial reads go through this so only the bytes they need are fetched.
        """
        chunk = self.read_chunk(nchunk)
        return ChunkReader(len(chunk), lambda o, n: bytes(chunk[o:o + n])), len(chunk)

    @abc.abstractmethod
    def write_chunk(self, nchunk: int, data: bytes) -> int:
        """Store chunk ``nchunk`` (replacing any); returns the change in stored bytes."""

    @abc.abstractmethod
    def drop_chunks(self, first: int) -> int:
        """Forget chunks numbered ``first`` and above; returns the change in stored bytes."""

    def commit(self, meta: ArrayMeta, cbytes: int) -> None:  # noqa: B027 - optional
        """Make everything written so far durable, recording ``meta`` last."""

    def write_unit(self, unit: int, chunks: Sequence[bytes]) -> int:
        """Write the file holding chunks ``[unit*U, unit*U + len(chunks))`` (U =
        :attr:`unit_chunks`), whole and atomically, touching no other file.

        Parallel writers (one per unit, in any process) call this; the metadata
        is recorded once they are all done, with :meth:`adopt`.  Returns the
        stored bytes of the chunks.
        """
        raise NotImplementedError(f"{self.describe()} cannot be written in parallel")

    def adopt(self, meta: ArrayMeta, cbytes: int) -> None:
        """Record ``meta`` and ``cbytes`` as the committed state after :meth:`write_unit`
        calls (by this or other processes) have written every chunk it holds."""
        raise NotImplementedError(f"{self.describe()} cannot be written in parallel")

    def load_attrs(self) -> dict:
        return {}

    def save_attrs(self, attrs: dict) -> None:  # noqa: B027 - optional
        """Persist user attributes (no-op in memory)."""

    def chunk_path(self, nchunk: int) -> str | None:
        """The file holding chunk ``nchunk``, for error messages (None in memory)."""
        return None

    def chunk_stamp(self, nchunk: int) -> tuple[int, int] | None:
        """Something that changes whenever chunk ``nchunk`` is rewritten (None in memory)."""
        return None

    def zonemap_segments(self) -> list[int]:
        """Numbers of the persisted zone-map segments (see :mod:`carray.zonemap`)."""
        return []

    def load_zonemap(self, segment: int) -> bytes | None:
        """One persisted segment of chunk summaries, if any."""
        return None

    def save_zonemap(self, segment: int, data: bytes | None) -> None:  # noqa: B027
        """Persist (or, with None, delete) one segment of chunk summaries."""

    def close(self) -> None:  # noqa: B027 - optional
        """Release file handles and caches."""

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - never raise from a finalizer
            pass

    def describe(self) -> str:
        return "memory"


def clear_for_create(store: Store, path: str, mode: str) -> None:
    """Make room for a new dataset at ``path``: refuse an existing one unless ``mode``
    is 'w', which removes it (a directory, a file or a link)."""
    if not store.exists(path):
        return
    if mode != "w":
        raise ContainerExistsError(
            f"{store.url(path)}: already exists; open it, or pass mode='w' to replace it")
    store.rmtree(path)


class ZonemapFiles:
    """Zone-map segments as ``<metadir>/zonemap_NNNNNN.npy`` files.

    Not fsynced: the summaries are a cache, checked against each chunk's stamp
    when used, so a lost or stale segment only costs a re-read.
    """

    _zonemap_dir: str
    readonly: bool
    store: Store

    def _zonemap_path(self, segment: int) -> str:
        return self.store.join(self._zonemap_dir, f"zonemap_{segment:06d}.npy")

    def zonemap_segments(self) -> list[int]:
        names = self.store.listdir(self._zonemap_dir)
        found = (re.fullmatch(r"zonemap_(\d{6})\.npy", n) for n in names)
        return sorted(int(m.group(1)) for m in found if m)

    def load_zonemap(self, segment: int) -> bytes | None:
        try:
            return self.store.get(self._zonemap_path(segment))
        except FileNotFoundError:
            return None

    def save_zonemap(self, segment: int, data: bytes | None) -> None:
        if self.readonly:
            raise ReadOnlyError("zone maps cannot change: opened read-only")
        path = self._zonemap_path(segment)
        if data is None:
            with contextlib.suppress(FileNotFoundError):
                self.store.delete(path)
        else:
            self.store.put(path, data, fsync=False)
