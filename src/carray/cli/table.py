"""``carray head PATH [-n N]``: the first rows of any dataset or file the registry knows.

Tables print as aligned columns, one row per line; arrays as one column
``value``; a row of an N-d array (and any long value) is summarised on its line
the way numpy summarises (a few items at each end).  Datasets (``.ds``, ``.nc``)
print each variable's first rows, summarised.
"""

from __future__ import annotations

import argparse

import numpy as np

from carray import registry
from carray.cli._ui import cell, print_table, summary
from carray.cli.main import add_storage_options
from carray.convert import options_for


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("head", help="print the first rows of a table, array or dataset")
    p.add_argument("path", help="dataset directory or file (a path or a URL)")
    p.add_argument("-n", "--rows", type=int, default=10, help="how many rows (default 10)")
    add_storage_options(p)
    p.set_defaults(func=run_head)


def run_head(args: argparse.Namespace) -> int:
    if args.rows < 0:
        raise ValueError(f"-n must be >= 0, got {args.rows}")
    storage = options_for(args.path, args.storage_options)
    fmt = registry.guess(args.path, storage)
    columns = fmt.head(args.path, args.rows, storage)
    if fmt.kind == "dataset":
        for name, values in columns.items():
            text = summary(values) if values is not None else "no data"
            print(f"{name}: {text}")
        return 0
    names = list(columns)
    # Masked arrays stay masked: their missing values print as such.
    arrays = [c if isinstance(c, np.ma.MaskedArray) else np.asarray(c)
              for c in (columns[n] for n in names)]
    if arrays and arrays[0].ndim == 0:  # a 0-d array has no rows: its value
        print(summary(arrays[0]))
        return 0
    nrows = min((len(a) for a in arrays), default=0)
    rows = [[cell(a[i]) for a in arrays] for i in range(nrows)]
    print_table(names, rows, rule=False)
    return 0
