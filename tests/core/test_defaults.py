"""carray.core.defaults: how a new array's ``cparams`` argument resolves against the defaults,
and the format new stored arrays and tables get."""

from __future__ import annotations

import numpy as np
import pytest

import carray as ca
from carray.core.defaults import defaults, defaults_ctx, resolve_cparams
from carray.core.params import CParams


@pytest.fixture(autouse=True)
def _fresh_defaults():
    defaults.reset()
    yield
    defaults.reset()


def test_none_takes_the_current_defaults():
    assert resolve_cparams(None) == CParams()
    with defaults_ctx(cparams={"clevel": 9, "cname": "zstd"}):
        assert resolve_cparams(None) == CParams(clevel=9, cname="zstd")
    assert resolve_cparams(None) == CParams()


def test_a_dict_changes_only_its_fields():
    defaults.cparams = CParams(cname="zstd", shuffle=2)
    assert resolve_cparams({"clevel": 1}) == CParams(clevel=1, cname="zstd", shuffle=2)
    assert resolve_cparams({"clevel": None, "cname": "lz4"}) == CParams(cname="lz4", shuffle=2)
    assert resolve_cparams({"filters": ["delta"]}) == CParams(cname="zstd", filters=["delta"])


def test_a_cparams_is_taken_as_it_is():
    defaults.cparams = {"clevel": 9}
    assert resolve_cparams(CParams(clevel=2)).clevel == 2


@pytest.mark.parametrize("bad", [{"level": 1}, {"clevel": 11}, 5])
def test_bad_cparams(bad):
    with pytest.raises((ValueError, TypeError)):
        resolve_cparams(bad)


def test_format_default_makes_new_stored_datasets_bcolz(tmp_path):
    defaults.format = "bcolz"
    a = ca.zeros(10, rootdir=str(tmp_path / "a"))
    t = ca.ctable({"x": np.arange(3)}, rootdir=str(tmp_path / "t"))
    assert a.layout == "Bcolz" and t.auto_flush and t["x"].layout == "Bcolz"
    assert ca.carray(np.arange(3)).layout == "Memory"
    assert ca.zeros(4, rootdir=str(tmp_path / "f.b2nd")).layout == "B2nd"  # by its name
    assert ca.zeros(4, rootdir=str(tmp_path / "s"), format="superchunk").layout == "Superchunk"
    with defaults_ctx(format="superchunk"):
        assert ca.zeros(4, rootdir=str(tmp_path / "c")).layout == "Superchunk"
        assert defaults.format == "superchunk"
    assert defaults.format == "bcolz"
    defaults.reset()
    assert defaults.format is None
    v = ca.ctable({"x": np.arange(3)}, rootdir=str(tmp_path / "v"))
    assert v["x"].layout == "Superchunk" and not v.auto_flush  # carray's own: versioned


def test_format_default_leaves_the_columns_of_versioned_tables_alone(tmp_path):
    t = ca.ctable({"x": np.arange(3)}, rootdir=str(tmp_path / "v"))
    defaults.format = "bcolz"
    t.addcol(np.arange(3.0), name="y")  # a member of the versioned table, not a bcolz dir
    assert t["y"].layout == "Superchunk"
    t.close()
    reopened = ca.open(str(tmp_path / "v"))
    assert reopened.names == ["x", "y"] and reopened.version is not None


@pytest.mark.parametrize("value", ["b2nd", "zarr", 1])
def test_format_default_is_checked(value):
    with pytest.raises(ValueError, match="format"):
        defaults.format = value
    with pytest.raises(ValueError, match="format"):
        with defaults_ctx(format=value):
            pass
    assert defaults.format is None
