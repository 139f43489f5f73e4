"""Bloscpack single files (``.blp``, format 3), readable and writable by bloscpack 0.16.

A file is a 32-byte header, an optional metadata section (JSON), an optional
table of chunk offsets, then Blosc1 chunks back to back, each followed by its
checksum digest (see :mod:`carray.formats._blp_frame` and specs/bloscpack.md).
NumPy arrays are stored as their raw bytes in C or Fortran order, with
``{"dtype", "shape", "order", "container": "numpy"}`` as metadata.

Compatibility notes:

* Chunks are written as Blosc1 (format version 2) because bloscpack decodes
  with c-blosc 1.x, which rejects Blosc2 chunks.
* bloscpack's own ``append`` does not update an array's metadata and leaves
  stale bytes after a last chunk that shrank; the reader tolerates both kinds of
  trailing bytes, and :func:`append` here also rewrites the array's shape.
* Every size read from a file is checked against the file size before anything
  is allocated, and a chunk may not claim to inflate more than :data:`MAX_RATIO`
  times (above what any Blosc1 codec achieves), so a small hostile file cannot
  ask for a huge buffer.

Every function taking a ``path`` also takes a URL (``s3://bucket/a.blp``,
``memory://a.blp``, any fsspec file system) with ``storage_options`` for its file
system.  Remote files are read by byte ranges (the start of the file in one request,
the chunk headers concurrently) and written in one put.
"""

from __future__ import annotations

import contextlib
import os
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import blosc as _blosc1
import numpy as np

from carray.codecs import blosc
from carray.errors import (
    ChecksumError,
    CodecError,
    CodecUnavailableError,
    FormatError,
    UnsupportedDTypeError,
)
from carray.formats._blp_frame import (
    HEADER_SIZE,
    MAX_CHUNK_SIZE,
    MAX_CHUNKS,
    METADATA_HEADER_SIZE,
    OFFSET_SIZE,
    BlpHeader,
    MetadataHeader,
    array_spec,
    calculate_chunks,
    decode_metadata,
    decode_offsets,
    dtype_meta,
    encode_metadata,
    encode_offsets,
    get_checksum,
)
from carray.params import CParams, Shuffle, get_nthreads
from carray.stores import Store, resolve

PathLike = str | os.PathLike

#: bloscpack's defaults: 1 MiB chunks, clevel 7, byte shuffle, blosclz, typesize 8 for bytes.
DEFAULT_CHUNK_SIZE = 2**20
DEFAULT_CPARAMS = CParams(clevel=7, cname="blosclz", shuffle=Shuffle.SHUFFLE)
DEFAULT_TYPESIZE = 8
#: Largest inflation a chunk may claim.  zstd's best case (run-length blocks) is
#: about 2**15; deflate's about 2**10; lz4 and blosclz about 2**8.
MAX_RATIO = 2**16
_SUFFIXES = {"": 1, "B": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
_COPY_BLOCK = 16 * 2**20
#: Bytes of a remote file fetched up front: header, metadata and offsets are usually in it.
_HEAD = 64 * 2**10


# -- argument helpers -------------------------------------------------------------------------

def parse_size(value: int | str | None, default: int = DEFAULT_CHUNK_SIZE) -> int:
    """A chunk size given as an int, ``"512K"``/``"1M"``/``"2G"`` or ``"max"``."""
    if value is None:
        return default
    if isinstance(value, str):
        text = value.strip().upper()
        if text == "MAX":
            return MAX_CHUNK_SIZE
        number, suffix = (text[:-1], text[-1]) if text[-1:] in _SUFFIXES else (text, "")
        try:
            value = int(float(number) * _SUFFIXES[suffix])
        except ValueError:
            raise ValueError(f"not a size: {value!r} (use e.g. 65536, 512K, 1M or max)") \
                from None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"chunk_size must be an int or a size string, not {value!r}")
    if not 1 <= value <= MAX_CHUNK_SIZE:
        raise ValueError(f"chunk_size must be 1..{MAX_CHUNK_SIZE}, got {value}")
    return int(value)


def _cparams(cparams: CParams | dict | None) -> CParams:
    cp = DEFAULT_CPARAMS if cparams is None else CParams.coerce(cparams)
    if cp.quantize:
        raise ValueError("quantize is not supported by Bloscpack files")
    return cp


def _max_app_chunks(offsets: bool, nchunks: int,
                    value: int | Callable[[int], int] | None) -> int:
    # Without offsets there is nowhere to record appended chunks (bloscpack ignores it too).
    if not offsets:
        return 0
    if value is None:
        value = 10 * nchunks
    elif callable(value):
        value = value(nchunks)
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise ValueError(f"max_app_chunks must be an int >= 0, got {value!r}")
    return min(int(value), MAX_CHUNKS - nchunks)


def _compress(data: np.ndarray, typesize: int, cp: CParams) -> bytes:
    """One Blosc1 (format version 2) chunk of the contiguous uint8 array ``data``.

    Not :func:`carray.codecs.blosc.compress1`: that forces small blocks (32-64 KiB)
    so carray can decode single blocks, which makes 1 MiB chunks compress 2-3x
    slower.  A ``.blp`` file is always read whole, so c-blosc 1.x picks the block
    size itself, exactly as bloscpack does (our chunks then match its bytes).
    """
    if data.nbytes > MAX_CHUNK_SIZE:
        raise CodecError(f"a chunk of {data.nbytes} bytes exceeds Blosc's 2 GiB limit")
    if data.nbytes % typesize == 0 and data.nbytes:
        return _blosc1.compress_ptr(data.ctypes.data, data.nbytes // typesize, typesize,
                                    cp.clevel, int(cp.shuffle), cp.cname)
    # compress_ptr takes whole items only; a byte stream's last chunk may end mid-item,
    # and c-blosc 1.x stores such leftover bytes itself.
    return _blosc1.compress(data.tobytes(), typesize, cp.clevel, int(cp.shuffle), cp.cname)


def _nworkers(nitems: int) -> int:
    return max(1, min(get_nthreads(), nitems))


@contextmanager
def _chunk_parallel() -> Iterator[None]:
    """Blosc single-threaded per call while our threads work on separate chunks."""
    if _nworkers(2) == 1:
        yield
        return
    _blosc1.set_nthreads(1)
    try:
        yield
    finally:
        _blosc1.set_nthreads(get_nthreads())


def _in_parallel(fn: Callable[[Any], Any], items) -> Iterator[Any]:
    """``map(fn, items)`` on a few threads, in order, with a bounded number in flight."""
    items = list(items)
    nworkers = _nworkers(len(items))
    if nworkers == 1:
        yield from map(fn, items)
        return
    with _chunk_parallel(), ThreadPoolExecutor(nworkers) as pool:
        pending: deque = deque()
        for item in items:
            pending.append(pool.submit(fn, item))
            if len(pending) >= 2 * nworkers:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


def _flat_bytes(a: np.ndarray, order: str) -> np.ndarray:
    """The array's bytes in the given memory order, as a 1-d uint8 view (no copy)."""
    return a.reshape(-1, order=order).view(np.uint8)


# -- writing ----------------------------------------------------------------------------------

def _pack(flat: np.ndarray, path: PathLike, *, typesize: int, cparams, chunk_size: int,
          checksum, offsets: bool, max_app_chunks, metadata: Any, meta_options: dict,
          fsync: bool, storage_options: dict | None) -> None:
    cp = _cparams(cparams)
    impl = get_checksum(checksum)
    if not 1 <= typesize <= 255:
        raise ValueError(f"typesize must be 1..255, got {typesize}")
    nchunks, csize, last = calculate_chunks(flat.nbytes, chunk_size)
    apps = _max_app_chunks(offsets, nchunks, max_app_chunks)
    header = BlpHeader(offsets, metadata is not None, impl.id, typesize, csize, last,
                       nchunks, apps)
    meta = b"" if metadata is None else encode_metadata(metadata, **meta_options)[0]

    def encode(i: int) -> tuple[bytes, bytes]:
        piece = _compress(flat[i * csize:i * csize + (last if i == nchunks - 1 else csize)],
                          typesize, cp)
        return piece, impl.digest(piece) if impl.size else b""

    store, key = resolve(path, storage_options)
    chunks = _in_parallel(encode, range(nchunks))  # compressed as they are written
    _put_blp(store, key, [header.pack(), meta], header.total_slots, chunks, fsync)


def _put_blp(store: Store, key: str, front: list[bytes], slots: int,
             chunks: Iterator[tuple[bytes, bytes]], fsync: bool) -> None:
    """Put a ``.blp`` file: ``front`` (header and metadata), an offsets table of
    ``slots`` entries (none if 0) saying where each chunk starts, then the chunks,
    given as (compressed bytes, digest) pairs."""
    table_at = sum(len(p) for p in front)
    starts: list[int] = []

    def body() -> Iterator[bytes]:
        pos = table_at + slots * OFFSET_SIZE
        for piece, digest in chunks:
            starts.append(pos)
            pos += len(piece) + len(digest)
            yield piece
            if digest:
                yield digest

    if not slots:  # nothing to fill in afterwards: stream the chunks straight out
        store.put(key, _chain(front, body()), fsync=fsync)
        return
    if store.remote:
        # One request puts the whole object anyway: all chunks first, then the table.
        rest = list(body())
        store.put(key, [*front, encode_offsets(starts, slots), *rest], fsync=fsync)
        return
    # The table precedes the chunks: stream them to a temporary file behind a blank
    # table as they are compressed (memory stays bounded, writing overlaps compressing),
    # fill the table in, and only then give the file its name.
    tmp = f"{key}.{os.getpid()}.part"
    try:
        store.put(tmp, _chain(front, [bytes(slots * OFFSET_SIZE)], body()), fsync=False)
        with store.open(tmp, "r+") as h:
            h.pwrite(encode_offsets(starts, slots), table_at)
            if fsync:
                h.sync()
        store.rename(tmp, key)
    except BaseException:
        with contextlib.suppress(OSError):
            store.delete(tmp)
        raise


def _chain(*iterables) -> Iterator[bytes]:
    for it in iterables:
        yield from it


def _meta_options(meta_checksum, meta_codec, meta_level, max_meta_size) -> dict:
    return {"checksum": meta_checksum, "codec": meta_codec, "level": meta_level,
            "max_meta_size": max_meta_size}


def pack_array(array, path: PathLike, *, cparams: CParams | dict | None = None,
               chunk_size: int | str | None = None, checksum: str | None = "adler32",
               offsets: bool = True, max_app_chunks: int | Callable | None = None,
               metadata: dict | None = None, meta_checksum: str | None = "adler32",
               meta_codec: str | None = "zlib", meta_level: int = 6,
               max_meta_size: int | None = None, fsync: bool = True,
               storage_options: dict | None = None) -> None:
    """Write a NumPy array to a Bloscpack file, as ``bloscpack.pack_ndarray_to_file`` does.

    Parameters
    ----------
    array : array_like
        Any non-object dtype with an itemsize of 1..255 bytes (the header stores
        the itemsize in one byte).  A Fortran-contiguous array is stored in
        Fortran order; anything else in C order.
    path : str or os.PathLike
        Destination, a local path or a URL, replaced atomically (a local file is
        written under a temporary name and renamed; an object is put whole).
    cparams : CParams or dict, optional
        Blosc settings; default bloscpack's (blosclz, clevel 7, byte shuffle).
    chunk_size : int or str, optional
        Uncompressed bytes per chunk, a multiple of the itemsize; default 1 MiB
        (rounded down to whole items).
    checksum : str, optional
        Digest after every chunk: None, adler32 (default), crc32, md5, sha1,
        sha224, sha256, sha384 or sha512.
    offsets : bool
        Write the chunk offsets table (needed by :func:`append`).
    max_app_chunks : int or callable, optional
        Offset slots reserved for appends; default ``10 * nchunks``.
    metadata : dict, optional
        Extra JSON keys stored beside ``dtype``, ``shape``, ``order`` and ``container``.
    meta_checksum, meta_codec, meta_level, max_meta_size
        The metadata section's checksum, codec (``"zlib"`` or None), zlib level
        and reserved size (default ten times the JSON).
    fsync : bool
        Flush to stable storage before the rename.
    storage_options : dict, optional
        Options of the URL's file system (credentials, endpoint, ...).

    Raises
    ------
    UnsupportedDTypeError
        Object arrays, or items larger than 255 bytes or of size 0.
    ValueError
        Bad parameters (chunk size not a multiple of the itemsize, unknown checksum).
    """
    a = np.asarray(array)
    dtype = a.dtype
    if dtype.hasobject:
        raise UnsupportedDTypeError("object arrays cannot be stored in Bloscpack files")
    if not 1 <= dtype.itemsize <= 255:
        raise UnsupportedDTypeError(f"Bloscpack stores the itemsize in one byte: {dtype} has "
                                    f"{dtype.itemsize}-byte items")
    order = "F" if np.isfortran(a) else "C"
    if not a.flags.c_contiguous and order == "C":  # (ascontiguousarray would make 0-d 1-d)
        a = np.ascontiguousarray(a)
    flat = _flat_bytes(a, order)
    if chunk_size is None:
        csize = max(DEFAULT_CHUNK_SIZE - DEFAULT_CHUNK_SIZE % dtype.itemsize, dtype.itemsize)
    else:
        csize = parse_size(chunk_size)
        if flat.nbytes > csize and csize % dtype.itemsize:
            raise ValueError(f"chunk_size {csize} is not a multiple of the itemsize "
                             f"{dtype.itemsize}")
    meta = {"dtype": dtype_meta(dtype), "shape": list(a.shape), "order": order,
            "container": "numpy"}
    for key, value in (metadata or {}).items():
        if key in meta:
            raise ValueError(f"metadata key {key!r} is reserved for the array description")
        meta[key] = value
    _pack(flat, path, typesize=dtype.itemsize, cparams=cparams, chunk_size=csize,
          checksum=checksum, offsets=offsets, max_app_chunks=max_app_chunks, metadata=meta,
          meta_options=_meta_options(meta_checksum, meta_codec, meta_level, max_meta_size),
          fsync=fsync, storage_options=storage_options)


def pack_bytes(data, path: PathLike, *, cparams: CParams | dict | None = None,
               typesize: int = DEFAULT_TYPESIZE, chunk_size: int | str | None = None,
               checksum: str | None = "adler32", offsets: bool = True,
               max_app_chunks: int | Callable | None = None, metadata: Any = None,
               meta_checksum: str | None = "adler32", meta_codec: str | None = "zlib",
               meta_level: int = 6, max_meta_size: int | None = None,
               fsync: bool = True, storage_options: dict | None = None) -> None:
    """Write a bytes-like object to a Bloscpack file (``bloscpack.pack_bytes_to_file``).

    Parameters are those of :func:`pack_array`, plus ``typesize`` (the Blosc
    typesize of the chunks, default 8 as bloscpack); ``metadata`` is any JSON
    value stored as is (default: no metadata section).
    """
    flat = np.frombuffer(memoryview(data).cast("B"), dtype=np.uint8)
    _pack(flat, path, typesize=typesize, cparams=cparams, chunk_size=parse_size(chunk_size),
          checksum=checksum, offsets=offsets, max_app_chunks=max_app_chunks, metadata=metadata,
          meta_options=_meta_options(meta_checksum, meta_codec, meta_level, max_meta_size),
          fsync=fsync, storage_options=storage_options)


# -- reading ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class ChunkSpan:
    """Where chunk ``index`` lies: its Blosc buffer at ``offset``, ``cbytes`` long."""

    index: int
    offset: int
    cbytes: int
    nbytes: int


@dataclass(frozen=True)
class Layout:
    """Everything in front of the chunks, validated."""

    header: BlpHeader
    metadata: Any
    meta_header: MetadataHeader | None
    offsets: list[int]
    offsets_offset: int
    data_start: int
    file_size: int


class _File:
    """An open ``.blp`` file, local or remote: positioned reads that either return all
    bytes or raise.  :attr:`path` names the file in messages."""

    def __init__(self, path: PathLike, storage_options: dict | None = None) -> None:
        self.store, self.key = resolve(path, storage_options)
        self.path = self.store.url(self.key)
        self.handle = self.store.open(self.key)
        self.size = self.handle.size
        # Each remote read is a round trip: take the start of the file in one.
        self.head = self.handle.pread(_HEAD, 0) if self.store.remote else b""

    def __enter__(self) -> _File:
        return self

    def __exit__(self, *exc) -> None:
        self.handle.close()

    def _read(self, n: int, offset: int) -> bytes:
        if offset + n <= len(self.head):
            return self.head[offset:offset + n]
        return self.handle.pread(n, offset)

    def pread(self, n: int, offset: int, what: str) -> bytes:
        if offset + n > self.size:
            raise FormatError(f"{what} needs bytes {offset}..{offset + n}, the file has "
                              f"{self.size}", self.path, offset)
        data = self._read(n, offset)
        if len(data) != n:  # the file shrank under us
            raise FormatError(f"{what} truncated", self.path, offset)
        return data

    def pread_into(self, view: memoryview, offset: int, what: str) -> None:
        got = self.handle.pread_into(view, offset)
        if got < len(view):
            raise FormatError(f"{what} truncated", self.path, offset + got)

    def chunk_headers(self, lay: Layout) -> dict[int, bytes]:
        """Remote files: the chunk headers the offsets table points at, fetched
        concurrently (walking the chunks would cost a round trip each)."""
        if not self.store.remote or not lay.offsets:
            return {}
        size = blosc.BLOSC1_HEADER
        wanted = [o for o in lay.offsets if len(self.head) < o + size <= self.size]
        got = self.store.get_ranges([(self.key, o, size) for o in wanted])
        return {o: raw for o, raw in zip(wanted, got, strict=True) if len(raw) == size}

    def layout(self, verify: bool = True) -> Layout:
        # A short file reaches unpack() whole so the error can say "not a Bloscpack file".
        header = BlpHeader.unpack(self._read(HEADER_SIZE, 0), self.path)
        pos = HEADER_SIZE
        metadata, meta_header = None, None
        if header.metadata:
            mh = MetadataHeader.unpack(self.pread(METADATA_HEADER_SIZE, pos, "metadata header"),
                                       self.path, pos)
            if pos + mh.section_size > self.size:  # before reading max_meta_size bytes
                raise FormatError(f"metadata section of {mh.section_size} bytes runs past the "
                                  f"end of the file ({self.size} bytes)", self.path, pos)
            metadata, meta_header = decode_metadata(
                self.pread(mh.section_size, pos, "metadata"), self.path, pos, verify)
            pos += mh.section_size
        offsets_offset = pos
        offsets: list[int] = []
        if header.offsets:
            slots = header.total_slots
            if slots > (self.size - pos) // OFFSET_SIZE:
                raise FormatError(f"offsets table of {slots} entries runs past the end of the "
                                  f"file ({self.size} bytes)", self.path, pos)
            offsets = decode_offsets(self.pread(slots * OFFSET_SIZE, pos, "offsets table"),
                                     header, self.path, pos, self.size)
            pos += slots * OFFSET_SIZE
        return Layout(header, metadata, meta_header, offsets, offsets_offset, pos, self.size)

    def spans(self, lay: Layout) -> list[ChunkSpan]:
        """Walk the chunk headers and check them all before any data is decoded."""
        h, path = lay.header, self.path
        dsize = h.checksum_impl.size
        # Each chunk takes at least a Blosc header: bounds nchunks before the loop.
        if h.nchunks > (self.size - lay.data_start) // (blosc.BLOSC1_HEADER + dsize):
            raise FormatError(f"{h.nchunks} chunks cannot fit in the "
                              f"{self.size - lay.data_start} bytes after the header",
                              path, lay.data_start)
        spans, pos, i = [], lay.data_start, 0
        fetched = self.chunk_headers(lay)
        while i < h.nchunks if h.nchunks >= 0 else pos < self.size:
            if lay.offsets and lay.offsets[i] != pos:
                raise FormatError(f"offsets table says chunk {i} starts at {lay.offsets[i]}, "
                                  f"but the previous chunk ends at {pos}", path, pos)
            raw = fetched.get(pos) or self.pread(blosc.BLOSC1_HEADER, pos, f"chunk {i} header")
            ch = blosc.read_header(raw, path, pos, size=self.size - pos)
            if pos + ch.cbytes + dsize > self.size:
                raise FormatError(f"chunk {i} checksum runs past the end of the file", path,
                                  pos + ch.cbytes)
            last = h.nchunks >= 0 and i == h.nchunks - 1
            expected = h.last_chunk if last else h.chunk_size
            if expected >= 0 and ch.nbytes != expected:
                raise FormatError(f"chunk {i} holds {ch.nbytes} bytes, the header says "
                                  f"{expected}", path, pos)
            if ch.nbytes > ch.cbytes * MAX_RATIO:
                raise FormatError(f"chunk {i} claims {ch.nbytes} bytes from {ch.cbytes} "
                                  "compressed, beyond any Blosc codec", path, pos)
            spans.append(ChunkSpan(i, pos, ch.cbytes, ch.nbytes))
            pos += ch.cbytes + dsize
            i += 1
        # Bytes after the last chunk are tolerated: bloscpack's append leaves them.
        return spans

    def read_into(self, lay: Layout, spans: list[ChunkSpan], out: np.ndarray,
                  verify: bool = True) -> None:
        """Decode every chunk into the flat uint8 array ``out``, checking digests.

        Each worker thread takes a contiguous run of chunks and reads, checks and
        decodes them one by one with a single-threaded Blosc: for chunks of about
        1 MiB this keeps every core busy, where Blosc's own threads would wait
        on each other at every chunk.
        """
        starts = np.cumsum([0] + [s.nbytes for s in spans])
        nworkers = _nworkers(len(spans))
        groups = [range(len(spans) * k // nworkers, len(spans) * (k + 1) // nworkers)
                  for k in range(nworkers)]

        def run(group: range) -> None:
            impl = lay.header.checksum_impl
            dsize = impl.size if verify else 0
            size = max((spans[i].cbytes for i in group), default=0) + impl.size
            view = memoryview(np.empty(size, np.uint8))
            with blosc.Decoder() as decoder:
                for i in group:
                    s = spans[i]
                    self.pread_into(view[:s.cbytes + dsize], s.offset, f"chunk {s.index}")
                    chunk = view[:s.cbytes]
                    if dsize and impl.digest(chunk) != view[s.cbytes:s.cbytes + dsize]:
                        raise ChecksumError(f"chunk {s.index}: {impl.name} checksum mismatch",
                                            self.path, s.offset)
                    self.decode(chunk, out[starts[i]:starts[i] + s.nbytes], s, decoder)

        for _ in _in_parallel(run, groups):
            pass

    def decode(self, chunk, out: np.ndarray, s: ChunkSpan,
               decoder: blosc.Decoder | None = None) -> None:
        try:
            blosc.validate_chunk(chunk, s.nbytes, self.path, s.offset)
            if decoder is not None:
                decoder.decompress_into(chunk, out, self.path)
            else:
                blosc.decompress_into(chunk, out, self.path)
        except CodecUnavailableError:
            raise
        except CodecError as exc:  # corrupt bytes behind a plausible header
            raise FormatError(f"chunk {s.index} does not decode: {exc}", self.path,
                              s.offset) from None


def _read(path: PathLike, verify: bool, want_array: bool, storage_options: dict | None):
    with _File(path, storage_options) as f:
        lay = f.layout(verify)
        if want_array:
            dtype, shape, order = array_spec(lay.metadata, f.path)
        spans = f.spans(lay)
        total = sum(s.nbytes for s in spans)
        if want_array:
            expected = int(np.prod(shape, dtype=object)) * dtype.itemsize
            if expected != total:
                raise FormatError(f"metadata shape {list(shape)} x {dtype.itemsize} bytes is "
                                  f"{expected} bytes, the chunks hold {total}", f.path,
                                  HEADER_SIZE)
            out = np.empty(shape, dtype=dtype, order=order)
            f.read_into(lay, spans, _flat_bytes(out, order), verify)
            return out
        out = np.empty(total, dtype=np.uint8)
        f.read_into(lay, spans, out, verify)
        return out


def unpack_array(path: PathLike, *, verify: bool = True,
                 storage_options: dict | None = None) -> np.ndarray:
    """Read a NumPy array from a Bloscpack file (``bloscpack.unpack_ndarray_from_file``).

    Parameters
    ----------
    path : str or os.PathLike
        A ``.blp`` file holding an array (numpy metadata): a local path or a URL.
    verify : bool
        Check every chunk's and the metadata's checksum.
    storage_options : dict, optional
        Options of the URL's file system.

    Returns
    -------
    numpy.ndarray
        With the stored dtype (byte order included), shape and memory order.

    Raises
    ------
    FormatError
        The file is not a valid Bloscpack file or holds no array; the message
        names the file and the offset.
    ChecksumError
        A digest does not match (``verify=True``).
    FileNotFoundError
        There is no such file.
    """
    return _read(path, verify, True, storage_options)


def unpack_bytes(path: PathLike, *, verify: bool = True,
                 storage_options: dict | None = None) -> bytes:
    """Read the uncompressed contents of any Bloscpack file as bytes.

    Takes and raises the same as :func:`unpack_array`.
    """
    return _read(path, verify, False, storage_options).tobytes()


def info(path: PathLike, *, verify: bool = False,
         storage_options: dict | None = None) -> dict[str, Any]:
    """Describe a Bloscpack file without decoding its chunks (only the header, the
    metadata, the offsets and the chunk headers are read).

    ``path`` and ``storage_options`` are as for :func:`unpack_array`.

    Returns
    -------
    dict
        ``path``, ``file_size``, ``header`` (the header fields), ``checksum``,
        ``metadata`` (or None), ``metadata_header`` (or None), ``offsets`` (used
        entries), ``free_offset_slots``, ``nbytes``, ``cbytes`` (chunks with their
        digests), ``chunks`` (count) and ``first_chunk`` (its Blosc header fields).
    """
    with _File(path, storage_options) as f:
        lay = f.layout(verify)
        spans = f.spans(lay)
        first = None
        if spans:
            ch = blosc.read_header(f.pread(blosc.BLOSC1_HEADER, spans[0].offset, "chunk 0"),
                                   f.path, spans[0].offset, size=spans[0].cbytes)
            first = {"version": ch.version, "versionlz": ch.versionlz, "flags": ch.flags,
                     "typesize": ch.typesize, "nbytes": ch.nbytes, "blocksize": ch.blocksize,
                     "cbytes": ch.cbytes, "codec": ch.codec_name,
                     "shuffle": bool(ch.flags & 0x01), "bitshuffle": bool(ch.flags & 0x04),
                     "memcpyed": ch.memcpyed}
        dsize = lay.header.checksum_impl.size
        return {
            "path": f.path, "file_size": f.size, "format_version": lay.header.format_version,
            "header": lay.header.to_dict(), "checksum": lay.header.checksum_impl.name,
            "metadata": lay.metadata,
            "metadata_header": lay.meta_header.to_dict() if lay.meta_header else None,
            "offsets": lay.offsets, "free_offset_slots": lay.header.max_app_chunks,
            "nbytes": sum(s.nbytes for s in spans),
            "cbytes": sum(s.cbytes + dsize for s in spans), "chunks": len(spans),
            "first_chunk": first,
        }


# -- append -----------------------------------------------------------------------------------

def _appended_bytes(lay: Layout, data, path: str) -> tuple[np.ndarray, Any, int]:
    """The bytes to add, the metadata to store afterwards (None: keep the old section)
    and the item size new chunk sizes must respect."""
    meta = lay.metadata
    if not (isinstance(meta, dict) and meta.get("container") == "numpy"):
        if isinstance(data, np.ndarray):
            return _flat_bytes(np.ascontiguousarray(data), "C"), None, 1
        return np.frombuffer(memoryview(data).cast("B"), dtype=np.uint8), None, 1
    if not isinstance(data, np.ndarray):
        raise ValueError(f"{path} holds a NumPy array: append an array, not "
                         f"{type(data).__name__}")
    dtype, shape, order = array_spec(meta, path)
    if data.dtype != dtype:
        raise ValueError(f"{path} holds {dtype} items, cannot append {data.dtype}")
    if not shape:
        raise ValueError(f"{path} holds a 0-d array, nothing can be appended to it")
    # C order grows along the first axis, Fortran order along the last.
    axis = 0 if order == "C" else len(shape) - 1
    rest = shape[1:] if order == "C" else shape[:-1]
    new_rest = data.shape[1:] if order == "C" else data.shape[:-1]
    if data.ndim != len(shape) or new_rest != rest:
        raise ValueError(f"cannot append shape {data.shape} to {shape} (order {order}): all "
                         f"but the {'first' if axis == 0 else 'last'} axis must match")
    a = np.asfortranarray(data) if order == "F" else np.ascontiguousarray(data)
    new_shape = list(shape)
    new_shape[axis] += data.shape[axis]
    return _flat_bytes(a, order), {**meta, "shape": new_shape}, dtype.itemsize


def append(path: PathLike, data, *, cparams: CParams | dict | None = None,
           verify: bool = True, fsync: bool = True,
           storage_options: dict | None = None) -> int:
    """Append an array or bytes to a Bloscpack file with an offsets table.

    As bloscpack does: the short last chunk is filled up to ``chunk_size``
    first, further chunks take reserved offset slots (``max_app_chunks``
    decreases), and the header and offsets are updated.  For array files the
    data must have the stored dtype and match all axes but the first (C order)
    or last (Fortran order); the metadata shape is updated within its reserved
    room.  The new file is written beside the old one and renamed over it, so
    a failure leaves the old file untouched (and stale bytes that bloscpack's
    in-place append may have left after the last chunk are dropped).

    Parameters
    ----------
    path : str or os.PathLike
        The file to extend: a local path or a URL (the object is put back whole).
    data : numpy.ndarray or bytes-like
        What to append.
    cparams : CParams or dict, optional
        Blosc settings of rewritten and new chunks; default bloscpack's.
    verify : bool
        Check the metadata's and the last chunk's checksums first.
    fsync : bool
        Flush the new file to stable storage before the rename.
    storage_options : dict, optional
        Options of the URL's file system.

    Returns
    -------
    int
        The number of chunks added (0 when the data fitted in the last chunk).

    Raises
    ------
    FormatError
        The file is invalid, has no offsets table, has too few free offset
        slots, or its metadata room cannot hold the new shape.
    ValueError
        ``data`` does not match the stored array's dtype or shape.
    """
    cp = _cparams(cparams)
    with _File(path, storage_options) as f:
        lay = f.layout(verify)
        h = lay.header
        if not h.offsets:
            raise FormatError("cannot append: the file has no offsets table (written with "
                              "offsets disabled)", f.path, 5)
        if h.chunk_size < 0 or h.last_chunk < 0:
            raise FormatError("cannot append: the chunk size is unknown", f.path, 8)
        new, new_meta, itemsize = _appended_bytes(lay, data, f.path)
        if new.nbytes == 0:
            return 0
        spans = f.spans(lay)
        pieces: list[np.ndarray] = []
        if h.chunk_size > 0 and spans:
            # Refill the short last chunk, then continue with the file's chunk size.
            last = spans[-1]
            old_last = np.empty(last.nbytes, np.uint8)
            f.read_into(lay, [last], old_last, verify)
            fill = min(h.chunk_size - last.nbytes, new.nbytes)
            pieces.append(np.concatenate([old_last, new[:fill]]))
            kept, rest = spans[:-1], new[fill:]
            nrest, csize, rest_last = calculate_chunks(rest.nbytes, h.chunk_size)                 if rest.nbytes else (0, h.chunk_size, 0)
            chunk_size = h.chunk_size
        else:
            # Empty input is stored as one empty chunk: replace it by chunks of the default size.
            kept, rest = [], new
            csize = h.chunk_size or max(DEFAULT_CHUNK_SIZE - DEFAULT_CHUNK_SIZE % itemsize,
                                        itemsize)
            nrest, chunk_size, rest_last = calculate_chunks(rest.nbytes, csize)
            csize = chunk_size
        for j in range(nrest):
            pieces.append(rest[j * csize:j * csize + (rest_last if j == nrest - 1 else csize)])
        nchunks = len(kept) + len(pieces)
        added = nchunks - len(spans)
        if added > h.max_app_chunks:
            raise FormatError(f"cannot append: {added} more chunks needed, only "
                              f"{h.max_app_chunks} offset slots are free", f.path, 24)
        meta_section = None
        if new_meta is not None:
            mh = lay.meta_header
            try:
                # Keep the file's metadata settings; only the shape changes.
                meta_section = encode_metadata(new_meta, checksum=mh.checksum,
                                               codec="zlib" if mh.codec else None,
                                               level=mh.level,
                                               max_meta_size=mh.max_meta_size)[0]
            except ValueError as exc:
                raise FormatError(f"cannot append: the new metadata does not fit its reserved "
                                  f"room ({exc})", f.path, HEADER_SIZE) from None
        typesize = h.typesize or 1
        impl = h.checksum_impl
        compressed = [_compress(p, typesize, cp) for p in pieces]
        new_header = BlpHeader(True, h.metadata, h.checksum, h.typesize, chunk_size,
                               pieces[-1].nbytes, nchunks, h.max_app_chunks - added)
        copy_end = kept[-1].offset + kept[-1].cbytes + impl.size if kept else lay.data_start
        starts, pos = [s.offset for s in kept], copy_end
        for c in compressed:
            starts.append(pos)
            pos += len(c) + impl.size

        def parts() -> Iterator[bytes]:
            yield new_header.pack()
            if h.metadata:
                yield meta_section if meta_section is not None else \
                    f.pread(lay.offsets_offset - HEADER_SIZE, HEADER_SIZE, "metadata")
            yield encode_offsets(starts, new_header.total_slots)
            for at in range(lay.data_start, copy_end, _COPY_BLOCK):
                yield f.pread(min(_COPY_BLOCK, copy_end - at), at, "chunks")
            for c in compressed:
                yield c
                yield impl.digest(c)

        f.store.put(f.key, parts(), fsync=fsync)
        return added
