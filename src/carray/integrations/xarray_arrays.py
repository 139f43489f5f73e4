"""The base of the xarray backends' lazy arrays: :class:`LazyBackendArray`.

A backend array stands for one variable's data.  It opens what it reads (a ds file's
variable, a carray, a table's column, a group's array) on its first read, once per
process, and pickles as the arguments that reopen it: the copy a dask worker unpickles
opens its own on first use, and no open handle is ever part of a pickle.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
from xarray.backends import BackendArray
from xarray.core import indexing

__all__ = ["LazyBackendArray"]


class LazyBackendArray(BackendArray):
    """One variable's data, read on indexing (outer indexing: a slice, an int or an index
    array per axis), from an object opened on first use.

    Subclasses say how to open (:meth:`_open`), how to read an outer key from what is
    open (:meth:`_read`) and which constructor arguments reopen it (:meth:`_arguments`).
    Reads are serialised by a lock unless :attr:`concurrent_reads` says what is open
    takes reads from several threads at once.

    Parameters
    ----------
    shape : tuple of int
        The variable's shape as xarray shows it.
    dtype : numpy.dtype
        The variable's dtype as xarray shows it.
    """

    #: Whether what :meth:`_open` returns may be read from several threads at once.
    concurrent_reads = False

    def __init__(self, shape: tuple[int, ...], dtype: np.dtype) -> None:
        self.shape, self.dtype = shape, dtype
        self._opened: Any = None
        self._lock = threading.Lock()

    # -- what subclasses say --------------------------------------------------------------

    def _open(self) -> Any:
        """Open what the variable is read from (called once, under the lock)."""
        raise NotImplementedError

    def _read(self, opened: Any, key: tuple) -> np.ndarray:
        """The values of the outer selection ``key`` (one key per axis) of ``opened``."""
        raise NotImplementedError

    def _arguments(self) -> tuple:
        """The constructor's arguments: what a pickle keeps to make the array again."""
        raise NotImplementedError

    # -- the rest is the same for every variable -------------------------------------------

    @property
    def is_open(self) -> bool:
        """Whether this copy has opened what it reads."""
        return self._opened is not None

    def __getitem__(self, key: indexing.ExplicitIndexer) -> Any:
        return indexing.explicit_indexing_adapter(
            key, self.shape, indexing.IndexingSupport.OUTER, self._raw_getitem)

    def _raw_getitem(self, key: tuple) -> np.ndarray:
        with self._lock:
            if self._opened is None:
                self._opened = self._open()
            if not self.concurrent_reads:
                return self._read(self._opened, key)
        return self._read(self._opened, key)

    def __reduce__(self) -> tuple[type, tuple]:
        return type(self), self._arguments()
