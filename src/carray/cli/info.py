"""``carray info PATH``: what a dataset or file holds and how it is stored.

Works on every format the registry knows (:mod:`carray.registry`); PATH may be a
URL where the format allows it.  A group prints its tree, then its version.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from carray import registry
from carray.attrs import values as attrvalues
from carray.cli._ui import human, print_fields, print_table
from carray.cli.main import add_storage_options
from carray.integrations.convert import options_for


def register(subparsers: argparse._SubParsersAction) -> None:
    known = ", ".join(f.name for f in registry.FORMATS)
    p = subparsers.add_parser("info", help="describe a dataset or file (shape, dtype, chunks, "
                                           "codec, sizes)",
                              description=f"Describe what PATH holds. Formats: {known}.")
    p.add_argument("path", help="dataset directory or file (a path or a URL)")
    p.add_argument("--json", action="store_true", help="print the description as JSON")
    add_storage_options(p)
    p.set_defaults(func=run)


def describe(a: Any) -> dict:
    """The facts ``info`` prints for an open carray, as a plain dict."""
    fmt = registry.sniff(a.rootdir) if a.rootdir is not None else None
    return registry.describe_array(a, fmt)


def format_description(info: dict) -> str:
    """An array's description as ``name : value`` lines."""
    rows = _array_rows(info)
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}} : {v}" for k, v in rows)


def _array_rows(info: dict) -> list[tuple[str, Any]]:
    rows: list[tuple[str, Any]] = [
        ("type", info["type"]),
        ("shape", tuple(info["shape"])),
        ("dtype", info["dtype"]),
        ("layout", info["layout"]),
        ("chunks", _chunks_line(info)),
        ("blocks", "Blosc's own" if info["blocks"] is None else tuple(info["blocks"])),
        ("codec", f"{info['codec']} clevel={info['clevel']} shuffle={info['shuffle']}"),
        ("nbytes", human(info["nbytes"])),
        ("cbytes", human(info["cbytes"])),
        ("ratio", _ratio_text(info["ratio"])),
    ]
    if info.get("disk_bytes") is not None:
        rows.append(("on disk", f"{human(info['disk_bytes'])} (every file: chunks, framing, "
                                "metadata, spare room)"))
    return rows + _history_rows(info) + _attr_rows(info["attrs"])


def _history_rows(info: dict) -> list[tuple[str, str]]:
    """The version shown and the kept ones (``carray log`` lists them)."""
    kept = info.get("versions")
    if not kept:
        return []
    tags = sorted({t for v in kept for t in v["tags"]})
    newest = kept[0]
    line = f"{len(kept)} kept, newest {newest['id']} ({newest['time']})"
    return [("version", str(info["version"])), ("versions", line)] + \
        ([("tags", ", ".join(tags))] if tags else [])


def _attr_rows(attrs: dict) -> list[tuple[str, str]]:
    """One ``attr NAME`` row per attribute, its value readable (numpy scalars as values)."""
    return [(f"attr {k}", attrvalues.display(v)) for k, v in attrs.items()]


def _jsonable(info: dict) -> dict:
    """``info`` with its attributes in carray's plain JSON form (exact, and valid JSON)."""
    out = dict(info)
    if isinstance(out.get("attrs"), dict):
        out["attrs"] = {k: attrvalues.to_json(v) for k, v in out["attrs"].items()}
    if isinstance(out.get("variables"), list):
        out["variables"] = [_jsonable(v) if isinstance(v, dict) else v
                            for v in out["variables"]]
    return out


def _disk_text(nbytes: int | None) -> str:
    return "-" if nbytes is None else human(nbytes)


def _ratio_text(ratio: float | None) -> str:
    """A ratio to 2 decimals, or what stands instead when nothing is stored."""
    return "- (nothing stored)" if ratio is None else f"{ratio:.2f}"


def _chunks_line(info: dict) -> str:
    grid = info["grid"]
    if all(g <= 1 for g in grid[1:]):  # runs of whole rows, as bcolz counts them
        return f"{tuple(info['chunks'])} x {info['nchunks']} + {info['leftover']} rows"
    total = 1
    for g in grid:
        total *= g
    return f"{tuple(info['chunks'])}, a grid of {tuple(grid)} = {total} chunks"


def print_table_info(info: dict) -> None:
    """A table's description: a line, then its columns as an aligned table."""
    line = f"{info['type']}: {info['rows']} rows x {len(info['columns'])} columns"
    if "row_groups" in info:  # a Parquet file
        leaves = info["leaf_columns"]
        extra = f" ({leaves} leaf columns)" if leaves != len(info["columns"]) else ""
        groups = info["row_groups"]
        line += f"{extra}, {groups} row group{'' if groups == 1 else 's'}"
        sizes = ("uncompressed", "compressed")  # the file's metadata's two sizes
    elif info["type"] == "csv":  # text: only what its columns take decoded
        print(f"{line}, {human(info['file_size'])}")
        print_table(("column", "dtype", "decoded"),
                    [(c["name"], c["dtype"], human(c["nbytes"])) for c in info["columns"]],
                    right=(2,))
        return
    else:
        sizes = ("nbytes", "cbytes")
    print(line)
    rows = [(c["name"], c["dtype"], _disk_text(c["nbytes"]), _disk_text(c["cbytes"]),
             _ratio_text(c["ratio"]), _disk_text(c.get("disk_bytes")))
            for c in info["columns"]]
    total = info["nbytes"] / info["cbytes"] if info["cbytes"] else None
    rows.append(("(total)", "", _disk_text(info["nbytes"]), _disk_text(info["cbytes"]),
                 _ratio_text(total), _disk_text(info.get("disk_bytes"))))
    head = ("column", "dtype", *sizes, "ratio", "on disk")
    # Missing values and categories get their columns only in tables that have them.
    values = [name for name, wanted in (("missing", _any_missing(info)),
                                        ("categories", _any_categories(info))) if wanted]
    total_row = {"missing": sum(c.get("missing", 0) for c in info["columns"])}
    rows = [(*r, *(_value_text(c, name) for name in values))
            for r, c in zip(rows, [*info["columns"], total_row], strict=True)]
    # cbytes: the compressed chunks; on disk: every file (framing, metadata, spare room).
    print_table((*head, *values), rows, right=(2, 3, 4, 5, *(6,) * ("missing" in values)))
    print_fields(_index_rows(info) + _history_rows(info) + _attr_rows(info["attrs"]))


def _any_missing(info: dict) -> bool:
    return any(c.get("missing") for c in info["columns"])


def _any_categories(info: dict) -> bool:
    return any(c.get("categories") for c in info["columns"])


def _value_text(column: dict, what: str) -> str:
    """A column's missing count, or its categories: how many, then the first few."""
    if what == "missing":
        return f"{column.get('missing', 0):,}"
    cats = column.get("categories")
    if not cats:
        return ""
    more = ", ..." if cats["count"] > len(cats["first"]) else ""
    return f"{cats['count']}: {', '.join(cats['first'])}{more}"


def _index_rows(info: dict) -> list[tuple[str, str]]:
    """One ``index`` row per index of the table (none when it has none)."""
    return [("index", line) for line in info.get("indexes") or []]


def print_dataset_info(info: dict) -> None:
    """A ds or NetCDF file's description: its variables as an aligned table."""
    print(f"{info['type']}: {len(info['variables'])} variables")
    rows = [(v["name"], v["type"], ", ".join(v["dims"]) or "-",
             "no data" if v["shape"] is None else "x".join(map(str, v["shape"])) or "scalar")
            for v in info["variables"]]
    print_table(("variable", "type", "dims", "shape"), rows)
    print_fields(_attr_rows(info["attrs"]))


def print_group_info(info: dict) -> None:
    """A group's description: its tree, what it holds, its version and attributes."""
    from carray.cli._groups import info_rows

    print(info["tree"])
    print()
    print_fields(info_rows(info) + _history_rows(info) + _attr_rows(info["attrs"]))


def run(args: argparse.Namespace) -> int:
    storage = options_for(args.path, args.storage_options)
    fmt = registry.guess(args.path, storage)
    info = fmt.info(args.path, storage)
    if args.json:
        print(json.dumps(_jsonable(info), indent=2, default=str))
    elif fmt.kind == "table":
        print_table_info(info)
    elif fmt.kind == "dataset":
        print_dataset_info(info)
    elif fmt.kind == "group":
        print_group_info(info)
    elif fmt.name == "bloscpack":
        from carray.cli.pack import format_info

        print(format_info(info))
    elif info.get("type") == "carray":
        print_fields(_array_rows(info))
    else:
        print_fields([(k, v) for k, v in info.items() if k != "attrs"]
                     + _attr_rows(info.get("attrs") or {}))
    return 0
