"""Every exception carray raises, in one place.

Each class also subclasses the builtin it resembles, so callers that catch
``ValueError`` or ``OSError`` keep working.  Messages name the file (or key),
the offset where that makes sense, and what was expected.
"""

from __future__ import annotations

import os
from typing import Any


class CArrayError(Exception):
    """Base class of all carray errors."""


class FormatError(CArrayError, ValueError):
    """Bytes or metadata on disk do not follow the format they claim."""

    def __init__(self, message: str, path: str | os.PathLike | None = None,
                 offset: int | None = None) -> None:
        self.path = os.fspath(path) if path is not None else None
        self.offset = offset
        where = ""
        if self.path is not None:
            where = f"{self.path}"
            if offset is not None:
                where += f" at offset {offset}"
            where += ": "
        super().__init__(where + message)


class ChecksumError(FormatError):
    """A stored checksum does not match the bytes it guards."""


class CodecError(CArrayError, ValueError):
    """A codec cannot encode or decode the given buffer."""


class CodecUnavailableError(CodecError):
    """The buffer uses a codec this build cannot decode (e.g. Snappy)."""


class IndexingError(CArrayError, IndexError):
    """A key does not fit the array it indexes: an index out of bounds, too many indices
    (``a[:]`` on a 0-d array), a mask of the wrong length, an index of the wrong kind.

    An ``IndexError``, with numpy's wording, where numpy raises one for the same key.
    """


class ExpressionError(CArrayError, ValueError):
    """A query expression cannot be parsed, or names something unknown."""


class UnknownNameError(ExpressionError, NameError):
    """An expression names a variable that is neither a column nor in scope."""


class BroadcastError(CArrayError, ValueError):
    """Operands of an expression have shapes that do not broadcast together."""


class UnsupportedOptionError(CArrayError, ValueError):
    """An option the destination cannot take: a chunk or block shape that does not fit
    the array or the format, or compression for a format that stores none."""


class RechunkMemoryError(CArrayError, ValueError):
    """A rechunk's memory budget cannot hold even one target chunk and one source chunk
    with the buffers of the threads that decode and compress them."""


class ReadOnlyError(CArrayError, PermissionError):
    """A write was attempted on something opened read-only."""


class AlignmentError(CArrayError, ValueError):
    """Parallel writers' blocks do not cover whole chunks, or whole files of chunks."""


class ContainerNotFoundError(CArrayError, FileNotFoundError):
    """No dataset exists at the given path."""


class ContainerExistsError(CArrayError, FileExistsError):
    """A dataset already exists where a new one was to be created."""


class UnsafeDataError(CArrayError, ValueError, TypeError):
    """Metadata asks for items numpy would build from file bytes as Python objects.

    Object dtypes (bcolz pickles included), fields or sub-arrays holding objects
    and variable-size kinds such as numpy's StringDType are refused unless the
    caller opts in where the format allows it (``allow_pickle=True`` for bcolz).
    A ``ValueError`` like every other bad-file error; still a ``TypeError`` for
    callers written against earlier releases.
    """


class UnsupportedDTypeError(CArrayError, TypeError):
    """The dtype cannot be stored in the requested format."""


class ValueConversionError(CArrayError, ValueError, TypeError):
    """A value written to an array cannot be converted to its item type (a dict to an
    integer column, ``"abc"`` to a float): a ``ValueError`` and a ``TypeError``, as
    numpy raises either."""


class StorageError(CArrayError, OSError):
    """Reading or writing storage failed: disk full, I/O error, a store that refused.

    An ``OSError`` with the ``errno`` of the failure kept and ``filename`` naming the
    file or key, so ``except OSError`` and ``exc.errno == errno.ENOSPC`` keep working.
    Missing files stay ``FileNotFoundError``.
    """

    @classmethod
    def wrap(cls, exc: OSError, path: str | os.PathLike | None = None) -> StorageError:
        """``exc`` as a StorageError naming ``path`` (or the file ``exc`` names)."""
        where = os.fspath(path) if path is not None else exc.filename
        out = cls(exc.errno, exc.strerror or str(exc), where)
        out.__cause__ = exc
        return out


class UnstorableAttributeError(CArrayError, TypeError):
    """An attribute name or value that carray cannot store exactly, refused when set.

    The message names the attribute and the type refused (an arbitrary object, an
    object array, a dict with keys that are not strings, ...).
    """


class LockError(CArrayError, BlockingIOError):
    """A dataset is already open for writing (by this or another process)."""


class ModeError(CArrayError, ValueError):
    """A mode that does not fit what is opened: an earlier version (``version=``, ``tag=``,
    ``as_of=``) asked for with a writable mode; the message says which mode to use."""


class TimeValueError(CArrayError, ValueError, TypeError):
    """A time (``as_of=``) that is not one: an unparsable string, NaT, or a type that is
    not a time."""


class VersionError(CArrayError, LookupError):
    """A version or tag asked for does not exist, or is no longer kept."""


class VersionsUnsupportedError(CArrayError, NotImplementedError):
    """The dataset's format keeps no versions (bcolz directories, Blosc2 frames)."""


class HandleClosedError(CArrayError, ValueError):
    """A handle was used after a later ``mode='w'`` open of its dataset, in the same
    process, took the dataset over and closed it.

    A ``ValueError``, as numpy and :mod:`io` raise for operations on closed files.
    """


class IndexUnsupportedError(CArrayError, ValueError):
    """A table index cannot be made for this table or column (its kind, dtype or the
    table's format), or a column has no index to drop."""


class GroupByError(CArrayError, ValueError):
    """A group-by, sort or count asked for something the table cannot give: an unknown
    column or aggregation, or an aggregation the column's type has none of."""


class AllNaNError(CArrayError, ValueError):
    """Every item of a slice is NaN where a position was asked for (``nanargmin``)."""


class ShapeError(CArrayError, ValueError):
    """A shape, chunk shape or size that carray cannot hold: a length past what 64-bit
    sizes count, more chunks than a layout can record, or arrays of a group that
    disagree on a dimension's length."""


class LibraryFallbackWarning(RuntimeWarning):
    """libblosc2 is used through python-blosc2's public API, not directly."""


class ConflictError(CArrayError, RuntimeError):
    """Another writer committed changes that overlap this writer's (the same chunks of
    an array, a table's columns reshaped, the same node of a group): this writer's
    changes are still pending, so it can retry after a ``refresh`` of its view, or
    discard them.

    Attributes
    ----------
    conflicts : list of str
        What overlaps, one item per array: its name and the chunks both changed.
    """

    def __init__(self, message: str, conflicts: list[str] | None = None) -> None:
        super().__init__(message)
        self.conflicts = list(conflicts or ())


class NewerVersionError(ConflictError):
    """Another writer published a version after the one this writer works on.  Commits
    catch it, rebase their changes onto ``newer`` and publish again, so users meet it
    only as the :class:`ConflictError` it is when the changes overlap.

    Attributes
    ----------
    newer : carray.versions.Manifest
        The newest version published.
    """

    def __init__(self, url: str, newer: Any) -> None:
        super().__init__(f"{url}: another writer committed version {newer.id} meanwhile; "
                         "refresh and apply the changes again")
        self.newer = newer


class VersionTakenError(ConflictError):
    """Another writer published a version at the number this writer wanted.

    Attributes
    ----------
    seq : int
        The version number taken.
    taker : carray.versions.Manifest or None
        The version found there (None: gone, or not readable).
    """

    def __init__(self, url: str, seq: int, taker: Any = None) -> None:
        super().__init__(f"{url}: another writer published version {seq} first")
        self.seq = seq
        self.taker = taker


class TagExistsError(CArrayError, ValueError):
    """A tag names a version already: tags never move, unless asked to (``move=True``)."""


class TransactionAbortedError(CArrayError, RuntimeError):
    """A transaction over several datasets was decided as aborted before it could
    commit (another writer found it unfinished past ``lock_timeout`` and gave up on
    it): none of its changes became a version."""
class ColumnNotFoundError(CArrayError, KeyError):
    """A table has no column of the name asked for (``outcols``, ``delcol``, ``t.cols``).

    A ``KeyError``, as a mapping's for a missing key; its message names the column and
    the columns there are.
    """

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class ColumnNameError(CArrayError, ValueError):
    """A name a new column cannot take: empty, ``.``/``..``, holding a path separator or
    NUL, a name the table's directory reserves, or ``nrow__`` (which ``outcols`` and
    rows use for the row number)."""


__all__ = [
    "AlignmentError",
    "AllNaNError",
    "BroadcastError",
    "CArrayError",
    "ChecksumError",
    "CodecError",
    "CodecUnavailableError",
    "ColumnNameError",
    "ColumnNotFoundError",
    "ConflictError",
    "ContainerExistsError",
    "ContainerNotFoundError",
    "ExpressionError",
    "FormatError",
    "GroupByError",
    "HandleClosedError",
    "IndexUnsupportedError",
    "IndexingError",
    "LibraryFallbackWarning",
    "LockError",
    "ModeError",
    "NewerVersionError",
    "ReadOnlyError",
    "RechunkMemoryError",
    "ShapeError",
    "StorageError",
    "TagExistsError",
    "TimeValueError",
    "TransactionAbortedError",
    "UnknownNameError",
    "UnsafeDataError",
    "UnstorableAttributeError",
    "UnsupportedDTypeError",
    "UnsupportedOptionError",
    "ValueConversionError",
    "VersionError",
    "VersionTakenError",
    "VersionsUnsupportedError",
]
