"""Transactions and listeners of the array engine."""

from __future__ import annotations

import functools
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Protocol, TypeVar

from carray.engine.chunkstats import ChunkStats


class Transactional(Protocol):
    """An object whose changes can be grouped into a transaction."""

    def transaction(self) -> AbstractContextManager[None]: ...


class ChunkListener(Protocol):
    """Told about the chunks an engine writes (zone maps keep their summaries this way)."""

    def chunk_written(self, nchunk: int, stats: ChunkStats | None,
                      stamp: tuple[int, int] | None) -> None:
        """Full chunk ``nchunk`` was stored; ``stats``: the statistics of its items inside
        the array (:mod:`.chunkstats`; None for items without them), worked out where
        the chunk was compressed."""

    def chunks_absent(self, first: int, count: int) -> None:
        """Chunks ``first`` to ``first + count``, new and too many to be told of one by
        one, hold only the fill value and were stored nowhere."""

    def chunks_dropped(self, first: int) -> None:
        """Chunks ``first`` and above (in runs of whole rows) no longer exist."""

    def chunks_restored(self, nchunks: list[int]) -> None:
        """A failed operation put chunks ``nchunks`` back as they were before it: what
        :meth:`chunk_written` said of them no longer holds."""

    def committing(self, engine: Any, final: bool) -> None:
        """The engine is about to record its state (``final``: for the last time before
        it closes); persist what depends on it."""


_F = TypeVar("_F", bound=Callable[..., Any])


def atomic(method: _F) -> _F:
    """Run ``method`` as one transaction: on any error, the engine is put back."""

    @functools.wraps(method)
    def run(self: Transactional, *args: Any, **kwargs: Any) -> Any:
        with self.transaction():
            return method(self, *args, **kwargs)

    return run  # type: ignore[return-value]
