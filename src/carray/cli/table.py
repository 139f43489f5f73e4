"""``carray head PATH [-n N]``: the first rows of any dataset or file the registry knows.

Tables print as aligned columns, one row per line; arrays as one column
``value``; a row of an N-d array (and any long value) is summarised on its line
the way numpy summarises (a few items at each end).  Datasets (``.ds``, ``.nc``)
print each variable's first rows, summarised.  A group prints every array and
table under a ``== member ==`` line; ``GROUP/member`` prints only that member (or
sub-group).
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from carray import registry
from carray.cli._groups import head_group, split_member
from carray.cli._ui import cell, print_table, summary
from carray.cli.main import add_storage_options
from carray.integrations.convert import options_for
from carray.stores import is_url


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("head", help="print the first rows of a table, array or dataset")
    p.add_argument("path", help="dataset directory or file (a path or a URL); for a group, "
                                "GROUP/member shows one member")
    p.add_argument("-n", "--rows", type=int, default=10, help="how many rows (default 10)")
    add_storage_options(p)
    p.set_defaults(func=run_head)


def run_head(args: argparse.Namespace) -> int:
    if args.rows < 0:
        raise ValueError(f"-n must be >= 0, got {args.rows}")
    storage = options_for(args.path, args.storage_options)
    inside = None if is_url(args.path) else split_member(args.path)
    if inside is not None:  # GROUP/member: the member as the group's version shows it
        head_group(*inside, args.rows, None, print_columns)
        return 0
    fmt = registry.guess(args.path, storage)
    if fmt.kind == "group":
        head_group(args.path, "", args.rows, args.storage_options, print_columns)
        return 0
    columns = fmt.head(args.path, args.rows, storage)
    if fmt.kind == "dataset":
        for name, values in columns.items():
            text = summary(values) if values is not None else "no data"
            print(f"{name}: {text}")
        return 0
    print_columns(columns)
    return 0


def print_columns(columns: dict[str, Any]) -> None:
    """Columns of rows as an aligned table, one row per line (a 0-d array: its value)."""
    names = list(columns)
    # Masked arrays stay masked: their missing values print as such.
    arrays = [c if isinstance(c, np.ma.MaskedArray) else np.asarray(c)
              for c in (columns[n] for n in names)]
    if arrays and arrays[0].ndim == 0:  # a 0-d array has no rows: its value
        print(summary(arrays[0]))
        return
    nrows = min((len(a) for a in arrays), default=0)
    rows = [[cell(a[i]) for a in arrays] for i in range(nrows)]
    print_table(names, rows, rule=False)
