"""The shared layout suite on an object store (fsspec's ``memory://``) and on S3.

Every layout reaches its bytes through a :class:`carray.stores.Store`; here the
same suite that runs on local directories runs on stores where every object is
put whole and read by byte ranges.
"""

from __future__ import annotations

import hashlib
import itertools

import fsspec
import pytest
from layout_conformance import CHUNKLEN, PersistentLayoutConformance

from carray.layouts.b2nd.layout import B2ndLayout
from carray.layouts.bcolz.layout import BcolzLayout
from carray.layouts.superchunk import opening as superchunk_open
from carray.stores.fsspec import FsspecStore

_ids = itertools.count()


class _OnMemoryStore(PersistentLayoutConformance):
    """Each test gets its own root in fsspec's in-memory file system."""

    name = "x"

    @pytest.fixture(autouse=True)
    def _store(self):
        fs = fsspec.filesystem("memory")
        self.store = FsspecStore(fs)
        self.root = f"/carray-layouts/{next(_ids)}"
        yield
        if fs.exists(self.root):
            fs.rm(self.root, recursive=True)

    @property
    def path(self) -> str:
        return f"{self.root}/{self.name}"

    def snapshot(self, tmp_path) -> dict[str, str]:
        fs = self.store.fs
        return {p: hashlib.sha256(fs.cat_file(p)).hexdigest()
                for p in fs.find(self.root)}


class TestSuperchunkOnMemoryStore(_OnMemoryStore):
    def make(self, tmp_path, meta):
        return superchunk_open.create(self.path, meta, fsync=False, superchunksize=4,
                                       store=self.store)

    def reopen(self, layout, tmp_path, readonly=False):
        return superchunk_open.open_dir(self.path, readonly=readonly, fsync=False,
                                     store=self.store)[0]


class TestBcolzOnMemoryStore(_OnMemoryStore):
    def make(self, tmp_path, meta):
        return BcolzLayout.create(self.path, meta, fsync=False, store=self.store)

    def reopen(self, layout, tmp_path, readonly=False):
        return BcolzLayout.open(self.path, readonly=readonly, fsync=False, store=self.store)[0]


class TestB2ndContiguousOnMemoryStore(_OnMemoryStore):
    name = "x.b2nd"
    contiguous = True
    stores_zonemaps = False

    def array_meta(self, length: int = 0):
        return super().array_meta(length).replace(blocks=(CHUNKLEN,))

    def make(self, tmp_path, meta):
        return B2ndLayout.create(self.path, meta, fsync=False, contiguous=self.contiguous,
                                 store=self.store)

    def reopen(self, layout, tmp_path, readonly=False):
        return B2ndLayout.open(self.path, readonly=readonly, fsync=False, store=self.store)[0]


class TestB2ndSparseOnMemoryStore(TestB2ndContiguousOnMemoryStore):
    contiguous = False


class TestSuperchunkOnS3(TestSuperchunkOnMemoryStore):
    """The superchunk layout against moto's S3 server, as s3fs sees AWS."""

    @pytest.fixture(autouse=True)
    def _store(self, s3):
        import s3fs

        fs = s3fs.S3FileSystem(**s3.storage_options)
        self.store = FsspecStore(fs)
        self.root = f"{s3.bucket}/layouts/{next(_ids)}"
        yield
        if fs.exists(self.root):
            fs.rm(self.root, recursive=True)
