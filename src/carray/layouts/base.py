"""The interface every layout implements, and the metadata an array persists."""

from __future__ import annotations

import abc
import contextlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from carray.chunks.grid import NDGrid
from carray.chunks.io import ChunkReader as ChunkReader  # re-exported: layouts build them
from carray.chunks.shapes import row_chunk_tail
from carray.codecs import parallel as _parallel
from carray.codecs.blosc import ChunkBytes
from carray.core.params import CParams
from carray.errors import (
    CArrayError,
    ContainerExistsError,
    ReadOnlyError,
    VersionsUnsupportedError,
)
from carray.stores import LOCAL, Store, staging
from carray.stores.lock import WriteLock
from carray.stores.tempnames import temporary_name

# Sidecar files are named by their kind and a number (``zonemap_000003.npy``).
_SIDECAR_NAME = re.compile(r"[a-z][a-z0-9]*_\d{6}\.npy")


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
        The chunk shape (see :class:`carray.chunks.grid.NDGrid`).
    blocks : tuple of int or None
        The block shape: each chunk is stored as its blocks one after another,
        each block one Blosc block.  None stores a chunk in plain C order and
        lets the codec choose its block size (bcolz's way).
    cparams, dflt, expectedlen
        Compression parameters, the value new items get on growth, and the
        expected length along the first axis.
    order : {'C', 'F'}
        'F': the stored array is the transpose of the array the user sees (its
        axes reversed), so every chunk holds its items in Fortran order.
    """

    dtype: np.dtype
    shape: tuple[int, ...]
    chunks: tuple[int, ...]
    blocks: tuple[int, ...] | None = None
    cparams: CParams = field(default_factory=CParams)
    dflt: Any = None
    expectedlen: int = 0
    order: str = "C"

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

    #: The writer's lock (see :mod:`carray.stores.lock`), held until :meth:`close`.
    write_lock: WriteLock | None = None
    #: True when a later writable open of this process takes writing over from a handle
    #: of this layout instead of being refused (bcolz directories, as bcolz allows).
    hands_over: bool = False
    #: True when :meth:`savepoint` / :meth:`rollback` undo chunk writes themselves (the
    #: engine then keeps no copies of the chunks an operation replaces).
    savepoints: bool = False

    def __init__(self, readonly: bool = False) -> None:
        self.readonly = readonly

    def hold_lock(self, lock: WriteLock | None) -> None:
        """Keep ``lock`` until :meth:`close` (a writable open took it), besides any held."""
        if lock is None:
            return
        if self.write_lock is not None and self.write_lock is not lock:
            self._more_locks = [*getattr(self, "_more_locks", []), self.write_lock]
        self.write_lock = lock

    def remove_leftovers(self) -> None:  # noqa: B027 - layouts without staged files
        """Delete staged or temporary files of writes that no commit refers to; called
        by a writable open that holds the writer's lock."""

    def release_lock(self) -> None:
        """Let the writer's locks go (layouts call this from :meth:`close`)."""
        locks = [self.write_lock, *getattr(self, "_more_locks", [])]
        self.write_lock, self._more_locks = None, []
        for lock in locks:
            if lock is not None:
                lock.release()

    @property
    def remote(self) -> bool:
        """True when every read is a network round trip (fetch chunks concurrently)."""
        return not self.in_memory and self.store.remote

    @abc.abstractmethod
    def read_chunk(self, nchunk: int) -> ChunkBytes:
        """The whole compressed chunk ``nchunk`` as a bytes-like object."""

    def read_chunk_into(self, nchunk: int, scratch: Callable[[int], np.ndarray]) -> ChunkBytes:
        """Chunk ``nchunk``, possibly placed in ``scratch(nbytes)`` (a reusable buffer).

        The result is only valid until ``scratch`` is called again; callers decode
        it at once.  Layouts that read files override this to skip an allocation.
        """
        return self.read_chunk(nchunk)

    def prefetched(self, nchunks: Sequence[int]) -> contextlib.AbstractContextManager[None]:
        """A context within which reads of chunks ``nchunks`` may be served from fewer,
        larger fetches (layouts on object stores override it)."""
        return contextlib.nullcontext()

    def chunk_reader(self, nchunk: int) -> tuple[Callable[[int, int], bytes], int]:
        """Ranged access to chunk ``nchunk``: ``(read_at(offset, length), size)``.

        Partial reads go through this so only the bytes they need are fetched.
        """
        chunk = self.read_chunk(nchunk)
        return ChunkReader(len(chunk), lambda o, n: bytes(chunk[o:o + n])), len(chunk)

    def special_chunk(self, nchunk: int) -> bytes | None:
        """Chunk ``nchunk`` when the layout records it as a Blosc2 special chunk (one
        value repeated: not stored, or a few bytes kept in its index), else None.

        Known without reading chunk data, so reads fill the value straight away
        (see :mod:`carray.codecs.fill`).
        """
        return None

    @abc.abstractmethod
    def write_chunk(self, nchunk: int, data: bytes, digest: bytes | None = None) -> int:
        """Store chunk ``nchunk`` (replacing any); returns the change in stored bytes.

        Layouts that can (the superchunk layout, Blosc2 frames) record a special
        chunk holding the array's fill value without storing it.  ``digest`` is
        :meth:`chunk_digest` of ``data`` when the caller worked it out already (on
        the thread that compressed it).
        """

    def chunk_digest(self, data: bytes) -> bytes | None:
        """The checksum stored after chunk ``data`` (None: the layout stores none).
        Safe to call from any thread."""
        return None

    def grow_absent(self, first: int, count: int, fill: bytes) -> bool:
        """Record chunks ``first`` to ``first + count``, the next ones, as holding only
        the fill value (``fill``: their special chunk) in constant time, storing nothing;
        False when the layout records each chunk (then nothing is done)."""
        return False

    @abc.abstractmethod
    def drop_chunks(self, first: int) -> int:
        """Forget chunks numbered ``first`` and above; returns the change in stored bytes."""

    def commit(self, meta: ArrayMeta, cbytes: int,  # noqa: B027 - optional
               message: str | None = None) -> bool | None:
        """Make everything written so far durable, recording ``meta`` last (as a version
        with ``message``, where the layout keeps versions).  False: only staged, for a
        commit of several arrays at once to publish."""
        return None

    # -- versions (carray's own layout keeps them; the others raise) ------------------------

    #: True when commits are versions a reader can hold and a user can go back to.
    versioned: bool = False

    @property
    def version_id(self) -> str | None:
        """The id of the version the committed state is (None: no versions)."""
        return None

    @property
    def pinned_version(self) -> str | None:
        """The version a reader opened by id, tag or time (None: the newest, or none)."""
        return None

    def _no_versions(self) -> VersionsUnsupportedError:
        return VersionsUnsupportedError(
            f"{self.describe()}: this format keeps no versions (only carray's own superchunk "
            "layout does; copy the array into it to keep versions)")

    def versions(self) -> list[Any]:
        """Kept versions, newest first (:class:`carray.versions.VersionInfo`)."""
        raise self._no_versions()

    def versioned_dataset(self) -> Any:
        """The :class:`carray.versions.dataset.VersionedDataset` the layout commits to."""
        raise self._no_versions()

    def tag(self, name: str, version_id: str, move: bool = False) -> None:
        raise self._no_versions()

    #: What was changed in place since the last commit (layouts whose writers rebase).
    edits: Any = None

    @property
    def stored_attrs(self) -> Any:
        """The attributes as the next commit records them (typed JSON)."""
        raise self._no_versions()

    def take_attrs(self, stored: Any) -> None:
        """Make ``stored`` the attributes the next commit records (a rebase's merge)."""
        raise self._no_versions()

    def chunks_between(self, old: Any, new: Any) -> set[int]:
        """The chunks whose records differ between two states of this array."""
        raise self._no_versions()

    def rebase_index(self, newer: Any) -> None:
        """Take ``newer`` as the state the working index changes apply to."""
        raise self._no_versions()

    def reset(self) -> tuple[ArrayMeta, int]:
        """Drop every change since the last commit: the layout shows the version its
        dataset holds (after a failed transaction, or before a rebase); returns its meta
        and cbytes."""
        raise self._no_versions()

    def untag(self, name: str) -> None:
        raise self._no_versions()

    def restore(self, version: str) -> tuple[ArrayMeta, int]:
        """Make ``version`` the newest again (a new commit); returns its meta and cbytes."""
        raise self._no_versions()

    def refresh(self) -> tuple[ArrayMeta, int] | None:
        """A reader moves to the newest version; returns its meta and cbytes (None: not a
        reader of versions, nothing to do)."""
        return None

    def prune(self, keep_last: int | None = None, older_than: float | None = None) -> int:
        """Drop versions past ``keep_last`` or made before ``older_than``; returns how many."""
        raise self._no_versions()

    def savepoint(self) -> Any:
        """Start undoable changes (layouts with :attr:`savepoints`); a token for
        :meth:`rollback`."""
        return None

    def rollback(self, token: Any) -> None:  # noqa: B027 - optional
        """Undo the chunk writes and drops made since :meth:`savepoint` gave ``token``."""

    def release_savepoint(self) -> None:  # noqa: B027 - optional
        """The outermost change finished: what it replaced need not be kept for undo."""

    def write_unit(self, unit: int, chunks: Sequence[bytes],
                   digests: Sequence[bytes | None] | None = None) -> int:
        """Write the file holding chunks ``[unit*U, unit*U + len(chunks))`` (U =
        :attr:`unit_chunks`), whole and atomically, touching no other file;
        ``digests``: :meth:`chunk_digest` of each, when worked out already.

        Parallel writers (one per unit, in any process) call this; the metadata
        is recorded once they are all done, with :meth:`adopt`.  Returns the
        stored bytes of the chunks.
        """
        raise NotImplementedError(f"{self.describe()} cannot be written in parallel")

    def adopt(self, meta: ArrayMeta, cbytes: int) -> None:
        """Record ``meta`` and ``cbytes`` as the committed state after :meth:`write_unit`
        calls (by this or other processes) have written every chunk it holds."""
        raise NotImplementedError(f"{self.describe()} cannot be written in parallel")

    def read_objects(self, length: int) -> np.ndarray:
        """The items of an ``object`` array (only bcolz directories hold pickles)."""
        raise NotImplementedError(f"{self.describe()} holds no object arrays")

    def write_objects(self, objects: np.ndarray, first: int, cparams: CParams) -> int:
        """Store items ``first`` and on of an ``object`` array (one pickle per chunk);
        returns the change in stored bytes.  In memory nothing is stored."""
        if self.in_memory:
            return 0
        raise NotImplementedError(f"{self.describe()} holds no object arrays")

    def load_attrs(self) -> dict[str, Any]:
        return {}

    def save_attrs(self, attrs: dict[str, Any]) -> None:  # noqa: B027 - optional
        """Persist user attributes (no-op in memory)."""

    def chunk_path(self, nchunk: int) -> str | None:
        """The file holding chunk ``nchunk``, for error messages (None in memory)."""
        return None

    def chunk_stamp(self, nchunk: int) -> tuple[int, int] | None:
        """Something that changes whenever chunk ``nchunk`` is rewritten (None in memory)."""
        return None

    def declared_chunks(self) -> tuple[int, ...] | None:
        """The chunk shape the file records, when it differs from the one the array is
        read with (a Blosc2 frame may record 0 along an empty axis); else None."""
        return None

    #: Where a layout that keeps sidecars keeps them (None: it keeps none).
    sidecars: Sidecars | None = None

    def sidecar_names(self) -> list[str]:
        """Names of the sidecars kept beside the metadata (see :meth:`save_sidecar`)."""
        return [] if self.sidecars is None else self.sidecars.names()

    def load_sidecar(self, name: str) -> bytes | None:
        """One sidecar's bytes, if it exists."""
        return None if self.sidecars is None else self.sidecars.load(name)

    def save_sidecar(self, name: str, data: bytes | None) -> None:
        """Persist (or, with None, delete) a sidecar: a small file of data derived from
        the chunks (summaries, caches) that readers check before trusting."""
        if self.sidecars is not None:
            self.sidecars.save(name, data)

    def close(self) -> None:
        """Release file handles, caches and the writer's lock."""
        self.release_lock()

    def discard(self) -> None:
        """Release file handles and the writer's lock, writing nothing more (what was not
        committed is dropped); never raises for the storage, which may be failing."""
        try:
            self.close()
        except (CArrayError, OSError):
            pass
        finally:
            self.release_lock()

    def __del__(self) -> None:
        try:
            # A finalizer may run inside a pool's submit (which holds a lock every pool
            # shares): what the close would hand to a pool is done here instead.
            with _parallel.inline():
                self.close()
        except Exception:  # noqa: BLE001 - never raise from a finalizer
            pass

    def describe(self) -> str:
        return "memory"


def clear_for_create(store: Store, path: str, mode: str) -> None:
    """Make room for a new dataset at ``path``: refuse an existing one unless ``mode``
    is 'w', which removes it (a directory, a file or a link).  What killed writers left
    beside it goes too (:func:`carray.stores.staging.sweep`).  The caller holds the
    old dataset's writer's lock."""
    staging.sweep(store, path)
    if not store.exists(path):
        return
    if mode != "w":
        raise ContainerExistsError(
            f"{store.url(path)}: already exists; open it, or pass mode='w' to replace it")
    if not store.remote and store.isdir(path):
        # One rename clears the name; unlinking the old files one by one is left to a
        # background thread, off the writer's path (a process killed meanwhile leaves it
        # under a temporary name, which the next writer of ``path`` removes).
        trash = temporary_name(path)
        try:
            store.rename(path, trash)
        except OSError:
            store.rmtree(path)
        else:
            _parallel.in_background(staging.remove_quietly, store, trash)
        return
    store.rmtree(path)


class Sidecars:
    """Sidecars as files ``<directory>/<name>``, for a layout to delegate to.

    Not fsynced: sidecars hold data derived from the chunks (zone maps), checked
    against each chunk's stamp when used, so a lost or stale one only costs a re-read.
    """

    def __init__(self, store: Store, directory: str, readonly: bool) -> None:
        self.store, self.directory, self.readonly = store, directory, readonly

    def _path(self, name: str) -> str:
        if not _SIDECAR_NAME.fullmatch(name):
            raise ValueError(f"sidecar name {name!r} is not a plain file name")
        return self.store.join(self.directory, name)

    def names(self) -> list[str]:
        return sorted(n for n in self.store.listdir(self.directory)
                      if _SIDECAR_NAME.fullmatch(n))

    def load(self, name: str) -> bytes | None:
        try:
            return self.store.get(self._path(name))
        except FileNotFoundError:
            return None

    def save(self, name: str, data: bytes | None) -> None:
        if self.readonly:
            raise ReadOnlyError("sidecars cannot change: opened read-only")
        path = self._path(name)
        if data is None:
            with contextlib.suppress(FileNotFoundError):
                self.store.delete(path)
        else:
            self.store.put_cache(path, data)
