"""carray groups against xarray + zarr 3 and netCDF4, side by side in one run.

A climate-like dataset: 4 float32 variables (``temp``, ``pres``, ``u``, ``v``) on
(time, lat, lon) = (365, 180, 360), with the coordinates ``time`` (datetime64[ns]),
``lat`` and ``lon`` (float64); chunks (30, 90, 180) for every variable in every format.
Compression: carray's default (Blosc lz4, clevel 5, byte shuffle), the same codec for
zarr (``zarr.codecs.BloscCodec(cname="lz4", clevel=5, shuffle="shuffle")``, zarr format 3)
and for netCDF4 (``compression="blosc_lz4", complevel=5, blosc_shuffle=1``); each
library picks its own Blosc block size.  Cases:

1. ``write``: the whole dataset, carray through the group API (``ca.group(path,
   mode="w")``, ``create_array(..., dims=..., chunks=...)`` inside one
   ``g.transaction()``) and, when the library has it, ``ca.from_xarray``; against
   ``Dataset.to_zarr`` and ``Dataset.to_netcdf`` (netCDF4 engine);
2. ``append``: 10 steps of one day each to every time variable, carray
   ``g.append({...}, dim="time")`` (one group version each) against
   ``Dataset.to_zarr(path, append_dim="time")``;
3. ``open``: a group of 1,000 arrays of 100 float64 opened and listed (names, then the
   tree): ``ca.open_group`` + ``list(g)`` + ``g.tree()`` against ``zarr.open_group`` on
   consolidated metadata (``zarr.consolidate_metadata``) + ``list`` + ``tree()``, and
   against ``xr.open_zarr`` (consolidated) + its variable names;
4. ``read``: one variable's whole time series at one (lat, lon) point, and the whole
   variable: ``ca.open_group(p)["temp"][:, i, j]`` against
   ``xr.open_zarr(p)["temp"][:, i, j].values`` and ``zarr.open_array(p/temp)[:, i, j]``
   (each opened afresh, as written; the same on handles opened beforehand for context).

carray runs with its defaults (fsync on: every commit is durable before it counts); the
fsync-off figure beside it is labelled as such (zarr and netCDF4 never fsync).  Each
case runs ``--reps`` times (at least 3; the fast ``open`` and ``read`` at least 9),
every library once per repetition in an order that rotates, writes into fresh
directories under one temporary directory on the same disk (dirty pages written out
with ``os.sync()`` before each timed write or append, so no library pays for another's
writeback); a ratio is the peer's time over carray's from the same repetition (> 1:
carray faster), reported as the median and range over repetitions.

Run: ``python benchmarks/bench_groups.py [--quick] [--reps N] [--cases write,append,...]``.
Writes ``benchmarks/results/groups.{json,md}`` (``groups_quick`` with ``--quick``).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
from _groups_report import report, targets

import carray as ca

RESULTS = Path(__file__).parent / "results"
CASES = ("write", "append", "open", "read")
VARS = ("temp", "pres", "u", "v")
CNAME, CLEVEL = "lz4", 5  # carray's default compression (carray.defaults.cparams)


def _check_codec() -> None:
    """The peers use carray's default codec: stop if that default has changed."""
    cp = ca.defaults.cparams
    if (cp["cname"], cp["clevel"], cp["shuffle"]) != (CNAME, CLEVEL, ca.SHUFFLE):
        raise SystemExit(f"carray's default cparams are now {dict(cp)}: update CNAME/CLEVEL")


def zarr_codec():
    from zarr.codecs import BloscCodec

    return BloscCodec(cname=CNAME, clevel=CLEVEL, shuffle="shuffle")


def nc_encoding(chunks: tuple[int, ...]) -> dict:
    return {"chunksizes": chunks, "compression": f"blosc_{CNAME}", "complevel": CLEVEL,
            "blosc_shuffle": 1}


def stats(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "runs": list(values)}


def loadavg() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def du(path: str) -> int:
    """Bytes allocated under ``path`` (a file or a directory)."""
    if os.path.isfile(path):
        return os.stat(path).st_blocks * 512
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.stat(os.path.join(root, name)).st_blocks * 512
            except FileNotFoundError:
                pass
    return total


def remove(path: str) -> None:
    if os.path.isdir(path):
        shutil.rmtree(path)
    elif os.path.exists(path):
        os.remove(path)


def timed(fn, sync: bool = False) -> tuple[float, object]:
    """Wall time of ``fn()`` and its result; ``sync`` first writes out every dirty page
    (so no library's time includes the writeback of another's files)."""
    if sync:
        os.sync()
    gc.collect()
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def rotated(items: list, r: int) -> list:
    k = r % len(items)
    return items[k:] + items[:k]


def has_from_xarray() -> bool:
    try:
        return callable(getattr(ca, "from_xarray", None))
    except ImportError:  # the name is there but xarray support fails to load
        return False


# -- the data ---------------------------------------------------------------------------------

class Data:
    """The dataset: coordinates, the 4 variables and the steps appended later."""

    def __init__(self, shape: tuple[int, int, int], chunks: tuple[int, int, int],
                 steps: int, seed: int = 42) -> None:
        nt, ny, nx = shape
        self.shape, self.chunks = shape, chunks
        rng = np.random.default_rng(seed)
        self.time = (np.datetime64("2020-01-01", "ns") +
                     np.arange(nt) * np.timedelta64(1, "D")).astype("datetime64[ns]")
        self.lat = np.linspace(-90 + 90 / ny, 90 - 90 / ny, ny)
        self.lon = np.linspace(180 / nx, 360 - 180 / nx, nx)
        self.vars = {name: self._field(rng, k, np.arange(nt)) for k, name in enumerate(VARS)}
        self.steps = []
        for s in range(steps):
            stamp = self.time[-1:] + np.timedelta64(s + 1, "D")
            days = np.arange(nt + s, nt + s + 1)
            self.steps.append((stamp, {name: self._field(rng, k, days)
                                       for k, name in enumerate(VARS)}))

    def _field(self, rng, k: int, days: np.ndarray) -> np.ndarray:
        """A smooth seasonal field plus noise, rounded to 0.01 (what stations report)."""
        lat, lon = np.deg2rad(self.lat), np.deg2rad(self.lon)
        season = np.sin(2 * np.pi * (days / 365.25 + k / 4))[:, None, None]
        field = (10 * (k + 1) * np.cos(lat)[None, :, None] +
                 3 * np.sin((k + 1) * lon)[None, None, :] * np.cos(lat)[None, :, None] +
                 5 * season * np.sin(lat)[None, :, None])
        noise = rng.normal(0, 0.5, (len(days), len(self.lat), len(self.lon)))
        return np.round(field + noise, 2).astype(np.float32)

    def dataset(self):
        import xarray as xr

        return xr.Dataset({n: (("time", "lat", "lon"), v) for n, v in self.vars.items()},
                          coords={"time": self.time, "lat": self.lat, "lon": self.lon})

    def step_dataset(self, s: int):
        import xarray as xr

        stamp, block = self.steps[s]
        return xr.Dataset({n: (("time", "lat", "lon"), v) for n, v in block.items()},
                          coords={"time": stamp, "lat": self.lat, "lon": self.lon})


# -- the writers ------------------------------------------------------------------------------

def ca_write(data: Data, path: str, fsync: bool = True) -> None:
    g = ca.group(path, mode="w", fsync=fsync)
    with g.transaction():
        g.create_array("time", data.time, dims="time")
        g.create_array("lat", data.lat, dims="lat")
        g.create_array("lon", data.lon, dims="lon")
        for name, values in data.vars.items():
            g.create_array(name, values, dims=("time", "lat", "lon"), chunks=data.chunks)
    g.close()


def ca_from_xarray(data: Data, ds, path: str) -> None:
    out = ca.from_xarray(ds, path, encoding={n: {"chunks": data.chunks} for n in VARS})
    if hasattr(out, "close"):
        out.close()


def zarr_write(data: Data, ds, path: str) -> None:
    codec = zarr_codec()
    ds.to_zarr(path, mode="w", zarr_format=3, consolidated=True,
               encoding={n: {"chunks": data.chunks, "compressors": [codec]} for n in VARS})


def nc_write(data: Data, ds, path: str) -> None:
    ds.to_netcdf(path, engine="netcdf4", format="NETCDF4",
                 encoding={n: nc_encoding(data.chunks) for n in VARS})


def expected(data: Data, appended: int) -> tuple[np.ndarray, np.ndarray]:
    """The time coordinate and the last ``temp`` row after ``appended`` steps."""
    stamps = [data.time] + [data.steps[s][0] for s in range(appended)]
    last = data.steps[appended - 1][1]["temp"][0] if appended else data.vars["temp"][-1]
    return np.concatenate(stamps), last


def check_carray(data: Data, path: str, appended: int = 0) -> None:
    """What carray stored reads back as the data, time and dims included."""
    times, last = expected(data, appended)
    g = ca.open_group(path)
    try:
        assert np.array_equal(g["time"][:], times)
        assert np.array_equal(g["temp"][len(times) - 1], last)
        assert g.dims_of("temp") == ("time", "lat", "lon")
        assert g["temp"].chunks == data.chunks
    finally:
        g.close()


def check_zarr(data: Data, path: str, appended: int = 0, engine: str = "zarr") -> None:
    """What zarr (or ``ca.from_xarray``: engine ``carray_group``) stored, read back
    through xarray, is the data."""
    import xarray as xr

    times, last = expected(data, appended)
    z = xr.open_zarr(path, consolidated=True) if engine == "zarr" else \
        xr.open_dataset(path, engine=engine)
    assert np.array_equal(z["time"].values, times)
    assert np.array_equal(z["temp"][len(times) - 1].values, last)


# -- 1. write ---------------------------------------------------------------------------------

def case_write(tmp: str, data: Data, reps: int, sync: bool = True) -> dict:
    ds = data.dataset()
    jobs = [("carray", lambda p: ca_write(data, p)),
            ("carray_nofsync", lambda p: ca_write(data, p, fsync=False)),
            ("zarr", lambda p: zarr_write(data, ds, p)),
            ("netcdf4", lambda p: nc_write(data, ds, p + ".nc"))]
    if has_from_xarray():
        jobs.insert(2, ("carray_from_xarray", lambda p: ca_from_xarray(data, ds, p)))
    out: dict = {"runs": [], "bytes": {}, "from_xarray": has_from_xarray()}
    for r in range(reps):
        res = {}
        for lib, write in rotated(jobs, r):
            path = os.path.join(tmp, f"write{r}_{lib}")
            res[lib], _ = timed(lambda write=write, path=path: write(path), sync)
            where = path + ".nc" if lib == "netcdf4" else path
            out["bytes"][lib] = du(where)
            if r == 0 and lib == "carray":
                check_carray(data, path)
            elif r == 0 and lib == "carray_from_xarray":
                check_zarr(data, path, engine="carray_group")
            remove(where)
        out["runs"].append(res)
        print(f"  write {r}: " + " ".join(f"{k}={v * 1e3:.0f}ms" for k, v in res.items()),
              flush=True)
    return summarise(out, [("zarr", "carray"), ("zarr", "carray_nofsync"),
                           ("zarr", "carray_from_xarray"), ("netcdf4", "carray"),
                           ("netcdf4", "carray_nofsync")])


def versions_of(path: str) -> int:
    g = ca.open_group(path)
    try:
        return len(g.versions())
    finally:
        g.close()


# -- 2. append --------------------------------------------------------------------------------

def case_append(tmp: str, data: Data, reps: int, sync: bool = True) -> dict:
    ds = data.dataset()
    nsteps = len(data.steps)
    zarr_steps = [data.step_dataset(s) for s in range(nsteps)]

    def ca_append(path: str, fsync: bool) -> None:
        g = ca.open_group(path, mode="a", fsync=fsync)
        for stamp, block in data.steps:
            g.append({"time": stamp, **block}, dim="time")
        g.close()

    def xr_append(path: str) -> None:
        for step in zarr_steps:
            step.to_zarr(path, append_dim="time")

    def fx_append(path: str) -> None:
        for step in zarr_steps:
            out = ca.from_xarray(step, path, mode="a", append_dim="time")
            if hasattr(out, "close"):
                out.close()

    jobs = [("carray", lambda p: ca_write(data, p), lambda p: ca_append(p, True)),
            ("carray_nofsync", lambda p: ca_write(data, p, fsync=False),
             lambda p: ca_append(p, False)),
            ("zarr", lambda p: zarr_write(data, ds, p), xr_append)]
    if has_from_xarray():
        jobs.insert(2, ("carray_from_xarray", lambda p: ca_from_xarray(data, ds, p),
                        fx_append))
    out: dict = {"runs": [], "steps": nsteps, "from_xarray": has_from_xarray()}
    for r in range(reps):
        res = {}
        for lib, build, append in rotated(jobs, r):
            path = os.path.join(tmp, f"append{r}_{lib}")
            build(path)
            before = versions_of(path) if lib.startswith("carray") else 0
            res[lib], _ = timed(lambda append=append, path=path: append(path), sync)
            if lib.startswith("carray"):
                out.setdefault("versions_added", {})[lib] = versions_of(path) - before
            if r == 0 and lib == "carray_from_xarray":
                check_zarr(data, path, nsteps, engine="carray_group")
            elif r == 0:
                (check_zarr if lib == "zarr" else check_carray)(data, path, nsteps)
            remove(path)
        out["runs"].append(res)
        print(f"  append {r}: " + " ".join(f"{k}={v * 1e3:.0f}ms" for k, v in res.items()),
              flush=True)
    return summarise(out, [("zarr", "carray"), ("zarr", "carray_nofsync"),
                           ("zarr", "carray_from_xarray")])


# -- 3. open a group of many members and list it ---------------------------------------------

def build_many(tmp: str, n: int, length: int) -> tuple[str, str]:
    import zarr

    values = np.arange(length, dtype=np.float64)
    ca_path, z_path = os.path.join(tmp, "many_ca"), os.path.join(tmp, "many_zarr")
    g = ca.group(ca_path, mode="w")
    with g.transaction():
        for i in range(n):
            g.create_array(f"a{i:04d}", values + i, dims="x")
    g.close()
    codec = zarr_codec()
    zg = zarr.open_group(z_path, mode="w", zarr_format=3)
    for i in range(n):
        a = zg.create_array(f"a{i:04d}", shape=(length,), dtype="f8", chunks=(length,),
                            compressors=[codec], dimension_names=["x"])
        a[:] = values + i
    zarr.consolidate_metadata(z_path)
    return ca_path, z_path


def case_open(tmp: str, reps: int, n: int, length: int) -> dict:
    import xarray as xr
    import zarr

    t0 = time.perf_counter()
    ca_path, z_path = build_many(tmp, n, length)
    print(f"  open: built {n} members each in {time.perf_counter() - t0:.1f} s", flush=True)

    def ca_list():
        g = ca.open_group(ca_path)
        names = list(g)
        g.close()
        return names

    def ca_tree():
        g = ca.open_group(ca_path)
        names, text = list(g), g.tree()
        g.close()
        return names, text

    def z_list():
        zg = zarr.open_group(z_path, mode="r", use_consolidated=True)
        return list(zg)

    def z_tree():
        zg = zarr.open_group(z_path, mode="r", use_consolidated=True)
        return list(zg), str(zg.tree())

    def xr_list():
        return list(xr.open_zarr(z_path, consolidated=True).data_vars)

    jobs = [("carray_list", ca_list), ("carray", ca_tree), ("zarr_list", z_list),
            ("zarr", z_tree), ("xarray", xr_list)]
    assert len(ca_list()) == len(z_list()) == len(xr_list()) == n
    text = ca_tree()[1]
    assert text.count("\n") == n and f"(x: {length}) float64" in text, text[:200]
    out: dict = {"runs": [], "members": n, "length": length}
    for r in range(reps):
        res = {}
        for lib, fn in rotated(jobs, r):
            res[lib], _ = timed(fn)
        out["runs"].append(res)
        print(f"  open {r}: " + " ".join(f"{k}={v * 1e3:.1f}ms" for k, v in res.items()),
              flush=True)
    remove(ca_path)
    remove(z_path)
    return summarise(out, [("zarr", "carray"), ("zarr_list", "carray_list"),
                           ("xarray", "carray"), ("xarray", "carray_list")])


# -- 4. reads ---------------------------------------------------------------------------------

def case_read(tmp: str, data: Data, reps: int) -> dict:
    import xarray as xr
    import zarr

    ds = data.dataset()
    ca_path, z_path = os.path.join(tmp, "read_ca"), os.path.join(tmp, "read_zarr")
    ca_write(data, ca_path)
    zarr_write(data, ds, z_path)
    _, ny, nx = data.shape
    rng = np.random.default_rng(7)
    temp = data.vars["temp"]
    opened: list = []  # carray handles opened by a timed read, closed after it

    def ca_read(key):
        g = ca.open_group(ca_path)
        opened.append(g)
        return g["temp"][key]

    def jobs(i: int, j: int, handles: dict) -> list:
        g, xds, za = handles["carray"], handles["xarray"], handles["zarr"]
        point = (slice(None), i, j)
        return [
            ("point_carray", lambda: ca_read(point)),
            ("point_xarray", lambda: xr.open_zarr(z_path, consolidated=True)["temp"]
             [point].values),
            ("point_zarr", lambda: zarr.open_array(z_path, path="temp", mode="r")[point]),
            ("full_carray", lambda: ca_read(slice(None))),
            ("full_xarray", lambda: xr.open_zarr(z_path, consolidated=True)["temp"].values),
            ("full_zarr", lambda: zarr.open_array(z_path, path="temp", mode="r")[:]),
            # the same on handles opened beforehand (context)
            ("open_point_carray", lambda: g["temp"][point]),
            ("open_point_xarray", lambda: xds["temp"][point].values),
            ("open_point_zarr", lambda: za[point]),
        ]

    handles = {"carray": ca.open_group(ca_path),
               "xarray": xr.open_zarr(z_path, consolidated=True),
               "zarr": zarr.open_array(z_path, path="temp", mode="r")}
    out: dict = {"runs": []}
    for r in range(reps):
        i, j = int(rng.integers(ny)), int(rng.integers(nx))
        res = {}
        for key, fn in rotated(jobs(i, j, handles), r):
            res[key], got = timed(fn)
            while opened:
                opened.pop().close()
            assert np.array_equal(got, temp[:, i, j] if "point" in key else temp), key
            del got
        out["runs"].append(res)
        print(f"  read {r}: " + " ".join(f"{k}={v * 1e3:.2f}ms" for k, v in res.items()),
              flush=True)
    handles["carray"].close()
    remove(ca_path)
    remove(z_path)
    return summarise(out, [(f"{what}_{peer}", f"{what}_carray")
                           for what in ("point", "full", "open_point")
                           for peer in ("xarray", "zarr")])


# -- summary ---------------------------------------------------------------------------------

def summarise(out: dict, pairs: list[tuple[str, str]]) -> dict:
    runs = out["runs"]
    out["time"] = {lib: stats([run[lib] for run in runs]) for lib in runs[0]}
    out["ratio"] = {}
    for peer, mine in pairs:
        if peer in runs[0] and mine in runs[0]:
            out["ratio"][f"{peer}/{mine}"] = stats([run[peer] / run[mine] for run in runs])
    return out


def params_for(quick: bool, reps: int) -> dict:
    if quick:
        return {"reps": reps, "shape": (40, 36, 72), "chunks": (10, 18, 36), "steps": 2,
                "members": 20, "member_length": 100, "sync": False, "fast_reps": reps}
    return {"reps": reps, "shape": (365, 180, 360), "chunks": (30, 90, 180), "steps": 10,
            "members": 1000, "member_length": 100, "sync": True,
            "fast_reps": max(reps, 9)}


def run(cases: set[str], params: dict, tmp_root: str | None = None,
        warm_up: bool = True) -> dict:
    """Every case asked for, with ``params`` (see :func:`params_for`); the results."""
    _check_codec()
    warnings.filterwarnings("ignore", module="zarr")
    warnings.filterwarnings("ignore", message=".*[Cc]onsolidated metadata.*")
    res: dict = {"params": dict(params), "load_start": loadavg()}
    reps = params["reps"]
    with tempfile.TemporaryDirectory(prefix="bench_groups_", dir=tmp_root) as tmp:
        if warm_up:  # imports, codec plugins, thread pools: once, on tiny data, untimed
            tiny = Data((20, 36, 72), (10, 18, 36), 2)  # netCDF4 blosc refuses tiny chunks
            with contextlib.redirect_stdout(io.StringIO()):
                case_write(tmp, tiny, 1, False)
                case_append(tmp, tiny, 1, False)
                case_open(tmp, 1, 5, 10)
                case_read(tmp, tiny, 1)
        data = None
        if cases & {"write", "append", "read"}:
            t0 = time.perf_counter()
            data = Data(params["shape"], params["chunks"], params["steps"])
            print(f"data: {len(VARS)} x {params['shape']} float32 in "
                  f"{time.perf_counter() - t0:.1f} s", flush=True)
        if "write" in cases:
            res["write"] = case_write(tmp, data, reps, params["sync"])
        if "append" in cases:
            res["append"] = case_append(tmp, data, reps, params["sync"])
        if "open" in cases:
            res["open"] = case_open(tmp, params["fast_reps"], params["members"],
                                    params["member_length"])
        if "read" in cases:
            res["read"] = case_read(tmp, data, params["fast_reps"])
    res["load_end"] = loadavg()
    return res


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="small sizes: a smoke run")
    p.add_argument("--reps", type=int, default=None,
                   help="repetitions per case (>= 3; default 5, 3 with --quick)")
    p.add_argument("--cases", default=",".join(CASES),
                   help=f"comma-separated, of {','.join(CASES)}")
    p.add_argument("--out", default=None, help="results name (default groups, "
                                               "groups_quick with --quick)")
    args = p.parse_args(argv)
    if args.reps is None:
        args.reps = 3 if args.quick else 5
    if args.reps < 3 and not args.quick:
        p.error("--reps must be >= 3")
    cases = set(args.cases.split(","))
    if cases - set(CASES):
        p.error(f"unknown cases: {sorted(cases - set(CASES))}")
    import netCDF4
    import xarray as xr
    import zarr

    params = params_for(args.quick, args.reps)
    ca.set_nthreads(2)
    t0 = time.perf_counter()
    res = run(cases, params, os.environ.get("BENCH_TMP"), warm_up=not args.quick)
    res["seconds"] = time.perf_counter() - t0
    res["targets"] = targets(res)
    res["versions"] = {"carray": ca.__version__, "numpy": np.__version__,
                       "xarray": xr.__version__, "zarr": zarr.__version__,
                       "netCDF4": netCDF4.__version__,
                       "netcdf-c": netCDF4.__netcdf4libversion__,
                       "hdf5": netCDF4.__hdf5libversion__}
    res["machine"] = {"python": platform.python_version(), "cpus": os.cpu_count(),
                      "platform": platform.platform(),
                      "started": time.strftime("%Y-%m-%d %H:%M UTC",
                                               time.gmtime(time.time() - res["seconds"]))}
    RESULTS.mkdir(parents=True, exist_ok=True)
    name = args.out or ("groups_quick" if args.quick else "groups")
    (RESULTS / f"{name}.json").write_text(json.dumps(res, indent=1, default=str))
    text = report(res)
    (RESULTS / f"{name}.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
