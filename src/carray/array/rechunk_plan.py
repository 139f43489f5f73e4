"""Plans for changing an array's chunk shape within a memory budget.

Pure arithmetic on shapes (nothing is read or written here): :func:`plan` takes the
array's shape and itemsize, the chunk shapes it has and should have, the smallest
piece a read of the source decodes (its blocks), and a budget in bytes, and
returns the passes :mod:`carray.array.rechunk` runs.

A *pass* reads a box of its source (the box is a whole number of the chunks the
pass writes, so every chunk it writes is complete once the box is read),
compresses the box's chunks on the worker threads and writes them.  A box that
cuts through the pieces its source stores makes those pieces be decoded again by
the next box; when boxes large enough to avoid that do not fit in the budget, the
data goes through an intermediate array whose chunks suit both sides (the way
rechunker plans: read in multiples of the source's chunks, write in multiples of
the target's, and put an intermediate in between when the two cannot both fit).

What a pass holds at once (:func:`pass_memory`) is counted from what the code
allocates: the decoded box; per worker thread, the source's decode buffers (the
fetched compressed chunk, the decoded chunk and a run of decoded blocks, each at
most a source chunk); per compressing thread (the pass's own, ended with it) the
chunk put in stored order, the output buffer and the compressed copy; the
compressed chunks waiting for the rest of their file, and one file being written.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from carray.errors import RechunkMemoryError

#: A size in bytes written with a unit: decimal (kB, MB, GB, TB) or binary (KiB, ...).
_SIZE = re.compile(r"^\s*(\d+(?:\.\d*)?)\s*([kmgtp]?i?b?)\s*$", re.IGNORECASE)
_POWERS = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4, "p": 5}
#: What visiting one chunk (a header parsed, a file read, a few Python steps) costs,
#: in bytes decoded in the same time.
VISIT_BYTES = 64 * 1024
#: Compressing a byte costs about this many times decoding it.
COMPRESS_FACTOR = 2.0
#: What a pass holds besides its buffers: a little, and per chunk of either array
#: its index entry and the Python objects that track it.
BOOKKEEPING, PER_CHUNK = 64 << 10, 512
#: Intermediate chunk sizes tried, in bytes.
_INTERMEDIATE_SIZES = (16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20)


def parse_size(size: int | str) -> int:
    """Bytes in ``size``: an int, or a string such as ``"256MiB"``, ``"1GB"``, ``"512k"``.

    Units: ``k``, ``M``, ``G``, ``T``, ``P`` are powers of 1000 and ``Ki``, ``Mi``, ...
    powers of 1024, with or without a trailing ``B``.

    Raises
    ------
    ValueError
        ``size`` is not a positive size.
    """
    if isinstance(size, bool):
        raise ValueError(f"max_mem: expected a size in bytes, got {size!r}")
    if isinstance(size, int):
        value = size
    elif isinstance(size, str):
        m = _SIZE.match(size)
        if m is None:
            raise ValueError(f"max_mem: cannot read {size!r} as a size (e.g. '256MiB', "
                             "'1GB', 1000000)")
        unit = m.group(2).lower().rstrip("b")
        base = 1024 if unit.endswith("i") else 1000
        value = int(float(m.group(1)) * base ** _POWERS[unit.rstrip("i")])
    else:
        raise ValueError(f"max_mem: expected a size in bytes, got {size!r}")
    if value <= 0:
        raise ValueError(f"max_mem: must be positive, got {size!r}")
    return value


@dataclass(frozen=True)
class Pass:
    """One pass of a plan: read boxes of an array chunked ``source_chunks`` (decoding
    pieces of ``grain``), write an array chunked ``chunks``.

    Attributes
    ----------
    source_chunks, grain, chunks : tuple of int
        As above (clipped to the array's shape).
    box : tuple of int
        The region read, compressed and written at once: a whole number of ``chunks``
        along every axis, or the whole axis.
    threads : int
        Chunks compressed at once.
    buffers : int
        Boxes held at once: 2 when the next box is read while this one is compressed.
    memory : int
        Bytes the pass holds at most (:func:`pass_memory`).
    decoded : int
        Bytes its reads decode, counting pieces decoded more than once.
    cost : float
        Its estimated work, in bytes decoded (for comparing plans).
    """

    source_chunks: tuple[int, ...]
    grain: tuple[int, ...]
    chunks: tuple[int, ...]
    box: tuple[int, ...]
    threads: int
    buffers: int
    memory: int
    decoded: int
    cost: float


@dataclass(frozen=True)
class Plan:
    """How to rechunk: the passes, in order; every pass but the last writes an
    intermediate array chunked as its ``chunks``."""

    shape: tuple[int, ...]
    itemsize: int
    max_mem: int
    passes: tuple[Pass, ...]

    @property
    def intermediates(self) -> tuple[tuple[int, ...], ...]:
        """The chunk shapes of the intermediate arrays."""
        return tuple(p.chunks for p in self.passes[:-1])

    @property
    def memory(self) -> int:
        """Bytes the most demanding pass holds at most."""
        return max(p.memory for p in self.passes)

    @property
    def cost(self) -> float:
        return sum(p.cost for p in self.passes)


def _clip(chunks: tuple[int, ...], shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(max(1, min(c, n)) for c, n in zip(chunks, shape, strict=True))


def pass_memory(box: tuple[int, ...], source_chunks: tuple[int, ...], chunks: tuple[int, ...],
                itemsize: int, workers: int, threads: int, unit_bytes: int,
                nchunks: int = 0, buffers: int = 1) -> int:
    """Bytes a pass holds at most (see the module doc).

    ``workers`` threads decode the source; ``threads`` compress chunks; compressed
    chunks wait for their file up to ``unit_bytes``; ``nchunks`` chunks are indexed;
    ``buffers`` boxes are held (the next one read while this one is compressed).
    """
    src = math.prod(source_chunks) * itemsize
    dst = math.prod(chunks) * itemsize
    whole = math.prod(box) * itemsize
    # Files never span boxes (see carray.array.rechunk.unit_size): a file holds at most a box.
    unit = max(dst, min(unit_bytes, whole))
    # Per decoding thread its buffers; per compressing thread the chunk in stored order,
    # the compression buffer and the compressed bytes; the file filling (the chunk the
    # writer holds included) and the one being written.
    return buffers * whole + workers * 3 * src + threads * 3 * dst + 2 * unit + \
        BOOKKEEPING + PER_CHUNK * nchunks


def _spans(n: int, box: int, piece: int) -> tuple[int, int]:
    """Along an axis of ``n`` cut in tiles of ``box``: the positions decoded when reads
    decode whole pieces of ``piece`` (summed over tiles), and the pieces visited."""
    decoded = visits = 0
    for lo in range(0, n, box):
        hi = min(lo + box, n)
        first, last = lo // piece, (hi - 1) // piece
        decoded += min((last + 1) * piece, n) - first * piece
        visits += last - first + 1
    return decoded, visits


def _read_cost(shape: tuple[int, ...], box: tuple[int, ...], grain: tuple[int, ...],
               source_chunks: tuple[int, ...], itemsize: int) -> tuple[int, float]:
    """Bytes decoded reading ``shape`` box by box, and that plus the chunk visits."""
    decoded, visits = itemsize, 1
    for n, b, g, c in zip(shape, box, grain, source_chunks, strict=True):
        decoded *= _spans(n, b, g)[0]
        visits *= _spans(n, b, c)[1]
    return decoded, decoded + visits * VISIT_BYTES


def _write_cost(shape: tuple[int, ...], chunks: tuple[int, ...], itemsize: int) -> float:
    return COMPRESS_FACTOR * math.prod(shape) * itemsize + \
        _nchunks(shape, chunks) * VISIT_BYTES


def _candidates(n: int, box: int, chunk: int, grain: int) -> set[int]:
    """Larger box sizes worth trying along an axis of ``n`` (multiples of ``chunk``)."""
    step = chunk * grain // math.gcd(chunk, grain)  # aligned with the source's pieces
    found = {box + chunk, 2 * box, -(-(box + 1) // step) * step, n}
    return {min(c, n) for c in found if c > box}


def _best_box(shape: tuple[int, ...], chunks: tuple[int, ...], grain: tuple[int, ...],
              source_chunks: tuple[int, ...], itemsize: int, fits) -> tuple[int, ...] | None:
    """The cheapest box (a whole number of ``chunks`` per axis) that ``fits(box)``,
    grown greedily from one chunk; None when not even one chunk fits."""
    box = chunks
    if not fits(box):
        return None
    cost = _read_cost(shape, box, grain, source_chunks, itemsize)[1]
    while True:
        best: tuple[float, tuple[int, ...]] | None = None
        for ax, (n, b, c, g) in enumerate(zip(shape, box, chunks, grain, strict=True)):
            for size in _candidates(n, b, c, g):
                trial = (*box[:ax], size, *box[ax + 1:])
                if not fits(trial):
                    continue
                c2 = _read_cost(shape, trial, grain, source_chunks, itemsize)[1]
                if c2 < cost * (1 - 1e-9) and (best is None or (c2, math.prod(trial)) <
                                                (best[0], math.prod(best[1]))):
                    best = (c2, trial)
        if best is None:
            return box
        cost, box = best


def _nchunks(shape: tuple[int, ...], chunks: tuple[int, ...]) -> int:
    return math.prod(-(-n // c) for n, c in zip(shape, chunks, strict=True))


def _make_pass(shape: tuple[int, ...], itemsize: int, source_chunks: tuple[int, ...],
               grain: tuple[int, ...], chunks: tuple[int, ...], max_mem: int, workers: int,
               unit_bytes: int, intermediate: bool = False) -> Pass | None:
    """The cheapest pass from ``source_chunks`` to ``chunks`` within ``max_mem`` (using
    as many compressing threads as fit, at most ``workers``); None if none fits.  The
    index of the array written counts, and the source's when it is an intermediate."""
    nchunks = _nchunks(shape, chunks) + (_nchunks(shape, source_chunks) if intermediate
                                         else 0)
    for threads in range(workers, 0, -1):
        found = []
        for buffers in (1, 2):
            def memory(box: tuple[int, ...], threads: int = threads,
                       buffers: int = buffers) -> int:
                return pass_memory(box, source_chunks, chunks, itemsize, workers, threads,
                                   unit_bytes, nchunks, buffers)
            box = _best_box(shape, chunks, grain, source_chunks, itemsize,
                            lambda b, memory=memory: memory(b) <= max_mem)
            if box is not None:
                decoded, cost = _read_cost(shape, box, grain, source_chunks, itemsize)
                found.append(Pass(source_chunks, grain, chunks, box, threads, buffers,
                                  memory(box), decoded,
                                  cost + _write_cost(shape, chunks, itemsize)))
        if found:
            # Reading ahead overlaps reading with compressing, unless its smaller boxes
            # decode more.
            return found[-1] if found[-1].cost <= found[0].cost else found[0]
    return None


def intermediate_chunks(shape: tuple[int, ...], source_chunks: tuple[int, ...],
                        target_chunks: tuple[int, ...], itemsize: int,
                        nbytes: int) -> tuple[int, ...]:
    """Chunks between ``source_chunks`` and ``target_chunks``: the smaller of the two
    along every axis, then doubled round-robin toward the target's on the axes where
    the source's are smaller, until a chunk holds about ``nbytes``.

    Never larger than the target's along an axis: the second pass then reads every
    intermediate chunk once with boxes of whole target chunks.
    """
    chunks = [min(s, t) for s, t in zip(source_chunks, target_chunks, strict=True)]
    tops = [min(t, n) for t, n in zip(target_chunks, shape, strict=True)]
    grown = True
    while grown and math.prod(chunks) * itemsize < nbytes:
        grown = False
        for ax in range(len(chunks) - 1, -1, -1):  # the first axis last: the rows
            if chunks[ax] < tops[ax] and math.prod(chunks) * itemsize < nbytes:
                chunks[ax] = min(2 * chunks[ax], tops[ax])
                grown = True
    return tuple(chunks)


def plan(shape: tuple[int, ...], itemsize: int, source_chunks: tuple[int, ...],
         target_chunks: tuple[int, ...], max_mem: int | str, *,
         grain: tuple[int, ...] | None = None, workers: int = 2,
         unit_bytes: int = 16 << 20, max_passes: int = 2, min_passes: int = 1) -> Plan:
    """The cheapest plan rechunking an array within ``max_mem`` bytes.

    Parameters
    ----------
    shape : tuple of int
        The array's shape (every size at least 1).
    itemsize : int
        Bytes per item.
    source_chunks, target_chunks : tuple of int
        The chunk shapes it has and should have.
    max_mem : int or str
        The budget (see :func:`parse_size`).
    grain : tuple of int, optional
        The smallest piece a read of the source decodes (its blocks; default its
        chunks).
    workers : int
        Threads that decode and compress.
    unit_bytes : int
        Compressed chunks held until their file is complete, at most.
    max_passes, min_passes : int
        Plans of this many passes are considered (1 or 2; ``min_passes=2`` takes
        one pass only when no intermediate differs from both chunk shapes).

    Returns
    -------
    Plan
        Its passes hold at most ``max_mem`` bytes each.

    Raises
    ------
    RechunkMemoryError
        No plan fits: ``max_mem`` does not hold one target chunk and one source chunk
        with the buffers of the threads that decode and compress them.
    """
    budget = parse_size(max_mem)
    shape = tuple(int(n) for n in shape)
    if not shape or min(shape) < 1:
        raise ValueError(f"shape {shape}: a plan needs at least one item on every axis")
    src, dst = _clip(tuple(source_chunks), shape), _clip(tuple(target_chunks), shape)
    grain = src if grain is None else _clip(tuple(grain), shape)
    workers = max(1, workers)
    options: list[tuple[Pass, ...]] = []
    one = _make_pass(shape, itemsize, src, grain, dst, budget, workers, unit_bytes)
    if one is not None:
        options.append((one,))
    if max_passes >= 2 and src != dst:
        tried = set()
        for size in _INTERMEDIATE_SIZES:
            mid = intermediate_chunks(shape, src, dst, itemsize, size)
            if mid in tried or mid in (src, dst):
                continue
            tried.add(mid)
            first = _make_pass(shape, itemsize, src, grain, mid, budget, workers, unit_bytes)
            second = _make_pass(shape, itemsize, mid, mid, dst, budget, workers, unit_bytes,
                                intermediate=True) if first is not None else None
            if second is not None:
                assert first is not None
                options.append((first, second))
    if not options:
        least = pass_memory(dst, src, dst, itemsize, workers, 1, unit_bytes,
                            _nchunks(shape, dst))
        raise RechunkMemoryError(
            f"max_mem={max_mem!r} ({budget} bytes) is too small to rechunk an array of "
            f"shape {shape} from chunks {src} to {dst}: one target chunk "
            f"({math.prod(dst) * itemsize} bytes) and one source chunk "
            f"({math.prod(src) * itemsize} bytes), with the buffers of the threads that "
            f"decode and compress them, need at least {least} bytes")
    if min_passes > 1 and any(len(o) > 1 for o in options):
        options = [o for o in options if len(o) >= min_passes]
    best = min(options, key=lambda passes: sum(p.cost for p in passes))
    return Plan(shape, itemsize, budget, best)
