"""Verification of a superchunk dataset, through the code its reader uses.

Checks ``meta/storage``; every kept version (its manifest, index pages and tags);
and, for each version, every chunk the version's shape needs: the index entry, the
file and its header, the record's digest and page digests, the Blosc header, the
decoded size and the decoding itself.  A record several versions share is checked
once.  A directory written before versions is checked as its reader reads it (its
offsets tables, every slot of them, and its chunks).  Nothing is written.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from carray.chunks import geometry as geo
from carray.chunks.grid import NDGrid
from carray.codecs import blosc
from carray.codecs.pages import page_digests
from carray.core.problems import Checked, Finding, Problem
from carray.errors import CArrayError, FormatError
from carray.layouts.superchunk import opening as superchunk_open
from carray.layouts.superchunk.layout import SuperchunkLayout
from carray.layouts.superchunk.meta import (
    META_DIR,
    read_info,
    read_member_note,
)
from carray.stores import Store
from carray.versions import FILL, HAS_PAGES, Manifest, Repository
from carray.versions.dataset import open_dataset
from carray.versions.outcomes import COMMIT
from carray.versions.repo import VERSIONS_DIR


def verify(store: Store, root: str) -> Iterator[Finding]:
    """Yield every problem of the superchunk dataset at ``root`` (and each chunk checked):
    an array with versions of its own, a table's column (checked in every version of its
    table), or a directory written before versions."""
    try:
        read_info(store, root)
        note = read_member_note(store, root)
    except CArrayError as exc:
        yield Problem.from_error(exc, store.url(root))
        return
    if note is not None:
        yield from verify_dataset(store, note[0], only={note[1]})
    elif Repository.exists_at(store, root):
        yield from verify_dataset(store, root)
    else:
        yield from _verify_version(store, root, None, set())


def verify_dataset(store: Store, root: str, only: set[str] | None = None
                   ) -> Iterator[Finding]:
    """Every kept version of the versioned dataset at ``root``: manifests, index pages, and
    every chunk of every member (of the members named ``only``).  A record several
    versions share is checked once."""
    repo = Repository(store, root)
    seen: set[tuple[str, int, int, int]] = set()
    ids = set()
    for seq in repo.seqs():
        try:
            manifest = repo.load(seq)
            outcome = repo.outcomes.outcome(manifest)
        except CArrayError as exc:
            yield Problem.from_error(exc, repo.url(seq))
            continue
        if outcome is None:
            yield Problem(repo.url(seq), "", f"version {manifest.id} was published by a "
                          "transaction whose outcome is recorded nowhere (its record "
                          f"{manifest.txn} is missing, and no marker): it does not count")
            continue
        if outcome != COMMIT:
            continue  # a transaction that aborted: its next writer removes it
        ids.add(manifest.id)
        if not manifest.members or [m.name for m in manifest.members] == [""]:
            if only is None:
                yield from _verify_version(store, root, manifest.id, seen)
            continue
        yield from _verify_members(repo, manifest, only, seen)
    for name in repo.tag_names():
        url = store.url(store.join(root, VERSIONS_DIR, "tags", name))
        try:
            vid = repo.tag_target(name)
        except CArrayError as exc:
            yield Problem.from_error(exc, url)
            continue
        if vid not in ids:
            yield Problem(url, "", f"tag names version {vid!r}, which is not kept")


def _verify_members(repo: Repository, manifest: Manifest, only: set[str] | None,
                    seen: set[Any]) -> Iterator[Finding]:
    """The members of one version of a dataset of several arrays (a table)."""
    store = repo.store
    where = f"{store.url(repo.root)} (version {manifest.id})"
    try:
        dataset = open_dataset(repo, True, version=manifest.id)
    except CArrayError as exc:
        yield Problem.from_error(exc, where)
        return
    try:
        for member in manifest.members:
            if only is not None and member.name not in only:
                continue
            member_root = store.join(repo.root, *member.path.split("/"))
            try:
                info = read_info(store, member_root)
                # What opening the member's directory alone reads (checked there too).
                if read_member_note(store, member_root) is None:
                    raise FormatError("meta/member file is missing",
                                      store.url(store.join(member_root, META_DIR, "member")))
                layout, meta, _ = superchunk_open.open_member(
                    dataset, member_root, info, member.name, member.path, True, False, True)
            except CArrayError as exc:
                yield Problem.from_error(exc, f"{store.url(member_root)} (version "
                                         f"{manifest.id})")
                continue
            try:
                yield from _verify_chunks(layout, meta, seen)
            finally:
                layout.close()
    finally:
        dataset.release()


def _verify_version(store: Store, root: str, version: str | None,
                    seen: set[Any]) -> Iterator[Finding]:
    """Check one version (None: the state of a directory written before versions)."""
    where = store.url(root) if version is None else f"{store.url(root)} (version {version})"
    try:
        layout, meta, _ = superchunk_open.open_dir(root, readonly=True, fsync=False, store=store,
                                   version=version)
    except CArrayError as exc:
        yield Problem.from_error(exc, where)
        return
    try:
        yield from _verify_chunks(layout, meta, seen)
    except CArrayError as exc:
        yield Problem.from_error(exc, where)
    finally:
        layout.close()


def _verify_chunks(layout: SuperchunkLayout, meta: Any, seen: set[Any]) -> Iterator[Finding]:
    grid = meta.grid
    c_order = meta.blocks is None or geo.blocked_is_c_order(grid.ext_chunks, grid.blocks)
    missing: set[str] = set()  # files reported missing once, not once per chunk
    for n in layout.stored_chunks():  # chunks of the fill value are stored nowhere
        for finding in _verify_chunk(layout, grid, n, c_order, seen):
            if isinstance(finding, Problem) and "is missing" in finding.what:
                if finding.path in missing:
                    continue
                missing.add(finding.path)
            yield finding


def _verify_chunk(layout: SuperchunkLayout, grid: NDGrid, n: int, c_order: bool,
                  seen: set[Any]) -> Iterator[Finding]:
    path = layout.chunk_path(n)
    try:
        file, off, cbytes, _ = layout.chunk_location(n)
        if off == FILL:
            return
        ident = (file, n // layout.info.superchunksize, off)
        if ident in seen:
            return
        seen.add(ident)
        chunk = layout.read_chunk(n)  # the digest, the Blosc header and the index agree
        entry_flags = layout.chunk_flags(n)
        if entry_flags & HAS_PAGES and layout.page_size:
            stored = layout.stored_page_digests(n)
            if stored != page_digests(chunk, layout.checksum, layout.page_size):
                yield Problem(file, f"offset {off + cbytes}", f"chunk {n}: page digests do "
                              "not match the chunk")
                return
        blosc.validate_chunk(chunk, None, path, off)
        h = blosc.read_header(chunk, path, off)
        allowed = _allowed_nbytes(grid, n, c_order)
        if h.nbytes not in allowed:
            yield Problem(file, f"offset {off}", f"chunk {n} holds {h.nbytes} bytes, "
                          f"expected {' or '.join(map(str, allowed))}")
            return
        blosc.decompress(chunk, path)
        yield Checked(file)
    except CArrayError as exc:
        p = Problem.from_error(exc, path)
        yield p if f"chunk {n}" in p.what else Problem(p.path, p.where, f"chunk {n}: {p.what}")


def _allowed_nbytes(grid: NDGrid, n: int, c_order: bool) -> tuple[int, ...]:
    """Decoded sizes chunk ``n`` may have: full, or (C order) just its rows when in the
    last partial run of rows."""
    full = grid.chunk_nbytes
    if not grid.ndim:  # a 0-d array: one chunk of one item
        return (full,)
    row0 = grid.chunk_coords(n)[0]
    if not c_order or (row0 + 1) * grid.chunks[0] <= grid.shape[0]:
        return (full,)
    rows = grid.shape[0] - row0 * grid.chunks[0]
    return (full, full // grid.ext_chunks[0] * rows)
