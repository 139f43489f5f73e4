"""A bcolz user's script, API by API, run with ``import carray as bcolz``.

Each test follows what bcolz 1.2's documentation and docstrings say a call does
(module-level functions are in ``test_bcolz_api.py``).
"""

from __future__ import annotations

import os
import shutil
import sys

import numpy as np
import pytest

import carray as bcolz


@pytest.fixture(params=["memory", "disk"])
def rootdir(request, tmp_path):
    """Every behaviour in memory and on disk, as bcolz's own suite runs them."""
    return None if request.param == "memory" else str(tmp_path / "a.bcolz")


# -- carray: creation, the leftover, properties ----------------------------------------------

def test_leftover_properties(rootdir):
    # "leftover_elements: number of leftover elements in the last, uncompressed chunk"
    a = bcolz.carray(np.arange(1000, dtype="i4"), chunklen=300, rootdir=rootdir)
    assert a.leftover_elements == a.nleftover == 100
    assert a.leftover_bytes == 100 * 4
    left = a.leftover_array
    assert left.shape == (300,) and left.dtype == np.dtype("i4")
    np.testing.assert_array_equal(left[:100], np.arange(900, 1000))
    assert a.leftover_ptr == left.ctypes.data
    with pytest.raises(ValueError):
        left[0] = 5  # a read-only window on the array's own buffer
    a.append([7])
    assert a.leftover_elements == 101 and a.leftover_array[100] == 7


def test_leftover_of_whole_chunks_is_empty():
    a = bcolz.carray(np.arange(600), chunklen=300)
    assert a.leftover_elements == 0 and a.leftover_bytes == 0
    assert a.nchunks == 2


def test_safe_is_kept():
    assert bcolz.carray([1, 2]).safe is True
    assert bcolz.carray([1, 2], safe=False).safe is False


# -- reshape, view, copy, purge -------------------------------------------------------------

@pytest.mark.parametrize("shape", [(4, 6), (2, 3, 4), (-1, 8), 24, (24, 1)])
def test_reshape_returns_a_new_carray(rootdir, shape):
    a = bcolz.arange(24, rootdir=rootdir)
    b = a.reshape(shape)
    assert isinstance(b, bcolz.carray) and b is not a
    np.testing.assert_array_equal(b[:], np.arange(24).reshape(shape))
    assert a.shape == (24,)  # the original is left as it was


def test_reshape_takes_ints_and_crosses_chunks():
    a = bcolz.arange(3000, chunklen=7)
    b = a.reshape(30, 100)
    np.testing.assert_array_equal(b[:], np.arange(3000).reshape(30, 100))
    np.testing.assert_array_equal(b.reshape(3000)[:], np.arange(3000))


def test_reshape_to_disk(tmp_path):
    b = bcolz.arange(12).reshape((3, 4), rootdir=str(tmp_path / "r"))
    assert b.rootdir == str(tmp_path / "r")
    np.testing.assert_array_equal(bcolz.open(str(tmp_path / "r"), mode="r")[:],
                                  np.arange(12).reshape(3, 4))


@pytest.mark.parametrize("shape", [(5, 5), (-1, -1), (7, -1), (-2, 12)])
def test_reshape_refuses_impossible_shapes(shape):
    with pytest.raises(ValueError):
        bcolz.arange(24).reshape(shape)


def test_view_shares_the_data(rootdir):
    # "Create a light weight view of the data in the original carray."
    a = bcolz.carray(np.arange(10), rootdir=rootdir)
    v = a.view()
    assert isinstance(v, bcolz.carray) and v is not a
    v[3] = 100
    assert a[3] == 100
    a.append([10])
    assert len(v) == 11
    v.close()  # the view goes away; the array stays usable
    a[0] = -1
    assert a[0] == -1


def test_copy_with_new_cparams(rootdir):
    # "copy(**kwargs): any parameter supported by the carray constructor"
    a = bcolz.carray(np.arange(1e5), rootdir=rootdir)
    b = a.copy(cparams=bcolz.cparams(clevel=9, cname="zlib"))
    assert b.cparams.clevel == 9 and b.cparams.cname == "zlib"
    np.testing.assert_array_equal(b[:], a[:])
    assert b.rootdir is None
    c = a.copy(chunklen=1000, dtype="f4")
    assert c.chunklen == 1000 and c.dtype == np.dtype("f4")


def test_purge_removes_the_data(tmp_path):
    # "Remove the underlying data for on-disk arrays."
    path = str(tmp_path / "p.bcolz")
    a = bcolz.carray(np.arange(10), rootdir=path)
    a.purge()
    assert not os.path.exists(path)
    frame = str(tmp_path / "p.b2nd")
    bcolz.carray(np.arange(10), rootdir=frame).purge()
    assert not os.path.exists(frame)
    bcolz.carray(np.arange(3)).purge()  # in memory: nothing to remove


def test_purge_of_a_removed_directory_raises(tmp_path):
    a = bcolz.arange(100, rootdir=str(tmp_path / "gone"))
    shutil.rmtree(tmp_path / "gone")
    with pytest.raises(FileNotFoundError, match="gone"):
        a.purge()


def test_purge_in_mode_r_is_refused(tmp_path):
    path = str(tmp_path / "p")
    bcolz.carray(np.arange(10), rootdir=path).close()
    with pytest.raises(bcolz.ReadOnlyError):
        bcolz.open(path, mode="r").purge()
    assert os.path.exists(path)


# -- boolean carrays as keys, where ---------------------------------------------------------

def test_getitem_and_setitem_with_a_bool_carray(rootdir):
    a = bcolz.carray(np.arange(20), rootdir=rootdir, chunklen=6)
    mask = bcolz.carray(np.arange(20) % 3 == 0)
    np.testing.assert_array_equal(a[mask], np.arange(0, 20, 3))
    a[mask] = -1
    expected = np.arange(20)
    expected[::3] = -1
    np.testing.assert_array_equal(a[:], expected)


def test_where_with_a_bool_carray(rootdir):
    # "where(boolarr): values of this object where boolarr is true; a carray or array"
    a = bcolz.carray(np.arange(100), rootdir=rootdir, chunklen=16)
    mask = bcolz.carray(np.arange(100) % 7 == 0, chunklen=9)
    assert list(a.where(mask)) == list(range(0, 100, 7))
    assert list(a.where(mask, limit=3, skip=2)) == [14, 21, 28]
    assert list(a.where(np.arange(100) > 97)) == [98, 99]


def test_ctable_queries_with_a_bool_carray(rootdir):
    # ctable.where: "expression: a boolean Numexpr expression or a boolean carray"
    t = bcolz.ctable([np.arange(10), np.arange(10.0)], names=["a", "b"], rootdir=rootdir)
    mask = bcolz.carray(np.arange(10) % 3 == 0)
    assert [r.a for r in t.where(mask)] == [0, 3, 6, 9]
    assert t.fetchwhere(mask)["b"].tolist() == [0.0, 3.0, 6.0, 9.0]
    assert [r.a for r in t.where(np.arange(10) > 7, outcols="a")] == [8, 9]
    np.testing.assert_array_equal(t[mask]["a"], [0, 3, 6, 9])


def test_string_key_is_an_expression_on_a_ctable():
    t = bcolz.ctable([np.arange(10), np.arange(10.0) * 2], names=["a", "b"])
    assert [r.a for r in t.where("(a > 2) & (b < 12)")] == [3, 4, 5]
    assert list(t["a > 7"]["b"]) == [16.0, 18.0]


# -- eval -----------------------------------------------------------------------------------

@pytest.mark.parametrize("vm", ["numexpr", "python", "dask", None])
@pytest.mark.parametrize("flavor,kind", [("bcolz", bcolz.carray), ("carray", bcolz.carray),
                                         ("numpy", np.ndarray)])
def test_eval_vm_and_out_flavor(vm, flavor, kind):
    # Names are found in the caller's variables, as bcolz does.
    a = bcolz.carray(np.arange(1000))  # noqa: F841 - read by eval from this frame
    b = np.arange(1000) * 0.5  # noqa: F841
    out = bcolz.eval("a * 2 + b", vm=vm, out_flavor=flavor)
    assert isinstance(out, kind)
    np.testing.assert_allclose(out[:], np.arange(1000) * 2.5)


def test_eval_user_dict_and_carray_kwargs():
    out = bcolz.eval("x < 5", user_dict={"x": bcolz.arange(10)}, cparams=bcolz.cparams(clevel=1))
    assert out.dtype == bool and out.cparams.clevel == 1
    assert out.sum() == 5


def test_eval_unknown_vm_is_refused():
    with pytest.raises(ValueError):
        bcolz.eval("a + 1", user_dict={"a": np.arange(3)}, vm="cython")


@pytest.mark.parametrize("vm", ["numexpr", "python", "dask", None])
def test_eval_takes_numpy_and_dask_function_names(vm):
    c = bcolz.carray(np.arange(1, 100))  # noqa: F841 - read by eval from this frame
    d = np.arange(1.0, 100.0)  # noqa: F841
    want = np.sin(np.arange(1, 100)) + 2 * np.log(np.arange(1.0, 100.0))
    for text in ("np.sin(c) + 2 * np.log(d)", "da.sin(c) + 2 * da.log(d)"):
        np.testing.assert_allclose(bcolz.eval(text, vm=vm)[:], want)


@pytest.mark.parametrize("vm", ["numexpr", "python", "dask", None])
def test_eval_ends_with_a_reduction_as_numexpr_allows(vm):
    a = np.arange(60).reshape(3, 4, 5)
    b = bcolz.arange(60).reshape((3, 4, 5))  # noqa: F841 - read by eval from this frame
    assert bcolz.eval("sum(b)", vm=vm) == a.sum()
    assert bcolz.eval("np.sum(b * 2)", vm=vm) == (a * 2).sum()
    np.testing.assert_array_equal(bcolz.eval("sum(b, axis=1)", vm=vm)[:], a.sum(axis=1))
    np.testing.assert_array_equal(bcolz.eval("prod(b + 1, axis=-1)", vm=vm,
                                             out_flavor="numpy"), (a + 1).prod(axis=-1))
    x = np.linspace(0, 1, 10_001)  # noqa: F841 - a 1-d operand, streamed the same way
    assert bcolz.eval("sum(x * x)", vm=vm) == pytest.approx((np.linspace(0, 1, 10_001) ** 2).sum())


def test_an_unknown_name_is_a_name_error():
    t = bcolz.ctable(np.zeros(3, dtype="i4,f8"))
    with pytest.raises(NameError, match="ppp"):
        t["f1 * 4 >= ppp"]
    with pytest.raises(NameError, match="qqq"):
        bcolz.eval("qqq + 1")
    with pytest.raises(bcolz.CArrayError):
        t.where("f0 > zzz").__next__()


# -- string keys: boolean expressions over the caller's variables ------------------------------

def test_string_keys_select_and_assign(rootdir):
    # "key: ... a string with a boolean expression: the elements where it is true"
    a, b = np.arange(1000), np.arange(1, 1001)
    c = bcolz.carray(a, chunklen=64, rootdir=rootdir)
    d = b  # noqa: F841 - read from this frame by the key
    np.testing.assert_array_equal(c["a + 2 * d - 3 > 900"], a[a + 2 * b - 3 > 900])
    np.testing.assert_array_equal(c["c % 7 == 0"], a[a % 7 == 0])
    c["a + 2 * d - 3 > 1000"] = 0
    want = a.copy()
    want[a + 2 * b - 3 > 1000] = 0
    np.testing.assert_array_equal(c[:], want)
    if rootdir is not None:
        c.close()
        np.testing.assert_array_equal(bcolz.open(rootdir, mode="r")[:], want)


def test_string_keys_that_are_not_masks_are_refused():
    c = bcolz.carray(np.arange(10))
    other = np.arange(5)  # noqa: F841 - read from this frame by the key
    with pytest.raises(bcolz.CArrayError, match="boolean expression"):
        c["c + 1"]
    with pytest.raises(bcolz.CArrayError, match="boolean expression"):
        c["other > 1"] = 3
    with pytest.raises(NameError, match="missing"):
        c["missing > 1"]
    np.testing.assert_array_equal(c[:], np.arange(10))


# -- factories, sizes, trim ------------------------------------------------------------------

@pytest.mark.parametrize("factory", ["zeros", "ones", "fill"])
def test_factories_of_records_make_tables(rootdir, factory):
    # bcolz: "out : carray or ctable", a ctable for a structured dtype
    dt = np.dtype([("a", "i2"), ("b", "f8")])
    args = (5, (3, 1.5)) if factory == "fill" else (5,)
    t = getattr(bcolz, factory)(*args, dtype=dt, rootdir=rootdir, expectedlen=10_000)
    assert isinstance(t, bcolz.ctable) and t.names == ["a", "b"] and t.dtype == dt
    want = {"zeros": (0, 0.0), "ones": (1, 1.0), "fill": (3, 1.5)}[factory]
    assert t[:].tolist() == [want] * 5
    assert t.rootdir == rootdir
    assert getattr(bcolz, factory)(0, *args[1:], dtype=dt).names == ["a", "b"]


def test_sizeof_is_the_compressed_size(rootdir):
    a = bcolz.carray(np.arange(100_000), rootdir=rootdir)
    t = bcolz.ctable({"x": np.arange(1000), "y": np.arange(1000.0)}, rootdir=rootdir and
                     rootdir + ".t")
    assert a.__sizeof__() == a.cbytes < a.nbytes
    assert sys.getsizeof(t) >= t.cbytes == t.__sizeof__()


def test_trim_takes_whole_numbers_of_any_type(rootdir):
    a = bcolz.arange(1e4, rootdir=rootdir)
    a.trim(1e4 - 2)
    assert a[:].tolist() == [0.0, 1.0]
    t = bcolz.ctable({"x": np.arange(10)}, rootdir=rootdir and rootdir + ".t")
    t.trim(np.int8(3))
    assert len(t) == 7
    for bad in (1.5, "2", None):
        with pytest.raises(TypeError, match="whole number"):
            a.trim(bad)


# -- fromiter --------------------------------------------------------------------------------

def test_fromiter_structured_dtype_gives_a_ctable(tmp_path):
    it = ((i, i * 0.5) for i in range(1000))
    t = bcolz.fromiter(it, dtype="i4,f8", count=1000)
    assert isinstance(t, bcolz.ctable) and t.names == ["f0", "f1"] and len(t) == 1000
    assert t[10].tolist() == (10, 5.0)
    t2 = bcolz.fromiter(((i, str(i)) for i in range(50)), dtype=[("n", "i8"), ("s", "U3")],
                        count=-1, rootdir=str(tmp_path / "t"))
    t2.close()
    assert bcolz.open(str(tmp_path / "t"))["s"][49] == "49"


def test_fromiter_plain_dtype_gives_a_carray():
    a = bcolz.fromiter(iter(range(100)), dtype="i2", count=50)
    assert isinstance(a, bcolz.carray) and len(a) == 50 and a.dtype == np.dtype("i2")


# -- repr and str ---------------------------------------------------------------------------

def test_repr_as_bcolz_prints_it(tmp_path):
    a = bcolz.carray(np.arange(10), chunklen=512)
    lines = repr(a).splitlines()
    assert lines[0] == "carray((10,), int64)"
    assert lines[1].startswith("  nbytes := 80; cbytes := ") and "ratio: " in lines[1]
    assert lines[2] == "  cparams := cparams(clevel=5, shuffle=1, cname='lz4', quantize=0)"
    assert lines[3].startswith("  chunklen := 512; chunksize: 4096; blocksize: ")
    assert lines[-1] == "[0 1 2 3 4 5 6 7 8 9]"
    b = bcolz.carray(np.arange(10), rootdir=str(tmp_path / "d"), chunklen=4)
    text = repr(b)
    assert f"  rootdir := {str(tmp_path / 'd')!r}\n  mode    := 'a'" in text
    assert int(text.splitlines()[3].rsplit(" ", 1)[1]) > 0  # blocksize of a stored chunk


def test_repr_of_an_empty_array_has_no_ratio():
    assert "ratio: nan" in repr(bcolz.carray(np.array([], dtype=object)))
    assert "ratio: nan" in repr(bcolz.carray(np.array([], dtype="f8")))


def test_str_of_a_long_array_shows_its_ends():
    assert str(bcolz.arange(5)) == "[0 1 2 3 4]"
    assert str(bcolz.arange(100_000)) == "[0 1 2 ..., 99997 99998 99999]"


def test_sizes_print_in_bcolz_units():
    from carray.array.bcolz_methods import bcolz_size

    assert bcolz_size(80) == "80"
    assert bcolz_size(16384) == "16.00 KB"
    assert bcolz_size(3 * 2**20) == "3.00 MB"


# -- object dtypes --------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["i8", "u1", "c16", "S3", "(2,)i4"])
def test_quantize_of_items_that_are_not_floats_is_refused(tmp_path, dtype):
    # bcolz: quantize on int arrays raises TypeError (it used to be recorded and ignored)
    cparams = bcolz.cparams(quantize=3)
    with pytest.raises(TypeError, match="quantize=3"):
        bcolz.carray(np.zeros(10, dtype=dtype), cparams=cparams)
    with pytest.raises(bcolz.UnsupportedDTypeError):
        bcolz.zeros(10, dtype=dtype, cparams=cparams, rootdir=str(tmp_path / "q"))
    assert not os.path.exists(tmp_path / "q")
    kept = bcolz.carray(np.linspace(0, 1, 7, dtype="f4"), cparams=cparams)
    np.testing.assert_allclose(kept[:], np.linspace(0, 1, 7), atol=1e-3)


@pytest.mark.parametrize("where", ["memory", "bcolz", "superchunk"])
@pytest.mark.parametrize("dtype", ["O,O", "u1,O", [("a", "i4"), ("b", "O", (2,))]])
def test_records_holding_objects_are_refused(tmp_path, where, dtype):
    # bcolz: records holding objects "must raise a type error exception, as they are not
    # supported"; stored, their chunks would hold the objects' addresses.
    rows = np.zeros(3, dtype=dtype)
    kwargs = {} if where == "memory" else {"rootdir": str(tmp_path / "r"), "format": where}
    with pytest.raises(bcolz.UnsupportedDTypeError, match="objects inside records"):
        bcolz.carray(rows, **kwargs)
    with pytest.raises(TypeError):
        bcolz.carray([tuple(r) for r in rows.tolist()], dtype=rows.dtype, **kwargs)
    assert not os.path.exists(tmp_path / "r")
    assert bcolz.carray(rows, dtype=object)[1] == rows[1]  # one object per item: kept


def test_object_arrays_on_disk_need_an_explicit_opt_in(tmp_path):
    # bcolz pickles every item; unpickling runs code, so carray asks for allow_pickle.
    with pytest.raises(bcolz.UnsupportedDTypeError):
        bcolz.carray(np.array([{"a": 1}, [2]], dtype=object), rootdir=str(tmp_path / "n"))
    assert not os.path.exists(tmp_path / "n")
    # In memory the objects are kept as they are: nothing is pickled.
    in_memory = bcolz.carray(np.array([{"a": 1}, [2]], dtype=object))
    assert in_memory[0] == {"a": 1} and in_memory[1] == [2]
    path = str(tmp_path / "o")
    bcolz.carray([{"a": 1}], dtype=object, allow_pickle=True, rootdir=path).close()
    with pytest.raises(bcolz.UnsafeDataError):
        bcolz.open(path)


def test_object_arrays_with_the_opt_in(rootdir):
    items = [{"a": 1}, [1, 2], "text", None, (3,)]
    a = bcolz.carray(items, dtype=object, allow_pickle=True, rootdir=rootdir)
    assert a.dtype == np.dtype(object) and len(a) == 5
    assert a[0] == {"a": 1} and a[1] == [1, 2] and list(a) == items
    a.append([{"b": 2}])
    a[2] = "changed"
    a.resize(7)
    assert a[5] == {"b": 2} and a[2] == "changed" and a[6] is None
    assert list(a.copy()) == list(a)
    if rootdir is not None:
        a.close()
        # one pickle per chunk file, as bcolz stores objects
        assert sorted(os.listdir(os.path.join(rootdir, "data"))) == \
            [f"__{i}.blp" for i in range(7)]
        b = bcolz.open(rootdir, allow_pickle=True)
        assert b[:].tolist() == [{"a": 1}, [1, 2], "changed", None, (3,), {"b": 2}, None]
        b.trim(2)
        b.close()
        assert len(bcolz.open(rootdir, mode="r", allow_pickle=True)) == 5


def test_object_arrays_live_only_in_bcolz_directories(tmp_path):
    with pytest.raises(bcolz.UnsupportedDTypeError):
        bcolz.carray(["x"], dtype=object, allow_pickle=True, rootdir=str(tmp_path / "s"),
                     format="superchunk")


# -- ctable: HDF5 -----------------------------------------------------------------------------

def test_ctable_tohdf5_fromhdf5(tmp_path):
    pytest.importorskip("tables", reason="tables is a test dependency")
    path = str(tmp_path / "t.h5")
    t = bcolz.ctable([np.arange(5), np.linspace(0, 1, 5)], names=["i", "f"])
    t.tohdf5(path)
    u = bcolz.ctable.fromhdf5(path)
    assert u.names == ["i", "f"]
    np.testing.assert_array_equal(u[:], t[:])


def test_ctable_repr_as_bcolz_prints_it():
    t = bcolz.ctable([np.arange(30), np.arange(30.0)], names=["a", "b"])
    lines = repr(t).splitlines()
    assert lines[0] == "ctable((30,), [('a', '<i8'), ('b', '<f8')])"
    assert lines[1].startswith("  nbytes: 480; cbytes: ")
    assert lines[2] == "  cparams := cparams(clevel=5, shuffle=1, cname='lz4', quantize=0)"
    assert lines[3] == "[(0, 0.) (1, 1.) (2, 2.) ..., (27, 27.) (28, 28.) (29, 29.)]"


# -- a tutorial-style session, end to end -----------------------------------------------------

def test_a_tutorial_session(tmp_path):
    root = str(tmp_path / "mydir")
    a = np.arange(1_000_000)
    b = bcolz.carray(a, rootdir=root, mode="w", cparams=bcolz.cparams(clevel=9))
    b.append(np.arange(10))
    assert len(b) == 1_000_010 and b.sum() == a.sum() + 45
    b.attrs["temperature"] = 22.0
    b.flush()
    with bcolz.open(root, mode="r") as c:
        assert c[999_999] == 999_999 and c[-1] == 9
        assert c.attrs["temperature"] == 22.0
        assert list(c.iter(5, 30, 5, limit=3, skip=1)) == [10, 15, 20]
        with pytest.raises(bcolz.ReadOnlyError):
            c[0] = 1
    b.trim(10)
    assert len(b) == 1_000_000
    b.resize(1_000_005)
    assert b[-1] == 0
    big = bcolz.eval("b > 999_997")
    assert list(big.wheretrue()) == [999_998, 999_999]
    blocks = list(bcolz.iterblocks(b, blen=300_000))
    assert [len(x) for x in blocks] == [300_000, 300_000, 300_000, 100_005]

    t = bcolz.ctable((np.arange(100), np.arange(100) * 2.0), names=["i", "f"],
                     rootdir=str(tmp_path / "t"))
    t.addcol(np.arange(100) % 2 == 0, name="even")
    assert t.names == ["i", "f", "even"]
    assert [r.nrow__ for r in t.where("even & (i > 95)", outcols="nrow__, f")] == [96, 98]
    t.delcol("even")
    df = t.todataframe()
    assert list(df.columns) == ["i", "f"] and len(df) == 100
    u = bcolz.ctable.fromdataframe(df)
    np.testing.assert_array_equal(u[:], t[:])


# -- columns of records, read by the real bcolz -------------------------------------------------

RECORD = np.dtype([("sc1", "<i4"), ("sc3", "<f8"), ("n", [("p", "u1"), ("q", "<U3")]),
                   ("v", "<i2", (2,))])


def _records(n: int) -> np.ndarray:
    rec = np.zeros(n, dtype=RECORD)
    rec["sc1"] = np.arange(n) * 3
    rec["sc3"] = np.arange(n) / 4
    rec["n"]["p"] = np.arange(n) % 250
    rec["n"]["q"] = [f"é{k % 7}" for k in range(n)]
    rec["v"] = np.arange(2 * n).reshape(n, 2)
    return rec


def test_real_bcolz_reads_a_column_of_records_carray_wrote(tmp_path):
    real = pytest.importorskip("bcolz", reason="the real bcolz 1.x checks what it can read")
    if real is bcolz:  # pragma: no cover - only carray itself is importable as bcolz
        pytest.skip("the real bcolz is not installed")
    root = str(tmp_path / "t")
    rec = _records(50)
    t = bcolz.ctable([np.arange(50), rec], names=["a", "b"], rootdir=root, format="bcolz",
                     chunklen=8)
    t.append([np.arange(3), rec[:3]])
    t.close()
    want = np.concatenate([rec, rec[:3]])
    theirs = real.open(root)
    assert theirs.names == ["a", "b"] and theirs.dtype["b"] == RECORD and len(theirs) == 53
    np.testing.assert_array_equal(theirs["b"][:], want)
    np.testing.assert_array_equal(theirs[:]["a"], np.concatenate([np.arange(50),
                                                                   np.arange(3)]))
    ours = bcolz.open(root, mode="a")
    np.testing.assert_array_equal(ours["b"][:], want)
    ours.addcol(want, name="c")
    ours.close()
    np.testing.assert_array_equal(real.open(root)["c"][:], want)


def test_carray_reads_a_column_of_records_bcolz_wrote(tmp_path):
    real = pytest.importorskip("bcolz", reason="the real bcolz 1.x writes the table read here")
    if real is bcolz:  # pragma: no cover
        pytest.skip("the real bcolz is not installed")
    root = str(tmp_path / "t")
    rec = _records(40)[["sc1", "sc3", "n"]]  # bcolz cannot store a sub-array default
    plain = np.zeros(40, dtype=[("sc1", "<i4"), ("sc3", "<f8"), ("n", RECORD["n"])])
    plain[:] = rec
    real.ctable([np.arange(40), plain], names=["a", "b"], rootdir=root, mode="w",
                chunklen=6).flush()
    ours = bcolz.open(root, mode="a")
    np.testing.assert_array_equal(ours["b"][:], plain)
    ours.append([np.arange(2), plain[:2]])
    ours.close()
    np.testing.assert_array_equal(bcolz.open(root, mode="r")["b"][:],
                                  np.concatenate([plain, plain[:2]]))


@pytest.mark.parametrize("dtype", [
    {"names": ["a"], "formats": []},
    {"names": ["a"], "formats": ["<i4"], "offsets": [-1]},
    {"names": ["a"], "formats": ["<i4"], "more": 1},
    {"names": [1], "formats": ["<i4"]},
    {"names": ["a", "b"], "formats": ["<i4", "<i4"], "offsets": [0, 0]},
    {"names": ["a"], "formats": ["nope"]},
])
def test_a_bad_fields_form_names_the_file(tmp_path, dtype):
    import json

    from carray.errors import FormatError

    root = str(tmp_path / "c")
    bcolz.carray(np.zeros(3, dtype=[("a", "<i4")]), rootdir=root, format="bcolz").close()
    path = os.path.join(root, "meta", "storage")
    with open(path) as f:
        storage = json.load(f)
    sizes_path = os.path.join(root, "meta", "sizes")
    with open(sizes_path) as f:
        sizes = json.load(f)
    del sizes["carray_check"]  # as bcolz wrote it: no digest of meta/storage
    with open(sizes_path, "w") as f:
        json.dump(sizes, f)
    with open(path, "w") as f:
        json.dump(storage, f)
    assert bcolz.open(root, mode="r").dtype == np.dtype([("a", "<i4")])  # the good form
    storage["dtype"] = dtype
    with open(path, "w") as f:
        json.dump(storage, f)
    with pytest.raises(FormatError, match=r"storage: (dtype|dflt)"):
        bcolz.open(root, mode="r")[:]


# -- ctable: pandas, flushes -------------------------------------------------------------------

def test_todataframe_orient_index_makes_columns_rows():
    # "columns: sequence of column labels, optional. Must be passed if orient='index'."
    t = bcolz.ctable({"a": np.arange(3), "b": np.arange(3.0) * 2})
    df = t.todataframe()
    rows = t.todataframe(columns=["x", "y", "z"], orient="index")
    assert list(rows.index) == ["a", "b"] and list(rows.columns) == ["x", "y", "z"]
    np.testing.assert_array_equal(rows.to_numpy(), df.T.to_numpy())
    assert list(t.todataframe(orient="index").columns) == [0, 1, 2]
    with pytest.raises(ValueError):
        t.todataframe(columns=["x"], orient="index")  # one label per row


def test_auto_flush_is_false_in_memory():
    # bcolz: "always false for in-memory tables", whatever was asked
    assert not bcolz.ctable([np.empty(0, dtype="i8")], auto_flush=True).auto_flush


def test_a_bcolz_table_flushes_after_every_change(tmp_path, monkeypatch):
    calls = []
    flush = bcolz.ctable.flush

    def counting(self, *args, **kwargs):
        calls.append(args)
        return flush(self, *args, **kwargs)

    monkeypatch.setattr(bcolz.ctable, "flush", counting)
    t = bcolz.ctable(np.zeros(100, dtype="i4,f8"), chunklen=30, rootdir=str(tmp_path / "t"),
                     format="bcolz")
    for change in (lambda: t.append((1, 2.0)), lambda: t.addcol(np.arange(101), "c"),
                   lambda: t.delcol("f1")):
        before = len(calls)
        change()
        assert len(calls) > before  # flushed: bcolz reads it as it stands
        theirs = pytest.importorskip("bcolz").open(str(tmp_path / "t"), mode="r")
        assert theirs.names == t.names and len(theirs) == len(t) == 101


def test_values_of_the_wrong_kind_name_the_array(tmp_path):
    # bcolz: overwriting a column with wrong values raises ValueError
    t = bcolz.ctable(np.zeros(2, dtype="i4,i8,f8"), rootdir=str(tmp_path / "t"))
    with pytest.raises(ValueError, match=r"t\b.*cannot write dict values as int64") as info:
        t["f1"] = {"a": 1, "b": 2}
    assert isinstance(info.value, TypeError) and isinstance(info.value, bcolz.CArrayError)
    a = bcolz.carray(np.arange(3.0))
    with pytest.raises(bcolz.ValueConversionError, match="carray: cannot write str"):
        a.append("abc")
    with pytest.raises(bcolz.ValueConversionError):
        a[0] = object()
    assert t["f1"][:].tolist() == [0, 0] and a[:].tolist() == [0.0, 1.0, 2.0]
