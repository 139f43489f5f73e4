"""Keys: orthogonal keys, numpy's own advanced indexing resolved to coordinates, and
the row selections of tables, each checked against numpy."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from strategies import keys, numpy_keys, reference

import carray as ca
from carray.chunks.keys import coordinate_key, needs_coordinates, orthogonal_key, select
from carray.errors import CArrayError, IndexingError

SETTINGS = settings(max_examples=200, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])
SHAPES = st.lists(st.integers(0, 7), min_size=1, max_size=4).map(tuple)


@SETTINGS
@given(SHAPES, st.data())
def test_orthogonal_keys_pick_the_reference_positions(shape, data):
    key, wants, ints = data.draw(keys(shape))
    okey = orthogonal_key(key, shape)
    arr = np.arange(int(np.prod(shape))).reshape(shape)
    expected = reference(arr, wants, ints, key)
    assert okey.out_shape == expected.shape
    for part, want in zip(okey.axes, wants, strict=True):
        assert list(np.asarray(part if not isinstance(part, range) else list(part))) == \
            [int(w) for w in want]


@SETTINGS
@given(SHAPES, st.data())
def test_coordinate_keys_are_numpys_advanced_indexing(shape, data):
    key = data.draw(numpy_keys(shape))
    arr = np.arange(int(np.prod(shape))).reshape(shape)
    try:
        expected = arr[key]
    except (IndexError, ValueError, TypeError) as exc:
        with pytest.raises(type(exc)):
            coordinate_key(key, shape)
        return
    ckey = coordinate_key(key, shape)
    assert ckey.out_shape == np.shape(expected)
    got = arr[tuple(ckey.coords)] if ckey.coords else arr[()]
    np.testing.assert_array_equal(got, expected)


def test_only_nd_masks_need_coordinates():
    assert needs_coordinates((np.ones((2, 3), bool),))
    assert needs_coordinates(np.ones((2, 3), bool))
    assert not needs_coordinates(([1, 2], [3, 4]))
    assert not needs_coordinates(np.ones(3, bool))


@SETTINGS
@given(st.integers(0, 30), st.data())
def test_row_selections_match_numpy(n, data):
    arr = np.arange(n * 2).reshape(n, 2)
    bound = st.none() | st.integers(-n - 2, n + 2)
    k = data.draw(st.builds(slice, bound, bound, st.sampled_from([None, 1, 3, -1, -2]))
                  | hnp.arrays(bool, n)
                  | (st.lists(st.integers(-n, n - 1), max_size=5) if n else st.just([])))
    sel = select(k, arr.shape)
    picked = np.array(list(sel.rows), dtype=np.intp) if isinstance(sel.rows, range) \
        else sel.rows
    rows = arr[picked]
    got = rows if sel.post is None else rows[sel.post]
    np.testing.assert_array_equal(got, arr[k])


@pytest.mark.parametrize(("key", "exc", "match"), [
    ((5, 0), IndexError, "out of bounds for axis 0"),
    ((0, -5), IndexError, "out of bounds for axis 1"),
    (([0, 5],), IndexError, "index 5 is out of bounds"),
    ((np.array([-6]),), IndexError, "index -6"),
    ((np.ones(3, bool),), IndexError, "boolean index did not match"),
    ((0, 0, 0), IndexError, "too many indices"),
    ((Ellipsis, 0, Ellipsis), IndexError, "single ellipsis"),
    ((1.5,), IndexError, "valid indices"),
    ((np.ones((5, 4), bool),), TypeError, "boolean mask"),
    ((np.zeros((2, 2), int),), TypeError, "1-d index arrays"),
    ((True,), TypeError, "boolean scalar"),
    ((slice(None, None, 0),), ValueError, "zero"),
])
def test_key_errors(key, exc, match):
    with pytest.raises(exc, match=match) as info:
        orthogonal_key(key, (5, 4))
    # Every IndexError is a carray error too (what a file's claims may make a read hit).
    assert isinstance(info.value, CArrayError) == (exc is IndexError)


def test_keys_that_do_not_fit_an_array_raise_indexing_errors(tmp_path):
    zero_d = ca.carray(np.float64(3.5), rootdir=str(tmp_path / "z.b2nd"), mode="w")
    for key in (slice(None), 0, (Ellipsis, Ellipsis)):
        with pytest.raises(IndexingError, match="indices|ellipsis"):
            zero_d[key]
    for key in (5, -6, (0, 9), [0, 7]):
        with pytest.raises(IndexingError, match="out of bounds"):
            ca.carray(np.ones((5, 4)))[key]
    with pytest.raises(IndexingError, match="out of bounds"):
        select(7, (5,))


