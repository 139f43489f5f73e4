"""Groups to and from Zarr v3 groups, through the zarr package.

A Zarr v3 group is a directory whose ``zarr.json`` has ``node_type`` ``"group"``;
its members are arrays and groups in sub-directories.  Written:

* a carray group is a Zarr group, an array a Zarr array with the same chunks and a
  Blosc codec of the same codec, level and shuffle, its dims the array's
  ``dimension_names``;
* attributes are as zarr-python and xarray write them
  (:func:`carray.integrations.zarr_arrays.encode_attrs`: JSON values, ``_FillValue``
  in xarray's form for the array's type); values JSON cannot hold are refused;
* ``U`` and ``S`` text are zarr-python's fixed-width ``fixed_length_utf32`` and
  ``null_terminated_bytes`` types (as xarray writes them), datetimes and timedeltas
  its ``numpy.datetime64`` and ``numpy.timedelta64`` types;
* a table is a group marked by the attribute ``_carray_table`` (its columns in
  order and their dtypes), each column an array of its own along ``row``.

Read back: every group and array; a group with ``_carray_table`` is a table again.
An array's codecs become the nearest Blosc parameters
(:func:`carray.integrations.zarr_arrays.cparams_of`); variable-length strings
become ``U`` text as wide as their longest value.
"""

from __future__ import annotations

import contextlib
import json
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from carray.errors import FormatError
from carray.integrations import zarr_arrays
from carray.integrations.group_nodes import (
    ROW_DIM,
    TABLE_ATTR,
    ArrayNode,
    GroupNode,
    Node,
    TableNode,
    as_objects,
    named_dims,
    own_attrs,
    read_table_mark,
    restore,
    row_step,
    sliced_rows,
    table_mark,
    text_width,
)


def _zarr() -> Any:
    return zarr_arrays.zarr_module()


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """zarr-python warns that fixed-width bytes have no Zarr v3 specification yet."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*does not have a Zarr V3 specification")
        yield


# -- reading ----------------------------------------------------------------------------------


def _array(z: Any, path: str, where: str) -> ArrayNode:
    attrs = zarr_arrays.decode_attrs(dict(z.attrs), z.dtype, where)
    shape = tuple(z.shape)
    vlen = z.dtype.kind in "OT"
    if not vlen and z.dtype.kind not in "biufcSUmM":
        raise ValueError(f"{where}: a Zarr array of type {z.dtype}, which carray arrays do "
                         "not hold")
    chunks = tuple(int(c) for c in z.chunks) if shape else None
    step = row_step(shape, 8 if vlen else z.dtype.itemsize, chunks[0] if chunks else None)
    base = sliced_rows(z.__getitem__, shape, step, lambda b: np.asarray(b))
    dtype = np.dtype(f"U{text_width(base())}") if vlen else z.dtype

    def rows() -> Iterator[np.ndarray]:
        for block in base():
            yield restore(block, dtype)
    names = getattr(z.metadata, "dimension_names", None)
    dims = named_dims(path, names) if names and all(n is not None for n in names) else None
    return ArrayNode(path, shape, dtype, dims, own_attrs(attrs), chunks,
                     zarr_arrays.cparams_of(z), rows)


def _table(grp: Any, path: str, attrs: dict[str, Any], where: str) -> TableNode:
    columns = read_table_mark(attrs[TABLE_ATTR], where)
    arrays = {}
    for name in columns:
        try:
            arrays[name] = grp[name]
        except KeyError:
            raise FormatError(f"table column {name!r} is missing", where) from None
    nrows = int(arrays[next(iter(arrays))].shape[0]) if arrays else 0
    first = next(iter(arrays.values()), None)
    step = row_step((nrows,), sum(max(d.itemsize, 8) for d in columns.values()),
                    int(first.chunks[0]) if first is not None else None)

    def batches() -> Iterator[dict[str, np.ndarray]]:
        for lo in range(0, nrows, step):
            out = {}
            for name, dt in columns.items():
                block = np.asarray(arrays[name][lo:lo + step])
                out[name] = as_objects(block) if dt.base.kind == "O" else restore(block, dt.base)
            yield out
    return TableNode(path, columns, nrows, own_attrs(attrs), batches)


def _walk(grp: Any, path: str, source: str) -> Iterator[Node]:
    zarr = _zarr()
    where = f"{source}:/{path}"
    attrs = zarr_arrays.decode_attrs(dict(grp.attrs), None, where)
    if TABLE_ATTR in attrs and path:
        yield _table(grp, path, attrs, where)
        return
    yield GroupNode(path, own_attrs(attrs))
    prefix = f"{path}/" if path else ""
    members = sorted(grp.members(), key=lambda kv: kv[0])
    for name, obj in members:
        if isinstance(obj, zarr.Array):
            yield _array(obj, prefix + name, f"{source}:/{prefix}{name}")
    for name, obj in members:
        if isinstance(obj, zarr.Group):
            yield from _walk(obj, prefix + name, source)


@contextlib.contextmanager
def read(path: str) -> Iterator[list[Node]]:
    """The nodes of the Zarr v3 group at ``path``."""
    zarr = _zarr()
    try:
        grp = zarr.open_group(store=path, mode="r", zarr_format=3)
    except (FileNotFoundError, ValueError, TypeError, KeyError) as exc:
        raise FormatError(f"not a readable Zarr v3 group: {exc}", path) from None
    with _quiet():
        yield list(_walk(grp, "", path))


# -- writing ----------------------------------------------------------------------------------


class Writer:
    """A Zarr v3 group at ``path`` written from nodes."""

    def __init__(self, path: str) -> None:
        self._root = _zarr().open_group(store=path, mode="w", zarr_format=3)

    def _group(self, path: str) -> Any:
        grp = self._root
        for part in filter(None, path.split("/")):
            grp = grp.require_group(part)
        return grp

    def add(self, node: Node, report: Callable[[int], None]) -> None:
        if isinstance(node, GroupNode):
            grp = self._group(node.path)
            grp.attrs.update(zarr_arrays.encode_attrs(node.attrs, None,
                                                      f"group /{node.path}"))
        elif isinstance(node, ArrayNode):
            self._array(node, report)
        else:
            self._table(node, report)

    def _create(self, path: str, shape: tuple[int, ...], dtype: np.dtype,
                chunks: tuple[int, ...] | None, cparams: Any, dims: tuple[str, ...] | None,
                attrs: dict[str, Any]) -> Any:
        parent, _, name = path.rpartition("/")
        stored: Any = str if dtype.kind in "OT" else dtype
        encoded = zarr_arrays.encode_attrs(attrs, dtype, f"array /{path}")
        with _quiet():
            return self._group(parent).create_array(
                name, shape=shape, dtype=stored,
                chunks=tuple(max(int(c), 1) for c in chunks) if chunks and shape else "auto",
                compressors=zarr_arrays.compressors_for(cparams),
                dimension_names=list(dims) if dims else None,
                attributes=encoded)

    def _array(self, node: ArrayNode, report: Callable[[int], None]) -> None:
        z = self._create(node.path, node.shape, node.dtype, node.chunks, node.cparams,
                         node.dims, node.attrs)
        at = 0
        with _quiet():
            for block in node.rows():
                values = block
                if not node.shape:
                    z[()] = values
                else:
                    z[at:at + len(block)] = values
                    at += len(block)
                report(block.nbytes)

    def _table(self, node: TableNode, report: Callable[[int], None]) -> None:
        grp = self._group(node.path)
        grp.attrs.update(zarr_arrays.encode_attrs(
            {**node.attrs, TABLE_ATTR: json.loads(table_mark(node))}, None,
            f"table /{node.path}"))
        step = row_step((node.nrows,), 8)
        arrays = {}
        for name, dt in node.columns.items():
            dims = (ROW_DIM, *(f"{name}_dim{i}" for i in range(1, 1 + len(dt.shape))))
            arrays[name] = self._create(f"{node.path}/{name}", (node.nrows, *dt.shape),
                                        dt.base, (step, *dt.shape), None, dims, {})
        at = 0
        with _quiet():
            for batch in node.batches():
                n = 0
                for name, dt in node.columns.items():
                    block = np.asarray(batch[name])
                    n = len(block)
                    arrays[name][at:at + n] = as_objects(block) if dt.base.kind in "OT" \
                        else block
                    report(block.nbytes if block.dtype.kind not in "OT" else 8 * block.size)
                at += n

    def close(self) -> None:
        pass

    def discard(self) -> None:
        zarr_arrays.settle()  # nothing Zarr still writes may land after the failure


# -- what carray info, head and verify show -----------------------------------------------------


def open_root(path: str, mode: str = "r", storage_options: dict | None = None) -> Any:
    """The ``zarr.Group`` at ``path``, read-only (``mode`` is taken for the registry)."""
    kwargs = {"storage_options": storage_options} if storage_options else {}
    try:
        return _zarr().open_group(store=path, mode="r", zarr_format=3, **kwargs)
    except (FileNotFoundError, ValueError, TypeError, KeyError) as exc:
        raise FormatError(f"not a readable Zarr v3 group: {exc}", path) from None


def _arrays(grp: Any) -> Iterator[tuple[str, Any]]:
    """``(path in the group, zarr.Array)`` of every array of ``grp`` and below, sorted."""
    zarr = _zarr()
    with _quiet():
        members = sorted(grp.members(max_depth=None), key=lambda kv: kv[0])
    return ((name, obj) for name, obj in members if isinstance(obj, zarr.Array))


def info(path: str, storage_options: dict | None = None) -> dict:
    """What ``carray info`` shows for a Zarr v3 group: every array (by its path in the
    group) with its type, dims and shape, and the root group's attributes."""
    root = open_root(path, "r", storage_options)
    variables = []
    for name, z in _arrays(root):
        dims = getattr(z.metadata, "dimension_names", None) or ()
        variables.append({"name": name, "type": str(z.dtype), "shape": list(z.shape),
                          "dims": [str(d) for d in dims if d is not None],
                          "attrs": zarr_arrays.decode_attrs(dict(z.attrs), z.dtype, name)})
    return {"type": "zarr group", "variables": variables,
            "attrs": zarr_arrays.decode_attrs(dict(root.attrs), None, path)}


def head(path: str, rows: int, storage_options: dict | None = None) -> dict[str, Any]:
    """The first ``rows`` rows of every array of a Zarr v3 group, by path."""
    with _quiet():
        return {name: np.asarray(z[:rows] if z.ndim else z[()])
                for name, z in _arrays(open_root(path, "r", storage_options))}


def verify(store: Any, path: str) -> Iterator[Any]:
    """Every chunk of every array of the Zarr v3 group at ``path`` decoded
    (:func:`carray.integrations.zarr_arrays.verify`, each problem naming its array)."""
    from carray.core.problems import Problem

    try:
        root = open_root(store.url(path) if store.remote else path)
        arrays = list(_arrays(root))
    except (FormatError, ImportError, OSError) as exc:
        yield Problem.from_error(exc, store.url(path))
        return
    for name, _ in arrays:
        yield from zarr_arrays.verify(store, store.join(path, name))


def is_zarr_group(store: Any, path: str) -> bool:
    """Whether ``path`` holds a Zarr v3 group (its ``zarr.json`` says so)."""
    doc = zarr_arrays.node_document(store, path)
    return doc is not None and doc.get("node_type") == "group"
