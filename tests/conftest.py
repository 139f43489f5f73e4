"""Fixtures shared by several test modules."""

from __future__ import annotations

import collections
import collections.abc
import importlib

import pytest

from carray.formats import _ds_header


@pytest.fixture
def count_reads(monkeypatch):
    """Total bytes read from ds files while the test runs."""
    total = {"bytes": 0}
    pread, pread_into = _ds_header.pread, _ds_header.pread_into

    def counting_pread(fd, n, offset):
        data = pread(fd, n, offset)
        total["bytes"] += len(data)
        return data

    def counting_pread_into(fd, buf, offset):
        n = pread_into(fd, buf, offset)
        total["bytes"] += n
        return n

    monkeypatch.setattr(_ds_header, "pread", counting_pread)
    monkeypatch.setattr(_ds_header, "pread_into", counting_pread_into)
    return total


@pytest.fixture(scope="session")
def bloscpack_peer():
    """The real bloscpack 0.16, a test dependency.

    It still imports ABCs from ``collections`` (gone in Python 3.10), so those
    names are put back first; nothing else changes.
    """
    for name in ("MutableMapping", "Mapping", "Sequence", "Iterable"):
        if not hasattr(collections, name):
            setattr(collections, name, getattr(collections.abc, name))
    module = importlib.import_module("bloscpack")
    importlib.import_module("bloscpack.append")  # a submodule the package does not import
    return module
