"""Tables to and from Parquet files (through pyarrow), CSV files (:mod:`carray.table.csv`)
and ``.ds``/``.nc`` datasets.

A conversion is a source of Arrow record batches and a sink that takes them, so
a table moves a batch of rows at a time: a ctable streams its rows through
:func:`carray.table.interop.arrow_batches`, a Parquet file through its row
groups, a CSV file a block of its text at a time.  Datasets hold whole variables, so a dataset side is read or written
whole: its 1-d variables along one dimension are the table's columns (the
dimension is called ``row`` when carray writes it).

Every destination is built under a temporary name and renamed into place, so an
interrupted conversion leaves nothing at the destination.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from carray.array.container import close_or_discard
from carray.attrs import values as attrvalues
from carray.core.problems import Checked, Finding, Problem
from carray.errors import FormatError, UnsupportedDTypeError
from carray.stores import Store
from carray.table import csv as table_csv
from carray.table import interop as tables_interop
from carray.table.interop import arrow_batches
from carray.table.table import ctable

#: Parquet's magic, at the start and at the end of every file.
PARQUET_MAGIC = b"PAR1"
#: The dimension a table's columns share when written as a dataset.
ROW_DIM = "row"

Progress = Callable[[int, int], None]


def _pq() -> Any:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise ImportError("Parquet files need pyarrow (pip install 'carray[tables]')") from None
    return pq


# -- Parquet as a registry format ------------------------------------------------------------


def parquet_file(path: str) -> Any:
    """The ``pyarrow.parquet.ParquetFile`` at a local ``path`` (FormatError if unreadable)."""
    pq = _pq()
    import pyarrow as pa

    try:
        return pq.ParquetFile(path)
    except (pa.ArrowInvalid, OSError) as exc:
        raise FormatError(f"not a readable Parquet file: {exc}", path) from None


def _leaf_count(arrow_type: Any) -> int:
    """How many Parquet columns (leaves) a field of this Arrow type is stored as: a struct
    one per field, a list its items', a map its keys' and values'."""
    import pyarrow as pa

    t = arrow_type.storage_type if isinstance(arrow_type, pa.ExtensionType) else arrow_type
    if pa.types.is_struct(t):
        return sum(_leaf_count(t.field(i).type) for i in range(t.num_fields))
    if pa.types.is_map(t):
        return _leaf_count(t.key_type) + _leaf_count(t.item_type)
    if isinstance(t, pa.ListType | pa.LargeListType | pa.FixedSizeListType):
        return _leaf_count(t.value_type)
    return 1


def parquet_info(path: str, storage_options: dict | None = None) -> dict:
    """What ``carray info`` shows for a Parquet file (a table: its columns and sizes).

    Sizes are the file's own metadata summed over row groups: ``nbytes`` is what a
    column's pages take uncompressed (``total_uncompressed_size``), ``cbytes`` what they
    take in the file (``total_compressed_size``). A nested column (struct, list, map) is
    stored as several leaf columns: its sizes are theirs added up.
    """
    f = parquet_file(path)
    meta = f.metadata
    fields = list(f.schema_arrow)
    counts = [_leaf_count(field.type) for field in fields]
    if sum(counts) != meta.num_columns:
        raise FormatError(f"{len(fields)} Arrow fields make {sum(counts)} leaf columns, but "
                          f"the file's metadata has {meta.num_columns}", path)
    groups = [meta.row_group(g) for g in range(meta.num_row_groups)]
    columns, first = [], 0
    for field, count in zip(fields, counts, strict=True):
        leaves = [g.column(i) for g in groups for i in range(first, first + count)]
        first += count
        nbytes = sum(c.total_uncompressed_size for c in leaves)
        cbytes = sum(c.total_compressed_size for c in leaves)
        columns.append({"name": field.name, "dtype": str(field.type), "nbytes": nbytes,
                        "cbytes": cbytes, "ratio": round(nbytes / cbytes, 3) if cbytes else None})
    size = os.path.getsize(path)
    return {"type": "parquet", "rows": meta.num_rows, "row_groups": meta.num_row_groups,
            "leaf_columns": meta.num_columns, "columns": columns,
            "nbytes": sum(c["nbytes"] for c in columns),
            "cbytes": sum(c["cbytes"] for c in columns), "file_size": size,
            "disk_bytes": size, "attrs": {}}


def parquet_head(path: str, rows: int, storage_options: dict | None = None) -> dict[str, Any]:
    """The first ``rows`` rows of each column (only the first batch is read)."""
    f = parquet_file(path)
    batch = next(f.iter_batches(batch_size=max(rows, 1)), None)
    if batch is None:
        return {field.name: np.zeros(0) for field in f.schema_arrow}
    return {name: _with_nulls_masked(batch.column(name))[:rows] for name in batch.schema.names}


def _with_nulls_masked(column: Any) -> np.ndarray:
    """A pyarrow array as numpy, nulls masked (as missing values are everywhere else),
    not turned into NaN or None, and integers kept integers."""
    if not column.null_count:
        return column.to_numpy(zero_copy_only=False)
    import pyarrow as pa
    import pyarrow.compute as pc

    mask = column.is_null().to_numpy(zero_copy_only=False)
    if pa.types.is_integer(column.type) or pa.types.is_boolean(column.type):
        column = pc.fill_null(column, pa.scalar(0).cast(column.type))
    return np.ma.MaskedArray(column.to_numpy(zero_copy_only=False), mask=mask)


def open_parquet(path: str, mode: str = "r", storage_options: dict | None = None) -> Any:
    """A Parquet file as a ``pyarrow.Table`` (read whole)."""
    return parquet_file(path).read()


def verify_parquet(store: Store, path: str) -> Iterator[Finding]:
    """Read every row group (pyarrow checks page headers and decodes every page)."""
    url = store.url(path)
    try:
        f = parquet_file(path)
    except (FormatError, ImportError) as exc:
        yield Problem.from_error(exc, url)
        return
    for g in range(f.metadata.num_row_groups):
        try:
            f.read_row_group(g)
        except Exception as exc:  # noqa: BLE001 - pyarrow raises its own types
            yield Problem(url, f"row group {g}", f"cannot be read: {exc}")
            continue
        yield Checked(url)


# -- CSV as a registry format (a table; recognised by its extension only) -------------------


def looks_like_csv(path: str, head: bytes) -> bool:
    """Whether a file is CSV: CSV has no magic, so a ``.csv`` name whose first bytes
    (``head``: empty for a directory) are UTF-8 text without NUL bytes."""
    if not path.lower().endswith(".csv") or not head or b"\0" in head:
        return False
    for cut in range(4):  # the first bytes may end inside a character
        try:
            head[:len(head) - cut].decode("utf-8")
            return True
        except UnicodeDecodeError:
            continue
    return False


def open_csv(path: str, mode: str = "r", storage_options: dict | None = None) -> Any:
    """A CSV file as an in-memory ctable (read a block at a time)."""
    return ctable.from_csv(path)


def csv_info(path: str, storage_options: dict | None = None) -> dict:
    """What ``carray info`` shows for a CSV file: its rows, and each column's type (as a
    table would hold it) and decoded size; the whole file is parsed, a block at a time."""
    rows, columns = 0, None
    for batch in table_csv.csv_batches(path):
        rows += batch.num_rows
        sizes = [col.nbytes for col in batch.columns]
        if columns is None:
            columns = [{"name": n, "dtype": str(_numpy_type(col.type)), "nbytes": 0}
                       for n, col in zip(batch.schema.names, batch.columns, strict=True)]
        for c, nbytes in zip(columns, sizes, strict=True):
            c["nbytes"] += nbytes
    size = os.path.getsize(path)
    return {"type": "csv", "rows": rows, "columns": columns or [], "file_size": size,
            "disk_bytes": size, "attrs": {}}


def _numpy_type(arrow_type: Any) -> Any:
    """The type a table column holds a CSV column's values as (a zoned timestamp as
    pandas names it: ``datetime64[s, UTC]``)."""
    import pyarrow as pa

    if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type):
        return "str"
    if pa.types.is_timestamp(arrow_type) and arrow_type.tz is not None:
        return f"datetime64[{arrow_type.unit}, {arrow_type.tz}]"
    return np.dtype(arrow_type.to_pandas_dtype()) if not pa.types.is_date(arrow_type) else \
        np.dtype("M8[D]")


def csv_head(path: str, rows: int, storage_options: dict | None = None) -> dict[str, Any]:
    """The first ``rows`` rows of each column (only the first block is parsed)."""
    batch = next(table_csv.csv_batches(path))
    return {name: _with_nulls_masked(batch.column(name))[:rows] for name in batch.schema.names}


def verify_csv(store: Store, path: str) -> Iterator[Finding]:
    """Parse the whole file, a block at a time (a value of another type than its column's
    first block shows is a problem too)."""
    url = store.url(path)
    try:
        for _ in table_csv.csv_batches(path):
            pass
    except FormatError as exc:
        yield Problem.from_error(exc, url)
        return
    yield Checked(url)


# -- sources: Arrow batches --------------------------------------------------------------------


#: Where a table's attributes go in a Parquet file's key-value metadata (JSON).
ATTRS_KEY = b"carray.attrs"


def _table_batches(path: str, storage_options: dict | None) -> tuple[Any, int, Any, dict]:
    t = ctable(rootdir=path, mode="r", storage_options=storage_options)
    return arrow_batches(t), len(t), t, t.attrs.getall()


def _parquet_batches(path: str) -> tuple[Any, int, None, dict]:
    f = parquet_file(path)
    import pyarrow as pa

    schema = f.schema_arrow
    try:
        attrs = json.loads((schema.metadata or {}).get(ATTRS_KEY, b"{}"))
    except ValueError:
        attrs = {}
    # Written in carray's plain JSON form (carray.attrs.values): read back exactly.
    attrs = attrvalues.load_plain(attrs, f"{path} ({ATTRS_KEY.decode()})") \
        if isinstance(attrs, dict) else {}
    batches = f.iter_batches(batch_size=tables_interop.STREAM_ROWS)  # looked up now: tunable
    reader = pa.RecordBatchReader.from_batches(schema.remove_metadata(), batches)
    return reader, f.metadata.num_rows, None, attrs


def _csv_batches(path: str) -> tuple[Any, int, None, dict]:
    import pyarrow as pa

    batches = table_csv.csv_batches(path)
    first = next(batches)
    # The number of rows is not known before the end: progress counts without a total.
    return pa.RecordBatchReader.from_batches(first.schema, _chained(first, batches)), 0, \
        None, {}


def _chained(first: Any, rest: Iterator[Any]) -> Iterator[Any]:
    yield first
    yield from rest


def _dataset_columns(d: dict, where: str) -> dict[str, np.ndarray]:
    """The 1-d variables of a dataset along one dimension, as columns."""
    meta = d.get(".", {})
    columns: dict[str, np.ndarray] = {}
    dim = None
    for name, values in d.items():
        if name.startswith("."):
            continue
        values = np.asarray(values) if not isinstance(values, np.ndarray) else values
        dims = meta.get(name, {}).get(".dims", [f"{name}_1"] * values.ndim)
        if values.ndim != 1:
            raise ValueError(f"{where}: variable {name!r} has {values.ndim} dimensions; only "
                             "1-d variables along one dimension become table columns")
        if dim is not None and dims[0] != dim:
            raise ValueError(f"{where}: variable {name!r} is along {dims[0]!r}, others along "
                             f"{dim!r}; a table's columns share one dimension")
        dim = dims[0]
        if isinstance(values, np.ma.MaskedArray):
            if values.mask.any() and values.dtype.kind != "f":
                raise ValueError(f"{where}: variable {name!r} has missing values; only "
                                 "float columns can hold them (as NaN)")
            values = values.filled(np.nan) if values.dtype.kind == "f" else values.data
        columns[name] = values
    if not columns:
        raise ValueError(f"{where}: the dataset has no variables to make columns of")
    return columns


def _dataset_batches(path: str, fmt: Any, storage_options: dict | None
                     ) -> tuple[Any, int, None, dict]:
    import pyarrow as pa

    d = fmt.read(path, storage_options=storage_options)
    columns = _dataset_columns(d, path)
    table = pa.table(ctable(columns))
    attrs = dict(d.get(".", {}).get(".", {}))
    return (pa.RecordBatchReader.from_batches(table.schema, table.to_batches()), table.num_rows,
            None, attrs)


# -- sinks ------------------------------------------------------------------------------------


def _reported(reader: Any, total: int, progress: Progress | None) -> Iterator[Any]:
    done = 0
    for batch in reader:
        yield batch
        done += batch.num_rows
        if progress is not None:
            progress(done, total)


def _write_parquet(reader: Any, tmp: str, total: int, progress: Progress | None,
                   attrs: dict) -> None:
    pq = _pq()
    schema = reader.schema
    if attrs:
        plain = {k: attrvalues.to_json(v) for k, v in attrs.items()}
        schema = schema.with_metadata({ATTRS_KEY: json.dumps(plain)})
    with pq.ParquetWriter(tmp, schema) as writer:
        for batch in _reported(reader, total, progress):
            writer.write_batch(batch)


def _write_csv(reader: Any, tmp: str, total: int, progress: Progress | None) -> None:
    """Rows as CSV text, a batch at a time (a column of several values per row, or of
    records, is refused: CSV holds one value per field)."""
    import pyarrow as pa
    import pyarrow.csv as pcsv

    for field in reader.schema:
        if pa.types.is_nested(field.type):
            raise UnsupportedDTypeError(f"column {field.name!r} ({field.type}) has more than "
                                        "one value per row: CSV holds one")
    # Floats as text that reads back as floats (the schema of the batches written).
    schema = table_csv.csv_ready(pa.RecordBatch.from_pylist([], schema=reader.schema)).schema
    with pcsv.CSVWriter(tmp, schema,
                        write_options=pcsv.WriteOptions(quoting_style="needed")) as writer:
        for batch in _reported(reader, total, progress):
            writer.write_batch(table_csv.csv_ready(batch))


def _write_table(reader: Any, tmp: str, total: int, progress: Progress | None,
                 attrs: dict, storage_options: dict | None) -> None:
    import pyarrow as pa

    out = None
    try:
        for batch in _reported(reader, total, progress):
            if out is None:  # chunk lengths chosen for the whole table, not one batch
                out = ctable(pa.Table.from_batches([batch]), rootdir=tmp, mode="w",
                             expectedlen=max(total, 1), storage_options=storage_options)
            else:
                out.append(pa.Table.from_batches([batch]))
        if out is None:  # no rows: the columns still come from the schema
            out = ctable(reader.schema.empty_table(), rootdir=tmp, mode="w",
                         storage_options=storage_options)
        out.attrs.update(attrs)
    except BaseException:
        if out is not None:
            with contextlib.suppress(Exception):
                out.discard()
        raise
    close_or_discard(out)


def _write_dataset(reader: Any, tmp: str, fmt: Any, attrs: dict,
                   storage_options: dict | None) -> None:
    table = reader.read_all()
    d: dict[str, Any] = {".": {".": dict(attrs)}}
    for name in table.column_names:
        col = table.column(name)
        values = col.to_numpy(zero_copy_only=False)
        if values.dtype == object or values.dtype.kind == "T":
            values = np.asarray(values, dtype=object)
        d[name] = values
        d["."][name] = {".dims": [ROW_DIM]}
    fmt.write(tmp, d, storage_options=storage_options)


# -- the conversion ---------------------------------------------------------------------------

#: Table-side format names and the extensions that name them as a destination.
TABLE_EXTENSIONS = {"ctable": (".ctable", ".bcolz"), "parquet": (".parquet", ".pq"),
                    "csv": (".csv",)}


def table_format_for(path: str, to: str | None) -> str | None:
    """``"ctable"``/``"parquet"`` when ``to`` or ``path``'s extension names a table format."""
    if to is not None:
        return to if to in TABLE_EXTENSIONS else None
    ext = os.path.splitext(path.rstrip("/\\"))[1].lower()
    return next((name for name, exts in TABLE_EXTENSIONS.items() if ext in exts), None)


def convert_table(src: str, src_format: str, dst: str, dst_format: str, *,
                  store: Store, key: str, tmp: str, dataset_format: Any = None,
                  progress: Progress | None = None,
                  storage_options: dict | None = None) -> None:
    """Convert a table between ctable, Parquet, CSV and a dataset (``.ds``/``.nc``),
    writing ``tmp`` (on ``store``) for the caller to rename to ``key``.

    ``src_format``/``dst_format`` are ``"ctable"``, ``"parquet"``, ``"csv"`` or ``"dataset"``
    (then ``dataset_format`` is the :class:`carray.integrations.convert.DatasetFormat` of that side).
    """
    if src_format == "ctable":
        reader, total, opened, attrs = _table_batches(src, storage_options)
    elif src_format == "parquet":
        reader, total, opened, attrs = _parquet_batches(src)
    elif src_format == "csv":
        reader, total, opened, attrs = _csv_batches(src)
    else:
        reader, total, opened, attrs = _dataset_batches(src, dataset_format, storage_options)
    try:
        target = store.url(tmp) if store.remote else tmp
        if dst_format == "parquet":
            _write_parquet(reader, target, total, progress, attrs)
        elif dst_format == "csv":  # a CSV file has no place for attributes
            _write_csv(reader, target, total, progress)
        elif dst_format == "ctable":
            _write_table(reader, target, total, progress, attrs, storage_options)
        else:
            _write_dataset(reader, target, dataset_format, attrs, storage_options)
    finally:
        if opened is not None:
            opened.close()
