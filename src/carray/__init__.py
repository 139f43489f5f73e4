"""carray: compressed, chunked N-d arrays and column tables, on disk as in memory."""

from importlib import metadata as _metadata

from carray import errors
from carray.api import (
    arange,
    eval,
    fill,
    fromiter,
    iterblocks,
    ones,
    open,
    open_array,
    open_table,
    prune,
    transaction,
    zeros,
)
from carray.array.array import Attrs, carray
from carray.array.concat import concatenate
from carray.codecs.threads import detect_number_of_cores, get_nthreads
from carray.compat.bcolz import (
    blosc_compressor_list,
    blosc_set_nthreads,
    blosc_version,
    filters,
    print_versions,
    set_nthreads,
    walk,
)
from carray.core.defaults import cparams, defaults, defaults_ctx
from carray.core.params import (
    BITSHUFFLE,
    NOSHUFFLE,
    SHUFFLE,
    CParams,
    Shuffle,
)
from carray.errors import *  # noqa: F403 - every exception and warning, listed in errors.__all__
from carray.formats import bloscpack, ds
from carray.groups.group import Group, group, open_group
from carray.integrations.group_copy import copy_group
from carray.table.columns import nested as _nested  # noqa: F401 - registers the nested kind
from carray.table.columns.category import CategoryColumn
from carray.table.columns.category_values import categorical
from carray.table.columns.nullable import NullableColumn
from carray.table.columns.strings import StringColumn
from carray.table.table import ctable

try:
    # The version is written once, in pyproject.toml, and read from the installed metadata.
    __version__ = _metadata.version("carray")
except _metadata.PackageNotFoundError:  # a source tree put on sys.path, never installed
    __version__ = "0+unknown"

# dask is optional and slow to import: these names load carray.integrations.dask on first use.
_DASK_NAMES = ("from_dask", "store", "ctable_from_dask")
# xarray too: from_xarray loads carray.integrations.xarray_groups on first use.
_XARRAY_NAMES = ("from_xarray",)
# Conversions between formats load their readers and writers on first use.
_CONVERT_NAMES = ("convert", "convert_array", "convert_table")


def __getattr__(name: str):
    if name in _DASK_NAMES:
        from carray.integrations import dask

        return getattr(dask, name)
    if name in _XARRAY_NAMES:
        from carray.integrations import xarray_groups

        return getattr(xarray_groups, name)
    if name in _CONVERT_NAMES:
        from carray.integrations import convert

        return getattr(convert, name)
    raise AttributeError(f"module 'carray' has no attribute {name!r}")


__all__ = [
    "BITSHUFFLE", "NOSHUFFLE", "SHUFFLE",
    "Attrs", "CategoryColumn", "CParams", "Group", "NullableColumn", "Shuffle", "StringColumn",
    "arange", "bloscpack", "carray", "categorical", "concatenate", "copy_group", "cparams", "ctable", "ds",
    "convert", "convert_array", "convert_table",  # noqa: F405 - loaded on first use
    "eval", "detect_number_of_cores", "fill", "fromiter",
    "get_nthreads", "group", "iterblocks", "ones", "open", "open_array", "open_group", "open_table", "prune", "transaction", "set_nthreads",
    "zeros",
    # bcolz's module-level API
    "blosc_compressor_list", "blosc_set_nthreads", "blosc_version", "defaults", "defaults_ctx",
    "filters", "print_versions", "walk",
    # every exception and warning carray raises
    *errors.__all__,
]
