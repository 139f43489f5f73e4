"""Entry point of the ``carray`` command.

Each verb group lives in its own module exposing ``register(subparsers)``;
``register`` adds its sub-parsers and sets ``func`` on each, a callable taking
the parsed arguments and returning the process exit code.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from carray.errors import CArrayError

# Modules that add verbs; each must define register(subparsers).
VERB_MODULES = (
    "carray.cli.info",
    "carray.cli.table",
    "carray.cli.demo",
    "carray.cli.ds",
    "carray.cli.convert",
    "carray.cli.pack",
    "carray.cli.verify",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="carray",
        description="Compressed, chunked arrays and tables, on disk as in memory.",
    )
    subparsers = parser.add_subparsers(dest="verb", metavar="VERB")
    for name in VERB_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:  # a verb group not present in this build
                continue
            raise
        module.register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except CArrayError as exc:
        print(f"carray: error: {exc}", file=sys.stderr)
        return 1
    except (FileNotFoundError, PermissionError, IsADirectoryError) as exc:
        print(f"carray: error: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
