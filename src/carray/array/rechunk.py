"""Rechunking an array out of core, within a memory budget.

:func:`rechunk` runs the passes a :func:`carray.array.rechunk_plan.plan` lays out.  Each
pass reads a box of its source at a time (a carray's reads decode only the Blosc
blocks the box touches), compresses the box's chunks on the worker threads while
this thread writes the finished ones, and moves on; every pass but the last
writes an intermediate carray (on disk beside the target, or in the system's
temporary directory for a result in memory) that the next pass reads and that is
removed once it has.

On disk the result is built under a temporary name beside ``rootdir`` and renamed
into place at the end: whatever fails, neither it nor an intermediate is left
behind.  In a layout of files written whole (superchunk, bcolz) chunks go
straight into their files and the shape is recorded once every file is written;
elsewhere (memory, ``.b2nd``) through the array's own writes.
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import os
import tempfile
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from itertools import product
from typing import Any

import numpy as np

from carray.array.container import close_or_discard, refuse_own_source
from carray.array.rechunk_plan import Pass, Plan, parse_size, plan
from carray.chunks import geometry as geo
from carray.chunks.keys import OrthoKey
from carray.codecs import parallel as _parallel
from carray.compute import array_type
from carray.core.params import CParams
from carray.engine.units import UnitWriter
from carray.errors import ContainerExistsError, UnsupportedDTypeError, UnsupportedOptionError
from carray.layouts import default_format
from carray.layouts.superchunk.layout import default_superchunksize
from carray.stores import LOCAL, Store, resolve
from carray.stores.staging import remove_quietly, staged
from carray.stores.tempnames import temporary_name

Progress = Callable[[int, int], None]
#: How intermediate arrays are compressed: fast, as they are read back once; not at
#: all when the source compresses less than :data:`_WORTH_COMPRESSING` times.
_INTERMEDIATE_CPARAMS = CParams(cname="lz4", clevel=1)
_WORTH_COMPRESSING = 2.0


def _intermediate_cparams(source: Any) -> CParams:
    """How to compress the intermediates of ``source``: storing what barely
    compresses costs less than compressing and decoding it twice."""
    ratio = getattr(source, "cratio", None)
    if isinstance(ratio, float) and ratio < _WORTH_COMPRESSING:
        return _INTERMEDIATE_CPARAMS.replace(clevel=0)
    return _INTERMEDIATE_CPARAMS


def _libc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or None elsewhere."""
    try:
        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None


_TRIM = _libc_trim()
#: Chunks at least this large are put in stored order by several threads.
_SPLIT_BYTES = 4 << 20
#: Boxes at least this large hand freed memory back after they are written.
_GIVE_BACK_BYTES = 1 << 20


def give_back() -> None:
    """Hand memory freed since the last box back to the system: glibc keeps freed
    blocks of a few MB in each thread's heap, which would count against ``max_mem``
    (the compressed bytes of a chunk are freed on the thread that wrote them)."""
    if _TRIM is not None:
        _TRIM(0)


def _is_carray(value: Any) -> bool:
    return isinstance(value, array_type())


def _normalise(chunks: Any, shape: tuple[int, ...], name: str) -> tuple[int, ...]:
    """``chunks`` as one positive size per axis (-1 or None: the whole axis)."""
    if isinstance(chunks, int):
        chunks = (chunks,)
    sizes = tuple(chunks)
    if len(sizes) != len(shape):
        raise UnsupportedOptionError(f"{name} {sizes} is for a {len(sizes)}-d array, but the "
                                     f"array is {len(shape)}-d (shape {shape})")
    out = []
    for size, n in zip(sizes, shape, strict=True):
        if size is None or size == -1:
            size = max(n, 1)
        if not isinstance(size, (int, np.integer)) or isinstance(size, bool) or size < 1:
            raise UnsupportedOptionError(f"{name} {sizes}: every size must be a positive int "
                                         "(or -1 for the whole axis)")
        out.append(int(size))
    return tuple(out)


def source_grain(source: Any) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """``(chunks, grain)`` of an array to read: its chunk shape, and the smallest piece
    a read of it decodes (a carray's blocks where its chunks are stored block by
    block; one item for arrays without chunks, such as numpy's)."""
    shape = tuple(source.shape)
    chunks = getattr(source, "chunks", None)
    if not isinstance(chunks, tuple) or len(chunks) != len(shape):
        ones = (1,) * len(shape)
        return ones, ones
    chunks = tuple(max(1, int(c)) for c in chunks)
    blocks = getattr(source, "blocks", None)
    if _is_carray(source) and source.order == "C" and isinstance(blocks, tuple):
        return chunks, tuple(int(b) for b in blocks)
    return chunks, chunks


def boxes(shape: tuple[int, ...], box: tuple[int, ...]) -> Iterator[tuple[slice, ...]]:
    """The boxes of shape ``box`` tiling ``shape``, in C order (the last ones cut short)."""
    for corner in product(*(range(0, n, b) for n, b in zip(shape, box, strict=True))):
        yield tuple(slice(c, min(c + b, n)) for c, b, n in zip(corner, box, shape, strict=True))


def _read_box(source: Any, where: tuple[slice, ...], out: np.ndarray) -> None:
    """``source[where]`` into ``out``: a C-order carray's engine decodes straight into
    it (only the blocks the box touches); anything else is sliced."""
    if _is_carray(source) and source.order == "C" and source.dtype == out.dtype:
        axes = tuple(range(s.start, s.stop) for s in where)
        okey = OrthoKey(tuple(source.shape), axes, (), (), tuple(len(a) for a in axes))
        source.engine.read(okey, out)
    else:
        out[...] = np.asarray(source[where], dtype=out.dtype)


def unit_size(grid_shape: tuple[int, ...], chunks: tuple[int, ...],
              box: tuple[int, ...], limit: int) -> int:
    """Chunks per file such that every box of ``box`` items (``chunks`` along every
    axis, or the whole axis) writes whole files, numbering chunks in C order over
    ``grid_shape``: the largest divisor of the boxes' runs of consecutive chunks up
    to ``limit``."""
    counts = [-(-b // c) for b, c in zip(box, chunks, strict=True)]
    strides = [math.prod(grid_shape[a + 1:]) for a in range(len(grid_shape))]
    m = len(counts) - 1
    while m > 0 and counts[m] >= grid_shape[m]:
        m -= 1
    if m == 0:
        run = counts[0] * strides[0]
    else:
        run = strides[m] * math.gcd(counts[m], grid_shape[m])
    best = 1
    for d in range(1, min(run, limit) + 1):
        if run % d == 0:
            best = d
    return best


class _Units:
    """Compressed chunks of an array written file by file (see
    :class:`carray.engine.units.UnitWriter`), each file once all its chunks are in, on
    the background file thread while the caller goes on; one file is written at a
    time, so at most one waits."""

    def __init__(self, out: Any, shape: tuple[int, ...]) -> None:
        self.writer = out.engine.unit_writer(shape)
        self.size = self.writer.unit_chunks
        self.nchunks = self.writer.grid.nchunks
        self.held: dict[int, dict[int, tuple[bytes, bytes | None]]] = {}
        self.cbytes = 0
        self._writing: Future[int] | None = None

    def add(self, nchunk: int, data: bytes, digest: bytes | None) -> None:
        unit = nchunk // self.size
        chunks = self.held.setdefault(unit, {})
        chunks[nchunk] = (data, digest)
        if len(chunks) == min(self.size, self.nchunks - unit * self.size):
            del self.held[unit]
            self.wait()
            order = sorted(chunks)
            self._writing = _parallel.submit(
                _parallel.background("files"), self.writer.write_encoded, unit,
                [chunks[n][0] for n in order], [chunks[n][1] for n in order])

    def wait(self) -> None:
        """Wait for the file being written (its error is raised here)."""
        writing, self._writing = self._writing, None
        if writing is not None:
            self.cbytes += writing.result()


def _stored(writer: UnitWriter, region: np.ndarray, split: int) -> np.ndarray:
    """A chunk in stored order from its items ``region`` (a view of the box), put in
    this thread's scratch buffer for whole chunks (no new memory per chunk), copied
    by ``split`` threads at once."""
    ext = writer.grid.ext_chunks
    if region.shape != ext:
        return writer.stored(region)  # edge chunks: padded or cut as the writer does
    blocks = writer.stored_blocks
    if blocks == ext and region.flags.c_contiguous:
        return region.reshape(-1)
    buf = _parallel.scratch(region.nbytes, "rechunk.stored")[:region.nbytes]
    items = buf.view(region.dtype)
    source = region.reshape(geo.split_shape(ext, blocks)).transpose(
        geo.deinterleave(len(ext)))
    target = items.reshape(tuple(e // b for e, b in zip(ext, blocks, strict=True)) + blocks)
    rows = target.shape[0]
    if region.nbytes < _SPLIT_BYTES:
        split = 1
    step = -(-rows // max(1, min(split, rows)))
    _parallel.run([partial(np.copyto, target[k:k + step], source[k:k + step])
                   for k in range(0, rows, step)])
    return items


def _write_box(units: _Units, view: np.ndarray, where: tuple[slice, ...],
               pool: ThreadPoolExecutor, threads: int) -> None:
    """Compress the chunks of box ``view`` (at ``where``) on the ``threads`` threads of
    ``pool``, all at once, and hand them to ``units`` in order."""
    writer = units.writer
    grid = writer.grid
    chunks = grid.chunks
    first = [s.start // c for s, c in zip(where, chunks, strict=True)]
    counts = [-(-(s.stop - s.start) // c) for s, c in zip(where, chunks, strict=True)]

    # Fewer chunks in flight than cores (they are large): each uses several cores.
    share = max(1, _parallel.workers() // threads)

    def encode(nchunk: int, region: np.ndarray) -> tuple[int, bytes, bytes | None]:
        data = writer.encode(_stored(writer, region, share))
        return nchunk, data, writer.digest(data)

    pending: deque[Future[tuple[int, bytes, bytes | None]]] = deque()
    try:
        for local in product(*(range(n) for n in counts)):
            coords = tuple(f + k for f, k in zip(first, local, strict=True))
            region = view[tuple(slice(k * c, (k + 1) * c) for k, c in zip(local, chunks,
                                                                           strict=True))]
            pending.append(_parallel.submit(pool, encode, grid.chunk_index(coords), region))
            if len(pending) >= threads:
                units.add(*pending.popleft().result())
        while pending:
            units.add(*pending.popleft().result())
    finally:
        for f in pending:  # the box's buffer is read again once this returns
            f.cancel()
        for f in pending:
            if not f.cancelled():
                f.exception()


def _new_array(shape: tuple[int, ...], dtype: np.dtype, rootdir: str | None,
               kwargs: dict[str, Any]) -> Any:
    return array_type()(np.empty((0, *shape[1:]), dtype=dtype), rootdir=rootdir,
                        **{"expectedlen": max(shape[0], 1), **kwargs})


def _streams(out: Any) -> bool:
    """Whether ``out`` (new, empty) takes its chunks file by file."""
    engine = out.engine
    return out.rootdir is not None and not engine.remote and engine.unit_chunks > 0 and \
        out.order == "C"


def _filled(source: Any, shape: tuple[int, ...], step: Pass, dtype: np.dtype,
            reader: ThreadPoolExecutor | None
            ) -> Iterator[tuple[tuple[slice, ...], np.ndarray]]:
    """``(where, values)`` for every box of ``step`` read from ``source``; with a
    ``reader`` thread (two buffers) the next box is read there while the caller works
    on this one."""
    bufs = [np.empty(math.prod(step.box), dtype=dtype) for _ in range(2 if reader else 1)]

    def view(k: int, where: tuple[slice, ...]) -> np.ndarray:
        sizes = [s.stop - s.start for s in where]
        return bufs[k % len(bufs)][:math.prod(sizes)].reshape(sizes)

    todo = list(boxes(shape, step.box))
    if reader is None:
        for where in todo:
            values = view(0, where)
            _read_box(source, where, values)
            yield where, values
        return
    ahead = reader.submit(_read_box, source, todo[0], view(0, todo[0]))
    try:
        for k, where in enumerate(todo):
            ahead.result()
            if k + 1 < len(todo):
                ahead = reader.submit(_read_box, source, todo[k + 1], view(k + 1, todo[k + 1]))
            yield where, view(k, where)
    finally:
        ahead.cancel()
        if not ahead.cancelled():
            ahead.exception()  # never left writing into a buffer once this returns


def run_pass(step: Pass, source: Any, out: Any, report: Callable[[int], None]) -> Any:
    """Fill ``out`` (new, empty) from ``source`` box by box as ``step`` says; returns it
    (reopened when its files were written whole)."""
    shape = tuple(source.shape)
    reader = ThreadPoolExecutor(1, thread_name_prefix="carray-rechunk-read") \
        if step.buffers > 1 else None
    try:
        if not _streams(out):
            out.resize(shape[0])
            for where, values in _filled(source, shape, step, out.dtype, reader):
                out[where] = values
                report(values.nbytes)
            out.flush()
            return out
        return _write_units(step, source, out, reader, report)
    finally:
        if reader is not None:
            reader.shutdown(wait=True, cancel_futures=True)


def _write_units(step: Pass, source: Any, out: Any, reader: ThreadPoolExecutor | None,
                 report: Callable[[int], None]) -> Any:
    """:func:`run_pass` into a layout of files written whole."""
    shape = tuple(source.shape)
    reopen = {**out.reopen_args(), "mode": "a"}
    engine = out.engine
    units: _Units | None = None
    # Threads of this pass only: their buffers (a chunk in stored order, its compressed
    # bytes) go with them when it ends.
    pool = ThreadPoolExecutor(step.threads, thread_name_prefix="carray-rechunk")
    try:
        units = _Units(out, shape)
        for where, values in _filled(source, shape, step, out.dtype, reader):
            _write_box(units, values, where, pool, step.threads)
            if values.nbytes >= _GIVE_BACK_BYTES:
                give_back()
            report(values.nbytes)
        units.wait()
        assert not units.held, "chunks left without their file"
        engine.adopt(shape, units.cbytes)
    except BaseException:
        if units is not None:
            with contextlib.suppress(BaseException):
                units.wait()  # nothing may write into the files once they are removed
        with contextlib.suppress(Exception):
            engine.release()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return array_type()(**reopen)


def _middles(store: Store, path: str | None, count: int) -> tuple[list[str], str | None]:
    """Where the intermediates go: under temporary names beside ``path`` (see
    :mod:`carray.stores.tempnames`), or, for a result in memory or on an object store, in a
    new temporary directory (returned too, to remove at the end)."""
    if path is None or store.remote:
        work = tempfile.mkdtemp(prefix="carray-rechunk-")
        return [os.path.join(work, f"pass-{k}") for k in range(count)], work
    return [temporary_name(path) for _ in range(count)], None


def _remove(store: Store, path: str | None) -> None:
    if path is not None:
        remove_quietly(store, path)


def _target_kwargs(source: Any, chunks: tuple[int, ...], blocks: Any,
                   kwargs: dict[str, Any], last: Pass, shape: tuple[int, ...]
                   ) -> dict[str, Any]:
    """The keywords of the new array: ``kwargs`` over the source's compression, with a
    file size (superchunk layout) that lets each box write whole files."""
    args: dict[str, Any] = {"chunks": chunks, "blocks": blocks}
    cparams = getattr(source, "cparams", None)
    if isinstance(cparams, CParams):
        args["cparams"] = cparams
    dflt = getattr(source, "dflt", None)
    if _is_carray(source):
        args["dflt"] = dflt
    args.update(kwargs)
    storage = dict(args.get("storage") or {})
    if "superchunksize" not in storage and args.get("format") in (None, "superchunk"):
        grid = tuple(-(-n // c) for n, c in zip(shape, last.chunks, strict=True))
        nbytes = math.prod(last.chunks) * np.dtype(source.dtype).itemsize
        storage["superchunksize"] = unit_size(grid, last.chunks, last.box,
                                              default_superchunksize(nbytes))
        args["storage"] = storage
    return args


def _target(source: Any, rootdir: str | None, storage_options: dict | None,
            in_place: bool) -> tuple[Store, str | None]:
    """Where the result goes (store and path; None in memory), once it may go there."""
    refuse_own_source(rootdir, [source])
    if rootdir is None:
        return LOCAL, None
    store, path = resolve(rootdir, storage_options)
    if not in_place:
        store.invalidate(path)
        if store.exists(path):
            raise ContainerExistsError(f"{store.url(path)}: already exists")
    return store, path


def rechunk(source: Any, chunks: Any, blocks: Any = None, rootdir: Any = None,
            max_mem: int | str = "256MiB", *, progress: Progress | None = None,
            in_place: bool = False, **kwargs: Any) -> Any:
    """A new carray holding ``source`` with chunks ``chunks``, built within ``max_mem``.

    Parameters
    ----------
    source : carray or array_like
        What to rechunk: anything with ``shape``, ``dtype`` and box slicing (a
        carray, a numpy or Zarr array).
    chunks : tuple of int
        The new chunk shape, one size per axis (-1: the whole axis).
    blocks : tuple of int, optional
        The new block shape (default: chosen for the chunks).
    rootdir : str or path, optional
        Where to store the result; None keeps it in memory.  It must not exist.
    max_mem : int or str
        Bytes the rechunk may hold at once (``"256MiB"``, ``"1GB"``, an int).
    progress : callable, optional
        Called as ``progress(bytes_done, bytes_total)`` after every box; the total is
        the array's bytes, each pass moving an equal share of them.
    in_place : bool
        Build at ``rootdir`` itself, for callers that build under a temporary name of
        their own (:func:`carray.integrations.convert.convert_array`).
    **kwargs
        As for :class:`carray` (``cparams``, ``format``, ``storage``, ``fsync``...).

    Raises
    ------
    RechunkMemoryError
        ``max_mem`` cannot hold one target chunk and one source chunk with the
        buffers of the threads that decode and compress them.
    ContainerExistsError
        ``rootdir`` exists.
    """
    shape = tuple(int(n) for n in source.shape)
    if not shape:
        raise ValueError("a 0-d array has no chunks to change")
    chunks = _normalise(chunks, shape, "chunks")
    if blocks is not None:
        blocks = _normalise(blocks, shape, "blocks")
    dtype = np.dtype(source.dtype)
    if dtype.hasobject:
        raise UnsupportedDTypeError(f"{dtype}: object items have no chunks to change; "
                                    "copy the array with other chunks instead")
    rootdir = None if rootdir is None else os.fspath(rootdir)
    budget = parse_size(max_mem)
    store, path = _target(source, rootdir, kwargs.get("storage_options"), in_place)
    if 0 in shape:
        return _new_array(shape, dtype, rootdir, {"chunks": chunks, "blocks": blocks,
                                                  **kwargs, "mode": "w"})
    src_chunks, grain = source_grain(source)
    layout = plan(shape, dtype.itemsize, src_chunks, chunks, budget, grain=grain,
                  workers=_parallel.workers())
    middles, work = _middles(store, path, len(layout.passes) - 1)
    if rootdir is not None and kwargs.get("format") is None:  # the temporary name has
        kwargs = {**kwargs, "format": default_format(rootdir)}  # no telling extension
    args = _target_kwargs(source, chunks, blocks, kwargs, layout.passes[-1], shape)
    try:
        if path is None or in_place:
            return _run(layout, source, rootdir, middles, args, progress)
        with staged(store, path, fsync=kwargs.get("fsync", True)) as staging:
            close_or_discard(_run(layout, source, staging.location, middles, args, progress))
        return array_type()(rootdir=rootdir, mode="a", **{
            k: v for k, v in kwargs.items() if k in ("fsync", "storage_options")})
    finally:
        for middle in middles:
            _remove(LOCAL, middle)
        if work is not None:
            with contextlib.suppress(OSError):
                os.rmdir(work)


def _run(layout: Plan, source: Any, target: str | None, middles: list[str],
         args: dict[str, Any], progress: Progress | None) -> Any:
    """Run every pass of ``layout``: intermediates at ``middles``, the result at
    ``target`` (None: in memory) made with ``args``."""
    shape, nbytes = layout.shape, math.prod(layout.shape) * layout.itemsize
    npasses, done = len(layout.passes), 0

    def report(n: int) -> None:
        nonlocal done
        done += n
        if progress is not None:  # the array's bytes, every pass a share of them
            progress(done // npasses, nbytes)

    current, previous = source, None
    dtype = np.dtype(source.dtype)
    for k, step in enumerate(layout.passes):
        last = k == len(layout.passes) - 1
        if last:
            out = _new_array(shape, dtype, target, {**args, "mode": "w"})
        else:
            out = _new_array(shape, dtype, middles[k], {
                "chunks": step.chunks, "blocks": step.chunks, "mode": "w", "fsync": False,
                "cparams": _intermediate_cparams(source), "storage": {"superchunksize": unit_size(
                    tuple(-(-n // c) for n, c in zip(shape, step.chunks, strict=True)),
                    step.chunks, step.box, default_superchunksize(
                        math.prod(step.chunks) * dtype.itemsize))}})
        try:
            out = run_pass(step, current, out, report)
        finally:
            if previous is not None:
                previous.close()
                _remove(LOCAL, previous.rootdir)
        current, previous = out, (None if last else out)
    _copy_attrs(source, current)
    return current


def _copy_attrs(source: Any, out: Any) -> None:
    attrs = getattr(source, "attrs", None)
    if attrs is None or not _is_carray(source):
        return
    values = dict(attrs.items())
    if values:
        out.attrs.update(values)
        out.flush()
