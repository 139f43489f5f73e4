"""Every Python example of README.md runs as written.

Each ```python block is run on its own (a fresh namespace) in a temporary working
directory, so an example that names something it never defines, or whose claim
no longer holds (its own asserts), fails here.
"""

from __future__ import annotations

import io
import re
import tokenize
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def _blocks() -> list[tuple[int, str]]:
    """``(line number, code)`` of every python block of the README."""
    text = README.read_text(encoding="utf-8")
    return [(text.count("\n", 0, m.start()) + 2, m.group(1)) for m in _BLOCK.finditer(text)]


BLOCKS = _blocks()


def test_readme_has_examples():
    assert len(BLOCKS) >= 5


def _code_only(code: str) -> str:
    """``code`` without its comments: a library named in a comment is not needed."""
    tokens = tokenize.generate_tokens(io.StringIO(code).readline)
    return tokenize.untokenize((t.type, t.string) for t in tokens if t.type != tokenize.COMMENT)


def _needs(code: str) -> list[str]:
    """Optional packages an example imports or uses (skipped when one is missing)."""
    code = _code_only(code)
    names = []
    for name, marker in (("dask", "to_dask"), ("dask", "from_dask"), ("xarray", "xarray"),
                         ("xarray", "xr."), ("pandas", "todataframe"), ("pandas", "pd."),
                         ("pyarrow", "to_arrow"), ("pyarrow", "pa."),
                         ("moto", "s3_server"), ("s3fs", "s3_server"), ("flask", "s3_server"),
                         ("flask_cors", "s3_server"), ("zarr", "zarr"), ("polars", "pl."),
                         ("duckdb", "duckdb.")):
        if marker in code and name not in names:
            names.append(name)
    return names


def _extra(name: str) -> set[str]:
    """Distributions (normalised names) an extra of carray installs, through the extras
    it names in turn."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    found: set[str] = set()
    for text in extras[name]:
        req = Requirement(text)
        if req.name == "carray":
            for inner in req.extras:
                found |= _extra(inner)
        else:
            found.add(req.name.lower().replace("_", "-"))
    return found


@pytest.mark.parametrize(("line", "code"), BLOCKS, ids=[f"line{n}" for n, _ in BLOCKS])
def test_readme_example_needs_only_the_all_extra(line, code):
    # The README's first line installs '.[all]' and says the examples then run.
    missing = {name.replace("_", "-") for name in _needs(code)} - _extra("all")
    assert not missing, f"README.md:{line} needs {sorted(missing)}, not in the 'all' extra"


def _memory_files() -> dict:
    """fsspec's in-memory file system (shared by the whole process), or an empty dict."""
    try:
        from fsspec.implementations.memory import MemoryFileSystem
    except ImportError:
        return {}
    return MemoryFileSystem.store


@pytest.mark.parametrize(("line", "code"), BLOCKS, ids=[f"line{n}" for n, _ in BLOCKS])
def test_readme_example(line, code, tmp_path, monkeypatch):
    for name in _needs(code):
        pytest.importorskip(name, reason=f"the example needs {name}, an optional package")
    monkeypatch.chdir(tmp_path)
    compiled = compile(code, f"README.md:{line}", "exec")
    namespace: dict = {"__name__": "__readme__"}
    memory = _memory_files()
    before = set(memory)
    try:
        exec(compiled, namespace)  # noqa: S102 - running the README's own examples is the test
    finally:
        for key in set(memory) - before:  # what a memory:// example wrote goes with it
            memory.pop(key, None)
        # Close what the example left open, so files are released before tmp_path goes.
        for value in list(namespace.values()):
            close = getattr(value, "close", None)
            if callable(close) and type(value).__module__.startswith("carray"):
                try:
                    close()
                except Exception:  # noqa: BLE001 - already failed or closed; not the test
                    pass
