"""The carray class, handed to the compute layer once by :mod:`carray.array.array`.

The compute layer sits below the ``carray`` facade in the import graph (the
facade inherits its operators), so it cannot import the class; the facade
registers it at import time instead.
"""

from __future__ import annotations

from typing import Any

_ARRAY_TYPE: list[type] = []


def register_array_type(cls: type) -> None:
    """Record the carray class: what ``.compute()`` creates and operands are checked against."""
    _ARRAY_TYPE[:] = [cls]


def array_type() -> type:
    """The registered carray class."""
    if not _ARRAY_TYPE:
        raise RuntimeError("carray.compute used before carray.array.array registered its class")
    return _ARRAY_TYPE[0]


def is_carray(value: Any) -> bool:
    """Whether ``value`` is a carray."""
    return bool(_ARRAY_TYPE) and isinstance(value, _ARRAY_TYPE[0])
