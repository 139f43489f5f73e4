"""Groups to and from NetCDF-4 files, through the netCDF4 library.

Written (NETCDF4 format):

* a carray group is a NetCDF group, its attributes the group's;
* an array is a variable along its dims; a dimension is created in the group of
  the first array naming it, unless an enclosing group already has one of that
  name and length.  Axes without names get the names a group shows for them,
  ``<array>_dim_<i>`` (read back as no names).  Chunks carry over; compression is zlib at the
  array's Blosc level (9 at most) with the byte shuffle when the array shuffles;
  an array's ``_FillValue`` attribute becomes the variable's fill value, of its type;
* ``U`` text is a variable-length string variable, ``S`` text a char variable with
  a last dimension ``<array>_strlen`` (as :mod:`carray.formats.netcdf` writes it);
  bools, datetimes and timedeltas are numbers with the attributes xarray writes
  (:func:`carray.integrations.group_nodes.cf_encoded`); float16 and complex arrays,
  which NetCDF has no type for, are refused;
* attributes are what netCDF4 writes (:func:`carray.attrs.peers.netcdf_attrs`): text,
  numbers and lists of them; others are refused;
* a table is a sub-group marked ``_carray_table``, its columns variables along the
  group's dimension ``row`` (a column of N-d cells along ``row`` and
  ``<column>_dim<i>``).

Read: every group, variable and attribute, raw (no masking or scaling applied: a
``_FillValue`` or ``scale_factor`` stays an attribute); char variables are joined
along their last dimension into ``S`` text, string variables become ``U`` text as
wide as their longest value; variables written as above are bools, datetimes and
timedeltas again (:func:`carray.integrations.group_nodes.cf_decoded`).  Variables
of compound or variable-length types other than strings are refused, naming them.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from carray.attrs.peers import fill_value_for, native_attrs, netcdf_attrs
from carray.core.params import CParams, Shuffle
from carray.errors import FormatError, UnstorableAttributeError, UnsupportedDTypeError
from carray.integrations.group_nodes import (
    ROW_DIM,
    TABLE_ATTR,
    ArrayNode,
    GroupNode,
    Node,
    TableNode,
    as_objects,
    cf_decoded,
    cf_encoded,
    made_up_dims,
    named_dims,
    own_attrs,
    read_table_mark,
    restore,
    row_step,
    sliced_rows,
    table_mark,
    text_width,
)


def _netcdf4() -> Any:
    try:
        import netCDF4
    except ImportError:
        raise ImportError("NetCDF files need the netCDF4 package: "
                          "pip install 'carray[netcdf]'") from None
    return netCDF4


# -- reading ----------------------------------------------------------------------------------


def _join(chars: Any) -> np.ndarray:
    """A char array's last axis joined into ``S`` text."""
    chars = np.ascontiguousarray(np.ma.getdata(chars))
    width = max(chars.shape[-1], 1)
    if not chars.shape[-1]:
        return np.zeros(chars.shape[:-1], "S1")
    return chars.view(f"S{width}").reshape(chars.shape[:-1])


def _cparams(var: Any) -> CParams | None:
    filters = var.filters() or {}
    if not filters.get("zlib"):
        return None
    shuffle = Shuffle.SHUFFLE if filters.get("shuffle") else Shuffle.NOSHUFFLE
    return CParams(cname="zlib", clevel=int(filters.get("complevel") or 4), shuffle=shuffle)


def _chunks(var: Any) -> tuple[int, ...] | None:
    chunking = var.chunking()
    return None if chunking == "contiguous" or not chunking else tuple(int(c) for c in chunking)


def _variable(var: Any, path: str, where: str) -> ArrayNode:
    var.set_auto_maskandscale(False)  # raw values: a fill value or a scale stays an attribute
    raw = _attrs_of(var)
    dims = list(var.dimensions)
    shape = tuple(var.shape)
    char = var.dtype == np.dtype("S1") and var.ndim >= 1
    if char:
        var.set_auto_chartostring(False)
        dims, shape = dims[:-1], shape[:-1]
    elif var.dtype is not str and (not isinstance(var.dtype, np.dtype)
                                   or var.dtype.kind not in "biufcSU"):
        raise ValueError(f"{where}: a variable of type {var.dtype} (compound or "
                         "variable-length), which carray arrays do not hold")
    chunks = _chunks(var)
    step = row_step(shape, 8 if var.dtype is str else var.dtype.itemsize,
                    chunks[0] if chunks and shape else None)

    def read(key: Any) -> Any:
        return var[key] if not char else var[(key, slice(None))] if key != () else var[...]

    convert: Callable[[Any], np.ndarray] = (lambda b: _join(b)) if char else \
        (lambda b: np.asarray(np.ma.getdata(b)))
    base = sliced_rows(read, shape, step, convert)
    if var.dtype is str:
        dtype, attrs = np.dtype(f"U{text_width(base())}"), raw
    elif char:
        dtype, attrs = np.dtype(f"S{max(var.shape[-1], 1)}"), raw
    else:
        dtype, attrs = cf_decoded(np.dtype(var.dtype.name), raw)

    def rows() -> Iterator[np.ndarray]:
        for block in base():
            yield restore(block, dtype)
    return ArrayNode(path, shape, dtype, named_dims(path, dims), attrs,
                     chunks if not char else None, _cparams(var), rows)


def _attrs_of(obj: Any) -> dict[str, Any]:
    """A variable's or group's attributes, as carray keeps netCDF4's values."""
    return native_attrs({k: obj.getncattr(k) for k in obj.ncattrs()})


def _table(grp: Any, path: str, attrs: dict[str, Any], where: str) -> TableNode:
    columns = read_table_mark(attrs[TABLE_ATTR], where)
    nrows = len(grp.dimensions[ROW_DIM]) if ROW_DIM in grp.dimensions else 0
    for name in columns:
        if name not in grp.variables:
            raise FormatError(f"table column {name!r} is missing", where)
        grp.variables[name].set_auto_chartostring(False)
    step = row_step((nrows,), sum(max(d.itemsize, 8) for d in columns.values()))

    def batches() -> Iterator[dict[str, np.ndarray]]:
        for lo in range(0, nrows, step):
            out = {}
            for name, dt in columns.items():
                var = grp.variables[name]
                block = np.ma.getdata(var[lo:lo + step])
                if var.dtype == np.dtype("S1") and dt.base.kind == "S":
                    block = _join(block)
                out[name] = restore(np.asarray(block), dt.base) if dt.base.kind != "O" \
                    else as_objects(np.asarray(block))
            yield out
    return TableNode(path, columns, nrows, own_attrs(attrs), batches)


def _walk(grp: Any, path: str, source: str) -> Iterator[Node]:
    where = f"{source}:/{path}"
    attrs = _attrs_of(grp)
    if TABLE_ATTR in attrs and path:
        yield _table(grp, path, attrs, where)
        return
    yield GroupNode(path, own_attrs(attrs))
    prefix = f"{path}/" if path else ""
    for name in sorted(grp.variables):
        yield _variable(grp.variables[name], prefix + name, f"{source}:/{prefix}{name}")
    for name in sorted(grp.groups):
        yield from _walk(grp.groups[name], prefix + name, source)


@contextlib.contextmanager
def read(path: str) -> Iterator[list[Node]]:
    """The nodes of the NetCDF file at ``path`` (every group)."""
    netCDF4 = _netcdf4()
    try:
        f = netCDF4.Dataset(path, "r")
    except OSError as exc:
        if not os.path.exists(path):
            raise
        raise FormatError(f"not a readable NetCDF file ({exc})", path) from None
    try:
        f.set_auto_maskandscale(False)
        yield list(_walk(f, "", path))
    finally:
        f.close()


# -- writing ----------------------------------------------------------------------------------


def _stored_type(dtype: np.dtype, attrs: dict[str, Any], where: str
                 ) -> tuple[Any, dict[str, Any]]:
    """The netCDF4 type ``dtype`` is stored as, and the attributes that say what it was."""
    if dtype.kind == "U":
        return str, {}
    if dtype.kind == "S":
        return "S1", {}
    if dtype.kind == "c" or dtype == np.float16:
        raise UnsupportedDTypeError(f"{where}: NetCDF has no {dtype} type; convert the "
                                    "array first (float16 to float32; complex to two arrays)")
    stored, extra = cf_encoded(dtype, attrs, where)
    return np.dtype(stored.name), extra


def _stored(block: np.ndarray, dtype: np.dtype) -> Any:
    if dtype.kind == "U":
        return as_objects(block)
    if dtype.kind == "S":
        width = max(dtype.itemsize, 1)
        return np.ascontiguousarray(block, dtype=f"S{width}").view("S1").reshape(
            (*block.shape, width))
    if dtype.kind in "mM":
        return block.view(np.int64)
    if dtype.kind == "b":
        return block.astype("i1")
    return block


class Writer:
    """A NetCDF-4 file at ``path`` written from nodes."""

    def __init__(self, path: str) -> None:
        self._path = path
        self._file = _netcdf4().Dataset(path, "w", format="NETCDF4")

    def _group(self, path: str) -> Any:
        grp = self._file
        for part in filter(None, path.split("/")):
            grp = grp.groups[part] if part in grp.groups else grp.createGroup(part)
        return grp

    def _set_attrs(self, obj: Any, attrs: dict[str, Any], where: str,
                   encoded: bool = False) -> None:
        try:
            values = attrs if encoded else netcdf_attrs(attrs)
        except UnstorableAttributeError as exc:
            raise UnstorableAttributeError(f"{where}: {exc}") from None
        for name, value in values.items():
            try:
                obj.setncattr(name, value)
            except (TypeError, ValueError, AttributeError) as exc:
                raise UnstorableAttributeError(f"{where}: attribute {name!r} cannot be "
                                               f"written to NetCDF: {exc}") from None

    @staticmethod
    def _dimension(grp: Any, name: str, size: int) -> None:
        """Make ``name`` a dimension of ``size`` seen from ``grp``."""
        up = grp
        while up is not None:
            if name in up.dimensions:
                if len(up.dimensions[name]) == size:
                    return
                break
            up = up.parent
        if name in grp.dimensions:
            raise ValueError(f"dimension {name!r} has lengths {len(grp.dimensions[name])} and "
                             f"{size} in one group")
        grp.createDimension(name, size)

    def add(self, node: Node, report: Callable[[int], None]) -> None:
        if isinstance(node, GroupNode):
            self._set_attrs(self._group(node.path), node.attrs, f"group /{node.path}")
        elif isinstance(node, ArrayNode):
            self._array(node, report)
        else:
            self._table(node, report)

    def _variable(self, grp: Any, name: str, dtype: np.dtype, dims: list[str],
                  shape: tuple[int, ...], attrs: dict[str, Any], chunks: tuple[int, ...] | None,
                  cparams: CParams | None) -> Any:
        where = f"variable /{grp.path.strip('/')}/{name}".replace("//", "/")
        kind, hints = _stored_type(dtype, attrs, where)
        for dim, n in zip(dims, shape, strict=True):
            self._dimension(grp, dim, n)
        if kind == "S1":
            strlen = f"{name}_strlen"
            self._dimension(grp, strlen, max(dtype.itemsize, 1))
            dims = [*dims, strlen]
        try:
            attrs = netcdf_attrs({**attrs, **hints})
        except UnstorableAttributeError as exc:
            raise UnstorableAttributeError(f"{where}: {exc}") from None
        fill = attrs.pop("_FillValue", None)
        options: dict[str, Any] = {}
        if shape and all(shape) and kind is not str and kind != "S1":
            if chunks:
                options["chunksizes"] = tuple(max(1, min(c, n)) for c, n in
                                              zip(chunks, shape, strict=True))
            if cparams is None or cparams.clevel > 0:
                options.update(zlib=True, complevel=min(cparams.clevel if cparams else 4, 9),
                               shuffle=cparams is None or int(cparams.shuffle) != 0)
        if fill is not None:
            if kind is str:
                raise UnstorableAttributeError(f"{where}: NetCDF's variable-length strings "
                                               "take no _FillValue")
            options["fill_value"] = fill_value_for(fill, np.dtype(kind), where)
        var = grp.createVariable(name, kind, tuple(dims), **options)
        if kind == "S1":
            var.set_auto_chartostring(False)
        self._set_attrs(var, attrs, where, encoded=True)
        return var

    def _array(self, node: ArrayNode, report: Callable[[int], None]) -> None:
        parent, _, name = node.path.rpartition("/")
        grp = self._group(parent)
        dims = list(node.dims or made_up_dims(node.path, len(node.shape)))
        var = self._variable(grp, name, node.dtype, dims, node.shape, node.attrs, node.chunks,
                             node.cparams)
        var.set_auto_maskandscale(False)
        at = 0
        for block in node.rows():
            values = _stored(block, node.dtype)
            if not node.shape:
                var[...] = values
            else:
                var[at:at + len(block)] = values
                at += len(block)
            report(block.nbytes)

    def _table(self, node: TableNode, report: Callable[[int], None]) -> None:
        grp = self._group(node.path)
        attrs = {**node.attrs, TABLE_ATTR: table_mark(node)}
        grp.createDimension(ROW_DIM, node.nrows)
        variables = {}
        for name, dt in node.columns.items():
            dims = [ROW_DIM, *(f"{name}_dim{i}" for i in range(1, 1 + len(dt.shape)))]
            base = np.dtype("U1") if dt.base.kind == "O" else dt.base
            var = self._variable(grp, name, base, dims, (node.nrows, *dt.shape), {}, None, None)
            var.set_auto_maskandscale(False)
            variables[name] = (var, base)
        self._set_attrs(grp, attrs, f"table /{node.path}")
        at = 0
        for batch in node.batches():
            n = 0
            for name, (var, base) in variables.items():
                block = batch[name]
                n = len(block)
                var[at:at + n] = _stored(block, base) if base.kind != "U" else as_objects(block)
                report(block.nbytes if block.dtype.kind not in "OT" else 8 * block.size)
            at += n

    def close(self) -> None:
        self._file.close()

    def discard(self) -> None:
        with contextlib.suppress(Exception):
            self._file.close()

