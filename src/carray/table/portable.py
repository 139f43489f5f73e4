"""Tables leaving this process: pickling, and dask DataFrames (see :mod:`carray.array.portable`).

:class:`carray.table.table.ctable` pickles through :func:`pickled` and makes dask
DataFrames through :func:`to_dask`.  A stored table pickles as where and how to reopen
it; one in memory as its columns (the table's ``memory_state``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from carray.array.portable import unpickle
from carray.core.params import CParams
from carray.table.columns.strings import StringColumn


def pickled(table: Any) -> tuple:
    """Pickle a stored table as what reopens it, an in-memory one as its columns.

    A stored table is flushed first; a handle opened for writing reopens in
    mode 'a' (never 'w', which would wipe the data); mode 'r' stays 'r'.
    """
    if table.rootdir is not None:
        table.flush()
        return unpickle, (type(table), table.reopen_args(), None)
    return _unpickle_table_state, (type(table), table.memory_state())


def portable_columns(table: Any) -> dict[str, Any]:
    """An in-memory table's columns as they pickle: numeric columns pickle themselves,
    string columns travel as their values."""
    return {n: c.read_rows(range(len(table)), as_object=True)
            if isinstance(c, StringColumn) else c for n, c in table.column_dict().items()}


def columns_from_portable(cols: dict[str, Any], cparams: CParams) -> dict[str, Any]:
    """The columns :func:`portable_columns` made, as columns again."""
    return {n: StringColumn(c, cparams=cparams) if isinstance(c, np.ndarray) else c
            for n, c in cols.items()}


def to_dask(table: Any, columns: Any = None, partition_rows: int | None = None) -> Any:
    """A dask DataFrame, one partition per run of chunks (see
    :mod:`carray.integrations.dask`)."""
    from carray.integrations.dask_read import table_to_dask

    return table_to_dask(table, columns, partition_rows)


def _unpickle_table_state(cls: Any, state: dict) -> Any:
    """Rebuild a pickled in-memory ctable."""
    return cls.from_memory_state(state)
