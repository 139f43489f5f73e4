"""bcolz 1.2's module-level API, API by API, as bcolz's documentation describes it.

Each test is a bcolz user's call made with ``import carray as bcolz``.
"""

from __future__ import annotations

import io
import os

import numpy as np
import pytest

import carray as bcolz
from carray.core.defaults import default_cparams
from carray.core.params import CParams
from carray.errors import LockError


@pytest.fixture(autouse=True)
def _fresh_defaults():
    """Every test starts from, and leaves, the built-in defaults."""
    bcolz.defaults.reset()
    yield
    bcolz.defaults.reset()


# -- defaults -------------------------------------------------------------------------------

def test_defaults_documented_values():
    # "The default is {'clevel': 5, 'shuffle': True, 'cname': 'lz4', quantize: 0}"
    assert dict(bcolz.defaults.cparams) == {"clevel": 5, "shuffle": 1, "cname": "lz4",
                                            "quantize": 0}
    assert bcolz.defaults.out_flavor in ("carray", "bcolz")
    assert bcolz.defaults.vm in (None, "numexpr", "python")


def test_defaults_out_flavor_numpy_changes_eval():
    env = {"a": bcolz.carray(np.arange(10))}
    assert isinstance(bcolz.eval("a + 1", user_dict=env), bcolz.carray)
    bcolz.defaults.out_flavor = "numpy"
    out = bcolz.eval("a + 1", user_dict=env)
    assert isinstance(out, np.ndarray)
    np.testing.assert_array_equal(out, np.arange(1, 11))


def test_defaults_bcolz_attribute_names_are_the_same_settings():
    bcolz.defaults.eval_out_flavor = "numpy"
    assert bcolz.defaults.out_flavor == "numpy"
    bcolz.defaults.vm = "python"
    assert bcolz.defaults.eval_vm == "python"


@pytest.mark.parametrize("name,value", [("out_flavor", "pandas"), ("vm", "cython"),
                                        ("eval_vm", 3), ("cparams", {"clevel": 12}),
                                        ("cparams", {"cname": "snappy"}),
                                        ("cparams", {"level": 3})])
def test_defaults_validated_on_set(name, value):
    before = repr(bcolz.defaults)
    with pytest.raises(ValueError):
        setattr(bcolz.defaults, name, value)
    assert repr(bcolz.defaults) == before


def test_defaults_refuse_unknown_attribute():
    with pytest.raises(AttributeError):
        bcolz.defaults.cparam = {"clevel": 1}  # a typo must not pass silently


def test_defaults_vm_dask_is_an_evaluator():
    pytest.importorskip("dask.array", reason="dask is the 'dask' extra (CI has it)")
    before = bcolz.defaults.vm
    try:
        bcolz.defaults.vm = "dask"
        out = bcolz.eval("a * 2", user_dict={"a": bcolz.arange(5)}, out_flavor="numpy")
        np.testing.assert_array_equal(out, np.arange(5) * 2)
    finally:
        bcolz.defaults.vm = before


def test_defaults_cparams_dict_is_read_only():
    with pytest.raises(TypeError):
        bcolz.defaults.cparams["clevel"] = 9


def test_defaults_cparams_assign_dict_and_cparams():
    bcolz.defaults.cparams = {"clevel": 9, "shuffle": True, "cname": "zstd", "quantize": 0}
    assert default_cparams() == CParams(clevel=9, cname="zstd", shuffle=1)
    bcolz.defaults.cparams = bcolz.cparams(clevel=1)
    assert bcolz.defaults.cparams["clevel"] == 1
    assert bcolz.defaults.cparams["cname"] == "zstd"  # cparams() fills gaps from the defaults


def test_defaults_vm_python_used_by_eval():
    env = {"a": bcolz.carray(np.arange(1000, dtype="f8"))}
    bcolz.defaults.vm = "python"
    np.testing.assert_allclose(bcolz.eval("sin(a) * 2", out_flavor="numpy", user_dict=env),
                               np.sin(np.arange(1000.0)) * 2)


# -- defaults_ctx ---------------------------------------------------------------------------

def test_defaults_ctx_documented_example_and_restore():
    env = {"x": bcolz.carray(np.linspace(-1, 1, 100))}
    with bcolz.defaults_ctx(vm="python", cparams=bcolz.cparams(clevel=0)):
        assert bcolz.defaults.vm == "python"
        assert default_cparams().clevel == 0
        cout = bcolz.eval("(x + 1) < 0", user_dict=env)
        np.testing.assert_array_equal(cout[:], (np.linspace(-1, 1, 100) + 1) < 0)
    assert bcolz.defaults.vm is None
    assert default_cparams().clevel == 5


def test_defaults_ctx_restores_on_error():
    with pytest.raises(RuntimeError), bcolz.defaults_ctx(out_flavor="numpy"):
        assert bcolz.defaults.out_flavor == "numpy"
        raise RuntimeError("boom")
    assert bcolz.defaults.out_flavor == "carray"


def test_defaults_ctx_nests():
    with bcolz.defaults_ctx(cparams={"clevel": 1}):
        with bcolz.defaults_ctx(cparams={"clevel": 2}, out_flavor="numpy"):
            assert default_cparams().clevel == 2
        assert default_cparams().clevel == 1
        assert bcolz.defaults.out_flavor == "carray"
    assert default_cparams().clevel == 5


def test_defaults_ctx_bad_value_changes_nothing():
    with pytest.raises(ValueError), bcolz.defaults_ctx(cparams={"clevel": 1}, vm="nope"):
        pass
    assert default_cparams().clevel == 5


# -- cparams ---------------------------------------------------------------------------------

def test_cparams_call_as_bcolz_users_do():
    cp = bcolz.cparams(clevel=9, cname="zstd")
    assert isinstance(cp, CParams)
    assert (cp.clevel, cp.cname, cp.shuffle, cp.quantize) == (9, "zstd", bcolz.SHUFFLE, 0)
    assert bcolz.cparams() == CParams()


def test_cparams_attributes():
    cp = bcolz.cparams(clevel=3, shuffle=bcolz.BITSHUFFLE, cname="blosclz", quantize=2)
    assert cp.clevel == 3 and cp.shuffle == 2 and cp.cname == "blosclz" and cp.quantize == 2


@pytest.mark.parametrize("kwargs", [{"clevel": -1}, {"clevel": 10}, {"shuffle": 3},
                                    {"cname": "nope"}, {"quantize": -2}])
def test_cparams_validation(kwargs):
    with pytest.raises(ValueError):
        bcolz.cparams(**kwargs)


def test_cparams_setdefaults_changes_new_defaults():
    bcolz.cparams.setdefaults(clevel=9, cname="zstd")
    assert bcolz.defaults.cparams["clevel"] == 9
    assert bcolz.defaults.cparams["cname"] == "zstd"
    assert bcolz.defaults.cparams["shuffle"] == 1  # untouched
    assert bcolz.cparams() == CParams(clevel=9, cname="zstd")
    bcolz.cparams.setdefaults(shuffle=bcolz.NOSHUFFLE)
    assert default_cparams() == CParams(clevel=9, cname="zstd", shuffle=0)


def test_cparams_setdefaults_validates():
    with pytest.raises(ValueError):
        bcolz.cparams.setdefaults(clevel=42)
    assert default_cparams() == CParams()


def test_cparams_setdefaults_filters():
    bcolz.cparams.setdefaults(filters=[bcolz.filters.SHUFFLE, bcolz.filters.BYTEDELTA])
    assert default_cparams().filters == (("shuffle", 0), ("bytedelta", 0))


# -- filters constants -----------------------------------------------------------------------

def test_shuffle_constants():
    assert (bcolz.NOSHUFFLE, bcolz.SHUFFLE, bcolz.BITSHUFFLE) == (0, 1, 2)
    assert (bcolz.filters.NOSHUFFLE, bcolz.filters.SHUFFLE, bcolz.filters.BITSHUFFLE) == (0, 1, 2)


def test_filters_maps_shuffle_codes_to_names():
    # bcolz's filters: {NOSHUFFLE: "noshuffle", SHUFFLE: "shuffle", BITSHUFFLE: "bitshuffle"}
    assert dict(bcolz.filters) == {0: "noshuffle", 1: "shuffle", 2: "bitshuffle"}
    for code in bcolz.filters.keys():
        a = bcolz.carray(np.arange(2000), cparams=bcolz.cparams(clevel=9, shuffle=code))
        assert a.cparams.shuffle == code
        np.testing.assert_array_equal(a[:], np.arange(2000))


def test_filters_pipeline_names():
    cp = CParams(filters=[bcolz.filters.trunc_prec(10), bcolz.filters.BITSHUFFLE,
                          bcolz.filters.BYTEDELTA])
    assert cp.filters == (("trunc_prec", 10), ("bitshuffle", 0), ("bytedelta", 0))
    assert cp.shuffle == bcolz.BITSHUFFLE
    assert CParams(filters=[bcolz.filters.DELTA, bcolz.filters.SHUFFLE]).filters == (
        ("delta", 0), ("shuffle", 0))


# -- walk ------------------------------------------------------------------------------------

@pytest.fixture
def tree(tmp_path):
    """A directory holding carrays (several layouts), a ctable and unrelated files."""
    bcolz.carray(np.arange(10), rootdir=tmp_path / "a", mode="w").flush()
    bcolz.carray(np.arange(5), rootdir=tmp_path / "sub" / "b", mode="w", format="bcolz").flush()
    bcolz.carray(np.ones((4, 4)), rootdir=str(tmp_path / "sub" / "c.b2nd"), mode="w").flush()
    t = bcolz.ctable([np.arange(3), np.arange(3.0)], names=["x", "y"],
                     rootdir=str(tmp_path / "sub" / "deeper" / "t"), mode="w")
    t.flush()
    (tmp_path / "notes.txt").write_text("not a dataset")
    (tmp_path / "empty").mkdir()
    return tmp_path


def test_walk_yields_every_dataset_once(tree):
    found = {os.path.relpath(o.rootdir, tree): type(o).__name__ for o in bcolz.walk(tree)}
    assert found == {"a": "carray", os.path.join("sub", "b"): "carray",
                     os.path.join("sub", "c.b2nd"): "carray",
                     os.path.join("sub", "deeper", "t"): "ctable"}


def test_walk_classname(tree):
    tables = list(bcolz.walk(tree, classname="ctable"))
    assert [type(t).__name__ for t in tables] == ["ctable"]
    assert tables[0].names == ["x", "y"]
    arrays = list(bcolz.walk(tree, classname="carray"))
    assert len(arrays) == 3 and all(isinstance(a, bcolz.carray) for a in arrays)


def test_walk_mode_r_is_read_only(tree):
    for obj in bcolz.walk(tree, classname="carray", mode="r"):
        with pytest.raises(OSError):
            obj.append(obj[:1])


def test_walk_opens_read_only_by_default_so_writers_are_not_locked_out(tree):
    found = list(bcolz.walk(tree))  # every handle still alive
    assert len(found) == 4 and {o.mode for o in found} == {"r"}
    for obj in found:
        with bcolz.open(obj.rootdir, mode="a") as writer:
            assert writer.mode == "a"
    writable = list(bcolz.walk(tree, classname="carray", mode="a"))
    assert {a.mode for a in writable} == {"a"}
    with pytest.raises(LockError):  # asked for: writable handles hold their locks
        bcolz.open(writable[0].rootdir, mode="a")


def test_walk_values(tree):
    arrays = {os.path.basename(a.rootdir): a for a in bcolz.walk(tree, classname="carray")}
    np.testing.assert_array_equal(arrays["a"][:], np.arange(10))
    np.testing.assert_array_equal(arrays["c.b2nd"][:], np.ones((4, 4)))


def test_walk_is_lazy_and_checks_arguments(tree):
    it = bcolz.walk(tree)
    assert next(it) is not None
    with pytest.raises(ValueError):
        list(bcolz.walk(tree, classname="table"))
    with pytest.raises(ValueError):
        list(bcolz.walk(tree, mode="w"))
    with pytest.raises(NotADirectoryError):
        list(bcolz.walk(tree / "notes.txt"))


# -- Blosc and versions ----------------------------------------------------------------------

def test_blosc_version():
    version, date = bcolz.blosc_version()
    assert version[0].isdigit() and version.count(".") == 2
    assert isinstance(date, str)


def test_blosc_compressor_list():
    names = bcolz.blosc_compressor_list()
    assert {"blosclz", "lz4", "lz4hc", "zlib", "zstd"} <= set(names)
    for name in names:  # every listed codec is accepted by cparams and works
        a = bcolz.carray(np.arange(1000), cparams=bcolz.cparams(cname=name))
        np.testing.assert_array_equal(a[:], np.arange(1000))


def test_blosc_set_nthreads_returns_previous():
    first = bcolz.blosc_set_nthreads(1)
    try:
        assert bcolz.blosc_set_nthreads(2) == 1
        assert bcolz.get_nthreads() == 2
    finally:
        bcolz.blosc_set_nthreads(first)
    with pytest.raises(ValueError):
        bcolz.blosc_set_nthreads(0)


def test_set_nthreads_sets_numexpr_too():
    numexpr = pytest.importorskip("numexpr", reason="numexpr is optional (the numpy evaluator covers it)")
    first = bcolz.set_nthreads(1)
    try:
        assert numexpr.get_num_threads() == 1
        assert bcolz.set_nthreads(2) == 1
        assert numexpr.get_num_threads() == 2
    finally:
        bcolz.set_nthreads(first)


def test_detect_number_of_cores():
    n = bcolz.detect_number_of_cores()
    assert isinstance(n, int) and 1 <= n <= (os.cpu_count() or n)


def test_print_versions():
    buf = io.StringIO()
    bcolz.print_versions(file=buf)
    text = buf.getvalue()
    for name in ("carray", "NumPy", "libblosc2", "Python", "Detected cores"):
        assert name in text
    assert bcolz.blosc_version()[0] in text


@pytest.mark.parametrize("args", [(24.0,), (0, 24.0), (5,), (1, 10, 2), (0.0, 1.0, 0.1),
                                  (np.datetime64("2020-01-01"), np.datetime64("2020-01-05"),
                                   np.timedelta64(1, "D"))])
def test_arange_has_numpys_dtype_and_values(args):
    a, want = bcolz.arange(*args), np.arange(*args)
    assert a.dtype == want.dtype
    np.testing.assert_array_equal(a[:], want)
