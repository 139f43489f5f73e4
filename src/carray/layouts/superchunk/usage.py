"""Which records of a superchunk dataset's member the versions refer to: what the space
keeper (:mod:`._sc_space`) needs to learn free space, to free what a dropped version
alone referred to, and to foresee what a commit frees.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Sequence

import numpy as np

from carray.versions import PAGE_ENTRIES, Entry, MemberState
from carray.versions.dataset import VersionedDataset
from carray.versions.index import page_slot

Key = tuple[int, int]


def used_extents(dataset: VersionedDataset, member: str, superchunksize: int,
                 more: Iterable[tuple[int, np.ndarray]]) -> dict[Key, list[tuple[int, int]]]:
    """Extents ``{(superchunk, gen): [(off, room), ...]}`` of the records that the kept
    versions of ``member`` refer to, and the entries ``more`` (``(first chunk,
    entries)``: a working index's pages)."""
    found: list[np.ndarray] = []  # rows of (superchunk, gen, off, room)

    def note(first: int, entries: np.ndarray) -> None:
        live = np.flatnonzero(entries["off"] >= 0)
        if live.size:
            e = entries[live]
            found.append(np.stack([(first + live) // superchunksize, e["gen"], e["off"],
                                   e["room"]], axis=1).astype(np.int64))

    pages = dataset.repo.pages
    seen: set[tuple[int, int]] = set()
    for m in dataset.manifests():
        try:
            st = m.member(member)
        except KeyError:
            continue
        numbers = range(len(st.pages)) if st.page_numbers is None else st.page_numbers.tolist()
        for p, ref in zip(numbers, st.pages, strict=True):
            ident = (int(ref["seq"]), int(ref["off"]))
            if ident not in seen:  # versions share the pages they did not change
                seen.add(ident)
                n = min(PAGE_ENTRIES, st.nchunks - p * PAGE_ENTRIES)
                note(p * PAGE_ENTRIES, pages.page(ref, n))
    for first, entries in more:
        note(first, entries)
    if not found:
        return {}
    rows = np.concatenate(found)
    rows = rows[np.lexsort((rows[:, 2], rows[:, 1], rows[:, 0]))]  # by file, offset
    cuts = np.flatnonzero(np.any(np.diff(rows[:, :2], axis=0) != 0, axis=1)) + 1
    return {(int(g[0, 0]), int(g[0, 1])): list(zip(g[:, 2].tolist(), g[:, 3].tolist(),
                                                     strict=True))
            for g in np.split(rows, cuts)}


def referrer(dataset: VersionedDataset, states: Sequence[tuple[int, MemberState]]
             ) -> Callable[[int, Entry], bool]:
    """``refers(n, entry)``: whether chunk ``n``'s record ``entry`` is chunk ``n``'s in
    one of the member's ``states`` (``(seq, state)``)."""
    pages = dataset.repo.pages

    def refers(n: int, old: Entry) -> bool:
        p, i = divmod(n, PAGE_ENTRIES)
        for _, st in states:
            slot = page_slot(st.page_numbers, p) if n < st.nchunks else None
            if slot is not None:  # (no reference: every chunk of the page is fill)
                entry = pages.page(st.pages[slot], min(PAGE_ENTRIES,
                                                        st.nchunks - p * PAGE_ENTRIES))[i]
                if int(entry["gen"]) == old.gen and int(entry["off"]) == old.off:
                    return True
        return False

    return refers


def outliving(dataset: VersionedDataset, member: str
              ) -> Callable[[int, Entry], bool] | None:
    """``refers(n, entry)`` over the versions the next commit leaves kept besides itself,
    when the version it replaces goes with it (one version kept, that one not tagged);
    None when that version stays (the next commit frees nothing it replaces).  A reader
    holding it is not foreseen (asking would take the lock readers take): the space
    freed then waits for the reader to let go."""
    head = dataset.head
    if head is None or dataset.keep != 1 or head.id in dataset.repo.tags().values():
        return None
    states = []
    for m in dataset.manifests():
        if m.seq != head.seq:
            with contextlib.suppress(KeyError):
                states.append((m.seq, m.member(member)))
    return referrer(dataset, states)
