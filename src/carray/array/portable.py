"""Carrays and ctables leaving this process: pickling, and dask collections.

:func:`reduce_array` pickles a :class:`carray.array.array.carray` (tables:
:mod:`carray.table.portable`).  A
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
        return unpickle, (type(a), kwargs, a.attrs.getall())
    a.flush()
    return unpickle, (type(a), a.reopen_args(), None)


def unpickle(cls: type, kwargs: dict, attrs: dict | None) -> Any:
    """Rebuild a pickled container; attributes of one in memory come along."""
    obj = cls(**kwargs)
    if attrs:
        obj.attrs.update(attrs)
    return obj
