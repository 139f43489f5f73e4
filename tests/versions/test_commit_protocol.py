"""Rules of the commit protocol checked one by one (docs/spec/commit.md)."""

from __future__ import annotations

import os
import uuid

import numpy as np
import pytest

import carray as ca
from carray.errors import LockError, TagExistsError, VersionTakenError
from carray.stores import LOCAL, resolve
from carray.stores.fsspec import FsspecStore
from carray.versions import Repository
from carray.versions import repo as repo_module
from carray.versions.index import fill_page


def test_two_writers_of_one_seq_one_wins_C1(tmp_path):
    ca.carray(np.arange(3), rootdir=tmp_path / "a", mode="w").close()
    repo = Repository(LOCAL, str(tmp_path / "a"))
    head = repo.latest()
    mine = head.replace(id=repo_module.new_id(head.seq + 1), seq=head.seq + 1,
                        parent=head.id)
    theirs = head.replace(id=repo_module.new_id(head.seq + 1), seq=head.seq + 1,
                          parent=head.id)
    repo.publish(mine)
    with pytest.raises(VersionTakenError):
        Repository(LOCAL, str(tmp_path / "a")).publish(theirs)
    assert repo.latest().id == mine.id
    repo.publish(mine)  # its own manifest again (an answer lost): no error


def test_page_files_of_one_seq_never_collide_C3(tmp_path, monkeypatch):
    os.makedirs(tmp_path / "d" / "versions")
    repo = Repository(LOCAL, str(tmp_path / "d"))
    draws = iter([5, 5, 9])
    monkeypatch.setattr(repo_module.secrets, "randbelow", lambda n: next(draws))
    first = repo.write_pages(7, [fill_page(3)])
    second = repo.write_pages(7, [fill_page(3)])  # the same token drawn first: another
    assert int(first["seq"][0]) != int(second["seq"][0])
    names = sorted(os.listdir(tmp_path / "d" / "versions"))
    assert names == ["0000000007-000006.ix", "0000000007-00000a.ix"]
    assert repo_module.page_file_seq(int(first["seq"][0])) == 7


def test_a_store_without_conditional_creates_has_one_writer_at_a_time_C5(monkeypatch):
    real_init = FsspecStore.__init__

    def without_conditional_creates(self, *args, **kwargs):
        real_init(self, *args, **kwargs)
        self.conditional = False  # as a store whose driver cannot create if absent

    monkeypatch.setattr(FsspecStore, "__init__", without_conditional_creates)
    url = f"memory://lease-{uuid.uuid4().hex}"
    a = ca.carray(np.arange(3), rootdir=url, mode="w")
    a.close()
    store, root = resolve(url)
    assert not store.conditional
    b, c = ca.open(url, mode="a"), ca.open(url, mode="a")
    b.append([3])
    b.commit()
    c.append([4])
    with pytest.raises(LockError, match="one process at a time"):
        c.commit()
    monkeypatch.setattr(repo_module, "LEASE_SECONDS", 0.0)  # the lease expired
    c.reset()
    c.append([4])
    c.commit()
    assert ca.open(url)[:].tolist() == [0, 1, 2, 3, 4]


def test_snapshot_never_moves_a_tag_unless_asked_C17(tmp_path):
    a = ca.carray(np.arange(3), rootdir=tmp_path / "a", mode="w")
    first = a.snapshot("release")
    a.append([3])
    with pytest.raises(TagExistsError, match="release"):
        a.snapshot("release")
    assert a.versions()[0].id != first  # the commit before the refused tag stands
    assert ca.open(tmp_path / "a", tag="release")[:].tolist() == [0, 1, 2]
    moved = a.snapshot("release", move=True)
    assert ca.open(tmp_path / "a", tag="release")[:].tolist() == [0, 1, 2, 3]
    assert a.snapshot("release") == moved  # naming the version it names already: fine
    a.close()


def test_prune_never_drops_the_newest_a_tagged_or_a_held_version_C18(tmp_path):
    a = ca.carray(np.arange(3), rootdir=tmp_path / "a", mode="w", storage={"versions": "all"})
    tagged = a.snapshot("keep")
    a.append([3])
    held_id = a.commit()
    reader = ca.open(tmp_path / "a", version=held_id)
    for i in range(3):
        a.append([10 + i])
        a.commit()
    a.prune(keep_last=1)
    kept = {v.id for v in a.versions()}
    assert {tagged, held_id, a.version} <= kept and len(kept) == 3
    assert reader[:].tolist() == [0, 1, 2, 3]
    reader.close()
    a.prune(keep_last=1)
    assert {v.id for v in a.versions()} == {tagged, a.version}
    a.close()


def test_a_stale_or_damaged_head_is_not_taken_on_trust_C21(tmp_path):
    a = ca.carray(np.arange(3), rootdir=tmp_path / "a", mode="w")
    a.append([3])
    a.commit()
    a.append([4])
    a.close()
    head = tmp_path / "a" / "versions" / "HEAD"
    head.write_bytes(b"00000000000000000001\n")  # behind
    assert ca.open(tmp_path / "a")[:].tolist() == [0, 1, 2, 3, 4]
    head.write_bytes(b"garbage")
    assert ca.open(tmp_path / "a")[:].tolist() == [0, 1, 2, 3, 4]
    head.unlink()
    assert ca.open(tmp_path / "a")[:].tolist() == [0, 1, 2, 3, 4]


def _bytes(path) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


def test_a_group_keeps_what_its_kept_versions_name_and_costs_what_an_array_costs_C19(
        tmp_path):
    g = ca.group(tmp_path / "g", mode="w")
    g.create_array("x", np.zeros(0), chunks=(1000,))
    a = ca.carray(np.zeros(0), chunklen=1000, rootdir=tmp_path / "a", mode="w")
    rng = np.random.default_rng(0)
    for _ in range(60):
        step = rng.random(100)
        g["x"].append(step)
        g.commit()
        a.append(step)
        a.commit()
    g.close()
    a.close()
    assert len(ca.open_group(tmp_path / "g").versions()) == 1
    assert len(ca.open(tmp_path / "g" / "x").versions()) == 1
    assert not os.listdir(tmp_path / "g" / ".carray-transactions")
    assert _bytes(tmp_path / "g") < 1.5 * _bytes(tmp_path / "a") + 16_384
    g = ca.group(tmp_path / "g", storage={"versions": "all"})
    for _ in range(5):
        g["x"].append(rng.random(10))
        g.commit()
    before = _bytes(tmp_path / "g")
    assert g.prune(keep_last=1) == 5
    assert _bytes(tmp_path / "g") < before  # prune gives the space back
    g.close()
