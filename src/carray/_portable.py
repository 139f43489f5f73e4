"""Carrays and ctables leaving this process: pickling, and dask collections.

:func:`reduce_array` pickles a :class:`carray.array.carray`; :class:`PortableTable` is
mixed into :class:`carray.table.ctable`.  A
stored container pickles as where and how to reopen it, never as its data, so
handles travel cheaply to worker processes; one in memory pickles its data.
"""

from __future__ import annotations

from typing import Any


def reduce_array(a: Any) -> tuple:
    """What pickles carray ``a``: a stored array as what reopens it (flushed first; a
    handle opened for writing reopens in mode 'a', never 'w', which would wipe the data),
    an in-memory one as its data."""
    if a.rootdir is None:
        kwargs = dict(array=a[:], cparams=a.cparams, chunks=a.chunks, blocks=a.blocks,
                      dflt=a.dflt, expectedlen=a.expectedlen)
        return _unpickle, (type(a), kwargs, a.attrs.getall())
    a.flush()
    return _unpickle, (type(a), a.reopen_args(), None)


class PortableTable:
    """Pickling and :meth:`to_dask` for :class:`carray.table.ctable` (public API only)."""

    def __reduce__(self) -> tuple:
        """Pickle a stored table as what reopens it, an in-memory one as its columns.

        A stored table is flushed first; a handle opened for writing reopens in
        mode 'a' (never 'w', which would wipe the data); mode 'r' stays 'r'.
        """
        t: Any = self
        if t.rootdir is not None:
            t.flush()
            return _unpickle, (type(self), t.reopen_args(), None)
        return _unpickle_table_state, (type(self), t.memory_state())

    def to_dask(self, columns: Any = None, partition_rows: int | None = None) -> Any:
        """A dask DataFrame, one partition per run of chunks (see
        :mod:`carray.integrations.dask`)."""
        from carray.integrations.dask_read import table_to_dask

        return table_to_dask(self, columns, partition_rows)


def _unpickle(cls: type, kwargs: dict, attrs: dict | None) -> Any:
    """Rebuild a pickled container; attributes of one in memory come along."""
    obj = cls(**kwargs)
    if attrs:
        obj.attrs.update(attrs)
    return obj


def _unpickle_table_state(cls: Any, state: dict) -> Any:
    """Rebuild a pickled in-memory ctable."""
    return cls.from_memory_state(state)
