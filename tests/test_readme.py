"""Every Python example of README.md runs as written.

Each ```python block is run on its own (a fresh namespace) in a temporary working
directory, so an example that names something it never defines, or whose claim
no longer holds (its own asserts), fails here.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def _blocks() -> list[tuple[int, str]]:
    """``(line number, code)`` of every python block of the README."""
    text = README.read_text(encoding="utf-8")
    return [(text.count("\n", 0, m.start()) + 2, m.group(1)) for m in _BLOCK.finditer(text)]


BLOCKS = _blocks()


def test_readme_has_examples():
    assert len(BLOCKS) >= 5


def _needs(code: str) -> list[str]:
    """Optional packages an example imports or uses (skipped when one is missing)."""
    names = []
    for name, marker in (("dask", "to_dask"), ("dask", "from_dask"), ("xarray", "xarray"),
                         ("xarray", "xr."), ("pandas", "todataframe"), ("pandas", "pd."),
                         ("pyarrow", "to_arrow"), ("pyarrow", "pa."),
                         ("moto", "s3_server"), ("s3fs", "s3_server"), ("zarr", "zarr"), ("polars", "pl."),
                         ("duckdb", "duckdb.")):
        if marker in code:
            names.append(name)
    return names


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
        pytest.importorskip(name)
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
