"""The ds header: find it, parse it, check it against the file, describe each variable's bytes.

Split out of :mod:`carray.formats.ds` (which cites the format facts) so the reader and the
writer share one table of types and one notion of where a variable's bytes are.
"""

from __future__ import annotations

import math
import threading
from typing import Literal

import numpy as np

from carray.core.safejson import load_json
from carray.errors import FormatError
from carray.stores import Handle

MAGIC = b"ds-"
VERSION = "1.0"
VERSION_LINE = b"ds-1.0\n"

# The version line is "ds-<x>.<y>": anything longer than this is not a ds file.
MAX_VERSION_LINE = 32
# A header is metadata; refuse to parse one larger than this (a corrupt or hostile file).
MAX_HEADER = 256 << 20
# The first read takes this much from the start of the file: the header is usually all
# in it, and for small files so is the body (for tiny files the system calls or the
# requests, not the bytes, are the cost).
PREFIX = 64 << 10

# Type name -> numpy dtype (native order; the byte order comes from ".endian").
# str and unicode are object arrays of bytes / str.
NUMERIC_TYPES: dict[str, np.dtype] = {
    "float32": np.dtype("f4"), "float64": np.dtype("f8"),
    "int8": np.dtype("i1"), "int16": np.dtype("i2"), "int32": np.dtype("i4"),
    "int64": np.dtype("i8"),
    "uint8": np.dtype("u1"), "uint16": np.dtype("u2"), "uint32": np.dtype("u4"),
    "uint64": np.dtype("u8"),
}
STRING_TYPES = ("str", "unicode")
TYPES = (*NUMERIC_TYPES, "bool", *STRING_TYPES)
_TYPE_SET = frozenset(TYPES)

# The layouts of headers that passed check_meta lately, by (header bytes, file size): the
# checks depend on nothing else, and the many small files one program writes usually
# share their header byte for byte, so a read of the next one skips re-checking it.
# Only successes are kept, of headers up to _CHECKED_HEADER bytes, the oldest dropped
# first; the layouts are never modified after check_meta built them.
_CHECKED: dict[tuple[bytes, int], tuple[dict, bool]] = {}
_CHECKED_COUNT = 64
_CHECKED_HEADER = 4096
_CHECKED_LOCK = threading.Lock()

# Keys the writer computes; whatever a user put under these names is replaced.
LAYOUT_KEYS = (".size", ".offset", ".len", ".type", ".missing", ".endian")


def escape(name: str) -> str:
    """Header key for a variable name: names starting with ``.`` or ``\\`` get a ``\\`` prefix."""
    return "\\" + name if name.startswith((".", "\\")) else name


def unescape(key: str) -> str:
    """Variable name for a header key (the inverse of :func:`escape`)."""
    return key[1:] if key.startswith(("\\.", "\\\\")) else key


def default_dims(key: str, ndim: int) -> list[str]:
    """Dimension names ds-format makes up for a variable without ``.dims``."""
    name = unescape(key)
    return [f"{name}_{i}" for i in range(1, ndim + 1)]


#: The two byte orders a ds file states (``.endian`` "l" or "b").
ByteOrder = Literal["<", ">"]
_ORDERS: tuple[ByteOrder, ByteOrder] = ("<", ">")
# (type, byte order) -> dtype of the stored values, looked up rather than built per read.
_DTYPES: dict[tuple[str, ByteOrder], np.dtype] = {
    (t, o): dt.newbyteorder(o) for t, dt in NUMERIC_TYPES.items() for o in _ORDERS}
_DTYPES.update({(t, o): np.dtype(bool if t == "bool" else object)
                for t in ("bool", *STRING_TYPES) for o in _ORDERS})


class VarLayout:
    """Where one variable's bytes are and how they decode (from its header entry).

    A plain slotted class: one is built per variable per read, so construction is kept
    cheap (a frozen dataclass costs several times more).
    """

    __slots__ = ("key", "type", "shape", "dims", "offset", "length", "missing", "byteorder",
                 "count", "mask_len", "dtype")

    def __init__(self, key: str, type_: str, shape: tuple[int, ...] | None,
                 dims: tuple[str, ...], offset: int, length: int | None, missing: bool,
                 byteorder: ByteOrder) -> None:
        self.key = key              # header key (escaped name)
        self.type = type_           # one of TYPES
        self.shape = shape          # None: a variable without data (".size": null)
        self.dims = dims
        self.offset = offset        # absolute file offset (body start + ".offset")
        self.length = length        # ".len" as stated, None if absent
        self.missing = missing
        self.byteorder = byteorder  # "<" or ">"
        self.count = 0 if shape is None else math.prod(shape)
        self.mask_len = (self.count + 7) // 8 if missing else 0
        self.dtype = _DTYPES[type_, byteorder]

    def __repr__(self) -> str:
        return (f"VarLayout({self.key!r}, {self.type}, shape={self.shape}, "
                f"offset={self.offset}, missing={self.missing})")

    def payload(self, n: int) -> int:
        """Bytes of ``n`` stored values (for strings: the length table only)."""
        if self.type == "bool":
            return (n + 7) // 8
        if self.type in STRING_TYPES:
            return 8 * n
        return n * self.dtype.itemsize


class Header:
    """A parsed, checked header and the bytes of the file start already read."""

    __slots__ = ("path", "file_size", "body_start", "meta", "layouts", "needs_repair",
                 "prefix")

    def __init__(self, path: str, file_size: int, body_start: int, meta: dict, layouts: dict,
                 needs_repair: bool, prefix: bytes) -> None:
        self.path = path
        self.file_size = file_size
        self.body_start = body_start
        self.meta = meta              # the header JSON as stored (variables and ".")
        self.layouts = layouts        # header key -> VarLayout, in header order
        self.needs_repair = needs_repair  # offsets may need the string .len repair
        self.prefix = prefix          # file bytes [0, len(prefix))


def strings_in(layouts: dict) -> bool:
    return any(v.type in STRING_TYPES for v in layouts.values())


def _fail(path: str, message: str, offset: int | None = None) -> FormatError:
    return FormatError(message, path=path, offset=offset)


def pread_into(handle: Handle, buf, offset: int) -> int:
    """Fill the writable buffer ``buf`` from ``offset``; return the bytes read (short at EOF).

    Every read of a ds file goes through here (tests count bytes by wrapping it).
    """
    return handle.pread_into(buf, offset)


def pread(handle: Handle, n: int, offset: int) -> bytes:
    """Up to ``n`` bytes at ``offset`` (short at EOF). Like :func:`pread_into`, every read of
    a ds file goes through one of these two."""
    return handle.pread(n, offset)


def read_prefix(handle: Handle) -> tuple[bytes, int]:
    """Read the start of the file (all of it when small) and return it with the file size."""
    size = handle.size
    # Asking for no more than the file holds spares a small file the second read that
    # would find its end.
    want = min(PREFIX, size)
    prefix = pread(handle, want, 0)
    # A short read means the file shrank since it was opened: what was read is all of it.
    return prefix, len(prefix) if len(prefix) < want else size


def parse(handle: Handle, path: str) -> Header:
    """Read and check the version line and the header of the open ds file ``handle``
    (``path`` names it in errors)."""
    prefix, size = read_prefix(handle)
    if prefix.startswith(VERSION_LINE):
        start = len(VERSION_LINE)
    else:
        end1 = prefix.find(b"\n", 0, MAX_VERSION_LINE + 1)
        if not prefix.startswith(MAGIC) or end1 < 0:
            raise _fail(path, "not a ds file (expected a first line 'ds-<version>')", 0)
        version = prefix[len(MAGIC):end1].decode("ascii", "replace")
        raise _fail(path, f"unsupported ds version {version!r} (this reader knows {VERSION})", 0)
    end2 = prefix.find(b"\n", start)
    while end2 < 0:
        # The header is longer than what we have: read on, in doubling steps, up to the cap.
        if len(prefix) >= size:
            raise _fail(path, "header line is not terminated by a newline", start)
        if len(prefix) - start > MAX_HEADER:
            raise _fail(path, f"header longer than {MAX_HEADER} bytes", start)
        more = pread(handle, min(len(prefix), size - len(prefix)), len(prefix))
        if not more:
            raise _fail(path, "file shrank while reading the header", len(prefix))
        old = len(prefix)
        prefix += more
        end2 = prefix.find(b"\n", old)
    text = prefix[start:end2]
    meta = load_json(text, path, what="header", offset=start)
    if not isinstance(meta, dict):
        raise _fail(path, "header is not a JSON object", start)
    body_start = end2 + 1
    checked = _CHECKED.get((text, size))
    if checked is None:
        layouts, needs_repair = check_meta(meta, path, body_start, size)
        # Only files with string variables can have ds-format's over-counted string .len.
        checked = layouts, needs_repair and strings_in(layouts)
        if len(text) <= _CHECKED_HEADER:
            with _CHECKED_LOCK:  # readers on other threads may insert at the same time
                while len(_CHECKED) >= _CHECKED_COUNT:
                    del _CHECKED[next(iter(_CHECKED))]
                _CHECKED[text, size] = checked
    return Header(path, size, body_start, meta, *checked, prefix)


def _bad(path: str, key: str, message: str, offset: int | None = None) -> FormatError:
    return FormatError(f"variable {unescape(key)!r}: {message}", path=path, offset=offset)


def _int(value, path: str, key: str, field: str, default):
    # type() rather than isinstance: bool is an int in Python but not in the format.
    if type(value) is int and value >= 0:
        return value
    if value is None:
        return default
    raise _bad(path, key, f"{field} must be an integer >= 0, not {value!r}")


def _entry_layout(key: str, entry: object, path: str, body_start: int,
                  dim_sizes: dict[str, tuple[int, str]]) -> VarLayout:
    """One variable's header entry, checked field by field (``dim_sizes`` collects the
    size of every dimension seen so far, to check that variables agree on them)."""
    if type(entry) is not dict:
        raise _bad(path, key, "header entry must be a JSON object")
    get = entry.get
    type_ = get(".type", "float64")
    if type(type_) is not str or type_ not in _TYPE_SET:
        raise _bad(path, key, f"unknown .type {type_!r} (expected one of {', '.join(TYPES)})")
    size = get(".size", [])
    if type(size) is list:
        for n in size:
            if type(n) is not int or n < 0:
                raise _bad(path, key, f".size entries must be integers >= 0, not {n!r}")
        shape = tuple(size)
    elif size is None:
        shape = None
    else:
        raise _bad(path, key, f".size must be a list or null, not {size!r}")
    # Checked inline when valid (the common case), by _int otherwise: a call per field
    # is a measurable share of reading a tiny file.
    offset = get(".offset", 0)
    if type(offset) is not int or offset < 0:
        offset = _int(offset, path, key, ".offset", 0)
    length = get(".len")
    if length is not None and (type(length) is not int or length < 0):
        length = _int(length, path, key, ".len", None)
    missing = get(".missing", False)
    if type(missing) is not bool:
        raise _bad(path, key, ".missing must be true or false")
    endian = get(".endian", "b")
    if endian != "l" and endian != "b":
        raise _bad(path, key, f".endian must be 'l' or 'b', not {endian!r}")
    dims = get(".dims")
    if dims is None:
        dims = default_dims(key, 0 if shape is None else len(shape))
    elif type(dims) is list:
        for dim in dims:
            if type(dim) is not str:
                raise _bad(path, key, f".dims must be a list of strings, not {dims!r}")
    else:
        raise _bad(path, key, f".dims must be a list of strings, not {dims!r}")
    if shape is not None:
        if len(dims) != len(shape):
            raise _bad(path, key, f".dims {dims} do not match .size {size}")
        for dim, n in zip(dims, shape, strict=True):
            seen = dim_sizes.setdefault(dim, (n, key))
            if seen[0] != n:
                raise _bad(path, key, f"dimension {dim!r} has size {n}, but {seen[0]} "
                                      f"in variable {unescape(seen[1])!r}")
    v = VarLayout(key, type_, shape, tuple(dims), body_start + offset, length, missing,
                  "<" if endian == "l" else ">")
    return v


def check_meta(meta: dict, path: str, body_start: int, file_size: int) -> tuple[dict, bool]:
    """Check every variable entry of a header; return their layouts and whether their
    offsets may need the string .len repair: they are laid out back to back in header
    order (as ds-format writes) but the .len add up to more than the body holds.

    This runs on every read, so the common case (a numeric variable) is kept short.
    """
    if type(meta.get(".", {})) is not dict:
        raise _fail(path, "dataset attributes '.' must be a JSON object")
    layouts = {}
    dim_sizes: dict[str, tuple[int, str]] = {}
    sequential = True
    running = 0
    strings_before = False
    deferred: list[FormatError] = []
    for key, entry in meta.items():
        if key[:1] == ".":
            continue  # "." and hidden entries carry no data
        v = _entry_layout(key, entry, path, body_start, dim_sizes)
        type_, shape, length, offset = v.type, v.shape, v.length, v.offset - body_start
        if not v.missing and type_ in NUMERIC_TYPES and v.count:
            need = v.count * v.dtype.itemsize
            if length is not None and length != need:
                raise _bad(path, key, f".len {length} disagrees with .size {list(shape or ())} "
                                      f"and .type {type_} (expected {need})")
            error = None if v.offset + need <= file_size else _past_end(v, path, need, file_size)
        else:
            error = _check_bounds(v, path, file_size)
        if error is not None:
            # Past the end may only mean ds-format's over-counted string .len moved this
            # offset; the reader corrects it and checks again. Anything else is an error.
            if not strings_before:
                raise error
            deferred.append(error)
        if length is None or offset != running:
            sequential = False
        else:
            running += length
        if v.count and type_ in STRING_TYPES:
            strings_before = True
        layouts[key] = v
    if deferred and not sequential:
        raise deferred[0]
    # When the .len add up to the body size, none is over-counted: no offset needs the
    # string .len repair (and so no string variable has to be measured to know it).
    return layouts, sequential and running != file_size - body_start


def _past_end(v: VarLayout, path: str, need: int, file_size: int) -> FormatError:
    return _bad(path, v.key, f"data ({need} bytes) runs past the end of the file "
                             f"({file_size} bytes)", v.offset)


def _check_bounds(v: VarLayout, path: str, file_size: int) -> FormatError | None:
    """Raise if ".len" disagrees with the type and size where that can be told from the
    header; return the error (not raised) if the bytes the header promises run past the
    end of the file."""
    count = v.count
    size = None if v.shape is None else list(v.shape)
    if v.length is not None:
        if count == 0 and v.length != 0:
            raise _bad(path, v.key, f".len {v.length} but .size {size} holds no values")
        lo = v.mask_len + (0 if v.missing else v.payload(count))
        hi = v.mask_len + v.payload(count)
        if count and v.type in STRING_TYPES:
            # ds-format 5.0.2 over-counts string .len (see carray.formats.ds), so only a
            # lower bound holds here; the exact check happens when the lengths are read.
            if v.length < lo:
                raise _bad(path, v.key, f".len {v.length} is too small for .size {size} and "
                                        f".type {v.type} (at least {lo})")
        elif count and not lo <= v.length <= hi:
            exact = f"{lo}" if lo == hi else f"between {lo} and {hi}"
            raise _bad(path, v.key, f".len {v.length} disagrees with .size {size} and .type "
                                    f"{v.type} (expected {exact})")
    # With a mask, the values' size is known only once the mask is read.
    need = 0 if count == 0 else v.mask_len if v.missing else v.payload(count)
    if v.offset + need > file_size:
        return _past_end(v, path, need, file_size)
    return None
