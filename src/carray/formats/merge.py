"""Merging dataset files (``.ds``, ``.nc``) along a dimension, a block of rows at a time.

:func:`merge_files` writes what ``ds.write(out, ds.merge([ds.read(p) for p in inputs],
dim))`` would, without holding any input, or the result, in memory: each variable is
read from every input and written to the output a block of rows (about
:data:`BLOCK_BYTES`) at a time (:meth:`carray.formats.ds.reader.Reader.iter_rows`,
:meth:`carray.formats.netcdf.Reader.iter_rows`), and written by a streaming writer
(:class:`carray.formats.ds.stream.StreamWriter`,
:class:`carray.formats.netcdf.StreamWriter`).

As in :func:`carray.formats.ds.merge`, variables with the dimension are joined along it
(every input must have them, with the same dimensions and the same sizes along the
others); the others, and the dataset attributes, are the first input's.  A variable
joined from inputs of different numeric types gets the type numpy's concatenation gives.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from carray.errors import UnsupportedDTypeError
from carray.formats import netcdf
from carray.formats.ds import reader as _ds_read
from carray.formats.ds.header import NUMERIC_TYPES, STRING_TYPES, default_dims, unescape
from carray.formats.ds.stream import StreamWriter as DsWriter

__all__ = ["BLOCK_BYTES", "merge_files"]

#: About how many bytes of a variable are read and written at a time.
BLOCK_BYTES = 4 << 20
#: Bytes counted for a string when sizing blocks (strings have no fixed size).
_STRING_BYTES = 64
_NETCDF = (".nc", ".nc4", ".nc3", ".netcdf")

PathLike = str | os.PathLike


class _Source:
    """One input file: its ds-shaped header (read once) and its variables' rows, a block
    at a time.  The file is open only while a variable's rows are read, so merging many
    files never holds many open."""

    def __init__(self, path: PathLike, storage_options: dict | None) -> None:
        self.path = os.fspath(path)
        self._options = storage_options
        self._nc = _is_netcdf(self.path)
        with self._open() as reader:
            self.header: dict = reader.header if self._nc else reader.header.meta

    def _open(self) -> Any:
        if self._nc:
            return netcdf.Reader(self.path)
        return _ds_read.Reader(self.path, self._options)

    def rows(self, key: str, step: int) -> Iterator[Any]:
        with self._open() as reader:
            if self._nc:
                yield from reader.iter_rows(key, step)
            else:
                yield from reader.iter_rows(reader.header.layouts[key], step)


def _is_netcdf(path: str) -> bool:
    return os.path.splitext(path.rstrip("/\\"))[1].lower() in _NETCDF


@dataclass
class _Variable:
    """One variable of the output and where its rows come from."""

    key: str
    attrs: dict
    dims: list[str]
    type: str
    shape: list[int] | None
    axis: int | None  # along which it is joined; None: the first input's, as it is
    sources: list[_Source]
    maybe_missing: bool

    def step(self) -> int:
        """Rows per block: about BLOCK_BYTES of output."""
        if not self.shape:
            return 1
        size = _STRING_BYTES if self.type in STRING_TYPES else \
            1 if self.type == "bool" else NUMERIC_TYPES[self.type].itemsize
        return max(1, BLOCK_BYTES // max(1, size * math.prod(self.shape[1:])))

    def blocks(self) -> Iterator[Any]:
        """The output's rows in order: each input's in turn when joined along the first
        axis; along another, the same rows of every input put side by side."""
        step = self.step()
        if self.axis is None:
            yield from self.sources[0].rows(self.key, step)
        elif self.axis == 0:
            for source in self.sources:
                yield from source.rows(self.key, step)
        else:
            for parts in zip(*(s.rows(self.key, step) for s in self.sources), strict=True):
                masked = any(isinstance(p, np.ma.MaskedArray) for p in parts)
                yield (np.ma.concatenate if masked else np.concatenate)(parts, axis=self.axis)


def _entry_dims(key: str, entry: dict) -> list[str]:
    dims = entry.get(".dims")
    return list(dims) if dims is not None else default_dims(key, len(entry.get(".size") or []))


def _maybe_missing(entry: dict) -> bool:
    """Whether a variable may hold missing values (a ds mask, or a NetCDF fill value)."""
    return bool(entry.get(".missing")) or "_FillValue" in entry or "missing_value" in entry


def _joined_type(key: str, types: list[str], default: str) -> str:
    """The ds type of the variable joined from parts of ``types`` (numpy's rule;
    ``default`` when there are none)."""
    if len(set(types)) <= 1:
        return types[0] if types else default
    if any(t in STRING_TYPES for t in types):
        raise UnsupportedDTypeError(f"variable {unescape(key)!r} is of types {sorted(set(types))} "
                                    "in different inputs: strings join only strings of one type")
    dtype = np.result_type(*(np.dtype(bool) if t == "bool" else NUMERIC_TYPES[t] for t in types))
    for name, candidate in NUMERIC_TYPES.items():
        if candidate == dtype:
            return name
    raise UnsupportedDTypeError(f"variable {unescape(key)!r}: joined, its types {types} make "
                                f"{dtype}, which ds does not store")


def _joined(key: str, dim: str, sources: list[_Source]) -> _Variable:
    """The variable ``key`` joined along ``dim`` from every input."""
    first = sources[0].header[key]
    dims = _entry_dims(key, first)
    axis = dims.index(dim)
    shape = list(first[".size"])
    types, maybe_missing = [], False
    for i, source in enumerate(sources):
        entry = source.header.get(key)
        if not isinstance(entry, dict) or entry.get(".size") is None:
            raise ValueError(f"{source.path}: no variable {unescape(key)!r} to merge along "
                             f"{dim!r}")
        if _entry_dims(key, entry) != dims:
            raise ValueError(f"variable {unescape(key)!r}: dims {_entry_dims(key, entry)} in "
                             f"{source.path}, {dims} in {sources[0].path}")
        size = list(entry[".size"])
        if size[:axis] + size[axis + 1:] != shape[:axis] + shape[axis + 1:]:
            raise ValueError(f"variable {unescape(key)!r}: shape {size} in {source.path} "
                             f"does not join shape {list(first['.size'])} of "
                             f"{sources[0].path} along {dim!r}")
        if i:
            shape[axis] += size[axis]
        type_ = entry.get(".type", "float64")
        if type_ not in STRING_TYPES or math.prod(size):
            # An empty string variable's type is a guess (written as unicode): it joins any.
            types.append(type_)
        maybe_missing |= _maybe_missing(entry)
    return _Variable(key, dict(first), dims, _joined_type(key, types, first.get(".type", "float64")), shape, axis, sources,
                     maybe_missing)


def _plan(sources: list[_Source], dim: str) -> list[_Variable]:
    """Every variable of the output, in the order ds writes them, checked up front."""
    header = sources[0].header
    out = []
    for key in sorted((k for k in header if not k.startswith(".")), key=unescape):
        entry = header[key]
        dims = _entry_dims(key, entry)
        if entry.get(".size") is not None and dim in dims:
            out.append(_joined(key, dim, sources))
        else:
            out.append(_Variable(key, dict(entry), dims, entry.get(".type", "float64"),
                                 entry.get(".size"), None, sources[:1], _maybe_missing(entry)))
    if not any(v.axis is not None for v in out):
        raise KeyError(f"{sources[0].path}: no variable along dimension {dim!r} to merge")
    _check_sizes(out)
    return out


def _check_sizes(variables: list[_Variable]) -> dict[str, int]:
    """Every dimension's size, which all variables along it must agree on."""
    sizes: dict[str, tuple[int, str]] = {}
    for v in variables:
        for name, n in zip(v.dims, v.shape or [], strict=False):
            seen = sizes.setdefault(name, (n, v.key))
            if seen[0] != n:
                raise ValueError(f"variable {unescape(v.key)!r}: dimension {name!r} has size "
                                 f"{n}, but {seen[0]} in {unescape(seen[1])!r}")
    for v in variables:  # variables without data still name their dimensions
        for name in v.dims:
            sizes.setdefault(name, (0, v.key))
    return {name: n for name, (n, _) in sizes.items()}


def merge_files(inputs: Sequence[PathLike], dim: str, output: PathLike, *,
                unlimited: Sequence[str] = (), fsync: bool | None = None,
                storage_options: dict | None = None) -> None:
    """Concatenate dataset files along ``dim`` into ``output``, a block at a time.

    Parameters
    ----------
    inputs : sequence of path
        ``.ds`` files (local paths or URLs) and NetCDF files (``.nc``; local), in order.
    dim : str
        The dimension to join along.
    output : path
        The merged file, ``.ds`` (a local path or a URL) or NetCDF (local): replaced
        atomically when complete; nothing is written there when anything fails.
    unlimited : sequence of str
        NetCDF output: dimensions to create as unlimited.
    fsync : bool, optional
        Flush the new file to stable storage before it replaces the old one.  Default:
        that of the output's writer, False for ``.ds`` (as :func:`carray.formats.ds.write`)
        and True for NetCDF (as :func:`carray.formats.netcdf.write`).
    storage_options : dict, optional
        Options of the file system of the inputs and output that are URLs.

    Notes
    -----
    Memory holds a few blocks of about :data:`BLOCK_BYTES` each, whatever the inputs'
    sizes; when ``dim`` is not a variable's first dimension, a block is at least one
    row of the output (the same row of every input, side by side).  A ``.ds`` output is
    assembled from temporary files of its variables (the disk holds it twice for a
    while); at a URL it is uploaded in one put, and so held in memory once.

    Raises
    ------
    KeyError
        No variable of the first input is along ``dim``.
    ValueError
        A variable to join is missing from an input, or its dimensions or the sizes of
        its other dimensions differ; a dimension would get two sizes.
    carray.errors.UnsupportedDTypeError
        A variable joins parts of types ds cannot hold together (str with numbers).
    """
    if not inputs:
        raise ValueError("merge needs at least one input")
    sources = [_Source(path, storage_options) for path in inputs]
    plan = _plan(sources, dim)
    attrs = dict(sources[0].header.get(".", {}))
    if _is_netcdf(os.fspath(output)):
        _write_netcdf(plan, output, attrs, unlimited, True if fsync is None else fsync)
        return
    with DsWriter(output, fsync=bool(fsync), storage_options=storage_options) as ds_out:
        for v in plan:
            ds_out.add(v.key, v.attrs, v.dims, v.type, v.shape, v.blocks())
        ds_out.close(attrs)


def _write_netcdf(plan: list[_Variable], output: PathLike, attrs: dict,
                  unlimited: Sequence[str], fsync: bool) -> None:
    with netcdf.StreamWriter(output, _check_sizes(plan), unlimited=unlimited,
                             fsync=fsync) as nc_out:
        for v in plan:
            # A char array's width is its longest string's: one pass to measure it first.
            strlen = max((len(x) for block in v.blocks() for x in np.ravel(block).tolist()
                          if isinstance(x, bytes)), default=1) if v.type == "str" else 1
            nc_out.add(v.key, v.attrs, v.dims, v.type, v.shape, v.blocks(),
                       maybe_missing=v.maybe_missing, strlen=strlen)
        nc_out.close(attrs)
