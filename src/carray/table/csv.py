"""CSV files to and from tables, streamed: memory is bounded by a block, not the file.

Reading goes through ``pyarrow.csv.open_csv``: the file is parsed a block of
``block_size`` bytes at a time, the column types are inferred from the first
block (or given), and each block's record batch is appended to the table, so
only one block is ever decoded (Arrow reads up to 32 blocks of text ahead).  A table built at ``rootdir`` is built under a
temporary name beside it and renamed into place once complete: a failure leaves
nothing at ``rootdir``, and a versioned table gets one version.

Writing goes through ``pyarrow.csv.CSVWriter``, a batch of rows at a time, to a
temporary file renamed over ``path`` at the end.  Missing values (see
:func:`carray.table.columns.kinds.read_valid`) are written as empty fields, and read
back as missing.  Floats are written as numpy's shortest exact text, with a
decimal point (``1.0``, not ``1``), so they read back as floats, to the bit;
zoned timestamps are written in their zone with its offset
(``2024-03-31 03:00:00+0200``) and read back as the same instants, zoned in UTC
(a CSV file cannot name a zone: pass ``dtypes={'ts': 'datetime64[us, Europe/Paris]'}``
for another).  As pandas' ``read_csv``, empty fields and :data:`NULL_VALUES` are
missing, in text columns too, so an empty string written reads back as missing.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from carray.array.container import built_whole
from carray.errors import (
    CArrayError,
    FormatError,
    UnsupportedDTypeError,
)
from carray.stores import LOCAL
from carray.stores.files import fsync_path
from carray.stores.staging import staged
from carray.table.columns.kinds import categories_of, read_any, read_valid
from carray.table.columns.timezones import zone_of

#: Bytes of CSV parsed at a time when reading (Arrow's default).  Arrow reads up to 32
#: blocks of text ahead of the parser, so reading takes about 32 blocks of text and one
#: of decoded columns, whatever the size of the file.
BLOCK_BYTES = 1 << 20
#: Rows written per batch.
WRITE_ROWS = 1 << 16
#: The fields that mean a missing value, in every column (pandas' ``read_csv`` list).
NULL_VALUES = ("", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan",
               "1.#IND", "1.#QNAN", "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a",
               "nan", "null")


@dataclass(frozen=True)
class CsvOptions:
    """How to read a CSV file (see :meth:`carray.ctable.from_csv`)."""

    dtypes: dict[str, Any] | None = None
    delimiter: str = ","
    header: bool = True
    names: Sequence[str] | None = None
    usecols: Sequence[str] | None = None
    null_values: Sequence[str] | None = None
    block_size: int = BLOCK_BYTES


def _arrow_type(dtype: Any) -> Any:
    """An Arrow type for a numpy dtype (or an Arrow type, as it is)."""
    import pyarrow as pa

    if isinstance(dtype, pa.DataType):
        return dtype
    if dtype in (str, "str", "string", object, "O"):
        return pa.string()
    zoned = _zoned_timestamp(dtype)
    if zoned is not None:
        return zoned
    dt = np.dtype(dtype)
    if dt.kind in "OUS":
        return pa.string()
    return pa.from_numpy_dtype(dt)


def _zoned_timestamp(dtype: Any) -> Any:
    """The Arrow type of a zoned timestamp dtype (pandas' ``DatetimeTZDtype`` or its
    name, ``'datetime64[us, Europe/Paris]'``), or None for any other dtype."""
    import pyarrow as pa

    unit, tz = getattr(dtype, "unit", None), getattr(dtype, "tz", None)
    if unit is None and isinstance(dtype, str):
        match = re.fullmatch(r"\s*datetime64\[(\w+),\s*([^\]]+?)\s*\]\s*", dtype)
        if match:
            unit, tz = match.groups()
    if unit is None or tz is None:
        return None
    return pa.timestamp(unit, tz=str(tz))


def _arrow_options(options: CsvOptions) -> tuple[Any, Any, Any]:
    import pyarrow.csv as pcsv

    if options.block_size < 1:
        raise ValueError(f"block_size must be positive, got {options.block_size}")
    # No threads: a threaded reader also decodes a block ahead per core, on top of the
    # 32 blocks of text Arrow reads ahead anyway.
    read = pcsv.ReadOptions(block_size=options.block_size, use_threads=False,
                            column_names=list(options.names) if options.names else None,
                            autogenerate_column_names=not options.header and not options.names,
                            skip_rows=1 if options.header and options.names else 0)
    parse = pcsv.ParseOptions(delimiter=options.delimiter)
    convert: dict[str, Any] = {"strings_can_be_null": True, "null_values": list(NULL_VALUES)}
    if options.dtypes:
        convert["column_types"] = {n: _arrow_type(t) for n, t in options.dtypes.items()}
    if options.usecols is not None:
        convert["include_columns"] = list(options.usecols)
    if options.null_values is not None:
        convert["null_values"] = list(options.null_values)
    return read, parse, pcsv.ConvertOptions(**convert)


def _numpy_ready(batch: Any, path: str) -> Any:
    """A record batch of the types columns are made of: Arrow ``date64`` becomes
    ``date32`` (``datetime64[D]``), a column of only empty fields strings, and the types
    no column holds are refused."""
    import pyarrow as pa

    arrays, names = [], []
    for name, arr in zip(batch.schema.names, batch.columns, strict=True):
        t = arr.type
        if pa.types.is_date64(t):
            arr = arr.cast(pa.date32())
        elif pa.types.is_time(t):
            raise FormatError(f"column {name!r} is of Arrow type {t}, which no column holds; "
                              "pass its type in dtypes=", path)
        elif pa.types.is_null(t):  # nothing but empty fields, or no rows: text, as pandas
            arr = pa.array([None] * len(arr), type=pa.string())
        arrays.append(arr)
        names.append(name)
    return pa.RecordBatch.from_arrays(arrays, names=names)


def csv_batches(path: str, options: CsvOptions | None = None) -> Iterator[Any]:
    """The record batches of the CSV file ``path``, a block at a time (at least one:
    a file of a header only gives an empty batch).

    Raises
    ------
    FormatError
        The file is not CSV, or a value does not fit its column's type (inferred from
        the first block unless ``options.dtypes`` names it), naming the file.
    """
    options = options or CsvOptions()
    import pyarrow as pa
    import pyarrow.csv as pcsv

    read, parse, convert = _arrow_options(options)
    names: list[str] = []
    try:
        reader = pcsv.open_csv(path, read_options=read, parse_options=parse,
                               convert_options=convert)
        schema = reader.schema
        names = schema.names
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise FormatError(f"columns named twice: {twice} (pass names= to rename them, or "
                              "usecols=)", path)
        any_batch = False
        while True:
            try:
                batch = reader.read_next_batch()
            except StopIteration:
                break
            any_batch = True
            yield _numpy_ready(batch, path)
        if not any_batch:  # a header only: the columns, with no rows
            yield _numpy_ready(pa.RecordBatch.from_pylist([], schema=schema), path)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError,
            pa.ArrowKeyError) as exc:
        raise FormatError(f"not a CSV file this table can read: {_named(str(exc), names)} "
                          "(types are inferred from the first block: pass dtypes= for a "
                          "column whose values change type later)", path) from None


def _named(message: str, names: list[str]) -> str:
    """Arrow's message with the column's name beside its number."""
    match = re.search(r"CSV column #(\d+)", message)
    if match and int(match.group(1)) < len(names):
        return message.replace(match.group(0),
                               f"{match.group(0)} ({names[int(match.group(1))]!r})", 1)
    return message


def read_csv(cls: Any, path: str | os.PathLike, rootdir: str | os.PathLike | None,
             options: CsvOptions, kwargs: dict[str, Any]) -> Any:
    """A new ``cls`` table from the CSV file ``path`` (see :meth:`ctable.from_csv`)."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: no such CSV file")
    if rootdir is None:
        return _build(cls, path, options, dict(kwargs))
    rootdir = os.fspath(rootdir)
    if "://" in rootdir:
        raise ValueError(f"{rootdir}: from_csv builds tables on a local path; copy the "
                         "table to a store afterwards")
    return built_whole(rootdir, kwargs,
                       lambda args: _build(cls, path, options, dict(args)))


def _build(cls: Any, path: str, options: CsvOptions, kwargs: dict[str, Any]) -> Any:
    """Every batch appended to one new table, committed once at the end."""
    kwargs.pop("auto_flush", None)  # one commit at the end, whatever the table does after
    t = None
    done = 0
    try:
        for batch in csv_batches(path, options):
            try:
                if t is None:
                    t = cls(batch, auto_flush=False, **kwargs)
                elif batch.num_rows:
                    t.append(batch)
            except ValueError as exc:
                if isinstance(exc, CArrayError):
                    raise
                # Values a table cannot hold (a duplicate name, nulls a column cannot
                # keep): say which file and which rows.
                raise FormatError(f"rows {done}..{done + batch.num_rows} cannot be stored: "
                                  f"{exc}", path) from exc
            done += batch.num_rows
    except BaseException:
        if t is not None:
            t.discard()
        raise
    assert t is not None  # _batches yields at least one batch
    t.flush("from_csv")
    return t


# -- writing ---------------------------------------------------------------------------------


def _csv_array(col: Any, rows: range, name: str) -> Any:
    """One batch of a column as an Arrow array of what CSV writes: nulls where missing,
    categories decoded, floats as their exact text, zoned timestamps with their zone."""
    import pyarrow as pa

    if getattr(col, "ndim", 1) != 1 or getattr(col.dtype, "names", None):
        raise UnsupportedDTypeError(f"column {name!r} ({col.dtype}, shape {col.shape}) has "
                                    "more than one value per row: CSV holds one")
    valid = read_valid(col, rows)
    if hasattr(col, "arrow_rows") and categories_of(col) is None and valid is None:
        return col.arrow_rows(rows.start, rows.stop)  # strings: their bytes, no objects
    values = read_any(col, rows)
    mask = None if valid is None else ~np.asarray(valid, dtype=bool)
    if values.dtype.kind == "f":
        return pa.array(_float_text(values), mask=mask)
    if values.dtype.kind == "S":  # bytes are written as the text they encode
        values = np.char.decode(values, "utf-8").astype(object)
    elif values.dtype.kind == "U":
        values = values.astype(object)
    zone = zone_of(col)
    kind = None if zone is None else pa.timestamp(np.datetime_data(values.dtype)[0], tz=zone)
    return pa.array(values, mask=mask, type=kind, from_pandas=values.dtype.kind == "M")


def csv_ready(batch: Any) -> Any:
    """An Arrow record batch with its float columns as the text :func:`_float_text`
    writes (and dictionary columns decoded), for a CSV writer."""
    import pyarrow as pa

    arrays = []
    for arr in batch.columns:
        if pa.types.is_dictionary(arr.type):
            arr = arr.dictionary_decode()
        if pa.types.is_floating(arr.type):
            values = arr.to_numpy(zero_copy_only=False)
            arr = pa.array(_float_text(values), mask=np.asarray(arr.is_null()))
        arrays.append(arr)
    return pa.RecordBatch.from_arrays(arrays, names=batch.schema.names)


def _float_text(values: np.ndarray) -> np.ndarray:
    """Floats as numpy's shortest text that reads back as the same float, which always
    has a decimal point or an exponent (``1.0``, ``1e+20``): a reader infers a float
    column from it, where Arrow's own text of 1.0 is ``1``."""
    return values.astype(str).astype(object)


def write_csv(table: Any, path: str | os.PathLike, columns: Sequence[str] | None,
              delimiter: str, header: bool, rows: int | None) -> None:
    """Write ``table`` to the CSV file ``path`` (see :meth:`ctable.to_csv`)."""
    import pyarrow as pa
    import pyarrow.csv as pcsv

    path = os.fspath(path)
    names = table.column_names(list(columns) if columns is not None else None)
    step = rows or WRITE_ROWS
    if step < 1:
        raise ValueError(f"rows must be positive, got {rows}")
    cols = table.cols
    length = len(table)
    with staged(LOCAL, os.path.abspath(path), overwrite=True) as staging:
        # The file is opened here, not by the writer, so that it is closed even when the
        # writer's last flush fails (its space is freed at once).
        sink = pa.OSFile(staging.tmp, "wb")
        writer = None
        try:
            for lo in range(0, max(length, 1), step):
                span = range(lo, min(lo + step, length))
                batch = pa.table([_csv_array(cols[n], span, n) for n in names], names=names)
                if writer is None:
                    opts = pcsv.WriteOptions(include_header=header, delimiter=delimiter,
                                             quoting_style="needed")
                    writer = pcsv.CSVWriter(sink, batch.schema, write_options=opts)
                writer.write_table(batch)
            if writer is not None:
                writer.close()
        finally:
            with contextlib.suppress(Exception):
                sink.close()
        fsync_path(staging.tmp)
