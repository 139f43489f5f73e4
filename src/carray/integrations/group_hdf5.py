"""Groups to and from HDF5 files, through h5py.

Written:

* a carray group is an HDF5 group, its attributes the group's;
* an array is a dataset with the array's chunks, gzip-compressed at its Blosc level
  (9 at most) with HDF5's shuffle filter when the array shuffles (every HDF5 reader
  has gzip; Blosc would need a plugin); its dims are the attribute
  ``_ARRAY_DIMENSIONS``, a list of names (no dimension scales are written);
* ``U`` text is a variable-length UTF-8 string dataset (h5py has no fixed-width
  text of characters); datetimes and timedeltas are h5py's opaque types tagged with
  their numpy dtype, which h5py reads back as such; ``S`` text, bools (h5py's enum),
  float16 and complex numbers are stored as themselves;
* attributes are what h5py writes (:func:`carray.attrs.peers.hdf5_attrs`), a
  ``_FillValue`` of the dataset's type; others are refused;
* a table is a 1-d compound dataset, a field per column (text as variable-length
  UTF-8 strings, N-d cells as array fields), marked ``_carray_table``.

Read: every group and dataset; dims from ``_ARRAY_DIMENSIONS``, or else from the
dimension scales attached to every axis (as NetCDF-4 writes them; the scales'
bookkeeping attributes are left out and netCDF's placeholder datasets skipped).
Any 1-d compound dataset is a table.  Variable-length strings become ``U`` text as
wide as their longest value; datasets of other variable-length, reference or
opaque types are refused, naming them.
"""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from carray.attrs.peers import fill_value_for, hdf5_attrs, native_attrs
from carray.core.params import CParams, Shuffle
from carray.errors import FormatError, UnstorableAttributeError
from carray.integrations.group_nodes import (
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

#: The attribute holding an array's dimension names.
DIMS_ATTR = "_ARRAY_DIMENSIONS"
#: Attributes of HDF5 dimension scales and of netCDF-4's bookkeeping, not user attributes.
_BOOKKEEPING = {"DIMENSION_LIST", "REFERENCE_LIST", "_Netcdf4Dimid", "_Netcdf4Coordinates",
                "_NCProperties", "_nc3_strict", DIMS_ATTR}
_SCALE_ATTRS = {"CLASS", "NAME"}
_NC_PLACEHOLDER = "This is a netCDF dimension but not a netCDF variable"


def _h5py() -> Any:
    try:
        import h5py
    except ImportError:
        raise ImportError("HDF5 files need the h5py package: pip install h5py") from None
    return h5py


# -- reading ----------------------------------------------------------------------------------


def _raw_attrs(obj: Any, where: str) -> dict[str, Any]:
    out = {}
    scale = _is_scale(obj)
    for name in obj.attrs:
        if name in _BOOKKEEPING or (scale and name in _SCALE_ATTRS):
            continue
        try:
            value = obj.attrs[name]
            out[name] = None if isinstance(value, _h5py().Empty) else value
        except (OSError, TypeError, ValueError) as exc:
            raise FormatError(f"attribute {name!r} cannot be read: {exc}", where) from None
    return native_attrs(out)


def _is_scale(obj: Any) -> bool:
    value = obj.attrs.get("CLASS") if "CLASS" in obj.attrs else None
    return isinstance(value, bytes | np.bytes_) and bytes(value) == b"DIMENSION_SCALE"


def _placeholder(dset: Any) -> bool:
    if not _is_scale(dset) or "NAME" not in dset.attrs:
        return False
    name = dset.attrs["NAME"]
    return bytes(name).decode("ascii", "replace").startswith(_NC_PLACEHOLDER) \
        if isinstance(name, bytes | np.bytes_) else str(name).startswith(_NC_PLACEHOLDER)


def _dims(dset: Any) -> tuple[str, ...] | None:
    if DIMS_ATTR in dset.attrs:
        names = np.asarray(dset.attrs[DIMS_ATTR]).ravel().tolist()
        return tuple(n.decode("utf-8") if isinstance(n, bytes) else str(n) for n in names)
    if not dset.ndim or "DIMENSION_LIST" not in dset.attrs:
        return None
    names = []
    for axis in dset.dims:
        if not len(axis):
            return None
        names.append(axis[0].name.rsplit("/", 1)[-1])
    return tuple(names)


def _cparams(dset: Any) -> CParams | None:
    if dset.compression != "gzip":
        return None
    shuffle = Shuffle.SHUFFLE if dset.shuffle else Shuffle.NOSHUFFLE
    return CParams(cname="zlib", clevel=int(dset.compression_opts or 4), shuffle=shuffle)


def _dataset(dset: Any, path: str, where: str) -> ArrayNode:
    h5py = _h5py()
    attrs = _raw_attrs(dset, where)
    if dset.shape is None:
        raise ValueError(f"{where}: an empty dataset (a null dataspace), which has no "
                         "shape for an array")
    shape = tuple(dset.shape)
    text = h5py.check_string_dtype(dset.dtype)
    vlen = text is not None and text.length is None
    if not vlen and (dset.dtype.kind not in "biufcSmM" or dset.dtype.names):
        raise ValueError(f"{where}: a dataset of HDF5 type {dset.dtype} (variable-length, "
                         "reference, opaque or compound of more than one dimension), which "
                         "carray arrays do not hold")
    chunks = tuple(dset.chunks) if dset.chunks else None
    step = row_step(shape, 8 if vlen else dset.dtype.itemsize,
                    chunks[0] if chunks and shape else None)
    source = dset.asstr() if vlen else dset
    # h5py marks its string dtypes with metadata, which carray does not keep.
    plain = np.dtype(dset.dtype.str) if not vlen else np.dtype(object)
    base = sliced_rows(lambda key: source[key], shape, step,
                       lambda b: np.asarray(b).view(plain) if not vlen else np.asarray(b))
    dtype = np.dtype(f"U{text_width(base())}") if vlen else plain

    def rows() -> Iterator[np.ndarray]:
        for block in base():
            yield restore(block, dtype)
    return ArrayNode(path, shape, dtype, named_dims(path, _dims(dset)), own_attrs(attrs),
                     chunks, _cparams(dset), rows)


def _field_dtype(h5py: Any, dt: np.dtype) -> np.dtype:
    text = h5py.check_string_dtype(dt.base)
    base = np.dtype(object) if text is not None and text.length is None else \
        np.dtype(dt.base.str)  # without h5py's metadata
    return np.dtype((base, dt.shape)) if dt.shape else base


def _compound(dset: Any, path: str, where: str) -> TableNode:
    h5py = _h5py()
    attrs = _raw_attrs(dset, where)
    fields = {name: _field_dtype(h5py, dset.dtype.fields[name][0]) for name in dset.dtype.names}
    columns = read_table_mark(attrs[TABLE_ATTR], where) if TABLE_ATTR in attrs else fields
    if set(columns) != set(fields):
        raise FormatError(f"the table mark names columns {sorted(columns)}, the dataset has "
                          f"fields {sorted(fields)}", where)
    nrows = int(dset.shape[0])
    step = row_step((nrows,), dset.dtype.itemsize, dset.chunks[0] if dset.chunks else None)

    def column(block: np.ndarray, dt: np.dtype) -> np.ndarray:
        if dt.base.kind == "O":
            return as_objects(np.vectorize(lambda x: x.decode("utf-8") if isinstance(
                x, bytes) else str(x), otypes=[object])(block) if block.size else block)
        return restore(block, dt.base)

    def batches() -> Iterator[dict[str, np.ndarray]]:
        for lo in range(0, nrows, step):
            rows = dset[lo:lo + step]
            yield {name: column(rows[name], dt) for name, dt in columns.items()}
    return TableNode(path, columns, nrows, own_attrs(attrs), batches)


def _walk(grp: Any, path: str, source: str) -> Iterator[Node]:
    h5py = _h5py()
    yield GroupNode(path, own_attrs(_raw_attrs(grp, f"{source}:/{path}")))
    prefix = f"{path}/" if path else ""
    members = [(name, grp[name]) for name in sorted(grp.keys())]
    for name, obj in members:
        where = f"{source}:/{prefix}{name}"
        if isinstance(obj, h5py.Dataset) and not _placeholder(obj):
            if obj.dtype.names and obj.ndim == 1:
                yield _compound(obj, prefix + name, where)
            else:
                yield _dataset(obj, prefix + name, where)
    for name, obj in members:
        if isinstance(obj, h5py.Group):
            yield from _walk(obj, prefix + name, source)


@contextlib.contextmanager
def read(path: str) -> Iterator[list[Node]]:
    """The nodes of the HDF5 file at ``path``."""
    h5py = _h5py()
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: no such file")
    if os.path.isdir(path) or not h5py.is_hdf5(path):
        raise FormatError("not an HDF5 file (no HDF5 signature)", path)
    with h5py.File(path, "r") as f:
        yield list(_walk(f, "", path))


# -- writing ----------------------------------------------------------------------------------


def _stored_type(h5py: Any, dtype: np.dtype) -> Any:
    if dtype.kind in "UOT":
        return h5py.string_dtype("utf-8")
    if dtype.kind in "mM":
        return h5py.opaque_dtype(dtype)
    return dtype


def _stored(block: np.ndarray, dtype: np.dtype) -> np.ndarray:
    if dtype.kind in "UOT":
        return as_objects(block)
    if dtype.kind in "mM":  # h5py writes them only from arrays of its tagged dtype
        return np.asarray(block).astype(_h5py().opaque_dtype(dtype))
    return block


def _filters(shape: tuple[int, ...], chunks: tuple[int, ...] | None,
             cparams: CParams | None) -> dict[str, Any]:
    if not shape or not all(shape):
        return {}
    out: dict[str, Any] = {}
    if chunks and len(chunks) == len(shape):
        out["chunks"] = tuple(max(1, min(c, n)) for c, n in zip(chunks, shape, strict=True))
    if cparams is None or cparams.clevel > 0:
        out.update(compression="gzip", compression_opts=min(cparams.clevel if cparams else 4, 9),
                   shuffle=cparams is None or int(cparams.shuffle) != 0)
    return out


class Writer:
    """An HDF5 file at ``path`` written from nodes."""

    def __init__(self, path: str) -> None:
        self._h5py = _h5py()
        self._sink = GuardedFile(path)
        self._file = self._h5py.File(self._sink, "w")

    def _set_attrs(self, obj: Any, attrs: dict[str, Any], where: str,
                   dtype: np.dtype | None = None) -> None:
        """Write ``attrs`` on ``obj`` (a ``_FillValue`` as a value of ``dtype``, the
        dataset's)."""
        try:
            values = hdf5_attrs(attrs)
            if dtype is not None and "_FillValue" in values and dtype.kind not in "OTmM":
                values["_FillValue"] = fill_value_for(values["_FillValue"], dtype, where)
        except UnstorableAttributeError as exc:
            raise UnstorableAttributeError(f"{where}: {exc}") from None
        for name, value in values.items():
            try:
                obj.attrs[name] = value
            except (TypeError, ValueError) as exc:
                raise UnstorableAttributeError(f"{where}: attribute {name!r} cannot be "
                                               f"written to HDF5: {exc}") from None

    def add(self, node: Node, report: Callable[[int], None]) -> None:
        if isinstance(node, GroupNode):
            grp = self._file.require_group(node.path) if node.path else self._file
            self._set_attrs(grp, node.attrs, f"group /{node.path}")
        elif isinstance(node, ArrayNode):
            self._array(node, report)
        else:
            self._table(node, report)

    def _array(self, node: ArrayNode, report: Callable[[int], None]) -> None:
        kind = _stored_type(self._h5py, node.dtype)
        if not node.shape:
            value = next(node.rows())
            dset = self._file.create_dataset(node.path, data=_stored(value, node.dtype),
                                             dtype=kind)
            report(node.dtype.itemsize)
        else:
            dset = self._file.create_dataset(node.path, shape=node.shape, dtype=kind,
                                             **_filters(node.shape, node.chunks, node.cparams))
            at = 0
            for block in node.rows():
                dset[at:at + len(block)] = _stored(block, node.dtype)
                at += len(block)
                report(block.nbytes)
        self._set_attrs(dset, node.attrs, f"array /{node.path}",
                        node.dtype if node.dtype.kind != "U" else None)
        if node.dims:
            dset.attrs[DIMS_ATTR] = list(node.dims)

    def _table(self, node: TableNode, report: Callable[[int], None]) -> None:
        fields = []
        for name, dt in node.columns.items():
            kind = _stored_type(self._h5py, dt.base)
            fields.append((name, (kind, dt.shape)) if dt.shape else (name, kind))
        compound = np.dtype(fields)
        step = row_step((node.nrows,), compound.itemsize)
        dset = self._file.create_dataset(
            node.path, shape=(node.nrows,), dtype=compound,
            **_filters((node.nrows,), (step,), None))
        at = 0
        for batch in node.batches():
            n = len(next(iter(batch.values()))) if batch else 0
            rows = np.empty(n, dtype=compound)
            for name, dt in node.columns.items():
                rows[name] = _stored(np.asarray(batch[name]), dt.base)
            dset[at:at + n] = rows
            at += n
            report(rows.nbytes)
        self._set_attrs(dset, {**node.attrs, TABLE_ATTR: table_mark(node)},
                        f"table /{node.path}")

    def close(self) -> None:
        try:
            self._file.close()
        finally:
            self._sink.close()  # raises the storage's failure, if one was met

    def discard(self) -> None:
        with contextlib.suppress(Exception):
            self._file.close()
        with contextlib.suppress(Exception):
            self._sink.close()


class GuardedFile(io.RawIOBase):
    """The file h5py writes an HDF5 file through (its ``fileobj`` driver).

    HDF5 never sees a write fail: the first failure of the storage is kept and every
    later write skipped (reported done), and :meth:`close` raises it.  h5py, with HDF5
    2.0, crashes the process when it cleans up after a write that failed (closing the
    file or a dataset, then or at exit); what HDF5 writes after the failure is dropped
    with the file, which the caller removes.
    """

    def __init__(self, path: str) -> None:
        super().__init__()
        self._f = open(path, "w+b", buffering=0)  # noqa: SIM115 - closed by close()
        self.failure: OSError | None = None

    def readable(self) -> bool:
        return True

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, buf: Any) -> int:
        return self._f.readinto(buf) or 0

    def write(self, data: Any) -> int:
        size = memoryview(data).nbytes
        if self.failure is None:
            try:
                done = 0
                while done < size:  # short writes: the rest
                    done += self._f.write(memoryview(data).cast("B")[done:]) or 0
                return size
            except OSError as exc:
                self.failure = exc
        self._f.seek(size, os.SEEK_CUR)
        return size

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        return self._f.seek(offset, whence)

    def tell(self) -> int:
        return self._f.tell()

    def truncate(self, size: int | None = None) -> int:
        if self.failure is None:
            try:
                return self._f.truncate(size)
            except OSError as exc:
                self.failure = exc
        return self._f.tell() if size is None else size

    def flush(self) -> None:
        pass  # unbuffered

    def close(self) -> None:
        """Close the file; raise the storage's first failure, if any."""
        if self.closed:
            return
        try:
            if self.failure is None:
                os.fsync(self._f.fileno())
        except OSError as exc:
            self.failure = exc
        finally:
            self._f.close()
            super().close()
        if self.failure is not None:
            raise self.failure

