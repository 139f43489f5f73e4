"""Tables to and from Parquet files and .ds/.nc datasets (``carray convert``)."""

from __future__ import annotations

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow", reason="pyarrow is a test dependency")
pq = pytest.importorskip("pyarrow.parquet", reason="pyarrow.parquet is a test dependency")

import carray as ca  # noqa: E402
from carray import registry  # noqa: E402
from carray.cli._ui import human  # noqa: E402
from carray.cli.main import main  # noqa: E402
from carray.integrations import table_files  # noqa: E402
from carray.integrations.convert import convert  # noqa: E402

N = 5_003


@pytest.fixture
def table(tmp_path):
    rng = np.random.default_rng(1)
    t = ca.ctable({"id": np.arange(N), "x": rng.random(N),
                   "name": np.array([f"n{i % 13}" for i in range(N)], dtype=object)},
                  rootdir=tmp_path / "t.ctable", mode="w")
    t.attrs["title"] = "obs"
    t.close()
    return tmp_path / "t.ctable"


def _columns(path):
    with ca.open(path, mode="r") as t:
        return {n: (t.cols[n].read(as_object=True) if t.cols[n].dtype.kind in "OT"
                    else t.cols[n][:]) for n in t.names}, t.attrs.getall()


def _same(a: dict, b: dict) -> None:
    assert set(a) == set(b)
    for name in a:
        assert np.array_equal(np.asarray(a[name]), np.asarray(b[name])), name


def test_parquet_round_trip_in_batches(table, tmp_path, monkeypatch):
    monkeypatch.setattr("carray.table.interop.STREAM_ROWS", 1000)  # several row groups
    convert(table, tmp_path / "t.parquet")
    f = pq.ParquetFile(tmp_path / "t.parquet")
    assert f.metadata.num_rows == N and f.metadata.num_row_groups == 6
    assert f.schema_arrow.field("name").type == pa.large_string()
    assert registry.sniff(tmp_path / "t.parquet").name == "parquet"
    seen = []
    convert(tmp_path / "t.parquet", tmp_path / "back.ctable",
            progress=lambda done, total: seen.append((done, total)))
    assert seen[-1] == (N, N) and len(seen) == 6
    _same(_columns(table)[0], _columns(tmp_path / "back.ctable")[0])


@pytest.mark.parametrize("ext", [".ds", ".nc"])
def test_dataset_round_trip(table, tmp_path, ext):
    if ext == ".nc":
        pytest.importorskip("netCDF4")
    convert(table, tmp_path / f"t{ext}")
    d = registry.get("ds" if ext == ".ds" else "netcdf").open(str(tmp_path / f"t{ext}"), "r",
                                                                None)
    assert d["."]["id"][".dims"] == [table_files.ROW_DIM]
    assert d["."]["."]["title"] == "obs"
    convert(tmp_path / f"t{ext}", tmp_path / "back.ctable")
    cols, attrs = _columns(tmp_path / "back.ctable")
    _same(_columns(table)[0], cols)
    assert attrs["title"] == "obs"


def test_a_dataset_that_is_not_a_table_is_refused(tmp_path):
    ca.ds.write(tmp_path / "grid.ds", {"v": np.zeros((3, 4)), ".": {"v": {".dims": ["y", "x"]}}})
    with pytest.raises(ValueError, match="'v' has 2 dimensions"):
        convert(tmp_path / "grid.ds", tmp_path / "t.ctable")
    assert not (tmp_path / "t.ctable").exists()


def test_cli_info_head_verify_on_parquet(table, tmp_path, capsys):
    assert main(["convert", str(table), str(tmp_path / "t.parquet")]) == 0
    capsys.readouterr()
    assert main(["info", str(tmp_path / "t.parquet")]) == 0
    out = capsys.readouterr().out
    assert f"{N} rows x 3 columns" in out and "large_string" in out
    assert main(["head", str(tmp_path / "t.parquet")]) == 0
    assert "n1" in capsys.readouterr().out
    assert main(["verify", str(tmp_path / "t.parquet")]) == 0


def _metadata_sizes(path) -> tuple[int, int]:
    """Uncompressed and compressed bytes of every leaf column, from pyarrow's metadata."""
    meta = pq.ParquetFile(path).metadata
    chunks = [meta.row_group(g).column(i) for g in range(meta.num_row_groups)
              for i in range(meta.num_columns)]
    return (sum(c.total_uncompressed_size for c in chunks),
            sum(c.total_compressed_size for c in chunks))


def test_parquet_info_sizes_are_the_files_metadata(tmp_path):
    n = 3_000
    pq.write_table(pa.table({
        "point": pa.array([{"x": i, "y": i / 2} for i in range(n)]),  # two leaf columns
        "tags": pa.array([[i, i + 1] for i in range(n)]),
        "label": pa.array([f"l{i % 5}" for i in range(n)]),
        "z": pa.array(np.arange(n)),
    }), tmp_path / "nested.parquet", row_group_size=1_000)
    info = table_files.parquet_info(str(tmp_path / "nested.parquet"))
    meta = pq.ParquetFile(tmp_path / "nested.parquet").metadata
    assert (info["rows"], info["row_groups"], info["leaf_columns"]) == (n, 3, 5)
    assert [c["name"] for c in info["columns"]] == ["point", "tags", "label", "z"]
    assert (info["nbytes"], info["cbytes"]) == _metadata_sizes(tmp_path / "nested.parquet")
    assert info["nbytes"] == sum(meta.row_group(g).total_byte_size for g in range(3))
    by_name = {c["name"]: c for c in info["columns"]}
    # 'z' is the last leaf (after point.x, point.y, tags.list.element, label), not the third.
    z = [meta.row_group(g).column(4) for g in range(3)]
    assert z[0].path_in_schema == "z"
    assert by_name["z"]["nbytes"] == sum(c.total_uncompressed_size for c in z)
    assert by_name["z"]["cbytes"] == sum(c.total_compressed_size for c in z)
    assert info["disk_bytes"] == (tmp_path / "nested.parquet").stat().st_size


def test_cli_info_on_parquet_names_it_and_its_sizes(tmp_path, capsys):
    pq.write_table(pa.table({"a": pa.array(np.arange(2_000)),
                             "p": pa.array([{"x": i, "y": 1.0} for i in range(2_000)])}),
                   tmp_path / "t.parquet", row_group_size=500)
    assert main(["info", str(tmp_path / "t.parquet")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "parquet: 2000 rows x 2 columns (3 leaf columns), 4 row groups"
    assert lines[1].split() == ["column", "dtype", "uncompressed", "compressed", "ratio",
                                "on", "disk"]
    nbytes, cbytes = _metadata_sizes(tmp_path / "t.parquet")
    total = lines[-1].split()
    assert total[0] == "(total)" and " ".join(total[1:3]) == human(nbytes)
    assert " ".join(total[3:5]) == human(cbytes)
    assert " ".join(total[6:]) == human((tmp_path / "t.parquet").stat().st_size)


def test_existing_destination_needs_force(table, tmp_path, capsys):
    (tmp_path / "t.parquet").write_bytes(b"old")
    assert main(["convert", str(table), str(tmp_path / "t.parquet")]) == 1
    assert "already exists" in capsys.readouterr().err
    assert (tmp_path / "t.parquet").read_bytes() == b"old"
    assert main(["convert", "--force", str(table), str(tmp_path / "t.parquet")]) == 0
    assert pq.ParquetFile(tmp_path / "t.parquet").metadata.num_rows == N


def test_a_table_to_an_array_format_is_refused(table, tmp_path):
    with pytest.raises(ValueError, match="a table converts to"):
        convert(table, tmp_path / "t.npy")


def test_cli_to_names_the_table_format(table, tmp_path):
    assert main(["convert", str(table), str(tmp_path / "out"), "--to", "parquet"]) == 0
    assert registry.sniff(tmp_path / "out").name == "parquet"
    assert main(["convert", str(tmp_path / "out"), str(tmp_path / "back"), "--to",
                 "ctable"]) == 0
    _same(_columns(table)[0], _columns(tmp_path / "back")[0])
