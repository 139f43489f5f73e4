"""carray.core.safejson: JSON metadata parsed with bounded nesting, failures typed."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from carray.core.safejson import MAX_DEPTH, json_depth, load_json
from carray.errors import FormatError


@pytest.mark.parametrize("text, depth", [
    ("1", 0), ("[]", 1), ('{"a": [1, {"b": []}]}', 4), ('["[[[["]', 1),
    ('{"k\\"[[": "]]]"}', 1), ('"[["', 0),
])
def test_depth(text, depth):
    assert json_depth(text) == depth


def test_deep_nesting_is_a_format_error():
    for doc in (b"[" * 100_000, b'{"a":' * 50_000, b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1)):
        with pytest.raises(FormatError, match="meta/attrs.*levels deep"):
            load_json(doc, "ds/meta/attrs", what="meta/attrs")


def test_nesting_up_to_the_bound_parses():
    doc = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert json_depth(doc) == MAX_DEPTH
    assert load_json(doc, "f") == json.loads(doc)


@pytest.mark.parametrize("doc", [b"\xff", b"{", b"[1,]", b"1" * 5000, b"", b'{"a": 1} x'])
def test_bad_documents_are_format_errors(doc):
    with pytest.raises(FormatError, match="some/file"):
        load_json(doc, "some/file")


def test_nan_and_infinity_as_bcolz_writes_them():
    obj = load_json(b'{"dflt": NaN, "x": Infinity}\n', "f")
    assert math.isnan(obj["dflt"]) and obj["x"] == math.inf


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20)


@settings(max_examples=200, deadline=None)
@given(json_values)
def test_round_trips_what_json_writes(value):
    assert load_json(json.dumps(value).encode(), "f") == value


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200) | st.text(alphabet='[]{}",:\\ 0a', max_size=300))
def test_any_bytes_parse_or_raise_format_error(data):
    try:
        load_json(data, "f")
    except FormatError:
        pass


def test_brackets_inside_strings_do_not_count():
    # More opening brackets than MAX_DEPTH, all but one inside a string: measured, accepted.
    doc = json.dumps(["[" * (2 * MAX_DEPTH)])
    assert load_json(doc, "f") == ["[" * (2 * MAX_DEPTH)]


def test_small_documents_skip_the_depth_measure(monkeypatch):
    import carray.core.safejson as safejson

    def never(text):
        raise AssertionError("measured a document that cannot be too deep")

    monkeypatch.setattr(safejson, "json_depth", never)
    assert load_json(b'{"a": [1, {"b": []}]}', "f") == {"a": [1, {"b": []}]}
    with pytest.raises(AssertionError):
        load_json("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), "f")
