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
import traceback
from typing import Any

# Modules that add verbs; each must define register(subparsers).
VERB_MODULES = (
    "carray.cli.info",
    "carray.cli.table",
    "carray.cli.demo",
    "carray.cli.ds",
    "carray.cli.convert",
    "carray.cli.pack",
    "carray.cli.verify",
    "carray.cli.log",
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


def _version() -> str:
    import carray

    return carray.__version__


def _add_common(parser: argparse.ArgumentParser, default: Any) -> None:
    """``--quiet`` and ``--debug``, accepted before the verb and after it."""
    parser.add_argument("-q", "--quiet", action="store_true", default=default,
                        help="no progress bar")
    parser.add_argument("--debug", action="store_true", default=default,
                        help="show the full traceback of an error")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="carray",
        description="Compressed, chunked arrays and tables, on disk as in memory.",
    )
    parser.add_argument("--version", action="version", version=f"carray {_version()}")
    _add_common(parser, False)
    subparsers = parser.add_subparsers(dest="verb", metavar="VERB")
    for name in VERB_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:  # a verb group not present in this build
                continue
            raise
        module.register(subparsers)
    for sub in subparsers.choices.values():
        _add_common(sub, argparse.SUPPRESS)  # given after the verb, it overrides the default
    return parser


def _subject(args: argparse.Namespace) -> str | None:
    """The path a verb was working on, to name in an error message."""
    for name in ("path", "src"):
        value = getattr(args, name, None)
        if isinstance(value, str):
            return value
    paths = getattr(args, "paths", None)
    return paths[0] if isinstance(paths, list) and len(paths) == 1 else None


def error_line(exc: BaseException, subject: str | None) -> str:
    """One line saying what went wrong, naming ``subject`` when the message does not."""
    text = " ".join(str(exc).split()) if str(exc) else type(exc).__name__
    if isinstance(exc, KeyError) and exc.args:
        text = str(exc.args[0])
    if isinstance(exc, OSError) and exc.filename is not None and str(exc.filename) not in text:
        text = f"{exc.filename}: {exc.strerror or text}"
    if subject and subject not in text and not text.startswith(("/", "memory:", "s3:")):
        text = f"{subject}: {text}"
    return f"carray: error: {text}"


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        # Writers clean up as the interrupt unwinds through them: nothing is left half-written.
        print("carray: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # noqa: BLE001 - every failure becomes one line (or --debug)
        if args.debug:
            traceback.print_exc()
        print(error_line(exc, _subject(args)), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
