"""Small helpers shared by the containers."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np


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
