"""The shared layout suite (tests/layouts/layout_conformance.py) on the memory and bcolz layouts.

The superchunk layout runs it from tests/layouts/test_superchunk.py.
"""

from __future__ import annotations

from layout_conformance import LayoutConformance, PersistentLayoutConformance

from carray.layouts.bcolz.layout import BcolzLayout
from carray.layouts.memory import MemoryLayout


class TestMemoryLayout(LayoutConformance):
    persistent = False

    def make(self, tmp_path, meta):
        return MemoryLayout()


class TestBcolzLayout(PersistentLayoutConformance):
    def make(self, tmp_path, meta):
        return BcolzLayout.create(tmp_path / "b", meta, fsync=False)

    def reopen(self, layout, tmp_path, readonly=False):
        return BcolzLayout.open(tmp_path / "b", readonly=readonly, fsync=False)[0]
