"""Frame chunks that only libblosc2's plugins decode, and only inside their frame.

python-blosc2 writes chunks with plugin codecs (ZFP in its three modes, NDLZ)
and plugin filters (NDCELL, NDMEAN) that read the block shape from the frame's
``b2nd`` metalayer, so libblosc2 decodes them only with the frame open (its
super-chunk context); a chunk alone fails.  The b2nd layout hands the engine
an equivalent chunk instead: the values libblosc2 decodes in the frame, stored
raw (memcpyed) in a Blosc2 chunk of the same typesize and block size, which
every read path decodes on its own.  Bytedelta needs no frame and is left alone.

Where even the frame cannot be decoded (a user codec this process has not
registered, a frame on a remote store), the error is a
:class:`~carray.errors.CodecUnavailableError` naming the codec, never a
corruption error.
"""

from __future__ import annotations

import blosc2 as _blosc2
import numpy as np

from carray.codecs.blosc import BLOSC2_HEADER
from carray.codecs.pipeline import plugin_names
from carray.errors import CodecUnavailableError
from carray.stores import Store

#: Plugins libblosc2 decodes without the frame (measured with libblosc2 3.3).
_CONTEXT_FREE = frozenset({"filter bytedelta"})


def needs_frame(head: bytes) -> bool:
    """Whether a stored chunk (its first 32 bytes suffice) decodes only inside its frame."""
    return any(name not in _CONTEXT_FREE for name in plugin_names(head[:BLOSC2_HEADER]))


def frame_decoded(store: Store, path: str, nchunk: int, chunk: bytes | memoryview,
                  typesize: int, blocksize: int) -> bytes | memoryview:
    """``chunk`` itself, or when only its frame decodes it, the equivalent raw chunk
    :func:`decode_in_frame` makes."""
    head = bytes(chunk[:BLOSC2_HEADER])
    if not needs_frame(head):
        return chunk
    return decode_in_frame(store, path, nchunk, head, typesize, blocksize)


def decode_in_frame(store: Store, path: str, nchunk: int, head: bytes, typesize: int,
                    blocksize: int) -> bytes:
    """Chunk ``nchunk`` of the frame at ``path`` decoded by libblosc2 in the frame, then
    stored raw in a chunk of ``typesize`` items and ``blocksize``-byte blocks.

    Raises
    ------
    CodecUnavailableError
        libblosc2 cannot decode it (no such plugin registered), or the frame is
        not on a local disk where libblosc2 can open it; the message names the
        codec or filter.
    """
    what = ", ".join(plugin_names(head[:BLOSC2_HEADER])) or "a plugin"
    where = store.url(path)
    if store.remote:
        raise CodecUnavailableError(
            f"{where}: chunk {nchunk} uses {what}, which libblosc2 decodes only with the "
            "frame open on a local disk; copy the frame locally to read it")
    try:
        frame = _blosc2.open(where, mode="r")
        schunk = getattr(frame, "schunk", frame)
        data = schunk.decompress_chunk(nchunk)
    except (RuntimeError, ValueError, OSError) as exc:
        raise CodecUnavailableError(
            f"{where}: chunk {nchunk} uses {what}, which this libblosc2 cannot decode "
            f"({exc})") from None
    raw = np.frombuffer(data, np.uint8)
    return bytes(_blosc2.compress2(raw, typesize=typesize, clevel=0, blocksize=blocksize,
                                   filters=[0], filters_meta=[0]))


__all__ = ["decode_in_frame", "frame_decoded", "needs_frame"]
