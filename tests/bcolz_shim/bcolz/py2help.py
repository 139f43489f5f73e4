"""The Python 2/3 names bcolz's tests import (Python 3 only here)."""

PY2 = False
xrange = range
_inttypes = (int,)
