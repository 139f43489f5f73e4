"""Moving data at disk speed: copy, rechunk, whole-array writes and reads, appends,
tiny ds files and Bloscpack, each against its peer in the same run.

The cases live in one module per part (``_moves_copy.py``, ``_moves_rechunk.py``,
``_moves_writes.py``, ``_moves_files.py``); each exposes ``run(repeat, quick)``
returning ``{"cases": [...]}``, where a case holds the seconds of every run of carray
and of its peer, taken alternately.  Ratios are peer / carray within one run (above
1: carray faster); the report gives their median and range.

Run: ``python benchmarks/bench_moves.py [--repeat N] [--quick] [--only copy,rechunk,...]``.
Writes ``benchmarks/results/bench_moves.{json,md}`` (``bench_moves_quick`` with
``--quick``); with ``--only``, the other parts keep the figures of their last run.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import statistics
from pathlib import Path

RESULTS = Path(__file__).parent / "results"
PARTS = ("copy", "rechunk", "writes", "files")


def ratios(case: dict) -> list[float]:
    """Peer time over carray time, run by run."""
    return [p / c for c, p in zip(case["carray_s"], case["peer_s"], strict=False) if c > 0]


def _span(values: list[float], scale: float = 1.0, fmt: str = ".3g") -> str:
    if not values:
        return "-"
    med = statistics.median(values) * scale
    return f"{med:{fmt}} [{min(values) * scale:{fmt}}-{max(values) * scale:{fmt}}]"


def report(results: dict) -> str:
    lines = [f"# Moving data ({results['cores']} cores, {results['repeat']} runs"
             f"{', quick sizes' if results['quick'] else ''})", "",
             "Seconds and ratios: median [min-max] over the runs; a ratio is peer time / "
             "carray time in the same run (above 1: carray faster).", "",
             "| part | case | carray s | peer | peer s | ratio | target | note |",
             "|---|---|---|---|---|---|---|---|"]
    for part, out in results["parts"].items():
        if "error" in out:
            lines.append(f"| {part} | (failed) | | | | | | {out['error']} |")
            continue
        for case in out["cases"]:
            lines.append(
                f"| {part} | {case['name']} | {_span(case['carray_s'])} | {case['peer']} "
                f"| {_span(case['peer_s'])} | {_span(ratios(case))} "
                f"| {case.get('target', '')} | {case.get('note', '')} |")
    for part, out in results["parts"].items():
        facts = {k: v for k, v in out.items() if k not in {"cases", "error"}}
        if facts:
            lines += ["", f"{part}: " + ", ".join(f"{k} = {v}" for k, v in facts.items())]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", default=",".join(PARTS))
    args = parser.parse_args()
    parts: dict[str, dict] = {}
    for part in args.only.split(","):
        module = importlib.import_module(f"_moves_{part}")
        print(f"== {part}", flush=True)
        try:
            parts[part] = module.run(args.repeat, args.quick)
        except Exception as exc:  # one failing part does not lose the others' figures
            parts[part] = {"error": f"{type(exc).__name__}: {exc}"}
        print(json.dumps(parts[part], default=str)[:2000], flush=True)
    name = "bench_moves_quick" if args.quick else "bench_moves"
    earlier = RESULTS / f"{name}.json"
    if earlier.exists():  # parts not run this time keep their last figures
        kept = json.loads(earlier.read_text()).get("parts", {})
        parts = {**{k: v for k, v in kept.items() if k not in parts}, **parts}
        parts = {k: parts[k] for k in PARTS if k in parts}
    results = {"cores": os.cpu_count(), "machine": platform.platform(),
               "repeat": args.repeat, "quick": args.quick, "parts": parts}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(results, indent=1, default=str))
    (RESULTS / f"{name}.md").write_text(report(results))
    print(report(results))


if __name__ == "__main__":
    main()
