"""Converting between formats: arrays (carray directories, bcolz, .b2nd, .npy) and
datasets (.ds, .nc).

Each side is a row of a small table chosen by ``to=`` or by the destination's
extension.  Arrays are copied a block of rows at a time (never the whole array in
memory), into a temporary name renamed into place at the end, so an interrupted
conversion leaves no half-written destination.  The destination keeps the
source's chunk and block shapes where its format can hold them.
"""

from __future__ import annotations

import importlib
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from carray.errors import ContainerExistsError, FormatError

# Rows copied per step: whole source chunks, about this many bytes.
_COPY_BYTES = 64 * 2**20

# -- datasets ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class DatasetFormat:
    """A dataset format: a module with ``read``, ``write`` and ``read_header``.

    The module is imported only when used.
    """

    name: str
    extensions: tuple[str, ...]
    module: str
    write_options: tuple[str, ...] = ()  # keyword options its writer accepts

    def _mod(self):
        return importlib.import_module(self.module)

    def read(self, path, variables=None, sel=None) -> dict:
        return self._mod().read(path, variables, sel)

    def read_header(self, path) -> dict:
        return self._mod().read_header(path)

    def write(self, path, dataset, **options) -> None:
        unknown = set(options) - set(self.write_options)
        if unknown:
            raise ValueError(f"{self.name} output does not take {', '.join(sorted(unknown))}")
        self._mod().write(path, dataset, **options)


FORMATS: tuple[DatasetFormat, ...] = (
    DatasetFormat("ds", (".ds",), "carray.formats.ds"),
    DatasetFormat("netcdf", (".nc", ".nc4", ".nc3", ".netcdf"), "carray.formats.netcdf",
                  write_options=("unlimited",)),
)


def _ext(path) -> str:
    return os.path.splitext(os.fspath(path).rstrip("/\\"))[1].lower()


def format_for(path: str | os.PathLike, name: str | None = None) -> DatasetFormat:
    """The dataset format named ``name``, or else the one whose extension ``path`` has."""
    if name is not None:
        for fmt in FORMATS:
            if fmt.name == name:
                return fmt
        raise ValueError(f"unknown dataset format {name!r} (known: "
                         f"{', '.join(f.name for f in FORMATS)})")
    ext = _ext(path)
    for fmt in FORMATS:
        if ext in fmt.extensions:
            return fmt
    known = ", ".join(e for f in FORMATS for e in f.extensions)
    raise ValueError(f"{os.fspath(path)}: no dataset reader or writer for extension "
                     f"{ext or '(none)'!r} (known: {known}; or pass --to FORMAT)")


def read_any(path, variables=None, sel=None) -> dict:
    """Read any supported dataset file (by extension)."""
    return format_for(path).read(path, variables, sel)


def write_any(path, dataset, fmt: str | None = None, **options) -> None:
    """Write a dataset in the format of ``path``'s extension (or ``fmt``)."""
    format_for(path, fmt).write(path, dataset, **options)


# -- arrays -----------------------------------------------------------------------------------

#: Array formats: name -> (extensions, what it is).
ARRAY_FORMATS: dict[str, tuple[tuple[str, ...], str]] = {
    "carray": ((".carray", ".ca"), "carray's superchunk directory (the default)"),
    "bcolz": ((".bcolz",), "a bcolz 1.x directory"),
    "b2nd": ((".b2nd",), "a python-blosc2 frame"),
    "npy": ((".npy",), "a numpy .npy file"),
}


def array_format_for(path: str | os.PathLike, name: str | None = None) -> str:
    """The array format named ``name``, or the one ``path``'s extension names.

    A path with no known extension is a carray (superchunk) directory.
    """
    if name is not None:
        if name not in ARRAY_FORMATS:
            raise ValueError(f"unknown array format {name!r} (known: {', '.join(ARRAY_FORMATS)})")
        return name
    ext = _ext(path)
    for fmt, (extensions, _) in ARRAY_FORMATS.items():
        if ext in extensions:
            return fmt
    return "carray"


def open_array(path: str | os.PathLike) -> Any:
    """An array to copy from: a ``.npy`` file (memory-mapped) or any carray."""
    from carray.toplevel import open as open_container

    path = os.fspath(path)
    if os.path.isfile(path) and _ext(path) == ".npy":
        try:
            return np.load(path, mmap_mode="r", allow_pickle=False)
        except (ValueError, OSError, EOFError) as exc:
            raise FormatError(f"not a readable .npy file: {exc}", path) from None
    src = open_container(path, mode="r")
    if not hasattr(src, "chunks") or not hasattr(src, "iterblocks") or \
            not hasattr(src, "cparams"):
        raise ValueError(f"{path}: a table, not an array; convert its columns one by one")
    return src


def _grid_of(src: Any, fmt: str) -> dict[str, Any]:
    """Chunk keywords for the destination: the source's where the format can hold them."""
    chunks = getattr(src, "chunks", None)
    if chunks is None:
        return {}
    blocks = getattr(src, "blocks", None)
    rows = blocks is None and tuple(chunks[1:]) == tuple(max(n, 1) for n in src.shape[1:])
    if fmt == "bcolz":
        return {"chunklen": chunks[0]} if rows else {}
    return {"chunks": tuple(chunks), "blocks": blocks}


def _temporary(dst: str) -> str:
    head, tail = os.path.split(dst.rstrip("/\\"))
    return os.path.join(head, f".{tail}.{os.getpid()}.converting")


def _remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    elif os.path.lexists(path):
        os.unlink(path)


def convert_array(src: str | os.PathLike, dst: str | os.PathLike, to: str | None = None, *,
                  chunks: tuple[int, ...] | None = None,
                  blocks: tuple[int, ...] | None = None, cparams: Any = None,
                  overwrite: bool = False,
                  progress: Callable[[int, int], None] | None = None) -> None:
    """Copy an array between carray directories, bcolz 1.x, ``.b2nd`` and ``.npy``.

    Parameters
    ----------
    src, dst : path
        Source (its format is found from what is there) and destination.
    to : str, optional
        Destination format (default: from ``dst``'s extension; see :data:`ARRAY_FORMATS`).
    chunks, blocks, cparams : optional
        Override the destination's chunk and block shapes and compression
        (defaults: the source's, where the format can hold them).
    overwrite : bool
        Replace an existing ``dst`` (the old one stays until the copy is complete).
    progress : callable, optional
        Called as ``progress(bytes_done, bytes_total)`` after every block of rows.
    """
    from carray.array import carray

    src, dst = os.fspath(src), os.fspath(dst)
    fmt = array_format_for(dst, to)
    if os.path.lexists(dst) and not overwrite:
        raise ContainerExistsError(f"{dst}: already exists (pass overwrite=True / --force)")
    if os.path.abspath(src) == os.path.abspath(dst):
        raise ValueError("source and destination are the same path")
    source = open_array(src)
    shape, dtype = tuple(source.shape), source.dtype
    if not shape:
        raise ValueError(f"{src}: a 0-d array has no rows to copy")
    rowbytes = max(int(np.prod(shape[1:], dtype=np.int64)) * dtype.itemsize, 1)
    step = getattr(source, "chunks", (1,))[0]
    blen = max(step, _COPY_BYTES // rowbytes // step * step)
    total = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    tmp = _temporary(dst)
    _remove(tmp)
    try:
        if fmt == "npy":
            _copy_to_npy(source, tmp, blen, total, progress)
        else:
            grid = _grid_of(source, fmt)
            if chunks is not None:
                grid = {"chunks": tuple(chunks), "blocks": blocks}
            elif blocks is not None:
                grid["blocks"] = tuple(blocks)
            if cparams is None:
                cparams = getattr(source, "cparams", None)
            out = carray(np.empty((0, *shape[1:]), dtype=dtype), rootdir=tmp, mode="w",
                         format="superchunk" if fmt == "carray" else fmt, cparams=cparams,
                         expectedlen=shape[0], **grid)
            attrs = getattr(source, "attrs", None)
            if attrs is not None:
                for key, value in attrs.items():
                    out.attrs[key] = value
            done = 0
            for start in range(0, shape[0], blen):
                block = np.asarray(source[start:start + blen])
                out.append(block)
                done += block.nbytes
                if progress is not None:
                    progress(done, total)
            out.close()
        if os.path.lexists(dst):
            _remove(dst)
        os.replace(tmp, dst)
    except BaseException:
        _remove(tmp)
        raise
    finally:
        close = getattr(getattr(source, "_layout", None), "close", None)
        if close is not None:
            close()


def _copy_to_npy(source: Any, tmp: str, blen: int, total: int,
                 progress: Callable[[int, int], None] | None) -> None:
    out = np.lib.format.open_memmap(tmp, mode="w+", dtype=source.dtype, shape=source.shape)
    try:
        done = 0
        for start in range(0, source.shape[0], blen):
            block = np.asarray(source[start:start + blen])
            out[start:start + len(block)] = block
            done += block.nbytes
            if progress is not None:
                progress(done, total)
        out.flush()
    finally:
        del out
    fd = os.open(tmp, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# -- both -------------------------------------------------------------------------------------


def _is_dataset(path: str | os.PathLike, to: str | None) -> bool:
    names = {f.name for f in FORMATS}
    return (to in names) if to is not None else \
        any(_ext(path) in f.extensions for f in FORMATS)


def convert(src: str | os.PathLike, dst: str | os.PathLike, to: str | None = None,
            **options: Any) -> None:
    """Convert ``src`` to ``dst``: datasets (.ds, .nc) or arrays (see :func:`convert_array`).

    The formats come from the extensions, or ``to`` for the destination.
    """
    array_exts = {e for exts, _ in ARRAY_FORMATS.values() for e in exts}
    dst_is_array = to in ARRAY_FORMATS if to is not None else _ext(dst) in array_exts
    if _is_dataset(src, None) and not dst_is_array:
        reader, writer = format_for(src), format_for(dst, to)
        writer.write(dst, reader.read(src), **options)
    elif _is_dataset(src, None) or _is_dataset(dst, to):
        raise ValueError(f"cannot convert {os.fspath(src)} to {os.fspath(dst)}: one is a "
                         "dataset (.ds, .nc) and the other an array")
    else:
        convert_array(src, dst, to, **options)
