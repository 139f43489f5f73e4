"""The JSON and journal files of a superchunk dataset (see :mod:`carray.layouts.superchunk.layout`).

* ``meta/storage``: how chunks are stored, written once at creation.
* ``meta/sizes``: length, nbytes, cbytes and the commit generation, rewritten
  atomically (temporary name + rename) by every commit; the only authority on
  the length.
* ``meta/attrs``: user attributes, each stored with its type (and dtype for
  numpy values), e.g. ``{"value": 23.5, "type": "scalar", "dtype": "<f4"}``
  (docs/formats/attributes.md, "The typed form"); the encoding is
  :mod:`carray.attrs.values`'s typed form.
* ``meta/journal``: a redo log of the byte writes one commit makes to
  superchunk files that the last committed state still references.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import struct
import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from carray.codecs.blosc import MAX_BUFFERSIZE
from carray.codecs.pipeline import check_blosc1_filters
from carray.core.checkedjson import check_keys, dumps_checked, load_checked, require_digest
from carray.core.dtypes import checked_shape
from carray.core.params import CNAMES, FILTER_CODES, CParams
from carray.errors import FormatError
from carray.layouts.bcolz.layout import decode_dflt, encode_dflt, parse_dtype
from carray.stores import Store

FORMAT_NAME = "carray-superchunk"
DATA_DIR, META_DIR = "data", "meta"
STORAGE_FILE, SIZES_FILE, ATTRS_FILE = "storage", "sizes", "attrs"
JOURNAL_FILE = "journal"
#: 4 checksums ``meta/storage`` and ``meta/member`` (:mod:`carray.core.checkedjson`); 3 keeps
#: versions (manifests and index pages in ``versions/``) and page digests; 2 added
#: ``blockshape`` (chunks stored block by block); 1 and 2 are read and upgraded.
FORMAT_VERSION = 4
READABLE_VERSIONS = (1, 2, 3, 4)
#: The first version whose metadata files carry a checksum.
CHECKED_VERSION = 4
#: Every key of ``meta/storage`` (``atomshape``: version 1's row shape, checked against
#: ``chunkshape``; ``page_size`` from version 3 on).
_STORAGE_KEYS = frozenset({
    "format", "format_version", "dtype", "chunkshape", "blockshape", "chunklen",
    "superchunksize", "endianness", "order", "codec", "filters", "checksum", "spare", "dflt",
    "expectedlen", "page_size", "atomshape"})
_CODEC_KEYS = frozenset({"library", "cname", "clevel", "typesize"})
#: Bytes per digested page of a stored chunk in new records (see codecs/pages.py).
DEFAULT_PAGE_SIZE = 4096


def dumps(obj: Any) -> bytes:
    """Every metadata file: ASCII JSON, one trailing newline."""
    return (json.dumps(obj, ensure_ascii=True) + "\n").encode("ascii")


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


# -- meta/storage ----------------------------------------------------------------------------

@dataclass(frozen=True)
class StorageInfo:
    """The parsed ``meta/storage`` file: everything fixed at creation.

    Parameters
    ----------
    dtype : numpy.dtype
        The item type.
    chunkshape : tuple of int
        The chunk shape (its first entry is the rows per chunk).
    blockshape : tuple of int or None
        The block shape when chunks are stored block by block, else None.
    superchunksize : int
        Chunks per superchunk file (offset slots in each file).
    checksum : str
        Name of the digest stored after every chunk.
    spare : float
        Fraction of a chunk's size left free after it for in-place rewrites.
    blosc1 : bool
        Chunks are Blosc1 (so the files are plain Bloscpack when ``spare`` is 0).
    """

    dtype: np.dtype
    chunkshape: tuple[int, ...]
    blockshape: tuple[int, ...] | None
    superchunksize: int
    checksum: str
    spare: float
    blosc1: bool
    cparams: CParams
    dflt: Any
    expectedlen: int
    typesize: int
    order: str = "C"  # 'F': the stored array is the transpose of the one users see
    #: Page digest size of new records (0: none, Bloscpack-compatible files).
    page_size: int = DEFAULT_PAGE_SIZE
    #: The format version the directory is in (below 3: upgraded by the first commit).
    version: int = FORMAT_VERSION

    def __post_init__(self) -> None:
        if self.blosc1:  # a Blosc1 chunk records one shuffle: refuse more, before any write
            check_blosc1_filters(self.cparams)

    @property
    def chunklen(self) -> int:
        return self.chunkshape[0] if self.chunkshape else 1  # a 0-d array: one item

    def replace(self, **changes: Any) -> StorageInfo:
        return dataclasses.replace(self, **changes)

    @property
    def chunk_nbytes(self) -> int:
        """Decoded bytes of a full stored chunk (rounded up to whole blocks)."""
        blocks = self.blockshape or self.chunkshape
        ext = [-(-c // b) * b for c, b in zip(self.chunkshape, blocks, strict=True)]
        return self.dtype.itemsize * math.prod(ext)

    def encode(self) -> bytes:
        """The ``meta/storage`` file (with its checksum from version 4 on)."""
        obj = self.to_json()
        return dumps_checked(obj) if self.version >= CHECKED_VERSION else dumps(obj)

    def to_json(self) -> dict[str, Any]:
        # quantize first (it runs before Blosc), then Blosc2's pipeline in order;
        # a filter with a meta value is written "name:meta" (e.g. "trunc_prec:10").
        filters = []
        if self.cparams.quantize:
            filters.append(f"quantize:{self.cparams.quantize}")
        filters += [f"{name}:{meta}" if meta else name
                    for name, meta in self.cparams.filters or ()]
        order = self.dtype.byteorder
        endian = {"<": "little", ">": "big", "|": "none"}.get(
            order, "little" if np.little_endian else "big")
        return {
            "format": FORMAT_NAME,
            "format_version": self.version,
            "dtype": str(self.dtype),
            "chunkshape": list(self.chunkshape),
            "blockshape": None if self.blockshape is None else list(self.blockshape),
            "chunklen": self.chunklen,
            "superchunksize": self.superchunksize,
            "endianness": endian,
            "order": self.order,
            "codec": {"library": "blosc1" if self.blosc1 else "blosc2",
                      "cname": self.cparams.cname, "clevel": self.cparams.clevel,
                      "typesize": self.typesize},
            "filters": filters,
            "checksum": self.checksum,
            "spare": self.spare,
            "dflt": encode_dflt(np.asarray(self.dflt)),
            "expectedlen": self.expectedlen,
            **({"page_size": self.page_size} if self.version >= 3 else {}),
        }

    @classmethod
    def from_json(cls, obj: Any, path: str) -> StorageInfo:
        """Validate a parsed ``meta/storage``; every problem is a FormatError naming ``path``."""
        from carray.codecs.checksums import get_checksum

        def need(cond: bool, message: str) -> None:
            if not cond:
                raise FormatError(message, path)

        need(isinstance(obj, dict), "meta/storage must hold a JSON object")
        need(obj.get("format") == FORMAT_NAME, f"not a {FORMAT_NAME} dataset")
        version = obj.get("format_version")
        need(_is_int(version) and version in READABLE_VERSIONS,
             f"unsupported {FORMAT_NAME} format version {version!r} (this build reads "
             f"{', '.join(map(str, READABLE_VERSIONS))})")
        check_keys(obj, _STORAGE_KEYS if version < 3 else _STORAGE_KEYS - {"atomshape"},
                   path, "meta/storage")
        for key in ("dtype", "chunkshape", "superchunksize", "codec", "checksum"):
            need(key in obj, f"meta/storage has no {key!r}")
        need(version < 3 or "page_size" in obj, "meta/storage has no 'page_size'")
        dtype = parse_dtype(obj.get("dtype"), path)
        need(dtype != np.dtype(object), "object dtype cannot be stored in this layout")
        chunkshape, blockshape = obj.get("chunkshape"), obj.get("blockshape")
        need(isinstance(chunkshape, list) and all(_is_int(n) and n >= 1 for n in chunkshape),
             f"chunkshape must be a list of ints >= 1 ([] for a 0-d array), got "
             f"{chunkshape!r}")
        _check_redundant(obj, dtype, chunkshape, path)
        need(blockshape is None or (
            isinstance(blockshape, list) and len(blockshape) == len(chunkshape)
            and all(_is_int(b) and 1 <= b <= c for b, c in zip(blockshape, chunkshape,
                                                               strict=True))),
             f"blockshape must be null or one int per axis in 1..chunkshape, got "
             f"{blockshape!r}")
        ext = [-(-c // b) * b for c, b in zip(chunkshape, blockshape or chunkshape, strict=True)]
        # Checked before anything is allocated for a chunk: a bigger one cannot be a
        # Blosc buffer, so only a damaged or hostile file claims it.
        need(dtype.itemsize * math.prod(ext) <= MAX_BUFFERSIZE,
             f"chunks of shape {tuple(chunkshape)} and dtype {dtype} exceed Blosc's "
             f"{MAX_BUFFERSIZE} bytes")
        sc = obj.get("superchunksize")
        need(_is_int(sc) and 1 <= sc <= 2**24,
             f"superchunksize must be an int in 1..2**24, got {sc!r}")
        order = obj.get("order", "C")
        need(order in ("C", "F"), f"order must be 'C' or 'F', got {order!r}")
        checksum = obj.get("checksum")
        try:
            checksum = get_checksum(checksum).name
        except ValueError as exc:
            raise FormatError(f"meta/storage: {exc}", path) from None
        spare = obj.get("spare", 0.0)
        need(isinstance(spare, (int, float)) and not isinstance(spare, bool)
             and 0 <= spare <= 10, f"spare must be a number in [0, 10], got {spare!r}")
        cparams, library, typesize = _codec_from_json(obj, path)
        expectedlen = obj.get("expectedlen", 0)
        need(_is_int(expectedlen) and expectedlen >= 0,
             f"expectedlen must be an int >= 0, got {expectedlen!r}")
        page_size = obj.get("page_size", 0) if version >= 3 else 0
        need(page_size == 0 or (_is_int(page_size) and 512 <= page_size <= 2**20
                                and not page_size & (page_size - 1)),
             f"page_size must be 0 or a power of two in 512..2**20, got {page_size!r}")
        return cls(dtype=dtype, chunkshape=tuple(chunkshape),
                   blockshape=None if blockshape is None else tuple(blockshape),
                   superchunksize=sc,
                   checksum=checksum, spare=float(spare), blosc1=library == "blosc1",
                   cparams=cparams, dflt=decode_dflt(obj.get("dflt"), dtype, path),
                   expectedlen=expectedlen, typesize=typesize,
                   order=order, page_size=page_size, version=version)


def _codec_from_json(obj: dict[str, Any], path: str) -> tuple[CParams, str, int]:
    """The codec parameters, Blosc library and typesize ``meta/storage`` records."""

    def need(cond: bool, message: str) -> None:
        if not cond:
            raise FormatError(message, path)

    codec: Any = obj.get("codec")
    need(isinstance(codec, dict), "codec must be a JSON object")
    check_keys(codec, _CODEC_KEYS, path, "meta/storage codec")
    library = codec.get("library")
    need(library in ("blosc1", "blosc2"), f"unknown codec library {library!r}")
    need(codec.get("cname") in CNAMES, f"unknown codec {codec.get('cname')!r}")
    filters = obj.get("filters", [])
    need(isinstance(filters, list) and all(isinstance(f, str) for f in filters),
         "filters must be a list of names")
    pipeline, quantize = [], 0
    for f in filters:
        name, _, meta = f.partition(":")
        if name == "quantize" and meta.isdigit():
            quantize = int(meta)
        elif name in FILTER_CODES and (meta.isdigit() or not meta):
            pipeline.append((name, int(meta or 0)))
        else:
            raise FormatError(f"unknown filter {f!r}", path)
    need(library == "blosc2" or pipeline in ([], [("shuffle", 0)], [("bitshuffle", 0)]),
         f"Blosc1 chunks cannot hold the filters {filters!r}")
    clevel = codec.get("clevel", 5)
    need(_is_int(clevel) and 0 <= clevel <= 9, f"clevel must be an int in 0..9, got {clevel!r}")
    try:
        cparams = CParams(clevel=clevel, cname=codec["cname"],
                          quantize=quantize, filters=tuple(pipeline))
    except (TypeError, ValueError) as exc:
        raise FormatError(f"bad codec parameters: {exc}", path) from None
    typesize = codec.get("typesize", 1)
    need(_is_int(typesize) and 1 <= typesize <= 255, f"bad typesize {typesize!r}")
    return cparams, library, typesize


# -- meta/sizes ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Sizes:
    """The parsed ``meta/sizes``: the committed length and the commit generation.

    ``fill_chunks``: chunks numbered below it may be absent (no offset, or no
    superchunk file), holding only the fill value; 0 (and no key) when none may.
    """

    shape: tuple[int, ...]
    nbytes: int
    cbytes: int
    generation: int
    fill_chunks: int = 0

    @property
    def length(self) -> int:
        return self.shape[0] if self.shape else 1  # a 0-d array holds one item

    def to_json(self) -> dict[str, Any]:
        obj = {"shape": list(self.shape), "length": self.length,
               "nbytes": self.nbytes, "cbytes": self.cbytes, "generation": self.generation}
        if self.fill_chunks:
            obj["fill_chunks"] = self.fill_chunks
        return obj

    @classmethod
    def from_json(cls, obj: Any, path: str) -> Sizes:
        if not isinstance(obj, dict):
            raise FormatError("meta/sizes must hold a JSON object", path)
        check_keys(obj, ("shape", "length", "nbytes", "cbytes", "generation", "fill_chunks"),
                   path, "meta/sizes")
        vals: list[Any] = [obj.get(k) for k in ("length", "nbytes", "cbytes", "generation")]
        if not all(_is_int(v) and v >= 0 for v in vals):
            raise FormatError("meta/sizes needs ints >= 0 for length, nbytes, cbytes and "
                              f"generation, got {vals!r}", path)
        shape = obj.get("shape")
        if not (isinstance(shape, list) and all(_is_int(n) and n >= 0 for n in shape)
                and (shape[0] == vals[0] if shape else vals[0] == 1)):
            raise FormatError(f"meta/sizes needs a shape (ints >= 0) starting with the length "
                              f"{vals[0]} (or [] with length 1), got {shape!r}", path)
        fill = obj.get("fill_chunks", 0)
        if not (_is_int(fill) and fill >= 0):
            raise FormatError(f"meta/sizes fill_chunks must be an int >= 0, got {fill!r}", path)
        nbytes, cbytes, generation = vals[1:]
        return cls(checked_shape(shape, itemsize=1, source=path), nbytes, cbytes, generation,
                   fill_chunks=fill)


# -- meta/journal ----------------------------------------------------------------------------

JOURNAL_MAGIC = b"CAJRNL01"
_J_HEAD = struct.Struct("<8sQI")     # magic, generation, number of writes
_J_WRITE = struct.Struct("<IQI")     # superchunk number, file offset, length
_J_TAIL = struct.Struct("<QI")       # total bytes before the tail, crc32 of them


@dataclass(frozen=True)
class Journal:
    """One commit's redo log: byte writes into superchunk files, then the new sizes.

    Replaying it is idempotent (every write is absolute), so a crash during
    replay is repaired by replaying again.
    """

    generation: int
    writes: tuple[tuple[int, int, bytes], ...]
    sizes: bytes

    def encode(self) -> bytes:
        parts = [_J_HEAD.pack(JOURNAL_MAGIC, self.generation, len(self.writes))]
        for k, offset, data in self.writes:
            parts.append(_J_WRITE.pack(k, offset, len(data)))
            parts.append(bytes(data))
        parts.append(struct.pack("<I", len(self.sizes)))
        parts.append(self.sizes)
        body = b"".join(parts)
        return body + _J_TAIL.pack(len(body), zlib.crc32(body) & 0xFFFFFFFF)

    @classmethod
    def decode(cls, buf: bytes) -> Journal | None:
        """The journal, or None when it is incomplete or damaged (then it is discarded)."""
        if len(buf) < _J_HEAD.size + 4 + _J_TAIL.size:
            return None
        total, crc = _J_TAIL.unpack_from(buf, len(buf) - _J_TAIL.size)
        if total != len(buf) - _J_TAIL.size or zlib.crc32(buf[:total]) & 0xFFFFFFFF != crc:
            return None
        magic, generation, nwrites = _J_HEAD.unpack_from(buf, 0)
        if magic != JOURNAL_MAGIC:
            return None
        pos, writes = _J_HEAD.size, []
        try:
            for _ in range(nwrites):
                k, offset, length = _J_WRITE.unpack_from(buf, pos)
                pos += _J_WRITE.size
                if pos + length > total:
                    return None
                writes.append((k, offset, buf[pos:pos + length]))
                pos += length
            (nsizes,) = struct.unpack_from("<I", buf, pos)
            pos += 4
            sizes = buf[pos:pos + nsizes]
        except struct.error:
            return None
        if pos + nsizes != total:
            return None
        return cls(generation, tuple(writes), sizes)


MEMBER_FILE = "member"


def write_member_note(store: Store, rootdir: str, dataset_root: str, name: str,
                      fsync: bool) -> None:
    """Record in a member's ``meta/member`` where its dataset is (relative) and its name,
    so that opening the member's directory alone finds them."""
    rel = os.path.relpath(dataset_root, rootdir) if not store.remote else \
        "/".join([".."] * (name.count("/") + 1))
    note = {"dataset": rel.replace(os.sep, "/"), "name": name,
            "format_version": FORMAT_VERSION}
    store.put(store.join(rootdir, META_DIR, MEMBER_FILE), dumps_checked(note), fsync=fsync)


def read_member_note(store: Store, rootdir: str) -> tuple[str, str] | None:
    """``(dataset root, member name)`` from a member's ``meta/member`` (None: not one).
    The dataset must be a directory above the member's (``..`` parts only: a note
    pointing elsewhere is refused); a note written before checksums has no
    ``format_version``."""
    key = store.join(rootdir, META_DIR, MEMBER_FILE)
    url = store.url(key)
    try:
        data = store.get(key)
    except FileNotFoundError:
        return None
    obj, checked = load_checked(data, url, "meta/member")
    if not isinstance(obj, dict) or not isinstance(obj.get("dataset"), str) or \
            not isinstance(obj.get("name"), str):
        raise FormatError("meta/member must name the dataset and the member", url)
    check_keys(obj, ("dataset", "name", "format_version"), url, "meta/member")
    version = obj.get("format_version", 3)
    if version not in (3, CHECKED_VERSION) or ("format_version" in obj) != (version == 4):
        raise FormatError(f"meta/member: unsupported format_version {version!r}", url)
    require_digest(checked, version >= CHECKED_VERSION, url, "meta/member")
    parts = obj["dataset"].split("/")
    name_parts = obj["name"].split("/")
    if any(p != ".." for p in parts) or len(parts) != len(name_parts) or \
            any(p in ("", ".", "..") for p in name_parts):
        raise FormatError(f"meta/member: the dataset {obj['dataset']!r} is not the directory "
                          f"that holds member {obj['name']!r}", url)
    root = rootdir
    for part in reversed(name_parts):
        if store.basename(root.rstrip("/")) != part:
            raise FormatError(f"meta/member: member {obj['name']!r} is not this directory",
                              url)
        root = store.dirname(root.rstrip("/"))
    return root, obj["name"]


def read_info(store: Store, rootdir: str) -> StorageInfo:
    """The ``meta/storage`` of the dataset at ``rootdir``, checked (its checksum from
    version 4 on)."""
    key = store.join(rootdir, META_DIR, STORAGE_FILE)
    url = store.url(key)
    try:
        data = store.get(key)
    except FileNotFoundError:
        raise FormatError("meta/storage file is missing", url) from None
    obj, checked = load_checked(data, url, "meta/storage")
    info = StorageInfo.from_json(obj, url)
    require_digest(checked, info.version >= CHECKED_VERSION, url, "meta/storage")
    return info


def _check_redundant(obj: dict[str, Any], dtype: np.dtype, chunkshape: list[int],
                     path: str) -> None:
    """What ``meta/storage`` repeats must agree: ``chunklen`` with the chunk shape,
    ``endianness`` with the dtype, version 1's ``atomshape`` with the chunk shape."""
    chunklen = obj.get("chunklen", chunkshape[0] if chunkshape else 1)
    if not (_is_int(chunklen) and chunklen == (chunkshape[0] if chunkshape else 1)):
        raise FormatError(f"meta/storage: chunklen {chunklen!r} does not match chunkshape "
                          f"{chunkshape!r}", path)
    if "atomshape" in obj and obj["atomshape"] != chunkshape[1:]:
        raise FormatError(f"meta/storage: atomshape {obj['atomshape']!r} does not match "
                          f"chunkshape {chunkshape!r}", path)
    endian = obj.get("endianness")
    order = dtype.byteorder if dtype.names is None else "|"
    allowed = {"<": ("little",), ">": ("big",), "|": ("none", "little", "big")}.get(
        order, ("little",) if np.little_endian else ("big",))
    if endian is not None and endian not in allowed:
        raise FormatError(f"meta/storage: endianness {endian!r} does not match dtype "
                          f"{dtype}", path)
