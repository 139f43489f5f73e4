"""The package's own metadata: one version, a license file, declared bounds."""

from __future__ import annotations

import importlib.metadata
import tomllib
from pathlib import Path

import carray

ROOT = Path(__file__).parent.parent


def test_version_comes_from_the_package_metadata():
    assert carray.__version__ == importlib.metadata.version("carray")


def test_version_is_written_once():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert carray.__version__ == pyproject["project"]["version"]
    init = (ROOT / "src" / "carray" / "__init__.py").read_text()
    assert pyproject["project"]["version"] not in init


def test_license_file_matches_the_declared_license():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert pyproject["project"]["license"] == "BSD-3-Clause"
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("BSD 3-Clause License") and "the carray developers" in text


def test_dependency_bounds():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    deps = {d.split(">")[0].split("=")[0].split(";")[0].strip(): d
            for d in project["dependencies"] + project["optional-dependencies"]["test"]}
    # carray reads the layout of blosc2's bundled C library: a new major may move it.
    assert "<" in deps["blosc2"]
    # The real bcolz has no wheels for Python 3.13+: its pin must not break installs there.
    assert "python_version < '3.13'" in deps["bcolz-zipline"]
