"""carray <-> dask: reading by region, parallel writes of whole files, pickled handles."""

from __future__ import annotations

import io
import pickle

import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest

import carray as ca
from carray.errors import AlignmentError, ReadOnlyError
from carray.integrations.dask import _Source

WHERE = ["memory", "superchunk", "bcolz"]
# (shape, our chunks, dask chunks): edge chunks on every axis, blocks of 1 and of 2 chunks.
GEOMETRIES = [
    ((1003,), (100,), (200,)),
    ((97, 31), (10, 31), (20, 31)),
    ((97, 31), (10, 8), (20, 16)),
    ((13, 11, 9), (4, 3, 5), (4, 6, 5)),
]
DTYPES = [np.float64, np.int32, np.dtype([("x", "<i4"), ("y", "<f8")])]


def _data(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype.names:
        out = np.empty(shape, dtype=dtype)
        out["x"] = rng.integers(-1000, 1000, shape)
        out["y"] = rng.normal(size=shape)
        return out
    smooth = np.sin(np.arange(np.prod(shape)) / 50.0).reshape(shape) * 100
    return (smooth + rng.normal(size=shape)).astype(dtype)


def _rootdir(tmp_path, where, name="a"):
    return None if where == "memory" else str(tmp_path / name)


def _graph_sources(darr):
    """Every reference to a source that tasks read from, as the graph pickles."""
    found = []

    class Finder(pickle.Pickler):
        def persistent_id(self, obj):
            if isinstance(obj, _Source):
                found.append(obj)
                return len(found)
            return None

    Finder(io.BytesIO()).dump(dict(darr.__dask_graph__()))
    return found


# -- round trips ----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=["f8", "i4", "struct"])
@pytest.mark.parametrize("where,shape,chunks,dchunks", [
    (where, *geometry) for where in WHERE for geometry in GEOMETRIES
    if where != "bcolz" or geometry[1][1:] == geometry[0][1:]  # bcolz chunks whole rows
])
def test_round_trip(tmp_path, where, dtype, shape, chunks, dchunks):
    x = _data(shape, dtype)
    fmt = {"format": where} if where != "memory" else {}
    a = ca.carray(x, chunks=chunks, rootdir=_rootdir(tmp_path, where), **fmt)
    dx = a.to_dask("chunks")
    assert dx.chunks == tuple(tuple(min(c, n - i) for i in range(0, n, c))
                              for n, c in zip(shape, chunks, strict=True))
    np.testing.assert_array_equal(dx.compute(), x)
    np.testing.assert_array_equal(a.to_dask().compute(), x)  # a block per file
    np.testing.assert_array_equal(a.to_dask(dchunks).compute(), x)

    b = ca.from_dask(da.from_array(x, chunks=dchunks), _rootdir(tmp_path, where, "b"), **fmt)
    np.testing.assert_array_equal(b[:], x)
    if where != "memory":
        assert b.mode == "a" and b.chunks == dchunks
        np.testing.assert_array_equal(ca.open(b.rootdir, mode="r")[:], x)
        b.append(x[:3])  # a usable handle: the tail was read back correctly
        np.testing.assert_array_equal(b[-3:], x[:3])


@pytest.mark.parametrize("chunks,superchunksize,blocks", [
    ((100,), 4, ((400, 400, 203),)),            # 4 chunks a file
    ((100, 5), 4, ((200, 200, 200, 200, 200, 3), (10,))),  # 2 chunk rows a file
    ((100, 5), 3, None),                        # files split chunk rows: blocks are chunks
])
def test_default_blocks_are_files(tmp_path, chunks, superchunksize, blocks):
    shape = (1003,) + ((10,) if len(chunks) == 2 else ())
    x = _data(shape, np.float64)
    a = ca.carray(x, chunks=chunks, rootdir=str(tmp_path / "a"),
                  storage={"superchunksize": superchunksize})
    dx = a.to_dask()
    assert dx.chunks == (blocks or a.to_dask("chunks").chunks)
    np.testing.assert_array_equal(dx.compute(), x)


def test_reductions_match_numpy(tmp_path):
    x = _data((2000, 50), np.float64)
    a = ca.carray(x, chunks=(128, 50), rootdir=str(tmp_path / "a"))
    dx = a.to_dask((256, -1))
    assert dx.chunks[0][0] == 256 and dx.chunks[1] == (50,)
    assert np.isclose(dx.sum().compute(), x.sum())
    np.testing.assert_allclose(dx.mean(axis=0).compute(), x.mean(axis=0))


def test_empty_arrays_round_trip(tmp_path):
    for where in ("memory", "superchunk"):
        a = ca.carray(np.empty((0, 4)), rootdir=_rootdir(tmp_path, where))
        assert a.to_dask().compute().shape == (0, 4)
        b = ca.from_dask(da.zeros((0, 4), chunks=(5, 4)), _rootdir(tmp_path, where, "b"))
        assert b.shape == (0, 4)


def test_b2nd_frames_are_filled_on_the_driver(tmp_path):
    x = _data((300, 7), np.float64)
    b = ca.from_dask(da.from_array(x, chunks=(64, 7)), str(tmp_path / "x.b2nd"))
    assert b.engine.unit_chunks == 0
    np.testing.assert_array_equal(b[:], x)


# -- the graph ------------------------------------------------------------------------------


def test_tasks_ship_a_read_only_handle_not_data(tmp_path):
    x = _data((100_000,), np.float64)
    a = ca.carray(x, chunks=(10_000,), rootdir=str(tmp_path / "a"))
    dx = a.to_dask()
    [source] = _graph_sources(dx)  # one key opens the handle; every task reads from it
    assert source.container is None and source.recipe[1]["mode"] == "r"
    assert len(pickle.dumps(dict(dx.__dask_graph__()))) < 5_000  # the data is 800 kB
    opened = source.open()
    assert opened.mode == "r"
    assert len(pickle.dumps(opened)) < 1_000  # what moves between workers
    with pytest.raises(ReadOnlyError):
        opened[0] = 1


def test_in_memory_arrays_are_one_graph_key():
    a = ca.carray(_data((1000,), np.float64), chunks=(100,))
    [source] = _graph_sources(a.to_dask())
    assert source.container is a


def test_to_dask_refuses_chunks_that_split_ours():
    a = ca.carray(np.arange(100), chunks=(10,))
    with pytest.raises(AlignmentError, match=r"\(10,\)"):
        a.to_dask(15)
    assert a.to_dask(100).chunks == ((100,),)


# -- alignment of parallel writes ----------------------------------------------------------


def test_blocks_splitting_chunks_raise_naming_both_shapes(tmp_path):
    darr = da.from_array(_data((100, 10), np.float64), chunks=(25, 10))
    with pytest.raises(AlignmentError, match=r"\(25, 10\).*\(20, 10\)") as info:
        ca.from_dask(darr, str(tmp_path / "a"), chunks=(20, 10))
    assert isinstance(info.value, ValueError)


def test_blocks_splitting_units_raise(tmp_path):
    darr = da.from_array(_data((1000,), np.float64), chunks=(100,))
    with pytest.raises(AlignmentError, match=r"4 chunks of \(50,\)"):
        ca.from_dask(darr, str(tmp_path / "a"), chunks=(50,), storage={"superchunksize": 4})


@pytest.mark.parametrize("storage", [{"superchunksize": 4}, {}])
def test_rechunk_makes_blocks_fit(tmp_path, storage):
    x = _data((1000, 6), np.float64)
    darr = da.from_array(x, chunks=(30, 4))
    b = ca.from_dask(darr, str(tmp_path / "a"), chunks=(50, 3), storage=storage, rechunk=True)
    assert b.chunks == (50, 3)
    np.testing.assert_array_equal(b[:], x)


def test_new_superchunk_targets_get_files_inside_blocks(tmp_path):
    x = _data((10_000,), np.float64)
    b = ca.from_dask(da.from_array(x, chunks=(1000,)), str(tmp_path / "a"), chunks=(250,))
    assert b.engine.unit_chunks == 4  # the largest that divides every block edge
    np.testing.assert_array_equal(b[:], x)


# -- store ----------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["superchunk", "bcolz", "memory"])
def test_store_replaces_contents(tmp_path, fmt):
    x = _data((500, 4), np.float64)
    kw = {} if fmt == "memory" else {"rootdir": str(tmp_path / "a"), "format": fmt}
    if fmt == "superchunk":
        kw["storage"] = {"superchunksize": 2}  # a file is two chunks: one block of 100 rows
    a = ca.carray(x, chunks=(50, 4), **kw)
    ca.store(da.from_array(-x, chunks=(100, 4)), a)
    np.testing.assert_array_equal(a[:], -x)
    if fmt != "memory":
        np.testing.assert_array_equal(ca.open(a.rootdir, mode="r")[:], -x)
        a.append(x[:2])
        np.testing.assert_array_equal(a[-2:], x[:2])


def test_store_checks_its_target(tmp_path):
    a = ca.carray(np.zeros((100, 4)), chunks=(10, 4), rootdir=str(tmp_path / "a"),
                  storage={"superchunksize": 4})
    with pytest.raises(ValueError, match="shape"):
        ca.store(da.zeros((99, 4), chunks=(10, 4)), a)
    with pytest.raises(AlignmentError):
        ca.store(da.ones((100, 4), chunks=(10, 4)), a)
    ca.store(da.ones((100, 4), chunks=(10, 4)), a, rechunk=True)
    assert a[:].sum() == 400
    with pytest.raises(ReadOnlyError):
        ca.store(da.ones((100, 4), chunks=(40, 4)), ca.open(a.rootdir, mode="r"))


# -- pickled handles ------------------------------------------------------------------------


def test_in_memory_carrays_pickle_their_data():
    a = ca.carray(_data((50, 6), np.float32), chunks=(8, 3), cparams={"clevel": 9})
    a.attrs["units"] = "m"
    b = pickle.loads(pickle.dumps(a))
    np.testing.assert_array_equal(b[:], a[:])
    assert b.chunks == a.chunks and b.cparams == a.cparams and dict(b.attrs) == {"units": "m"}


def test_stored_carrays_pickle_as_handles(tmp_path):
    root = str(tmp_path / "a")
    a = ca.carray(np.arange(1000), rootdir=root, mode="w")
    a.append([7, 8, 9])  # unflushed: pickling flushes it
    blob = pickle.dumps(a)
    assert len(blob) < 1000
    a.close()  # one writer at a time: the reopened handle is the writer now
    b = pickle.loads(blob)
    assert b.mode == "a" and len(b) == 1003 and b[-1] == 9  # never reopened as 'w'
    r = pickle.loads(pickle.dumps(ca.open(root, mode="r")))
    assert r.mode == "r" and len(r) == 1003
    with pytest.raises(ReadOnlyError):
        r.append([1])


def test_tables_pickle(tmp_path):
    cols = {"i": np.arange(100), "s": np.array([f"s{i}" for i in range(100)], dtype=object)}
    t = ca.ctable(cols)
    t.attrs["k"] = 1
    m = pickle.loads(pickle.dumps(t))
    assert m[:].tolist() == t[:].tolist() and dict(m.attrs) == {"k": 1}
    d = ca.ctable(cols, rootdir=str(tmp_path / "t"))
    d.append({"i": [100], "s": ["s100"]})
    blob = pickle.dumps(d)
    d.close()  # one writer at a time: the reopened handle is the writer now
    h = pickle.loads(blob)
    assert h.mode == "a" and len(h) == 101 and h.rootdir == d.rootdir
    r = pickle.loads(pickle.dumps(ca.ctable(rootdir=d.rootdir, mode="r")))
    assert r.mode == "r"
    with pytest.raises(ReadOnlyError):
        r.append({"i": [1], "s": ["x"]})


# -- tables ---------------------------------------------------------------------------------


def _frame(n=50_000):
    rng = np.random.default_rng(1)
    return pd.DataFrame({"i": np.arange(n), "f": rng.normal(size=n), "b": np.arange(n) % 3 == 0})


def test_table_to_dask_has_a_partition_per_stored_file(tmp_path):
    df = _frame()
    # bcolz columns: a file per chunk, so a partition per chunk.
    t = ca.ctable(df, rootdir=str(tmp_path / "t"), chunklen=8192, format="bcolz")
    ddf = t.to_dask()
    assert ddf.npartitions == 7 and ddf.known_divisions and ddf.divisions[1] == 8192
    # superchunk columns: a file holds several chunks, and a partition a file.
    s = ca.ctable(df, rootdir=str(tmp_path / "s"), chunklen=1024)
    assert s.file_rows() > 1024 and s.file_rows() % 1024 == 0
    sdf = s.to_dask()
    assert sdf.npartitions == -(-len(df) // s.file_rows())
    pd.testing.assert_frame_equal(sdf.compute(), df)
    pd.testing.assert_frame_equal(ddf.compute(), df)
    assert ddf.f.sum().compute() == pytest.approx(df.f.sum())
    assert t.to_dask(["f"], partition_rows=20_000).npartitions == 3


@pytest.mark.parametrize("divisions,parallel", [
    (None, True),  # our own partitions: whole chunks already
    ((0, 10_000, 20_000, 49_999), True),  # chunks of 10_000 rows fit
    ((0, 1001, 20_000, 49_999), False),  # no sensible chunk length fits: appended in order
])
def test_table_from_dask(tmp_path, divisions, parallel):
    df = _frame()
    t = ca.ctable(df, chunklen=8192)
    ddf = t.to_dask() if divisions is None else \
        dd.from_pandas(df, npartitions=1).repartition(divisions=divisions)
    # bcolz columns (a file per chunk) take the parallel path when partitions hold whole
    # chunks; superchunk columns (the default) only when they hold whole files.
    out = ca.ctable_from_dask(ddf, str(tmp_path / "t"), format="bcolz")
    pd.testing.assert_frame_equal(out.todataframe(), df)
    chunklen = out.cols["i"].chunklen
    assert (ddf.divisions[1] % chunklen == 0) == parallel
    assert out.mode == "a"
    default = ca.ctable_from_dask(ddf, str(tmp_path / "s"))
    pd.testing.assert_frame_equal(default.todataframe(), df)
    assert default.mode == "a"


def test_table_from_dask_with_strings_and_in_memory(tmp_path):
    df = pd.DataFrame({"s": [f"name{i}" for i in range(1000)], "v": np.arange(1000.0)})
    ddf = dd.from_pandas(df, npartitions=3)
    for rootdir in (None, str(tmp_path / "t")):
        t = ca.ctable_from_dask(ddf, rootdir)
        assert t["s"][:5].tolist() == df.s[:5].tolist() and len(t) == 1000
        back = t.to_dask().compute()
        assert back.s.tolist() == df.s.tolist() and back.v.tolist() == df.v.tolist()


def test_package_names_load_dask_lazily():
    import subprocess
    import sys

    code = "import sys, carray; assert 'dask' not in sys.modules; carray.from_dask; " \
           "assert 'carray.integrations.dask' in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


# -- a real cluster -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def client():
    distributed = pytest.importorskip("distributed", reason="distributed is a test dependency")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as c:
        yield c


def test_on_a_cluster_of_processes(tmp_path, client):
    x = _data((200_000,), np.float64)
    a = ca.carray(x, chunks=(10_000,), rootdir=str(tmp_path / "a"))
    assert a.to_dask().sum().compute() == pytest.approx(x.sum())
    b = ca.from_dask(da.from_array(x, chunks=(20_000,)) * 2, str(tmp_path / "b"),
                     chunks=(10_000,))
    np.testing.assert_array_equal(b[:], 2 * x)
    out = ca.ctable_from_dask(dd.from_pandas(_frame(), npartitions=4), str(tmp_path / "t"))
    assert len(out) == 50_000 and out.to_dask().i.sum().compute() == _frame().i.sum()


# -- S3 (moto's server on loopback) ---------------------------------------------------------


@pytest.mark.parametrize("fmt", ["superchunk", "bcolz"])
def test_s3_round_trip_and_store(s3, fmt):
    x = _data((20_000,), np.float64)
    url, options = s3.url(f"dask-{fmt}"), s3.storage_options
    b = ca.from_dask(da.from_array(x, chunks=(2_000,)), url, storage_options=options,
                     format=fmt, mode="w")
    np.testing.assert_array_equal(ca.open(url, mode="r", storage_options=options)[:], x)
    h = pickle.loads(pickle.dumps(ca.open(url, mode="r", storage_options=options)))
    assert h.mode == "r" and len(h) == len(x)
    assert b.to_dask().sum().compute() == pytest.approx(x.sum())
    ca.store(da.from_array(x[::-1], chunks=(4_000,)), b)
    np.testing.assert_array_equal(ca.open(url, mode="r", storage_options=options)[:], x[::-1])


def test_s3_tables(s3):
    df = _frame(20_000)
    url, options = s3.url("dask-table"), s3.storage_options
    t = ca.ctable_from_dask(dd.from_pandas(df, npartitions=4), url, storage_options=options,
                            mode="w")
    pd.testing.assert_frame_equal(t.to_dask().compute(), df)
    h = pickle.loads(pickle.dumps(ca.ctable(rootdir=url, mode="r", storage_options=options)))
    assert h.mode == "r" and len(h) == 20_000


def test_s3_on_a_cluster_of_processes(s3, client):
    x = _data((100_000,), np.float64)
    url, options = s3.url("dask-cluster"), s3.storage_options
    b = ca.from_dask(da.from_array(x, chunks=(10_000,)), url, storage_options=options,
                     mode="w")
    assert b.to_dask().sum().compute() == pytest.approx(x.sum())
