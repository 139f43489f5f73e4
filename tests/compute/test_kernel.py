"""The block kernel: pieces of open chunks, compiled expressions, table selection."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import carray as ca
from carray.compute.kernel import Program, piece_rows
from carray.compute.stored import stored_plan
from carray.errors import ChecksumError, FormatError

SETTINGS = settings(max_examples=30, deadline=None)


def _leaf(value):
    return isinstance(value, ca.carray)


def test_program_reuses_buffers_and_keeps_pending_reads():
    x = np.linspace(-3, 3, 60).reshape(3, 4, 5)
    y = np.cos(x)
    a, b = ca.carray(x, chunks=(2, 2, 5), blocks=(1, 2, 5)), ca.carray(y, chunks=(2, 2, 5),
                                                                       blocks=(1, 2, 5))
    # ``a`` is read by the where() itself and by a child: the child must not overwrite it.
    expr = np.where(a > 0, a - b * 2, a + 1)
    program = Program(expr, _leaf)
    assert len(program.leaves) == 2
    assert len(program.dtypes) <= 4  # two leaves, a mask, one more float at most
    np.testing.assert_array_equal(np.asarray(expr), np.where(x > 0, x - y * 2, x + 1))


@st.composite
def trees(draw, depth=3):
    """A random elementwise expression over names 'a', 'b', 'c' and constants."""
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        return draw(st.sampled_from(["a", "b", "c", 0.5, 2]))
    kind = draw(st.sampled_from(["add", "sub", "mul", "max", "where", "neg"]))
    if kind == "neg":
        return ("neg", draw(trees(depth=depth - 1)))
    if kind == "where":
        return ("where", draw(trees(depth=depth - 1)), draw(trees(depth=depth - 1)),
                draw(trees(depth=depth - 1)))
    return (kind, draw(trees(depth=depth - 1)), draw(trees(depth=depth - 1)))


def build(tree, env):
    if isinstance(tree, str):
        return env[tree]
    if not isinstance(tree, tuple):
        return tree
    kind, *args = tree
    vals = [build(t, env) for t in args]
    if kind == "neg":
        return -vals[0]
    if kind == "where":
        return np.where(vals[0] > 0, vals[1], vals[2])
    return {"add": np.add, "sub": np.subtract, "mul": np.multiply,
            "max": np.maximum}[kind](*vals)


@SETTINGS
@given(tree=trees(), shape=st.tuples(st.integers(1, 9), st.integers(1, 9)),
       blocked=st.booleans(), disk=st.booleans())
def test_expressions_in_pieces_equal_numpy(tmp_path_factory, tree, shape, blocked, disk):
    rng = np.random.default_rng(sum(shape))
    env_np = {n: rng.normal(size=shape) for n in "abc"}
    kw = {"chunks": (4, 3), "blocks": (2, 3) if blocked else None}
    root = tmp_path_factory.mktemp("k") if disk else None
    env = {n: ca.carray(v, rootdir=None if root is None else root / n, **kw)
           for n, v in env_np.items()}
    expr, want = build(tree, env), build(tree, env_np)
    if not hasattr(expr, "leaves"):
        return  # a lone operand or constant: nothing to compile
    got = np.asarray(expr)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    np.testing.assert_allclose(expr.sum(), np.sum(want), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(expr.max(axis=0), np.max(want, axis=0))


def test_results_do_not_depend_on_the_thread_count():
    rng = np.random.default_rng(3)
    x, y = rng.normal(size=(64, 48, 40)), rng.normal(size=(64, 48, 40))
    a = ca.carray(x, chunks=(16, 24, 40), blocks=(4, 8, 40))
    b = ca.carray(y, chunks=(16, 24, 40), blocks=(4, 8, 40))
    results = []
    for n in (1, 2, 3):
        ca.set_nthreads(n)
        results.append(((a * b + 1).sum(), (a * b).sum(axis=1), ((a > 0) & (b < 0)).sum()))
    ca.set_nthreads(2)
    for other in results[1:]:
        for got, first in zip(other, results[0], strict=True):
            np.testing.assert_array_equal(got, first)


def test_tail_cached_and_fill_chunks_are_served_from_their_values(tmp_path):
    x = np.arange(7 * 6 * 5, dtype=np.float64).reshape(7, 6, 5)
    a = ca.zeros((7, 6, 5), chunks=(3, 4, 5), blocks=(1, 2, 5), rootdir=tmp_path / "z")
    a[:3, :4] = x[:3, :4]  # one stored chunk; the others are runs of the fill value
    b = ca.carray(x[:4], chunks=(3, 4, 5), blocks=(1, 2, 5))
    b.append(x[4:])  # rows waiting decoded in the tail
    want = np.zeros_like(x)
    want[:3, :4] = x[:3, :4]
    np.testing.assert_array_equal(np.asarray(a * 2 + b), want * 2 + x)
    plan = stored_plan(a * 2 + b)
    assert plan is not None and plan.program.steps


def test_open_chunk_reads_ranges_and_refuses_outside(tmp_path):
    x = np.arange(1000, dtype=np.int32)
    a = ca.carray(x, chunklen=300, rootdir=tmp_path / "a")
    a.flush()
    chunk = a.engine.open_chunk(1, "test")
    out = np.empty(50, np.int32)
    np.testing.assert_array_equal(chunk.read(120, out), x[420:470])
    with pytest.raises(ValueError, match="outside"):
        chunk.read(290, out)


def test_a_damaged_chunk_fails_the_kernel_paths(tmp_path):
    x = np.linspace(0, 1, 200_000)
    t = ca.ctable(columns=[x, x[::-1].copy(), np.arange(len(x))], names=["x", "y", "i"],
                  rootdir=tmp_path / "t")
    t.flush()
    a = ca.carray(np.tile(x, 3).reshape(3, -1), chunks=(1, 50_000), rootdir=tmp_path / "a")
    a.flush()
    for path in (tmp_path / "t" / "x", tmp_path / "a"):  # x: every chunk is read
        files = sorted(p for p in path.rglob("*") if p.is_file() and p.stat().st_size > 20_000)
        data = bytearray(files[0].read_bytes())
        data[len(data) // 2] ^= 0xFF
        files[0].write_bytes(bytes(data))
    with pytest.raises((ChecksumError, FormatError)):
        ca.open(tmp_path / "t", mode="r").fetchwhere("(x < 0.5) & (y > 0.2)", outcols=["i"])
    b = ca.open(tmp_path / "a", mode="r")
    with pytest.raises((ChecksumError, FormatError)):
        (b * 2 + 1).sum()


def test_queries_through_the_kernel_equal_numpy():
    rng = np.random.default_rng(5)
    n = 300_000
    cols = {"x": rng.random(n), "y": rng.random(n), "i": np.arange(n)}
    t = ca.ctable(columns=list(cols.values()), names=list(cols))
    mask = (cols["x"] < 0.1) & (cols["y"] > 0.5)
    got = t.fetchwhere("(x < 0.1) & (y > 0.5)", outcols=["i", "x", "nrow__"])
    np.testing.assert_array_equal(got["i"], cols["i"][mask])
    np.testing.assert_array_equal(got["x"], cols["x"][mask])
    sparse = t.fetchwhere("x < 0.0005", outcols=["i"])  # few rows: only their blocks
    np.testing.assert_array_equal(sparse["i"], cols["i"][cols["x"] < 0.0005])
    assert piece_rows([8, 8], 65536, budget=2**20) == 65536
