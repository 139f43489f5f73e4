"""What the ``carray`` command shows: aligned tables, one progress bar, sizes, rows.

Everything goes through the ``rich`` library.  Tables print plain (no colour, no
borders but a rule under the header) so they read the same in a terminal, a pipe
or a file; the progress bar shows only when stderr is a terminal and ``--quiet``
was not given.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
from rich import box
from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)
from rich.table import Table

#: Items shown at each end of a long axis (numpy's ``edgeitems``).
EDGE_ITEMS = 3
#: Arrays with more items than this are summarised (numpy's ``threshold``).
THRESHOLD = 10

#: How a missing (masked) value prints: as numpy's masked arrays print it.
MISSING = "--"

_UNITS = ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB")


def human(n: float) -> str:
    """``n`` bytes in binary units: ``512 bytes``, ``1.50 KiB``, ``3.00 MiB``."""
    for unit in _UNITS:
        if abs(n) < 1024 or unit == _UNITS[-1]:
            return f"{int(n)} bytes" if unit == "bytes" else f"{n:.2f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")  # pragma: no cover


def _console() -> Console:
    # Looked up at each call: the caller (or a test) may have replaced sys.stdout.
    return Console(file=sys.stdout, width=100_000, color_system=None, highlight=False,
                   soft_wrap=False, emoji=False, markup=False)


def print_table(headers: Sequence[str], rows: Sequence[Sequence[Any]],
                right: Sequence[int] = (), rule: bool = True) -> None:
    """Print ``rows`` under ``headers`` as aligned columns (``right``: right-aligned ones;
    ``rule``: a line under the header)."""
    table = Table(box=box.SIMPLE_HEAD if rule else None, show_edge=False, pad_edge=False)
    for i, h in enumerate(headers):
        table.add_column(h, justify="right" if i in right else "left", no_wrap=True)
    for r in rows:
        table.add_row(*(str(v) for v in r))
    _console().print(table)


def print_fields(rows: Sequence[tuple[str, Any]]) -> None:
    """Print ``name : value`` lines with the colons aligned."""
    width = max((len(k) for k, _ in rows), default=0)
    out = sys.stdout
    for k, v in rows:
        out.write(f"{k:<{width}} : {v}\n")


def cell(value: Any) -> str:
    """One value on one line: byte strings decoded, arrays summarised like numpy does, a
    missing (masked) value as :data:`MISSING`."""
    if value is np.ma.masked:
        return MISSING
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    if isinstance(value, np.ndarray):
        return summary(value)
    return str(value)


def summary(a: Any, *, one_line: bool = True) -> str:
    """numpy's summarised repr of ``a``: at most ``EDGE_ITEMS`` at each end of an axis;
    missing (masked) items show as :data:`MISSING`, as numpy's masked arrays show them."""
    if np.ma.is_masked(a):
        if not np.ndim(a):
            return MISSING
        items: np.ndarray = _masked_items(a)
        formatter: Any = {"object": str}  # the items are their text already
    else:
        items, formatter = np.asarray(np.ma.getdata(a)), None
    text = np.array2string(items, threshold=THRESHOLD, edgeitems=EDGE_ITEMS,
                           separator=", ", max_line_width=10**6 if one_line else 100,
                           formatter=formatter)
    if not one_line:
        return text
    # numpy pads items to a common width; on one line the padding only gets in the way.
    return " ".join(text.split()).replace("[ ", "[").replace(" ,", ",").replace(" ]", "]")


def _masked_items(a: np.ma.MaskedArray) -> np.ndarray:
    """The items of ``a`` as text in an object array of its shape, :data:`MISSING` where
    masked.  Only the items a summary shows are formatted (each as numpy formats it):
    the rest are never printed."""
    shown = [np.arange(n) if a.size <= THRESHOLD or n <= 2 * EDGE_ITEMS else
             np.r_[0:EDGE_ITEMS, n - EDGE_ITEMS:n] for n in a.shape]
    region = np.ix_(*shown)
    part = a[region]
    texts = [MISSING if missing else np.array2string(np.asarray(value))
             for value, missing in zip(np.ma.getdata(part).flat,
                                       np.ma.getmaskarray(part).flat, strict=True)]
    out = np.full(a.shape, "", dtype=object)
    out[region] = np.array(texts, dtype=object).reshape(part.shape)
    return out


@contextlib.contextmanager
def progress(label: str, *, quiet: bool = False, min_total: int = 0,
             always: bool = False, unit: str = "bytes"
             ) -> Iterator[Callable[[int, int], None]]:
    """A ``report(done, total)`` callable drawing one bar on stderr while the block runs.

    Nothing is drawn when stderr is not a terminal, when ``quiet``, or for totals
    below ``min_total`` bytes; a total of 0 means not known (a count, no bar end).
    ``always`` draws it anyway (off a terminal: its final state, once). ``unit`` is
    ``"bytes"`` (sizes and speed in binary units) or what else is counted (``"rows"``,
    ``"steps"``: shown as done/total).
    """
    if quiet or not (always or sys.stderr.isatty()):
        yield lambda done, total: None
        return
    amounts = ((DownloadColumn(binary_units=True), TransferSpeedColumn()) if unit == "bytes"
               else (MofNCompleteColumn(), TextColumn(unit)))
    bar = Progress(TextColumn("{task.description}"), BarColumn(),
                   TextColumn("{task.percentage:>5.1f}%"), *amounts, TimeRemainingColumn(),
                   console=Console(file=sys.stderr,
                                   width=None if sys.stderr.isatty() else 400),
                   transient=not always,
                   # Lines printed meanwhile go above the bar on a terminal, and stay in
                   # stdout when it is a file or a pipe.
                   redirect_stdout=sys.stdout.isatty())
    task = None

    def report(done: int, total: int) -> None:
        nonlocal task
        if 0 < total < min_total:
            return
        if task is None:
            bar.start()
            task = bar.add_task(label, total=total or None)  # None: no known end
        bar.update(task, completed=done, total=total or None)

    try:
        yield report
    finally:
        if task is not None:
            bar.stop()
