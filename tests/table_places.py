"""Reopening a test table (the ``where`` fixture, in memory or on disk, is in conftest):
shared by the column-kind tests (categories, time zones)."""

from __future__ import annotations

import carray as ca


def reopen(t, mode="a"):
    """``t`` flushed, closed and opened again (an in-memory table as it is)."""
    if t.rootdir is None:
        return t
    t.flush()
    t.close()
    return ca.open(t.rootdir, mode=mode)
