"""Groups to and from ds files (:mod:`carray.formats.ds`), which are flat datasets.

Written, a group's arrays become the file's variables and its attributes the
dataset's; a group holding sub-groups or tables is refused (ds has no place for
them), naming them.  Text is written as ds ``unicode``/``str`` variables, bools as
int8 (ds-format reads its bool type right only by eights), datetimes and timedeltas
as int64, with the attributes xarray writes for them
(:func:`carray.integrations.group_nodes.cf_encoded`); float16 and complex arrays,
which ds has no type for, are refused.  Read, every variable becomes an array of the
root group, along its ``.dims`` (numbers written as above are datetimes and
timedeltas again); missing values (ds masks) are filled with the
variable's ``_FillValue`` attribute, or numpy's default fill value for its type,
which is then recorded as ``_FillValue``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from carray.attrs.peers import fill_value_for
from carray.errors import UnstorableAttributeError, UnsupportedDTypeError
from carray.formats import ds
from carray.formats.ds.header import NUMERIC_TYPES, escape, unescape
from carray.formats.ds.reader import Reader
from carray.formats.ds.stream import StreamWriter
from carray.integrations.group_nodes import (
    ArrayNode,
    GroupNode,
    Node,
    cf_decoded,
    cf_encoded,
    made_up_dims,
    named_dims,
    restore,
    row_step,
    text_width,
)


def check_flat(nodes: list[Node], dst: str) -> None:
    """Refuse a group a ds file cannot hold: one with sub-groups or tables."""
    nested = [n.path for n in nodes if n.path and not isinstance(n, ArrayNode)]
    deep = [n.path for n in nodes if isinstance(n, ArrayNode) and "/" in n.path]
    if nested or deep:
        names = ", ".join((nested + deep)[:5]) + (" ..." if len(nested + deep) > 5 else "")
        raise ValueError(f"{dst}: a ds file is flat (the root group's arrays only), but the "
                         f"group holds sub-groups or tables ({names}); convert to .nc, .h5 "
                         "or .zarr to keep them")


# -- reading ----------------------------------------------------------------------------------


def _fill(attrs: dict[str, Any], dtype: np.dtype) -> Any:
    if "_FillValue" in attrs:
        return np.asarray(attrs["_FillValue"]).astype(dtype)[()]
    return np.ma.default_fill_value(np.zeros(0, dtype))


def _typed_fill(attrs: dict[str, Any], dtype: np.dtype, where: str) -> dict[str, Any]:
    """``attrs`` with a ``_FillValue`` JSON gave as a plain number made one of ``dtype``
    (as NetCDF and xarray type it), when it is one."""
    if "_FillValue" not in attrs or dtype.kind not in "biuf":
        return attrs
    with contextlib.suppress(UnstorableAttributeError):
        return {**attrs, "_FillValue": fill_value_for(attrs["_FillValue"], dtype, where)}
    return attrs


def _ds_array(reader: Reader, key: str, path: str) -> ArrayNode:
    v = reader.header.layouts[key]
    name = unescape(key)
    if "/" in name:
        raise ValueError(f"{path}: variable {name!r}: a name with '/' would be a member of "
                         "a sub-group; ds files are flat")
    if v.shape is None:
        raise ValueError(f"{path}: variable {name!r} has no data (.size null): a group's "
                         "arrays have a shape")
    attrs = {k: x for k, x in reader.header.meta[key].items() if not k.startswith(".")}
    shape = tuple(v.shape)
    step = row_step(shape, max(v.dtype.itemsize, 8))

    def raw() -> Iterator[Any]:
        return reader.iter_rows(v, step)

    if v.type in ("str", "unicode"):
        width = text_width(raw())
        dtype, own = np.dtype(f"{'U' if v.type == 'unicode' else 'S'}{width}"), attrs
    else:
        dtype, own = cf_decoded(v.dtype.newbyteorder("="), attrs)
        own = _typed_fill(own, dtype, f"{path}: {name}")
    masked = v.missing
    if masked:
        own["_FillValue"] = _fill(own, dtype if dtype.kind not in "mM" else np.dtype("i8"))

    def rows() -> Iterator[np.ndarray]:
        for block in raw():
            if masked and isinstance(block, np.ma.MaskedArray):
                block = block.filled(own["_FillValue"])
            yield restore(np.asarray(block), dtype)
    # A variable without .dims has ds's made-up names: no names.
    given = reader.header.meta[key].get(".dims") is not None
    return ArrayNode(name, shape, dtype, named_dims(name, v.dims) if given else None, own,
                     None, None, rows)


@contextlib.contextmanager
def read_ds(path: str) -> Iterator[list[Node]]:
    """The nodes of a ds file: the root group and an array per variable."""
    with Reader(path) as reader:
        root = dict(reader.header.meta.get(".", {}))
        nodes: list[Node] = [GroupNode("", root)]
        nodes += [_ds_array(reader, key, path) for key in reader.header.layouts]
        yield nodes


# -- writing ----------------------------------------------------------------------------------


def _ds_type(node: ArrayNode) -> tuple[str, dict[str, Any]]:
    """The ds type ``node`` is stored as, and the attributes saying what it was."""
    dt = node.dtype
    if dt.kind == "U":
        return "unicode", {}
    if dt.kind == "S":
        return "str", {}
    if dt.kind in "bmM":  # ds-format reads bools right only 8 at a time: int8 as xarray
        stored, hints = cf_encoded(dt, node.attrs, f"variable {node.path!r}")
        return str(stored), hints
    for name, native in NUMERIC_TYPES.items():
        if native == dt.newbyteorder("="):
            return name, {}
    raise UnsupportedDTypeError(f"variable {node.path!r}: a ds file cannot hold {dt} values "
                                "(ds types: bool, ints, float32, float64, text)")


def _stored_blocks(node: ArrayNode, type_: str) -> Iterator[Any]:
    for block in node.rows():
        if type_ in ("unicode", "str"):
            out = np.empty(block.shape, dtype=object)
            if block.ndim:
                out[...] = block.tolist()
            else:
                out[()] = block.item()
            yield out
        elif type_ in NUMERIC_TYPES and block.dtype.kind in "mM":
            yield block.view(np.int64)
        else:
            yield block.astype(NUMERIC_TYPES[type_]) if type_ in NUMERIC_TYPES else block


class DsWriter:
    """A ds file at ``path`` written from the nodes of a flat group."""

    def __init__(self, path: str) -> None:
        self._out = StreamWriter(os.fspath(path))
        self._attrs: dict[str, Any] = {}

    def add(self, node: Node, report: Callable[[int], None]) -> None:
        if isinstance(node, GroupNode):
            self._attrs = ds.encode_attrs(node.attrs, "dataset", keep_layout=False)
            return
        assert isinstance(node, ArrayNode)
        type_, hints = _ds_type(node)
        attrs = {**node.attrs, **hints}
        key = escape(node.path)
        dims = list(node.dims or made_up_dims(node.path, len(node.shape)))
        blocks = _stored_blocks(node, type_)

        def counted() -> Iterator[Any]:
            for block in blocks:
                yield block
                report(np.asarray(block).size * node.dtype.itemsize)
        self._out.add(key, ds.encode_attrs(attrs, f"variable {node.path!r}",
                                            keep_layout=False),
                      dims, type_, list(node.shape), counted())

    def close(self) -> None:
        self._out.close(self._attrs)

    def discard(self) -> None:
        self._out.discard()
