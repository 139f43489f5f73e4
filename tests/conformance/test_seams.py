"""Odd input where xarray, groups, conversions and the command line meet: each gives the
answer the neighbouring library gives, or a typed error."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import carray as ca
from carray.errors import ShapeError, StorageError
from carray.integrations.convert import convert

xr = pytest.importorskip("xarray")
pytest.importorskip("netCDF4")


def test_xarray_opens_a_table_with_category_and_missing_values(tmp_path):
    path = str(tmp_path / "t.carray")
    ca.ctable({"x": np.arange(4),
               "c": ca.categorical(["a", None, "b", "a"]),
               "i": ca.categorical([1, None, 2, 1]),
               "j": ca.categorical([1, 3, 2, 1]),
               "n": np.ma.masked_array([1, 2, 3, 4], [0, 1, 0, 0]),
               "s": np.array(["a", None, "c", "d"], dtype=object),
               "d": np.ma.masked_array(np.array(["2020-01-01"] * 4, "M8[s]"), [1, 0, 0, 0])},
              rootdir=path, mode="w").close()
    x = xr.open_dataset(path)
    assert x.c.values.tolist() == ["a", None, "b", "a"]
    assert x.c[1:3].values.tolist() == [None, "b"] and x.c[[0, 2]].values.tolist() == ["a", "b"]
    np.testing.assert_array_equal(x.i.values, [1, np.nan, 2, 1])  # as pandas: float, NaN
    assert x.j.dtype == np.int64 and x.j.values.tolist() == [1, 3, 2, 1]
    np.testing.assert_array_equal(x.n.values, [1, np.nan, 3, 4])
    assert x.s.values.tolist() == ["a", None, "c", "d"]
    assert np.isnat(x.d.values[0]) and not np.isnat(x.d.values[1:]).any()
    frame = ca.open(path).todataframe()
    assert x.to_dataframe()["n"].isna().tolist() == frame["n"].isna().tolist()


def test_from_xarray_appends_to_a_float_array_made_by_create_array(tmp_path):
    path = str(tmp_path / "g.cagroup")
    with ca.group(path, mode="w") as g, g.transaction():
        g.create_array("time", np.arange(3), dims="time")
        g.create_array("v", np.arange(3.0), dims="time")
    more = xr.Dataset({"v": ("time", np.array([np.nan, 5.0]))}, coords={"time": [3, 4]})
    ca.from_xarray(more, path, mode="a", append_dim="time").close()
    with ca.open_group(path) as g:
        np.testing.assert_array_equal(g["v"][:], [0, 1, 2, np.nan, 5])
        assert "_FillValue" not in g["v"].attrs  # the stored encoding, kept
    np.testing.assert_array_equal(xr.open_dataset(path).v.values, [0, 1, 2, np.nan, 5])


def test_a_dimension_mismatch_in_a_group_is_a_shape_error(tmp_path):
    with pytest.raises(ShapeError, match="dimension 'x' is 3 long in 'a' but 4 in 'b'"):
        with ca.group(str(tmp_path / "g.cagroup"), mode="w") as g, g.transaction():
            g.create_array("a", np.arange(3), dims="x")
            g.create_array("b", np.arange(4), dims="x")
    assert issubclass(ShapeError, ValueError)


def _run_cli(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "carray.cli.main", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COLUMNS": "120"})


def test_head_of_a_group_member_masks_its_fill_value_as_the_netcdf_copy_does(tmp_path):
    path = str(tmp_path / "run.cagroup")
    with ca.group(path, mode="w") as g, g.transaction():
        g.create_array("temp", np.array([1.0, -999.0, 3.0]), dims="time",
                       attrs={"_FillValue": -999.0})
        g.create_table("events", {"n": np.ma.masked_array([1, 2, 3], [0, 1, 0])})
    convert(path, str(tmp_path / "run.nc"))
    member = _run_cli("head", f"{path}/temp", cwd=tmp_path)
    copy = _run_cli("head", str(tmp_path / "run.nc"), cwd=tmp_path)
    assert member.returncode == 0 and copy.returncode == 0, member.stderr + copy.stderr
    assert "-999" not in member.stdout and "--" in member.stdout
    assert "--" in copy.stdout
    table = _run_cli("head", f"{path}/events", cwd=tmp_path)
    assert table.stdout.split()[-3:] == ["1", "--", "3"]


def test_convert_a_netcdf_file_to_a_carray_directory_makes_a_group(tmp_path):
    src = str(tmp_path / "run.cagroup")
    with ca.group(src, mode="w") as g, g.transaction():
        g.create_array("time", np.arange(4), dims="time")
        g.create_array("temp", np.linspace(0, 1, 4), dims="time", attrs={"units": "K"})
    convert(src, str(tmp_path / "x.nc"))
    convert(str(tmp_path / "x.nc"), str(tmp_path / "g.carray"))
    done = _run_cli("convert", str(tmp_path / "x.nc"), str(tmp_path / "h.carray"),
                    cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    for name in ("g.carray", "h.carray"):
        with ca.open_group(str(tmp_path / name)) as g:
            assert g.dims_of("temp") == ("time",) and g["temp"].attrs["units"] == "K"
            np.testing.assert_array_equal(g["temp"][:], np.linspace(0, 1, 4))


_FULL_DISK = textwrap.dedent("""
    import os, resource, signal, sys
    import numpy as np
    import carray as ca
    from carray.integrations.convert import convert
    from carray.errors import StorageError

    kind = sys.argv[1]
    rng = np.random.default_rng(0)
    if kind == "zarr-array":
        ca.carray(rng.random(400_000), rootdir="a.carray", mode="w").close()
        src, dst = "a.carray", "a.zarr"
    elif kind == "zarr-group":
        with ca.group("g.cagroup", mode="w") as g, g.transaction():
            g.create_array("x", rng.random(400_000), dims="x")
        src, dst = "g.cagroup", "g.zarr"
    else:
        ca.ctable({"x": rng.random(400_000)}, rootdir="t.ctable", mode="w").close()
        src, dst = "t.ctable", "t.parquet"
    before = sorted(os.listdir("."))
    # Files may not grow past 100 kB from here on: every write beyond fails (EFBIG).
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, resource.RLIM_INFINITY))
    try:
        convert(src, dst)
    except StorageError as exc:
        assert exc.filename == dst and exc.errno == {errno}, (exc.filename, exc.errno)
        assert sorted(os.listdir(".")) == before, os.listdir(".")
        print("StorageError", exc)
    """)


@pytest.mark.parametrize("kind", ["zarr-array", "zarr-group", "parquet"])
def test_a_conversion_meeting_a_full_disk_raises_storage_error_naming_the_file(tmp_path, kind):
    """The limit on file sizes fails writes inside zarr and pyarrow as a full disk does."""
    pytest.importorskip("zarr")
    pytest.importorskip("pyarrow")
    script = tmp_path / "full.py"
    script.write_text(_FULL_DISK.replace("{errno}", str(errno.EFBIG)))
    done = subprocess.run([sys.executable, str(script), kind], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("StorageError"), done.stdout + done.stderr[-3000:]
    assert issubclass(StorageError, OSError)
