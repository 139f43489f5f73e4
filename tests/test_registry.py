"""The format registry: every fixture is told apart by what is stored, errors are typed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import carray as ca
from carray import registry
from carray.core.problems import tally
from carray.errors import ContainerNotFoundError, FormatError

DATA = Path(__file__).parent / "data"


def _expected_format(path: Path) -> str | None:
    folder, name = path.parent.name, path.name
    if path.suffix in (".json", ".md", ".blosc", ".bin", ".npy"):
        return None
    if folder == "bcolz":
        return "ctable" if name.startswith(("t_", "z_t_")) else "bcolz"
    by_suffix = {".b2nd": "b2nd", ".b2frame": "b2frame", ".blp": "bloscpack",
                 ".caterva": "caterva", ".ds": "ds", ".nc": "netcdf"}
    return by_suffix.get(path.suffix)


FIXTURES = sorted(p for p in DATA.glob("*/*")
                  if ".expected." not in p.name and _expected_format(p) is not None)


def test_there_are_fixtures_of_every_stored_kind():
    kinds = {_expected_format(p) for p in FIXTURES}
    assert kinds == {"ctable", "bcolz", "b2nd", "b2frame", "bloscpack", "caterva", "ds",
                     "netcdf"}


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_fixture_is_sniffed_right(path):
    assert registry.sniff(path).name == _expected_format(path)


def test_carray_directories_and_npy_files_are_sniffed(tmp_path):
    ca.carray(np.arange(10), rootdir=tmp_path / "a").close()
    ca.carray(np.arange(10), rootdir=tmp_path / "b", format="bcolz").close()
    ca.carray(np.arange(10), rootdir=tmp_path / "c.b2nd").close()
    np.save(tmp_path / "d.npy", np.arange(3))
    t = ca.ctable({"x": np.arange(3)}, rootdir=tmp_path / "t")
    t.close()
    got = {n: registry.sniff(tmp_path / n).name for n in ("a", "b", "c.b2nd", "d.npy", "t")}
    assert got == {"a": "carray", "b": "bcolz", "c.b2nd": "b2nd", "d.npy": "npy",
                   "t": "ctable"}


def test_sniffing_ignores_a_misleading_extension(tmp_path):
    ca.carray(np.arange(10), rootdir=tmp_path / "looks.bcolz").close()
    assert registry.sniff(tmp_path / "looks.bcolz").name == "carray"
    np.save(tmp_path / "x.npy", np.arange(3))
    (tmp_path / "x.npy").rename(tmp_path / "x.ds")
    assert registry.sniff(tmp_path / "x.ds").name == "npy"


def test_missing_and_unknown_paths_give_typed_errors(tmp_path):
    with pytest.raises(ContainerNotFoundError, match="no such"):
        registry.sniff(tmp_path / "nope")
    (tmp_path / "text.txt").write_text("hello")
    with pytest.raises(FormatError, match="not in any format"):
        registry.sniff(tmp_path / "text.txt")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FormatError):
        registry.sniff(tmp_path / "empty")


def test_open_is_typed_and_says_what_is_wrong(tmp_path):
    with pytest.raises(ContainerNotFoundError):
        ca.open(tmp_path / "nope")
    (tmp_path / "text.txt").write_text("hello")
    with pytest.raises(FormatError, match="not in any format"):
        ca.open(tmp_path / "text.txt")
    with pytest.raises(FormatError, match="ds file, not a carray or ctable"):
        ca.open(DATA / "ds" / "all_types.ds")
    assert isinstance(ca.open(DATA / "bcolz" / "t_basic.bcolz", mode="r"), ca.ctable)
    assert isinstance(ca.open_table(DATA / "bcolz" / "t_basic.bcolz", mode="r"), ca.ctable)
    with pytest.raises(FormatError, match="not an array"):
        ca.open_array(DATA / "bcolz" / "t_basic.bcolz", mode="r")
    a = ca.open_array(DATA / "caterva" / "cat_f8_2d_zstd.caterva", mode="r")
    assert isinstance(a, ca.carray)
    with pytest.raises(FormatError, match="not a table"):
        ca.open_table(DATA / "bcolz" / "c_i8_appended.bcolz", mode="r")


def test_get_and_extensions():
    assert registry.get("npy").extensions == (".npy",)
    with pytest.raises(ValueError, match="unknown format 'hdf9'"):
        registry.get("hdf9")
    assert registry.for_extension("x.B2ND").name == "b2nd"
    assert registry.for_extension("x.zarr").name == "zarr"
    assert registry.for_extension("x.parquet").kind == "table"
    assert registry.for_extension("x.h9") is None
    assert registry.for_extension("dir") is None
    names = [f.name for f in registry.FORMATS]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("fmt", registry.FORMATS, ids=lambda f: f.name)
def test_every_format_opens_describes_heads_and_verifies_a_fixture(fmt, tmp_path):
    path = _sample(fmt, tmp_path)
    assert registry.sniff(path) is fmt
    info = fmt.info(str(path), None)
    assert isinstance(info, dict) and info
    head = fmt.head(str(path), 2, None)
    assert head and all(v is None or np.ndim(v) == 0 or len(v) <= 2 for v in head.values())
    problems, checked = tally(registry.verify(path))
    assert problems == [] and checked >= 1


def _zarr_sample(path: Path) -> None:
    zarr = pytest.importorskip("zarr", reason="zarr is a test dependency")
    z = zarr.create_array(str(path), shape=(10, 4), chunks=(3, 4), dtype="i4")
    z[:] = np.arange(40).reshape(10, 4)


def _zarr_group_sample(path: Path) -> None:
    zarr = pytest.importorskip("zarr", reason="zarr is a test dependency")
    root = zarr.open_group(str(path), mode="w", zarr_format=3)
    root.attrs["title"] = "made by zarr"
    z = root.create_group("sub").create_array("v", shape=(10,), chunks=(4,), dtype="f8",
                                               dimension_names=["t"])
    z[:] = np.arange(10.0)


def _parquet_sample(path: Path) -> None:
    pa = pytest.importorskip("pyarrow", reason="pyarrow is a test dependency")
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"a": np.arange(10), "b": np.linspace(0, 1, 10)}), path)


def _group_sample(path: Path) -> None:
    with ca.group(path, mode="w") as g:
        g.create_array("temp", np.arange(40.0).reshape(10, 4), dims=("time", "x"))
        g.create_table("sub/events", {"a": np.arange(5)})


def _sample(fmt: registry.Format, tmp_path: Path) -> Path:
    made = {"carray": lambda p: ca.carray(np.arange(100), rootdir=p, chunklen=30).close(),
            "npy": lambda p: np.save(p, np.arange(12).reshape(4, 3)),
            "zarr": _zarr_sample, "parquet": _parquet_sample, "group": _group_sample,
            "zarr-group": _zarr_group_sample,
            "csv": lambda p: p.write_text("a,b\n1,x\n2,y\n3,z\n")}
    if fmt.name in made:
        path = tmp_path / f"x{(fmt.extensions or ('.zarr',))[0]}"
        made[fmt.name](path)
        return path
    return next(p for p in FIXTURES if _expected_format(p) == fmt.name
                and "snappy" not in p.name and "empty" not in p.name
                and "pickle" not in p.name)
