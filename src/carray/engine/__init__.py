"""The array engine: the one owner of an array's storage state (see :mod:`.core`)."""

from carray.engine.core import ArrayEngine
from carray.engine.txn import ChunkListener

__all__ = ["ArrayEngine", "ChunkListener"]
