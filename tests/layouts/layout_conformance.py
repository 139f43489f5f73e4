"""One test suite every layout must pass; subclass :class:`LayoutConformance` per layout.

A subclass provides ``make(tmp_path, meta)`` (a new, empty, writable layout)
and, for persistent layouts, ``reopen(layout, tmp_path, readonly)``.
"""

from __future__ import annotations

import hashlib
import os

import numpy as np
import pytest

from carray.codecs import blosc, ranged
from carray.core.params import CParams
from carray.layouts.base import ArrayMeta, Layout

CHUNKLEN = 100


def meta(length: int = 0) -> ArrayMeta:
    return ArrayMeta.rows(np.dtype("i8"), (), length, CHUNKLEN, cparams=CParams(),
                          dflt=np.zeros((), "i8"))


def chunk_of(i: int, layout: Layout, rows: int = CHUNKLEN) -> bytes:
    data = np.arange(i * CHUNKLEN, i * CHUNKLEN + rows, dtype="i8") * (i % 7 + 1)
    if layout.blosc1:
        return blosc.compress1(data, 8, CParams())
    return blosc.compress2(data, 8, CParams())


def decoded(layout: Layout, i: int, rows: int = CHUNKLEN) -> np.ndarray:
    out = np.empty(rows, "i8")
    blosc.decompress_into(layout.read_chunk(i), out)
    return out


def snapshot(root) -> dict[str, str]:
    """Every file under ``root`` with a hash of its bytes."""
    found = {}
    for dirpath, _, names in os.walk(root):
        for name in names:
            p = os.path.join(dirpath, name)
            with open(p, "rb") as f:
                found[os.path.relpath(p, root)] = hashlib.sha256(f.read()).hexdigest()
    return found


class LayoutConformance:
    """The shared behaviour of layouts (in memory or on disk)."""

    persistent = True
    #: False for layouts that keep the base class's no-op zone-map methods.
    stores_zonemaps = True

    def array_meta(self, length: int = 0) -> ArrayMeta:
        """The metadata every test uses; override to add what a layout requires (blocks)."""
        return meta(length)

    def snapshot(self, tmp_path) -> dict[str, str]:
        """Every stored file and a digest of its bytes (layouts on other stores override)."""
        return snapshot(tmp_path)

    def make(self, tmp_path, meta: ArrayMeta) -> Layout:  # pragma: no cover - abstract
        raise NotImplementedError

    def reopen(self, layout: Layout, tmp_path, readonly: bool = False) -> Layout:
        raise NotImplementedError  # pragma: no cover - abstract

    def fill(self, layout: Layout, n: int) -> list[bytes]:
        chunks = [chunk_of(i, layout) for i in range(n)]
        for i, c in enumerate(chunks):
            layout.write_chunk(i, c)
        return chunks

    def test_write_read_chunks(self, tmp_path):
        layout = self.make(tmp_path, self.array_meta())
        chunks = self.fill(layout, 12)
        for i, c in enumerate(chunks):
            assert bytes(layout.read_chunk(i)) == c
            np.testing.assert_array_equal(decoded(layout, i), np.frombuffer(
                blosc.decompress(c), "i8"))

    def test_write_returns_size_delta(self, tmp_path):
        layout = self.make(tmp_path, self.array_meta())
        c0 = chunk_of(0, layout)
        assert layout.write_chunk(0, c0) > 0
        c1 = chunk_of(5, layout)
        delta = layout.write_chunk(0, c1)
        assert isinstance(delta, int)

    def test_ranged_reads(self, tmp_path):
        layout = self.make(tmp_path, self.array_meta())
        self.fill(layout, 5)
        for i in range(5):
            read_at, size = layout.chunk_reader(i)
            assert size == len(layout.read_chunk(i))
            assert bytes(read_at(0, 16)) == bytes(layout.read_chunk(i)[:16])
            out = np.empty(7, "i8")
            ranged.getitem_ranged(read_at, 8 * 30, out, size, None, CHUNKLEN * 8)
            np.testing.assert_array_equal(out, decoded(layout, i)[30:37])

    def test_overwrite_bigger_and_smaller(self, tmp_path):
        layout = self.make(tmp_path, self.array_meta())
        chunks = self.fill(layout, 6)
        rng = np.random.default_rng(1)
        noisy = rng.integers(0, 2**62, CHUNKLEN, dtype="i8")
        big = (blosc.compress1 if layout.blosc1 else blosc.compress2)(noisy, 8, CParams())
        layout.write_chunk(2, big)
        small = chunk_of(0, layout)
        layout.write_chunk(4, small)
        expect = chunks[:2] + [big, chunks[3], small, chunks[5]]
        for i, c in enumerate(expect):
            assert bytes(layout.read_chunk(i)) == c
        if self.persistent:
            layout.commit(self.array_meta(6 * CHUNKLEN), 0)
            layout.close()
            again = self.reopen(layout, tmp_path)
            for i, c in enumerate(expect):
                assert bytes(again.read_chunk(i)) == c
            again.close()

    def test_drop_chunks(self, tmp_path):
        layout = self.make(tmp_path, self.array_meta())
        chunks = self.fill(layout, 10)
        assert layout.drop_chunks(4) < 0
        for i in range(4):
            assert bytes(layout.read_chunk(i)) == chunks[i]
        layout.write_chunk(4, chunks[9])
        assert bytes(layout.read_chunk(4)) == chunks[9]
        if self.persistent:
            layout.commit(self.array_meta(5 * CHUNKLEN), 0)
            layout.close()
            again = self.reopen(layout, tmp_path)
            assert bytes(again.read_chunk(4)) == chunks[9]
            again.close()

    def test_attrs_round_trip(self, tmp_path):
        layout = self.make(tmp_path, self.array_meta())
        attrs = {"temperature": 23.5, "scale": "Celsius", "n": 3, "flags": [1, 2, "x"],
                 "coords": {"lat": 40.1, "lon": 0.5}}
        layout.save_attrs(attrs)
        if self.persistent:
            layout.commit(self.array_meta(), 0)
            layout.close()
            layout = self.reopen(layout, tmp_path)
            assert layout.load_attrs() == attrs
            layout.close()

    def test_sidecar_blob(self, tmp_path):
        layout = self.make(tmp_path, self.array_meta())
        self.fill(layout, 3)
        layout.save_sidecar("zonemap_000000.npy", b"\x93NUMPY-ish blob")
        layout.save_sidecar("zonemap_000003.npy", b"another")
        if self.persistent and self.stores_zonemaps:
            assert layout.sidecar_names() == ["zonemap_000000.npy", "zonemap_000003.npy"]
            assert layout.load_sidecar("zonemap_000000.npy") == b"\x93NUMPY-ish blob"
            layout.save_sidecar("zonemap_000000.npy", None)
            assert layout.sidecar_names() == ["zonemap_000003.npy"]
            assert layout.load_sidecar("zonemap_000000.npy") is None
            with pytest.raises(ValueError, match="plain file name"):
                layout.save_sidecar("../storage", b"x")
        if self.persistent:
            s0 = layout.chunk_stamp(1)
            layout.write_chunk(1, chunk_of(6, layout))
            assert layout.chunk_stamp(1) != s0
            assert layout.chunk_stamp(0) == layout.chunk_stamp(0)


class PersistentLayoutConformance(LayoutConformance):
    """The suite plus what only layouts on disk promise: reopening, and 'r' writing nothing."""

    def test_commit_and_reopen(self, tmp_path):
        layout = self.make(tmp_path, self.array_meta())
        chunks = self.fill(layout, 9)
        # The last chunk holds 40 rows: just those, or all CHUNKLEN when edges are padded.
        rows = CHUNKLEN if layout.pads_edges else 40
        tail = chunk_of(9, layout, rows=rows)
        layout.write_chunk(9, tail)
        layout.commit(self.array_meta(9 * CHUNKLEN + 40), 1234)
        layout.close()
        again = self.reopen(layout, tmp_path)
        for i, c in enumerate(chunks):
            assert bytes(again.read_chunk(i)) == c
        np.testing.assert_array_equal(decoded(again, 9, rows), np.frombuffer(
            blosc.decompress(tail), "i8"))
        again.close()

    def test_readonly_never_writes(self, tmp_path):
        layout = self.make(tmp_path, self.array_meta())
        self.fill(layout, 7)
        layout.save_attrs({"a": 1})
        layout.commit(self.array_meta(7 * CHUNKLEN), 0)
        layout.close()
        before = self.snapshot(tmp_path)
        ro = self.reopen(layout, tmp_path, readonly=True)
        for i in range(7):
            ro.read_chunk(i)
            ro.chunk_reader(i)
        ro.load_attrs()
        ro.sidecar_names()
        ro.load_sidecar("zonemap_000000.npy")
        ro.chunk_stamp(3)
        ro.close()
        assert self.snapshot(tmp_path) == before
