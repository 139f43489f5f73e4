"""Space and time of datasets built by edits and appends, against the same data written at once.

Two parts:

* ``frames``: 256 frames of 512x512 float32 (256 MiB) on disk, written at once
  (``ca.carray(frames, rootdir=...)``), appended 40 frames at a time and one frame at
  a time (then closed), with carray's default chunks for an array started empty
  (``ca.carray(frames[:0], rootdir=...)``) and with ``chunklen=128`` (chunks of whole
  frames).  Time (median and range of ``--repeat`` runs, interleaved) and the bytes
  on disk after each.  Target (issue 22): one frame at a time costs at most 3x
  writing everything at once.
* ``space``: every case of ``tests/layouts/test_space.py`` at full size (the sizes
  ``CARRAY_SOAK=1`` runs): the bytes after the edits and appends, the bytes of the
  same data written at once, their ratio.  Target: at most 1.3x.

Run: ``python benchmarks/bench_space.py [--part frames|space|all] [--repeat N]
[--frames N] [--side N]``.  Writes ``benchmarks/results/space.json`` (a part run on
its own replaces only its part) and ``space.md``.
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

import carray as ca

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
sys.path.insert(0, str(HERE.parent / "tests" / "layouts"))
import test_space as cases  # noqa: E402 - the cases and their sizes live with the test

TIME_BOUND, SPACE_BOUND = 3.0, cases.BOUND


# -- frames --------------------------------------------------------------------------------

def build(path: str, f: np.ndarray, step: int, chunklen: int | None) -> float:
    """Write ``f`` at ``path`` (``step`` 0: at once; else appends of ``step`` frames),
    close it; seconds taken."""
    kw = {"chunklen": chunklen} if chunklen else {}
    t0 = time.perf_counter()
    if step == 0:
        chunks = None if chunklen else ca.carray(f[:0], **kw).chunks  # as an appender gets
        a = ca.carray(f, rootdir=path, mode="w", chunks=chunks, **kw)
    else:
        a = ca.carray(f[:0], rootdir=path, mode="w", **kw)
        for i in range(0, len(f), step):
            a.append(f[i:i + step])
    a.close()
    return time.perf_counter() - t0


def frames_part(n: int, side: int, repeat: int) -> dict:
    f = cases.frames(n, side)
    out: dict = {"frames": n, "side": side, "dtype": "float32", "nbytes": f.nbytes,
                 "repeat": repeat, "configs": {}}
    steps = {"at once": 0, "40 frames at a time": 40, "1 frame at a time": 1}
    for label, chunklen in (("default chunks", None), ("chunklen=128", 128)):
        times: dict[str, list[float]] = {s: [] for s in steps}
        sizes: dict[str, int] = {}
        chunks = None
        with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as tmp:
            for r in range(repeat):  # interleaved: drifts in the machine's load hit every case
                for name, step in steps.items():
                    path = str(Path(tmp) / f"a{step}")
                    times[name].append(build(path, f, step, chunklen))
                    sizes[name] = cases.disk_bytes(path)
                    a = ca.open(path, mode="r")
                    chunks = a.chunks
                    if r == 0:
                        np.testing.assert_array_equal(a[-3:], f[-3:])
                    a.close()
                    shutil.rmtree(path)
                    print(f"  {label:15} {name:20} run {r + 1}: {times[name][-1]:8.2f} s "
                          f"{sizes[name] / 2**20:8.1f} MiB", flush=True)
        base = statistics.median(times["at once"])
        out["configs"][label] = {
            "chunks": list(chunks) if chunks else None,
            "cases": {name: {"median_s": statistics.median(t), "min_s": min(t), "max_s": max(t),
                             "runs_s": t, "bytes": sizes[name],
                             "time_vs_at_once": statistics.median(t) / base,
                             "bytes_vs_at_once": sizes[name] / sizes["at once"]}
                      for name, t in times.items()}}
    return out


# -- space -----------------------------------------------------------------------------------

def space_part() -> list[dict]:
    rows = []
    size = cases.SIZES["full"]
    for kind, case, layout in cases.all_cases():
        with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as tmp:
            try:
                o = cases.measure(kind, case, layout, Path(tmp), size)
            except Exception as e:  # noqa: BLE001 - reported, the other cases go on
                rows.append({"case": case, "layout": layout, "error": f"{type(e).__name__}: {e}"})
                print(f"  {case:28} {layout:10} ERROR {e}", flush=True)
                continue
        rows.append({"case": case, "layout": layout, "bytes": o.nbytes, "at_once": o.at_once,
                     "ratio": o.ratio, "seconds": o.seconds})
        print(f"  {case:28} {layout:10} {o.nbytes:14,} {o.at_once:14,} {o.ratio:6.2f}x "
              f"({o.seconds:.1f} s)", flush=True)
    return rows


# -- report ----------------------------------------------------------------------------------

def report(results: dict) -> str:
    lines = ["# bench_space", ""]
    fr = results.get("frames")
    if fr:
        lines += [f"{fr['frames']} frames of {fr['side']}x{fr['side']} float32 "
                  f"({fr['nbytes'] / 2**20:.0f} MiB) on disk; median [range] of {fr['repeat']} "
                  "interleaved runs, each ending with close(). Target: one frame at a time "
                  f"<= {TIME_BOUND:g}x the time of writing at once; bytes <= {SPACE_BOUND}x.", "",
                  "| chunks | how | time | vs at once | MiB on disk | vs at once | target |",
                  "| --- | --- | ---: | ---: | ---: | ---: | --- |"]
        for label, cfg in fr["configs"].items():
            for name, c in cfg["cases"].items():
                target = ""
                if name != "at once":
                    ok_t = c["time_vs_at_once"] <= TIME_BOUND or name != "1 frame at a time"
                    ok_s = c["bytes_vs_at_once"] <= SPACE_BOUND
                    target = "met" if ok_t and ok_s else "MISSED"
                lines.append(f"| {label} {tuple(cfg['chunks'])} | {name} | "
                             f"{c['median_s']:.2f} s [{c['min_s']:.2f}, {c['max_s']:.2f}] | "
                             f"{c['time_vs_at_once']:.1f}x | {c['bytes'] / 2**20:.1f} | "
                             f"{c['bytes_vs_at_once']:.2f}x | {target} |")
        lines.append("")
    sp = results.get("space")
    if sp:
        lines += ["## Space after edits and appends (tests/layouts/test_space.py at full size)", "",
                  "| case | layout | bytes | written at once | ratio | target |",
                  "| --- | --- | ---: | ---: | ---: | --- |"]
        for r in sp:
            if "error" in r:
                lines.append(f"| {r['case']} | {r['layout']} | error: {r['error']} | | | |")
                continue
            ok = "met" if r["ratio"] <= SPACE_BOUND else "MISSED"
            lines.append(f"| {r['case']} | {r['layout']} | {r['bytes']:,} | {r['at_once']:,} "
                         f"| {r['ratio']:.2f}x | {ok} (<= {SPACE_BOUND}x) |")
        lines.append("")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--part", choices=("frames", "space", "all"), default="all")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--frames", type=int, default=256)
    p.add_argument("--side", type=int, default=512)
    args = p.parse_args(argv)
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / "space.json"
    results = json.loads(path.read_text()) if path.exists() else {}
    results["machine"] = {"python": platform.python_version(), "cpus": os.cpu_count(),
                          "platform": platform.platform(), "carray": ca.__version__}
    if args.part in ("frames", "all"):
        results["frames"] = frames_part(args.frames, args.side, args.repeat)
        path.write_text(json.dumps(results, indent=1) + "\n")
    if args.part in ("space", "all"):
        results["space"] = space_part()
        path.write_text(json.dumps(results, indent=1) + "\n")
    md = report(results)
    (RESULTS / "space.md").write_text(md + "\n")
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
