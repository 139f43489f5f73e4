"""``import bcolz`` answered by carray, to run bcolz's own test suite against carray.

Only :mod:`tests.test_bcolz_suite` puts this directory first on ``sys.path``, in a
child process.  Every name is carray's public API; the module-level flags are the
ones bcolz's tests read to decide what to skip.  New stored arrays and tables are
bcolz directories, as bcolz writes them (``carray.defaults.format``).
"""

import importlib.util

from carray import *  # noqa: F403 - the whole bcolz-compatible API
from carray import __version__, defaults, defaults_ctx, eval, filters, iterblocks  # noqa: F401

defaults.format = "bcolz"


def _here(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


numexpr_here = _here("numexpr")
dask_here = _here("dask")
pandas_here = _here("pandas")
tables_here = _here("tables")
