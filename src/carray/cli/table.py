"""``carray head PATH [-n N]`` and the table part of ``carray info``."""

from __future__ import annotations

import argparse
import json

import numpy as np

import carray
from carray._util import human


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("head", help="print the first rows of a table or array")
    p.add_argument("path", help="dataset directory")
    p.add_argument("-n", "--rows", type=int, default=10, help="how many rows (default 10)")
    p.set_defaults(func=run_head)


def describe_table(t: carray.ctable) -> dict:
    """The facts ``info`` prints for a table, as a plain dict."""
    columns = []
    for name in t.names:
        col = t.cols[name]
        columns.append({"name": name, "dtype": str(col.dtype) if col.ndim == 1 else
                        f"{col.dtype}{tuple(col.shape[1:])}", "nbytes": col.nbytes,
                        "cbytes": col.cbytes,
                        "ratio": round(col.nbytes / col.cbytes, 3) if col.cbytes else 0.0})
    return {"type": "ctable", "rows": len(t), "columns": columns, "nbytes": t.nbytes,
            "cbytes": t.cbytes, "attrs": t.attrs.getall()}


def format_table(info: dict) -> str:
    header = ("column", "dtype", "nbytes", "cbytes", "ratio")
    rows = [(c["name"], c["dtype"], human(c["nbytes"]), human(c["cbytes"]),
             f"{c['ratio']:.2f}") for c in info["columns"]]
    total = info["nbytes"] / info["cbytes"] if info["cbytes"] else 0.0
    rows.append(("(total)", "", human(info["nbytes"]), human(info["cbytes"]), f"{total:.2f}"))
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    right = {2, 3, 4}

    def line(r) -> str:
        return "  ".join(f"{v:>{w}}" if i in right else f"{v:<{w}}"
                         for i, (v, w) in enumerate(zip(r, widths, strict=True))).rstrip()

    out = [f"ctable: {info['rows']} rows x {len(info['columns'])} columns", line(header),
           line(["-" * w for w in widths])]
    out += [line(r) for r in rows]
    for key, value in info["attrs"].items():
        out.append(f"attr {key} : {json.dumps(value, ensure_ascii=False)}")
    return "\n".join(out)


def _cell(value) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    if isinstance(value, np.ndarray):
        return np.array2string(value, separator=",")
    return str(value)


def run_head(args: argparse.Namespace) -> int:
    if args.rows < 0:
        raise SystemExit("carray head: -n must be >= 0")
    with carray.open(args.path, mode="r") as obj:
        if isinstance(obj, carray.ctable):
            names = obj.names
            block = obj[: args.rows]
            rows = [[_cell(r[n]) for n in names] for r in block]
        else:
            names = ["value"]
            rows = [[_cell(v)] for v in obj[: args.rows]]
    widths = [max([len(n)] + [len(r[i]) for r in rows]) for i, n in enumerate(names)]
    print("  ".join(f"{n:<{w}}" for n, w in zip(names, widths, strict=True)).rstrip())
    for r in rows:
        print("  ".join(f"{v:<{w}}" for v, w in zip(r, widths, strict=True)).rstrip())
    return 0
