"""Groups to and from the formats people have: NetCDF-4, HDF5, Zarr v3 groups and ds files.

:func:`convert_group` copies a tree of groups, N-d arrays and tables between a
carray group (:func:`carray.group`) and

* NetCDF-4 files (``.nc``; through netCDF4, :mod:`carray.integrations.group_netcdf`):
  sub-groups are NetCDF-4 groups, dims are NetCDF dimensions, a table is a
  sub-group whose columns are variables along its ``row`` dimension;
* HDF5 files (``.h5``, ``.hdf5``; through h5py, :mod:`carray.integrations.group_hdf5`):
  groups are HDF5 groups, an array's dims are the attribute ``_ARRAY_DIMENSIONS``
  (a list of names, as xarray's Zarr v2 stores do; HDF5 dimension scales are read,
  not written), a table is a 1-d compound dataset;
* Zarr v3 groups (a directory whose ``zarr.json`` is a group's, ``.zarr``; through
  zarr, :mod:`carray.integrations.group_zarr`): dims are ``dimension_names``, chunks
  and the Blosc codec carry over, a table is a group of column arrays marked by the
  attribute ``_carray_table``;
* ds files (``.ds``): flat datasets, so only a group of arrays (the root group's) is
  written; a group with sub-groups or tables is refused, naming them, rather than
  flattened.  Read, every variable becomes an array of the root group.

Any of those may also be converted to another (a NetCDF file to a Zarr group, say).
Data moves a block of whole chunk rows at a time, never a whole array.  The
destination is built under a temporary name beside it and renamed into place, so
a failed conversion leaves nothing at the destination (nor under the temporary
name).

Each file holds what the format's own library writes, read back as that library
(and xarray) reads it: bools, datetimes and timedeltas in NetCDF and ds files as
xarray encodes them (:func:`carray.integrations.group_nodes.cf_encoded`), in HDF5
and Zarr as h5py and zarr-python store them; attribute values as
:mod:`carray.attrs.peers` says; ``U`` text as variable-length strings in NetCDF and
HDF5 (read back as wide as its longest value).  What a format has no form for
(float16 and complex arrays in NetCDF and ds, bools or dicts as NetCDF attributes,
dates in JSON attributes) is refused when written, naming it.  A table's group
carries carray's one mark, ``_carray_table``.  Axes without names get made-up
dimension names in NetCDF (not kept when read back).
"""

from __future__ import annotations

import contextlib
import importlib
import os
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from carray import registry
from carray.array import transfer
from carray.errors import ContainerExistsError, UnsupportedOptionError
from carray.integrations import zarr_arrays
from carray.integrations.group_nodes import (
    ArrayNode,
    GroupNode,
    Node,
    TableNode,
    named_dims,
    row_step,
    sliced_rows,
)
from carray.stores import Store, is_url, resolve
from carray.stores.staging import staged

#: Destination format names (``to=``) and what each is.
GROUP_FORMATS = {
    "group": "carray group",
    "netcdf": "NetCDF-4 file",
    "hdf5": "HDF5 file",
    "zarr": "Zarr v3 group",
    "ds": "ds file",
}
#: Extensions of HDF5 files (NetCDF files are HDF5 files too, but are read as NetCDF).
HDF5_EXTENSIONS = (".h5", ".hdf5", ".he5")
_EXTENSIONS = {".zarr": "zarr", ".ds": "ds", **dict.fromkeys(HDF5_EXTENSIONS, "hdf5"),
               **dict.fromkeys((".nc", ".nc4", ".netcdf"), "netcdf")}
#: Where each format's reader and writer live.
_MODULES = {"netcdf": "carray.integrations.group_netcdf",
            "hdf5": "carray.integrations.group_hdf5",
            "zarr": "carray.integrations.group_zarr"}

Progress = Callable[[int, int], None]


def _ext(path: str) -> str:
    return os.path.splitext(path.rstrip("/\\"))[1].lower()


def _extensions_of(name: str) -> tuple[str, ...]:
    for fmt in registry.FORMATS:
        if fmt.name == name:
            return fmt.extensions
    return ()


# -- telling the sides ------------------------------------------------------------------------


def source_kind(src: str | os.PathLike, storage_options: dict | None = None) -> str | None:
    """Which group format is stored at ``src`` (a key of :data:`GROUP_FORMATS`), or None
    when it is something else (an array, a table).

    Raises
    ------
    ContainerNotFoundError
        Nothing is at ``src``.
    """
    text = os.fspath(src)
    options = storage_options if is_url(text) else None
    store, key = registry.locate(text, options)
    if _ext(text) in HDF5_EXTENSIONS:
        return "hdf5"
    if store.isdir(key):
        doc = zarr_arrays.node_document(store, key)
        if doc is not None and doc.get("node_type") == "group":
            return "zarr"
    name = registry.guess(text, options).name
    return name if name in ("group", "netcdf", "ds") else None


def dest_kind(dst: str | os.PathLike, to: str | None = None, source: str | None = None
              ) -> str | None:
    """Which group format ``to`` names, or else ``dst``'s extension (none: a carray
    group); None when it names an array or table format.  Given a ``source`` that is a
    group or dataset format, the extension of carray's array directories (``.carray``)
    names a carray group too: a directory of carray's, holding what the source holds."""
    if to is not None:
        return to if to in GROUP_FORMATS else None
    ext = _ext(os.fspath(dst))
    if not ext or ext in _extensions_of("group"):
        return "group"
    if source in GROUP_FORMATS and ext in _extensions_of("carray"):
        return "group"
    return _EXTENSIONS.get(ext)


def is_group_conversion(src: str | os.PathLike, dst: str | os.PathLike, to: str | None = None,
                        storage_options: dict | None = None) -> bool:
    """Whether :func:`carray.integrations.convert.convert` of ``src`` to ``dst`` is a group's: the
    source is a group (carray, Zarr or HDF5), or a dataset going to a group format,
    or something else asked to become a carray group or an HDF5 file (which
    :func:`convert_group` then refuses, saying why)."""
    kind = source_kind(src, storage_options)
    if kind in ("group", "zarr", "hdf5"):
        return True
    target = dest_kind(dst, to, kind)
    if kind in ("netcdf", "ds"):
        return target in ("group", "zarr", "hdf5")
    return target == "hdf5" or to == "group" or (
        target == "group" and bool(_ext(os.fspath(dst))))


# -- the carray side --------------------------------------------------------------------------


def _dims_of(root: Any, path: str) -> tuple[str, ...] | None:
    """An array's dims; None when they are the names a group makes up for unnamed axes."""
    return named_dims(path, root.dims_of(path))


def _array_node(root: Any, path: str, a: Any) -> ArrayNode:
    shape = tuple(a.shape)
    step = row_step(shape, a.dtype.itemsize, a.chunks[0] if shape else None)
    blocks = a.blocks if isinstance(a.blocks, tuple) and shape else None
    return ArrayNode(path, shape, a.dtype, _dims_of(root, path), dict(a.attrs.getall()),
                     tuple(a.chunks) if shape else None, a.cparams,
                     sliced_rows(a.__getitem__, shape, step), blocks, source=a)


def _column_dtype(col: Any) -> np.dtype:
    base = np.dtype(object) if col.dtype.kind in "OT" else col.dtype
    return np.dtype((base, tuple(col.shape[1:]))) if col.ndim > 1 else base


def _table_node(path: str, t: Any) -> TableNode:
    columns = {name: _column_dtype(t.cols[name]) for name in t.names}
    nrows = len(t)
    width = sum(max(d.itemsize, 8) for d in columns.values())
    step = row_step((nrows,), width, getattr(t.cols[t.names[0]], "chunks", (1,))[0]
                    if t.names else 1)

    def batches() -> Iterator[dict[str, np.ndarray]]:
        for lo in range(0, nrows, step):
            yield {name: np.asarray(t.cols[name][lo:lo + step]).astype(dtype.base, copy=False)
                   for name, dtype in columns.items()}
    return TableNode(path, columns, nrows, dict(t.attrs.getall()), batches)


@contextlib.contextmanager
def read_carray_group(path: str, storage_options: dict | None) -> Iterator[list[Node]]:
    """The nodes of the carray group at ``path``."""
    import carray

    g = carray.open_group(path, mode="r", storage_options=storage_options)
    try:
        nodes: list[Node] = [GroupNode("", dict(g.attrs.getall()))]
        for member, kind, obj in g.walk():
            if kind == "group":
                nodes.append(GroupNode(member, dict(obj.attrs.getall())))
            elif kind == "array":
                nodes.append(_array_node(g, member, obj))
            else:
                nodes.append(_table_node(member, obj))
        yield nodes
    finally:
        g.close()


def _grid(node: ArrayNode) -> dict[str, Any]:
    """The chunk (and block) shape keywords for a new carray like ``node``'s source."""
    if not node.chunks or len(node.chunks) != len(node.shape):
        return {}
    grid: dict[str, Any] = {"chunks": tuple(max(1, int(c)) for c in node.chunks)}
    if node.blocks is not None and len(node.blocks) == len(node.shape):
        grid["blocks"] = node.blocks
    return grid


class CarrayGroupWriter:
    """A new carray group at ``path`` filled from nodes, in one version."""

    def __init__(self, path: str, storage_options: dict | None, message: str) -> None:
        import carray

        self.group = carray.group(path, mode="w", storage_options=storage_options)
        self._tx = self.group.transaction(message=message)
        self._tx.__enter__()
        #: Which chunks of each array (by path) moved as stored bytes, which were decoded.
        self.stats: dict[str, transfer.MoveStats] = {}

    def add(self, node: Node, report: Callable[[int], None]) -> None:
        g = self.group
        if isinstance(node, GroupNode):
            if not node.path:
                for key, value in node.attrs.items():
                    g.attrs[key] = value
            else:
                g.create_group(node.path, attrs=node.attrs)
        elif isinstance(node, ArrayNode):
            self._array(node, report)
        else:
            self._table(node, report)

    def _array(self, node: ArrayNode, report: Callable[[int], None]) -> None:
        g = self.group
        if not node.shape:
            value = next(node.rows())
            g.create_array(node.path, np.asarray(value, dtype=node.dtype), dims=node.dims,
                           attrs=node.attrs)
            report(node.dtype.itemsize)
            return
        extra = _grid(node)
        if node.cparams is not None:
            extra["cparams"] = node.cparams
        if node.source is not None and node.source.order == "C":
            a = g.create_array(node.path, shape=(0, *node.shape[1:]), dtype=node.dtype,
                               dims=node.dims, attrs=node.attrs, **extra)
            self.stats[node.path] = transfer.fill(a, node.source)
            report(node.nbytes)
            return
        a = g.create_array(node.path, shape=node.shape, dtype=node.dtype, dims=node.dims,
                           attrs=node.attrs, **extra)
        at = 0
        for block in node.rows():
            a[at:at + len(block)] = block
            at += len(block)
            report(block.nbytes)

    def _table(self, node: TableNode, report: Callable[[int], None]) -> None:
        batches = node.batches()
        first = next(batches, None)
        if first is None:
            first = {name: np.empty((0, *d.shape), d.base) for name, d in node.columns.items()}
        t = self.group.create_table(node.path, first, attrs=node.attrs)
        report(sum(v.nbytes for v in first.values()))
        for batch in batches:
            t.append(batch)
            report(sum(v.nbytes for v in batch.values()))

    def close(self) -> None:
        self._tx.__exit__(None, None, None)
        self.group.close()

    def discard(self) -> None:
        with contextlib.suppress(Exception):
            self._tx.__exit__(RuntimeError, RuntimeError("conversion failed"), None)
        self.group.discard()  # members closed without writing: their files let go


# -- reading and writing any of them ----------------------------------------------------------


def _reader(kind: str, path: str, storage_options: dict | None
            ) -> contextlib.AbstractContextManager[list[Node]]:
    if kind == "group":
        return read_carray_group(path, storage_options)
    if kind == "ds":
        from carray.integrations.group_ds import read_ds

        return read_ds(path)
    return importlib.import_module(_MODULES[kind]).read(path)


def _writer(kind: str, path: str, storage_options: dict | None, message: str) -> Any:
    if kind == "group":
        return CarrayGroupWriter(path, storage_options, message)
    if kind == "ds":
        from carray.integrations.group_ds import DsWriter

        return DsWriter(path)
    return importlib.import_module(_MODULES[kind]).Writer(path)


def _a(what: str) -> str:
    return f"{'an' if what[0] in 'AEIOUaeiou' or what.startswith('HDF') else 'a'} {what}"


def _refuse(src: str, dst: str, skind: str | None, dkind: str | None,
            storage_options: dict | None) -> None:
    """Raise ValueError when one side is a group format and the other is not."""
    if skind is None:
        what = registry.guess(src, storage_options if is_url(src) else None)
        raise ValueError(
            f"cannot convert {src} to {dst}: {src} is a {what.description} (an {what.kind}), "
            f"and {dst} would be {_a(GROUP_FORMATS[dkind or 'group'])}, which holds groups "
            "of arrays; create a group and add the array to it (carray.group)")
    if dkind is None:
        raise ValueError(
            f"cannot convert {src} to {dst}: {src} is {_a(GROUP_FORMATS[skind])} (a group of "
            "arrays and tables), and an array or table format holds one; convert the group "
            "to .nc, .h5, .zarr, .ds or a carray group directory, or convert one member")


def _destination(src: str, dst: str, overwrite: bool, storage_options: dict | None
                 ) -> tuple[Store, str, dict | None]:
    dst_options = storage_options if is_url(dst) else None
    store, key = resolve(dst, dst_options)
    store.invalidate(key)
    if store.exists(key) and not overwrite:
        raise ContainerExistsError(f"{store.url(key)}: already exists "
                                   "(pass overwrite=True / --force)")
    sstore, skey = resolve(src, storage_options if is_url(src) else None)
    here = (sstore.url(skey) if sstore.remote else os.path.abspath(skey),
            store.url(key) if store.remote else os.path.abspath(key))
    if here[0] == here[1]:
        raise ValueError("source and destination are the same path")
    return store, key, dst_options


def convert_group(src: str | os.PathLike, dst: str | os.PathLike, to: str | None = None, *,
                  overwrite: bool = False, progress: Progress | None = None,
                  storage_options: dict | None = None, **options: Any
                  ) -> dict[str, transfer.MoveStats]:
    """Copy a group between a carray group, NetCDF-4, HDF5, a Zarr v3 group and ds.

    Between carray groups, each array's chunks move as their stored bytes where
    they can (:mod:`carray.array.transfer`); the result says, by member path, how many
    moved and how many were decoded (empty for other formats).

    Parameters
    ----------
    src : path or URL
        A carray group, a NetCDF or ds dataset, an HDF5 file or a Zarr v3 group
        (told by what is stored; ``.h5``/``.hdf5`` files are read through h5py).
    dst : path or URL
        The destination; its format is ``to`` or its extension (``.nc``, ``.h5``,
        ``.hdf5``, ``.zarr``, ``.ds``; none or the group format's: a carray group).
    to : {'group', 'netcdf', 'hdf5', 'zarr', 'ds'}, optional
    overwrite : bool
        Replace an existing ``dst`` (the old one stays until the copy is complete).
    progress : callable, optional
        Called as ``progress(bytes_done, bytes_total)`` after every block.
    storage_options : dict, optional
        For the file system of a side that is a URL (carray groups only; the other
        formats are local files).

    Raises
    ------
    ContainerExistsError
        ``dst`` exists and ``overwrite`` is false.
    ContainerNotFoundError
        Nothing is at ``src``.
    FormatError
        ``src`` is not readable in its format (a ``.h5`` file that is not HDF5).
    ValueError
        One side is a group and the other an array or table, a ds destination is given
        nested groups or tables, a type the destination cannot hold, or the same path.
    """
    src, dst = os.fspath(src), os.fspath(dst)
    extra = sorted(k for k, v in options.items() if v is not None)
    if extra:
        raise UnsupportedOptionError(f"{', '.join(extra)}: group conversions do not take "
                                     "these (they keep each array's chunks and compression)")
    skind = source_kind(src, storage_options)
    dkind = dest_kind(dst, to, skind)
    if skind is None or dkind is None:
        _refuse(src, dst, skind, dkind, storage_options)
    assert skind is not None and dkind is not None
    for kind, path in ((skind, src), (dkind, dst)):
        if kind != "group" and is_url(path):
            raise ValueError(f"{path}: {GROUP_FORMATS[kind]}s are read and written on local "
                             "paths only; copy the file to or from the URL yourself")
    store, key, dst_options = _destination(src, dst, overwrite, storage_options)
    with staged(store, key, overwrite=overwrite) as staging, \
            _reader(skind, src, storage_options) as nodes:
        if dkind == "ds":
            from carray.integrations.group_ds import check_flat

            check_flat(nodes, dst)
        writer = _writer(dkind, staging.location, dst_options, f"converted from {src}")
        _copy(nodes, writer, progress)
    return dict(getattr(writer, "stats", {}))


def _copy(nodes: list[Node], writer: Any, progress: Progress | None) -> None:
    total = sum(n.nbytes for n in nodes if not isinstance(n, GroupNode))
    done = 0

    def report(nbytes: int) -> None:
        nonlocal done
        done += nbytes
        if progress is not None:
            progress(min(done, total), total)

    try:
        for node in nodes:
            try:
                writer.add(node, report)
            except (TypeError, ValueError) as exc:
                if not node.path or node.path in str(exc):
                    raise
                try:
                    named = type(exc)(f"member {node.path!r}: {exc}")
                except Exception:  # noqa: BLE001 - an error type taking other arguments
                    raise exc from None
                raise named from exc
        writer.close()
    except BaseException:
        writer.discard()
        raise


__all__ = ["GROUP_FORMATS", "HDF5_EXTENSIONS", "CarrayGroupWriter",
           "convert_group", "dest_kind", "is_group_conversion", "read_carray_group",
           "source_kind"]
