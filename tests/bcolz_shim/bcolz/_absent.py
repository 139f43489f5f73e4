"""Names bcolz's test modules import from bcolz's private modules that carray has no
counterpart for: importing works (so the other tests of the module run), calling fails."""

from __future__ import annotations

from typing import Any


def absent(qualname: str) -> Any:
    """A callable standing for bcolz's private ``qualname``; calling it raises."""

    def missing(*args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{qualname} is private to bcolz; carray has none")

    missing.__qualname__ = qualname
    return missing
