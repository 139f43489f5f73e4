"""Running the Python examples of the README and of docs/: finding them, the optional
packages each needs, and running them as a reader would."""

from __future__ import annotations

import io
import re
import tokenize
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
# Optional packages, and what in an example's code says it uses them.
_MARKERS = (("dask", "to_dask"), ("dask", "from_dask"), ("xarray", "xarray"),
            ("xarray", "xr."), ("pandas", "todataframe"), ("pandas", "pd."),
            ("pyarrow", "to_arrow"), ("pyarrow", "pa."), ("pyarrow", "pq."),
            ("moto", "s3_server"), ("s3fs", "s3_server"), ("flask", "s3_server"),
            ("flask_cors", "s3_server"), ("zarr", "zarr"), ("polars", "pl."),
            ("duckdb", "duckdb."), ("netCDF4", "netCDF4"), ("netCDF4", ".nc\""),
            ("h5py", "h5py"), ("tables", "tohdf5"), ("tables", "fromhdf5"))


def python_blocks(path: Path) -> list[tuple[int, str]]:
    """``(line number, code)`` of every ```` ```python ```` block of a Markdown file."""
    text = path.read_text(encoding="utf-8")
    return [(text.count("\n", 0, m.start()) + 2, m.group(1)) for m in _BLOCK.finditer(text)]


def doc_pages() -> list[Path]:
    """Every Markdown page of docs/ that holds a Python example (generated pages and
    build output left out)."""
    pages = []
    for path in sorted(DOCS.rglob("*.md")):
        rel = path.relative_to(DOCS).parts
        if rel[0] in ("_build",) or rel[:2] == ("api", "generated"):
            continue
        if python_blocks(path):
            pages.append(path)
    return pages


def _code_only(code: str) -> str:
    """``code`` without its comments: a library named in a comment is not needed."""
    tokens = tokenize.generate_tokens(io.StringIO(code).readline)
    return tokenize.untokenize((t.type, t.string) for t in tokens if t.type != tokenize.COMMENT)


def needs(code: str) -> list[str]:
    """Optional packages an example imports or uses (its test skips when one is missing)."""
    code = _code_only(code)
    names = []
    for name, marker in _MARKERS:
        if marker in code and name not in names:
            names.append(name)
    return names


def extra(name: str) -> set[str]:
    """Distributions (normalised names) an extra of carray installs, through the extras
    it names in turn."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    found: set[str] = set()
    for text in extras[name]:
        req = Requirement(text)
        if req.name == "carray":
            for inner in req.extras:
                found |= extra(inner)
        else:
            found.add(req.name.lower().replace("_", "-"))
    return found


def missing_from_all(code: str) -> set[str]:
    """Packages ``code`` needs that ``pip install '.[all]'`` does not install."""
    return {name.lower().replace("_", "-") for name in needs(code)} - extra("all")


def _memory_fs():
    """fsspec's in-memory file system class (its files and directories are shared by the
    whole process), or None."""
    try:
        from fsspec.implementations.memory import MemoryFileSystem
    except ImportError:
        return None
    return MemoryFileSystem


def run_examples(blocks: list[tuple[int, str]], source: Path) -> None:
    """Run ``blocks`` in order in one namespace, in the current directory, as a reader
    pasting them one after another would; skip when an optional package is missing.

    A failure's traceback names ``source`` and the line in it. The carray objects the
    examples left open are closed, so their files are released before the directory
    goes, then what they wrote to fsspec's memory file system is removed.
    """
    for _, code in blocks:
        for name in needs(code):
            pytest.importorskip(name, reason=f"the example needs {name}, an optional package")
    namespace: dict = {"__name__": "__example__"}
    memory = _memory_fs()
    files_before = set(memory.store) if memory else set()
    dirs_before = set(memory.pseudo_dirs) if memory else set()
    try:
        for line, code in blocks:
            # Blank lines in front keep the line numbers of tracebacks those of the file.
            compiled = compile("\n" * (line - 1) + code, str(source), "exec")
            exec(compiled, namespace)  # noqa: S102 - running the docs' own examples is the test
    finally:
        for value in list(namespace.values()):
            close = getattr(value, "close", None)
            if callable(close) and type(value).__module__.startswith("carray"):
                try:
                    close()
                except Exception:  # noqa: BLE001 - already failed or closed; not the test
                    pass
        if memory:  # what the examples wrote to memory:// goes with them
            for key in set(memory.store) - files_before:
                memory.store.pop(key, None)
            memory.pseudo_dirs[:] = [d for d in memory.pseudo_dirs if d in dirs_before]
