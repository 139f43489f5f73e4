"""Column sources for tables, and conversions to and from pandas and Arrow.

The conversions are functions of a table through its public API;
:class:`carray.table.table.ctable` takes them as its methods (``todataframe``,
``to_arrow``, ``__arrow_c_stream__``...).

Everything goes column by column: a DataFrame column or an Arrow column
becomes one carray (or string column) without ever building rows.  Arrow
strings keep their offsets and bytes; numeric Arrow columns without nulls are
viewed, not copied.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from carray.array.array import carray
from carray.array.container import TableBase, refuse_own_source
from carray.errors import ColumnNameError, UnsupportedDTypeError
from carray.table.columns import timezones
from carray.table.columns.category import CategoryColumn
from carray.table.columns.category_methods import pandas_values
from carray.table.columns.category_values import CategoricalValues, as_categorical
from carray.table.columns.kinds import categories_of, read_masked, read_valid
from carray.table.columns.missing_values import (
    WithValidity,
    from_arrow,
    from_series,
    to_pandas,
    wants_nullable,
)
from carray.table.columns.strings import StringColumn
from carray.table.store import check_name


def _is_dataframe(obj: Any) -> bool:
    return type(obj).__name__ == "DataFrame" and hasattr(obj, "columns") and \
        hasattr(obj, "dtypes")


def _is_arrow_table(obj: Any) -> bool:
    return type(obj).__module__.startswith("pyarrow") and hasattr(obj, "column_names")


def _is_arrow_array(obj: Any) -> bool:
    return type(obj).__module__.startswith("pyarrow") and hasattr(obj, "type") and \
        not hasattr(obj, "column_names")


def column_values(col: Any) -> Any:
    """A pandas Series or an Arrow (chunked) array as something a column accepts."""
    if _is_arrow_array(col):
        return _arrow_values(col)
    return _series_values(col)


def _series_values(series: Any) -> Any:
    """A pandas Series, Index or array (``Categorical``, ``IntegerArray``...), or a polars
    Series, as something a column accepts."""
    if type(series).__module__.split(".")[0] == "polars":
        return _arrow_values(series.to_arrow())
    import pandas as pd

    if not isinstance(series, (pd.Series, pd.Index)):
        series = pd.Series(series, copy=False)
    dtype = series.dtype
    if isinstance(dtype, pd.ArrowDtype) or type(series.array).__name__.startswith("Arrow"):
        import pyarrow as pa

        return _arrow_values(pa.array(series.array))
    if isinstance(dtype, pd.CategoricalDtype):
        return as_categorical(series)  # codes and categories as they are
    if isinstance(dtype, pd.DatetimeTZDtype):
        return timezones.from_pandas(series)  # UTC instants; the zone kept by the column
    if dtype == np.dtype(object) and pd.api.types.infer_dtype(series, skipna=True) == "date":
        import pyarrow as pa  # datetime.date objects: datetime64[D], as Arrow's date32

        return _arrow_values(pa.array(series, from_pandas=True))
    if series.hasnans:  # NaN, None, NaT, NA: missing, as pyarrow.Table.from_pandas says
        return from_series(series)
    if dtype == np.dtype(object) or isinstance(dtype, pd.StringDtype):
        kind = pd.api.types.infer_dtype(series, skipna=False)  # one pass in C
        if len(series) and kind != "string":
            raise UnsupportedDTypeError(f"column {series.name!r} holds {kind!r} values; only "
                                        "str and date columns can be stored from object dtype")
        return series.to_numpy(dtype=object)
    return series.to_numpy()


def _arrow_values(arr: Any) -> Any:
    import pyarrow as pa

    if isinstance(arr, pa.ChunkedArray) and not pa.types.is_dictionary(arr.type):
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    if pa.types.is_dictionary(arr.type):
        return as_categorical(arr)
    if pa.types.is_struct(arr.type):
        return _struct_values(arr)
    if pa.types.is_timestamp(arr.type) and arr.type.tz is not None:
        return timezones.from_arrow(arr)
    if arr.null_count:
        return from_arrow(arr)
    if pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type):
        return arr.cast(pa.large_string())  # StringColumn takes its buffers as they are
    if pa.types.is_fixed_size_list(arr.type):
        flat = np.asarray(arr.flatten().to_numpy(zero_copy_only=False))
        return flat.reshape(len(arr), arr.type.list_size)
    return arr.to_numpy(zero_copy_only=False)


#: What ``outcols`` (and rows) call the row number: no column may take the name.
ROW_NUMBER = "nrow__"


def new_column_name(name: Any) -> str:
    """``name`` checked as the name of a new column.

    Raises
    ------
    ColumnNameError
        The name cannot be a directory's (see :func:`carray.table.store.check_name`), or
        it is :data:`ROW_NUMBER`, which always means the row number.
    """
    if name == ROW_NUMBER:
        raise ColumnNameError(f"column name {name!r} is not allowed: outcols={[name]!r} "
                              "means the row number")
    return check_name(name)


def _struct_values(arr: Any) -> np.ma.MaskedArray:
    """An Arrow struct array as records (a masked structured array: a null struct or
    field is masked), each field converted as a column of its own would be."""
    names = [arr.type.field(i).name for i in range(arr.type.num_fields)]
    parts = {}
    for name, child in zip(names, arr.flatten(), strict=True):  # parent nulls included
        values = np.ma.asanyarray(read_masked_source(_arrow_values(child)))
        if values.dtype.kind in "OT":
            raise UnsupportedDTypeError(f"record field {name!r} holds {child.type}: the "
                                        "fields of a record column hold numbers, booleans "
                                        "or datetimes")
        parts[name] = values
    dtype = np.dtype([(n, v.dtype, v.shape[1:]) for n, v in parts.items()])
    out = np.ma.MaskedArray(np.zeros(len(arr), dtype=dtype),
                            mask=np.zeros(len(arr), dtype=np.ma.make_mask_descr(dtype)))
    for name, values in parts.items():
        out[name] = values
    return out


def read_masked_source(values: Any) -> Any:
    """Column source values (:class:`carray.table.columns.missing_values.WithValidity`, masked or plain
    arrays) as a masked array, or the plain array."""
    if isinstance(values, WithValidity):
        return np.ma.MaskedArray(np.asarray(values.values), mask=~values.valid)
    return values


def normalise_columns(columns: Any, names: list[str] | None, into: str | None = None
                      ) -> list[tuple[str, Any]]:
    """``(name, values)`` per column of any source a table can be built from; a table
    built ``into`` a directory may not read from columns stored there (see
    :func:`carray.array.container.refuse_own_source`)."""
    if columns is None:
        pairs: list[tuple[Any, Any]] = []
    elif isinstance(columns, TableBase):
        pairs = [(n, columns.cols[n]) for n in columns.names]
    elif _is_dataframe(columns):
        pairs = [(str(n), _series_values(columns[n])) for n in columns.columns]
    elif _is_arrow_table(columns):
        pairs = [(n, _arrow_values(columns.column(n))) for n in columns.column_names]
    elif isinstance(columns, Mapping):
        pairs = list(columns.items())
    elif isinstance(columns, np.ndarray) and columns.dtype.names:
        pairs = [(n, columns[n]) for n in columns.dtype.names]
    elif isinstance(columns, (list, tuple)):
        pairs = [(f"f{i}", c) for i, c in enumerate(columns)]
    elif hasattr(columns, "__arrow_c_stream__"):  # any Arrow stream (a RecordBatchReader,
        import pyarrow as pa  # a duckdb result...)

        return normalise_columns(pa.table(columns), names, into)
    else:
        raise TypeError(f"cannot build a table from {type(columns).__name__}; pass a list of "
                        "columns, a structured array, a dict, a DataFrame, an Arrow table "
                        "or stream")
    if names is not None:
        names = list(names)
        if len(names) != len(pairs):
            raise ValueError(f"{len(names)} names for {len(pairs)} columns")
        pairs = [(n, v) for n, (_, v) in zip(names, pairs, strict=True)]
    seen = set()
    out = []
    for name, values in pairs:
        new_column_name(name)
        if name in seen:
            raise ValueError(f"duplicate column name {name!r}")
        seen.add(name)
        if isinstance(values, (StringColumn, carray, CategoryColumn, CategoricalValues)) or \
                wants_nullable(values):
            pass
        elif _is_arrow_array(values):
            values = _arrow_values(values)
        elif hasattr(values, "to_numpy") and hasattr(values, "dtype"):
            values = _series_values(values)
        elif not isinstance(values, np.ndarray):
            values = np.asarray(values)
        out.append((name, values))
    refuse_own_source(into, (values for _, values in out))
    return out


def normalise_rows(rows: Any, names: list[str]) -> dict[str, Any]:
    """Rows to append, as ``name -> values`` for exactly the table's columns."""
    if isinstance(rows, TableBase):
        cols = {n: rows.cols[n][:] if not isinstance(rows.cols[n], StringColumn)
                else rows.cols[n].read(as_object=True) for n in rows.names}
    elif _is_dataframe(rows) or _is_arrow_table(rows):
        cols = dict(normalise_columns(rows, None))
    elif isinstance(rows, Mapping):
        cols = dict(rows)
    elif isinstance(rows, (np.ndarray, np.void)) and rows.dtype.names:
        cols = {n: rows[n] for n in rows.dtype.names}
    elif isinstance(rows, list) and rows and all(isinstance(r, (tuple, np.void))
                                                 for r in rows):
        # A list of tuples is a list of rows (a list of lists or arrays is columns).
        for r in rows:
            if len(r) != len(names):
                raise ValueError(f"a row has {len(r)} values, the table {len(names)} columns")
        cols = {n: [r[i] for r in rows] for i, n in enumerate(names)}
    elif isinstance(rows, (list, tuple)):
        if len(rows) != len(names):
            raise ValueError(f"expected {len(names)} columns (one value or array per column), "
                             f"got {len(rows)}")
        cols = dict(zip(names, rows, strict=True))
    else:
        raise TypeError(f"cannot append {type(rows).__name__} to a table")
    missing = [n for n in names if n not in cols]
    extra = [n for n in cols if n not in names]
    if missing or extra:
        raise ValueError(f"appended columns do not match the table: missing {missing}, "
                         f"unknown {extra}")
    out = {}
    for n in names:
        v = cols[n]
        if isinstance(v, (carray, StringColumn)):
            v = v[:] if isinstance(v, carray) else v.read(as_object=True)
        elif isinstance(v, str):
            v = np.array([v], dtype=object)
        out[n] = v
    return out


# -- pandas and Arrow ---------------------------------------------------------------------------


def dataframe_columns(df: Any, strings: str = "variable") -> dict[str, Any]:
    """A pandas DataFrame's columns as ``name -> values``, ready for a new ctable.

    Object and string columns become variable-length string columns (pass
    ``strings='fixed'`` for fixed-width ``U`` columns bcolz can read).
    """
    pairs = normalise_columns(df, None)
    if strings == "fixed":
        pairs = [(n, np.asarray(v, dtype=str) if _is_strings(v) else v) for n, v in pairs]
    elif strings != "variable":
        raise ValueError(f"strings must be 'variable' or 'fixed', got {strings!r}")
    return dict(pairs)


def _is_strings(values: Any) -> bool:
    return getattr(values, "dtype", None) == np.dtype(object) or _is_arrow_array(values)


def pandas_columns(table: Any, names: list[str], lo: int, hi: int) -> dict[str, Any]:
    """Rows ``[lo, hi)`` of columns ``names`` as pandas takes them: categoricals with the
    whole dictionary, zoned timestamps in their zone, missing values as NaN/NaT or
    pandas' nullable arrays; rows of several values as lists."""
    data = {}
    for n in names:
        col = table.cols[n]
        values = pandas_values(col, range(lo, hi))  # categories and zones kept
        if categories_of(col) is None and read_valid(col, range(0)) is not None:
            values = read_masked(col, range(lo, hi))
            if np.ma.isMaskedArray(values) and values.ndim == 1:  # missing: NaN, NA
                values = to_pandas(np.ma.getdata(values), ~np.ma.getmaskarray(values))
        data[n] = list(values) if values.ndim > 1 else values
    return data


def fromdataframe(cls: Any, df: Any, strings: str = "variable", **kwargs: Any) -> Any:
    """A table from a pandas DataFrame, column by column; object and string columns
    become variable-length string columns (``strings='fixed'``: fixed-width ``U``)."""
    return cls(dataframe_columns(df, strings), **kwargs)


def table_from_arrow(cls: Any, table: Any, **kwargs: Any) -> Any:
    """A table from a pyarrow Table (or RecordBatch), column by column."""
    return cls(table, **kwargs)


def todataframe(table: Any, columns: list[str] | None = None, orient: str = "columns",
                strings: str = "object") -> Any:
    """A pandas DataFrame from a ctable, column by column.  ``orient='index'`` transposes,
    as bcolz does: every column becomes a row, and ``columns`` labels the table's rows."""
    import pandas as pd

    names = table.column_names(None if orient == "index" else columns)
    data = {}
    for n in names:
        col = table.cols[n]
        if hasattr(col, "to_pandas"):  # categories; missing values: NaN/NaT or masked
            data[n] = col.to_pandas()
        elif zone := timezones.zone_of(col):
            data[n] = timezones.to_pandas(col[:], zone)
        elif isinstance(col, StringColumn):
            if strings == "arrow":
                data[n] = pd.arrays.ArrowExtensionArray(col.to_arrow())
            else:
                data[n] = col.read(as_object=True)
        elif isinstance(col, TableBase) or col.dtype.names:  # records: tuples (None: missing)
            data[n] = np.ma.asanyarray(col[:]).tolist()
        elif col.ndim > 1:
            data[n] = list(col[:])
        else:
            data[n] = col[:]
    df = pd.DataFrame(data, columns=names, copy=False)
    if orient == "index":
        rows = df.T
        if columns is not None:
            rows.columns = list(columns)  # one label per row of the table
        return rows
    if orient != "columns":
        raise ValueError(f"orient must be 'columns' or 'index', got {orient!r}")
    return df


def to_arrow(table: Any, columns: list[str] | None = None) -> Any:
    """A pyarrow Table from a ctable; string columns keep their offsets and bytes."""
    import pyarrow as pa

    names = table.column_names(columns)
    arrays = [table.cols[n].to_arrow() if isinstance(table.cols[n], StringColumn)
              else _arrow_slice(table.cols[n], 0, len(table)) for n in names]
    return pa.table(arrays, names=names)



# -- the Arrow C stream and the DataFrame interchange protocol ------------------------------------

#: Rows per record batch when a table is streamed to Arrow (about a few MiB per column).
STREAM_ROWS = 1 << 18


def _arrow_type(col: Any) -> Any:
    import pyarrow as pa

    if hasattr(col, "arrow_type"):
        return col.arrow_type()
    if isinstance(col, TableBase):  # records: a struct of their fields
        return pa.struct([(n, _arrow_type(col.cols[n])) for n in col.names])
    if isinstance(col, StringColumn):
        return pa.large_string()
    if isinstance(col, CategoryColumn):
        return col.arrow_type()
    if zone := timezones.zone_of(col):
        return timezones.arrow_type(col, zone)
    item = _records_array(np.zeros(0, col.dtype)).type if col.dtype.names else \
        pa.from_numpy_dtype(col.dtype)  # records in one array (bcolz's layout): a struct
    if col.ndim > 1:
        return pa.list_(item, int(np.prod(col.shape[1:])))
    return item


def arrow_schema(table: Any, columns: list[str] | None = None) -> Any:
    """The ``pyarrow.Schema`` a table's rows stream as (see :func:`arrow_batches`)."""
    import pyarrow as pa

    return pa.schema([(n, _arrow_type(table.cols[n])) for n in table.column_names(columns)])


def _arrow_slice(col: Any, lo: int, hi: int) -> Any:
    import pyarrow as pa

    if hasattr(col, "arrow_rows"):  # string columns, and columns with missing values
        return col.arrow_rows(lo, hi)
    if isinstance(col, CategoryColumn):
        return col.to_arrow(lo, hi)
    if isinstance(col, TableBase):  # records: a struct of their fields
        return pa.StructArray.from_arrays([_arrow_slice(col.cols[n], lo, hi)
                                           for n in col.names], names=col.names)
    values = np.asarray(col[lo:hi])
    if zone := timezones.zone_of(col):
        return timezones.to_arrow(values, zone)
    if values.dtype.names:
        return _records_array(values)
    try:
        if values.ndim > 1:
            width = int(np.prod(values.shape[1:]))
            return pa.FixedSizeListArray.from_arrays(pa.array(values.reshape(-1)), width)
        return pa.array(values)
    except UnicodeError as exc:  # numpy's 'U' items hold any code point, Arrow's UTF-8 not
        raise UnsupportedDTypeError(f"rows {lo}..{hi} hold text Arrow cannot store as "
                                    f"UTF-8: {exc}") from None


def _records_array(values: np.ndarray) -> Any:
    """Records (a structured array, 1-d) as an Arrow struct array, field by field."""
    import pyarrow as pa

    names = list(values.dtype.names or ())
    fields = []
    for name in names:
        field = values[name]
        if field.dtype.names:
            fields.append(_records_array(field))
        elif field.ndim > 1:
            width = int(np.prod(field.shape[1:]))
            fields.append(pa.FixedSizeListArray.from_arrays(pa.array(field.reshape(-1)), width))
        else:
            fields.append(pa.array(field))
    return pa.StructArray.from_arrays(fields, names=names)


def arrow_batches(table: Any, columns: list[str] | None = None,
                  rows: int | None = None) -> Any:
    """A ``pyarrow.RecordBatchReader`` over the table, ``rows`` rows per batch: only
    one batch of each column is decoded at a time, so a table larger than memory
    streams to Arrow consumers (``pa.table``, polars, duckdb)."""
    import pyarrow as pa

    rows = rows or STREAM_ROWS
    schema = arrow_schema(table, columns)
    names = schema.names
    length = len(table)

    def batches():
        for lo in range(0, length, rows):
            hi = min(lo + rows, length)
            yield pa.record_batch([_arrow_slice(table.cols[n], lo, hi) for n in names],
                                  schema=schema)

    return pa.RecordBatchReader.from_batches(schema, batches())


def arrow_c_stream(table: Any, requested_schema: Any = None) -> Any:
    """The PyCapsule of an ``ArrowArrayStream`` over the table's rows (the Arrow PyCapsule
    interface's ``__arrow_c_stream__``)."""
    return arrow_batches(table).__arrow_c_stream__(requested_schema)


def dataframe_interchange(table: Any, nan_as_null: bool = False, allow_copy: bool = True) -> Any:
    """The table as a DataFrame interchange object (``__dataframe__``), through Arrow.

    Building it decodes every column (the protocol hands out whole buffers).
    """
    if not allow_copy:
        raise RuntimeError("a ctable's columns are compressed: exporting them needs a copy "
                           "(allow_copy=True)")
    return to_arrow(table).__dataframe__(nan_as_null=nan_as_null, allow_copy=allow_copy)


def table_html(table: Any) -> str:
    """A table's ``_repr_html_``: sizes and its first and last rows (only those read)."""
    from carray.core.html import edge_rows, summary_html
    from carray.core.util import human

    names = table.column_names()
    first, last = edge_rows(len(table))

    def rows(span: range) -> list[list[Any]]:
        if not span:
            return []
        cols = [np.ma.asanyarray(table.cols[n][span.start:span.stop]) for n in names]
        return [[i, *(c[k] for c in cols)] for k, i in enumerate(span)]

    ratio = table.nbytes / table.cbytes if table.cbytes else 0.0
    facts = [("rows", f"{len(table):,}"), ("columns", len(names)),
             ("nbytes", human(table.nbytes)), ("cbytes", human(table.cbytes)),
             ("ratio", f"{ratio:.2f}"), ("rootdir", table.rootdir or "memory")]
    return summary_html("ctable", facts, ["", *names], rows(first), rows(last))
