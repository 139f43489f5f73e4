"""Reading ``.blp`` files: the validated layout in front of the chunks, the chunk spans,
and chunks fetched, checked and decoded on all cores with a bounded number in flight.

Split from :mod:`carray.formats.bloscpack` (the public functions) so each stays small;
see that module for the format notes and the limits applied to untrusted sizes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Generator, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import blosc as _blosc1
import numpy as np

from carray.codecs import blosc
from carray.codecs import parallel as _parallel
from carray.codecs.threads import get_nthreads
from carray.errors import ChecksumError, CodecError, CodecUnavailableError, FormatError
from carray.formats.bloscpack.frame import (
    HEADER_SIZE,
    METADATA_HEADER_SIZE,
    OFFSET_SIZE,
    BlpHeader,
    MetadataHeader,
    decode_metadata,
    decode_offsets,
)
from carray.stores import Location, resolve

#: Largest inflation a chunk may claim.  zstd's best case (run-length blocks) is
#: about 2**15; deflate's about 2**10; lz4 and blosclz about 2**8.
MAX_RATIO = 2**16
#: Bytes of a remote file fetched up front: header, metadata and offsets are usually in it.
_HEAD = 64 * 2**10

#: Largest read buffer a thread keeps between chunks.
_KEEP = 16 * 2**20

PathLike = Location
Progress = Callable[[int, int], None]

def nworkers(nitems: int) -> int:
    """Threads worth using for ``nitems`` chunks."""
    return max(1, min(get_nthreads(), nitems))


@contextmanager
def _blosc1_single_threaded(parallel: bool) -> Iterator[None]:
    """Blosc single-threaded per call while our threads work on separate chunks."""
    if not parallel:
        yield
        return
    _blosc1.set_nthreads(1)
    try:
        yield
    finally:
        _blosc1.set_nthreads(get_nthreads())


def in_parallel(fn: Callable[[Any], Any], items: Iterable, nitems: int
                ) -> Generator[Any, None, None]:
    """``map(fn, items)`` on a few threads, results in order.

    ``items`` is consumed lazily and at most two per thread are in flight, so a
    caller streaming a file through this never holds more than a few chunks.
    """
    n = nworkers(nitems)
    if n == 1:
        yield from map(fn, items)
        return
    # carray's worker threads, kept between calls: new threads would each take fresh
    # memory from the system (and its page faults) for the buffers of their chunks.
    with _blosc1_single_threaded(True):
        yield from _parallel.pipeline(fn, items, window=2 * n)


def flat_bytes(a: np.ndarray, order: str) -> np.ndarray:
    """The array's bytes in the given memory order, as a 1-d uint8 view (no copy)."""
    return a.reshape(-1, order="F" if order == "F" else "C").view(np.uint8)


# -- reading ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class ChunkSpan:
    """Where chunk ``index`` lies: its Blosc buffer at ``offset``, ``cbytes`` long."""

    index: int
    offset: int
    cbytes: int
    nbytes: int


@dataclass(frozen=True)
class Layout:
    """Everything in front of the chunks, validated."""

    header: BlpHeader
    metadata: Any
    meta_header: MetadataHeader | None
    offsets: list[int]
    offsets_offset: int
    data_start: int
    file_size: int


class BlpFile:
    """An open ``.blp`` file, local or remote: positioned reads that either return all
    bytes or raise.  :attr:`path` names the file in messages."""

    def __init__(self, path: PathLike, storage_options: dict[str, Any] | None = None) -> None:
        self.store, self.key = resolve(path, storage_options)
        self.path = self.store.url(self.key)
        self.handle = self.store.open(self.key)
        self.size = self.handle.size
        # Each remote read is a round trip: take the start of the file in one.
        self.head = self.handle.pread(_HEAD, 0) if self.store.remote else b""

    def __enter__(self) -> BlpFile:
        return self

    def __exit__(self, *exc) -> None:
        self.handle.close()

    def _read(self, n: int, offset: int) -> bytes:
        if offset + n <= len(self.head):
            return self.head[offset:offset + n]
        return self.handle.pread(n, offset)

    def pread(self, n: int, offset: int, what: str) -> bytes:
        if offset + n > self.size:
            raise FormatError(f"{what} needs bytes {offset}..{offset + n}, the file has "
                              f"{self.size}", self.path, offset)
        data = self._read(n, offset)
        if len(data) != n:  # the file shrank under us
            raise FormatError(f"{what} truncated", self.path, offset)
        return data

    def pread_into(self, view: memoryview, offset: int, what: str) -> None:
        got = self.handle.pread_into(view, offset)
        if got < len(view):
            raise FormatError(f"{what} truncated", self.path, offset + got)

    def chunk_headers(self, lay: Layout) -> dict[int, bytes]:
        """Remote files: the chunk headers the offsets table points at, fetched
        concurrently (walking the chunks would cost a round trip each)."""
        if not self.store.remote or not lay.offsets:
            return {}
        size = blosc.BLOSC1_HEADER
        wanted = [o for o in lay.offsets if len(self.head) < o + size <= self.size]
        got = self.store.get_ranges([(self.key, o, size) for o in wanted])
        return {o: raw for o, raw in zip(wanted, got, strict=True) if len(raw) == size}

    def layout(self, verify: bool = True) -> Layout:
        # A short file reaches unpack() whole so the error can say "not a Bloscpack file".
        header = BlpHeader.unpack(self._read(HEADER_SIZE, 0), self.path)
        pos = HEADER_SIZE
        metadata, meta_header = None, None
        if header.metadata:
            mh = MetadataHeader.unpack(self.pread(METADATA_HEADER_SIZE, pos, "metadata header"),
                                       self.path, pos)
            if pos + mh.section_size > self.size:  # before reading max_meta_size bytes
                raise FormatError(f"metadata section of {mh.section_size} bytes runs past the "
                                  f"end of the file ({self.size} bytes)", self.path, pos)
            metadata, meta_header = decode_metadata(
                self.pread(mh.section_size, pos, "metadata"), self.path, pos, verify)
            pos += mh.section_size
        offsets_offset = pos
        offsets: list[int] = []
        if header.offsets:
            slots = header.total_slots
            if slots > (self.size - pos) // OFFSET_SIZE:
                raise FormatError(f"offsets table of {slots} entries runs past the end of the "
                                  f"file ({self.size} bytes)", self.path, pos)
            offsets = decode_offsets(self.pread(slots * OFFSET_SIZE, pos, "offsets table"),
                                     header, self.path, pos, self.size)
            pos += slots * OFFSET_SIZE
        return Layout(header, metadata, meta_header, offsets, offsets_offset, pos, self.size)

    def spans(self, lay: Layout) -> list[ChunkSpan]:
        """Walk the chunk headers and check them all before any data is decoded."""
        h, path = lay.header, self.path
        dsize = h.checksum_impl.size
        # Each chunk takes at least a Blosc header: bounds nchunks before the loop.
        if h.nchunks > (self.size - lay.data_start) // (blosc.BLOSC1_HEADER + dsize):
            raise FormatError(f"{h.nchunks} chunks cannot fit in the "
                              f"{self.size - lay.data_start} bytes after the header",
                              path, lay.data_start)
        spans, pos, i = [], lay.data_start, 0
        fetched = self.chunk_headers(lay)
        while i < h.nchunks if h.nchunks >= 0 else pos < self.size:
            if lay.offsets and lay.offsets[i] != pos:
                raise FormatError(f"offsets table says chunk {i} starts at {lay.offsets[i]}, "
                                  f"but the previous chunk ends at {pos}", path, pos)
            raw = fetched.get(pos) or self.pread(blosc.BLOSC1_HEADER, pos, f"chunk {i} header")
            ch = blosc.read_header(raw, path, pos, size=self.size - pos)
            if pos + ch.cbytes + dsize > self.size:
                raise FormatError(f"chunk {i} checksum runs past the end of the file", path,
                                  pos + ch.cbytes)
            last = h.nchunks >= 0 and i == h.nchunks - 1
            expected = h.last_chunk if last else h.chunk_size
            if expected >= 0 and ch.nbytes != expected:
                raise FormatError(f"chunk {i} holds {ch.nbytes} bytes, the header says "
                                  f"{expected}", path, pos)
            if ch.nbytes > ch.cbytes * MAX_RATIO:
                raise FormatError(f"chunk {i} claims {ch.nbytes} bytes from {ch.cbytes} "
                                  "compressed, beyond any Blosc codec", path, pos)
            spans.append(ChunkSpan(i, pos, ch.cbytes, ch.nbytes))
            pos += ch.cbytes + dsize
            i += 1
        # Bytes after the last chunk are tolerated: bloscpack's append leaves them.
        return spans

    def fetch_decode(self, lay: Layout, s: ChunkSpan, out: np.ndarray, verify: bool) -> None:
        """Read chunk ``s``, check its digest (``verify``) and decode it into ``out``
        (``s.nbytes`` contiguous bytes), on this thread's buffer and Blosc context."""
        impl = lay.header.checksum_impl
        dsize = impl.size if verify else 0
        size = s.cbytes + dsize
        # A thread's buffer is kept for the next chunk, unless the chunk is huge.
        buf = _parallel.scratch(size, "blp") if size <= _KEEP else np.empty(size, np.uint8)
        view = buf.data[:size]
        self.pread_into(view, s.offset, f"chunk {s.index}")
        chunk = view[:s.cbytes]
        if dsize and impl.digest(chunk) != view[s.cbytes:]:
            raise ChecksumError(f"chunk {s.index}: {impl.name} checksum mismatch",
                                self.path, s.offset)
        self.decode(chunk, out, s, _parallel.decoder())

    def read_into(self, lay: Layout, spans: list[ChunkSpan], out: np.ndarray,
                  verify: bool = True, progress: Progress | None = None) -> None:
        """Decode every chunk straight into the flat uint8 array ``out``, checking digests.

        Worker threads take a chunk each and decode it with a single-threaded Blosc:
        for chunks of about 1 MiB this keeps every core busy, where Blosc's own
        threads would wait on each other at every chunk.
        """
        starts = np.cumsum([0] + [s.nbytes for s in spans])
        if progress is None:
            self._read_shared(lay, spans, out, starts, verify)
            return
        progress(0, int(starts[-1]))

        def run(i: int) -> int:
            self.fetch_decode(lay, spans[i], out[starts[i]:starts[i + 1]], verify)
            return int(starts[i + 1])

        for done in in_parallel(run, range(len(spans)), len(spans)):
            progress(done, int(starts[-1]))

    def _read_shared(self, lay: Layout, spans: list[ChunkSpan], out: np.ndarray,
                     starts: np.ndarray, verify: bool) -> None:
        """:meth:`read_into` without progress: every thread, the caller's too, takes the
        next chunk as soon as it is done with one, so nobody waits for a hand-over (nor
        for a thread the machine's other work delays); the first error stops them all."""
        pending = iter(range(len(spans)))
        lock = threading.Lock()
        failed = False

        def drain() -> None:
            nonlocal failed
            while not failed:
                with lock:
                    i = next(pending, None)
                if i is None:
                    return
                try:
                    self.fetch_decode(lay, spans[i], out[starts[i]:starts[i + 1]], verify)
                except BaseException:
                    failed = True
                    raise

        _parallel.run([drain] * nworkers(len(spans)))

    def decoded(self, lay: Layout, spans: list[ChunkSpan], verify: bool = True
                ) -> Generator[np.ndarray, None, None]:
        """Each chunk decoded into a buffer of its own, in order, a few in flight."""
        def run(s: ChunkSpan) -> np.ndarray:
            out = np.empty(s.nbytes, np.uint8)
            self.fetch_decode(lay, s, out, verify)
            return out

        return in_parallel(run, spans, len(spans))

    def decode(self, chunk, out: np.ndarray, s: ChunkSpan,
               decoder: blosc.Decoder | None = None) -> None:
        try:
            blosc.validate_chunk(chunk, s.nbytes, self.path, s.offset)
            if decoder is not None:
                decoder.decompress_into(chunk, out, self.path)
            else:
                blosc.decompress_into(chunk, out, self.path)
        except CodecUnavailableError:
            raise
        except CodecError as exc:  # corrupt bytes behind a plausible header
            raise FormatError(f"chunk {s.index} does not decode: {exc}", self.path,
                              s.offset) from None


