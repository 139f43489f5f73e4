"""Carrays and ctables leaving this process: pickling, and dask collections.

Mixed into :class:`carray.array.carray` and :class:`carray.table.ctable`.  A
stored container pickles as where and how to reopen it, never as its data, so
handles travel cheaply to worker processes; one in memory pickles its data.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class PortableArray:
    """Pickling and :meth:`to_dask` for :class:`carray.array.carray`."""

    def __reduce__(self) -> tuple:
        """Pickle a stored array as what reopens it, an in-memory one as its data.

        A stored array is flushed first.  A handle opened for writing reopens in
        mode 'a' (never 'w', which would wipe the data); mode 'r' stays 'r'.
        """
        if self._layout.in_memory:
            kwargs = dict(array=self[:], cparams=self._cparams, chunks=self._chunks,
                          blocks=self._blocks, dflt=self._dflt[()],
                          expectedlen=self._expectedlen)
            return _unpickle_array, (kwargs, self._attrs.getall())
        self.flush()
        kwargs = dict(rootdir=self._rootdir, mode="r" if self._mode == "r" else "a",
                      allow_pickle=self._objects is not None,
                      fsync=getattr(self._layout, "fsync", True), storage=self._storage,
                      storage_options=self._storage_options)
        return _unpickle_array, (kwargs, None)

    def to_dask(self, chunks: Any = None) -> Any:
        """A dask array whose tasks each read one region (see :mod:`carray.integrations.dask`)."""
        from carray.integrations.dask import to_dask

        return to_dask(self, chunks)


class PortableTable:
    """Pickling and :meth:`to_dask` for :class:`carray.table.ctable`."""

    def __reduce__(self) -> tuple:
        """Pickle a stored table as what reopens it, an in-memory one as its columns.

        A stored table is flushed first; a handle opened for writing reopens in
        mode 'a' (never 'w', which would wipe the data); mode 'r' stays 'r'.
        """
        from carray.table import _read
        from carray.vlstring import StringColumn

        if self._rootdir is not None:
            self.flush()
            kwargs = dict(rootdir=self._rootdir, mode="r" if self._mode == "r" else "a",
                          auto_flush=self._auto_flush, fsync=self._fsync,
                          storage_options=self._storage_options)
            return _unpickle_table, (kwargs, None)
        # Numeric columns pickle themselves; string columns travel as their values.
        cols = {n: _read(c, range(self._len)) if isinstance(c, StringColumn) else c
                for n, c in self._cols.items()}
        state = dict(cols=cols, length=self._len, new_kwargs=self._new_kwargs,
                     auto_flush=self._auto_flush, attrs=self._attrs.getall())
        return _unpickle_table, (None, state)

    def to_dask(self, columns: Any = None, partition_rows: int | None = None) -> Any:
        """A dask DataFrame, one partition per run of chunks (see
        :mod:`carray.integrations.dask`)."""
        from carray.integrations.dask import table_to_dask

        return table_to_dask(self, columns, partition_rows)


def _unpickle_array(kwargs: dict, attrs: dict | None) -> Any:
    """Rebuild a pickled carray; attributes of one in memory come along."""
    from carray.array import carray

    a = carray(**kwargs)
    if attrs:
        a.attrs.update(attrs)
    return a


def _unpickle_table(kwargs: dict | None, state: dict | None) -> Any:
    """Rebuild a pickled ctable."""
    from carray.table import ctable
    from carray.vlstring import StringColumn

    if kwargs is not None:
        return ctable(**kwargs)
    cparams = state["new_kwargs"]["cparams"]
    cols = {n: StringColumn(c, cparams=cparams) if isinstance(c, np.ndarray) else c
            for n, c in state["cols"].items()}
    t = ctable._view(cols, state["length"])
    t._new_kwargs, t._auto_flush = state["new_kwargs"], state["auto_flush"]
    t._attrs.update(state["attrs"])
    return t
