"""Fixtures shared by several test modules."""

from __future__ import annotations

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
