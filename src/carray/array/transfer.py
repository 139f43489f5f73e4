"""Copies, concatenations and appends that move stored chunks instead of decoding them.

A chunk of the result that is exactly one chunk of a source (the same box of
items: the grids line up there) and whose stored bytes mean the same in both
arrays (:meth:`carray.engine.moves.ChunkFormat.move_refused`) is moved as its
stored bytes, checked by the source's digest (or its Blosc header where the
format keeps none) on the way, with the target's digest worked out as its layout
stores it.  Every other chunk is assembled from the sources' items, decoded, and
compressed again; both happen on the worker threads, several chunks at once,
while this thread stores the finished ones in order.  Blosc1 chunks (bcolz) are
compressed here, one at a time on all of Blosc's threads, since c-blosc 1.x
keeps its block size in process-wide state.

Everything is stored under one transaction of the target: a failure leaves it
as it was.  :class:`MoveStats` says how many chunks moved as bytes, how many
were decoded, and why.
"""

from __future__ import annotations

import bisect
import math
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from carray.array.container import built_whole
from carray.codecs import parallel as _parallel
from carray.engine.moves import ChunkSink, StoredChunks
from carray.layouts import default_format


@dataclass
class MoveStats:
    """How the chunks of a copy were written.

    Attributes
    ----------
    moved : int
        Chunks stored as the source's compressed bytes.
    decoded : int
        Chunks decoded and compressed again.
    reasons : collections.Counter
        Why chunks were decoded (a reason per chunk).
    """

    moved: int = 0
    decoded: int = 0
    reasons: Counter = field(default_factory=Counter)

    def add(self, other: MoveStats) -> None:
        """Count ``other``'s chunks too."""
        self.moved += other.moved
        self.decoded += other.decoded
        self.reasons.update(other.reasons)

    def summary(self) -> str:
        """One line: chunks moved as bytes, decoded, and why."""
        why = "; ".join(f"{n} {r}" for r, n in self.reasons.most_common())
        return (f"{self.moved} chunks moved as bytes, {self.decoded} decoded"
                + (f" ({why})" if why else ""))


_NOT_STORED = "not stored as a chunk (rows held decoded, or a chunk never written)"
_MISALIGNED = "grids do not line up"
_BLOCKSIZE = "Blosc block size differs from the target's blocks"
_PARTIAL = "last partial chunk stored padded in one format, truncated in the other"


@dataclass(frozen=True)
class _Source:
    """One source array, where it starts along the axis of concatenation."""

    array: Any
    chunks: StoredChunks
    start: int
    stop: int


class _Plan:
    """Where each new chunk of the target comes from."""

    def __init__(self, sink: ChunkSink, sources: Sequence[Any], axis: int, rows: int,
                 dtype: np.dtype) -> None:
        self.sink, self.axis, self.dtype = sink, axis, dtype
        self.grid = sink.grid(rows)
        self.first = sink.length if axis == 0 else 0
        self.sources: list[_Source] = []
        pos = self.first
        for a in sources:
            n = a.shape[axis]
            if n:
                self.sources.append(_Source(a, chunk_source(a), pos, pos + n))
            pos += n
        self.starts = [s.start for s in self.sources]
        self.refused = {id(s): s.chunks.refused(sink.format) for s in self.sources}

    def chunk_numbers(self) -> range:
        g = self.grid
        return range(self.first // g.chunks[0] * (g.nchunks // max(g.grid_shape[0], 1))
                     if g.grid_shape[0] else 0, g.nchunks)

    def _parts(self, box: tuple[slice, ...]) -> list[tuple[_Source, slice]]:
        """The sources holding ``box`` (target coordinates) along the axis, with their
        part of it in their own coordinates."""
        lo, hi = box[self.axis].start, box[self.axis].stop
        out = []
        j = max(bisect.bisect_right(self.starts, lo) - 1, 0)
        while j < len(self.sources) and self.sources[j].start < hi:
            s = self.sources[j]
            a, b = max(lo, s.start), min(hi, s.stop)
            if a < b:
                out.append((s, slice(a - s.start, b - s.start)))
            j += 1
        return out

    def source_chunk(self, nchunk: int) -> tuple[_Source | None, int, str | None]:
        """``(source, its chunk, None)`` when target chunk ``nchunk`` is one source chunk
        whose bytes may move; else ``(source or None, -1, why not)``."""
        g = self.grid
        coords = g.chunk_coords(nchunk)
        box = g.chunk_slices(coords)
        parts = self._parts(box)
        if len(parts) != 1:
            return None, -1, _MISALIGNED
        s, local = parts[0]
        refused = self.refused[id(s)]
        sg = s.chunks.grid
        c = g.chunks[self.axis]
        if sg.chunks != g.chunks or local.start % c:  # boxes of another shape, or shifted
            return s, -1, refused or _MISALIGNED
        scoords = list(coords)
        scoords[self.axis] = local.start // c
        if sg.valid_shape(scoords) != g.valid_shape(coords):
            return s, -1, refused or _MISALIGNED
        if refused:
            return s, sg.chunk_index(scoords), refused
        partial = g.valid_shape(coords)[0] < g.chunks[0]
        if partial and s.chunks.format.truncates != self.sink.format.truncates:
            return s, sg.chunk_index(scoords), _PARTIAL
        return s, sg.chunk_index(scoords), None

    def region(self, nchunk: int, source: _Source | None, schunk: int) -> np.ndarray:
        """The items of target chunk ``nchunk``, decoded from the sources."""
        if source is not None and schunk >= 0:
            values = source.chunks.region(schunk)
        else:
            box = self.grid.chunk_slices(self.grid.chunk_coords(nchunk))
            pieces = []
            for s, local in self._parts(box):
                key = list(box)
                key[self.axis] = local
                pieces.append(np.asarray(s.array[tuple(key)]))
            values = pieces[0] if len(pieces) == 1 else np.concatenate(pieces, axis=self.axis)
        return np.asarray(values, dtype=self.dtype)


def chunk_source(a: Any) -> Any:
    """The stored chunks of ``a``: a carray's (:class:`StoredChunks`), or those of an
    object with a ``chunk_source()`` of the same interface (a Zarr array's: see
    :mod:`carray.integrations.zarr_moves`)."""
    own = getattr(a, "chunk_source", None)
    return own() if own is not None else a.engine.chunk_source()


def _chunks(plan: _Plan, stats: MoveStats, progress: Callable[[int, int], None] | None
            ) -> Iterator[tuple[int, Any, bytes | None]]:
    """``(nchunk, bytes, digest)`` of every new chunk, in order, worked out on the worker
    threads; counts them in ``stats``."""
    sink, blosc1 = plan.sink, plan.sink.format.blosc1
    done, total = 0, math.prod(plan.grid.shape) - plan.first * math.prod(plan.grid.shape[1:])

    def work(nchunk: int) -> tuple[int, Any, bytes | None, str | None]:
        source, schunk, why = plan.source_chunk(nchunk)
        if why is None and source is not None:
            got = source.chunks.stored(schunk)
            if got is None:
                why = _NOT_STORED
            elif got[1] is not None and not sink.format.takes_blocksize(got[1]):
                why = _BLOCKSIZE
            else:
                # Detached from the reader's buffer here, on a worker: layouts keep what
                # they are given until its file is written.
                data = got[0] if isinstance(got[0], bytes) else bytes(got[0])
                return nchunk, data, sink.digest(data), None
        region = plan.region(nchunk, source, schunk)
        if blosc1:
            return nchunk, region, None, why  # compressed on this thread (see module doc)
        data = sink.encode(region, plan.grid)
        return nchunk, data, sink.digest(data), why

    for nchunk, data, digest, why in _parallel.pipeline(work, plan.chunk_numbers()):
        if why is None:
            stats.moved += 1
        else:
            stats.decoded += 1
            stats.reasons[why] += 1
            if blosc1:
                data = sink.encode(data, plan.grid, on_worker=False)
        yield nchunk, data, digest
        if progress is not None:
            done += math.prod(plan.grid.valid_shape(plan.grid.chunk_coords(nchunk)))
            progress(done, total)


def append_from(target: Any, sources: Sequence[Any], axis: int = 0,
                progress: Callable[[int, int], None] | None = None) -> MoveStats:
    """Append the concatenation of ``sources`` along ``axis`` to carray ``target``.

    Along the first axis the target's rows must end on whole chunks; along another
    axis the target must be empty (and is given ``sources[0].shape[0]`` rows).  The
    sources' dtypes are cast to the target's.  ``progress(items_done, items_total)`` is
    called after every chunk.  Returns what moved and what was decoded.
    """
    engine = target.engine
    sink = engine.chunk_sink()
    sources = [s for s in sources]
    if axis == 0:
        rows = sum(s.shape[0] for s in sources)
    else:
        if sink.length:
            raise ValueError("concatenating along an axis other than the first needs an "
                             "empty target")
        rows = sources[0].shape[0] if sources else 0
    stats = MoveStats()
    if rows == 0 or 0 in target.shape[1:]:
        if rows:
            target.engine.append(np.empty((rows, *target.shape[1:]), dtype=target.dtype))
        return stats
    plan = _Plan(sink, sources, axis, rows, target.dtype)
    sink.append(rows, _chunks(plan, stats, progress))
    return stats


def movable(target: Any, source: Any) -> bool:
    """Whether carray ``source`` can be appended to ``target`` chunk by chunk (its chunks
    moved as bytes where they mean the same, else decoded in parallel): both in C order
    and of one dtype and row shape, numbers (not objects), and the target's rows end on
    whole chunks."""
    return target.order == "C" and source.order == "C" and target.ndim > 0 and \
        target.dtype == source.dtype and not target.dtype.hasobject and \
        target.shape[1:] == source.shape[1:] and len(target) % target.chunks[0] == 0


def append_carray(target: Any, source: Any) -> bool:
    """Append carray ``source`` to ``target`` chunk by chunk when :func:`movable`;
    False (nothing done) otherwise."""
    if not movable(target, source):
        return False
    append_from(target, [source])
    return True


def fill(target: Any, source: Any,
         progress: Callable[[int, int], None] | None = None) -> MoveStats:
    """Copy carray ``source``'s items into ``target`` (new and empty, of the same shape
    past the first axis), moving chunks where they mean the same bytes, and flush it.

    Arrays in Fortran order and object arrays are copied a block of rows at a time.
    """
    stats = MoveStats()
    if target.order == "C" and source.order == "C" and not target.dtype.hasobject and \
            not source.dtype.hasobject and len(target) == 0:
        stats = append_from(target, [source], progress=progress)
    else:
        for block in source.iterblocks():
            target.append(block.astype(target.dtype, copy=False))
        stats.decoded = source.nchunks
        stats.reasons["copied by rows (Fortran order or objects)"] = source.nchunks
    target.flush()
    return stats


def copy_of(source: Any, attrs: dict[str, Any] | None = None,
            **kwargs: Any) -> tuple[Any, MoveStats]:
    """A new carray holding ``source``'s items (keyword arguments as for the constructor,
    defaults: ``source``'s chunk and block shapes, codec, fill value and order), with
    what moved as bytes and what was decoded.  The attributes are not copied: ``attrs``
    are the new array's (part of it before it appears).

    A ``.b2nd`` target of a source whose chunks have no block shape gets the blocks
    Blosc chose for the source's chunks, so they move; a bcolz one gets its chunk
    length.
    """
    chunks, blocks = source.engine.chunks, source.engine.blocks
    if source.order == "F":  # given in the user's axis order
        chunks, blocks = chunks[::-1], None if blocks is None else blocks[::-1]
    args: dict[str, Any] = dict(cparams=source.cparams, dflt=source.dflt,
                                expectedlen=len(source), chunks=chunks, blocks=blocks,
                                order=source.order)
    fmt = kwargs.get("format") or default_format(kwargs.get("rootdir"))
    if fmt == "bcolz":
        args.pop("blocks")
        args["chunklen"] = args.pop("chunks")[0]
    elif fmt in ("b2nd", "caterva") and blocks is None and source.order == "C":
        args["blocks"] = natural_blocks(source)
    if ("expectedlen" in kwargs or "chunklen" in kwargs) and "chunks" not in kwargs:
        args.pop("chunks", None)
        args.pop("blocks", None)
        args.pop("chunklen", None)
    if "chunks" in kwargs and "blocks" not in kwargs:
        args.pop("blocks", None)  # the source's blocks may not fit other chunks
    args.update(kwargs)
    dtype = args.pop("dtype", None)
    done: list[MoveStats] = []

    def build(args: dict[str, Any]) -> Any:
        out = type(source)(np.empty((0, *source.shape[1:]), dtype=source.dtype),
                           dtype=dtype, **args)
        try:
            done.append(fill(out, source))
            if attrs:
                out.attrs.update(attrs)
        except BaseException:
            out.discard()
            raise
        return out

    if args.get("rootdir") is None:
        return build(args), done[0]
    args["format"] = fmt  # the temporary name built under has no telling extension
    return built_whole(args.pop("rootdir"), args, build), done[0]


def natural_blocks(source: Any) -> tuple[int, ...] | None:
    """The block shape matching the Blosc blocks of ``source``'s first stored chunk, when
    its chunks have no block shape of their own and its blocks are whole rows of a
    chunk (None otherwise: let the target choose)."""
    if source.blocks is not None or source.nchunks == 0 or not source.ndim:
        return None
    chunks = source.engine.chunk_source()
    if chunks.format.blosc1:
        return None
    # The first chunk that is not one value repeated (those have no Blosc blocks).
    sizes = (got[1] for got in map(chunks.stored, range(min(chunks.grid.nchunks, 16)))
             if got is not None and got[1] is not None)
    blocksize = next(sizes, None)
    ext = chunks.grid.ext_chunks
    row = math.prod(ext[1:]) * source.dtype.itemsize
    if blocksize is None or row == 0 or blocksize % row or not 0 < blocksize // row <= ext[0]:
        return None
    return (blocksize // row, *ext[1:])
