"""Absent chunks of a superchunk dataset: chunks that hold only the fill value.

An index entry with offset -1 (docs/formats/superchunk.md, "Absent chunks") stores
nothing: the chunk holds only the fill value (``dflt``).  The engine writes such
chunks as Blosc2 special chunks (:mod:`carray.codecs.fill`); the layout records them
without storing a byte, and reads get the special chunk back.  Blosc1 datasets
(plain Bloscpack files for older readers) always store real chunks.
"""

from __future__ import annotations

import math

import numpy as np

from carray.codecs.fill import fill_chunk
from carray.layouts.superchunk.meta import StorageInfo


def absent_chunk(info: StorageInfo) -> tuple[bytes | None, bytes | None]:
    """The fill value's item bytes and the special chunk reads of an absent chunk get;
    ``(None, None)`` for Blosc1 datasets (their readers need real chunks)."""
    if info.blosc1 or info.dtype.itemsize == 0:
        return None, None
    item = np.asarray(info.dflt if info.dflt is not None else 0, dtype=info.dtype).tobytes()
    blocks = info.blockshape or info.chunkshape
    blocksize = info.dtype.itemsize * math.prod(blocks)
    chunk = fill_chunk(item, info.chunk_nbytes, blocksize)
    return (item, chunk) if chunk is not None else (None, None)
