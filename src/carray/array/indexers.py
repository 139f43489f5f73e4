"""``a.oindex[...]`` and ``a.vindex[...]``, and what keys hold before they are read."""

from __future__ import annotations

from typing import Any

import numpy as np

from carray.array.container import Container
from carray.chunks.keys import coordinate_key, orthogonal_key


def is_int(k: Any) -> bool:
    return isinstance(k, (int, np.integer)) and not isinstance(k, (bool, np.bool_))


def plain(key: Any) -> Any:
    """A key with carrays in it replaced by their values."""
    if isinstance(key, tuple):
        # (inline: a[i, j] in a loop is a few microseconds in all)
        return tuple(np.asarray(k) if isinstance(k, Container) else k for k in key)
    return np.asarray(key) if isinstance(key, Container) else key


class Indexer:
    """``a.oindex[...]`` / ``a.vindex[...]``: one indexing rule, named explicitly."""

    def __init__(self, array: Any, kind: str) -> None:
        self._array, self._kind = array, kind

    def __getitem__(self, key: Any) -> Any:
        a = self._array
        if self._kind == "v":
            out = a.read_points(coordinate_key(plain(key), a.shape))
        else:
            out = a.read_selection(orthogonal_key(plain(key), a.shape))
        return out[()] if out.ndim == 0 else out

    def __setitem__(self, key: Any, value: Any) -> None:
        a = self._array
        values = a.as_values(value)
        if self._kind == "v":
            a.write_points(coordinate_key(plain(key), a.shape), values)
        else:
            a.write_selection(orthogonal_key(plain(key), a.shape), values)
