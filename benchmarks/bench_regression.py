"""carray's own cases of bench_carray.py and bench_slicing.py on two source trees, alternately.

Each run starts a fresh process per tree (``PYTHONPATH`` pointing at that tree's
``src``) that times carray's cases of the two benchmarks with their own code
(:mod:`bench_carray`'s ``run_config``, ``peak_memory`` and ``scale_case``;
:mod:`bench_slicing`'s ``run_where`` with only the carray configuration): the
peers are left out, their code does not change with carray's.  Runs alternate
which tree goes first, so drifts in the machine's load hit both.  Reported per
metric: the median of the old tree's runs, of the new tree's, and the ratio
new / old of the medians with the range over the runs paired in order
(``new[i] / old[i]``); > 1 means the new tree is slower (or, for peak memory,
uses more).

Run: ``python benchmarks/bench_regression.py --old /path/to/old/src [--new SRC]
[--runs N] [--size-mb MB] [--shape N,N,N] [--out NAME]``.
Writes ``benchmarks/results/NAME.{json,md}`` (default ``regression``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
# The limits: every metric within 10%; bench_carray's write, full read and
# random-element reads within 5%.
LIMIT, TIGHT_LIMIT, TIGHT = 1.10, 1.05, ("write", "read", "element")


# -- one tree, in its own process ----------------------------------------------------------

def child(kind: str, size_mb: int, shape: tuple[int, ...], repeat: int) -> dict:
    """carray's timings of one benchmark with the carray on ``sys.path``."""
    sys.path.insert(0, str(HERE))
    import carray as ca

    ca.set_nthreads(2)
    out: dict[str, float] = {}
    if kind == "carray":
        import bench_carray as bc

        bc.LIBS = [bc.CArrayLib]
        size = size_mb * 2**20
        n_appends = size // 8 // bc.APPEND_ROWS
        with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as tmp:
            for dkind, cname in (("int64", "lz4"), ("int64", "zstd"), ("float64", "lz4")):
                data = bc.make_data(dkind, size)
                for where in ("memory", "disk"):
                    cfg = bc.run_config(dkind, cname, where, data, tmp, repeat, n_appends)
                    for case, t in cfg["results"]["carray"].items():
                        out[f"{dkind}/{cname}/{where}/{case}"] = t
                    for f in Path(tmp).iterdir():
                        _remove(f)
            data = bc.make_data("int64", size)
            out["peak_memory/ratio"] = bc.peak_memory(data, tmp)["carray"]
            for f in Path(tmp).iterdir():
                _remove(f)
            scale = bc.scale_case(tmp, repeat)
            for k in ("open_and_read_one_s", "append_per_row_big_s", "append_per_row_empty_s"):
                out[f"scale/{k}"] = scale[k]
        return out
    import bench_slicing as bs

    from carray.chunks.shapes import default_chunks_blocks

    chunks, blocks = default_chunks_blocks(shape, bs.ITEMSIZE)
    blocks = tuple(min(b, c) for b, c in zip(blocks, chunks, strict=True))
    opts = argparse.Namespace(chunks=tuple(chunks), cname="lz4", clevel=5, repeat=repeat,
                              cold=False)
    bs.make_configs = _only_carray(bs)
    data = bs.make_data(shape)
    keys = bs.make_positions(shape, opts.chunks, repeat + 1)
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as tmp:
        for where in ("memory", "disk"):
            res = bs.run_where(where, data, keys, tmp, opts, ca, None, None, blocks)["carray"]
            if "error" in res:
                raise RuntimeError(res["error"])
            out[f"{where}/build"] = res["build_s"]
            for case, t in res["times_s"].items():
                out[f"{where}/{case}"] = t
    return out


def _only_carray(bs):
    make = bs.make_configs

    def carray_only(*args, **kwargs):
        return [c for c in make(*args, **kwargs) if c[0] == "carray"]

    return carray_only


def _remove(path: Path) -> None:
    import shutil

    shutil.rmtree(path) if path.is_dir() else path.unlink()


# -- the driver ---------------------------------------------------------------------------

def run_tree(src: str, kind: str, args: argparse.Namespace) -> dict:
    env = dict(os.environ, PYTHONPATH=src)
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", kind,
           "--size-mb", str(args.size_mb), "--shape", ",".join(map(str, args.shape)),
           "--repeat", str(args.repeat)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(f"{kind} on {src} failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def summarize(old: list[dict], new: list[dict]) -> dict:
    out = {}
    for metric in old[0]:
        o = [r[metric] for r in old]
        n = [r[metric] for r in new]
        pairs = [b / a for a, b in zip(o, n, strict=True)]
        out[metric] = {"old": statistics.median(o), "new": statistics.median(n),
                       "ratio": statistics.median(n) / statistics.median(o),
                       "ratio_min": min(pairs), "ratio_max": max(pairs),
                       "old_runs": o, "new_runs": n}
    return out


def limit_for(bench: str, metric: str) -> float:
    return TIGHT_LIMIT if bench == "bench_carray" and metric.rsplit("/", 1)[-1] in TIGHT \
        else LIMIT


def report(results: dict) -> str:
    lines = ["# Regression: carray's cases of bench_carray and bench_slicing, old vs new tree",
             "", f"Old: `{results['old']}`; new: `{results['new']}`; {results['runs']} runs "
             f"of each, alternating; bench_carray {results['size_mb']} MB arrays, "
             f"bench_slicing shape {tuple(results['shape'])}; each timing itself the "
             f"median of {results['repeat']} repeats. Ratio = new / old of the medians "
             "[range over the runs paired in order]; > 1: the new tree is slower.", ""]
    for bench in ("bench_carray", "bench_slicing"):
        lines += [f"## {bench}", "", "| metric | old | new | ratio [range] | limit |",
                  "| --- | ---: | ---: | --- | --- |"]
        for metric, r in results[bench].items():
            lim = limit_for(bench, metric)
            unit = "" if metric.startswith("peak_memory") else " ms"
            scale = 1 if unit == "" else 1e3
            verdict = "met" if r["ratio"] <= lim else "MISSED"
            lines.append(f"| {metric} | {r['old'] * scale:.3f}{unit} | "
                         f"{r['new'] * scale:.3f}{unit} | {r['ratio']:.3f} "
                         f"[{r['ratio_min']:.3f}, {r['ratio_max']:.3f}] | "
                         f"{verdict} (<= {lim:.2f}) |")
        lines.append("")
    return "\n".join(lines)


def _shape(text: str) -> tuple[int, ...]:
    return tuple(int(v) for v in text.split(","))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--old", help="the old tree's src directory")
    p.add_argument("--new", default=str(HERE.parent / "src"), help="the new tree's src")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--repeat", type=int, default=5, help="repeats inside each timing")
    p.add_argument("--size-mb", type=int, default=400, help="bench_carray array size")
    p.add_argument("--shape", type=_shape, default=(368, 368, 368),
                   help="bench_slicing shape")
    p.add_argument("--only", choices=("carray", "slicing"), default=None)
    p.add_argument("--out", default="regression")
    p.add_argument("--child", choices=("carray", "slicing"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.size_mb, args.shape, args.repeat)))
        return 0
    if not args.old:
        p.error("--old is required")
    kinds = [args.only] if args.only else ["carray", "slicing"]
    runs: dict[str, dict[str, list[dict]]] = {k: {"old": [], "new": []} for k in kinds}
    trees = {"old": args.old, "new": args.new}
    for r in range(args.runs):
        order = ("old", "new") if r % 2 == 0 else ("new", "old")
        for kind in kinds:
            for side in order:
                t0 = time.perf_counter()
                runs[kind][side].append(run_tree(trees[side], kind, args))
                print(f"run {r + 1} {kind:8} {side}: {time.perf_counter() - t0:6.1f} s",
                      flush=True)
    results = {"old": args.old, "new": args.new, "runs": args.runs, "repeat": args.repeat,
               "size_mb": args.size_mb, "shape": list(args.shape),
               "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                           "platform": platform.platform()}}
    for kind in kinds:
        results[f"bench_{kind}"] = summarize(runs[kind]["old"], runs[kind]["new"])
    for kind in ("carray", "slicing"):
        results.setdefault(f"bench_{kind}", {})
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{args.out}.json").write_text(json.dumps(results, indent=1) + "\n")
    md = report(results)
    (RESULTS / f"{args.out}.md").write_text(md + "\n")
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
