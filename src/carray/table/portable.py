"""Tables leaving this process: pickling, and dask DataFrames (see :mod:`carray.array.portable`).

Mixed into :class:`carray.table.table.ctable`.  A stored table pickles as where and how to
reopen it; one in memory as its columns.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from carray.array.portable import unpickle
from carray.table.columns.strings import StringColumn


class PortableTable:
    """Pickling and :meth:`to_dask` for :class:`carray.table.table.ctable` (public API only)."""

    def __reduce__(self) -> tuple:
        """Pickle a stored table as what reopens it, an in-memory one as its columns.

        A stored table is flushed first; a handle opened for writing reopens in
        mode 'a' (never 'w', which would wipe the data); mode 'r' stays 'r'.
        """
        t: Any = self
        if t.rootdir is not None:
            t.flush()
            return unpickle, (type(self), t.reopen_args(), None)
        return _unpickle_table_state, (type(self), t.memory_state())

    def memory_state(self) -> dict[str, Any]:
        """What rebuilds this in-memory table elsewhere (see :meth:`from_memory_state`)."""
        t: Any = self
        # Numeric columns pickle themselves; string columns travel as their values.
        cols = {n: c.read_rows(range(len(t)), as_object=True)
                if isinstance(c, StringColumn) else c for n, c in t.column_dict().items()}
        return dict(cols=cols, length=len(t), new_kwargs=t._new_kwargs,
                    auto_flush=t._auto_flush, attrs=t._attrs.getall())

    @classmethod
    def from_memory_state(cls, state: dict[str, Any]) -> Any:
        cparams = state["new_kwargs"]["cparams"]
        cols = {n: StringColumn(c, cparams=cparams) if isinstance(c, np.ndarray) else c
                for n, c in state["cols"].items()}
        t: Any = cls.over_columns(cols, state["length"])  # type: ignore[attr-defined]
        t._new_kwargs, t._auto_flush = state["new_kwargs"], state["auto_flush"]
        t._attrs.update(state["attrs"])
        return t

    def to_dask(self, columns: Any = None, partition_rows: int | None = None) -> Any:
        """A dask DataFrame, one partition per run of chunks (see
        :mod:`carray.integrations.dask`)."""
        from carray.integrations.dask_read import table_to_dask

        return table_to_dask(self, columns, partition_rows)


def _unpickle_table_state(cls: Any, state: dict) -> Any:
    """Rebuild a pickled in-memory ctable."""
    return cls.from_memory_state(state)
