"""Stores: where a dataset's bytes live (see :mod:`carray.stores.base`).

:func:`resolve` turns what a user passes as ``rootdir`` -- a local path, or any
fsspec URL such as ``s3://bucket/data.carray`` or ``memory://x`` -- into a store
and a path inside it.
"""

from __future__ import annotations

import os
from typing import Any

from carray.stores.base import Handle, Store
from carray.stores.local import LOCAL, LocalStore

#: A local path, an fsspec URL, or a (store, path) pair already resolved.
Location = str | os.PathLike[str] | tuple[Store, str]


def is_url(location: Any) -> bool:
    """True for ``scheme://...`` strings other than ``file://``."""
    return isinstance(location, str) and "://" in location and \
        not location.startswith("file://")


def resolve(location: Location,
            storage_options: dict[str, Any] | None = None) -> tuple[Store, str]:
    """The store holding ``location`` and the path of ``location`` inside it.

    Local paths (and ``file://`` URLs) go to :class:`LocalStore`; any other URL is
    opened with fsspec, ``storage_options`` passed to its file system.
    """
    if isinstance(location, tuple) and len(location) == 2 and isinstance(location[0], Store):
        return location
    text = os.fspath(location)
    if text.startswith("file://"):
        text = text[len("file://"):]
    if not is_url(text):
        if storage_options:
            raise ValueError("storage_options apply to URLs (s3://..., memory://...), "
                             f"not to the local path {text!r}")
        return LOCAL, text
    try:
        from fsspec.core import url_to_fs
    except ImportError:
        raise ImportError(f"{text}: URLs need fsspec (pip install 'carray[remote]')") from None
    from carray.stores.fsspec import FsspecStore

    fs, path = url_to_fs(text, **(storage_options or {}))
    return FsspecStore(fs), path.rstrip("/")


__all__ = ["LOCAL", "Handle", "LocalStore", "Store", "is_url", "resolve"]
