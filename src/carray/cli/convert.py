"""``carray convert SRC DST [--to FORMAT]``: convert between dataset formats.

Formats are chosen by file extension (or ``--to``) from :data:`FORMATS`, a small table of
readers and writers of the dataset structure of :mod:`carray.formats.ds`. Adding a format
is adding a row: a module with ``read(path, variables=None, sel=None)``,
``write(path, dataset, **options)`` and ``read_header(path)``.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from dataclasses import dataclass
from functools import wraps


@dataclass(frozen=True)
class DatasetFormat:
    """One row of the format table; the module is imported only when used."""

    name: str
    extensions: tuple[str, ...]
    module: str
    write_options: tuple[str, ...] = ()  # keyword options its writer accepts

    def _mod(self):
        return importlib.import_module(self.module)

    def read(self, path, variables=None, sel=None) -> dict:
        return self._mod().read(path, variables, sel)

    def read_header(self, path) -> dict:
        return self._mod().read_header(path)

    def write(self, path, dataset, **options) -> None:
        unknown = set(options) - set(self.write_options)
        if unknown:
            raise ValueError(f"{self.name} output does not take {', '.join(sorted(unknown))}")
        self._mod().write(path, dataset, **options)


FORMATS: tuple[DatasetFormat, ...] = (
    DatasetFormat("ds", (".ds",), "carray.formats.ds"),
    DatasetFormat("netcdf", (".nc", ".nc4", ".nc3", ".netcdf"), "carray.formats.netcdf",
                  write_options=("unlimited",)),
)


def format_for(path: str | os.PathLike, name: str | None = None) -> DatasetFormat:
    """The format named ``name``, or else the one whose extension ``path`` has."""
    if name is not None:
        for fmt in FORMATS:
            if fmt.name == name:
                return fmt
        raise ValueError(f"unknown format {name!r} (known: "
                         f"{', '.join(f.name for f in FORMATS)})")
    ext = os.path.splitext(os.fspath(path))[1].lower()
    for fmt in FORMATS:
        if ext in fmt.extensions:
            return fmt
    known = ", ".join(e for f in FORMATS for e in f.extensions)
    raise ValueError(f"{os.fspath(path)}: no dataset reader or writer for extension "
                     f"{ext or '(none)'!r} (known: {known}; or pass --to FORMAT)")


def read_any(path, variables=None, sel=None) -> dict:
    """Read any supported dataset file (by extension)."""
    return format_for(path).read(path, variables, sel)


def write_any(path, dataset, fmt: str | None = None, **options) -> None:
    """Write a dataset in the format of ``path``'s extension (or ``fmt``)."""
    format_for(path, fmt).write(path, dataset, **options)


def convert(src, dst, to: str | None = None, **options) -> None:
    """Convert a dataset file ``src`` to ``dst`` (formats from the extensions, or ``to``)."""
    reader = format_for(src)
    writer = format_for(dst, to)
    writer.write(dst, reader.read(src), **options)


def clean_errors(func):
    """Report what a user can fix (bad input, unknown names) as one line, exit code 1."""
    @wraps(func)
    def run(args: argparse.Namespace) -> int:
        try:
            return func(args)
        except (ValueError, KeyError, IndexError, TypeError, ImportError) as exc:
            message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
            print(f"carray: error: {message}", file=sys.stderr)
            return 1
    return run


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "convert", help="convert a dataset between formats (.ds, .nc)",
        description="Convert a dataset file; formats follow the extensions "
                    f"({', '.join(e for f in FORMATS for e in f.extensions)}).")
    p.add_argument("src", help="input file")
    p.add_argument("dst", help="output file")
    p.add_argument("--to", metavar="FORMAT", choices=[f.name for f in FORMATS],
                   help="output format, instead of guessing it from DST's extension")
    p.add_argument("--unlimited", metavar="DIM", action="append", default=[],
                   help="make DIM unlimited (NetCDF output; repeatable)")
    p.set_defaults(func=run)


@clean_errors
def run(args: argparse.Namespace) -> int:
    options = {"unlimited": args.unlimited} if args.unlimited else {}
    convert(args.src, args.dst, args.to, **options)
    return 0
