"""``carray info PATH``: what a dataset holds and how it is stored (PATH may be a URL)."""

from __future__ import annotations

import argparse
import json

import carray
from carray._util import human as _human
from carray.cli.main import add_storage_options
from carray.convert import options_for


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("info", help="describe a dataset (shape, dtype, chunks, codec)")
    p.add_argument("path", help="dataset directory, .b2nd frame or .blp file (a path or "
                                "a URL)")
    p.add_argument("--json", action="store_true", help="print the description as JSON")
    add_storage_options(p)
    p.set_defaults(func=run)


def describe(a: carray.carray) -> dict:
    """The facts ``info`` prints, as a plain dict."""
    return {
        "type": "carray",
        "shape": list(a.shape),
        "dtype": str(a.dtype),
        "chunks": list(a.chunks),
        "blocks": None if a.blocks is None else list(a.blocks),
        "layout": a._layout.describe(),
        "nchunks": a.nchunks,
        "grid": list(a._grid().grid_shape),
        "leftover": a.leftover,
        "codec": a.cparams.cname,
        "clevel": a.cparams.clevel,
        "shuffle": a.cparams.shuffle.name.lower(),
        "nbytes": a.nbytes,
        "cbytes": a.cbytes,
        "ratio": round(a.cratio, 3),
        "attrs": a.attrs.getall(),
    }


def format_description(info: dict) -> str:
    rows = [
        ("type", info["type"]),
        ("shape", tuple(info["shape"])),
        ("dtype", info["dtype"]),
        ("layout", info["layout"]),
        ("chunks", _chunks_line(info)),
        ("blocks", "Blosc's own" if info["blocks"] is None else tuple(info["blocks"])),
        ("codec", f"{info['codec']} clevel={info['clevel']} shuffle={info['shuffle']}"),
        ("nbytes", _human(info["nbytes"])),
        ("cbytes", _human(info["cbytes"])),
        ("ratio", f"{info['ratio']:.2f}"),
    ]
    for key, value in info["attrs"].items():
        rows.append((f"attr {key}", json.dumps(value, ensure_ascii=False)))
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}} : {v}" for k, v in rows)


def _chunks_line(info: dict) -> str:
    grid = info["grid"]
    if all(g <= 1 for g in grid[1:]):  # runs of whole rows, as bcolz counts them
        return f"{tuple(info['chunks'])} x {info['nchunks']} + {info['leftover']} rows"
    total = 1
    for g in grid:
        total *= g
    return f"{tuple(info['chunks'])}, a grid of {tuple(grid)} = {total} chunks"


def run(args: argparse.Namespace) -> int:
    storage = options_for(args.path, args.storage_options)
    if str(args.path).endswith(".blp"):  # a Bloscpack file, not a dataset directory
        from carray.cli.pack import format_info
        from carray.formats import bloscpack

        d = bloscpack.info(args.path, storage_options=storage)
        print(json.dumps(d, indent=2) if args.json else format_info(d))
        return 0
    with carray.open(args.path, mode="r", storage_options=storage) as a:
        if isinstance(a, carray.ctable):
            from carray.cli.table import describe_table, format_table

            info = describe_table(a)
            print(json.dumps(info, indent=2) if args.json else format_table(info))
            return 0
        info = describe(a)
    print(json.dumps(info, indent=2) if args.json else format_description(info))
    return 0
