"""What every container (carray, ctable, string column) shares: where it lives, its
read/write mode, its user attributes, flushing and closing, and ``with``."""

from __future__ import annotations

import abc
import contextlib
import datetime as _dt
import os
from collections.abc import Callable, Iterable
from typing import Any, Self

import numpy as np

from carray.attrs.mapping import Attrs
from carray.core.params import CParams
from carray.engine.closed import Closed
from carray.errors import HandleClosedError, ModeError, TimeValueError
from carray.stores import resolve
from carray.stores.lock import timeout_of
from carray.stores.staging import staged

MODES = ("r", "a", "w")


def check_mode(mode: str) -> str:
    """``mode`` if it is one of 'r', 'a', 'w' ('r' never writes anything)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    return mode


def version_asked(version: str | None, tag: str | None, as_of: Any) -> dict[str, Any]:
    """The earlier version an open names (none: the newest), as the layouts take it:
    ``as_of`` as a time with its zone (see :func:`as_datetime`)."""
    at: dict[str, Any] = {}
    if version is not None:
        at["version"] = version
    if tag is not None:
        at["tag"] = tag
    if as_of is not None:
        at["as_of"] = as_datetime(as_of)
    return at


def pinned_mode(mode: str | None, at: dict[str, Any]) -> str | None:
    """``mode``, or 'r' when ``at`` names an earlier version (see :func:`version_asked`),
    which opens read-only.

    Raises
    ------
    ModeError
        An earlier version with a writable mode ('a' or 'w').
    """
    if not at:
        return mode
    if mode not in (None, "r"):
        asked = ", ".join(f"{k}={v!r}" for k, v in at.items())
        raise ModeError(f"{asked} opens an earlier version, which is read-only: open it "
                        f"with mode='r' (or no mode); to write on top of it, open the newest "
                        f"with mode={mode!r} and restore() that version")
    return "r"


def as_datetime(value: Any) -> _dt.datetime:
    """A time to find a version by (``as_of``), with its time zone: a ``datetime`` or a
    ``pandas.Timestamp`` (naive ones are local time, as numpy and pandas read them), a
    ``date`` (its midnight, local time), a ``numpy.datetime64`` (local time) or an ISO
    8601 string (``"2024-01-01"``, ``"2024-01-01T12:30:00+02:00"``, ``"...Z"``).

    Raises
    ------
    TimeValueError
        Anything else, a string that is no ISO 8601 time, or NaT.
    """
    when = _to_datetime(value)
    return when.astimezone() if when.tzinfo is None else when


def _to_datetime(value: Any) -> _dt.datetime:
    if isinstance(value, np.datetime64):
        if np.isnat(value):
            raise TimeValueError("as_of is NaT, not a time")
        value = value.astype("datetime64[us]").item()
        if not isinstance(value, _dt.datetime):  # past what a datetime holds
            raise TimeValueError(f"as_of {value!r} is outside the years 1..9999")
    if isinstance(value, str):
        try:
            value = _dt.datetime.fromisoformat(value.strip())
        except ValueError:
            raise TimeValueError(f"as_of {value!r} is not an ISO 8601 time "
                                 "(e.g. '2024-01-01' or '2024-01-01T12:30:00+02:00')") from None
    if isinstance(value, _dt.datetime):
        if value != value:  # pandas.NaT
            raise TimeValueError("as_of is NaT, not a time")
        # A plain datetime (a pandas.Timestamp's methods differ from datetime's).
        return _dt.datetime.combine(value.date(), value.timetz())
    if isinstance(value, _dt.date):
        return _dt.datetime.combine(value, _dt.time())
    raise TimeValueError(f"as_of must be a datetime, a date, a numpy.datetime64, a "
                         f"pandas.Timestamp or an ISO 8601 string, got {type(value).__name__}")


def refuse_own_source(rootdir: str | os.PathLike | None, sources: Iterable[Any]) -> None:
    """Refuse to build a dataset at ``rootdir`` from containers stored there or inside it:
    a ``mode='w'`` open replaces the dataset (closing this process's writers of it)
    before copying, so the copy would read what is already gone.

    Raises
    ------
    ValueError
        One of ``sources`` lives at ``rootdir`` or inside it.
    """
    if rootdir is None:
        return
    rootdir = os.fspath(rootdir)
    root = _location(rootdir)
    for source in sources:
        where = source.rootdir if isinstance(source, Container) else None
        if where is not None and (_location(where) + "/").startswith(root + "/"):
            raise ValueError(f"{rootdir}: cannot be replaced by data read from {where}, "
                             "which the replacement deletes first; read it into memory "
                             "(x[:]) or write to another path")


def built_whole(rootdir: str | os.PathLike, kwargs: dict[str, Any],
                build: Callable[[dict[str, Any]], Any]) -> Any:
    """A new stored container at ``rootdir``, made whole or not at all: ``build(args)``
    makes and fills it (``args``: ``kwargs`` with ``rootdir`` a temporary name beside
    ``rootdir``, see :mod:`carray.stores.staging`) and returns it open; it is closed,
    put in place, and opened again at ``rootdir`` for writing.

    ``kwargs`` are the constructor's (``mode='w'`` replaces what is there, once its
    writer's lock is taken; ``storage_options``, ``fsync``, ``storage``...).  When
    ``build`` raises, it must have closed what it made (its own failure path).
    """
    store, path = resolve(os.fspath(rootdir), kwargs.get("storage_options"))
    fsync = kwargs.get("fsync", True)
    with staged(store, path, overwrite=kwargs.get("mode") == "w", fsync=fsync,
                lock_timeout=timeout_of(kwargs.get("storage"))) as staging:
        out = build({**kwargs, "rootdir": staging.location, "mode": "w"})
        reopen = {**out.reopen_args(), "rootdir": os.fspath(rootdir), "mode": "a"}
        reopen.pop("version", None)
        for key in ("storage", "auto_flush", "fsync"):  # as asked, not as built
            if kwargs.get(key) is not None:
                reopen[key] = kwargs[key]
        close_or_discard(out)
    return type(out)(**reopen)


def close_or_discard(container: Any) -> None:
    """Close ``container``; if its last flush fails, let its files and lock go all the
    same (it was being built: what it held is dropped) and raise that failure."""
    try:
        container.close()
    except BaseException:
        with contextlib.suppress(Exception):
            container.discard()
        raise


def _location(rootdir: str) -> str:
    """``rootdir`` comparable with others: an absolute path with '/', or a bare URL."""
    if "://" in rootdir:
        return rootdir.rstrip("/")
    return os.path.abspath(rootdir).replace(os.sep, "/").rstrip("/")


class Container(abc.ABC):
    """The shared face of carray's containers.

    Subclasses set ``_rootdir``, ``_mode`` and ``_attrs`` when built and implement
    :meth:`flush` and :attr:`cparams`; :meth:`close` flushes and then calls
    :meth:`_release`.  Those holding parts with storage of their own (columns, an
    engine) list them in :meth:`_parts` for :meth:`abandon`.
    """

    _rootdir: str | None
    _mode: str
    _attrs: Attrs
    _closed_by: str | None = None  # why a takeover closed it (see abandon)

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
        """Flush and release file handles (a handle :meth:`abandon` closed: nothing more)."""
        try:
            self.flush()
        except HandleClosedError:
            pass  # taken over: what it held was dropped then, and there is nothing to flush
        self._release()

    def discard(self) -> None:  # noqa: B027 - containers without handles keep none
        """Release file handles without flushing: changes not committed are dropped (the
        container's storage was put back to its last commit)."""

    # -- versions (carray's own layout keeps them) -----------------------------------------

    def _history(self) -> Any:
        """What answers the version methods (see :class:`carray.versions.history.History`)."""
        raise NotImplementedError

    def versioned_dataset(self) -> Any:
        """The :class:`carray.versions.dataset.VersionedDataset` this container commits to
        (what transactions over several containers, and groups, coordinate)."""
        return self._history().dataset

    def commit(self, message: str | None = None) -> str:
        """Flush, and return the id of the newest version (a new one when anything changed).

        Raises :class:`carray.errors.VersionsUnsupportedError` for formats that keep no
        versions (bcolz directories, Blosc2 frames).
        """
        return str(self._history().commit(message))

    def snapshot(self, tag: str, message: str | None = None, move: bool = False) -> str:
        """Commit, then name the newest version ``tag`` (kept until :meth:`untag`).

        Tags never move: a tag naming another version raises
        :class:`carray.errors.TagExistsError` unless ``move=True``."""
        return str(self._history().snapshot(tag, message, move))

    def untag(self, tag: str) -> None:
        """Remove a tag; the version it named is kept only if something else keeps it."""
        self._history().untag(tag)

    def versions(self) -> list[Any]:
        """Kept versions, newest first: each with ``id``, ``time``, ``message``, ``tags``,
        ``shape``, ``nbytes`` and ``cbytes``."""
        return list(self._history().versions())

    def restore(self, version: str) -> str:
        """Make an earlier version the newest again, as a new commit; returns its id."""
        vid = str(self._history().restore(version))
        self._attrs.forget()  # the restored version's
        return vid

    def refresh(self) -> bool:
        """Move to the newest version; False when this handle had it.  A reader (mode
        'r') then shows it; a writer puts its changes not committed on top of it
        (:class:`carray.errors.ConflictError` when another writer changed the same
        chunks).  Nothing else moves a handle: a read error in its version is raised,
        never answered from another one."""
        moved = bool(self._history().refresh())
        if moved:
            self._attrs.forget()
        return moved

    def prune(self, keep_last: int | None = None, older_than: Any = None) -> int:
        """Drop the versions past the newest ``keep_last`` or made before ``older_than``
        (a datetime, or a timedelta back from now), except tagged ones and those readers
        hold, and reuse their bytes; returns how many were dropped."""
        return int(self._history().prune(keep_last, older_than))
    def abandon(self, reason: str) -> None:
        """Close without flushing, for a later ``mode='w'`` open of this process that takes
        the dataset over (see :mod:`carray.stores.lock`).

        Unflushed changes are dropped, since the dataset is being replaced; every later
        read or write raises :class:`~carray.errors.HandleClosedError` saying ``reason``,
        and :meth:`close` does nothing more.
        """
        for part in self._parts():
            part.abandon(reason)
        self._closed_by = reason
        self._attrs = Attrs(Closed(reason), self._mode)
        self._release()

    def _parts(self) -> list[Any]:
        """What :meth:`abandon` closes with this container (each has ``abandon``)."""
        return []

    def _check_open(self) -> None:
        """Raise HandleClosedError once :meth:`abandon` closed this container."""
        if self._closed_by is not None:
            raise HandleClosedError(self._closed_by)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class TableBase(Container):
    """What code below the table module may know of a table: its named columns.

    :class:`carray.table.table.ctable` is the one implementation; conversions recognise
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

    @abc.abstractmethod
    def __len__(self) -> int:
        """The number of rows."""

    def _parts(self) -> list[Any]:
        return list(self.cols.values())

    @property
    def ndim(self) -> int:
        return 1

    @property
    def len(self) -> int:
        return len(self)

    @property
    def size(self) -> int:
        return len(self) * len(self.names)

    @property
    def nbytes(self) -> int:
        return sum(c.nbytes for c in self.cols.values())

    @property
    def cbytes(self) -> int:
        return sum(c.cbytes for c in self.cols.values())

    def __sizeof__(self) -> int:
        """What ``sys.getsizeof`` reports: the compressed size, as bcolz reports it."""
        return self.cbytes
