"""What a handle reaches its storage through once a later ``mode='w'`` open of its dataset,
in the same process, took the dataset over (see :mod:`carray.stores.lock`)."""

from __future__ import annotations

from typing import NoReturn

from carray.errors import HandleClosedError


class Closed:
    """Stands in for a taken-over handle's layout, chunk codec or attribute store: every
    attribute raises :class:`HandleClosedError` saying why, so no path of the handle can
    reach the files of the dataset that replaced its own."""

    def __init__(self, reason: str) -> None:
        self._reason = reason

    def __getattr__(self, name: str) -> NoReturn:
        if name.startswith("__"):  # protocols probing (copy, pickle), not a use of the handle
            raise AttributeError(name)
        raise HandleClosedError(self.__dict__.get("_reason", "closed"))

    def __repr__(self) -> str:
        return f"Closed({self._reason!r})"
