"""Where a Bloscpack pack or append reads its bytes from, piece by piece.

A :class:`Source` hands out the uncompressed bytes in the order they are
compressed, so a writer never holds more than the pieces it has in flight: an
in-memory array or bytes object is sliced (no copy), a non-contiguous array is
copied a few rows at a time, a file is read piece by piece.  ``.npy`` files are described by their own header (numpy's format
version 1.0, 2.0 or 3.0: magic, version, a header length, a dict literal with
``descr``, ``fortran_order`` and ``shape``, then the raw items), so they are
streamed as arrays without being loaded.
"""

from __future__ import annotations

import io
import os
from typing import Any, BinaryIO, Protocol

import numpy as np

from carray.errors import FormatError, UnsupportedDTypeError

_NPY_MAGIC = b"\x93NUMPY"


class Source(Protocol):
    """Uncompressed bytes read in order, ``nbytes`` in all."""

    nbytes: int

    def read(self, n: int) -> np.ndarray:
        """The next ``n`` bytes as a 1-d uint8 array (a view or a fresh buffer)."""

    def close(self) -> None:
        """Release what the source opened."""


class ArraySource:
    """Bytes already in memory (a flat uint8 view), handed out as views."""

    def __init__(self, flat: np.ndarray) -> None:
        self.flat, self.nbytes, self.pos = flat, flat.nbytes, 0

    def read(self, n: int) -> np.ndarray:
        piece = self.flat[self.pos:self.pos + n]
        self.pos += n
        return piece

    def close(self) -> None:
        self.flat = np.empty(0, np.uint8)


class StridedSource:
    """A non-contiguous array's bytes in C order, copied a few rows (along the first
    axis) at a time, so the copy never holds much more than a chunk."""

    def __init__(self, a: np.ndarray) -> None:
        self.a, self.nbytes, self.row = a, a.nbytes, 0
        self.rowbytes = a.nbytes // len(a) if a.ndim and len(a) else 0
        self.pending = np.empty(0, np.uint8)

    def read(self, n: int) -> np.ndarray:
        parts, have = [self.pending], self.pending.nbytes
        while have < n:
            k = max(1, -(-(n - have) // self.rowbytes))  # rows still needed, rounded up
            rows = np.ascontiguousarray(self.a[self.row:self.row + k])
            self.row += k
            parts.append(rows.reshape(-1).view(np.uint8))
            have += parts[-1].nbytes
        buf = np.concatenate(parts) if len(parts) > 1 else parts[0]
        self.pending = buf[n:]
        return buf[:n]

    def close(self) -> None:
        self.pending = np.empty(0, np.uint8)


class FileSource:
    """``nbytes`` bytes of a binary file object from its current position, read piece by
    piece into fresh buffers (several pieces may be in flight at once)."""

    def __init__(self, f: Any, nbytes: int, name: str, owned: bool = False) -> None:
        self.f, self.nbytes, self.name, self.owned = f, nbytes, name, owned
        self.pos = 0

    def read(self, n: int) -> np.ndarray:
        buf = np.empty(n, np.uint8)
        view, got = buf.data, 0
        while got < n:
            k = self.f.readinto(view[got:])
            if not k:
                raise FormatError(f"the input ended after {self.pos + got} of "
                                  f"{self.nbytes} bytes (did it shrink while being read?)",
                                  self.name)
            got += k
        self.pos += n
        return buf

    def close(self) -> None:
        if self.owned:
            self.f.close()


def is_file_object(obj: Any) -> bool:
    """Whether ``obj`` is a readable binary file object (rather than data)."""
    return hasattr(obj, "readinto")


def _name(f: Any) -> str:
    return str(getattr(f, "name", "<file object>"))


def _remaining(f: BinaryIO) -> int:
    """Bytes from the current position to the end (the file must be seekable)."""
    try:
        here = f.tell()
        end = f.seek(0, io.SEEK_END)
        f.seek(here)
    except (OSError, AttributeError, ValueError):
        raise ValueError(f"{_name(f)}: a Bloscpack file records its size up front, so the "
                         "input must be seekable (or be read into memory first)") from None
    return end - here


def bytes_source(f: BinaryIO) -> FileSource:
    """The rest of the binary file object ``f``, as raw bytes."""
    return FileSource(f, _remaining(f), _name(f))


class NpyInfo:
    """What a ``.npy`` header says: dtype, shape, memory order and where the items start."""

    def __init__(self, dtype: np.dtype, shape: tuple[int, ...], order: str, offset: int):
        self.dtype, self.shape, self.order, self.offset = dtype, shape, order, offset

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=object)) * self.dtype.itemsize


def read_npy_header(f: BinaryIO) -> NpyInfo:
    """Parse the ``.npy`` header at ``f``'s position, leaving ``f`` at the first item."""
    name = _name(f)
    start = f.tell()
    if f.read(len(_NPY_MAGIC)) != _NPY_MAGIC:
        raise FormatError("not a .npy file (no \\x93NUMPY magic)", name, start)
    f.seek(start)
    try:
        version = np.lib.format.read_magic(f)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
        elif version in ((2, 0), (3, 0)):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
        else:
            raise ValueError(f"unsupported .npy format version {version}")
    except (ValueError, SyntaxError, TypeError) as exc:
        raise FormatError(f"bad .npy header: {exc}", name, start) from None
    if dtype.hasobject:
        raise UnsupportedDTypeError(f"{name}: object arrays cannot be stored in Bloscpack files")
    return NpyInfo(dtype, tuple(shape), "F" if fortran else "C", f.tell())


def npy_source(f: BinaryIO) -> tuple[FileSource, NpyInfo]:
    """The items of the ``.npy`` file object ``f`` (positioned at its magic)."""
    info = read_npy_header(f)
    left = _remaining(f)
    if left < info.nbytes:
        raise FormatError(f"truncated .npy: {info.nbytes} bytes of items announced, "
                          f"{left} present", _name(f), info.offset)
    return FileSource(f, info.nbytes, _name(f)), info


def open_npy(path: str | os.PathLike) -> tuple[FileSource, NpyInfo]:
    """:func:`npy_source` on a file it opens (and closes with the source)."""
    f = open(path, "rb")  # noqa: SIM115 - closed by the source
    try:
        src, info = npy_source(f)
    except BaseException:
        f.close()
        raise
    src.owned = True
    return src, info


def both_orders(shape: tuple[int, ...]) -> bool:
    """Whether an array of this shape is both C- and Fortran-contiguous (at most one
    axis longer than 1, or none at all), as numpy reckons it."""
    return 0 in shape or sum(n != 1 for n in shape) <= 1


def npy_header(dtype: np.dtype, shape: tuple[int, ...], order: str) -> bytes:
    """The ``.npy`` header ``numpy.save`` writes for such an array."""
    # numpy calls an array Fortran-ordered only when it is not also C-contiguous.
    d = {"descr": np.lib.format.dtype_to_descr(dtype),
         "fortran_order": order == "F" and not both_orders(shape), "shape": tuple(shape)}
    buf = io.BytesIO()
    try:
        np.lib.format.write_array_header_1_0(buf, d)
    except ValueError:  # a header too long for version 1.0's 16-bit length
        buf = io.BytesIO()
        np.lib.format.write_array_header_2_0(buf, d)
    return buf.getvalue()
