"""Fuzz every parser: damaged fixtures and generated metadata read, or raise a carray error.

Each case runs in a worker process (see ``fuzzing.py``) so that a segfault or a
hang fails one case instead of the run, and an allocation of what a damaged
header claims fails under the worker's memory cap.  By default the whole
module takes about 40 s; ``CARRAY_FUZZ_CASES=N`` runs N cases of every kind
(and lifts the time budget) for a soak.
"""

from __future__ import annotations

import json
import os
import time

import fuzzing
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from metafiles import read_meta

SOAK = int(os.environ.get(fuzzing.CASES_ENV, "0"))
CASES = SOAK or 150
#: Seconds each kind may take by default (eight kinds, plus the JSON tests).
BUDGET = None if SOAK else 3.5


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    return fuzzing.make_superchunk_fixtures(tmp_path_factory.mktemp("made"))


@pytest.fixture(scope="module")
def fuzzer(tmp_path_factory):
    f = fuzzing.Fuzzer(tmp_path_factory.mktemp("scratch"))
    yield f
    f.close()


def _check(results: list[tuple[str, dict]]) -> None:
    bad = [(case, r) for case, r in results if r["outcome"] in fuzzing.BAD]
    assert not bad, "\n\n".join(f"{r['outcome']} {case} ({r['what']}):\n{r['detail']}"
                                for case, r in bad[:5])


@pytest.mark.parametrize("kind", fuzzing.KINDS)
def test_unmutated_fixtures_read_or_raise_typed(kind, made, fuzzer):
    results = [(f.name, fuzzer.run(kind, f, -1)) for f in fuzzing.fixtures(kind, made)]
    _check(results)
    # The readers work: most fixtures of every kind read back whole.
    assert sum(r["outcome"] == "ok" for _, r in results) >= len(results) // 3


@pytest.mark.parametrize("kind", fuzzing.KINDS)
def test_mutated_fixtures_read_or_raise_typed(kind, made, fuzzer):
    start = time.monotonic()
    results = []
    for fixture, seed, donors in fuzzing.cases(kind, fuzzing.fixtures(kind, made), CASES,
                                               base_seed=7):
        if BUDGET is not None and results and time.monotonic() - start > BUDGET:
            break
        results.append((f"{fixture.name} seed={seed}", fuzzer.run(kind, fixture, seed, donors)))
    _check(results)
    assert len(results) >= min(CASES, 10)


def test_crash_and_hang_fail_the_case_not_the_run(tmp_path):
    fixture = fuzzing.DATA / "ds" / "medium.ds"
    f = fuzzing.Fuzzer(tmp_path, timeout=3.0)
    try:
        assert f.run("selftest-crash", fixture, -1)["outcome"] == "crash"
        assert f.run("selftest-hang", fixture, -1)["outcome"] == "hang"
        # A new worker takes the next case.
        assert f.run("ds", fixture, -1)["outcome"] == "ok"
    finally:
        f.close()


# -- generated JSON metadata -------------------------------------------------------------------

_scalars = (st.none() | st.booleans() | st.integers()
            | st.sampled_from([2**63, 2**64, 10**400, -10**400])
            | st.floats() | st.text(max_size=8)
            | st.sampled_from(["O", "T", "|O", "<f8", "S0", "V0", "[('a', 'O'), ('b', '<i8')]",
                               "int64", "zstd", "blosclz", "adler32", "carray-superchunk"]))
_json = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=4)
                     | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12)


def _near(original: dict) -> st.SearchStrategy:
    """The real document with some fields replaced, dropped or added."""
    keys = sorted(original)
    return st.builds(
        lambda changes, dropped, extra: {
            **{k: v for k, v in original.items() if k not in dropped}, **changes, **extra},
        st.dictionaries(st.sampled_from(keys), _json, max_size=3),
        st.sets(st.sampled_from(keys), max_size=2),
        st.dictionaries(st.text(max_size=6), _json, max_size=1))


def _doc(obj, checked: bool = False) -> bytes:
    """A generated document; ``checked``: with a valid checksum, as carray writes the
    file (so the reader's checks of its content are reached)."""
    if checked and isinstance(obj, dict) and "crc32" not in obj:
        from carray.core.checkedjson import dumps_checked

        return dumps_checked(obj)
    return (json.dumps(obj) + "\n").encode()


def _load(path) -> dict:
    return read_meta(path)


_JSON_SETTINGS = settings(max_examples=60 if not SOAK else SOAK, deadline=None,
                          suppress_health_check=list(HealthCheck))


@pytest.mark.parametrize("meta", ["storage", "sizes"])
def test_generated_superchunk_metadata(meta, made, fuzzer):
    # meta/sizes exists only in directories written before versions (format 2).
    target = made / "sc_records" if meta == "storage" else \
        fuzzing.DATA / "carray_v2" / "a1d.carray"
    original = _load(target / "meta" / meta)

    @_JSON_SETTINGS
    @given(_near(original) | _json)
    def check(doc):
        r = fuzzer.run("superchunk", target, -1,
                       files={f"meta/{meta}": _doc(doc, checked=meta == "storage")})
        assert r["outcome"] not in fuzzing.BAD, r["detail"]

    check()


@pytest.mark.parametrize("fixture, meta", [("c_structured.bcolz", "meta/storage"),
                                           ("c_md_f8_4d.bcolz", "meta/sizes"),
                                           ("c_i4_attrs_only.bcolz", "__attrs__")])
def test_generated_bcolz_metadata(fixture, meta, fuzzer):
    target = fuzzing.DATA / "bcolz" / fixture
    original = _load(target / meta)

    @_JSON_SETTINGS
    @given(_near(original) | _json)
    def check(doc):
        r = fuzzer.run("bcolz", target, -1, files={meta: _doc(doc)})
        assert r["outcome"] not in fuzzing.BAD, r["detail"]

    check()


def _typed_attr():
    leaf = st.fixed_dictionaries({"type": st.sampled_from(
        ["none", "bool", "int", "float", "complex", "string", "bytes", "scalar", "array",
         "list", "tuple", "dict", "other"]), "value": _json},
        optional={"dtype": _json | st.sampled_from(["<f8", "|O", "S3", "T"]),
                  "shape": _json, "encoding": st.just("base64")})
    return st.dictionaries(st.text(max_size=6), leaf | _json, max_size=4)


def test_generated_superchunk_attrs(made, fuzzer):
    target = made / "sc_i8_attrs"

    @_JSON_SETTINGS
    @given(_typed_attr())
    def check(doc):
        r = fuzzer.run("superchunk", target, -1, files={"meta/attrs": _doc(doc)})
        assert r["outcome"] not in fuzzing.BAD, r["detail"]

    check()
