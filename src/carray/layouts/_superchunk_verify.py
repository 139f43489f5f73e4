"""Verification of a superchunk dataset, with the parsers its reader uses.

Checks the metadata files (``meta/storage``, ``meta/sizes``, ``meta/attrs``, a
pending journal), then each superchunk file: its Bloscpack header, metadata
section, offsets table (every offset inside the chunk area, no two chunks
overlapping) and every chunk (digest, Blosc header, decoded size, decoding).
Only chunks the dataset's shape needs are looked at, and only as many files as
the shape needs; nothing is written.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator

import numpy as np

from carray import attrvalues
from carray import geometry as geo
from carray.codecs import blosc
from carray.errors import CArrayError, FormatError
from carray.formats._blp_frame import (
    HEADER_SIZE,
    METADATA_HEADER_SIZE,
    BlpHeader,
    MetadataHeader,
    decode_metadata,
)
from carray.grid import NDGrid
from carray.layouts._superchunk_meta import (
    ATTRS_FILE,
    DATA_DIR,
    JOURNAL_FILE,
    META_DIR,
    SIZES_FILE,
    STORAGE_FILE,
    Journal,
    Sizes,
    StorageInfo,
)
from carray.layouts.bcolz import read_json
from carray.layouts.superchunk import superchunk_name
from carray.problems import Checked, Finding, Problem
from carray.stores import Store

_FILE = re.compile(r"sc_(\d{6,})\.blp")


def _at(offset: int | None) -> str:
    return "" if offset is None else f"offset {offset}"


def verify(store: Store, root: str) -> Iterator[Finding]:
    """Yield every problem of the superchunk dataset at ``root`` (and each chunk checked)."""
    def meta(name: str) -> tuple[str, str]:  # (key in the store, name for messages)
        key = store.join(root, META_DIR, name)
        return key, store.url(key)

    storage_key, storage_path = meta(STORAGE_FILE)
    sizes_key, sizes_path = meta(SIZES_FILE)
    try:
        info = StorageInfo.from_json(read_json(storage_key, "meta/storage", store),
                                     storage_path)
        sizes = Sizes.from_json(read_json(sizes_key, "meta/sizes", store), sizes_path)
    except CArrayError as exc:
        yield Problem.from_error(exc, store.url(root))
        return
    if sizes.nbytes != math.prod(sizes.shape) * info.dtype.itemsize:
        yield Problem(sizes_path, "", f"nbytes {sizes.nbytes} != shape {list(sizes.shape)} "
                      f"x item size {info.dtype.itemsize}")
    try:
        grid = NDGrid(sizes.shape, info.chunkshape, info.blockshape or info.chunkshape,
                      max(info.dtype.itemsize, 1))
    except ValueError as exc:
        yield Problem(sizes_path, "", str(exc))
        return
    jkey, jpath = meta(JOURNAL_FILE)
    if store.exists(jkey):
        journal = Journal.decode(store.get(jkey))
        if journal is not None and journal.generation == sizes.generation + 1:
            yield Problem(jpath, "", "an interrupted commit is pending; open the dataset in "
                          "mode 'a' to complete it (checked as committed)")
    yield from _verify_attrs(store, *meta(ATTRS_FILE))
    S = info.superchunksize
    nchunks = grid.nchunks
    # Bounded by the files on disk, not by the shape meta/sizes claims.
    needed = math.ceil(nchunks / S)
    present = _superchunk_files(store, root)
    nfiles = min(needed, max(present, default=-1) + 1)
    # Chunks below fill_chunks may be absent (only the fill value; Blosc2 datasets only).
    fill = 0 if info.blosc1 else min(sizes.fill_chunks, nchunks)
    for k in range(nfiles):
        if k in present or (k + 1) * S > fill:
            yield from _verify_file(store, root, info, grid, k, min(S, nchunks - k * S),
                                    fill)
    if needed > nfiles and nchunks > fill:  # one problem for the whole missing run
        first = store.url(store.join(root, DATA_DIR, superchunk_name(nfiles)))
        others = needed - nfiles - 1
        yield Problem(first, "", "missing" + (f", and the {others} files after it" if others
                                              else "")
                      + f" (holds chunks {nfiles * S}..{nchunks - 1}; meta/sizes says shape "
                      f"{list(sizes.shape)})")


def _superchunk_files(store: Store, root: str) -> set[int]:
    """The numbers of the superchunk files under ``data/``."""
    data = store.join(root, DATA_DIR)
    if not store.isdir(data):
        return set()
    return {k for k in (_number(name) for name in store.listdir(data)) if k is not None}


def _number(name: str) -> int | None:
    m = _FILE.fullmatch(name)
    return int(m.group(1)) if m else None


def _verify_attrs(store: Store, key: str, path: str) -> Iterator[Problem]:
    if not store.exists(key):
        return
    try:
        attrs = read_json(key, "meta/attrs", store)
    except CArrayError as exc:
        yield Problem.from_error(exc, path)
        return
    if not isinstance(attrs, dict):
        yield Problem(path, "", "meta/attrs must hold a JSON object")
        return
    for name, value in attrs.items():
        try:
            attrvalues.decode_typed(value)
        except (TypeError, ValueError, KeyError, IndexError, OverflowError,
                RecursionError) as exc:
            yield Problem(path, "", f"attribute {name!r}: {exc}")


def _allowed_nbytes(grid: NDGrid, n: int, c_order: bool) -> tuple[int, ...]:
    """Decoded sizes chunk ``n`` may have: full, or (C order) just its rows when in the
    last partial run of rows."""
    full = grid.chunk_nbytes
    if not grid.ndim:  # a 0-d array: one chunk of one item
        return (full,)
    row0 = grid.chunk_coords(n)[0]
    if not c_order or (row0 + 1) * grid.chunks[0] <= grid.shape[0]:
        return (full,)
    rows = grid.shape[0] - row0 * grid.chunks[0]
    return (full, full // grid.ext_chunks[0] * rows)


def _verify_file(store: Store, root: str, info: StorageInfo, grid: NDGrid, k: int,
                 count: int, fill: int) -> Iterator[Finding]:
    key = store.join(root, DATA_DIR, superchunk_name(k))
    path = store.url(key)
    S = info.superchunksize
    try:
        handle = store.open(key)
    except FileNotFoundError:
        yield Problem(path, "", f"missing (holds chunks {k * S}..{k * S + count - 1})")
        return
    with handle:
        size = handle.size
        read: Callable[[int, int], bytes] = handle.pread
        if store.remote:  # one request for the file, not two for every chunk
            whole = memoryview(handle.pread(size, 0))

            def read(n: int, offset: int) -> bytes:
                return bytes(whole[offset:offset + n])
        yield from _verify_frame(read, size, path, info, grid, k, count, fill)


def _verify_frame(read: Callable[[int, int], bytes], size: int, path: str,
                  info: StorageInfo, grid: NDGrid, k: int, count: int,
                  fill: int) -> Iterator[Finding]:
    S = info.superchunksize
    try:
        header = BlpHeader.unpack(read(HEADER_SIZE, 0), path)
        ck = header.checksum_impl
        if ck.name != info.checksum:
            yield Problem(path, _at(6), f"checksum {ck.name}, meta/storage says "
                          f"{info.checksum}")
        if not (header.offsets and header.metadata) or header.total_slots != S:
            raise FormatError(f"header has {header.total_slots} offset slots (metadata "
                              f"{header.metadata}), expected {S}", path, 16)
        mh = MetadataHeader.unpack(read(METADATA_HEADER_SIZE, HEADER_SIZE), path)
        if HEADER_SIZE + mh.section_size > size:
            raise FormatError(f"metadata section ({mh.section_size} bytes) runs past the "
                              f"end of the file ({size} bytes)", path, HEADER_SIZE)
        try:
            decode_metadata(read(mh.section_size, HEADER_SIZE), path)
        except CArrayError as exc:
            yield Problem.from_error(exc, path)
        table_pos = HEADER_SIZE + mh.section_size
        data_start = table_pos + 8 * S
        if data_start > size:
            raise FormatError(f"offsets table runs past the end of the file ({size} bytes)",
                              path, table_pos)
        table = np.frombuffer(read(8 * S, table_pos), "<i8")
    except CArrayError as exc:
        yield Problem.from_error(exc, path)
        return
    if header.nchunks < count and fill <= k * S:  # absent chunks end the header's count
        yield Problem(path, _at(16), f"header says {header.nchunks} chunks, the dataset "
                      f"needs {count} here")
    c_order = info.blockshape is None or geo.blocked_is_c_order(grid.ext_chunks, grid.blocks)
    regions: list[tuple[int, int, int]] = []
    for slot in range(count):
        n = k * S + slot
        off = int(table[slot])
        if off == -1 and n < fill:
            continue  # an absent chunk: the fill value
        if off < data_start or off >= size:
            yield Problem(path, _at(table_pos + 8 * slot), f"chunk {n}: offset {off} outside "
                          f"the chunk area [{data_start}, {size})")
            continue
        try:
            h = blosc.read_header(read(blosc.BLOSC1_HEADER, off), path, off, size=size - off)
            if off + h.cbytes + ck.size > size:
                raise FormatError(f"chunk {n}: checksum runs past the end of the file",
                                  path, off + h.cbytes)
            rec = read(h.cbytes + ck.size, off)
            regions.append((off, off + len(rec), n))
            chunk = memoryview(rec)[:h.cbytes]
            good = True
            if ck.size and ck.digest(chunk) != rec[h.cbytes:]:
                yield Problem(path, _at(off + h.cbytes), f"chunk {n}: {ck.name} checksum "
                              "mismatch")
                good = False
            blosc.validate_chunk(chunk, None, path, off)
            allowed = _allowed_nbytes(grid, n, c_order)
            if h.nbytes not in allowed:
                raise FormatError(f"chunk {n} holds {h.nbytes} bytes, expected "
                                  f"{' or '.join(map(str, allowed))}", path, off)
            blosc.decompress(chunk, path)
            if good:
                yield Checked(path)
        except CArrayError as exc:
            p = Problem.from_error(exc, path)
            yield p if f"chunk {n}" in p.what else Problem(p.path, p.where, f"chunk {n}: "
                                                           f"{p.what}")
    regions.sort()
    for (_, end, a), (start, _, b) in zip(regions, regions[1:], strict=False):
        if start < end:
            yield Problem(path, _at(start), f"chunks {a} and {b} overlap")
