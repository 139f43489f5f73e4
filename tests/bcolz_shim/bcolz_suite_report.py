"""pytest plugin for a run of bcolz's suite through the shim: checks that ``import
bcolz`` is the shim (so no test runs against the real bcolz) and writes the outcome of
every test as JSON to the file ``BCOLZ_SUITE_REPORT`` names."""

from __future__ import annotations

import json
import os

import bcolz
import pytest

_SHIM = os.path.dirname(os.path.abspath(__file__))
if not os.path.abspath(bcolz.__file__).startswith(_SHIM + os.sep):
    raise ImportError(f"import bcolz gave {bcolz.__file__}, not the shim in {_SHIM}")

_outcomes: dict[str, str] = {}
_errors: dict[str, str] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    name = report.nodeid.split("bcolz/tests/", 1)[-1]
    if report.when == "call" or report.outcome != "passed":
        # A failed setup or teardown counts against the test whatever its call did.
        if _outcomes.get(name) in (None, "passed"):
            _outcomes[name] = report.outcome
            crash = getattr(report.longrepr, "reprcrash", None)
            if crash is not None:
                _errors[name] = crash.message.splitlines()[0][:300]


def pytest_sessionfinish(session: pytest.Session) -> None:
    path = os.environ.get("BCOLZ_SUITE_REPORT")
    if path:
        with open(path, "w", encoding="utf-8") as f:
            json.dump({"outcomes": _outcomes, "errors": _errors}, f, indent=0, sort_keys=True)
