"""The superchunk layout: conformance, in-place rewrites, checksums, Bloscpack
compatibility, crashes at every write, corrupt files and ``carray verify``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
from layout_conformance import (
    CHUNKLEN,
    PersistentLayoutConformance,
    chunk_of,
    meta,
    snapshot,
)

import carray as ca
from carray.cli.main import main as cli_main
from carray.cli.verify import verify_path
from carray.codecs import blosc
from carray.errors import ChecksumError, CodecError, FormatError, ReadOnlyError
from carray.formats.bloscpack.frame import CHECKSUMS
from carray.layouts.superchunk import opening as superchunk_open

SOAK = os.environ.get("CARRAY_SOAK") == "1"


class TestSuperchunkLayout(PersistentLayoutConformance):
    options: dict = {"superchunksize": 4}

    def make(self, tmp_path, meta):
        return superchunk_open.create(tmp_path / "s", meta, fsync=False, **self.options)

    def reopen(self, layout, tmp_path, readonly=False):
        return superchunk_open.open_dir(tmp_path / "s", readonly=readonly, fsync=False)[0]


class TestSuperchunkBlosc1NoSpare(TestSuperchunkLayout):
    options = {"superchunksize": 3, "spare": 0, "blosc1": True, "checksum": "sha256"}


def sc_file(root, k: int = 0) -> str:
    return os.path.join(root, "data", f"sc_{k:06d}.blp")


def make_array(root, n=2000, **storage) -> ca.carray:
    storage.setdefault("superchunksize", 4)
    return ca.carray(np.arange(n, dtype="i8"), chunklen=CHUNKLEN, rootdir=root, mode="w",
                     storage=storage, fsync=False)


# -- layout behaviour ---------------------------------------------------------------------

def test_default_format_is_superchunk_and_open_detects_both(tmp_path):
    a = ca.carray(np.arange(1000), rootdir=tmp_path / "s", chunklen=100)
    b = ca.carray(np.arange(1000), rootdir=tmp_path / "b", chunklen=100, format="bcolz")
    assert a.layout == "Superchunk"
    assert os.path.exists(tmp_path / "b" / "data" / "__0.blp")
    storage = json.loads((tmp_path / "s" / "meta" / "storage").read_text())
    assert storage["format"] == "carray-superchunk" and storage["order"] == "C"
    assert storage["filters"] == ["shuffle"]
    for root in ("s", "b"):
        c = ca.open(tmp_path / root, mode="r")
        np.testing.assert_array_equal(c[:], np.arange(1000))
    assert len(os.listdir(tmp_path / "s" / "data")) == 1
    a.close()
    b.close()


def test_typed_attrs_round_trip(tmp_path):
    a = make_array(tmp_path / "a", 10)
    values = {"i": 3, "f": 23.5, "nan": float("nan"), "s": "Celsius", "b": True, "none": None,
              "lst": [1, 2.5, "x"], "tup": (1, 2), "d": {"lat": 40.1},
              "f32": np.float32(23.5), "ids": np.array([1, 3, 6, 10], dtype="i4"),
              "m": np.arange(6, dtype="f4").reshape(2, 3), "u": np.array(["ab", "c"]),
              "raw": b"\x00\x01"}
    for k, v in values.items():
        a.attrs[k] = v
    a.close()
    assert not (tmp_path / "a" / "meta" / "attrs").exists()  # they are part of each version
    back = ca.open(tmp_path / "a", mode="r").attrs.getall()
    for k, v in values.items():
        got = back[k]
        if isinstance(v, np.ndarray):
            assert got.dtype == v.dtype
            np.testing.assert_array_equal(got, v)
        elif k == "nan":
            assert np.isnan(got)
        else:
            assert got == v and type(got) is type(v), k


def test_a_rewrite_never_touches_the_published_record(tmp_path):
    walk = np.cumsum(np.random.default_rng(2).integers(-3, 4, 2000))
    a = ca.carray(walk, chunklen=CHUNKLEN, rootdir=tmp_path / "a",
                  storage={"superchunksize": 4}, fsync=False)
    path = sc_file(tmp_path / "a", 1)
    before = open(path, "rb").read()
    others = snapshot(tmp_path / "a" / "data")
    _, off, cbytes, room = open_layout(tmp_path / "a").chunk_location(6)
    a[650] = walk[650] + 1
    a.flush()
    after = open(path, "rb").read()
    # The published record of chunk 6 is untouched: the new one went elsewhere.
    assert after[off:off + room] == before[off:off + room]
    _, new_off, _, _ = open_layout(tmp_path / "a").chunk_location(6)
    assert new_off != off
    now = snapshot(tmp_path / "a" / "data")
    assert {k: v for k, v in now.items() if k != "sc_000001.blp"} == \
        {k: v for k, v in others.items() if k != "sc_000001.blp"}
    b = ca.open(tmp_path / "a", mode="r")
    assert b[650] == walk[650] + 1 and b[651] == walk[651]
    # While a reader holds the version before, its record stays.
    a[651] = 0
    a.flush()
    assert open_layout(tmp_path / "a").chunk_location(6)[1] not in (off, new_off)
    assert b[650] == walk[650] + 1 and b[651] == walk[651]
    b.close()
    # Once nothing holds them, the next edits reuse the room of records no version keeps.
    size = os.path.getsize(path)
    for i in range(4):
        a[652] = i
        a.flush()
    assert os.path.getsize(path) <= size


def test_chunk_that_outgrows_every_hole_goes_to_the_end(tmp_path):
    a = make_array(tmp_path / "a", 2000)
    a.flush()
    path = sc_file(tmp_path / "a", 0)
    size0 = os.path.getsize(path)
    noise = np.random.default_rng(0).integers(0, 2**62, 100)
    a[100:200] = noise
    a.flush()
    assert os.path.getsize(path) > size0
    layout = open_layout(tmp_path / "a")
    offs = [layout.chunk_location(i)[1] for i in range(4)]
    assert offs[1] == max(offs)
    b = ca.open(tmp_path / "a", mode="r")
    np.testing.assert_array_equal(b[100:200], noise)
    np.testing.assert_array_equal(b[200:400], np.arange(200, 400))
    assert verify_path(tmp_path / "a") == ([], 20)


@pytest.mark.parametrize("checksum", [c.name for c in CHECKSUMS])
def test_every_checksum_kind(tmp_path, checksum):
    a = make_array(tmp_path / "a", 1000, checksum=checksum)
    a.close()
    b = ca.open(tmp_path / "a", mode="r")
    np.testing.assert_array_equal(b[:], np.arange(1000))
    assert verify_path(tmp_path / "a")[0] == []
    if checksum == "None":
        return
    # Flip one byte inside chunk 0's compressed body.
    path = sc_file(tmp_path / "a")
    off = open_layout(tmp_path / "a").chunk_location(0)[1]
    buf = bytearray(open(path, "rb").read())
    buf[off + 40] ^= 0x5A
    open(path, "wb").write(bytes(buf))
    with pytest.raises(ChecksumError, match="chunk 0"):
        ca.open(tmp_path / "a", mode="r")[:100]
    # verify=False skips the digest (decoding may still fail or give other data)
    try:
        ca.carray(rootdir=tmp_path / "a", mode="r", storage={"verify": False})[:100]
    except (FormatError, CodecError):
        pass


def test_blosc1_files_are_read_by_bloscpack(tmp_path, bloscpack_peer):
    data = np.arange(2550, dtype="i8") * 3
    a = ca.carray(data[:1000], chunklen=CHUNKLEN, rootdir=tmp_path / "a",
                  storage={"superchunksize": 4, "spare": 0, "blosc1": True}, fsync=False)
    for lo in range(1000, 2550, 333):  # partial tails rewritten at every flush
        a.append(data[lo:lo + 333])
        a.flush()
    a[150] = -1  # a rewrite too
    data[150] = -1
    a.close()
    files = sorted(os.listdir(tmp_path / "a" / "data"))
    assert len(files) == 7  # one generation of each superchunk left
    got, metas = [], []
    for f in files:
        raw, meta_obj = bloscpack_peer.unpack_bytes_from_file(str(tmp_path / "a" / "data" / f))
        got.append(raw)
        metas.append(meta_obj)
    assert b"".join(got) == data.tobytes()
    assert [m["superchunk"] for m in metas] == list(range(7))


def test_readonly_refuses_writes_and_writes_nothing(tmp_path):
    make_array(tmp_path / "a", 1000).close()
    before = snapshot(tmp_path / "a")
    b = ca.open(tmp_path / "a", mode="r")
    b[:]
    with pytest.raises(ReadOnlyError):
        b[0] = 1
    ro = open_layout(tmp_path / "a")
    with pytest.raises(ReadOnlyError):
        ro.write_chunk(0, b"x" * 32)
    with pytest.raises(ReadOnlyError):
        ro.commit(meta(), 0)
    ro.close()
    b.close()
    assert snapshot(tmp_path / "a") == before


def test_shrink_removes_whole_superchunks(tmp_path):
    a = make_array(tmp_path / "a", 2000)
    a.resize(450)
    a.flush()  # a resize is a version at the next flush
    assert sorted(os.listdir(tmp_path / "a" / "data"))[-1].startswith("sc_000001")
    assert len(os.listdir(tmp_path / "a" / "data")) == 2
    a.append(np.arange(5))
    a.close()
    b = ca.open(tmp_path / "a", mode="r")
    np.testing.assert_array_equal(b[:], np.r_[np.arange(450), np.arange(5)])
    assert verify_path(tmp_path / "a")[0] == []


def test_many_rewrites_compact_the_file(tmp_path):
    a = make_array(tmp_path / "a", 400, superchunksize=4)
    rng = np.random.default_rng(3)
    for i in range(40):
        a[:] = rng.integers(0, 2**40, 400)
        a.flush()
        if i == 0:
            first = os.path.getsize(sc_file(tmp_path / "a"))
    assert os.path.getsize(sc_file(tmp_path / "a")) < 3 * first
    np.testing.assert_array_equal(ca.open(tmp_path / "a", mode="r")[:], a[:])



def test_a_generation_replaced_by_a_table_commit_goes(tmp_path):
    # A table commits inside a change that can still be undone: the records its
    # compaction replaces are freed by the commit, so the old file goes with the version.
    root = tmp_path / "t"
    words = np.array([f"w{i}" for i in range(3000)], dtype=object)
    t = ca.ctable({"s": words[:2000]}, rootdir=root, mode="w", fsync=False,
                  expectedlen=3000)
    for i in range(2000, 2020):
        t.append({"s": words[i:i + 1]})
    t.close()
    assert len(os.listdir(root / "s" / "values" / "data")) == 1
    assert list(ca.open(root, mode="r").cols["s"][:]) == list(words[:2020])



def test_a_commit_compacts_what_it_leaves_free(tmp_path):
    # One chunk rewritten by every commit: the old record is free once the commit is
    # published, so the commit itself compacts (no later commit may come), unless a
    # reader holds the version that refers to it.
    root = tmp_path / "a"
    x = np.arange(50_010, dtype="i8") % 977
    a = ca.carray(x[:50_000], chunklen=65_536, rootdir=root, mode="w", fsync=False)
    reader = ca.open(root, mode="r")
    for i in range(50_000, 50_005):
        a.append(x[i:i + 1])
        a.flush()
    np.testing.assert_array_equal(reader[:], x[:50_000])  # held: still readable
    reader.close()
    for i in range(50_005, 50_010):
        a.append(x[i:i + 1])
        a.flush()
    a.close()
    ca.carray(x, chunklen=65_536, rootdir=tmp_path / "b", mode="w", fsync=False).close()
    files = os.listdir(root / "data")
    assert len(files) == 1
    size = os.path.getsize(root / "data" / files[0])
    assert size < 1.1 * os.path.getsize(sc_file(tmp_path / "b"))
    np.testing.assert_array_equal(ca.open(root, mode="r")[:], x)



def test_a_file_a_reader_kept_goes_in_a_later_session(tmp_path):
    # The writer closes while a reader holds the version that alone refers to a file;
    # a later session that drops that version frees the file, though it never saw its
    # records replaced.
    root = tmp_path / "a"
    x = np.arange(200_000, dtype="i8") % 1013
    a = ca.carray(x, rootdir=root, mode="w", fsync=False)
    reader = ca.open(root, mode="r")
    a[:] = x[::-1]
    a.flush()
    a[:] = x
    a.close()
    assert len(os.listdir(root / "data")) == 2
    np.testing.assert_array_equal(reader[:], x)
    reader.close()
    a = ca.open(root, mode="a", fsync=False)
    a[0] = -1
    a.close()
    assert len(os.listdir(root / "data")) == 1
    x[0] = -1
    np.testing.assert_array_equal(ca.open(root, mode="r")[:], x)


# -- crashes ------------------------------------------------------------------------------

def _states() -> list[np.ndarray]:
    """The complete (committed) states the crash scenario goes through."""
    rng = np.random.default_rng(7)
    s = [np.arange(1250, dtype="i8")]
    s.append(np.r_[s[-1], np.arange(900, dtype="i8") + 10**6])          # append
    x = s[-1].copy()
    x[[5, 333, 1260]] = -7
    s.append(x)                                                          # in-place
    x = s[-1].copy()
    x[400:900] = rng.integers(0, 2**50, 500)
    s.append(x)                                                          # moves
    s.append(s[-1][:777].copy())                                         # shrink
    s.append(np.r_[s[-1], np.arange(321, dtype="i8")])                   # append again
    return s


def _scenario(root: str, report) -> None:
    states = _states()
    a = ca.carray(rootdir=root, mode="a", fsync=True)
    a.append(states[1][1250:])
    a.flush()
    report(1)
    a[5], a[333], a[1260] = -7, -7, -7
    a.flush()
    report(2)
    a[400:900] = states[3][400:900]
    a.flush()
    report(3)
    a.resize(777)
    a.flush()  # a resize is a version at the next flush
    report(4)
    a.append(states[5][777:])
    a.flush()
    report(5)


_PATCHED = ("write", "pwrite", "fsync", "replace", "rename", "link", "unlink")


def _run_child(root: str, crash_at: int | None) -> tuple[int, int, int]:
    """Fork; the child runs the scenario and dies at its crash_at-th file operation.

    Returns (exit status, last completed state, number of operations made).
    """
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        os.close(r)
        real_write, real_exit = os.write, os._exit
        count = [0]

        def patch(name):
            real = getattr(os, name)

            def wrapper(*args, **kwargs):
                count[0] += 1
                if crash_at is not None and count[0] == crash_at:
                    if name in ("write", "pwrite"):  # a torn write: half of it lands
                        buf = memoryview(args[1]).cast("B")
                        if name == "write":
                            real(args[0], buf[:len(buf) // 2])
                        else:
                            real(args[0], buf[:len(buf) // 2], args[2])
                    real_exit(17)
                return real(*args, **kwargs)
            return wrapper

        for name in _PATCHED:
            setattr(os, name, patch(name))
        try:
            _scenario(root, lambda i: real_write(w, bytes([i])))
            real_write(w, bytes([100]) + count[0].to_bytes(4, "little"))
            real_exit(0)
        except BaseException:  # noqa: BLE001
            import traceback
            traceback.print_exc()
            real_exit(3)
    os.close(w)
    got = b""
    while chunk := os.read(r, 4096):
        got += chunk
    os.close(r)
    _, status = os.waitpid(pid, 0)
    ops = 0
    if len(got) >= 5 and got[-5] == 100:
        ops = int.from_bytes(got[-4:], "little")
        got = got[:-5]
    done = list(got)
    return os.waitstatus_to_exitcode(status), (done[-1] if done else 0), ops


def _check_recovered(root: str, last_done: int) -> None:
    states = _states()
    before = snapshot(root)
    ro = ca.open(root, mode="r")[:]       # mode 'r' replays in memory only
    assert snapshot(root) == before
    a = ca.open(root, mode="a")
    got = a[:]
    a.close()
    np.testing.assert_array_equal(ro, got)
    matches = [i for i, s in enumerate(states) if len(s) == len(got) and (s == got).all()]
    assert matches, f"state after the crash is none of the committed ones (len {len(got)})"
    assert max(matches) >= last_done, f"lost committed state {last_done}"
    assert verify_path(root)[0] == []


def _fresh(tmp_path, name: str) -> str:
    root = str(tmp_path / name)
    ca.carray(_states()[0], chunklen=CHUNKLEN, rootdir=root,
              storage={"superchunksize": 4}).close()
    return root


def test_crash_at_every_file_operation(tmp_path):
    status, last, total = _run_child(_fresh(tmp_path, "dry"), None)
    assert status == 0 and last == 5 and total > 20
    _check_recovered(str(tmp_path / "dry"), 5)
    # Every operation under CARRAY_SOAK=1; every third one (and the last) in CI.
    for n in sorted({*range(1, total + 1, 1 if SOAK else 3), total}):
        root = _fresh(tmp_path, f"c{n}")
        status, last, _ = _run_child(root, n)
        assert status == 17, f"child did not crash at operation {n} (status {status})"
        _check_recovered(root, last)


def test_sigkill_at_random_moments(tmp_path):
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {os.path.dirname(__file__)!r})
        from test_superchunk import _scenario
        print("start", flush=True)
        _scenario(sys.argv[1], lambda i: print(i, flush=True))
    """)

    def start(root):
        proc = subprocess.Popen([sys.executable, "-c", script, root], stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL)
        assert proc.stdout.readline().strip() == b"start"  # imports done
        return proc

    t0 = time.perf_counter()
    proc = start(_fresh(tmp_path, "timing"))
    t1 = time.perf_counter()
    assert proc.wait() == 0
    duration = time.perf_counter() - t1
    assert t1 - t0 > 0
    rng = np.random.default_rng(11)
    for i in range(8 if SOAK else 2):
        root = _fresh(tmp_path, f"k{i}")
        proc = start(root)
        time.sleep(rng.random() * duration)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        _check_recovered_any(root)


def _check_recovered_any(root: str) -> None:
    states = _states()
    a = ca.open(root, mode="a")
    got = a[:]
    a.close()
    ok = any(len(s) == len(got) and (s == got).all() for s in states)
    assert ok, f"not a committed state (len {len(got)})"
    assert verify_path(root)[0] == []


# -- corrupt input ------------------------------------------------------------------------

def _read_all(root) -> np.ndarray:
    return ca.carray(rootdir=root, mode="r")[:]


def test_truncated_superchunk_files(tmp_path):
    make_array(tmp_path / "a", 1000).close()
    path = sc_file(tmp_path / "a", 1)
    good = open(path, "rb").read()
    expect = np.arange(1000)
    for cut in list(range(0, 400, 7)) + list(range(400, len(good), 97)):
        open(path, "wb").write(good[:cut])
        try:
            got = _read_all(tmp_path / "a")
        except (FormatError, CodecError):
            assert verify_path(tmp_path / "a")[0]
            continue
        np.testing.assert_array_equal(got, expect)  # only spare room was cut


def _regions(root) -> dict[str, tuple[str, int, int]]:
    """Where each kind of byte of a small dataset lies: (file, start, stop)."""
    layout = open_layout(root)
    file, off, cbytes, _ = layout.chunk_location(0)
    pages = -(-cbytes // layout.page_size)
    versions = root / "versions"
    mf = next(str(p) for p in sorted(versions.glob("*.mf")))
    ix = next(str(p) for p in sorted(versions.glob("*.ix")))
    start = layout.files.file((0, 0)).data_start
    layout.close()
    return {"header": (file, 0, 32), "metadata": (file, 32, start),
            "chunk": (file, off, off + cbytes), "digest": (file, off + cbytes, off + cbytes + 4),
            "pages": (file, off + cbytes + 4, off + cbytes + 4 + 4 * pages),
            "manifest": (mf, 0, os.path.getsize(mf)), "index": (ix, 0, os.path.getsize(ix))}


@pytest.mark.parametrize("region", ["header", "metadata", "chunk", "digest", "pages",
                                    "manifest", "index"])
def test_flipped_bytes(tmp_path, region):
    a = make_array(tmp_path / "a", 4000, superchunksize=16)
    a.close()
    path, lo, hi = _regions(tmp_path / "a")[region]
    good = open(path, "rb").read()
    rng = np.random.default_rng(5)
    positions = range(lo, hi) if hi - lo <= 40 else rng.choice(np.arange(lo, hi), 40,
                                                               replace=False)
    for pos in positions:
        bad = bytearray(good)
        bad[int(pos)] ^= 1 << int(rng.integers(8))
        open(path, "wb").write(bytes(bad))
        for read in (_read_all, lambda r: ca.open(r, mode="r")[0:10],
                     lambda r: np.asarray(ca.open(r, mode="r"))):
            try:
                got = read(tmp_path / "a")
            except (FormatError, CodecError):
                assert verify_path(tmp_path / "a")[0]
                continue
            # A bit that no reader depends on (reserved, padding).
            np.testing.assert_array_equal(got, np.arange(len(got)))
    open(path, "wb").write(good)


def test_metadata_size_larger_than_the_file(tmp_path):
    make_array(tmp_path / "a", 500).close()
    path = sc_file(tmp_path / "a")
    buf = bytearray(open(path, "rb").read())
    buf[32 + 16:32 + 20] = (2**32 - 1).to_bytes(4, "little")  # max_meta_size
    open(path, "wb").write(bytes(buf))
    with pytest.raises(FormatError, match="does not fit|past the end"):
        _read_all(tmp_path / "a")


def test_index_entry_past_the_end(tmp_path):
    from carray.versions.index import ENTRY, encode_page

    a = make_array(tmp_path / "a", 500)
    a.close()
    ix = next((tmp_path / "a" / "versions").glob("*.ix"))
    layout = open_layout(tmp_path / "a")
    entries = np.array([tuple(layout.index_entry(n)) for n in range(layout.nchunks)],
                       dtype=ENTRY)
    layout.close()
    entries[1]["off"] = 10**12
    ix.write_bytes(encode_page(entries))  # a well-formed page that lies
    with pytest.raises(FormatError):
        _read_all(tmp_path / "a")
    assert verify_path(tmp_path / "a")[0]


@pytest.mark.parametrize("field,value,match", [
    ("format_version", 5, "format version"), ("checksum", "crc64", "unknown checksum"),
    ("superchunksize", 0, "superchunksize")])
def test_bad_storage(tmp_path, field, value, match):
    from metafiles import read_meta, write_meta  # not at the top: children import this module

    make_array(tmp_path / "a", 500).close()
    p = tmp_path / "a" / "meta" / "storage"
    obj = read_meta(p)
    obj[field] = value
    write_meta(p, obj)
    with pytest.raises(FormatError, match=match):
        _read_all(tmp_path / "a")


def test_unknown_checksum_id_in_a_file(tmp_path):
    make_array(tmp_path / "a", 500).close()
    path = sc_file(tmp_path / "a")
    buf = bytearray(open(path, "rb").read())
    buf[6] = 42
    open(path, "wb").write(bytes(buf))
    with pytest.raises(FormatError, match="checksum id 42"):
        _read_all(tmp_path / "a")


def test_verify_reports_every_problem(tmp_path, capsys):
    make_array(tmp_path / "a", 2000).close()
    layout = open_layout(tmp_path / "a")
    for k in (0, 2, 4):
        _, off, _, _ = layout.chunk_location(k * 4 + 1)
        path = sc_file(tmp_path / "a", k)
        buf = bytearray(open(path, "rb").read())
        buf[off + 30] ^= 0xFF
        open(path, "wb").write(bytes(buf))
    layout.close()
    os.unlink(sc_file(tmp_path / "a", 3))
    assert cli_main(["verify", str(tmp_path / "a")]) == 1
    out = capsys.readouterr().out
    assert out.count("checksum mismatch") == 3
    assert sum("sc_000003.blp" in line and "missing" in line for line in out.splitlines()) == 1
    assert "4 problems;" in out and "13 chunks OK" in out


def test_verify_bcolz_directory(tmp_path, capsys):
    ca.carray(np.arange(1000), chunklen=100, rootdir=tmp_path / "b", format="bcolz").close()
    assert cli_main(["verify", str(tmp_path / "b")]) == 0
    path = tmp_path / "b" / "data" / "__3.blp"
    buf = bytearray(path.read_bytes())
    buf[12 + 16 + 3] ^= 0xFF  # the first block offset
    path.write_bytes(bytes(buf))
    (tmp_path / "b" / "data" / "__5.blp").write_bytes(b"blpk")
    assert cli_main(["verify", str(tmp_path / "b")]) == 1
    out = capsys.readouterr().out
    assert "__3.blp" in out and "__5.blp" in out


def test_journal_of_a_format_2_directory_replayed_or_discarded(tmp_path):
    import shutil

    from carray.layouts.superchunk.meta import Journal

    root = tmp_path / "a"
    shutil.copytree(os.path.join(os.path.dirname(__file__), "..", "data", "carray_v2",
                                 "a1d.carray"), root)
    sizes = json.loads((root / "meta" / "sizes").read_text())
    jpath = root / "meta" / "journal"
    # A complete journal of the next generation that shrinks the length: replayed.
    new = dict(sizes, length=300, shape=[300], nbytes=2400, generation=sizes["generation"] + 1)
    body = (json.dumps(new) + "\n").encode()
    jpath.write_bytes(Journal(sizes["generation"] + 1, (), body).encode())
    assert len(ca.open(root, mode="r")) == 300
    assert jpath.exists()  # mode 'r' does not write
    a = ca.open(root, mode="a")
    assert len(a) == 300
    assert not jpath.exists()
    a.close()
    # A torn journal left beside a directory written before versions: discarded.
    shutil.rmtree(root)
    shutil.copytree(os.path.join(os.path.dirname(__file__), "..", "data", "carray_v2",
                                 "a1d.carray"), root)
    jpath.write_bytes(Journal(sizes["generation"] + 2, (), body).encode()[:-3])
    assert len(ca.open(root, mode="a")) == 2500
    assert not jpath.exists()


def test_partial_reads_do_not_read_the_whole_superchunk(tmp_path, count_reads):
    a = ca.carray(np.arange(400_000, dtype="f8"), chunklen=50_000, rootdir=tmp_path / "a",
                  cparams=ca.CParams(clevel=1), storage={"superchunksize": 8, "blosc1": True})
    a.close()
    b = ca.open(tmp_path / "a", mode="r")
    count_reads["bytes"] = 0
    assert b[123_457] == 123_457.0
    assert count_reads["bytes"] < 200_000  # a superchunk is ~3 MB, a chunk ~400 KB
    b.close()


def test_blosc_chunk_validated(tmp_path):
    layout = superchunk_open.create(tmp_path / "s", meta(), fsync=False)
    c = chunk_of(0, layout)
    layout.write_chunk(0, c)
    h = blosc.read_header(bytes(layout.read_chunk(0)))
    assert h.nbytes == CHUNKLEN * 8


def open_layout(path):
    """The superchunk layout of the dataset at ``path``, read-only."""
    layout, _, _ = superchunk_open.open_dir(str(path), readonly=True)
    return layout
