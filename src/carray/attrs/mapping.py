"""User attributes of a container: a dict persisted through its layout.

Values are checked and copied when set (:func:`carray.attrs.values.normalise`), so
what a container holds in memory is what every layout stores and reads back.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, MutableMapping
from typing import Any, Protocol

from carray.attrs.values import check_name, load_plain, normalise, to_json
from carray.core.safejson import load_json
from carray.errors import FormatError, ReadOnlyError
from carray.stores import Store


class AttrsHolder(Protocol):
    """Where attributes are persisted: a layout, or an array engine."""

    def load_attrs(self) -> dict[str, Any]: ...

    def save_attrs(self, attrs: dict[str, Any]) -> None: ...


class PlainAttrsFile:
    """Attributes in a JSON file of carray's own directories (a string column's
    ``__attrs__``), in the plain form that keeps every value exactly
    (:func:`carray.attrs.values.to_json`)."""

    def __init__(self, store: Store, path: str, fsync: bool) -> None:
        self._store, self._key, self._fsync = store, store.join(path, "__attrs__"), fsync

    def load_attrs(self) -> dict[str, Any]:
        try:
            text = self._store.get(self._key)
        except FileNotFoundError:
            return {}
        where = self._store.url(self._key)
        found = load_json(text, where, what="__attrs__") if text.strip() else {}
        if not isinstance(found, dict):
            raise FormatError("__attrs__ must hold a JSON object", where)
        return load_plain(found, where)

    def save_attrs(self, attrs: dict[str, Any]) -> None:
        plain = {check_name(k): to_json(v) for k, v in attrs.items()}
        data = (json.dumps(plain, ensure_ascii=True) + "\n").encode("ascii")
        self._store.put(self._key, data, fsync=self._fsync)


class Attrs(MutableMapping):
    """User attributes of a container: a dict persisted on every change."""

    def __init__(self, layout: AttrsHolder, mode: str) -> None:
        self._layout = layout
        self._mode = mode
        self._data: dict | None = None

    def forget(self) -> None:
        """Read the attributes again at the next access (the container moved to another
        version)."""
        self._data = None

    def _load(self) -> dict:
        if self._data is None:
            self._data = self._layout.load_attrs()
        return self._data

    def _writable(self) -> None:
        if self._mode == "r":
            raise ReadOnlyError("attributes cannot change: opened in mode 'r'")

    def __getitem__(self, key: str) -> Any:
        return self._load()[key]

    def __setitem__(self, key: str, value: Any) -> None:
        """Store ``value`` (a copy of it) under ``key``.

        Raises
        ------
        UnstorableAttributeError
            ``key`` is not a str, or ``value`` is not of a type carray stores
            exactly (see :mod:`carray.attrs.values`); nothing is changed.
        ReadOnlyError
            The container is open in mode 'r'.
        """
        self._writable()
        value = normalise(key, value)
        data = dict(self._load())
        data[str(key)] = value
        self._layout.save_attrs(data)
        self._data = data

    def update(self, other: Any = (), /, **kwargs: Any) -> None:
        """Set several attributes with one write; none is set when one is refused."""
        self._writable()
        items = dict(other, **kwargs)
        new: dict[str, Any] = {}
        for key, value in items.items():
            new[str(key)] = normalise(key, value)
        if new:
            data = {**self._load(), **new}
            self._layout.save_attrs(data)
            self._data = data

    def __delitem__(self, key: str) -> None:
        self._writable()
        data = dict(self._load())
        del data[key]
        self._layout.save_attrs(data)
        self._data = data

    def __iter__(self) -> Iterator[str]:
        return iter(self._load())

    def __len__(self) -> int:
        return len(self._load())

    def getall(self) -> dict:
        """A copy of every attribute."""
        return dict(self._load())

    def checked(self) -> dict:
        """A copy of every attribute, each checked as when set (values read from other
        programs' files may be of types carray does not store).

        Raises
        ------
        UnstorableAttributeError
            An attribute carray cannot store, named.
        """
        return {k: normalise(k, v) for k, v in self._load().items()}

    def __repr__(self) -> str:
        return f"Attrs({self._load()!r})"
