"""Table indexes: built out of core, kept correct under every change and version, used
by queries by themselves (and only where they answer as the scan does)."""

from __future__ import annotations

import os

import numpy as np
import pytest

import carray as ca
from carray.errors import IndexUnsupportedError, ReadOnlyError
from carray.table.index import build as _index_build
from carray.table.index import methods as table_index
from carray.table.index import planner as index_planner

pd = pytest.importorskip("pandas", reason="pandas: queries are compared with it")


def _frame(n: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.random(n)
    x[rng.random(n) < 0.02] = np.nan
    return {"k": rng.integers(0, n // 4 + 1, n), "x": x, "u": rng.permutation(n),
            "s": np.array([f"s{i % 7}" for i in range(n)], dtype=object)}


@pytest.fixture(params=["memory", "disk"])
def make(request, tmp_path):
    """A table maker: in memory, or on disk (versioned)."""
    def maker(cols, **kwargs):
        rootdir = str(tmp_path / "t") if request.param == "disk" else None
        return ca.ctable(cols, rootdir=rootdir, chunklen=256, fsync=False, **kwargs)
    return maker


def _expected(cols: dict, expr: str) -> np.ndarray:
    """Row numbers where ``expr`` holds, by pandas."""
    df = pd.DataFrame({k: v for k, v in cols.items() if k != "s"})
    return np.flatnonzero(df.eval(expr.replace("&", " and ")).to_numpy(dtype=bool))


def _rows(t, expr: str, **kwargs) -> np.ndarray:
    return t.fetchwhere(expr, outcols="nrow__", **kwargs)["nrow__"]


def _uses_index(t, expr: str) -> bool:
    return "index on" in t.explain(expr).splitlines()[2]


QUERIES = ["u == 17", "u in [3, 99, 1500, 5]", "(x >= 0.25) & (x < 0.2512)", "x > 0.999",
           "(k == 3) & (x < 0.5)", "x <= 0.0005", "(u >= 100) & (u <= 101) & (k >= 0)",
           "k in [0, 1]", "(u > 10) & (u < 10)", "x == 0.5"]


def test_a_small_memory_bound_sorts_in_runs_and_merges(make, monkeypatch):
    merges = []
    real = _index_build.merge
    monkeypatch.setattr(_index_build, "merge", lambda runs, b: merges.append(len(runs))
                        or real(runs, b))
    cols = _frame(12_000)
    t = make(cols)
    t.create_index("u", memory=1 << 16)
    t.create_index("x", memory=1 << 16)
    assert len(merges) > 2  # several runs, merged in passes
    _, index = t.lookup_index("u")
    assert np.array_equal(index.values[:], np.arange(12_000))
    assert np.array_equal(cols["u"][index.rows[:]], index.values[:])
    for expr in QUERIES:
        assert np.array_equal(_rows(t, expr), _expected(cols, expr)), expr
    assert _uses_index(t, "u == 17") and _uses_index(t, "(x >= 0.25) & (x < 0.2512)")
    assert not _uses_index(t, "x > 0.2")  # most rows: the scan is cheaper


def test_query_forms_skip_limit_and_outcols_answer_as_the_scan(make):
    cols = _frame(5000)
    t = make(cols)
    expr = "(x >= 0.2) & (x < 0.205)"
    scan = t.fetchwhere(expr)
    t.create_index("x")
    assert _uses_index(t, expr)
    assert np.array_equal(t.fetchwhere(expr), scan)
    assert np.array_equal(t[expr], scan)
    for skip, limit in [(0, 5), (3, 4), (10, None), (1000, 3)]:
        got = t.fetchwhere(expr, outcols="nrow__, s, x", skip=skip, limit=limit)
        want = np.flatnonzero((cols["x"] >= 0.2) & (cols["x"] < 0.205))
        want = want[skip:None if limit is None else skip + limit]
        assert list(got["nrow__"]) == list(want) and list(got["s"]) == list(cols["s"][want])
    assert [r.u for r in t.where(expr)] == list(scan["u"])
    blocks = list(t.whereblocks(expr, blen=7, outcols=["u", "nrow__"]))
    assert np.array_equal(np.concatenate(blocks)["u"], scan["u"])
    assert sum(1 for _ in t.where(expr)) == len(scan)
    lo = 0.2
    assert np.array_equal(t.fetchwhere("(x >= lo) & (x < 0.205)"), scan)  # a variable
    assert lo == 0.2


def test_appends_are_found_and_merged_when_the_tail_grows(make, monkeypatch):
    monkeypatch.setattr(table_index, "MERGE_ROWS", 100)
    cols = _frame(2000)
    t = make(cols)
    t.create_index("u")
    build = t.lookup_index("u")[0]["build"]
    t.append({"u": [17, 5000], "k": [1, 2], "x": [0.1, 0.2], "s": ["a", "b"]})
    assert t.indexes["u"]["tail"] == 2
    assert t.lookup_index("u")[0]["build"] == build
    assert list(_rows(t, "u == 17")) == [int(np.flatnonzero(cols["u"] == 17)[0]), 2000]
    assert list(_rows(t, "u == 5000")) == [2001]
    t.append({k: v[:300] for k, v in _frame(300, seed=1).items()})
    t.flush()  # the commit merges a grown tail
    assert t.indexes["u"]["tail"] == 0 and t.lookup_index("u")[0]["build"] != build
    allu = t.cols["u"][:]
    assert list(_rows(t, "u in [17, 5000, 3]")) == list(np.flatnonzero(np.isin(allu,
                                                                              [17, 5000, 3])))


def test_edits_shrinks_and_growths_keep_answers_right(make):
    cols = _frame(3000)
    t = make(cols, auto_flush=True)  # every change committed: its index state with it
    # In memory auto_flush is off whatever is asked (as in bcolz): commit by hand.
    done = t.flush if not t.auto_flush else (lambda: None)
    t.create_index("u")
    t.create_index("x", kind="sorted")
    where17 = int(np.flatnonzero(cols["u"] == 17)[0])
    t[where17] = (0, 0.5, 10**6, "e")  # an edit moves a value
    done()
    assert t.indexes["u"]["dirty"] == 256  # its chunk, checked by queries
    t[[5, 6]] = np.array([(0, 0.5, 17, "f")] * 2, dtype=t.dtype)
    done()
    # A second chunk is more than an eighth of the rows: rebuilt at the commit.
    assert t.indexes["u"]["dirty"] == (0 if where17 >= 256 else 256)
    assert list(_rows(t, "u == 17")) == [5, 6] and list(_rows(t, "u == 1000000")) == [where17]
    assert list(_rows(t, "x == 0.5")) == [5, 6, where17]
    t["u"] = np.arange(3000)[::-1]  # the whole column: rebuilt at the commit
    done()
    assert t.indexes["u"]["rows"] == 3000 and t.indexes["u"]["dirty"] == 0
    assert list(_rows(t, "u == 17")) == [2982]
    t.resize(1000)
    done()
    assert t.indexes["u"]["rows"] == 1000 and list(_rows(t, "u == 2500")) == [499]
    assert len(_rows(t, "u == 17")) == 0
    t.resize(1500)  # grown rows hold the default, found by the tail scan
    done()
    assert list(_rows(t, "(u == 0) & (x == 0)")) == list(range(1000, 1500))
    t.trim(100)
    done()
    assert list(_rows(t, "u == 2500")) == [499] and len(t) == 1400
    t.delcol("u")
    done()
    assert "u" not in t.indexes
    t.addcol(np.arange(1400), name="u")
    done()
    assert "u" not in t.indexes and list(_rows(t, "u == 17")) == [17]


@pytest.mark.parametrize("flush", [True, False])
def test_edits_through_a_column_are_seen(make, flush):
    cols = _frame(6000)
    t = make(cols, auto_flush=flush)
    t.create_index("u")
    first = int(np.flatnonzero(cols["u"] == 17)[0])
    t.cols["u"][first] = -5  # not through the table
    t.cols["u"][[7, 5999]] = 17  # 5999: the partial last chunk
    assert list(_rows(t, "u == 17")) == [7, 5999] and list(_rows(t, "u == -5")) == [first]
    t.flush()
    # Their chunks, and the partial last one (its digest changed).
    assert t.indexes["u"]["dirty"] == 256 * len({0, first // 256} - {23}) + 6000 - 23 * 256
    assert list(_rows(t, "u == 17")) == [7, 5999]
    if t.rootdir is not None:
        t.close()
        r = ca.ctable(rootdir=t.rootdir, mode="r")
        assert list(_rows(r, "u == 17")) == [7, 5999] and _uses_index(r, "u == 17")


def test_a_shrink_into_a_chunk_then_a_column_edit_is_seen(tmp_path):
    t = ca.ctable({"u": np.arange(1000)}, rootdir=str(tmp_path / "t"), chunklen=256, fsync=False)
    t.create_index("u")
    t.resize(700)  # chunk 2 (512..767) becomes the partial one
    t.cols["u"][600] = 5000  # its writes are told to nobody
    t.flush()
    t.close()
    r = ca.ctable(rootdir=str(tmp_path / "t"), mode="r")
    assert list(_rows(r, "u == 5000")) == [600] and len(_rows(r, "u == 600")) == 0


def test_every_version_answers_from_its_own_index(tmp_path):
    cols = _frame(2000)
    t = ca.ctable(cols, rootdir=str(tmp_path / "t"), chunklen=256,
                  storage={"versions": "all"}, fsync=False, auto_flush=True)
    v0 = t.version
    t.create_index("u")
    v1 = t.version
    t.append({"u": [17], "k": [0], "x": [0.0], "s": ["a"]})
    v2 = t.version
    t[0] = (0, 0.0, 17, "b")
    v3 = t.version
    t.drop_index("u")
    t.create_index("u", kind="bloom")
    v4 = t.version
    t.close()
    first = int(np.flatnonzero(cols["u"] == 17)[0])
    want = {v0: [first], v1: [first], v2: [first, 2000], v3: [0, first, 2000],
            v4: [0, first, 2000]}
    kinds = {v0: None, v1: "sorted", v2: "sorted", v3: "sorted", v4: "bloom"}
    for version, rows in want.items():
        old = ca.ctable(rootdir=str(tmp_path / "t"), version=version)
        assert old.indexes.get("u", {}).get("kind") == kinds[version]
        assert list(_rows(old, "u == 17")) == rows, version
        assert _uses_index(old, "u == 17") == (kinds[version] is not None)
        old.close()


def test_reopened_and_read_only_tables_use_the_index_and_never_write(tmp_path):
    cols = _frame(3000)
    root = tmp_path / "t"
    t = ca.ctable(cols, rootdir=str(root), chunklen=256, fsync=False)
    t.create_index("u")
    t.close()

    def listing():
        return sorted((str(p.relative_to(root)), p.stat().st_mtime_ns)
                      for p in root.rglob("*") if p.is_file() and "lock" not in p.name)

    before = listing()
    r = ca.ctable(rootdir=str(root), mode="r")
    assert r.indexes["u"]["usable"] and _uses_index(r, "u in [4, 5]")
    assert list(_rows(r, "u in [4, 5]")) == list(np.flatnonzero(np.isin(cols["u"], [4, 5])))
    with pytest.raises(ReadOnlyError):
        r.create_index("x")
    with pytest.raises(ReadOnlyError):
        r.drop_index("u")
    r.close()
    assert listing() == before


def test_a_dropped_index_goes_and_its_build_with_it(tmp_path):
    t = ca.ctable(_frame(1000), rootdir=str(tmp_path / "t"), chunklen=256, fsync=False)
    t.create_index("u")
    builds = tmp_path / "t" / "__indexes__"
    assert len(os.listdir(builds)) == 1
    t.drop_index("u")
    assert t.indexes == {} and os.listdir(builds) == []
    with pytest.raises(IndexUnsupportedError, match="no index"):
        t.drop_index("u")
    assert not _uses_index(t, "u == 3")


def test_what_cannot_be_indexed_says_so(tmp_path):
    t = ca.ctable(_frame(100))
    with pytest.raises(IndexUnsupportedError, match="string"):
        t.create_index("s")
    with pytest.raises(IndexUnsupportedError, match="kind"):
        t.create_index("u", kind="hash")
    with pytest.raises(KeyError):
        t.create_index("nope")
    b = ca.ctable({"u": np.arange(10)}, rootdir=str(tmp_path / "b"), format="bcolz")
    with pytest.raises(IndexUnsupportedError, match="bcolz"):
        b.create_index("u")
    with pytest.raises(IndexUnsupportedError, match="bloom"):
        ca.ctable({"f": np.array(["a", "b"])}).create_index("f", kind="bloom")


def test_categorical_columns_are_refused_for_now(monkeypatch):
    """Until categorical columns land, a fake says ``u`` is one (its values are codes)."""
    t = ca.ctable(_frame(100))
    t.create_index("u")
    monkeypatch.setattr(table_index, "categories_of",
                        lambda col: np.array(["a"]) if col is t.cols["u"] else None)
    with pytest.raises(IndexUnsupportedError, match="categorical"):
        t.create_index("u")
    assert t.lookup_index("u") is None and not _uses_index(t, "u == 3")


def test_explain_names_the_index_or_the_scan(make):
    t = make(_frame(4000))
    assert "full scan" in t.explain("u == 3") and "no condition" in t.explain("u == 3")
    t.create_index("u")
    plan = t.explain("(u == 3) & (x > 0.5)")
    assert "sorted index on 'u'" in plan and "u == 3" in plan and "1 candidate rows" in plan
    assert "scan is cheaper" in t.explain("u > 5")
    t.drop_index("u")
    t.create_index("u", kind="bloom")
    assert "bloom index on 'u'" in t.explain("u in [3, 4]")
    assert "full scan" in t.explain("u < 3")  # ranges: not a bloom's


def test_bloom_answers_as_the_scan(make):
    cols = _frame(6000)
    cols["u"] = cols["u"].astype(np.int32)
    t = make(cols)
    t.create_index("u", kind="bloom")
    t.create_index("x", kind="bloom")
    for expr in ["u == 17", "u in [3, 99, 1500, 5]", "(u == 40) & (k > 2)", "u == 17.5",
                 "x == 0.5", f"x == {float(cols['x'][77])!r}", "u == -3"]:
        assert np.array_equal(_rows(t, expr), _expected(cols, expr)), expr
    t[10] = (0, 0.0, 17, "z")
    assert list(_rows(t, "u == 17")) == sorted({10, *np.flatnonzero(cols["u"] == 17)})


def test_missing_values_never_match_through_the_index(make, monkeypatch):
    """With the contract's read_valid saying -1 is missing (a fake until missing values
    land), the index leaves those rows out and the planner never returns them."""
    def fake_valid(col, rows):
        values = col.read_rows(rows) if isinstance(rows, range) else col.take(rows)
        return values != -1 if values.dtype.kind == "i" else None

    monkeypatch.setattr(_index_build, "read_valid", fake_valid)
    monkeypatch.setattr(index_planner, "read_valid", fake_valid)
    u = np.arange(1000)
    u[::10] = -1
    t = make({"u": u, "v": np.arange(1000.0)})
    t.create_index("u")
    assert len(t.lookup_index("u")[1].values) == 900
    assert len(_rows(t, "u == -1")) == 0 and len(_rows(t, "u in [-1, 3]")) == 1
    t.append({"u": [-1, 5], "v": [0.0, 1.0]})  # the tail is checked, validity too
    assert list(_rows(t, "u in [-1, 5]")) == [5, 1001]


@pytest.mark.parametrize("expr", ["(k == 7) & (v > 0.5)", "(k == 7) | (v > 2)",
                                  "(k == 7) & ~(v > 0.5)", "k in [3, 7]", "v > 0.5"])
def test_nullable_columns_answer_through_the_index_as_the_scan(make, expr):
    """Real missing values: candidate rows are checked three-valued, and output columns
    with missing values come back masked, as the scan gives them."""
    rng = np.random.default_rng(3)
    v = np.ma.MaskedArray(rng.random(3000), mask=rng.random(3000) < 0.2)
    k = np.ma.MaskedArray(rng.integers(0, 40, 3000), mask=rng.random(3000) < 0.1)
    t = make({"k": k, "v": v})
    scan = t.fetchwhere(expr, outcols=["nrow__", "k", "v"])
    t.create_index("k")
    got = t.fetchwhere(expr, outcols=["nrow__", "k", "v"])
    assert np.array_equal(got["nrow__"], scan["nrow__"])
    for name in "kv":
        assert isinstance(got[name], np.ma.MaskedArray)
        assert np.array_equal(np.ma.getmaskarray(got[name]), np.ma.getmaskarray(scan[name]))
        assert np.ma.allequal(got[name], scan[name])
    df = pd.DataFrame({"k": pd.array(k.filled(0), dtype="Int64"),
                       "v": pd.array(v.filled(0.0), dtype="Float64")})
    df.loc[k.mask, "k"] = pd.NA
    df.loc[v.mask, "v"] = pd.NA
    want = df.eval(expr.replace("~", "not ").replace("&", " and ").replace("|", " or "),
                   engine="python")
    assert np.array_equal(got["nrow__"], np.flatnonzero(want.fillna(False).to_numpy(bool)))


def test_a_failed_build_leaves_the_table_and_its_index(tmp_path, monkeypatch):
    cols = _frame(10_000)
    t = ca.ctable(cols, rootdir=str(tmp_path / "t"), chunklen=256, fsync=False)
    t.create_index("u")
    good = t.lookup_index("u")[0]["build"]
    calls = []
    real = _index_build.valid_rows

    def failing(col, lo, hi):
        calls.append(1)
        if len(calls) > 2:  # two sorted runs are on disk
            raise OSError("disk full (injected)")
        return real(col, lo, hi)

    monkeypatch.setattr(_index_build, "valid_rows", failing)
    with pytest.raises(OSError, match="injected"):
        t.create_index("u", memory=1 << 16)
    monkeypatch.setattr(_index_build, "valid_rows", real)
    assert t.lookup_index("u")[0]["build"] == good
    assert list(_rows(t, "u == 17")) == list(np.flatnonzero(cols["u"] == 17))
    t.append({"u": [1], "k": [1], "x": [1.0], "s": ["a"]})
    t.flush()  # a commit tidies the remains
    assert os.listdir(tmp_path / "t" / "__indexes__") == [good]
    t.close()
    r = ca.ctable(rootdir=str(tmp_path / "t"), mode="r")
    assert r.indexes["u"]["usable"] and list(_rows(r, "u == 1")) == sorted(
        [*np.flatnonzero(cols["u"] == 1), 10_000])


# -- kill -9 while an index is built or updated (see kill_points) -----------------------------

KILL_TRIALS = int(os.environ.get("CARRAY_SOAK_TRIALS", "40")) \
    if os.environ.get("CARRAY_SOAK") == "1" else 2
KILL_QUERIES = ["u == 17", "u in [1, 2, 3000]", "(u >= 100) & (u < 140)", "u == -5"]


def _kill_create(root: str) -> None:
    ca.ctable(_frame(3000), rootdir=root, chunklen=256, fsync=False).close()


def _kill_write(root: str) -> None:
    """Build with runs and merges on disk, then change the table (a rebuild included)."""
    from kill_points import report

    t = ca.ctable(rootdir=root, mode="a", fsync=False)
    t.create_index("u", memory=1 << 16)
    report(1)
    t.cols["u"][[5, 2999]] = -5
    t.append({"u": np.arange(3000, 3700), "k": np.zeros(700, np.int64),
              "x": np.zeros(700), "s": np.array(["a"] * 700, dtype=object)})
    report(2)
    t.close()


def _kill_check(root: str) -> str:
    """Every query answers as a scan of the state opened, read-only and then writable."""
    for mode in ("r", "a"):
        t = ca.ctable(rootdir=root, mode=mode)
        u = t.cols["u"][:]
        for expr in KILL_QUERIES:
            want = np.flatnonzero(pd.DataFrame({"u": u}).eval(expr.replace("&", " and ")))
            if list(_rows(t, expr)) != list(want):
                return f"mode {mode!r}: {expr} answered {list(_rows(t, expr))}, not {list(want)}"
        t.close()
    return "ok"


def drive_index_kills(work: str, trials: int, seed: int) -> dict:
    """Kill the writer at a random write ``trials`` times; the tally of the checks."""
    import shutil

    from kill_points import HOW, count_calls, in_child

    def count(root: str) -> int:
        calls = count_calls()
        _kill_write(root)
        return calls[0]

    rng = np.random.default_rng(seed)
    pristine = os.path.join(work, "pristine")
    assert in_child(_kill_create, pristine).error is None
    counting = os.path.join(work, "counting")
    shutil.copytree(pristine, counting)
    total = in_child(count, counting).result
    tally: dict[str, int] = {}
    for trial in range(trials):
        root = os.path.join(work, f"t{trial}")
        shutil.copytree(pristine, root)
        at, how = int(rng.integers(1, total + 1)), HOW[int(rng.integers(0, len(HOW)))]
        killed = in_child(_kill_write, root, at=at, how=how)
        checked = in_child(_kill_check, root) if killed.error is None else killed
        result = checked.result if checked.error is None else checked.error.splitlines()[-1]
        tally[result] = tally.get(result, 0) + 1
    return tally


def test_kill9_while_indexing_leaves_a_table_that_answers_right(tmp_path):
    from kill_points import run_driver

    tally = run_driver("test_table_index", "drive_index_kills", str(tmp_path), KILL_TRIALS, 5)
    assert tally == {"ok": KILL_TRIALS}


def test_a_missing_build_falls_back_to_the_scan(tmp_path):
    import shutil

    cols = _frame(2000)
    t = ca.ctable(cols, rootdir=str(tmp_path / "t"), chunklen=256, fsync=False)
    t.create_index("u")
    build = t.lookup_index("u")[0]["build"]
    t.close()
    shutil.rmtree(tmp_path / "t" / "__indexes__" / build)
    r = ca.ctable(rootdir=str(tmp_path / "t"), mode="r")
    assert not r.indexes["u"]["usable"] and not _uses_index(r, "u == 17")
    assert list(_rows(r, "u == 17")) == list(np.flatnonzero(cols["u"] == 17))


# -- random tables, changes and predicates: the index answers as pandas does ------------------

hyp = pytest.importorskip("hypothesis", reason="hypothesis: random tables and queries")
st = hyp.strategies


@st.composite
def _predicates(draw):
    """An expression over ``a`` (ints, repeats) and ``f`` (floats, NaN) and its pandas
    mask."""
    v, w = draw(st.integers(-3, 40)), draw(st.integers(-3, 40))
    lo, hi = min(v, w), max(v, w)
    x = draw(st.sampled_from([0.0, 0.1, 0.5, 0.9, 0.25]))
    ops = {"<": "lt", "<=": "le", ">": "gt", ">=": "ge", "==": "eq"}
    op = draw(st.sampled_from(sorted(ops)))
    return draw(st.sampled_from([
        (f"a == {v}", lambda d: d.a == v),
        (f"a in [{v}, {w}, 7]", lambda d: d.a.isin([v, w, 7])),
        (f"(a >= {lo}) & (a < {hi})", lambda d: (d.a >= lo) & (d.a < hi)),
        (f"{v} {op} a", lambda d: getattr(d.a, {"<": "gt", "<=": "ge", ">": "lt", ">=": "le",
                                                  "==": "eq"}[op])(v)),
        (f"(a == {v}) & (f > {x})", lambda d: (d.a == v) & (d.f > x)),
        (f"(f >= {x}) & (f <= {x + 0.05})", lambda d: (d.f >= x) & (d.f <= x + 0.05)),
        (f"f {op} {x}", lambda d: getattr(d.f, ops[op])(x)),
        (f"(a > {lo}) & (a <= {hi}) & (a != {v})", lambda d: (d.a > lo) & (d.a <= hi) &
         (d.a != v)),
    ]))


@st.composite
def _tables(draw):
    n = draw(st.integers(0, 400))
    a = np.array(draw(st.lists(st.integers(-2, 40), min_size=n, max_size=n)), np.int64)
    f = np.array(draw(st.lists(st.sampled_from([0.0, 0.1, 0.3, 0.5, 0.9, np.nan, -0.0, 0.25]),
                               min_size=n, max_size=n)))
    return {"a": a, "f": f}


@st.composite
def _changes(draw):
    kind = draw(st.sampled_from(["append", "edit", "resize", "none"]))
    k = draw(st.integers(1, 40))
    return kind, k, draw(st.integers(-2, 45)), draw(st.integers(0, 10_000))


@hyp.settings(max_examples=30, deadline=None,
              suppress_health_check=[hyp.HealthCheck.too_slow])
@hyp.given(cols=_tables(), kinds=st.tuples(st.sampled_from(["sorted", "bloom", None]),
                                           st.sampled_from(["sorted", "bloom", None])),
           changes=st.lists(_changes(), max_size=3), preds=st.lists(_predicates(), min_size=1,
                                                                    max_size=4),
           skip=st.integers(0, 3), limit=st.none() | st.integers(0, 5))
def test_random_tables_and_predicates_answer_as_pandas(cols, kinds, changes, preds, skip,
                                                       limit):
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(index_planner, "RANDOM_ROW_COST", 1)  # use the index wherever it can
        mp.setattr(table_index, "MERGE_ROWS", 30)
        t = ca.ctable(cols, chunklen=32)
        for col, kind in zip("af", kinds, strict=True):
            if kind is not None:
                t.create_index(col, kind=kind, memory=1 << 16)
        model = {k: v.copy() for k, v in cols.items()}
        for kind, k, value, where in changes:
            n = len(model["a"])
            if kind == "append":
                t.append({"a": np.full(k, value), "f": np.full(k, 0.5)})
                model = {"a": np.r_[model["a"], np.full(k, value)],
                         "f": np.r_[model["f"], np.full(k, 0.5)]}
            elif kind == "edit" and n:
                rows = np.unique(np.arange(where, where + k * 7, 7) % n)
                t[rows] = np.array([(value, 0.1)] * len(rows), dtype=t.dtype)
                model["a"][rows], model["f"][rows] = value, 0.1
            elif kind == "resize":
                size = where % (n + 50)
                t.resize(size)
                model = {c: np.r_[v[:size], np.zeros(max(0, size - n), v.dtype)]
                         for c, v in model.items()}
        df = pd.DataFrame(model)
        for text, mask in preds:
            want = np.flatnonzero(mask(df).to_numpy(dtype=bool))
            want = want[skip:None if limit is None else skip + limit]
            got = _rows(t, text, skip=skip, limit=limit)
            assert list(got) == list(want), (text, t.explain(text))
            got = t.fetchwhere(text, skip=skip, limit=limit)
            assert np.array_equal(got["a"], model["a"][want])


def test_nested_columns_and_restored_versions_keep_the_tables_indexes(tmp_path):
    rec = np.zeros(300, dtype=[("u", "i8"), ("v", "f8")])
    rec["u"] = np.arange(300)
    t = ca.ctable({"u": np.arange(300)[::-1].copy(), "b": rec}, rootdir=str(tmp_path / "t"),
                  chunklen=64, storage={"versions": "all"}, fsync=False)
    t.create_index("u")
    before = t.version
    t.cols["b"].flush()  # a nested column's commit leaves the table's indexes alone
    t.append({"u": [5], "b": np.zeros(1, rec.dtype)})
    assert "u" in t.indexes and list(_rows(t, "u == 5")) == [294, 300]
    assert list(t.cols["b"].fetchwhere("u == 5", outcols="nrow__")["nrow__"]) == [5]
    t.restore(before)  # the version's index comes back with its rows
    assert len(t) == 300 and list(_rows(t, "u == 5")) == [294] and _uses_index(t, "u == 5")


def test_explain_right_after_the_build_counts_no_rows_written_since(make):
    t = make({"u": np.arange(100_500)})  # 256-row chunks: a partial last chunk of 148 rows
    t.create_index("u")
    assert "+0 rows written since the build, +0 past it" in t.explain("u == 5")
    assert t.indexes["u"]["dirty"] == 0 and t.indexes["u"]["tail"] == 0
    t[100_499] = (7,)  # a change of the partial chunk: checked until the next commit
    assert "+148 rows written since the build" in t.explain("u == 5")
    assert _rows(t, "u == 7").tolist() == [7, 100_499]
    t.append({"u": [1, 2]})
    assert "+2 past it" in t.explain("u == 5")
