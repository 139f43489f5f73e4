"""``carray log PATH``: the kept versions of a dataset, newest first.

Only carray's own layout (arrays and tables) keeps versions; other formats say so.
"""

from __future__ import annotations

import argparse
import json

from carray import registry
from carray.cli._ui import human, print_table
from carray.cli.main import add_storage_options
from carray.convert import options_for
from carray.toplevel import open as open_any


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("log", help="list the kept versions of a dataset",
                              description="List the kept versions of the array or table at "
                                          "PATH, newest first: id, time, tags, shape, sizes "
                                          "and message.")
    p.add_argument("path", help="dataset directory (a path or a URL)")
    p.add_argument("--json", action="store_true", help="print the versions as JSON")
    add_storage_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    options = options_for(args.path, args.storage_options)
    with open_any(args.path, mode="r", storage_options=options) as c:
        history = registry.history_of(c)
    if not history:
        c.versions()  # raises VersionsUnsupportedError, naming the format
    kept = history["versions"]
    if args.json:
        print(json.dumps(kept, indent=2))
        return 0
    rows = [(v["id"], v["time"], ", ".join(v["tags"]) or "-",
             "x".join(map(str, v["shape"])) or "scalar", human(v["nbytes"]),
             human(v["cbytes"]), v["kind"] if v["kind"] != "commit" else "",
             v["message"] or "") for v in kept]
    print_table(("version", "time", "tags", "shape", "nbytes", "cbytes", "kind", "message"),
                rows, right=(4, 5))
    return 0
