"""carray.core.defaults: how a new array's ``cparams`` argument resolves against the defaults."""

from __future__ import annotations

import pytest

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
