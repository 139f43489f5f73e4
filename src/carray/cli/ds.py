"""``carray ds ...``: inspect, cut and join datasets, in the spirit of ds-format's ``ds`` tool.

Verbs: ``ls``, ``meta``, ``cat``, ``select``, ``merge``. Inputs and outputs are any
dataset format of :mod:`carray.cli.convert` (``.ds``, ``.nc``), chosen by extension.
Selections are ``dim=i`` (one index; the dimension is dropped), ``dim=i:j[:k]`` (a slice)
or ``dim=i,j,...`` (a list of indices).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import numpy as np

from carray.cli.convert import clean_errors, format_for, read_any, write_any
from carray.formats import ds
from carray.formats.ds.header import default_dims
from carray.formats.merge import merge_files

_FSYNC_HELP = ("have OUT on stable storage before returning (a .ds file is not synced "
               "by default, a NetCDF file is)")


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "ds", help="inspect, select and merge datasets (.ds, .nc)",
        description="Inspect, cut and join datasets (.ds, .nc), like ds-format's ds tool.")
    verbs = p.add_subparsers(dest="ds_verb", metavar="VERB")
    p.set_defaults(func=lambda args: _usage(p))

    q = verbs.add_parser("ls", help="variables with their types and dims")
    q.add_argument("paths", nargs="+", metavar="PATH")
    q.add_argument("--json", action="store_true", help="print as JSON")
    q.set_defaults(func=run_ls)

    q = verbs.add_parser("meta", help="the header (metadata) as JSON")
    q.add_argument("path", metavar="PATH")
    q.add_argument("var", nargs="?", metavar="VAR", help="only this variable ('.': dataset)")
    q.set_defaults(func=run_meta)

    q = verbs.add_parser("cat", help="print a variable's values, one row per first index")
    q.add_argument("var", metavar="VAR")
    q.add_argument("path", metavar="PATH")
    q.set_defaults(func=run_cat)

    q = verbs.add_parser("select", help="copy variables and/or a selection to a new file",
                         description="carray ds select [VAR...] [dim=i:j ...] IN OUT. "
                                     "The variables named keep the coordinates of their "
                                     "dimensions (variables named as a dimension).")
    q.add_argument("items", nargs="+", metavar="[VAR|dim=SEL]... IN OUT")
    q.add_argument("--fsync", action="store_true", help=_FSYNC_HELP)
    q.set_defaults(func=run_select)

    q = verbs.add_parser("merge", help="concatenate files along a dimension",
                         description="Concatenate IN files along DIM into OUT, a block of "
                                     "rows at a time (memory does not grow with the "
                                     "files). Variables along DIM are joined; the others, "
                                     "and the attributes, are the first file's.")
    q.add_argument("dim", metavar="DIM")
    q.add_argument("files", nargs="+", metavar="IN... OUT")
    q.add_argument("--fsync", action="store_true", help=_FSYNC_HELP)
    q.set_defaults(func=run_merge)


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2


def _header(path: str) -> dict:
    return format_for(path).read_header(path)


@clean_errors
def run_ls(args: argparse.Namespace) -> int:
    listing: dict[str, dict[str, Any]] = {}
    for path in args.paths:
        header = _header(path)
        rows: list[dict[str, Any]] = []
        sizes: dict[str, int] = {}
        for key, entry in header.items():
            if key.startswith("."):
                continue
            size = entry.get(".size", [])
            dims = entry.get(".dims")
            if dims is None:
                dims = default_dims(key, len(size or []))
            if size is not None:
                sizes.update(zip(dims, size, strict=False))
            rows.append({"name": ds.unescape(key), "type": entry.get(".type", "float64"),
                         "dims": dims, "size": size, "missing": entry.get(".missing", False)})
        listing[path] = {"dims": sizes, "variables": rows}
    if args.json:
        print(json.dumps(listing, indent=2, ensure_ascii=False))
        return 0
    for n, (path, info) in enumerate(listing.items()):
        if len(listing) > 1:
            print(("\n" if n else "") + f"{path}:")
        print("dims: " + (", ".join(f"{d}={s}" for d, s in info["dims"].items()) or "(none)"))
        width = max([len(r["name"]) for r in info["variables"]] + [4])
        for r in info["variables"]:
            shape = "no data" if r["size"] is None else \
                ", ".join(f"{d}={s}" for d, s in zip(r["dims"], r["size"], strict=False))
            masked = " masked" if r["missing"] else ""
            print(f"{r['name']:<{width}}  {r['type']:<8} ({shape}){masked}")
    return 0


@clean_errors
def run_meta(args: argparse.Namespace) -> int:
    header = _header(args.path)
    if args.var is not None:
        key = args.var if args.var in header else ds.escape(args.var)
        if key not in header:
            raise KeyError(f"{args.path}: no variable {args.var!r}")
        header = header[key]
    print(json.dumps(header, indent=2, ensure_ascii=False))
    return 0


def _text(x) -> str:
    if x is np.ma.masked or x is None:
        return "--"
    if isinstance(x, bytes):
        return repr(x)[2:-1]  # printable, with escapes for control and non-ASCII bytes
    return str(x)


@clean_errors
def run_cat(args: argparse.Namespace) -> int:
    d = read_any(args.path, [args.var])
    key = args.var if args.var in d else ds.escape(args.var)
    data = d[key]
    if data is None:
        return 0
    arr = np.ma.asanyarray(data)
    if arr.ndim == 0:
        print(_text(arr[()]))
        return 0
    out = sys.stdout
    for row in arr.reshape(arr.shape[0], -1) if arr.ndim > 1 else arr[:, None]:
        out.write(" ".join(_text(x) for x in row) + "\n")
    return 0


def parse_sel(text: str):
    """``dim=i`` -> int, ``dim=i:j[:k]`` -> slice, ``dim=i,j`` -> list of ints."""
    dim, _, spec = text.partition("=")
    if not dim or not spec:
        raise ValueError(f"bad selection {text!r}: expected dim=i, dim=i:j[:k] or dim=i,j,...")
    try:
        if ":" in spec:
            parts = [int(p) if p.strip() else None for p in spec.split(":")]
            if len(parts) > 3:
                raise ValueError
            return dim, slice(*parts)
        if "," in spec:
            return dim, [int(p) for p in spec.split(",") if p.strip()]
        return dim, int(spec)
    except ValueError:
        raise ValueError(f"bad selection {text!r}: indices must be integers") from None


@clean_errors
def run_select(args: argparse.Namespace) -> int:
    if len(args.items) < 2:
        raise ValueError("select needs an input and an output file")
    *picks, src, dst = args.items
    sel, names = {}, []
    for item in picks:
        if "=" in item:
            dim, key = parse_sel(item)
            sel[dim] = key
        else:
            names.append(item)
    format_for(dst)  # fail on an unknown output type before reading anything
    if names:
        names = with_coordinates(_header(src), names)
    d = read_any(src, names or None, sel or None)
    if args.fsync:
        write_any(dst, d, fsync=True)
    else:
        write_any(dst, d)  # the format's default
    return 0


def with_coordinates(header: dict, names: list[str]) -> list[str]:
    """``names`` and, after them, the coordinates of their dimensions: the variables of
    ``header`` named as a dimension, which label its positions."""
    out = list(names)
    for name in names:
        key = name if name in header else ds.escape(name)
        entry = header.get(key)
        if not isinstance(entry, dict):
            continue  # not a variable: the reader says so
        dims = entry.get(".dims") or default_dims(key, len(entry.get(".size") or []))
        for dim in dims:
            coord = ds.escape(dim)
            if coord in header and coord not in out and dim not in out:
                out.append(coord)
    return out


@clean_errors
def run_merge(args: argparse.Namespace) -> int:
    if len(args.files) < 2:
        raise ValueError("merge needs at least one input and an output file")
    *inputs, dst = args.files
    for path in (*inputs, dst):
        format_for(path)  # an unknown type fails before anything is read
    # A block of rows at a time, whatever the sizes.
    merge_files(inputs, args.dim, dst, fsync=True if args.fsync else None)
    return 0
