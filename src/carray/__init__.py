"""carray: compressed, chunked N-d arrays and column tables, on disk as in memory."""

from carray.array import Attrs, carray
from carray.errors import (
    AlignmentError,
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

# dask is optional and slow to import: these names load carray.integrations.dask on first use.
_DASK_NAMES = ("from_dask", "store", "ctable_from_dask")


def __getattr__(name: str):
    if name in _DASK_NAMES:
        from carray.integrations import dask

        return getattr(dask, name)
    raise AttributeError(f"module 'carray' has no attribute {name!r}")


__all__ = [
    "BITSHUFFLE", "NOSHUFFLE", "SHUFFLE",
    "AlignmentError", "Attrs", "CArrayError", "CParams", "ChecksumError", "CodecError", "CodecUnavailableError",
    "ContainerExistsError", "ContainerNotFoundError", "ExpressionError", "FormatError",
    "ReadOnlyError", "Shuffle", "StringColumn", "UnsafeDataError", "UnsupportedDTypeError",
    "arange", "bloscpack", "carray", "cparams", "ctable", "ds", "eval", "detect_number_of_cores", "fill", "fromiter",
    "get_nthreads", "iterblocks", "ones", "open", "set_nthreads", "zeros",
]
