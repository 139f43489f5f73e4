"""Zarr v3 arrays whose chunks are Blosc buffers, moved to and from carrays as bytes.

A Zarr v3 array whose codecs are only ``bytes`` (the machine's byte order) then
``blosc`` stores each chunk as one Blosc1 buffer (numcodecs compresses with c-blosc
1.x) under a key named by the chunk's coordinates (``c/0/1`` by default, ``0.1``
with the v2 key encoding): the same bytes a bcolz chunk of the same shape and codec
holds.  Such chunks move between Zarr arrays and carrays in bcolz directories
without being decoded; Zarr pads edge chunks, bcolz stores the last run of rows
truncated, so those are decoded.  Zarr keeps no checksums of its own: a moved
chunk is checked by its Blosc header (sizes, type size), the way bcolz files
written by bcolz are.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from carray.array import transfer
from carray.chunks.grid import NDGrid
from carray.codecs import blosc
from carray.codecs import parallel as _parallel
from carray.core.params import CParams
from carray.engine.moves import ChunkFormat
from carray.errors import FormatError
from carray.integrations.zarr_arrays import cparams_of, node_document, zarr_module
from carray.stores import Store, resolve


def _native(dtype: np.dtype) -> bool:
    return dtype.byteorder in ("=", "|") or dtype.byteorder == ("<" if np.little_endian
                                                               else ">")


def _key_encoding(doc: dict) -> tuple[str, str] | None:
    """``(prefix, separator)`` of the array's chunk keys (None: an encoding not known)."""
    enc = doc.get("chunk_key_encoding") or {}
    sep = (enc.get("configuration") or {}).get("separator")
    if enc.get("name") == "default":
        return "c", sep or "/"
    if enc.get("name") == "v2":
        return "", sep or "."
    return None


def _plain_blosc(doc: dict, dtype: np.dtype) -> str | None:
    """Why chunks of the Zarr array ``doc`` describes are not single Blosc buffers of
    its items in C order (None: they are)."""
    codecs = doc.get("codecs") or []
    names = [c.get("name") for c in codecs if isinstance(c, dict)]
    if names != ["bytes", "blosc"]:
        return f"Zarr codecs {names} are not bytes then blosc"
    endian = (codecs[0].get("configuration") or {}).get("endian")
    if dtype.itemsize > 1 and endian != ("little" if np.little_endian else "big"):
        return "Zarr stores its items in the other byte order"
    if not _native(dtype) or dtype.hasobject:
        return "items of this dtype are not moved"
    if (doc.get("chunk_grid") or {}).get("name") != "regular" or _key_encoding(doc) is None:
        return "not a regular chunk grid with known chunk keys"
    return None


class ZarrChunks:
    """A Zarr array's chunks, with the interface of
    :class:`carray.engine.moves.StoredChunks` (stored bytes, or decoded items)."""

    def __init__(self, z: Any, store: Store, path: str, doc: dict) -> None:
        self._z, self._store, self._path = z, store, path
        self._dtype = np.dtype(z.dtype)
        shape, chunks = tuple(z.shape), tuple(z.chunks)
        self._why = _plain_blosc(doc, self._dtype)
        self._keys = _key_encoding(doc) or ("c", "/")
        cparams = cparams_of(z) or CParams()
        self.grid = NDGrid(shape, chunks, chunks, max(self._dtype.itemsize, 1))
        self.format = ChunkFormat(self._dtype, chunks, None, cparams, "C", True, False,
                                  False, None, self.grid.chunk_nbytes)

    def refused(self, target: ChunkFormat) -> str | None:
        return self._why or self.format.move_refused(target)

    def chunk_key(self, nchunk: int) -> str:
        """The store key of chunk ``nchunk``."""
        prefix, sep = self._keys
        coords = [str(c) for c in self.grid.chunk_coords(nchunk)]
        return self._store.join(self._path, sep.join([prefix, *coords] if prefix else coords))

    def stored(self, nchunk: int) -> tuple[bytes, int | None] | None:
        """Chunk ``nchunk``'s bytes, their Blosc header checked, and its block size; None
        when Zarr did not write it (it holds the fill value)."""
        key = self.chunk_key(nchunk)
        try:
            data = self._store.get(key)
        except FileNotFoundError:
            return None
        url = self._store.url(key)
        h = blosc.read_header(data, url, size=len(data))
        if h.cbytes != len(data) or h.nbytes != self.grid.chunk_nbytes or \
                h.typesize != blosc.blosc_typesize(self._dtype):
            raise FormatError(f"chunk {nchunk}: a Blosc header of {h.cbytes} compressed, "
                              f"{h.nbytes} decoded bytes of type size {h.typesize} in "
                              f"{len(data)} stored bytes of a chunk of "
                              f"{self.grid.chunk_nbytes} bytes", url)
        return data, h.blocksize

    def region(self, nchunk: int) -> np.ndarray:
        return np.asarray(self._z[self.grid.chunk_slices(self.grid.chunk_coords(nchunk))])


class ZarrSource:
    """A Zarr array as a source of :func:`carray.array.transfer.fill` (its chunks move)."""

    order = "C"

    def __init__(self, z: Any, store: Store, path: str, doc: dict) -> None:
        self._z = z
        self._chunks = ZarrChunks(z, store, path, doc)
        self.shape, self.dtype = tuple(z.shape), np.dtype(z.dtype)
        self.ndim, self.nchunks = len(self.shape), self._chunks.grid.nchunks

    def chunk_source(self) -> ZarrChunks:
        return self._chunks

    def __getitem__(self, key: Any) -> Any:
        return self._z[key]


def source_of(z: Any, location: str, storage_options: dict | None) -> ZarrSource | None:
    """``z`` (opened from ``location``) as a source whose chunks may move; None when it
    is not a Zarr v3 array or not n-d."""
    if type(z).__module__.split(".")[0] != "zarr" or not getattr(z, "shape", ()):
        return None
    store, path = resolve(location, storage_options)
    doc = node_document(store, path)
    if doc is None or doc.get("node_type") != "array":
        return None
    return ZarrSource(z, store, path, doc)


def copy_to_zarr(source: Any, location: str, chunks: tuple[int, ...] | None, cparams: Any,
                 attrs: dict, storage_options: dict | None, fsync: bool = True
                 ) -> transfer.MoveStats | None:
    """Write carray ``source`` as a new Zarr v3 array at ``location``, its Blosc1 chunks
    (a bcolz directory's) moved as bytes where the grids and codecs agree; None (nothing
    written) when none could move: the caller writes through Zarr."""
    from carray.integrations.zarr_arrays import compressors_for, encode_attrs

    src = source.engine.chunk_source() if hasattr(source, "engine") else None
    if src is None or source.order != "C" or not source.ndim or not _native(source.dtype):
        return None
    chunks = tuple(chunks) if chunks else tuple(src.grid.chunks)
    fmt = src.format
    cparams = cparams or fmt.cparams
    if not fmt.blosc1 or chunks != fmt.chunks or fmt.blocked or \
            fmt.cparams.replace(quantize=0) != cparams.replace(quantize=0):
        return None
    zarr = zarr_module()
    kwargs: dict[str, Any] = {"storage_options": storage_options} if storage_options else {}
    z = zarr.create_array(store=location, shape=source.shape, dtype=source.dtype,
                          chunks=chunks, compressors=compressors_for(cparams),
                          attributes=encode_attrs(dict(attrs), source.dtype, location),
                          overwrite=True,
                          fill_value=source.dflt, **kwargs)
    store, path = resolve(location, storage_options)
    target = ZarrChunks(z, store, path, node_document(store, path) or {})
    return _move_into(z, src, target, store, fsync)


def _move_into(z: Any, src: Any, target: ZarrChunks, store: Store, fsync: bool
               ) -> transfer.MoveStats:
    """Store every chunk of ``src`` in Zarr array ``z``: moved as bytes when whole and
    stored, else written through Zarr."""
    grid, stats, written = src.grid, transfer.MoveStats(), []
    made: set[str] = set()

    def work(nchunk: int) -> tuple[int, Any, str | None]:
        coords = grid.chunk_coords(nchunk)
        if grid.valid_shape(coords) != tuple(grid.chunks):
            return nchunk, src.region(nchunk), "edge chunk: Zarr pads it, bcolz truncates"
        got = src.stored(nchunk)
        if got is None or got[1] is None:
            return nchunk, src.region(nchunk), "not stored as a Blosc1 chunk"
        return nchunk, got[0], None

    for nchunk, data, why in _parallel.pipeline(work, range(grid.nchunks)):
        if why is None:
            key = target.chunk_key(nchunk)
            folder = store.dirname(key)
            if folder not in made:
                store.makedirs(folder)
                made.add(folder)
            store.put(key, data, fsync=False)
            written.append(key)
            stats.moved += 1
        else:
            z[grid.chunk_slices(grid.chunk_coords(nchunk))] = data
            stats.decoded += 1
            stats.reasons[why] += 1
    if fsync and not store.remote:
        _parallel.run([_syncing(store, k) for k in written], width=_parallel.IO_THREADS)
        for directory in sorted({store.dirname(k) for k in written}):
            store.sync_dir(directory)
    return stats


def _syncing(store: Store, key: str) -> Callable[[], None]:
    return lambda: store.sync_file(key)


__all__ = ["ZarrChunks", "ZarrSource", "copy_to_zarr", "source_of"]
