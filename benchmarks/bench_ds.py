"""ds format benchmark: the table of the ds storage-format page, on this machine.

Writes and reads 'tiny' files (one int64 of size 1) and 'small' files (int64
arange(1000)), many of each, and one 'large' file (float64 20x1000x1000), with

* carray's ``ds`` (default: fsync before the rename; and with ``fsync=False``, which is
  what the peers do: neither ds-format nor netCDF4 flushes to stable storage),
* the ds-format package (5.0.2), and
* netCDF4 directly (NetCDF-4/HDF5 files),

side by side in one run, interleaved, several repetitions, medians reported.

Usage: ``python benchmarks/bench_ds.py [--quick] [--reps N] [--dir TMPDIR]``.
Writes ``benchmarks/results/bench_ds.{json,md,png}``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from carray.formats import ds

RESULTS = Path(__file__).parent / "results"


# -- the contenders: write(path, data) and read(path) for one variable 'x' --------------------

def ours_write(path, data, fsync=True):
    ds.write(path, {"x": data, ".": {"x": {".dims": [f"x{i}" for i in range(data.ndim)]}}},
             fsync=fsync)


def ours_read(path):
    return ds.read(path)["x"]


def dsformat_write(path, data):
    import ds_format
    ds_format.write(path, {"x": data,
                           ".": {"x": {".dims": [f"x{i}" for i in range(data.ndim)]}}})


def dsformat_read(path):
    import ds_format
    return ds_format.read(path)["x"]


def netcdf_write(path, data):
    import netCDF4
    with netCDF4.Dataset(path, "w") as f:
        dims = []
        for i, n in enumerate(data.shape):
            f.createDimension(f"x{i}", n)
            dims.append(f"x{i}")
        f.createVariable("x", data.dtype, dims)[...] = data


def netcdf_read(path):
    import netCDF4
    with netCDF4.Dataset(path) as f:
        return f.variables["x"][...]


CONTENDERS = {
    "carray ds": (ours_write, ours_read, ".ds"),
    "carray ds (no fsync)": (lambda p, d: ours_write(p, d, fsync=False), ours_read, ".ds"),
    "ds-format": (dsformat_write, dsformat_read, ".ds"),
    "netCDF4": (netcdf_write, netcdf_read, ".nc"),
}


def cases(quick: bool) -> dict:
    if quick:
        return {"tiny": (np.array([1], dtype=np.int64), 200),
                "small": (np.arange(1000, dtype=np.int64), 200),
                "large": (np.ones((2, 1000, 1000)), 1)}
    return {"tiny": (np.array([1], dtype=np.int64), 2000),
            "small": (np.arange(1000, dtype=np.int64), 2000),
            "large": (np.ones((20, 1000, 1000)), 1)}


def run_once(name: str, data: np.ndarray, count: int, folder: Path) -> dict:
    """Write ``count`` files into the new directory ``folder``, then read them back;
    seconds for each, and bytes on disk."""
    write, read, ext = CONTENDERS[name]
    folder.mkdir()
    paths = [str(folder / f"f{i}{ext}") for i in range(count)]
    # Start each timed phase with no dirty pages left by the previous contender (the
    # kernel's writeback otherwise lands on whoever runs next).
    os.sync()
    start = time.perf_counter()
    for path in paths:
        write(path, data)
    t_write = time.perf_counter() - start
    os.sync()
    start = time.perf_counter()
    for path in paths:
        out = read(path)
    t_read = time.perf_counter() - start
    if not np.array_equal(np.asarray(out), data):
        raise AssertionError(f"{name} read back different data")
    size = sum(os.path.getsize(p) for p in paths)
    if data.nbytes > 1 << 20:
        shutil.rmtree(folder)
    # Small files are deleted only at the end: deleting thousands of files between runs
    # left this machine's file system slow to create files for a while afterwards.
    return {"write": t_write, "read": t_read, "bytes": size}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer files, smaller 'large'")
    parser.add_argument("--reps", type=int, default=5, help="repetitions (median reported)")
    parser.add_argument("--dir", help="where to write the files (default: a temp dir)")
    args = parser.parse_args(argv)

    workdir = Path(tempfile.mkdtemp(prefix="bench_ds_", dir=args.dir))
    raw: dict = {}
    try:
        for case, (data, count) in cases(args.quick).items():
            for rep in range(args.reps):
                # Interleave the contenders so slow phases of a shared machine hit all.
                order = list(CONTENDERS) if rep % 2 == 0 else list(reversed(CONTENDERS))
                for name in order:
                    folder = workdir / f"{case}-{rep}-{''.join(c for c in name if c.isalnum())}"
                    result = run_once(name, data, count, folder)
                    raw.setdefault(case, {}).setdefault(name, []).append(result)
                    print(f"{case:5s} x{count:<5d} rep {rep + 1}: {name:21s} "
                          f"write {result['write']:8.3f} s  read {result['read']:8.3f} s",
                          file=sys.stderr)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    summary = {}
    for case, by_name in raw.items():
        count = cases(args.quick)[case][1]
        summary[case] = {"files": count}
        for name, runs in by_name.items():
            summary[case][name] = {
                "write_s": statistics.median(r["write"] for r in runs),
                "read_s": statistics.median(r["read"] for r in runs),
                "mb": runs[0]["bytes"] / 1e6,
            }
        # Both carray variants write the same bytes, so their reads are one sample set.
        summary[case]["carray ds"]["read_s"] = summary[case]["carray ds (no fsync)"][
            "read_s"] = statistics.median(r["read"] for name in ("carray ds",
                                          "carray ds (no fsync)") for r in by_name[name])
    report = {
        "benchmark": "bench_ds", "quick": args.quick, "reps": args.reps,
        "machine": {"python": platform.python_version(), "platform": platform.platform(),
                    "cpus": os.cpu_count(), "numpy": np.__version__,
                    "ds_format": _version("ds_format"), "netCDF4": _version("netCDF4")},
        "summary": summary, "runs": raw,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "bench_ds.json").write_text(json.dumps(report, indent=2) + "\n")
    table = markdown(report)
    (RESULTS / "bench_ds.md").write_text(table)
    chart(report, RESULTS / "bench_ds.png")
    print(table)
    return 0


def _version(module: str) -> str:
    try:
        from importlib.metadata import version
        return version({"ds_format": "ds-format"}.get(module, module))
    except Exception:
        return "not installed"


def markdown(report: dict) -> str:
    m = report["machine"]
    lines = [
        f"ds benchmark ({'quick' if report['quick'] else 'full'}; median of "
        f"{report['reps']} runs; Python {m['python']}, {m['cpus']} CPUs, numpy {m['numpy']}, "
        f"ds-format {m['ds_format']}, netCDF4 {m['netCDF4']}). Times in seconds for all files; "
        "factors are the peer's time divided by carray's without fsync (the peers do not "
        "fsync). Both carray variants write the same files: reads are the median of both.",
        "",
        "| test | carray ds | carray ds (no fsync) | ds-format | netCDF4 "
        "| vs ds-format | vs netCDF4 | size ds (MB) | size NetCDF (MB) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for case, s in report["summary"].items():
        for op in ("write", "read"):
            key = f"{op}_s"
            ours = s["carray ds (no fsync)"][key]
            row = [f"{op} {case} x{s['files']}", _t(s["carray ds"][key]),
                   _t(ours) if op == "write" else "(same)",
                   _t(s["ds-format"][key]), _t(s["netCDF4"][key]),
                   f"{s['ds-format'][key] / ours:.1f}x", f"{s['netCDF4'][key] / ours:.1f}x",
                   f"{s['carray ds']['mb']:.2f}" if op == "write" else "",
                   f"{s['netCDF4']['mb']:.2f}" if op == "write" else ""]
            lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def _t(seconds: float) -> str:
    return f"{seconds:.3f}" if seconds < 10 else f"{seconds:.1f}"


def chart(report: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(CONTENDERS)
    tests = [(case, op) for case in report["summary"] for op in ("write", "read")]
    fig, ax = plt.subplots(figsize=(10, 4.5))
    width = 0.8 / len(names)
    for i, name in enumerate(names):
        values = [report["summary"][case][name][f"{op}_s"] for case, op in tests]
        ax.bar(np.arange(len(tests)) + (i - (len(names) - 1) / 2) * width, values, width,
               label=name)
    ax.set_xticks(np.arange(len(tests)))
    ax.set_xticklabels([f"{op} {case}\nx{report['summary'][case]['files']}"
                        for case, op in tests])
    ax.set_yscale("log")
    ax.set_ylabel("seconds (log scale; lower is better)")
    ax.set_title("ds files: carray vs ds-format vs netCDF4 (median of "
                 f"{report['reps']} runs)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
