"""carray: compressed, chunked N-d arrays and column tables, on disk as in memory."""

from carray.array import Attrs, carray
from carray.errors import (
    CArrayError,
    ChecksumError,
    CodecError,
    CodecUnavailableError,
    ContainerExistsError,
    ContainerNotFoundError,
    ExpressionError,
    FormatError,
    ReadOnlyError,
    UnsafeDataError,
    UnsupportedDTypeError,
)
from carray.formats import bloscpack, ds
from carray.params import (
    BITSHUFFLE,
    NOSHUFFLE,
    SHUFFLE,
    CParams,
    Shuffle,
    cparams,
    detect_number_of_cores,
    get_nthreads,
    set_nthreads,
)
from carray.table import ctable
from carray.toplevel import arange, eval, fill, fromiter, iterblocks, ones, open, zeros
from carray.vlstring import StringColumn

__version__ = "0.1.0"

__all__ = [
    "BITSHUFFLE", "NOSHUFFLE", "SHUFFLE",
    "Attrs", "CArrayError", "CParams", "ChecksumError", "CodecError", "CodecUnavailableError",
    "ContainerExistsError", "ContainerNotFoundError", "ExpressionError", "FormatError",
    "ReadOnlyError", "Shuffle", "StringColumn", "UnsafeDataError", "UnsupportedDTypeError",
    "arange", "bloscpack", "carray", "cparams", "ctable", "ds", "eval", "detect_number_of_cores", "fill", "fromiter",
    "get_nthreads", "iterblocks", "ones", "open", "set_nthreads", "zeros",
]
