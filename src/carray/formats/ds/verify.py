"""Verification of a ds file with the parser its reader uses: the header (as
:func:`carray.formats.ds.read_header` checks it), then every variable read."""

from __future__ import annotations

from collections.abc import Iterator

from carray.core.problems import Checked, Finding, Problem
from carray.errors import CArrayError
from carray.formats.ds.header import unescape
from carray.formats.ds.reader import Reader
from carray.stores import Store


def verify(store: Store, path: str) -> Iterator[Finding]:
    """Yield every problem of the ds file at ``path`` (each variable read counts as a chunk)."""
    url = store.url(path)
    try:
        reader = Reader((store, path))
    except CArrayError as exc:
        yield Problem.from_error(exc, url)
        return
    with reader:
        for key, layout in reader.header.layouts.items():
            try:
                reader.read_variable(layout)
                yield Checked(url)
            except CArrayError as exc:
                p = Problem.from_error(exc, url)
                yield Problem(p.path, p.where, p.what if unescape(key) in p.what else
                              f"variable {unescape(key)!r}: {p.what}")
