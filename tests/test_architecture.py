"""The package's layers, and imports that only point down them (docs/architecture.md)."""

from __future__ import annotations

import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "src" / "carray"

# Bottom to top: a module may import from its own layer and the layers below it.
LAYERS: list[set[str]] = [
    {"errors", "core"},
    {"stores"},
    {"codecs"},
    {"chunks", "attrs"},
    {"formats", "versions"},
    {"layouts"},
    {"engine"},
    {"compute"},
    {"array"},
    {"table"},
    {"groups"},
    {"api", "registry", "compat", "integrations", "cli", "testing", "__init__"},
]

# Upward calls on purpose, each imported inside the one function that needs it.
ALLOWED_UPWARD = {
    # ``carray.to_dask()`` / ``ctable.to_dask()``: conveniences over the dask reader, which
    # knows containers only by their public API.
    ("array", "integrations"),
    ("table", "integrations"),
}


def _layer_of(top: str) -> int:
    for i, names in enumerate(LAYERS):
        if top in names:
            return i
    raise AssertionError(f"carray.{top} is in no layer: add it to LAYERS and to "
                         "docs/architecture.md")


def _imports(path: pathlib.Path) -> set[str]:
    """First components of the ``carray.*`` modules ``path`` imports."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == "carray" and len(parts) > 1:
                found.add(parts[1])
    return found


MODULES = sorted(p for p in PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_point_down(path):
    rel = path.relative_to(PACKAGE)
    top = rel.parts[0].removesuffix(".py")
    mine = _layer_of(top)
    upward = [t for t in _imports(path) if _layer_of(t) > mine
              and (top, t) not in ALLOWED_UPWARD]
    assert not upward, f"carray/{rel} (layer {mine}) imports upward: {sorted(upward)}"


def _is_module(name: str) -> bool:
    path = PACKAGE.joinpath(*name.split(".")[1:])
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_private_modules_and_names_stay_in_their_package(path):
    """``_name`` modules are their package's own: no other package imports them."""
    rel = path.relative_to(PACKAGE).with_suffix("")
    parts = ("carray", *rel.parts)
    mine = ".".join(parts[:-1])
    reaching = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.ImportFrom) or not node.module or node.level:
            continue
        if not node.module.startswith("carray"):
            continue
        targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names
                                   if _is_module(f"{node.module}.{a.name}")]
        for target in targets:
            private = [i for i, p in enumerate(target.split(".")) if p.startswith("_")
                       and not p.startswith("__")]
            if private:
                owner = ".".join(target.split(".")[:private[0]])
                if not (mine + ".").startswith(owner + "."):
                    reaching.append(target)
    assert not reaching, f"carray/{rel}.py imports private modules of other packages: {reaching}"


def test_the_package_root_holds_a_handful_of_modules():
    root = sorted(p.stem for p in PACKAGE.glob("*.py"))
    assert root == ["__init__", "api", "errors", "registry", "testing"]


# Classes allowed more than two bases, each with its reason.
MANY_BASES = {
    # Exceptions: carray's base class, and both builtins callers may catch (numpy raises
    # a ValueError or a TypeError for the same bad value).
    "errors.UnsafeDataError": "both a ValueError and a TypeError",
    "errors.ValueConversionError": "both a ValueError and a TypeError",
    "errors.TimeValueError": "both a ValueError and a TypeError",
}


def test_no_class_stacks_more_than_two_bases():
    """Classes are composed of parts, not stacked from mixins: at most two bases."""
    stacked = []
    for path in MODULES:
        module = ".".join(path.relative_to(PACKAGE).with_suffix("").parts)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and len(node.bases) > 2 and \
                    f"{module}.{node.name}" not in MANY_BASES:
                stacked.append(f"{module}.{node.name}({len(node.bases)} bases)")
    assert not stacked, f"classes with more than two bases: {stacked}"


def test_ctable_is_composed_not_stacked():
    from carray.table.table import ctable

    assert "table.table.ctable" not in MANY_BASES
    assert len(ctable.__bases__) <= 2
    # Its parts are objects it holds; each public method of a former mixin still works.
    t = ctable({"a": [3, 1, 2]})
    assert t.index.facts() == t.indexes == {}
    assert list(t.sort("a")["a"]) == [1, 2, 3] and len(t.head(2)) == 2
    assert t.null_counts() == {"a": 0} and t.todataframe()["a"].tolist() == [3, 1, 2]
