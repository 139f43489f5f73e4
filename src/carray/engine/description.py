"""What an array engine is, as opposed to what it does: the fixed facts of an array
(dtype, chunk and block shapes, codec, fill value, order, mode) and of its layout
(where it lives, what it can do), and the side data kept beside its chunks."""

from __future__ import annotations

from typing import Any

import numpy as np

from carray.layouts.base import ArrayMeta, Layout
from carray.params import CParams


class ArrayDescription:
    """The fixed description of an array and of its layout; :class:`ArrayEngine` adds the
    state that changes (sizes, the tail, caches) and the operations.

    Parameters
    ----------
    layout : Layout
        Where the chunks and metadata live.
    meta : ArrayMeta
        The array's dtype, chunk and block shapes, codec parameters, fill value, order.
    mode : {'r', 'a', 'w'}
        'r' never writes.
    """

    def __init__(self, layout: Layout, meta: ArrayMeta, mode: str) -> None:
        self._layout = layout
        self._mode = mode
        self._dtype = meta.dtype
        self._chunks = tuple(meta.chunks)
        self._blocks = None if meta.blocks is None else tuple(meta.blocks)
        self._cparams = meta.cparams
        self._dflt = np.asarray(meta.dflt if meta.dflt is not None else 0, dtype=meta.dtype)
        self._expectedlen = meta.expectedlen
        self._order = meta.order

    @property
    def dtype(self) -> np.dtype:
        return self._dtype

    @property
    def chunks(self) -> tuple[int, ...]:
        return self._chunks

    @property
    def blocks(self) -> tuple[int, ...] | None:
        return self._blocks

    @property
    def cparams(self) -> CParams:
        return self._cparams

    @property
    def dflt(self) -> np.ndarray:
        """The fill value, as a 0-d array of the dtype."""
        return self._dflt

    @property
    def expectedlen(self) -> int:
        return self._expectedlen

    @property
    def mode(self) -> str:
        return self._mode

    @property
    def in_memory(self) -> bool:
        return self._layout.in_memory

    @property
    def remote(self) -> bool:
        return self._layout.remote

    @property
    def rows_only(self) -> bool:
        """Whether only the first axis can be resized (bcolz directories)."""
        return self._layout.rows_only

    @property
    def fsync(self) -> bool:
        return bool(getattr(self._layout, "fsync", True))

    @property
    def order(self) -> str:
        """'F' when the stored array is the transpose of the one users see, else 'C'."""
        return self._order

    def describe(self) -> str:
        """The layout, for messages."""
        return self._layout.describe()

    def layout_name(self) -> str:
        """The layout's class name without 'Layout' (``Superchunk``, ``Bcolz``, ...)."""
        return type(self._layout).__name__.removesuffix("Layout")

    def chunk_stamp(self, nchunk: int) -> tuple[int, int] | None:
        """Something that changes whenever chunk ``nchunk`` is rewritten (None in memory)."""
        return self._layout.chunk_stamp(nchunk)

    def chunk_path(self, nchunk: int) -> str | None:
        return self._layout.chunk_path(nchunk)

    def load_attrs(self) -> dict[str, Any]:
        return self._layout.load_attrs()

    def save_attrs(self, attrs: dict[str, Any]) -> None:
        self._layout.save_attrs(attrs)

    def sidecar_names(self) -> list[str]:
        """Names of the small files kept beside the metadata (summaries, caches)."""
        return self._layout.sidecar_names()

    def load_sidecar(self, name: str) -> bytes | None:
        return self._layout.load_sidecar(name)

    def save_sidecar(self, name: str, data: bytes | None) -> None:
        """Write (or with None delete) a sidecar; caches only, never fsynced."""
        self._layout.save_sidecar(name, data)
