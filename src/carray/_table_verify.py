"""Verification of a table directory: ``__rootdirs__``, ``__attrs__`` and every column.

A column is a carray directory (any array layout), a variable-length string
column (``__vlstring__`` marker, ``offsets/`` and ``values/`` arrays, checked
as its reader checks them) or a nested column (a table directory of its fields).  Columns are verified with their layout's own
verifier; nothing is written.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

from carray.errors import CArrayError
from carray.layouts import sniff_layout
from carray.layouts.bcolz import ATTRS_FILE, BcolzLayout, read_json
from carray.problems import Checked, Finding, Problem, tally
from carray.stores import Store
from carray.table import ROOTDIRS, check_name
from carray.vlstring import MARKER, StringColumn, is_string_column


def verify_table(store: Store, root: str) -> Iterator[Finding]:
    """Yield every problem of the table at ``root`` (and each chunk of its columns checked)."""
    names_path = store.url(store.join(root, ROOTDIRS))
    try:
        meta = read_json(store.join(root, ROOTDIRS), ROOTDIRS, store)
    except CArrayError as exc:
        yield Problem.from_error(exc, names_path)
        return
    names = meta.get("names") if isinstance(meta, dict) else None
    if not isinstance(names, list) or len(set(map(str, names))) != len(names):
        yield Problem(names_path, "", 'must hold {"names": [unique column names]}')
        return
    yield from _verify_attrs(store, root)
    for name in names:
        try:
            check_name(name)
        except (TypeError, ValueError) as exc:
            yield Problem(names_path, "", f"bad column name: {exc}")
            continue
        yield from _verify_column(store, store.join(root, name), name)


def _verify_attrs(store: Store, root: str) -> Iterator[Problem]:
    attrs_key = store.join(root, ATTRS_FILE)
    if not store.exists(attrs_key):
        return
    try:
        BcolzLayout(root, readonly=True, store=store).load_attrs()
    except CArrayError as exc:
        yield Problem.from_error(exc, store.url(attrs_key))


def _verify_column(store: Store, key: str, name: str) -> Iterator[Finding]:
    url = store.url(key)
    if is_string_column(key, store):
        yield from _verify_strings(store, key, name)
        return
    kind = sniff_layout(key, store)
    if kind is None and store.exists(store.join(key, ROOTDIRS)):
        yield from verify_table(store, key)  # a nested column: a table of its fields
        return
    if kind is None:
        yield Problem(url, "", f"column {name!r} has no carray directory")
        return
    yield from kind.verify(store, key)


def _verify_strings(store: Store, key: str, name: str) -> Iterator[Finding]:
    url = store.url(key)
    try:
        marker = json.loads(store.get(store.join(key, MARKER)))
    except (ValueError, UnicodeDecodeError) as exc:
        yield Problem(store.url(store.join(key, MARKER)), "", f"bad {MARKER}: {exc}")
        return
    if not isinstance(marker, dict) or marker.get("version") != 1:
        yield Problem(url, "", f"string column {name!r}: unsupported marker {marker!r}")
        return
    clean = True
    for part in ("offsets", "values"):
        sub = store.join(key, part)
        kind = sniff_layout(sub, store)
        if kind is None:
            yield Problem(store.url(sub), "", f"string column {name!r} has no {part} array")
            clean = False
            continue
        problems, checked = tally(kind.verify(store, sub))
        yield from problems
        if checked:
            yield Checked(store.url(sub), checked)
        clean = clean and not problems
    if clean:  # the arrays decode: now how they fit together, as the reader checks it
        try:
            StringColumn(rootdir=(store.url(key) if store.remote else key), mode="r").close()
        except CArrayError as exc:
            yield Problem.from_error(exc, url)
