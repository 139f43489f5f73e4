"""Versions of carray's own datasets: index pages, manifests and the repository that
publishes them (docs/formats/superchunk.md, "Versions").

A commit writes its chunks, makes them durable, writes the index pages it changed,
then publishes a manifest naming every page of the new version in one atomic step.
Readers hold the version they opened; nothing a kept version refers to is ever
overwritten.
"""

from carray.versions.index import (
    ENTRY,
    FILL,
    FILL_ENTRY,
    HAS_PAGES,
    PAGE_ENTRIES,
    PAGEREF,
    Entry,
    IndexView,
    PageSource,
    WorkingIndex,
)
from carray.versions.manifest import Manifest, MemberState
from carray.versions.repo import Hold, Repository, check_tag, kept_seqs, new_id, seq_of

__all__ = ["ENTRY", "FILL", "FILL_ENTRY", "HAS_PAGES", "PAGEREF", "PAGE_ENTRIES", "Entry",
           "Hold", "IndexView", "Manifest", "MemberState", "PageSource", "Repository",
           "WorkingIndex", "check_tag", "kept_seqs", "new_id", "seq_of"]
