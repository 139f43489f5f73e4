"""Writing a ds file a variable at a time, each variable a block of rows at a time.

A ds file states every variable's offset and length in its header, before the body, and
a variable's length depends on its values (which ones are missing, how long its strings
are).  So :class:`StreamWriter` keeps each variable's bytes in temporary files as its
blocks come, one file per section of a variable -- the missing-value mask, the values
(for strings, their length table), the bytes of the strings -- and writes the ds file,
header first, when every variable is done, copying the sections over a slice at a time.
Memory stays at about a block and a copy buffer whatever the file's size; the disk holds
the data twice until the end.

The bytes are those :func:`carray.formats.ds.write` writes for the same dataset, but for
the byte order: numbers are written in this machine's.
"""

from __future__ import annotations

import itertools
import math
import os
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import IO, Any

import numpy as np

from carray.errors import UnsupportedDTypeError
from carray.formats.ds import _JSON as _HEADER_JSON
from carray.formats.ds import _endian
from carray.formats.ds.header import (
    LAYOUT_KEYS,
    NUMERIC_TYPES,
    STRING_TYPES,
    TYPES,
    VERSION_LINE,
    unescape,
)
from carray.formats.local_write import write_file
from carray.stores import LocalStore, resolve

#: Bytes copied at a time from the sections into the file.
COPY_BYTES = 1 << 20
_SECTIONS = ("mask", "values", "strings")


class _Bits:
    """Bits appended in runs of any length and written packed (most significant bit
    first) as whole bytes fill; :meth:`flush` pads the last byte with zero bits."""

    def __init__(self, out: IO[bytes]) -> None:
        self.out = out
        self.rest = np.zeros(0, np.bool_)

    def add(self, bits: np.ndarray) -> None:
        bits = np.concatenate([self.rest, np.asarray(bits, np.bool_).ravel()])
        whole = len(bits) // 8 * 8
        self.out.write(np.packbits(bits[:whole]).tobytes())
        self.rest = bits[whole:].copy()

    def flush(self) -> None:
        if len(self.rest):
            self.out.write(np.packbits(self.rest).tobytes())
        self.rest = np.zeros(0, np.bool_)


class StreamWriter:
    """A ds file at ``path`` (a local path or a URL) written a variable at a time.

    Call :meth:`add` for each variable, in the order they are to be stored, then
    :meth:`close` with the dataset attributes: only then is the file written (under a
    temporary name, then renamed; an object in one put).  Leaving a ``with`` block
    without :meth:`close` leaves nothing at ``path``.

    A local file is copied in from the sections a slice at a time; an object at a URL
    takes one put of the whole file, so the file is then held in memory once.
    ``fsync`` is that of :func:`carray.formats.ds.write` (default False).
    """

    def __init__(self, path: str | os.PathLike, *, fsync: bool = False,
                 storage_options: dict | None = None) -> None:
        self._store, self._key = resolve(path, storage_options)
        self._fsync = fsync
        self._dir = tempfile.TemporaryDirectory(prefix="carray-ds-")
        self._files = {name: open(os.path.join(self._dir.name, name), "w+b")  # noqa: SIM115
                       for name in _SECTIONS}
        self._header: dict[str, Any] = {}
        self._segments: list[tuple[str, int, int]] = []
        self._offset = 0

    def add(self, key: str, attrs: Mapping[str, Any], dims: Sequence[str], type_: str,
            shape: Sequence[int] | None, blocks: Iterable[Any]) -> None:
        """Write the variable ``key`` (a dataset key) from ``blocks``, its rows in order.

        Parameters
        ----------
        key : str
            The header key (an escaped name).
        attrs : mapping
            Its attributes (layout keys such as ``.size`` are left out and recomputed).
        dims : sequence of str
            Its dimensions.
        type_ : str
            Its ds type; every block is converted to it.
        shape : sequence of int, or None
            Its shape; None for a variable without data (``blocks`` is then not read).
        blocks : iterable of arrays
            Blocks of consecutive rows (masked arrays where values are missing) whose
            items, in C order, make the variable's.

        Raises
        ------
        carray.errors.UnsupportedDTypeError
            A block's values are not of ``type_``'s kind (strings for a numeric type, or
            the other way round).
        ValueError
            ``type_`` is not a ds type, or the blocks do not hold ``shape``'s items.
        """
        if type_ not in TYPES:
            raise ValueError(f"variable {unescape(key)!r}: {type_!r} is not a ds type")
        entry = {k: v for k, v in attrs.items() if k not in LAYOUT_KEYS}
        entry[".dims"] = list(dims)
        if shape is None:
            entry.update({".size": None, ".offset": self._offset, ".len": 0, ".type": type_,
                          ".missing": False})
        else:
            entry.update(self._write_data(key, type_, tuple(shape), blocks))
        self._header[key] = entry
        self._offset += entry[".len"]

    def _write_data(self, key: str, type_: str, shape: tuple[int, ...],
                    blocks: Iterable[Any]) -> dict[str, Any]:
        """Write the sections of one variable; its layout keys."""
        starts = {name: f.tell() for name, f in self._files.items()}
        mask = _Bits(self._files["mask"])
        bools = _Bits(self._files["values"])
        count, missing = 0, False
        for block in blocks:
            if isinstance(block, str | bytes):  # a 0-d variable's value, NULs and all
                block = np.array(block, dtype=object)
            flat = np.asarray(np.ma.getdata(block)).ravel()
            masked = np.ma.getmaskarray(block).ravel()
            mask.add(masked)
            if masked.any():
                missing, flat = True, flat[~masked]
            count += masked.size
            self._write_values(key, type_, flat, bools)
        mask.flush()
        bools.flush()
        if count != math.prod(shape):
            raise ValueError(f"variable {unescape(key)!r}: {count} values for shape "
                             f"{list(shape)} ({math.prod(shape)} values)")
        sizes = {name: f.tell() - starts[name] for name, f in self._files.items()}
        for name in _SECTIONS:
            if name != "mask" or missing:
                self._segments.append((name, starts[name], sizes[name]))
        layout = {".size": list(shape), ".offset": self._offset,
                  ".len": sum(sizes.values()) - (0 if missing else sizes["mask"]),
                  ".type": type_, ".missing": missing}
        if type_ in STRING_TYPES:
            layout[".endian"] = "l"
        elif type_ != "bool":
            layout[".endian"] = _endian(NUMERIC_TYPES[type_])
        return layout

    def _write_values(self, key: str, type_: str, values: np.ndarray, bools: _Bits) -> None:
        """Write the stored values of a block (its missing ones left out)."""
        kind_ok = values.dtype.kind in "biuf" if type_ not in STRING_TYPES else \
            all(isinstance(x, str if type_ == "unicode" else bytes) for x in values.tolist())
        if not kind_ok:
            raise UnsupportedDTypeError(f"variable {unescape(key)!r}: values of dtype "
                                        f"{values.dtype} in a {type_} variable")
        if type_ == "bool":
            bools.add(values)
        elif type_ in STRING_TYPES:
            items = [x.encode("utf-8") for x in values.tolist()] if type_ == "unicode" \
                else values.tolist()
            self._files["values"].write(np.array([len(x) for x in items], "<u8").tobytes())
            self._files["strings"].write(b"".join(items))
        else:
            native = NUMERIC_TYPES[type_]
            self._files["values"].write(np.ascontiguousarray(values, native).data)

    def close(self, attrs: Mapping[str, Any]) -> None:
        """Write the file: the header (with the dataset attributes ``attrs``), then every
        variable's sections, in the order they were added."""
        self._header["."] = dict(attrs)
        try:
            text = _HEADER_JSON.encode(self._header)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"dataset metadata cannot be written as JSON: {exc}") from None
        for f in self._files.values():
            f.flush()
        head = VERSION_LINE + text.encode("ascii") + b"\n"
        if isinstance(self._store, LocalStore):
            pieces = ([piece] for piece in self._copied())  # one at a time, never a list
            write_file(self._key, itertools.chain([[head]], pieces), fsync=self._fsync)
        else:
            self._store.put(self._key, b"".join([head, *self._copied()]), fsync=self._fsync)
        self.discard()

    def _copied(self) -> Iterator[bytes]:
        for name, start, size in self._segments:
            fd = self._files[name].fileno()
            for at in range(start, start + size, COPY_BYTES):
                n = min(COPY_BYTES, start + size - at)
                piece = os.pread(fd, n, at)
                if len(piece) != n:
                    raise OSError(f"temporary {name} section ended early")
                yield piece

    def discard(self) -> None:
        """Remove the temporary files (nothing is written at the destination)."""
        for f in self._files.values():
            f.close()
        self._dir.cleanup()

    def __enter__(self) -> StreamWriter:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.discard()
