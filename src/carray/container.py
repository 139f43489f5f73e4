"""What every container (carray, ctable, string column) shares: where it lives, its
read/write mode, its user attributes, flushing and closing, and ``with``."""

from __future__ import annotations

import abc
from typing import Any, Self

from carray.attrs import Attrs
from carray.params import CParams

MODES = ("r", "a", "w")


def check_mode(mode: str) -> str:
    """``mode`` if it is one of 'r', 'a', 'w' ('r' never writes anything)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    return mode


class Container(abc.ABC):
    """The shared face of carray's containers.

    Subclasses set ``_rootdir``, ``_mode`` and ``_attrs`` when built and implement
    :meth:`flush` and :attr:`cparams`; :meth:`close` flushes and then calls
    :meth:`_release`.
    """

    _rootdir: str | None
    _mode: str
    _attrs: Attrs

    @property
    def rootdir(self) -> str | None:
        """Where the container is stored (a path or URL), None in memory."""
        return self._rootdir

    @property
    def mode(self) -> str:
        """'r' (never writes), 'a' (reads and writes) or 'w' (replaced when opened)."""
        return self._mode

    @property
    def attrs(self) -> Attrs:
        """User attributes (JSON-serialisable values), persisted on every change."""
        return self._attrs

    @property
    @abc.abstractmethod
    def cparams(self) -> CParams:
        """How new chunks are compressed."""

    @abc.abstractmethod
    def flush(self) -> None:
        """Make every change so far durable (nothing in mode 'r')."""

    def _release(self) -> None:  # noqa: B027 - containers without handles keep none
        """Release file handles (after the final flush)."""

    def close(self) -> None:
        """Flush and release file handles."""
        self.flush()
        self._release()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class TableBase(Container):
    """What code below the table module may know of a table: its named columns.

    :class:`carray.table.ctable` is the one implementation; conversions recognise
    tables by this class without importing the table module.
    """

    @property
    @abc.abstractmethod
    def names(self) -> list[str]:
        """The column names, in order."""

    @property
    @abc.abstractmethod
    def cols(self) -> Any:
        """The columns by name (a read-only mapping)."""

    @abc.abstractmethod
    def column_names(self, outcols: Any = None) -> list[str]:
        """Names picked by ``outcols`` (None: all; a list or a comma/space-separated str)."""
