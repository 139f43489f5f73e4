"""``carray log PATH``: the kept versions of a dataset, newest first.

Only carray's own layout (arrays, tables and groups) keeps versions; other formats say
so.  A group's versions list, under each, the shape and sizes of every member array and
table as that version holds it.
"""

from __future__ import annotations

import argparse
import json

from carray import registry
from carray.api import open as open_any
from carray.cli._ui import human, print_table
from carray.cli.main import add_storage_options
from carray.groups.group import Group, open_group
from carray.integrations.convert import options_for


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
        is_group = isinstance(c, Group)
    if not history:
        c.versions()  # raises VersionsUnsupportedError, naming the format
    kept = history["versions"]
    if is_group:
        kept = [_with_members(args.path, v, options) for v in kept]
    if args.json:
        print(json.dumps(kept, indent=2))
        return 0
    rows = []
    for v in kept:
        count = len(v.get("members", ()))
        shape = f"{count} member{'s' * (count != 1)}" if is_group else \
            "x".join(map(str, v["shape"])) or "scalar"
        rows.append((v["id"], v["time"], ", ".join(v["tags"]) or "-", shape,
                     human(v["nbytes"]), human(v["cbytes"]),
                     v["kind"] if v["kind"] != "commit" else "", v["message"] or ""))
        for m in v.get("members", ()):
            rows.append((f"  {m['path']}", "", "", "x".join(map(str, m["shape"])) or "scalar",
                         human(m["nbytes"]), human(m["cbytes"]), m["kind"], ""))
    print_table(("version", "time", "tags", "shape", "nbytes", "cbytes", "kind", "message"),
                rows, right=(4, 5))
    return 0


def _with_members(path: str, version: dict, options: dict | None) -> dict:
    """A group version as :func:`carray.registry.history_of` lists it, with the shape and
    sizes of each member array and table at that version (and their sums)."""
    members = []
    with open_group(path, mode="r", version=version["id"], storage_options=options) as g:
        for member, kind, obj in g.walk():
            if kind != "group":
                members.append({"path": member, "kind": kind, "shape": list(obj.shape),
                                "nbytes": int(obj.nbytes), "cbytes": int(obj.cbytes)})
    return {**version, "shape": [], "nbytes": sum(m["nbytes"] for m in members),
            "cbytes": sum(m["cbytes"] for m in members), "members": members}
