"""Small helpers shared by the containers."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Concatenate, ParamSpec, TypeVar

import numpy as np

_P = ParamSpec("_P")
_R = TypeVar("_R")


def skip_and_limit(blocks: Iterable, skip: int, limit: int | None) -> Iterator[Any]:
    """Items of consecutive blocks, dropping the first ``skip`` and stopping after ``limit``."""
    taken = 0
    for block in blocks:
        if skip:
            if skip >= len(block):
                skip -= len(block)
                continue
            block, skip = block[skip:], 0
        if limit is not None:
            block = block[: limit - taken]
        yield from block
        taken += len(block)
        if limit is not None and taken >= limit:
            return


def whole_count(value: Any, what: str) -> int:
    """``value`` as an int: an integer, or a float holding a whole number (bcolz takes
    ``a.trim(1e4)``).

    Raises
    ------
    TypeError
        Anything else (a fraction, a string, None).
    """
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return int(value)
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{what} must be a whole number, got {value!r}")
    return int(value)


def quantize(data: np.ndarray, digits: int) -> np.ndarray:
    """Keep ``digits`` significant decimal digits (bcolz's lossy quantize)."""
    exp = np.ceil(np.log2(10.0 ** digits))
    scale = 2.0 ** exp
    return (np.around(scale * data) / scale).astype(data.dtype)


def human(n: float) -> str:
    for unit in ("bytes", "KB", "MB", "GB", "TB"):
        if abs(n) < 1024 or unit == "TB":
            return f"{n:.2f} {unit}" if unit != "bytes" else f"{int(n)} bytes"
        n /= 1024
    return str(n)  # pragma: no cover


def delegate(part: str, method: Callable[Concatenate[Any, _P], _R]
             ) -> Callable[Concatenate[Any, _P], _R]:
    """A method that calls ``method`` of the object the attribute ``part`` holds (a part
    the class is composed of), with that method's name, signature and docstring.

    ``create_index = delegate("index", TableIndexes.create)`` makes ``t.create_index(c)``
    call ``t.index.create(c)``.
    """
    @functools.wraps(method)
    def call(self: Any, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        return method(getattr(self, part), *args, **kwargs)

    return call
