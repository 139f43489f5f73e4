"""A damaged byte never reads back as a wrong value: the read-path corruption matrix
(issue 22, item 8; README, "Guarantees").

Every cell of layouts × shapes × read paths × corruptions must give the exact values
written or raise a carray error (:class:`carray.errors.CArrayError`); a ``copy`` or a
``carray convert`` of a damaged dataset either raises or writes a correct copy.

* Layouts: carray's superchunk directory (and its Bloscpack-compatible mode), bcolz
  directories, ``.b2nd`` frames (one file, and sparse: a directory), and tables with
  numeric, fixed-width and variable-length string columns, in carray's layout and
  bcolz's.
* Shapes: 1-d in whole chunks, 1-d with a partial last chunk, N-d with the default
  chunks and blocks, N-d with edge chunks (tables: the two 1-d ones).
* Read paths: :data:`ARRAY_READS` and :data:`TABLE_READS`, plus the two that write a
  new dataset (:data:`WRITING_READS`).
* Corruptions: one byte XORed with a mask, in each region of each file, as the format
  documents describe them (docs/formats: superchunk.md, bloscpack.md, bcolz-dir.md,
  b2frame.md, blosc1-chunk.md, blosc2-chunk.md, zonemap.md, table.md); see
  :func:`regions`.

CI flips one byte per region of each layout and shape and reads it every way;
``CARRAY_SOAK=1`` flips ``CARRAY_SOAK_FLIPS`` (default 8) bytes per region, each with
every mask of :data:`MASKS`.
"""

from __future__ import annotations

import json
import os
import shutil
import traceback
import zlib
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

import carray as ca
from carray.cli.main import build_parser
from carray.codecs.blosc import decompress
from carray.errors import CArrayError

SOAK = os.environ.get("CARRAY_SOAK") == "1"
FLIPS_PER_REGION = int(os.environ.get("CARRAY_SOAK_FLIPS", "8")) if SOAK else 1
# XORed into the damaged byte: every bit, the lowest, the highest, a middle one.
MASKS = (0xFF, 0x01, 0x80, 0x10)
# The soak sweep takes minutes; the per-test timeout is meant for CI's sample.
pytestmark = [pytest.mark.timeout(0)] if SOAK else []

# Queries compare with this: about half of the values (drawn from [0, 2**20)) pass.
THRESHOLD = 2**19


# -- shapes and layouts ----------------------------------------------------------------------

@dataclass(frozen=True)
class Shape:
    """The data of one row of the matrix and the grid it is stored in."""

    shape: tuple[int, ...]
    chunks: tuple[int, ...] | None  # None: the layout's default
    blocks: tuple[int, ...] | None

    def data(self) -> np.ndarray:
        return np.random.default_rng(1).integers(0, 2**20, self.shape)


SHAPES = {
    "1d": Shape((4096,), (1024,), None),
    "1d-partial": Shape((4000,), (1024,), None),  # the last chunk holds 928 items
    "2d-default": Shape((300, 200), None, None),
    "3d-edges": Shape((30, 20, 10), (16, 16, 8), (4, 8, 8)),
}
# Tables are smaller: every read of a row builds Python objects.
TABLE_SHAPES = {
    "1d": Shape((1024,), (256,), None),
    "1d-partial": Shape((1000,), (256,), None),  # the last chunk holds 232 rows
}


def _grid(shape: Shape) -> dict:
    return {"chunks": shape.chunks, "blocks": shape.blocks}


def _rows(shape: Shape) -> dict:
    """bcolz chunks by whole rows: the first axis of the chunk shape, when one is given."""
    return {"chunklen": shape.chunks[0]} if shape.chunks else {}


def _table_columns(x: np.ndarray) -> dict[str, np.ndarray]:
    """Numeric columns (summarised by zone maps), a fixed-width and a variable-length
    string column."""
    return {"i": x, "f": x * 0.5, "u": np.array([f"u{v % 89}" for v in x]),
            "s": np.array([f"station {v % 97}" for v in x], dtype=object)}


def _superchunk(root: Path, x: np.ndarray, shape: Shape) -> Path:
    ca.carray(x, rootdir=str(root), mode="w", **_grid(shape)).close()
    return root


def _superchunk_blp(root: Path, x: np.ndarray, shape: Shape) -> Path:
    # Bloscpack-compatible files: an offsets table per file, with unused slots in the
    # last file (superchunks of 3 chunks).
    ca.carray(x, rootdir=str(root), mode="w", **_grid(shape),
              storage={"blosc1": True, "spare": 0, "superchunksize": 3}).close()
    return root


def _bcolz(root: Path, x: np.ndarray, shape: Shape) -> Path:
    ca.carray(x, rootdir=str(root), mode="w", format="bcolz", **_rows(shape)).close()
    return root


def _b2nd(root: Path, x: np.ndarray, shape: Shape) -> Path:
    path = root.with_suffix(".b2nd")
    ca.carray(x, rootdir=str(path), mode="w", **_grid(shape)).close()
    return path


def _b2nd_sparse(root: Path, x: np.ndarray, shape: Shape) -> Path:
    path = root.with_suffix(".b2nd")
    ca.carray(x, rootdir=str(path), mode="w", **_grid(shape),
              storage={"contiguous": False}).close()
    return path


def _table(root: Path, x: np.ndarray, shape: Shape) -> Path:
    ca.ctable(_table_columns(x), rootdir=str(root), mode="w", **_rows(shape)).close()
    return root


def _table_bcolz(root: Path, x: np.ndarray, shape: Shape) -> Path:
    ca.ctable(_table_columns(x), rootdir=str(root), mode="w", format="bcolz",
              **_rows(shape)).close()
    return root


LAYOUTS: dict[str, Callable[[Path, np.ndarray, Shape], Path]] = {
    "superchunk": _superchunk,
    "superchunk-blp": _superchunk_blp,
    "bcolz": _bcolz,
    "b2nd": _b2nd,
    "b2nd-sparse": _b2nd_sparse,
    "table": _table,
    "table-bcolz": _table_bcolz,
}
TABLE_LAYOUTS = ("table", "table-bcolz")
CELLS = [(layout, shape) for layout in LAYOUTS
         for shape in (TABLE_SHAPES if layout in TABLE_LAYOUTS else SHAPES)]


# -- where the bytes are: regions of every file ----------------------------------------------

#: A damageable byte: a file and an offset in it.
Spot = tuple[Path, int]
#: Digest sizes of the Bloscpack checksum ids (docs/formats/bloscpack.md).
DIGEST_SIZES = {0: 0, 1: 4, 2: 4, 3: 16, 4: 20, 5: 28, 6: 32, 7: 48, 8: 64}
CHECKSUM_IDS = {"none": 0, "adler32": 1, "crc32": 2, "md5": 3, "sha1": 4, "sha224": 5,
                "sha256": 6, "sha384": 7, "sha512": 8}
#: Files named for what they hold, by their name.
NAMED_FILES = {"storage": "meta/storage", "sizes": "meta/sizes", "member": "meta/member",
               "__attrs__": "attrs", "__table__": "table marker",
               "__rootdirs__": "table marker", "__vlstring__": "string column marker",
               "HEAD": "versions/HEAD", "__commits__": "table commit counter"}


class Regions:
    """The bytes of a dataset, by region: ``spots[name]`` lists those in region ``name``."""

    def __init__(self) -> None:
        self.spots: dict[str, list[Spot]] = defaultdict(list)

    def add(self, name: str, file: Path, start: int, stop: int) -> None:
        self.spots[name] += [(file, i) for i in range(start, stop)]


def _blosc_header_size(raw: bytes, at: int) -> int:
    """Bytes of the Blosc chunk at ``raw[at:]`` before its first stream: the header and
    the block starts (docs/formats/blosc1-chunk.md, blosc2-chunk.md)."""
    flags = raw[at + 2]
    nbytes, blocksize, cbytes = (int.from_bytes(raw[at + k:at + k + 4], "little", signed=True)
                                 for k in (4, 8, 12))
    size = 32 if raw[at] >= 3 and flags & 0x05 == 0x05 else 16
    special = size == 32 and raw[at + 31] & 0x70
    if not (flags & 0x02 or special or blocksize <= 0):  # raw and special chunks: no starts
        size += 4 * -(-nbytes // blocksize)
    return min(size, cbytes)


def _chunk(out: Regions, file: Path, raw: bytes, at: int) -> int:
    """Add the header and data of the Blosc chunk at ``at``; return where it ends."""
    cbytes = int.from_bytes(raw[at + 12:at + 16], "little", signed=True)
    head = _blosc_header_size(raw, at)
    out.add("chunk header", file, at, at + head)
    out.add("chunk data", file, at + head, at + cbytes)
    return at + cbytes


def _newest_manifest(root: Path) -> tuple[dict, list[np.ndarray]]:
    """The newest version's header and each member's page references
    (docs/formats/superchunk.md, "Manifests")."""
    path = max((root / "versions").glob("*.mf"))
    raw = path.read_bytes()
    n = int.from_bytes(raw[8:12], "little")
    header = json.loads(raw[12:12 + n])
    refs = np.dtype([("seq", "<i8"), ("off", "<i8"), ("len", "<i4")])
    tables, at = [], 12 + n
    for member in header["members"]:
        npages = -(-member["nchunks"] // 512)
        tables.append(np.frombuffer(raw, refs, npages, at))
        at += npages * refs.itemsize
    return header, tables


def _index_entries(root: Path, pages: np.ndarray) -> np.ndarray:
    """A member's index entries, read from the ``.ix`` pages its references name."""
    entry = np.dtype([("off", "<i8"), ("room", "<i8"), ("cbytes", "<i4"), ("gen", "<i4"),
                      ("flags", "<u4")])
    out = []
    for file_id, off, length in pages.tolist():
        # The page file: the commit's seq in the low 40 bits, its token above them.
        seq, token = file_id & (2**40 - 1), file_id >> 40
        name = f"{seq:010d}-{token:06x}.ix" if token else f"{seq:010d}.ix"
        stored = (root / "versions" / name).read_bytes()[off:off + length]
        out.append(np.frombuffer(zlib.decompress(stored[:-4]), entry))
    return np.concatenate(out) if out else np.zeros(0, entry)


def _superchunk_records(root: Path) -> dict[Path, list[tuple[int, int, int, int, int]]]:
    """Every stored record of the newest version, by superchunk file: ``(off, room,
    cbytes, digest size, page digests size)``."""
    header, tables = _newest_manifest(root)
    records: dict[Path, list] = defaultdict(list)
    for member, pages in zip(header["members"], tables, strict=True):
        home = root / member["path"]
        storage = json.loads((home / "meta" / "storage").read_text())
        per_file, page = storage["superchunksize"], storage.get("page_size", 0)
        digest = DIGEST_SIZES[CHECKSUM_IDS[storage["checksum"] or "none"]]
        for n, e in enumerate(_index_entries(root, pages).tolist()):
            off, room, cbytes, gen, flags = e
            if off < 0:
                continue
            name = f"sc_{n // per_file:06d}" + (f"_{gen}" if gen else "") + ".blp"
            pages_size = digest * -(-cbytes // page) if flags & 1 and page else 0
            records[home / "data" / name].append((off, room, cbytes, digest, pages_size))
    return records


def _superchunk_file(out: Regions, file: Path, raw: bytes, records: list) -> None:
    """A superchunk file: Bloscpack header, metadata, offsets, records
    (docs/formats/superchunk.md, "Superchunk files"; bloscpack.md)."""
    out.add("file header", file, 0, 32)
    options = raw[5]
    at = 32
    if options & 0x02:
        meta_digest = DIGEST_SIZES[raw[at + 9]]
        max_meta = int.from_bytes(raw[at + 16:at + 20], "little")
        stored = int.from_bytes(raw[at + 20:at + 24], "little")
        out.add("file metadata", file, at, at + 32 + stored)
        out.add("file metadata padding (unused)", file, at + 32 + stored, at + 32 + max_meta)
        out.add("file metadata", file, at + 32 + max_meta, at + 32 + max_meta + meta_digest)
        at += 32 + max_meta + meta_digest
    if options & 0x01:
        slots = sum(int.from_bytes(raw[k:k + 8], "little", signed=True) for k in (16, 24))
        for _ in range(slots):
            used = int.from_bytes(raw[at:at + 8], "little", signed=True) != -1
            out.add("offsets used" if used else "offsets unused", file, at, at + 8)
            at += 8
    for off, room, _, digest, pages_size in sorted(records):
        end = _chunk(out, file, raw, off)
        out.add("chunk digest", file, end, end + digest)
        out.add("page digests", file, end + digest, end + digest + pages_size)
        out.add("record spare (unused)", file, end + digest + pages_size, off + room)
        at = max(at, off + room)
    out.add("file tail (unused)", file, at, len(raw))


def _bcolz_chunk_file(out: Regions, file: Path, raw: bytes) -> None:
    """A bcolz chunk file: the Bloscpack version-1 prefix, one Blosc1 chunk, and
    whatever a writer adds after it (docs/formats/bcolz-dir.md, "Chunk files")."""
    out.add("chunk prefix", file, 0, 16)
    end = _chunk(out, file, raw, 16)
    out.add("chunk file tail", file, end, len(raw))


def _frame(out: Regions, file: Path, raw: bytes) -> None:
    """A Blosc2 frame, or a sparse frame's index file (docs/formats/b2frame.md)."""
    header_len = int.from_bytes(raw[11:15], "big", signed=True)
    frame_len = int.from_bytes(raw[16:24], "big")
    cbytes = int.from_bytes(raw[39:47], "big", signed=True)
    contiguous = raw[26] & 0x0F == 0
    out.add("frame header", file, 0, 87)
    out.add("frame metalayers", file, 87, header_len)
    index_at = header_len + (cbytes if contiguous else 0)
    trailer_len = int.from_bytes(raw[frame_len - 22:frame_len - 18], "big")
    trailer_at = frame_len - trailer_len
    if index_at < trailer_at:  # an empty frame has no offsets chunk
        index_end = index_at + int.from_bytes(raw[index_at + 12:index_at + 16], "little")
        out.add("frame offsets", file, index_at, index_end)
        out.add("frame gap (unused)", file, index_end, trailer_at)
        offsets = np.frombuffer(decompress(raw[index_at:index_end]), "<i8")
        if contiguous:
            covered = np.zeros(cbytes, bool)
            for off in offsets[offsets >= 0].tolist():
                end = _chunk(out, file, raw, header_len + off)
                covered[off:end - header_len] = True
            for off in np.flatnonzero(~covered).tolist():  # chunk versions no longer used
                out.add("frame dead space (unused)", file, header_len + off, header_len + off + 1)
    out.add("frame trailer", file, trailer_at, frame_len - 16)
    out.add("frame fingerprint (unused)", file, frame_len - 16, frame_len)
    marked = raw[63:65] == b"\0\0" and raw[66:68] == b"\0\0"  # carray's mark
    record_end = frame_len + 8 + int.from_bytes(raw[frame_len + 4:frame_len + 8], "little") \
        if marked and raw[frame_len:frame_len + 4] == b"CAtl" else frame_len
    out.add("carray's record of digests", file, frame_len, record_end)
    out.add("past the record (unused)", file, record_end, len(raw))


def regions(path: Path) -> dict[str, list[Spot]]:
    """Every byte of the dataset at ``path``, by region.  Regions marked "(unused)" hold
    bytes no reader needs: damage there must still read right."""
    out = Regions()
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    records: dict[Path, list] = {}
    for versioned in {f.parent.parent for f in files if f.suffix == ".mf"}:
        records.update(_superchunk_records(versioned))
    for file in files:
        raw = file.read_bytes()
        whole = (file, 0, len(raw))
        if file.suffix == ".mf":
            out.add("versions manifest", *whole)
        elif file.suffix == ".ix":
            out.add("versions index pages", *whole)
        elif file.name.startswith("zonemap_"):
            out.add("zone map", *whole)
        elif file.name in NAMED_FILES:
            out.add(NAMED_FILES[file.name], *whole)
        elif raw[:5] == b"blpk\x03":
            _superchunk_file(out, file, raw, records.get(file, []))
        elif raw[:5] == b"blpk\x01":
            _bcolz_chunk_file(out, file, raw)
        elif raw[2:10] == b"b2frame\0":
            _frame(out, file, raw)
        elif file.suffix == ".chunk":  # a sparse frame's chunk file: one Blosc2 chunk
            _chunk(out, file, raw, 0)
            out.add("chunk file tail", file, int.from_bytes(raw[12:16], "little"), len(raw))
        else:
            out.add(f"other file {file.name}", *whole)
    return {name: spots for name, spots in out.spots.items() if spots}


# -- read paths ------------------------------------------------------------------------------

def _points(shape: tuple[int, ...]) -> list[tuple[int, ...]]:
    """Items to read one by one: first, middle, last, and one inside the last chunk."""
    return [tuple(0 for _ in shape), tuple(n // 2 for n in shape),
            tuple(n - 1 for n in shape), tuple(max(n - 3, 0) for n in shape)]


def _key(point: tuple[int, ...]) -> int | tuple[int, ...]:
    return point[0] if len(point) == 1 else point


def _plane(a) -> np.ndarray:
    if a.ndim == 1:  # a 1-d plane is a run of items across chunks
        return np.asarray(a[1000:2100])
    return np.concatenate([np.ravel(a[5]), np.ravel(a[:, 3])])


def _box(a) -> np.ndarray:
    """A small box near the origin and one at the far corner (edge chunks)."""
    if a.ndim == 1:
        return np.concatenate([a[1020:1030], a[len(a) - 9:len(a) - 2]])
    far = tuple(slice(n - 7, n - 1) for n in a.shape[:2])
    return np.concatenate([np.ravel(a[2:9, 1:7]), np.ravel(a[far])])


def _query(a) -> np.ndarray:
    if a.ndim == 1:
        return np.fromiter(a.where(a > THRESHOLD), a.dtype)
    return np.asarray(np.where(a > THRESHOLD, a, 0))


#: Read paths of an array: what they give, from a handle and from the numpy data.
ARRAY_READS: dict[str, tuple[Callable, Callable]] = {
    "a[:]": (lambda a: a[:], lambda x: x[:]),
    "item": (lambda a: np.array([a[_key(p)] for p in _points(a.shape)]),
             lambda x: np.array([x[p] for p in _points(x.shape)])),
    "plane": (_plane, _plane),
    "box": (_box, _box),
    "a[::3]": (lambda a: a[::3], lambda x: x[::3]),
    "np.asarray": (np.asarray, np.asarray),
    "list(a)": (lambda a: np.array(list(a)), np.asarray),
    "ca.iterblocks": (lambda a: np.concatenate(list(ca.iterblocks(a))), np.asarray),
    "sum": (lambda a: a.sum(), np.sum),
    "max": (lambda a: a.max(), np.max),  # zone maps (1-d) let max read only some chunks
    "count": (lambda a: (a > THRESHOLD).sum(), lambda x: (x > THRESHOLD).sum()),
    "query": (_query, lambda x: x[x > THRESHOLD] if x.ndim == 1 else np.where(x > THRESHOLD,
                                                                                 x, 0)),
    "ca.eval": (lambda a: np.asarray(ca.eval("a * 2 + 1", user_dict={"a": a},
                                             out_flavor="numpy")), lambda x: x * 2 + 1),
}


def _rows_of(rows) -> list[tuple]:
    return [tuple(r) for r in rows]


def _table_items(t) -> list[tuple]:
    return _rows_of(t[p[0]] for p in _points((len(t),)))


def _table_box(t) -> list[tuple]:
    """Rows across the first chunk boundary, and rows of the last chunk."""
    return _rows_of(t[250:262]) + _rows_of(t[len(t) - 9:len(t) - 2])


def _table_where(t) -> list[tuple]:
    return _rows_of(t.where(f"i > {THRESHOLD}")) + _rows_of(t[f"i > {THRESHOLD}"])


#: Read paths of a table: what they give, from a handle and from the numpy records.
TABLE_READS: dict[str, tuple[Callable, Callable]] = {
    "t[:]": (lambda t: _rows_of(t[:]), lambda x: _rows_of(x)),
    "item": (_table_items, _table_items),
    "columns": (lambda t: [list(t.cols[n][:]) for n in t.names],
                lambda x: [list(x[n]) for n in x.dtype.names]),
    "box": (_table_box, _table_box),
    "t[::3]": (lambda t: _rows_of(t[::3]), lambda x: _rows_of(x[::3])),
    "np.asarray": (lambda t: _rows_of(np.asarray(t)), lambda x: _rows_of(x)),
    "list(t)": (lambda t: _rows_of(t), lambda x: _rows_of(x)),
    "ca.iterblocks": (lambda t: [r for b in ca.iterblocks(t) for r in _rows_of(b)],
                      lambda x: _rows_of(x)),
    "sum": (lambda t: [t.cols["i"].sum(), t.cols["f"].sum()],
            lambda x: [x["i"].sum(), x["f"].sum()]),
    "max": (lambda t: [t.cols["i"].max(), t.cols["f"].max()],
            lambda x: [x["i"].max(), x["f"].max()]),
    "count": (lambda t: (t.cols["i"] > THRESHOLD).sum(), lambda x: (x["i"] > THRESHOLD).sum()),
    "where": (_table_where, lambda x: 2 * _rows_of(x[x["i"] > THRESHOLD])),
    "eval": (lambda t: t.eval("i * 2 + f")[:], lambda x: x["i"] * 2 + x["f"]),
}


def _copy(path: Path, scratch: Path) -> Path:
    target = scratch / "copy"
    with ca.open(str(path), mode="r") as src:
        src.copy(rootdir=str(target), mode="w").close()
    return target


def _convert(path: Path, scratch: Path) -> Path:
    """``carray convert SRC DST``, run as the command line runs it, but letting its
    error propagate (the command turns every error into one line and exit code 1)."""
    if (path / "__table__").exists() or (path / "__rootdirs__").exists():
        target = scratch / "conv.ctable"
    else:  # into another layout than the source's
        target = scratch / ("conv" if path.suffix == ".b2nd" else "conv.b2nd")
    args = build_parser().parse_args(["convert", str(path), str(target)])
    args.func(args)
    return target


#: Read paths that write a new dataset from the damaged one; the new one is then read.
WRITING_READS: dict[str, Callable[[Path, Path], Path]] = {"copy": _copy,
                                                           "carray convert": _convert}


# -- running the matrix ----------------------------------------------------------------------

def _same(got, want) -> bool:
    """Equal values: lists (rows, columns, several results) item by item, arrays as
    arrays of equal shape."""
    if isinstance(want, list):
        return isinstance(got, list) and got == want
    got, want = np.asarray(got), np.asarray(want)
    return got.shape == want.shape and np.array_equal(got, want)


def _where_raised(exc: BaseException) -> str:
    """The innermost frame of carray's own code in the traceback of ``exc``."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "/carray/" in f.filename]
    if not frames:
        return "outside carray"
    f = frames[-1]
    return f"{f.filename.split('/carray/', 1)[1]}:{f.name}:{f.lineno}"


def _outcome(read: Callable[[], object], want) -> str:
    """"right", "carray error", "WRONG VALUES" or "untyped <exception> at <where>: <text>"."""
    try:
        got = read()
    except CArrayError:
        return "carray error"
    except Exception as exc:  # noqa: BLE001 - what the matrix looks for
        return f"untyped {type(exc).__name__} at {_where_raised(exc)}: {str(exc)[:80]!r}"
    return "right" if _same(got, want) else "WRONG VALUES"


class Reader:
    """Every read path of one dataset, with the values each must give.

    Parameters
    ----------
    path : Path
        The dataset, read through a new handle (mode 'r') by each read path.
    data : ndarray
        What was written: an array's values, a table's records.
    is_table : bool
        Read it with :data:`TABLE_READS` rather than :data:`ARRAY_READS`.
    scratch : Path
        Where copies and conversions are written.
    """

    def __init__(self, path: Path, data: np.ndarray, is_table: bool, scratch: Path) -> None:
        self.path, self.scratch = path, scratch
        self.reads = TABLE_READS if is_table else ARRAY_READS
        self.read_all = self.reads["t[:]" if is_table else "a[:]"][0]
        # Computed once: a row-by-row expectation costs as much as the read it checks.
        self.want = {name: expect(data) for name, (_, expect) in self.reads.items()}
        self.want.update(dict.fromkeys(WRITING_READS, self.want["t[:]" if is_table else "a[:]"]))

    def _read(self, read: Callable) -> object:
        with ca.open(str(self.path), mode="r") as handle:
            return read(handle)

    def _write_then_read(self, write: Callable[[Path, Path], Path]) -> object:
        shutil.rmtree(self.scratch, ignore_errors=True)
        self.scratch.mkdir()
        with ca.open(str(write(self.path, self.scratch)), mode="r") as copy:
            return self.read_all(copy)

    def outcomes(self) -> Iterator[tuple[str, str]]:
        """``(read path, outcome)`` for every read path (see :func:`_outcome`)."""
        for name, (read, _) in self.reads.items():
            yield name, _outcome(lambda r=read: self._read(r), self.want[name])
        for name, write in WRITING_READS.items():
            yield name, _outcome(lambda w=write: self._write_then_read(w), self.want[name])


def _spots_to_flip(name: str, spots: list[Spot], seed: str) -> list[tuple[Spot, int]]:
    """Which bytes of a region to damage, and with which mask: one (CI) or
    :data:`FLIPS_PER_REGION` spread over the region, each with every mask (soak)."""
    rng = np.random.default_rng(zlib.crc32(f"{seed} {name}".encode()))
    if not SOAK:
        return [(spots[int(rng.integers(len(spots)))], MASKS[int(rng.integers(len(MASKS)))])]
    n = min(FLIPS_PER_REGION, len(spots))
    picks = np.unique(np.linspace(0, len(spots) - 1, n).round().astype(int))
    return [(spots[i], mask) for i in picks.tolist() for mask in MASKS]


def _records(x: np.ndarray) -> np.ndarray:
    """The rows of the table :func:`_table_columns` makes of ``x``."""
    columns = _table_columns(x)
    out = np.empty(len(x), [(k, v.dtype) for k, v in columns.items()])
    for k, v in columns.items():
        out[k] = v
    return out


@pytest.fixture
def no_fsync(monkeypatch):
    """fsync decides what survives a power cut, not what a read returns: without it the
    many small datasets this matrix writes (copies, conversions) cost no disk flushes."""
    monkeypatch.setattr(os, "fsync", lambda fd: None)


@pytest.mark.parametrize("layout, shape", CELLS, ids=[f"{a}-{b}" for a, b in CELLS])
def test_a_damaged_byte_reads_right_or_raises_a_carray_error(tmp_path, no_fsync, layout, shape):
    is_table = layout in TABLE_LAYOUTS
    grid = (TABLE_SHAPES if is_table else SHAPES)[shape]
    x = grid.data()
    path = LAYOUTS[layout](tmp_path / "data", x, grid)
    reader = Reader(path, _records(x) if is_table else x, is_table, tmp_path / "scratch")
    undamaged = dict(reader.outcomes())
    assert set(undamaged.values()) == {"right"}, undamaged  # the reads themselves are right

    # (region, read path) -> what went wrong (the outcome less its message) -> examples
    failures: dict[tuple[str, str], dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    tally: dict[str, int] = defaultdict(int)
    for region, spots in regions(path).items():
        for (file, offset), mask in _spots_to_flip(region, spots, f"{layout} {shape}"):
            original = file.read_bytes()
            damaged = bytearray(original)
            damaged[offset] ^= mask
            file.write_bytes(damaged)
            try:
                for read, outcome in reader.outcomes():
                    tally[outcome if outcome in ("right", "carray error") else "bad"] += 1
                    if outcome not in ("right", "carray error"):
                        where = f"{file.relative_to(tmp_path)}@{offset}^0x{mask:02x}"
                        kind, _, text = outcome.partition(": ")
                        failures[region, read][kind].append(f"{where} {text}".rstrip())
            finally:
                file.write_bytes(original)
    print(f"\n{layout} {shape}: {dict(tally)}")
    report = [f"[{layout} {shape}] {read} × {region}: {kind} ×{len(found)}, e.g. {found[0]}"
              for (region, read), kinds in sorted(failures.items())
              for kind, found in sorted(kinds.items())]
    assert not failures, f"{len(failures)} cells fail:\n" + "\n".join(report)
