"""Verification of a table directory: ``__rootdirs__``, ``__attrs__`` and every column.

A column is a carray directory (any array layout), a variable-length string
column (``__vlstring__`` marker, ``offsets/`` and ``values/`` arrays, checked
as its reader checks them) or a nested column (a table directory of its fields).  Columns are verified with their layout's own
verifier; nothing is written.
"""

from __future__ import annotations

from collections.abc import Iterator

from carray.core.problems import Checked, Finding, Problem, tally
from carray.errors import CArrayError
from carray.layouts import sniff_layout
from carray.layouts.bcolz.layout import ATTRS_FILE, BcolzLayout, read_json
from carray.layouts.superchunk.verify import verify_dataset
from carray.stores import Store
from carray.table.columns.strings import MARKER, StringColumn, check_string_marker, is_string_column
from carray.table.store import (
    ROOTDIRS,
    TABLE_FILE,
    check_name,
    check_table_marker,
    is_versioned_table,
    member_names,
)
from carray.versions import Repository


def verify_table(store: Store, root: str) -> Iterator[Finding]:
    """Yield every problem of the table at ``root`` (and each chunk of its columns checked)."""
    if is_versioned_table(root, store):
        yield from verify_versioned_table(store, root)
        return
    yield from verify_bcolz_table(store, root)


def verify_versioned_table(store: Store, root: str) -> Iterator[Finding]:
    """Every kept version of a versioned table: its arrays (as every member of a dataset
    is checked), and what each version says of its columns against its members."""
    if store.isfile(store.join(root, TABLE_FILE)):
        try:
            check_table_marker(store, root)
        except CArrayError as exc:
            yield Problem.from_error(exc, store.url(store.join(root, TABLE_FILE)))
            return
    yield from verify_dataset(store, root)
    repo = Repository(store, root)
    for seq in repo.seqs():
        try:
            manifest = repo.load(seq)
        except CArrayError:
            continue  # reported above
        where = repo.url(seq)
        if repo.committed(manifest):
            yield from _open_version(store, root, manifest.id, where)
        meta = manifest.meta if isinstance(manifest.meta, dict) else {}
        columns = meta.get("columns")
        if meta.get("kind") != "table" or not isinstance(columns, dict):
            yield Problem(where, "", "the version does not describe a table")
            continue
        try:
            for name in columns:
                check_name(name)
            expected = set(member_names(columns))
        except (TypeError, ValueError, KeyError) as exc:
            yield Problem(where, "", f"bad column description: {exc}")
            continue
        present = {m.name for m in manifest.members}
        if expected != present:
            yield Problem(where, "", f"columns need arrays {sorted(expected)}, the version "
                          f"holds {sorted(present)}")
        length = meta.get("length")
        lengths = {m.name: (m.shape[0] if m.shape else 1) for m in manifest.members
                   if not m.name.endswith(("/offsets", "/values", "/dictionary"))}
        if any(n != length for n in lengths.values()):
            yield Problem(where, "", f"columns of {sorted(set(lengths.values()))} rows in a "
                          f"table of {length}")


def _open_version(store: Store, root: str, version: str, where: str) -> Iterator[Problem]:
    """Open the table at ``version`` as a reader does: every column of it, with the
    markers of its string and category columns (the chunks are checked above)."""
    from carray.table.table import ctable  # (the table imports what imports this module)

    options = getattr(getattr(store, "fs", None), "storage_options", None) or None
    try:
        ctable(rootdir=store.url(root) if store.remote else root, mode="r",
               version=version, storage_options=options if store.remote else None).close()
    except CArrayError as exc:
        yield Problem.from_error(exc, where)


def verify_bcolz_table(store: Store, root: str) -> Iterator[Finding]:
    """A bcolz table directory: ``__rootdirs__``, ``__attrs__`` and every column."""
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
        yield from verify_bcolz_table(store, key)  # a nested column: a table of its fields
        return
    if kind is None:
        yield Problem(url, "", f"column {name!r} has no carray directory")
        return
    yield from kind.verify(store, key)


def _verify_strings(store: Store, key: str, name: str) -> Iterator[Finding]:
    url = store.url(key)
    try:
        check_string_marker(store, key)
    except CArrayError as exc:
        yield Problem.from_error(exc, store.url(store.join(key, MARKER)))
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
