"""``carray verify PATH...``: check every chunk of a dataset and report every problem found.

Superchunk datasets (:mod:`carray.layouts.superchunk`): metadata files, each
superchunk file's Bloscpack header, metadata section and digest, offsets (in
bounds, not overlapping), every chunk's checksum, Blosc header, size and
decodability.  bcolz 1.x directories: metadata, chunk file headers and
decodability.  Blosc2 frames: header, metalayers, offsets and every chunk.  ctable
directories: every column.  Datasets may be local or at URLs (any store, see
:mod:`carray.stores`).  Nothing is written.
"""

from __future__ import annotations

import argparse
import math
import os

import numpy as np

from carray.cli.main import add_storage_options
from carray.codecs import blosc
from carray.convert import options_for
from carray.errors import CArrayError, FormatError
from carray.formats import _b2nd_geometry as geo
from carray.formats._blp_frame import (
    HEADER_SIZE,
    METADATA_HEADER_SIZE,
    BlpHeader,
    MetadataHeader,
    decode_metadata,
)
from carray.grid import NDGrid
from carray.layouts import superchunk as sc_mod
from carray.layouts._superchunk_meta import Journal, Sizes, StorageInfo, decode_attr
from carray.layouts.b2frame import B2ndLayout, is_b2nd_frame
from carray.layouts.bcolz import BcolzLayout, is_bcolz_carray, read_json
from carray.stores import Store, resolve


def verify_path(path: str | os.PathLike,
                storage_options: dict | None = None) -> tuple[list[str], int]:
    """Check a dataset; returns (problems, number of chunks checked).

    ``path`` is a local path or any fsspec URL (``storage_options`` go to its file
    system); problems name files as the user would (:meth:`Store.url`).
    """
    path = os.fspath(path)
    store, key = resolve(path, options_for(path, storage_options))
    return _verify(store, key)


def _verify(store: Store, path: str) -> tuple[list[str], int]:
    if sc_mod.is_superchunk_dataset(path, store):
        return _verify_superchunk(store, path)
    if is_bcolz_carray(path, store):
        return _verify_bcolz(store, path)
    if is_b2nd_frame(path, store):
        return _verify_b2nd(store, path)
    if store.isfile(store.join(path, "__rootdirs__")):
        problems: list[str] = []
        checked = 0
        for name in sorted(store.listdir(path)):
            sub = store.join(path, name)
            if store.isdir(sub) and (sc_mod.is_superchunk_dataset(sub, store)
                                     or is_bcolz_carray(sub, store)):
                p, n = _verify(store, sub)
                problems += p
                checked += n
        return problems, checked
    return [f"{store.url(path)}: not a carray dataset (no meta/storage)"], 0


def _where(path: str, offset: int | None, message: str) -> str:
    return f"{path}" + (f" at offset {offset}" if offset is not None else "") + f": {message}"


def _verify_superchunk(store: Store, root: str) -> tuple[list[str], int]:
    problems: list[str] = []
    meta_dir = store.join(root, sc_mod.META_DIR)

    def meta(name: str) -> tuple[str, str]:  # (key in the store, name for messages)
        key = store.join(meta_dir, name)
        return key, store.url(key)

    storage_key, storage_path = meta(sc_mod.STORAGE_FILE)
    try:
        info = StorageInfo.from_json(read_json(storage_key, "meta/storage", store),
                                     storage_path)
    except CArrayError as exc:
        return [str(exc)], 0
    sizes_key, sizes_path = meta(sc_mod.SIZES_FILE)
    try:
        sizes = Sizes.from_json(read_json(sizes_key, "meta/sizes", store), sizes_path)
    except CArrayError as exc:
        return problems + [str(exc)], 0
    if sizes.nbytes != math.prod(sizes.shape) * info.dtype.itemsize:
        problems.append(_where(sizes_path, None, f"nbytes {sizes.nbytes} != shape "
                               f"{list(sizes.shape)} x item size {info.dtype.itemsize}"))
    try:
        grid = NDGrid(sizes.shape, info.chunkshape, info.blockshape or info.chunkshape,
                      max(info.dtype.itemsize, 1))
    except ValueError as exc:
        return problems + [_where(sizes_path, None, str(exc))], 0
    jkey, jpath = meta(sc_mod.JOURNAL_FILE)
    if store.exists(jkey):
        journal = Journal.decode(store.get(jkey))
        if journal is not None and journal.generation == sizes.generation + 1:
            problems.append(_where(jpath, None, "an interrupted commit is pending; open the "
                                   "dataset in mode 'a' to complete it (checked as committed)"))
    attrs_key, attrs_path = meta(sc_mod.ATTRS_FILE)
    if store.exists(attrs_key):
        try:
            attrs = read_json(attrs_key, "meta/attrs", store)
            if not isinstance(attrs, dict):
                raise FormatError("meta/attrs must hold a JSON object", attrs_path)
            for key, value in attrs.items():
                try:
                    decode_attr(value)
                except (TypeError, ValueError, KeyError, IndexError) as exc:
                    problems.append(_where(attrs_path, None, f"attribute {key!r}: {exc}"))
        except CArrayError as exc:
            problems.append(str(exc))
    S = info.superchunksize
    nchunks = grid.nchunks
    checked = 0
    for k in range(math.ceil(nchunks / S)):
        first = k * S
        count = min(S, nchunks - first)
        p, n = _verify_file(store, root, info, grid, k, count)
        problems += p
        checked += n
    return problems, checked


def _allowed_nbytes(grid: NDGrid, n: int, c_order: bool) -> tuple[int, ...]:
    """Decoded sizes chunk ``n`` may have: full, or (C order) just its rows when in the
    last partial run of rows."""
    full = grid.chunk_nbytes
    row0 = grid.chunk_coords(n)[0] if grid.ndim else 0
    if not c_order or (row0 + 1) * grid.chunks[0] <= grid.shape[0]:
        return (full,)
    rows = grid.shape[0] - row0 * grid.chunks[0]
    return (full, full // grid.ext_chunks[0] * rows)


def _verify_file(store: Store, root: str, info: StorageInfo, grid: NDGrid, k: int,
                 count: int) -> tuple[list[str], int]:
    key = store.join(root, sc_mod.DATA_DIR, sc_mod.superchunk_name(k))
    path = store.url(key)
    problems: list[str] = []
    S = info.superchunksize
    c_order = info.blockshape is None or geo.blocked_is_c_order(grid.ext_chunks, grid.blocks)
    try:
        handle = store.open(key)
    except FileNotFoundError:
        return [_where(path, None, f"missing (holds chunks {k * S}..{k * S + count - 1})")], 0
    with handle:
        size = handle.size
        read = handle.pread
        if store.remote:  # one request for the file, not two for every chunk
            whole = memoryview(handle.pread(size, 0))

            def read(n: int, offset: int) -> bytes:
                return bytes(whole[offset:offset + n])
        try:
            header = BlpHeader.unpack(read(HEADER_SIZE, 0), path)
            ck = header.checksum_impl
            if ck.name != info.checksum:
                problems.append(_where(path, 6, f"checksum {ck.name}, meta/storage says "
                                       f"{info.checksum}"))
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
                problems.append(str(exc))
            table_pos = HEADER_SIZE + mh.section_size
            data_start = table_pos + 8 * S
            if data_start > size:
                raise FormatError(f"offsets table runs past the end of the file ({size} bytes)",
                                  path, table_pos)
            table = np.frombuffer(read(8 * S, table_pos), "<i8")
        except CArrayError as exc:
            return problems + [str(exc)], 0
        if header.nchunks < count:
            problems.append(_where(path, 16, f"header says {header.nchunks} chunks, the "
                                   f"dataset needs {count} here"))
        dsize = ck.size
        regions: list[tuple[int, int, int]] = []
        checked = 0
        for slot in range(count):
            n = k * S + slot
            off = int(table[slot])
            slot_at = table_pos + 8 * slot
            if off < data_start or off >= size:
                problems.append(_where(path, slot_at, f"chunk {n}: offset {off} outside the "
                                       f"chunk area [{data_start}, {size})"))
                continue
            try:
                h = blosc.read_header(read(blosc.BLOSC1_HEADER, off), path, off,
                                      size=size - off)
                if off + h.cbytes + dsize > size:
                    raise FormatError(f"chunk {n}: checksum runs past the end of the file",
                                      path, off + h.cbytes)
                rec = read(h.cbytes + dsize, off)
                regions.append((off, off + len(rec), n))
                chunk = memoryview(rec)[:h.cbytes]
                if dsize and ck.digest(chunk) != rec[h.cbytes:]:
                    problems.append(_where(path, off + h.cbytes,
                                           f"chunk {n}: {ck.name} checksum mismatch"))
                blosc.validate_chunk(chunk, None, path, off)
                allowed = _allowed_nbytes(grid, n, c_order)
                if h.nbytes not in allowed:
                    raise FormatError(f"chunk {n} holds {h.nbytes} bytes, expected "
                                      f"{' or '.join(map(str, allowed))}", path, off)
                blosc.decompress(chunk, path)
                checked += 1
            except CArrayError as exc:
                problems.append(f"{exc} (chunk {n})" if f"chunk {n}" not in str(exc) else
                                str(exc))
        regions.sort()
        for (_, end, a), (start, _, b) in zip(regions, regions[1:], strict=False):
            if start < end:
                problems.append(_where(path, start, f"chunks {a} and {b} overlap"))
        return problems, checked


def _verify_bcolz(store: Store, root: str) -> tuple[list[str], int]:
    try:
        layout, meta, _ = BcolzLayout.open(root, readonly=True, allow_pickle=False,
                                           store=store)
    except CArrayError as exc:
        return [str(exc)], 0
    problems: list[str] = []
    checked = 0
    nchunks = -(-meta.length // meta.chunklen)
    try:
        for n in range(nchunks):
            rows = meta.chunklen if n < nchunks - 1 else meta.length - n * meta.chunklen
            try:
                chunk = layout.read_chunk(n)
                h = blosc.validate_chunk(chunk, None, layout._path(n))
                if h.nbytes not in (rows * meta.rowsize, meta.chunklen * meta.rowsize):
                    raise FormatError(f"holds {h.nbytes} bytes, expected "
                                      f"{rows * meta.rowsize}", layout._path(n))
                blosc.decompress(chunk, layout._path(n))
                checked += 1
            except CArrayError as exc:
                problems.append(str(exc))
    finally:
        layout.close()
    return problems, checked


def _verify_b2nd(store: Store, path: str) -> tuple[list[str], int]:
    """A Blosc2 frame: its header, metalayers and offsets (checked on opening), then
    every chunk decoded to its full size."""
    try:
        layout, meta, _ = B2ndLayout.open(path, readonly=True, store=store)
    except CArrayError as exc:
        return [str(exc)], 0
    problems: list[str] = []
    checked = 0
    out = np.empty(meta.chunk_nbytes, dtype=np.uint8)
    try:
        for n in range(meta.nchunks):
            try:
                chunk = layout.read_chunk(n)
                blosc.validate_chunk(chunk, meta.chunk_nbytes, layout.chunk_path(n))
                blosc.decompress_into(chunk, out, layout.chunk_path(n))
                checked += 1
            except CArrayError as exc:
                problems.append(f"chunk {n}: {exc}")
    finally:
        layout.close()
    return problems, checked


def _run(args: argparse.Namespace) -> int:
    status = 0
    for path in args.paths:
        problems, checked = verify_path(path, args.storage_options)
        for p in problems:
            print(p)
        if problems:
            status = 1
            print(f"{path}: {len(problems)} problem(s); {checked} chunk(s) OK")
        else:
            print(f"{path}: OK ({checked} chunk(s) checked)")
    return status


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "verify", help="check every chunk of datasets (checksums, headers, decoding)",
        description="Check every chunk of each dataset and report every problem found; "
                    "exits 1 if there is any.")
    p.add_argument("paths", nargs="+", metavar="PATH",
                   help="dataset directories or frames (paths or URLs)")
    add_storage_options(p)
    p.set_defaults(func=_run)
