"""Every exception carray raises, in one place.

Each class also subclasses the builtin it resembles, so callers that catch
``ValueError`` or ``OSError`` keep working.  Messages name the file (or key),
the offset where that makes sense, and what was expected.
"""

from __future__ import annotations

import os


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


class ExpressionError(CArrayError, ValueError):
    """A query expression cannot be parsed, or names something unknown."""


class ReadOnlyError(CArrayError, PermissionError):
    """A write was attempted on something opened read-only."""


class AlignmentError(CArrayError, ValueError):
    """Parallel writers' blocks do not cover whole chunks, or whole files of chunks."""


class ContainerNotFoundError(CArrayError, FileNotFoundError):
    """No dataset exists at the given path."""


class ContainerExistsError(CArrayError, FileExistsError):
    """A dataset already exists where a new one was to be created."""


class UnsafeDataError(CArrayError, TypeError):
    """Reading would require unpickling; pass the explicit opt-in to allow it."""


class UnsupportedDTypeError(CArrayError, TypeError):
    """The dtype cannot be stored in the requested format."""


__all__ = [
    "AlignmentError",
    "CArrayError",
    "ChecksumError",
    "CodecError",
    "CodecUnavailableError",
    "ContainerExistsError",
    "ContainerNotFoundError",
    "ExpressionError",
    "FormatError",
    "ReadOnlyError",
    "UnsafeDataError",
    "UnsupportedDTypeError",
]
