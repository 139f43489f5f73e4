"""Attributes through the paths that copy or convert them: ds files, the xarray backends,
Parquet and ds conversions of tables, pickles."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest
from attr_values import assert_same, json_attr_dicts
from hypothesis import HealthCheck, given, settings

import carray as ca
from carray.attrs.peers import json_value
from carray.errors import UnstorableAttributeError
from carray.formats import ds
from carray.integrations.convert import convert

SETTINGS = settings(max_examples=30, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])
CF = {"_FillValue": np.float64("nan"), "scale_factor": np.float32(0.5),
      "valid_range": np.array([-1.0, 1.0], "f4"), "units": "K", "flag": np.int8(-1)}


def _ds_attr_dicts():
    # Names starting with "." are the ds format's own metadata (".dims", ".type", ...).
    return json_attr_dicts(max_size=3).map(
        lambda d: {k: v for k, v in d.items() if not k.startswith(".")})


def as_json(attrs: dict) -> dict:
    """What a JSON file gives back for ``attrs`` (numpy values as Python values, tuples
    and arrays as lists, every NaN the default one)."""
    return json.loads(json.dumps({k: json_value(v, "JSON") for k, v in attrs.items()}))


@SETTINGS
@given(var_attrs=_ds_attr_dicts(), ds_attrs=_ds_attr_dicts())
def test_ds_attributes_round_trip(tmp_path, var_attrs, ds_attrs):
    path = tmp_path / "x.ds"
    ds.write(path, {"x": np.arange(2), ".": {"x": dict(var_attrs), ".": dict(ds_attrs)}})
    d = ds.read(path)
    assert_same({k: v for k, v in d["."]["x"].items() if not k.startswith(".")},
                as_json(var_attrs))
    assert_same(d["."]["."], as_json(ds_attrs))
    ds_format = pytest.importorskip("ds_format")
    theirs = ds_format.read(str(path))  # ds-format reads the header as it wrote it
    assert_same({k: v for k, v in theirs["."]["x"].items() if not k.startswith(".")},
                as_json(var_attrs))


def test_xarray_backend_keeps_cf_attributes(tmp_path):
    xr = pytest.importorskip("xarray", reason="xarray is a test dependency")
    with ca.carray(np.arange(4.0), rootdir=tmp_path / "v.carray", mode="w") as a:
        a.attrs.update(CF)
    x = xr.open_dataset(tmp_path / "v.carray", engine="carray", mask_and_scale=False)
    assert_same(dict(x["v"].attrs), CF)
    masked = xr.open_dataset(tmp_path / "v.carray", engine="carray")
    assert np.isnan(masked["v"].encoding["_FillValue"])
    t = ca.ctable({"a": np.arange(3)}, rootdir=tmp_path / "t.ctable", mode="w")
    t.cols["a"].attrs["units"] = np.str_("m")
    t.close()
    assert_same(dict(xr.open_dataset(tmp_path / "t.ctable", engine="carray")["a"].attrs),
                {"units": np.str_("m")})


def test_to_ds_and_back_keeps_attributes(tmp_path):
    xr = pytest.importorskip("xarray", reason="xarray is a test dependency")
    from carray.integrations.xarray_backend import to_ds

    attrs = {k: v for k, v in CF.items() if k != "_FillValue"}
    dataset = xr.Dataset({"v": ("t", np.arange(3.0), attrs)}, attrs={"n": (1, 2)})
    to_ds(dataset, tmp_path / "x.ds")
    back = xr.open_dataset(tmp_path / "x.ds", engine="carray_ds", mask_and_scale=False)
    assert_same(dict(back["v"].attrs), as_json(attrs))  # as ds-format keeps them
    assert_same(dict(back.attrs), {"n": [1, 2]})
    dataset.attrs["when"] = np.datetime64("2020-01-01", "D")  # JSON has no dates
    with pytest.raises(UnstorableAttributeError, match="'when'"):
        to_ds(dataset, tmp_path / "y.ds")


@pytest.mark.parametrize("ext", [".parquet", ".ds"])
def test_table_conversions_keep_attributes(tmp_path, ext):
    pytest.importorskip("pyarrow", reason="pyarrow is a test dependency")
    t = ca.ctable({"a": np.arange(3)}, rootdir=tmp_path / "t.ctable", mode="w")
    t.attrs.update(CF)
    t.close()
    convert(tmp_path / "t.ctable", tmp_path / f"t{ext}")
    convert(tmp_path / f"t{ext}", tmp_path / "back.ctable")
    with ca.open(tmp_path / "back.ctable", mode="r") as back:
        # Parquet keeps carray's attributes exactly; a ds file as ds-format keeps them.
        assert_same(back.attrs.getall(), CF if ext == ".parquet" else as_json(CF))


def test_pickles_and_table_copies_keep_attributes(tmp_path):
    a = ca.carray(np.arange(3))
    a.attrs.update(CF)
    assert_same(pickle.loads(pickle.dumps(a)).attrs.getall(), CF)
    t = ca.ctable({"a": np.arange(3), "s": np.array(["x", "y", "z"], dtype=object)},
                  rootdir=tmp_path / "t", mode="w")
    t.attrs.update(CF)
    t.cols["s"].attrs["n"] = (1, np.uint16(2))
    for copy in (t.copy(), t.copy(rootdir=tmp_path / "c", mode="w")):
        assert_same(copy.attrs.getall(), CF)
        assert_same(copy.cols["s"].attrs.getall(), {"n": (1, np.uint16(2))})
