"""Datasets with kept versions, read at every version through every read path, for the
byte-flip sweep of ``test_flips_versions.py``.

Each dataset kind (an array, an N-d array with blocks, a table with a string, a
category and a nullable column, a group with two members) is built with
``versions="all"`` and a few commits; :func:`reads` reads one of them at one
version every way there is and returns what each read gave, or the exception it
raised.  :func:`same` compares two results exactly (NaN equal to NaN, masks and
dtypes included).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import carray as ca

KEEP_ALL = {"versions": "all"}


def build_array(root: Path) -> None:
    a = ca.carray(np.arange(200, dtype=np.int64), rootdir=str(root), chunklen=32,
                  storage=KEEP_ALL)
    a.append(np.arange(1000, 1050))
    a.snapshot("release")  # a tag file too
    a[10:20] = -1
    a.commit()
    a.close()


def build_nd(root: Path) -> None:
    base = np.arange(30 * 20, dtype=np.float64).reshape(30, 20)
    a = ca.carray(base, rootdir=str(root), chunks=(8, 8), blocks=(4, 4), storage=KEEP_ALL)
    a.append(-base[:5])
    a.commit()
    a[3:9, 2:7] = 0.5
    a.commit()
    a.close()


def build_table(root: Path) -> None:
    n = 40
    t = ca.ctable({"i": np.arange(n),
                   "s": np.array([f"s{k}" * (k % 4) for k in range(n)], dtype=object),
                   "c": pd.Series(pd.Categorical(["x", "y", "z", None][k % 4] for k in range(n))),
                   "x": np.ma.masked_array(np.arange(n) / 4, mask=[k % 3 == 0
                                                                   for k in range(n)])},
                  rootdir=str(root), storage=KEEP_ALL)
    t.append({"i": [100, 101], "s": ["new", ""], "c": pd.Series(pd.Categorical(["y", "w"])),
              "x": np.ma.masked_array([7.5, 8.5], mask=[False, True])})
    t.commit()
    t.append({"i": [200], "s": ["last"], "c": pd.Series(pd.Categorical(["x"])),
              "x": np.ma.masked_array([9.0], mask=[False])})
    t.commit()
    t.close()


def build_group(root: Path) -> None:
    g = ca.group(str(root), mode="w", storage={"versions": "all"})
    g.create_array("temp", np.arange(8 * 6, dtype=np.float64).reshape(8, 6), chunks=(3, 6))
    g.set_dims("temp", ("t", "x"))
    g.create_array("time", np.arange(8, dtype=np.int64))
    g.set_dims("time", ("t",))
    g.commit()
    g.append({"temp": np.full((2, 6), 7.0), "time": [80, 90]}, dim="t")
    g.commit()
    g.append({"temp": np.full((1, 6), -1.0), "time": [99]}, dim="t")
    g.close()


BUILDERS: dict[str, Callable[[Path], None]] = {
    "array": build_array, "nd": build_nd, "table": build_table, "group": build_group}


def versions_of(kind: str, path: str) -> list[str]:
    """The ids of the kept versions of the dataset (newest first)."""
    with (ca.open_group(path) if kind == "group" else ca.open(path, mode="r")) as c:
        return [v.id for v in c.versions()]


# -- reads --------------------------------------------------------------------------------


def one_per_chunk(a: Any) -> np.ndarray:
    """The first item of every chunk, each read alone (ranged reads of every chunk)."""
    starts = [range(0, n, c) for n, c in zip(a.shape, a.chunks, strict=True)]
    return np.array([a[idx] for idx in itertools.product(*starts)])


def _array_reads(a: Any) -> dict[str, Callable[[], Any]]:
    return {
        "all": lambda: a[:],
        "slice": lambda: a[3:17] if a.ndim == 1 else a[3:11, 2:9],
        "items": lambda: a[-3:] if a.ndim == 1 else a[-3:, [1, a.shape[1] - 1]],
        "per_chunk": lambda: one_per_chunk(a),
        "iter": lambda: np.array(list(a)),
        "sum": lambda: np.asarray(a.sum()),
    }


def _table_reads(t: Any) -> dict[str, Callable[[], Any]]:
    return {
        "rows": lambda: t[:],
        "slice": lambda: t[5:12],
        "iter": lambda: list(t.iter()),
        "query": lambda: t.fetchwhere("(i > 3) & (i < 150)", outcols=["i", "s", "c", "x"]),
        "col_i": lambda: t.cols["i"][:],
        "col_s": lambda: t.cols["s"][:],
        "col_c": lambda: t.cols["c"][:],
        "col_x": lambda: t.cols["x"][:],
        "sum": lambda: np.asarray(t.cols["i"].sum()),
        "items": lambda: [t.cols[name][k] for name in t.names for k in (0, len(t) - 1)],
        "frame": lambda: t.todataframe(),
    }


def _group_reads(g: Any, path: str, version: str) -> dict[str, Callable[[], Any]]:
    import xarray as xr

    def xarray() -> Any:
        with xr.open_dataset(path, engine="carray_group", version=version) as ds:
            return {name: ds[name].values for name in sorted(ds.variables)}

    def member(name: str, read: Callable[[Any], Any]) -> Callable[[], Any]:
        return lambda: read(g[name]) if name in g else None  # the first version: none

    return {
        "members": lambda: sorted(g),
        "temp": member("temp", lambda a: a[:]),
        "time": member("time", lambda a: a[:]),
        "temp_slice": member("temp", lambda a: a[1:4, 2:]),
        "time_sum": member("time", lambda a: np.asarray(a.sum())),
        "temp_items": member("temp", one_per_chunk),
        "xarray": xarray,
    }


#: A group's members are datasets of their own: read alone at each of their versions.
GROUP_MEMBERS = ("temp", "time")


def member_versions(path: str) -> dict[str, list[str]]:
    """The kept versions of each member directory of the group at ``path``."""
    return {m: versions_of("array", os.path.join(path, m)) for m in GROUP_MEMBERS}


Read = tuple[str, str, str]  # (kind, path, version)


#: The arrays of the table (each directory can be opened alone, at a table version).
TABLE_MEMBERS = ("i", "s/offsets", "s/values", "c/codes", "c/dictionary/offsets",
                 "c/dictionary/values", "x/values", "x/valid")


def read_plan(kind: str, path: str) -> list[Read]:
    """Every version to read: the dataset's; for a group each member directory's (a
    member is a dataset of its own, which can be opened alone); for a table each of
    its arrays opened alone (read whole)."""
    plan = [(kind, path, v) for v in versions_of(kind, path)]
    if kind == "array":
        plan.append(("tag", path, "release"))
    if kind == "group":
        plan += [("array", os.path.join(path, m), v) for m, vs in member_versions(path).items()
                 for v in vs]
    if kind == "table":
        plan += [("member", os.path.join(path, m), v) for m in TABLE_MEMBERS
                 for v in versions_of(kind, path)]
    return plan


def read_all(plan: list[Read]) -> dict[Read, dict[str, Any]]:
    """What every read of every version in ``plan`` gives."""
    return {(k, p, v): reads(k, p, v) for k, p, v in plan}


def _run(read: Callable[[], Any]) -> Any:
    try:
        return read()
    except Exception as exc:  # noqa: BLE001 - what a read raised is the result here
        return exc


def reads(kind: str, path: str, version: str) -> dict[str, Any]:
    """Every read of the dataset at ``version``: what each gave, or what it raised (an
    ``"open"`` entry alone when the version does not open)."""
    try:
        if kind == "group":
            c = ca.open_group(path, version=version)
        elif kind == "tag":
            c = ca.open(path, mode="r", tag=version)
        else:
            c = ca.open(path, mode="r", version=version)
    except Exception as exc:  # noqa: BLE001
        return {"open": exc}
    try:
        if kind == "group":
            paths = _group_reads(c, path, version)
        elif kind in ("member", "tag"):
            paths = {"all": lambda: c[:]}
        elif kind == "table":
            paths = _table_reads(c)
        else:
            paths = _array_reads(c)
        return {name: _run(read) for name, read in paths.items()}
    finally:
        _run(c.close)


def same(a: Any, b: Any) -> bool:
    """Whether two read results are the same values (NaN equals NaN; masks, dtypes and
    types compared)."""
    if isinstance(a, (list, tuple)):  # rows are named tuples: a class per read
        return isinstance(b, (list, tuple)) and len(a) == len(b) and \
            all(same(x, y) for x, y in zip(a, b, strict=True))
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, pd.DataFrame):
        return a.equals(b) and list(a.dtypes) == list(b.dtypes)
    if isinstance(a, np.ma.MaskedArray):  # (np.ma.masked too: a read of one item)
        if a.dtype.names:
            return a.dtype == b.dtype and all(same(a[n], b[n]) for n in a.dtype.names)
        mask = np.ma.getmaskarray(a)
        return same(mask, np.ma.getmaskarray(b)) and \
            same(np.asarray(np.ma.getdata(a))[~mask], np.asarray(np.ma.getdata(b))[~mask])
    if isinstance(a, np.ndarray):
        if a.dtype != b.dtype or a.shape != b.shape:
            return False
        if a.dtype.names:
            return all(same(a[n], b[n]) for n in a.dtype.names)
        if a.dtype.kind in "fc":
            return bool(np.array_equal(a, b, equal_nan=True))
        if a.dtype == object:
            return all(same(x, y) for x, y in zip(a.ravel(), b.ravel(), strict=True))
        return bool(np.array_equal(a, b))
    if isinstance(a, float) and a != a:
        return b != b
    if isinstance(a, np.generic):
        return same(np.asarray(a), np.asarray(b))
    return bool(a == b)


def verify_problems(path: str) -> list[str]:
    """What ``carray verify`` reports for the dataset at ``path``."""
    from carray.cli.verify import verify_path

    return verify_path(path)[0]


def files_of(root: str) -> list[str]:
    """Every file under ``root``, relative, sorted."""
    out = []
    for d, _, names in os.walk(root):
        out += [os.path.relpath(os.path.join(d, n), root) for n in names]
    return sorted(out)
