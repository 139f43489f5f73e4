"""``carray verify PATH...``: check every chunk of datasets and files; print every problem.

The checking is the registry's (:func:`carray.registry.verify`): each layout and
file format verifies itself with its own reader's parsing code.  This module
only prints what it finds and counts.  A group is checked member by member, every
problem naming its member.  Nothing is written.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator

from carray import registry
from carray.cli._ui import progress
from carray.cli.main import add_storage_options
from carray.core.problems import Finding, Problem, tally
from carray.errors import CArrayError
from carray.integrations.convert import options_for


def findings(path: str, storage_options: dict | None = None) -> Iterator[Finding]:
    """What checking ``path`` finds: the registry's checks of its format, or for a group
    every member's, each problem naming the member (:mod:`carray.cli._groups`)."""
    options = options_for(path, storage_options)
    try:
        kind = registry.guess(path, options).kind
    except (CArrayError, OSError, ValueError):
        kind = None  # the registry's verify says what is wrong
    if kind == "group":
        from carray.cli._groups import verify_group

        return verify_group(path, options)
    return registry.verify(path, options)


def verify_path(path: str | os.PathLike,
                storage_options: dict | None = None) -> tuple[list[str], int]:
    """Check what is at ``path``: (every problem as a line of text, chunks checked fine)."""
    path = os.fspath(path)
    problems, checked = tally(findings(path, storage_options))
    return [str(p) for p in problems], checked


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def summary(path: str, problems: int, checked: int) -> str:
    """The last line for ``path``: ``OK (9 chunks checked)`` or ``1 problem; 0 chunks OK``."""
    if not problems:
        return f"{path}: OK ({_plural(checked, 'chunk')} checked)"
    return f"{path}: {_plural(problems, 'problem')}; {_plural(checked, 'chunk')} OK"


def _run(args: argparse.Namespace) -> int:
    status = 0
    for path in args.paths:
        problems = checked = 0
        with progress(f"verify {path}", quiet=args.quiet) as report:
            for finding in findings(path, args.storage_options):
                if isinstance(finding, Problem):
                    print(finding, flush=True)
                    problems += 1
                else:
                    checked += finding.count
                    report(checked, 0)
        status = status or int(problems > 0)
        print(summary(path, problems, checked))
    return status


def register(subparsers: argparse._SubParsersAction) -> None:
    known = ", ".join(f.name for f in registry.FORMATS)
    p = subparsers.add_parser(
        "verify", help="check every chunk of datasets and files (checksums, headers, decoding)",
        description=f"Check every chunk of each PATH and report every problem found; exits 1 "
                    f"if there is any. Formats: {known}.")
    p.add_argument("paths", nargs="+", metavar="PATH",
                   help="dataset directories or files (paths or URLs)")
    add_storage_options(p)
    p.set_defaults(func=_run)
