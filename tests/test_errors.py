"""Every exception and warning carray defines lives in carray.errors, is exported from
carray, and subclasses the builtin it resembles."""

from __future__ import annotations

import ast
import builtins
import importlib
import inspect
import pathlib
import pkgutil

import pytest

import carray
from carray import errors

SRC = pathlib.Path(carray.__file__).parent
BUILTIN_EXCEPTIONS = {name for name, obj in vars(builtins).items()
                      if isinstance(obj, type) and issubclass(obj, BaseException)}


def _modules():
    for info in pkgutil.walk_packages(carray.__path__, "carray."):
        yield info.name


@pytest.mark.parametrize("name", sorted(_modules()))
def test_no_module_defines_an_exception_outside_carray_errors(name):
    module = importlib.import_module(name)
    for attr, obj in vars(module).items():
        if inspect.isclass(obj) and issubclass(obj, BaseException) and \
                obj.__module__.startswith("carray"):
            assert obj.__module__ == "carray.errors", f"{name}.{attr}"
            assert getattr(carray, obj.__name__) is obj, f"carray.{obj.__name__}"


def test_no_class_statement_anywhere_makes_an_exception_outside_carray_errors():
    """Classes nested in functions too: any class whose base is an exception type."""
    known = BUILTIN_EXCEPTIONS | set(errors.__all__)
    found = []
    for path in SRC.rglob("*.py"):
        if path.name == "errors.py" and path.parent == SRC:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ClassDef):
                continue
            bases = {b.id if isinstance(b, ast.Name) else b.attr if isinstance(b, ast.Attribute)
                     else "" for b in node.bases}
            if bases & known:
                found.append(f"{path.relative_to(SRC)}: {node.name}")
    assert not found


def test_every_error_is_exported_from_carray():
    assert set(errors.__all__) <= set(carray.__all__)
    defined = {n for n, o in vars(errors).items()
               if inspect.isclass(o) and issubclass(o, BaseException) and
               o.__module__ == "carray.errors"}
    assert defined == set(errors.__all__)
    for name in errors.__all__:
        assert getattr(carray, name) is getattr(errors, name)


@pytest.mark.parametrize("name", errors.__all__)
def test_each_error_subclasses_a_builtin(name):
    cls = getattr(errors, name)
    if cls is errors.CArrayError:
        return  # the base of the others
    builtin_bases = [b for b in cls.__mro__[1:] if b.__module__ == "builtins"
                     and b not in (BaseException, Exception, object)]
    assert builtin_bases, f"{name} subclasses no builtin but Exception"
    if issubclass(cls, Warning):
        return
    assert issubclass(cls, errors.CArrayError)


def test_old_import_paths_still_work():
    from carray.codecs._libcheck import LibraryFallbackWarning
    from carray.compute.nanreduce import AllNaNError
    from carray.table.analysis.groupby_kernels import GroupByError

    assert GroupByError is carray.GroupByError and AllNaNError is carray.AllNaNError
    assert LibraryFallbackWarning is carray.LibraryFallbackWarning
    assert issubclass(carray.StorageError, OSError)
    assert issubclass(carray.LockError, BlockingIOError)
