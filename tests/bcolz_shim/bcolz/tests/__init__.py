"""bcolz's test modules, as installed with the real bcolz (read from there, unchanged).

``BCOLZ_TESTS_DIR`` names the directory; by default it is the ``bcolz/tests`` found on
``sys.path`` after this shim.
"""

import os
import sys

_shim_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def installed_tests_dir() -> str:
    """Where the real bcolz's test modules are (``BCOLZ_TESTS_DIR`` first)."""
    given = os.environ.get("BCOLZ_TESTS_DIR")
    if given:
        return given
    for entry in sys.path:
        root = os.path.abspath(entry or os.curdir)
        candidate = os.path.join(root, "bcolz", "tests")
        if root != _shim_root and os.path.isfile(os.path.join(candidate, "common.py")):
            return candidate
    raise ImportError("bcolz's test modules were not found: install bcolz-zipline "
                      "or set BCOLZ_TESTS_DIR")


__path__ = [installed_tests_dir()]
