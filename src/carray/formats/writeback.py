"""Starting the disk write of a file's first parts while its later parts are still coming.

A file written with ``fsync=True`` waits at the end for every byte of it to reach the
disk.  Left to the kernel, the write-back starts only then (or when the page cache
holds too much dirty data), so the final ``fsync`` pays for the whole file at the
disk's speed after the compression is done.  :class:`WriteBack` asks the kernel to
start writing each run of :data:`STEP` bytes as soon as it is written (Linux
``sync_file_range`` with ``SYNC_FILE_RANGE_WRITE``, elsewhere ``fdatasync``), on a
background thread so the writer never waits for it: the disk then works while later
chunks compress, and the ``fsync`` at the end finds only the last run left.

This is an optimisation only: it promises nothing about durability, which still comes
from the caller's ``fsync`` (the ranges started here say nothing about the disk's cache
or the file's metadata).  A failure of the early write-back is reported by that fsync,
as the kernel keeps the error for it; the background call's own error is re-raised by
:meth:`WriteBack.finish`.
"""

from __future__ import annotations

import errno
from concurrent.futures import Future

from carray.codecs.parallel import background, submit
from carray.stores.files import start_writeback as start_write

#: Bytes written between two requests to start the write-back.
STEP = 4 << 20

#: What a file system that cannot start a range's write-back says: the file is then
#: written without it (the final fsync does all the work, as it would anyway).
_UNSUPPORTED = frozenset({errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ESPIPE})


class WriteBack:
    """Start the write-back of the file open at ``fd`` a run of :data:`STEP` bytes at a
    time as the caller writes it in order (:meth:`wrote`), on the ``writeback``
    background thread; at most one request is in flight."""

    __slots__ = ("fd", "started", "pending", "off")

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.started = 0  # bytes the requests cover so far
        self.pending: Future[None] | None = None
        self.off = False  # the file system cannot do it

    def wrote(self, end: int) -> None:
        """The file is written up to ``end``: start what is new, if enough is and the
        previous request is done."""
        if end - self.started < STEP or self.off or (
                self.pending is not None and not self.pending.done()):
            return
        self._collect()
        if self.off:
            return
        start, self.started = self.started, end
        self.pending = submit(background("writeback"), start_write, self.fd, start,
                              end - start)

    def _collect(self) -> None:
        """Wait for the request in flight; raise its error (but turn the write-back off
        where the file system does not support it)."""
        pending, self.pending = self.pending, None
        if pending is None:
            return
        try:
            pending.result()
        except OSError as exc:
            if exc.errno not in _UNSUPPORTED:
                raise
            self.off = True

    def finish(self) -> None:
        """Wait for the request in flight (before the descriptor closes); raise its error."""
        self._collect()

    def abandon(self) -> None:
        """Wait for the request in flight, ignoring its error (the write failed anyway)."""
        pending, self.pending = self.pending, None
        if pending is not None:
            pending.exception()
