"""carray: compressed, chunked N-d arrays and column tables, on disk as in memory."""

from carray.errors import (
    CArrayError,
    ChecksumError,
    CodecError,
    CodecUnavailableError,
    ContainerExistsError,
    ContainerNotFoundError,
    FormatError,
    ReadOnlyError,
    UnsafeDataError,
    UnsupportedDTypeError,
)

__version__ = "0.1.0"
