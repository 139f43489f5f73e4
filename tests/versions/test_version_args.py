"""Asking for an earlier version: ``as_of`` in every form a user has a time in, a writable
mode refused with a typed error, the xarray engines, and ``carray log`` of a group."""

from __future__ import annotations

import datetime as dt
import json
import time

import numpy as np
import pytest

import carray as ca
from carray.cli.main import main
from carray.errors import ModeError, TimeValueError, VersionError


def _between(commit_first, commit_second):
    """Run both, with a clear gap in time between them; the local time in the gap."""
    commit_first()
    time.sleep(0.05)
    middle = dt.datetime.now()
    time.sleep(0.05)
    commit_second()
    return middle


def _forms(local: dt.datetime) -> dict:
    """One local time in every form ``as_of`` takes."""
    import pandas as pd

    aware = local.astimezone()
    return {
        "datetime": local,
        "aware datetime": aware.astimezone(dt.UTC),
        "iso string": local.isoformat(),
        "iso string with zone": aware.isoformat(),
        "iso string Z": aware.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "numpy.datetime64": np.datetime64(local.isoformat()),
        "pandas.Timestamp": pd.Timestamp(local),
        "pandas.Timestamp with zone": pd.Timestamp(aware),
    }


@pytest.fixture
def array_versions(tmp_path):
    path = str(tmp_path / "a")
    a = ca.carray(np.arange(10), rootdir=path, mode="w", storage={"versions": "all"})
    middle = _between(lambda: a.commit("first"),
                      lambda: (a.append(np.arange(5)), a.commit("second")))
    a.close()
    return path, middle


def test_as_of_takes_every_form_of_a_time_for_arrays(array_versions):
    path, middle = array_versions
    for name, when in _forms(middle).items():
        with ca.open(path, as_of=when) as a:
            assert len(a) == 10, name
            assert a.mode == "r"
    tomorrow = dt.date.today() + dt.timedelta(days=1)
    for when in (tomorrow, tomorrow.isoformat(), np.datetime64(tomorrow.isoformat())):
        assert len(ca.open(path, as_of=when)) == 15, when  # a day: its midnight, local time
    with pytest.raises(VersionError):
        ca.open(path, as_of="2000-01-01")  # before any version


@pytest.mark.parametrize("bad", ["yesterday", "2024-13-01", np.datetime64("NaT"), 5, 1.5,
                                 [2024, 1, 1]])
def test_a_time_that_is_not_one_is_refused(array_versions, bad):
    import pandas as pd

    path, _ = array_versions
    with pytest.raises(TimeValueError) as info:
        ca.open(path, as_of=bad)
    assert isinstance(info.value, ValueError) and "as_of" in str(info.value)
    with pytest.raises(TimeValueError):
        ca.open(path, as_of=pd.NaT)


def test_as_of_for_tables_and_groups(tmp_path):
    tpath, gpath = str(tmp_path / "t"), str(tmp_path / "g")
    t = ca.ctable({"x": np.arange(4)}, rootdir=tpath, mode="w", auto_flush=False,
                  storage={"versions": "all"})
    g = ca.group(gpath, mode="w", storage={"versions": "all"})
    g.create_array("x", np.arange(4))

    def second():
        t.append({"x": [9]})
        t.flush()
        g["x"].append([9])
        g.commit("second")

    middle = _between(lambda: (t.flush(), g.commit("first")), second)
    t.close()
    g.close()
    for name, when in _forms(middle).items():
        with ca.open(tpath, as_of=when) as old:
            assert len(old) == 4, name
        with ca.open_table(tpath, as_of=when) as old:
            assert len(old) == 4, name
        with ca.open_group(gpath, as_of=when) as old:
            assert len(old["x"]) == 4, name
        with ca.open(gpath, as_of=when) as old:
            assert old.readonly and len(old["x"]) == 4, name
    with ca.open(gpath) as newest:
        assert len(newest["x"]) == 5 and not newest.readonly


def test_an_earlier_version_with_a_writable_mode_is_a_typed_error(tmp_path):
    apath, tpath, gpath = (str(tmp_path / n) for n in "atg")
    ca.carray(np.arange(3), rootdir=apath, mode="w").close()
    ca.ctable({"x": np.arange(3)}, rootdir=tpath, mode="w").close()
    with ca.group(gpath, mode="w", storage={"versions": "all"}) as g:
        g.create_array("x", np.arange(3))
    for path in (apath, tpath, gpath):
        with ca.open(path, mode="r") as c:
            v = c.version
        for mode in ("a", "w"):
            for asked in ({"version": v}, {"as_of": dt.datetime.now()}):
                with pytest.raises(ModeError, match="mode='r'") as info:
                    ca.open(path, mode=mode, **asked)
                assert isinstance(info.value, ValueError)
        with ca.open(path, version=v) as c:  # no mode: read-only
            assert c.version == v
    with pytest.raises(ModeError):
        ca.carray(rootdir=apath, mode="a", tag="nope")
    with pytest.raises(ModeError):
        ca.ctable(rootdir=tpath, mode="a", version="0" * 16)
    with pytest.raises(ModeError):
        ca.open_group(gpath, mode="a", as_of="2024-01-01")
    with pytest.raises(ModeError):
        ca.open_array(apath, mode="w", version="0" * 16)


# -- the xarray engines -------------------------------------------------------------------------

def test_the_xarray_engines_open_earlier_versions(tmp_path):
    xr = pytest.importorskip("xarray")
    gpath, apath, tpath = str(tmp_path / "g"), str(tmp_path / "a"), str(tmp_path / "t")
    g = ca.group(gpath, mode="w", storage={"versions": "all"})
    g.create_array("v", np.arange(4.0), dims=("n",))
    a = ca.carray(np.arange(4.0), rootdir=apath, mode="w", storage={"versions": "all"})
    t = ca.ctable({"x": np.arange(4)}, rootdir=tpath, mode="w", storage={"versions": "all"})
    first = {"g": None, "a": None, "t": None}

    def commit_first():
        first["g"], first["a"], first["t"] = g.commit("first"), a.commit(), t.commit()

    def commit_second():
        g["v"].append([4.0])
        g.commit("second")
        g.snapshot("later")
        a.append([4.0])
        a.commit()
        t.append({"x": [4]})
        t.commit()

    middle = _between(commit_first, commit_second)
    for c in (g, a, t):
        c.close()
    for how in ({"as_of": middle}, {"as_of": middle.isoformat()}, {"version": first["g"]}):
        ds = xr.open_dataset(gpath, engine="carray_group", **how)
        assert ds.sizes["n"] == 4, how
        np.testing.assert_array_equal(ds["v"].values, np.arange(4.0))
    assert xr.open_dataset(gpath, engine="carray_group", tag="later").sizes["n"] == 5
    tree = xr.open_datatree(gpath, engine="carray_group", as_of=middle)
    assert tree["v"].shape == (4,)
    for path, first_id in ((apath, first["a"]), (tpath, first["t"])):
        for how in ({"as_of": middle}, {"version": first_id}):
            ds = xr.open_dataset(path, engine="carray", **how)
            name = next(iter(ds.data_vars))
            assert ds[name].shape == (4,), (path, how)
            assert ds[name].values.tolist() == list(range(4)), (path, how)
        assert next(iter(xr.open_dataset(path, engine="carray").data_vars.values())).shape \
            == (5,)


# -- carray log of a group ----------------------------------------------------------------------

def test_log_of_a_group_shows_each_member_per_version(tmp_path, capsys):
    path = str(tmp_path / "g")
    with ca.group(path, mode="w", storage={"versions": "all"}) as g:
        g.create_array("x", np.arange(1000.0).reshape(100, 10))
        g.create_table("t", {"a": np.arange(7)})
        g.commit("both")
        g["x"].append(np.ones((20, 10)))
        g.commit("more rows")
    assert main(["log", "--json", path]) == 0
    kept = json.loads(capsys.readouterr().out)
    newest = kept[0]
    assert newest["message"] == "more rows"
    members = {m["path"]: m for m in newest["members"]}
    assert members["x"]["shape"] == [120, 10] and members["x"]["kind"] == "array"
    assert members["x"]["nbytes"] == 120 * 10 * 8 and members["x"]["cbytes"] > 0
    assert members["t"]["shape"] == [7] and members["t"]["kind"] == "table"
    assert newest["nbytes"] == sum(m["nbytes"] for m in newest["members"]) > 0
    shapes = [{m["path"]: m["shape"] for m in v["members"]} for v in kept[1:]]
    assert {"x": [100, 10], "t": [7]} in shapes and {} in shapes, shapes  # older ones
    assert main(["log", path]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any("2 members" in line and "more rows" in line for line in lines), lines
    assert any(line.strip().startswith("x") and "120x10" in line for line in lines), lines
    assert any(line.strip().startswith("x") and "100x10" in line for line in lines), lines
