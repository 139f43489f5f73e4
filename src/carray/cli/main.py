"""Entry point of the ``carray`` command.

Each verb group lives in its own module exposing ``register(subparsers)``;
``register`` adds its sub-parsers and sets ``func`` on each, a callable taking
the parsed arguments and returning the process exit code.  Options several verbs
share are added by the helpers here (:func:`add_storage_options`).
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from typing import Any

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


class _StorageOption(argparse.Action):
    """``--storage-option KEY=VALUE``, repeatable, gathered into one dict.

    Values are JSON when they parse as JSON (numbers, true, null, lists...), else
    strings; dots in KEY make nested dicts (``client_kwargs.endpoint_url=...``).
    """

    def __call__(self, parser, namespace, text, option_string=None) -> None:
        key, sep, raw = text.partition("=")
        names = key.split(".")
        if not sep or not all(names):
            parser.error(f"{option_string}: expected KEY=VALUE (KEY may be dotted), "
                         f"got {text!r}")
        try:
            value: Any = json.loads(raw)
        except ValueError:
            value = raw
        options = getattr(namespace, self.dest, None) or {}
        node = options
        for i, name in enumerate(names):
            last = i == len(names) - 1
            if name in node and isinstance(node[name], dict) == last:
                parser.error(f"{option_string} {text!r}: {'.'.join(names[:i + 1])} is given "
                             "both a value and nested keys")
            if last:
                node[name] = value
            else:
                node = node.setdefault(name, {})
        setattr(namespace, self.dest, options)


def add_storage_options(parser: argparse.ArgumentParser) -> None:
    """Add the repeatable ``--storage-option KEY=VALUE`` (into ``args.storage_options``,
    a dict or None): options for the fsspec file system of URL arguments."""
    parser.add_argument(
        "--storage-option", dest="storage_options", action=_StorageOption, default=None,
        metavar="KEY=VALUE",
        help="option for the file system of URL arguments (s3://..., memory://...); "
             "repeatable; VALUE is JSON or a string; dotted keys nest "
             "(client_kwargs.endpoint_url=http://...)")


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
