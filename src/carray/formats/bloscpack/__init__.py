"""Bloscpack single files (``.blp``, format 3), readable and writable by bloscpack 0.16.

A file is a 32-byte header, an optional metadata section (JSON), an optional
table of chunk offsets, then Blosc1 chunks back to back, each followed by its
checksum digest (see :mod:`carray.formats.bloscpack.frame` and docs/formats/bloscpack.md).
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

Packing, unpacking and appending stream: the input is read a chunk at a time,
chunks are compressed or decoded on every core with at most two per thread in
flight, and written in order, so memory holds a few chunks, never the file
(except when the destination is an object store, which takes one put).  Local
files are written under a temporary name and put in place atomically when complete
(:mod:`carray.formats.local_write`), so an interrupted call leaves nothing behind and
readers see the old file or the new one.  Files are written once, so, as bloscpack
and every peer do, nothing waits for the disk by default (``fsync=False``): after a
crash of the machine a new file may be empty or short, but a file that replaces
another is synced before it does, so the old data is never lost with it.  With
``fsync=True`` the new file is on stable storage before it takes the name.
:func:`append` changes a file that holds data and syncs by default.  Every such
function takes a ``progress(done, total)`` callback, called with uncompressed bytes after each chunk.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Generator, Iterable, Iterator
from typing import Any, BinaryIO, NamedTuple

import blosc as _blosc1
import numpy as np

from carray.codecs import blosc
from carray.codecs.checksums import get_checksum
from carray.core.params import CParams, Shuffle
from carray.errors import CodecError, FormatError, UnsupportedDTypeError
from carray.formats.bloscpack.frame import (
    HEADER_SIZE,
    MAX_CHUNK_SIZE,
    MAX_CHUNKS,
    BlpHeader,
    array_spec,
    calculate_chunks,
    dtype_meta,
    encode_metadata,
)
from carray.formats.bloscpack.read import (
    MAX_RATIO,
    BlpFile,
    ChunkSpan,
    Layout,
    Progress,
    flat_bytes,
    in_parallel,
)
from carray.formats.bloscpack.stream import (
    ArraySource,
    NpyInfo,
    Source,
    StridedSource,
    both_orders,
    bytes_source,
    is_file_object,
    npy_header,
    npy_source,
    open_npy,
)
from carray.formats.bloscpack.write import put_blp, put_stream
from carray.stores import resolve

__all__ = ["DEFAULT_CHUNK_SIZE", "DEFAULT_CPARAMS", "DEFAULT_TYPESIZE", "MAX_RATIO",
           "ChunkSpan", "Layout", "append", "info", "pack_array", "pack_bytes", "pack_npy",
           "parse_size", "unpack_array", "unpack_bytes", "unpack_file"]

PathLike = str | os.PathLike

#: bloscpack's defaults: 1 MiB chunks, clevel 7, byte shuffle, blosclz, typesize 8 for bytes.
DEFAULT_CHUNK_SIZE = 2**20
DEFAULT_CPARAMS = CParams(clevel=7, cname="blosclz", shuffle=Shuffle.SHUFFLE)
DEFAULT_TYPESIZE = 8
_SUFFIXES = {"": 1, "B": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
#: Old chunks are copied by an append in pieces of this size.
_COPY_BLOCK = 2**20

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



# -- writing ----------------------------------------------------------------------------------

def _reporting(items: Iterable[Any], sizes: Iterable[int], total: int,
               progress: Progress | None) -> Iterator[Any]:
    """``items`` passed through; ``progress(done, total)`` is told once each is consumed
    (written), ``sizes`` giving the uncompressed bytes each stands for."""
    if progress is None:
        yield from items
        return
    done = 0
    progress(0, total)
    for item, n in zip(items, sizes):  # noqa: B905 - as many sizes as items, sizes lazy
        yield item
        done += n
        progress(done, total)


def _encoded(pieces: Iterable[np.ndarray], npieces: int, typesize: int, cp: CParams,
             checksum: Any) -> Generator[tuple[bytes, bytes], None, None]:
    """Each piece compressed, with its digest, in order (on all cores, a few in flight)."""
    def encode(piece: np.ndarray) -> tuple[bytes, bytes]:
        compressed = _compress(piece, typesize, cp)
        return compressed, checksum.digest(compressed) if checksum.size else b""

    return in_parallel(encode, pieces, npieces)


def _sizes(nchunks: int, csize: int, last: int) -> Iterator[int]:
    return (last if i == nchunks - 1 else csize for i in range(nchunks))


def _pack(source: Source, path: PathLike, *, typesize: int, chunk_size: int, metadata: Any,
          progress: Progress | None, cparams: CParams | dict | None = None,
          checksum: str | None = "adler32", offsets: bool = True,
          max_app_chunks: int | Callable | None = None, meta_checksum: str | None = "adler32",
          meta_codec: str | None = "zlib", meta_level: int = 6,
          max_meta_size: int | None = None, fsync: bool = False,
          storage_options: dict | None = None) -> None:
    cp = _cparams(cparams)
    impl = get_checksum(checksum)
    if not 1 <= typesize <= 255:
        raise ValueError(f"typesize must be 1..255, got {typesize}")
    nchunks, csize, last = calculate_chunks(source.nbytes, chunk_size)
    apps = _max_app_chunks(offsets, nchunks, max_app_chunks)
    header = BlpHeader(offsets, metadata is not None, impl.id, typesize, csize, last,
                       nchunks, apps)
    meta = b"" if metadata is None else encode_metadata(
        metadata, checksum=meta_checksum, codec=meta_codec, level=meta_level,
        max_meta_size=max_meta_size)[0]
    store, key = resolve(path, storage_options)
    pieces = (source.read(n) for n in _sizes(nchunks, csize, last))  # read as compressed
    with contextlib.closing(_encoded(pieces, nchunks, typesize, cp, impl)) as chunks:
        put_blp(store, key, [header.pack(), meta], header.total_slots,
                _reporting(chunks, _sizes(nchunks, csize, last), source.nbytes, progress),
                fsync)


def _chain(*iterables) -> Iterator[Any]:
    for it in iterables:
        yield from it


def _array_chunking(dtype: np.dtype, shape: tuple[int, ...], order: str, nbytes: int,
                    chunk_size: int | str | None, metadata: dict | None
                    ) -> tuple[int, dict[str, Any]]:
    """The chunk size and the metadata of an array file (checks both)."""
    if dtype.hasobject:
        raise UnsupportedDTypeError("object arrays cannot be stored in Bloscpack files")
    if not 1 <= dtype.itemsize <= 255:
        raise UnsupportedDTypeError(f"Bloscpack stores the itemsize in one byte: {dtype} has "
                                    f"{dtype.itemsize}-byte items")
    if chunk_size is None:
        csize = max(DEFAULT_CHUNK_SIZE - DEFAULT_CHUNK_SIZE % dtype.itemsize, dtype.itemsize)
    else:
        csize = parse_size(chunk_size)
        if nbytes > csize and csize % dtype.itemsize:
            raise ValueError(f"chunk_size {csize} is not a multiple of the itemsize "
                             f"{dtype.itemsize}")
    meta = {"dtype": dtype_meta(dtype), "shape": list(shape), "order": order,
            "container": "numpy"}
    for key, value in (metadata or {}).items():
        if key in meta:
            raise ValueError(f"metadata key {key!r} is reserved for the array description")
        meta[key] = value
    return csize, meta


def pack_array(array, path: PathLike, *, cparams: CParams | dict | None = None,
               chunk_size: int | str | None = None, checksum: str | None = "adler32",
               offsets: bool = True, max_app_chunks: int | Callable | None = None,
               metadata: dict | None = None, meta_checksum: str | None = "adler32",
               meta_codec: str | None = "zlib", meta_level: int = 6,
               max_meta_size: int | None = None, fsync: bool = False,
               storage_options: dict | None = None,
               progress: Progress | None = None) -> None:
    """Write a NumPy array to a Bloscpack file, as ``bloscpack.pack_ndarray_to_file`` does.

    Parameters
    ----------
    array : array_like
        Any non-object dtype with an itemsize of 1..255 bytes (the header stores
        the itemsize in one byte).  A Fortran-contiguous array is stored in
        Fortran order; anything else in C order.  A contiguous array (a
        ``numpy.memmap`` too) is read a chunk at a time without a copy; any
        other is copied a few rows at a time.  To stream a ``.npy`` file
        without mapping it, see :func:`pack_npy`.
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
        Flush to stable storage before the file takes its name.  False (the default)
        waits for no disk, as bloscpack: readers still see the old file or the new
        one, but a crash of the machine may leave a new file empty or short (a file
        replaced is synced first, so its data is never lost).
    storage_options : dict, optional
        Options of the URL's file system (credentials, endpoint, ...).
    progress : callable, optional
        ``progress(done, total)`` in uncompressed bytes, after every chunk written.

    Raises
    ------
    UnsupportedDTypeError
        Object arrays, or items larger than 255 bytes or of size 0.
    ValueError
        Bad parameters (chunk size not a multiple of the itemsize, unknown checksum).
    """
    a = np.asarray(array)
    order = "F" if np.isfortran(a) else "C"
    csize, meta = _array_chunking(a.dtype, a.shape, order, a.nbytes, chunk_size, metadata)
    contiguous = a.flags.f_contiguous if order == "F" else a.flags.c_contiguous
    source = ArraySource(flat_bytes(a, order)) if contiguous else StridedSource(a)
    _pack(source, path, typesize=a.dtype.itemsize,
          chunk_size=csize, metadata=meta, progress=progress, cparams=cparams,
          checksum=checksum, offsets=offsets, max_app_chunks=max_app_chunks,
          meta_checksum=meta_checksum, meta_codec=meta_codec, meta_level=meta_level,
          max_meta_size=max_meta_size, fsync=fsync, storage_options=storage_options)


def pack_npy(src: PathLike | BinaryIO, path: PathLike, *, cparams: CParams | dict | None = None,
             chunk_size: int | str | None = None, checksum: str | None = "adler32",
             offsets: bool = True, max_app_chunks: int | Callable | None = None,
             metadata: dict | None = None, meta_checksum: str | None = "adler32",
             meta_codec: str | None = "zlib", meta_level: int = 6,
             max_meta_size: int | None = None, fsync: bool = False,
             storage_options: dict | None = None,
             progress: Progress | None = None) -> None:
    """Write the array of a ``.npy`` file to a Bloscpack file, reading it a chunk at a time.

    The result is the file :func:`pack_array` writes for ``numpy.load(src)``, but
    the array is never loaded: memory holds a few chunks whatever its size.

    Parameters
    ----------
    src : str, os.PathLike or binary file object
        A local ``.npy`` file, or a file object positioned at one (seekable).
    path, cparams, chunk_size, checksum, offsets, max_app_chunks, metadata,
    meta_checksum, meta_codec, meta_level, max_meta_size, fsync, storage_options, progress
        As for :func:`pack_array`.

    Raises
    ------
    FormatError
        ``src`` is not a ``.npy`` file or is shorter than its header says.
    UnsupportedDTypeError, ValueError
        As for :func:`pack_array`.
    """
    source, npy = open_npy(src) if isinstance(src, (str, os.PathLike)) else npy_source(src)
    try:
        csize, meta = _array_chunking(npy.dtype, npy.shape, npy.order, npy.nbytes,
                                      chunk_size, metadata)
        _pack(source, path, typesize=npy.dtype.itemsize, chunk_size=csize, metadata=meta,
              progress=progress, cparams=cparams, checksum=checksum, offsets=offsets,
              max_app_chunks=max_app_chunks, meta_checksum=meta_checksum,
              meta_codec=meta_codec, meta_level=meta_level, max_meta_size=max_meta_size,
              fsync=fsync, storage_options=storage_options)
    finally:
        source.close()


def pack_bytes(data, path: PathLike, *, cparams: CParams | dict | None = None,
               typesize: int = DEFAULT_TYPESIZE, chunk_size: int | str | None = None,
               checksum: str | None = "adler32", offsets: bool = True,
               max_app_chunks: int | Callable | None = None, metadata: Any = None,
               meta_checksum: str | None = "adler32", meta_codec: str | None = "zlib",
               meta_level: int = 6, max_meta_size: int | None = None,
               fsync: bool = False, storage_options: dict | None = None,
               progress: Progress | None = None) -> None:
    """Write bytes to a Bloscpack file (``bloscpack.pack_bytes_to_file``).

    ``data`` is a bytes-like object, or a binary file object (seekable, read from
    its position to its end a chunk at a time).  The other parameters are those
    of :func:`pack_array`, plus ``typesize`` (the Blosc typesize of the chunks,
    default 8 as bloscpack); ``metadata`` is any JSON value stored as is
    (default: no metadata section).
    """
    if is_file_object(data):
        source: Source = bytes_source(data)
    else:
        source = ArraySource(np.frombuffer(memoryview(data).cast("B"), dtype=np.uint8))
    _pack(source, path, typesize=typesize, chunk_size=parse_size(chunk_size),
          metadata=metadata, progress=progress, cparams=cparams, checksum=checksum,
          offsets=offsets, max_app_chunks=max_app_chunks, meta_checksum=meta_checksum,
          meta_codec=meta_codec, meta_level=meta_level, max_meta_size=max_meta_size,
          fsync=fsync, storage_options=storage_options)


# -- reading ----------------------------------------------------------------------------------

def _holds_array(lay: Layout) -> bool:
    return isinstance(lay.metadata, dict) and lay.metadata.get("container") == "numpy"


def _array_of(f: BlpFile, lay: Layout, spans: list[ChunkSpan]
              ) -> tuple[np.dtype, tuple[int, ...], str]:
    """dtype, shape and order of an array file, checked against its chunks' size."""
    dtype, shape, order = array_spec(lay.metadata, f.path)
    expected = int(np.prod(shape, dtype=object)) * dtype.itemsize
    total = sum(s.nbytes for s in spans)
    if expected != total:
        raise FormatError(f"metadata shape {list(shape)} x {dtype.itemsize} bytes is "
                          f"{expected} bytes, the chunks hold {total}", f.path, HEADER_SIZE)
    return dtype, shape, order


def unpack_array(path: PathLike, *, out: np.ndarray | None = None, verify: bool = True,
                 progress: Progress | None = None,
                 storage_options: dict | None = None) -> np.ndarray:
    """Read a NumPy array from a Bloscpack file (``bloscpack.unpack_ndarray_from_file``).

    Chunks are decoded straight into the result, on all cores.

    Parameters
    ----------
    path : str or os.PathLike
        A ``.blp`` file holding an array (numpy metadata): a local path or a URL.
    out : numpy.ndarray, optional
        Where to decode: an array (a ``numpy.memmap`` too) of the stored dtype
        and shape, contiguous in the stored order.  Default: a new array.
    verify : bool
        Check every chunk's and the metadata's checksum.
    progress : callable, optional
        ``progress(done, total)`` in uncompressed bytes, after every chunk decoded.
    storage_options : dict, optional
        Options of the URL's file system.

    Returns
    -------
    numpy.ndarray
        With the stored dtype (byte order included), shape and memory order
        (``out`` when given).

    Raises
    ------
    FormatError
        The file is not a valid Bloscpack file or holds no array; the message
        names the file and the offset.
    ChecksumError
        A digest does not match (``verify=True``).
    ValueError
        ``out`` does not match the stored array.
    FileNotFoundError
        There is no such file.
    """
    with BlpFile(path, storage_options) as f:
        lay = f.layout(verify)
        spans = f.spans(lay)
        dtype, shape, order = _array_of(f, lay, spans)
        if out is None:
            out = np.empty(shape, dtype=dtype, order="F" if order == "F" else "C")
        elif out.dtype != dtype or out.shape != shape or not out.flags.writeable or not (
                out.flags.f_contiguous if order == "F" else out.flags.c_contiguous):
            raise ValueError(f"{f.path} holds a {order}-ordered {dtype} array of shape "
                             f"{shape}; out is {out.dtype} {out.shape} and must be writeable "
                             f"and {order}-contiguous")
        f.read_into(lay, spans, flat_bytes(out, order), verify, progress)
        return out


def unpack_bytes(path: PathLike, *, verify: bool = True, progress: Progress | None = None,
                 storage_options: dict | None = None) -> bytes:
    """Read the uncompressed contents of any Bloscpack file as bytes (held whole; see
    :func:`unpack_file` to stream them to a file).

    Takes and raises the same as :func:`unpack_array`.
    """
    with BlpFile(path, storage_options) as f:
        lay = f.layout(verify)
        spans = f.spans(lay)
        out = np.empty(sum(s.nbytes for s in spans), dtype=np.uint8)
        f.read_into(lay, spans, out, verify, progress)
        return out.tobytes()


def unpack_file(path: PathLike, dst: PathLike, *, npy: bool | None = None,
                verify: bool = True, fsync: bool = False, progress: Progress | None = None,
                storage_options: dict | None = None) -> str:
    """Decompress a Bloscpack file into a file, a chunk at a time.

    Chunks are decoded on all cores, a few in flight, and written in order, so
    memory holds a few chunks whatever the file's size.  A local ``dst`` is
    written under a temporary name and renamed when complete.

    Parameters
    ----------
    path : str or os.PathLike
        The ``.blp`` file: a local path or a URL.
    dst : str or os.PathLike
        The file to write (replaced): a local path or a URL (put whole).
    npy : bool, optional
        True: write a ``.npy`` file (the ``.blp`` must hold an array); False: the
        raw bytes; None (default): a ``.npy`` file when it holds an array.
    verify : bool
        Check every chunk's and the metadata's checksum.
    fsync : bool
        Flush ``dst`` to stable storage before the rename (default: not, as for
        :func:`pack_array`).
    progress : callable, optional
        ``progress(done, total)`` in uncompressed bytes, after every chunk written.
    storage_options : dict, optional
        Options of the URLs' file system.

    Returns
    -------
    str
        ``"npy"`` or ``"raw"``: what was written.

    Raises
    ------
    FormatError, ChecksumError, FileNotFoundError
        As for :func:`unpack_array`; nothing is left at ``dst`` then.
    """
    with BlpFile(path, storage_options) as f:
        lay = f.layout(verify)
        spans = f.spans(lay)
        as_npy = _holds_array(lay) if npy is None else npy
        front = npy_header(*_array_of(f, lay, spans)) if as_npy else b""
        total = sum(s.nbytes for s in spans)
        store, key = resolve(dst, storage_options)
        with contextlib.closing(f.decoded(lay, spans, verify)) as chunks:
            sizes = (s.nbytes for s in spans)
            put_stream(store, key, _chain([front], _reporting(chunks, sizes, total, progress)),
                       fsync)
    return "npy" if as_npy else "raw"


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
    with BlpFile(path, storage_options) as f:
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

def _append_source(lay: Layout, data: Any, path: str) -> tuple[Source, Any, int]:
    """The bytes to add, the metadata to store afterwards (None: keep the old section)
    and the item size new chunk sizes must respect."""
    if not _holds_array(lay):
        if is_file_object(data):
            return bytes_source(data), None, 1
        if isinstance(data, np.ndarray):
            return ArraySource(flat_bytes(np.ascontiguousarray(data), "C")), None, 1
        return ArraySource(np.frombuffer(memoryview(data).cast("B"), dtype=np.uint8)), None, 1
    dtype, shape, order = array_spec(lay.metadata, path)
    source: Source
    if is_file_object(data):
        source, npy = npy_source(data)
        if npy.order != order and not both_orders(npy.shape):
            raise ValueError(f"{path} holds a {order}-ordered array, the .npy data is "
                             f"{npy.order}-ordered")
    elif isinstance(data, np.ndarray):
        a = np.asfortranarray(data) if order == "F" else np.ascontiguousarray(data)
        source, npy = ArraySource(flat_bytes(a, order)), NpyInfo(a.dtype, a.shape, order, 0)
    else:
        raise ValueError(f"{path} holds a NumPy array: append an array or a .npy file "
                         f"object, not {type(data).__name__}")
    if npy.dtype != dtype:
        raise ValueError(f"{path} holds {dtype} items, cannot append {npy.dtype}")
    if not shape:
        raise ValueError(f"{path} holds a 0-d array, nothing can be appended to it")
    # C order grows along the first axis, Fortran order along the last.
    axis = 0 if order == "C" else len(shape) - 1
    rest = shape[1:] if order == "C" else shape[:-1]
    new_rest = npy.shape[1:] if order == "C" else npy.shape[:-1]
    if len(npy.shape) != len(shape) or new_rest != rest:
        raise ValueError(f"cannot append shape {npy.shape} to {shape} (order {order}): all "
                         f"but the {'first' if axis == 0 else 'last'} axis must match")
    new_shape = list(shape)
    new_shape[axis] += npy.shape[axis]
    return source, {**lay.metadata, "shape": new_shape}, dtype.itemsize


def _metadata_section(f: BlpFile, lay: Layout, new_meta: Any) -> bytes:
    """The metadata section after an append: the old one, or ``new_meta`` encoded with
    the file's metadata settings within its reserved room."""
    if not lay.header.metadata:
        return b""
    if new_meta is None:
        return f.pread(lay.offsets_offset - HEADER_SIZE, HEADER_SIZE, "metadata")
    mh = lay.meta_header
    if mh is None:  # (a header flagging metadata always has a parsed section)
        raise FormatError("cannot append: the metadata section is missing", f.path, HEADER_SIZE)
    try:
        return encode_metadata(new_meta, checksum=mh.checksum,
                               codec="zlib" if mh.codec else None, level=mh.level,
                               max_meta_size=mh.max_meta_size)[0]
    except ValueError as exc:
        raise FormatError(f"cannot append: the new metadata does not fit its reserved "
                          f"room ({exc})", f.path, HEADER_SIZE) from None


class _AppendPlan(NamedTuple):
    """How appended data continues a file: the refilled last chunk (``first``), the
    old chunks ``kept`` as they are, and the sizes of the new chunks after them."""

    first: list[np.ndarray]
    kept: list[ChunkSpan]
    fill: int
    nrest: int
    chunk_size: int
    rest_last: int


def _append_plan(f: BlpFile, lay: Layout, spans: list[ChunkSpan], src: Any, itemsize: int,
                 verify: bool) -> _AppendPlan:
    h = lay.header
    first: list[np.ndarray] = []
    if h.chunk_size > 0 and spans:
        # Refill the short last chunk, then continue with the file's chunk size.
        old_last = np.empty(spans[-1].nbytes, np.uint8)
        f.read_into(lay, spans[-1:], old_last, verify)
        fill = min(h.chunk_size - old_last.nbytes, src.nbytes)
        first.append(np.concatenate([old_last, src.read(fill)]))
        kept, chunk_size = spans[:-1], h.chunk_size
        nrest, _, rest_last = calculate_chunks(src.nbytes - fill, chunk_size) \
            if src.nbytes > fill else (0, chunk_size, 0)
    else:
        # Empty input is stored as one empty chunk: replace it by chunks of the default size.
        fill, kept = 0, []
        csize = h.chunk_size or max(DEFAULT_CHUNK_SIZE - DEFAULT_CHUNK_SIZE % itemsize,
                                    itemsize)
        nrest, chunk_size, rest_last = calculate_chunks(src.nbytes, csize)
    return _AppendPlan(first, kept, fill, nrest, chunk_size, rest_last)


def append(path: PathLike, data, *, cparams: CParams | dict | None = None,
           verify: bool = True, fsync: bool = True, storage_options: dict | None = None,
           progress: Progress | None = None) -> int:
    """Append an array or bytes to a Bloscpack file with an offsets table.

    As bloscpack does: the short last chunk is filled up to ``chunk_size``
    first, further chunks take reserved offset slots (``max_app_chunks``
    decreases), and the header and offsets are updated.  For array files the
    data must have the stored dtype and match all axes but the first (C order)
    or last (Fortran order); the metadata shape is updated within its reserved
    room.  The new file is written beside the old one and renamed over it, so
    a failure leaves the old file untouched; memory holds a few chunks, not the file.

    Parameters
    ----------
    path : str or os.PathLike
        The file to extend: a local path or a URL (the object is put back whole).
    data : numpy.ndarray, bytes-like or binary file object
        What to append; a file object (seekable, read from its position) holds
        raw bytes, or a ``.npy`` file when ``path`` holds an array.
    cparams : CParams or dict, optional
        Blosc settings of rewritten and new chunks; default bloscpack's.
    verify : bool
        Check the metadata's and the last chunk's checksums first.
    fsync, storage_options
        Flush the new file before the rename; options of the URL's file system.
    progress : callable, optional
        ``progress(done, total)`` in bytes of ``data``, after every chunk written.

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
    with BlpFile(path, storage_options) as f:
        lay = f.layout(verify)
        h = lay.header
        if not h.offsets:
            raise FormatError("cannot append: the file has no offsets table (written with "
                              "offsets disabled)", f.path, 5)
        if h.chunk_size < 0 or h.last_chunk < 0:
            raise FormatError("cannot append: the chunk size is unknown", f.path, 8)
        src, new_meta, itemsize = _append_source(lay, data, f.path)
        if src.nbytes == 0:
            return 0
        spans = f.spans(lay)
        plan = _append_plan(f, lay, spans, src, itemsize, verify)
        first, kept, fill = plan.first, plan.kept, plan.fill
        nrest, chunk_size, rest_last = plan.nrest, plan.chunk_size, plan.rest_last
        nchunks = len(kept) + len(first) + nrest
        added = nchunks - len(spans)
        if added > h.max_app_chunks:
            raise FormatError(f"cannot append: {added} more chunks needed, only "
                              f"{h.max_app_chunks} offset slots are free", f.path, 24)
        new_header = BlpHeader(True, h.metadata, h.checksum, h.typesize, chunk_size,
                               rest_last if nrest else first[0].nbytes, nchunks,
                               h.max_app_chunks - added)
        front = [new_header.pack(), _metadata_section(f, lay, new_meta)]
        copy_end = kept[-1].offset + kept[-1].cbytes + h.checksum_impl.size if kept \
            else lay.data_start
        copied = (f.pread(min(_COPY_BLOCK, copy_end - at), at, "chunks")
                  for at in range(lay.data_start, copy_end, _COPY_BLOCK))
        rest_sizes = list(_sizes(nrest, chunk_size, rest_last)) if nrest else []
        pieces = _chain(first, (src.read(n) for n in rest_sizes))
        sizes = [fill] * len(first) + rest_sizes
        with contextlib.closing(_encoded(pieces, len(sizes), h.typesize or 1, cp,
                                         h.checksum_impl)) as chunks:
            put_blp(f.store, f.key, front, new_header.total_slots,
                    _reporting(chunks, sizes, src.nbytes, progress), fsync,
                    kept=[s.offset for s in kept], copied=copied)
        return added
