"""Layouts: how an array's chunks and metadata map to storage.

A layout knows nothing of selections; an array never parses a header.  New
datasets on disk use the superchunk layout unless ``format="bcolz"`` or
``format="b2nd"`` (python-blosc2 frames; the default for paths ending in
``.b2nd``) is asked for; existing ones are told apart by what is on disk.
"""

from __future__ import annotations

import os

from carray.errors import FormatError
from carray.layouts.b2frame import B2ndLayout, is_b2nd_frame
from carray.layouts.base import ArrayMeta, Layout
from carray.layouts.bcolz import BcolzLayout, is_bcolz_carray
from carray.layouts.memory import MemoryLayout
from carray.layouts.superchunk import SuperchunkLayout, is_superchunk_dataset
from carray.stores import LOCAL, Store

FORMATS = ("superchunk", "bcolz", "b2nd")


def create_layout(rootdir: str | os.PathLike | None, meta: ArrayMeta, *,
                  format: str | None = None, mode: str = "a",  # noqa: A002
                  fsync: bool = True, storage: dict | None = None,
                  store: Store = LOCAL) -> Layout:
    """A new, empty layout for ``meta``: in memory when ``rootdir`` is None.

    ``rootdir`` is a path inside ``store`` (see :func:`carray.stores.resolve`).
    """
    if rootdir is None:
        return MemoryLayout()
    rootdir = os.fspath(rootdir)
    fmt = format or ("b2nd" if rootdir.endswith(".b2nd") else "superchunk")
    if fmt == "b2nd":
        return B2ndLayout.create(rootdir, meta, mode=mode, fsync=fsync, store=store,
                                 **(storage or {}))
    if fmt == "superchunk":
        return SuperchunkLayout.create(rootdir, meta, mode=mode, fsync=fsync, store=store,
                                       **(storage or {}))
    return BcolzLayout.create(rootdir, meta, mode=mode, fsync=fsync, store=store)


def open_layout(rootdir: str | os.PathLike, *, readonly: bool, fsync: bool = True,
                allow_pickle: bool = False, storage: dict | None = None,
                store: Store = LOCAL) -> tuple[Layout, ArrayMeta, int]:
    """Open an existing dataset (directory or Blosc2 frame file), whichever layout it is in."""
    rootdir = os.fspath(rootdir)
    store.invalidate(rootdir)  # other processes may have written since we last looked
    if is_b2nd_frame(rootdir, store):
        return B2ndLayout.open(rootdir, readonly=readonly, fsync=fsync, store=store)
    if is_superchunk_dataset(rootdir, store):
        return SuperchunkLayout.open(rootdir, readonly=readonly, fsync=fsync,
                                     verify=(storage or {}).get("verify", True), store=store)
    if not is_bcolz_carray(rootdir, store):
        raise FormatError("not a carray directory (no meta/storage)", store.url(rootdir))
    return BcolzLayout.open(rootdir, readonly=readonly, fsync=fsync, allow_pickle=allow_pickle,
                            store=store)


__all__ = ["FORMATS", "ArrayMeta", "B2ndLayout", "Layout", "MemoryLayout", "create_layout",
           "open_layout"]
