"""The targets and the Markdown report of ``bench_groups.py``."""

from __future__ import annotations

#: (case, peer key, carray key, target ratio or None for context, what is compared)
COMPARISONS = [
    ("write", "zarr", "carray", 1.5, "write: group API (fsync on) vs to_zarr"),
    ("write", "zarr", "carray_nofsync", None, "write: group API, fsync off, vs to_zarr"),
    ("write", "zarr", "carray_from_xarray", 1.5, "write: ca.from_xarray (fsync on) vs to_zarr"),
    ("write", "netcdf4", "carray", None, "write: group API (fsync on) vs to_netcdf"),
    ("write", "netcdf4", "carray_nofsync", None, "write: group API, fsync off, vs to_netcdf"),
    ("append", "zarr", "carray", 1.5, "append: g.append (fsync on) vs to_zarr(append_dim)"),
    ("append", "zarr", "carray_nofsync", None, "append: g.append, fsync off, vs to_zarr"),
    ("append", "zarr", "carray_from_xarray", None,
     "append: ca.from_xarray(append_dim) vs to_zarr"),
    ("open", "zarr", "carray", 3.0, "open + list + tree vs zarr (consolidated)"),
    ("open", "xarray", "carray", 3.0, "open + list + tree vs xr.open_zarr (consolidated)"),
    ("open", "zarr_list", "carray_list", None, "open + list vs zarr (consolidated)"),
    ("open", "xarray", "carray_list", None, "open + list vs xr.open_zarr"),
    ("read", "point_xarray", "point_carray", 2.0, "open + time series at a point vs xarray"),
    ("read", "point_zarr", "point_carray", 2.0, "open + time series at a point vs zarr"),
    ("read", "full_xarray", "full_carray", 2.0, "open + whole variable vs xarray"),
    ("read", "full_zarr", "full_carray", 2.0, "open + whole variable vs zarr"),
    ("read", "open_point_xarray", "open_point_carray", None,
     "time series at a point, handle open, vs xarray"),
    ("read", "open_point_zarr", "open_point_carray", None,
     "time series at a point, handle open, vs zarr"),
]

LABELS = {"carray": "carray", "carray_nofsync": "carray, fsync off",
          "carray_from_xarray": "ca.from_xarray", "carray_list": "carray",
          "zarr": "zarr", "zarr_list": "zarr", "xarray": "xarray", "netcdf4": "netCDF4"}


def ms(s: dict) -> str:
    """Median (min-max) of a time in ms."""
    return f"{s['median'] * 1e3:.1f} ({s['min'] * 1e3:.1f}-{s['max'] * 1e3:.1f})"


def x(s: dict) -> str:
    return f"{s['median']:.2f}x ({s['min']:.2f}-{s['max']:.2f})"


def label(key: str) -> str:
    for prefix in ("point_", "full_", "open_point_"):
        if key.startswith(prefix):
            key = key[len(prefix):]
    return LABELS.get(key, key)


def targets(res: dict) -> list[dict]:
    """One row per comparison measured: times, ratio, target and whether it is met."""
    rows = []
    for case, peer, mine, target, what in COMPARISONS:
        c = res.get(case)
        key = f"{peer}/{mine}"
        if c is None or key not in c["ratio"]:
            if c is not None and target is not None:
                rows.append({"case": case, "what": what, "target": target, "met": None,
                             "missing": True})
            continue
        ratio = c["ratio"][key]
        rows.append({"case": case, "what": what, "carray": c["time"][mine], "peer_name":
                     label(peer), "peer": c["time"][peer], "ratio": ratio, "target": target,
                     "met": None if target is None else ratio["median"] >= target})
    return rows


def verdict(row: dict) -> str:
    if row["target"] is None:
        return "(context)"
    if row["met"] is None:
        return f">= {row['target']:g}x: not measured"
    return f">= {row['target']:g}x: {'met' if row['met'] else 'missed'}"


def table(rows: list[dict]) -> list[str]:
    lines = ["| comparison | carray ms | peer | peer ms | ratio (peer / carray) | target |",
             "| --- | ---: | --- | ---: | ---: | --- |"]
    for row in rows:
        if row.get("missing"):
            lines.append(f"| {row['what']} | - | | | | {verdict(row)} |")
            continue
        lines.append(f"| {row['what']} | {ms(row['carray'])} | {row['peer_name']} | "
                     f"{ms(row['peer'])} | {x(row['ratio'])} | {verdict(row)} |")
    return lines


def report(res: dict) -> str:
    p, v = res["params"], res["versions"]
    nt, ny, nx = p["shape"]
    lines = ["# bench_groups", "",
             f"carray {v['carray']} against xarray {v['xarray']} + zarr {v['zarr']} (format 3) "
             f"and netCDF4 {v['netCDF4']} (netcdf-c {v['netcdf-c']}, HDF5 {v['hdf5']}); "
             f"numpy {v['numpy']}, Python {res['machine']['python']}, "
             f"{res['machine']['cpus']} cores, started {res['machine']['started']}.", "",
             f"Dataset: 4 float32 variables on (time, lat, lon) = ({nt}, {ny}, {nx}) plus "
             f"the time (datetime64[ns]), lat and lon coordinates; chunks {tuple(p['chunks'])} "
             "everywhere; Blosc lz4 clevel 5 byte shuffle everywhere (carray's default; "
             "zarr `BloscCodec`, netCDF4 `blosc_lz4`), each library's own Blosc block size. "
             f"Append: {p['steps']} steps of one day to every time variable. Open: "
             f"{p['members']:,} arrays of {p['member_length']} float64. carray's defaults "
             "(fsync on) unless labelled fsync off; zarr and netCDF4 do not fsync.", "",
             f"{p['reps']} repetitions of write and append, {p.get('fast_reps', p['reps'])} of "
             "open and read, every library once in each, in an order "
             "that rotates; fresh directories under one temporary directory for every "
             "write, and `os.sync()` before each timed write or append. Times: median (min-max) in ms; ratio = peer / carray from the same "
             "repetition (> 1: carray faster), median (min-max). Whole run "
             f"{res['seconds']:.0f} s; load average at start {res['load_start']}, at end "
             f"{res['load_end']}.", ""]
    lines += table(res["targets"])
    if "write" in res:
        w = res["write"]
        lines += ["", "Bytes on disk after the write: " + ", ".join(
            f"{label(k)} {b / 2**20:.1f} MiB" for k, b in w["bytes"].items()) + "."]
        if not w.get("from_xarray"):
            lines += ["", "`ca.from_xarray` was not in this carray: not measured."]
    if "append" in res and "versions_added" in res["append"]:
        added = res["append"]["versions_added"]
        lines += ["", "Group versions added by the appends: " +
                  ", ".join(f"{label(k)} {n}" for k, n in added.items()) + "."]
    lines += ["", "Parameters: " + ", ".join(f"{k}={val}" for k, val in p.items()), ""]
    return "\n".join(lines)
