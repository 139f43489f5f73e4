"""The versions of a dataset: manifests, index pages, tags and readers' holds.

A versioned dataset's directory holds ``versions/`` (docs/formats/superchunk.md,
"Versions"; the commit protocol: docs/spec/commit.md):

* ``NNNNNNNNNN.mf``: the manifest of version ``seq`` N (ten digits), immutable.
  Publishing a version is creating its manifest under that name, only if absent (a
  link locally; a conditional put on object stores): of two writers racing for one
  seq exactly one wins, and the loser rebases (:class:`VersionTakenError`).  The newest
  manifest present that counts is the dataset's current version.
* ``NNNNNNNNNN-TTTTTT.ix``: the index pages one commit attempt wrote (``TTTTTT`` a
  random token, so that racing writers never share a page file), immutable, kept
  while a version still refers to one of them.  Files written before tokens are
  ``NNNNNNNNNN.ix``.
* ``NNNNNNNNNN.ok``: the marker that version N's transaction committed
  (:mod:`.outcomes`).
* ``HEAD``: the seq of the newest version as last written, a hint that saves a
  listing (it may lag after a crash: the names after it are looked for).
* ``tags/NAME``: the id of the version tagged NAME, created once.

A reader *holds* the version it opened: locally a shared ``flock`` on its
manifest; a writer drops a version only after taking an exclusive one, so a
version some process on this machine reads is never reclaimed under it.  On
object stores there are no locks: a version stays readable for ``grace``
seconds after a newer one replaced it.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import re
import secrets
import socket
import time
from collections.abc import Iterator, Sequence

import numpy as np

from carray.errors import (
    ContainerNotFoundError,
    FormatError,
    LockError,
    TagExistsError,
    VersionError,
    VersionTakenError,
)
from carray.stores import Store
from carray.stores.base import storage_error
from carray.stores.local import LocalStore
from carray.versions.index import PAGEREF, PageSource, encode_page
from carray.versions.manifest import Manifest
from carray.versions.outcomes import ABORT, COMMIT, Outcomes

try:
    import fcntl
except ImportError:  # pragma: no cover - no advisory locks on this system
    fcntl = None  # type: ignore[assignment]

VERSIONS_DIR = "versions"
HEAD_FILE = "HEAD"
TAGS_DIR = "tags"
_MF = re.compile(r"(\d{10})\.mf")
_IX = re.compile(r"(\d{10})(?:-([0-9a-f]{6}))?\.ix")
_OK = re.compile(r"(\d{10})\.ok")
#: A page file's id (what page references hold in their ``seq`` field): the seq of
#: the commit that wrote it in the low bits, its token above them.
SEQ_BITS = 40
_SEQ_MASK = (1 << SEQ_BITS) - 1
_TOKENS = 1 << 23
# A name ending in ".tmp" is a tag file being written (carray.stores.files.atomic_write).
_ID = re.compile(r"[0-9a-f]{16,}")
_TAG = re.compile(r"(?!.*\.tmp$)[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127}")
#: Seconds a replaced version stays readable on object stores (no locks there).
DEFAULT_GRACE = 600.0
#: Where a writer on a store without conditional creates leaves its lease, and for how
#: long (seconds since its last commit) it keeps other processes from committing.
LEASE_FILE = "WRITER"
LEASE_SECONDS = 60.0


def new_id(seq: int) -> str:
    """A version id: its seq (8 hex digits) and 8 random ones."""
    return f"{seq:08x}{secrets.token_hex(4)}"


def seq_of(version_id: str) -> int:
    """The seq a version id names (ValueError when it is not one)."""
    if not isinstance(version_id, str) or not re.fullmatch(r"[0-9a-f]{16}", version_id):
        raise VersionError(f"{version_id!r} is not a version id (16 hex digits)")
    return int(version_id[:8], 16)


def page_file_seq(fid: int) -> int:
    """The seq of the commit that wrote page file ``fid``."""
    return int(fid) & _SEQ_MASK


def page_file_name(fid: int) -> str:
    seq, token = int(fid) & _SEQ_MASK, int(fid) >> SEQ_BITS
    return f"{seq:010d}.ix" if not token else f"{seq:010d}-{token:06x}.ix"


def check_tag(name: str) -> str:
    if not isinstance(name, str) or not _TAG.fullmatch(name):
        raise ValueError(f"tag {name!r}: use letters, digits, '_', '.', '-' (at most 128, "
                         "not starting with '.' or '-', not ending in '.tmp')")
    return name


class Hold:
    """A reader's hold on one version (see the module doc); :meth:`release` lets it go."""

    def __init__(self, fd: int | None) -> None:
        self._fd = fd

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.release()


class Repository:
    """The ``versions/`` directory of the dataset at ``root`` (see the module doc).

    Parameters
    ----------
    store : Store
        Where the dataset lives.
    root : str
        The dataset's directory.
    fsync : bool
        Make what is published durable before it is published.
    grace : float
        Seconds a replaced version stays readable on object stores.
    """

    def __init__(self, store: Store, root: str, fsync: bool = True,
                 grace: float = DEFAULT_GRACE) -> None:
        self.store = store
        self.root = root
        self.fsync = fsync
        self.grace = grace
        self.dir = store.join(root, VERSIONS_DIR)
        self.pages = PageSource(self._read_pages, lambda fid: store.url(self._ix(fid)))
        self.outcomes = Outcomes(store, root, self.dir, fsync)
        self._locks = fcntl is not None and isinstance(store, LocalStore)
        self._dir_made = False  # by this object: later commits need not ask again
        self._writer = secrets.token_hex(8)  # this handle's, in a lease (see _lease)

    # -- names ------------------------------------------------------------------------------

    def _mf(self, seq: int) -> str:
        return self.store.join(self.dir, f"{seq:010d}.mf")

    def _ix(self, fid: int) -> str:
        return self.store.join(self.dir, page_file_name(fid))

    def url(self, seq: int) -> str:
        return self.store.url(self._mf(seq))

    @staticmethod
    def exists_at(store: Store, root: str) -> bool:
        """Whether ``root`` holds published versions (the HEAD hint's, when it is right:
        listing thousands of versions costs more than the rest of an open)."""
        return Repository(store, root).latest_seq() is not None

    # -- reading ----------------------------------------------------------------------------

    def seqs(self) -> list[int]:
        """Seqs of every published version, ascending."""
        self.store.invalidate(self.dir)
        return sorted(int(m.group(1)) for n in self.store.listdir(self.dir)
                      if (m := _MF.fullmatch(n)))

    def latest_seq(self) -> int | None:
        """The newest published version's seq (None: none), from the HEAD hint when it is
        right, else by listing."""
        store = self.store
        store.invalidate(self.dir)  # a listing cached earlier misses newer versions
        seq: int | None = None
        with contextlib.suppress(FileNotFoundError, ValueError, UnicodeDecodeError):
            seq = int(store.get(store.join(self.dir, HEAD_FILE)).decode("ascii").strip())
        if seq is None or seq < 0 or not store.isfile(self._mf(seq)):
            found = self.seqs()
            if not found:
                return None
            seq = found[-1]
        while store.isfile(self._mf(seq + 1)):
            seq += 1
        return seq

    def load(self, seq: int) -> Manifest:
        """The manifest of version ``seq`` (VersionError when it is gone)."""
        try:
            data = self.store.get(self._mf(seq))
        except FileNotFoundError:
            raise VersionError(f"{self.url(seq)}: version {seq} is not kept") from None
        manifest = Manifest.decode(data, self.url(seq))
        if manifest.seq != seq:
            raise FormatError(f"manifest names seq {manifest.seq}", self.url(seq))
        return manifest

    def committed(self, manifest: Manifest) -> bool:
        """Whether ``manifest`` counts: always, unless a transaction over several datasets
        published it and did not commit (yet: see :mod:`.outcomes`)."""
        return self.outcomes.outcome(manifest) == COMMIT

    def latest(self) -> Manifest:
        """The newest committed version."""
        seq = self.latest_seq()
        while seq is not None and seq >= 0:
            with contextlib.suppress(VersionError):
                manifest = self.load(seq)
                if self.committed(manifest):
                    return manifest
            seq -= 1
        raise ContainerNotFoundError(f"{self.store.url(self.root)}: no version published")

    def find(self, version: str | None = None, tag: str | None = None,
             as_of: _dt.datetime | None = None) -> Manifest:
        """The version asked for: by id, by tag, the newest made at or before ``as_of``,
        or the newest."""
        if tag is not None:
            version = self.tag_target(tag)
        if version is not None:
            try:
                manifest = self.load(seq_of(version))
            except VersionError:
                manifest = None
            if manifest is None or manifest.id != version or not self.committed(manifest):
                raise VersionError(f"{self.store.url(self.root)}: version {version} is not "
                                   "kept (see versions(); tag a version to keep it)")
            return manifest
        if as_of is not None:
            return self._as_of(as_of)
        return self.latest()

    def _as_of(self, as_of: _dt.datetime) -> Manifest:
        """The newest version made at or before ``as_of``: versions' times never go back
        (see :meth:`VersionedDataset.publish`), so a binary search over the kept ones
        finds it, loading a few manifests of thousands."""
        when = _aware(as_of)
        seqs = self.seqs()
        lo, hi = 0, len(seqs)  # the answer is among seqs[:hi], at or after seqs[lo - 1]
        while lo < hi:
            mid = (lo + hi) // 2
            try:
                made = made_at(self.load(seqs[mid]))
            except VersionError:  # dropped meanwhile: look below it
                hi = mid
                continue
            if made <= when:
                lo = mid + 1
            else:
                hi = mid
        for seq in reversed(seqs[:lo]):
            with contextlib.suppress(VersionError):
                manifest = self.load(seq)
                if made_at(manifest) <= when and self.committed(manifest):
                    return manifest
        raise VersionError(f"{self.store.url(self.root)}: no version kept made at or "
                           f"before {as_of.isoformat()}")

    def hold(self, manifest: Manifest) -> Hold | None:
        """Hold ``manifest``'s version for a reader; None when it was dropped meanwhile
        (find the version again).  Object stores hold nothing (see ``grace``)."""
        if not self._locks:
            return Hold(None)
        try:
            fd = os.open(self._mf(manifest.seq), os.O_RDONLY)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise storage_error(exc, self._mf(manifest.seq)) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            if os.fstat(fd).st_nlink == 0:  # dropped between our open and our lock
                raise BlockingIOError
        except BlockingIOError:
            os.close(fd)
            return None
        return Hold(fd)

    def open_version(self, version: str | None = None, tag: str | None = None,
                     as_of: _dt.datetime | None = None) -> tuple[Manifest, Hold]:
        """:meth:`find` a version and hold it (trying again when the newest changed)."""
        for _ in range(100):
            manifest = self.find(version, tag, as_of)
            hold = self.hold(manifest)
            if hold is not None:
                return manifest, hold
            if version is not None or tag is not None:
                raise VersionError(f"{self.url(manifest.seq)}: version {manifest.id} is "
                                   "being dropped")
        raise VersionError(f"{self.store.url(self.root)}: versions keep being dropped "
                           "under the reader")

    def _read_pages(self, fid: int, offset: int, length: int) -> bytes:
        try:
            # One ranged read: no request for the file's size first (object stores).
            return self.store.get_ranges([(self._ix(fid), offset, length)])[0]
        except FileNotFoundError:
            raise FormatError("index page file is missing", self.store.url(self._ix(fid))
                              ) from None

    # -- tags -------------------------------------------------------------------------------

    def _tag_path(self, name: str) -> str:
        return self.store.join(self.dir, TAGS_DIR, check_tag(name))

    def tag_names(self) -> list[str]:
        """The names of the tags (their files may be damaged: :meth:`tag_target` says)."""
        return [n for n in self.store.listdir(self.store.join(self.dir, TAGS_DIR))
                if _TAG.fullmatch(n)]

    def tags(self) -> dict[str, str]:
        """Tag name -> version id (a tag whose file is damaged is left out)."""
        out = {}
        for name in self.tag_names():
            with contextlib.suppress(FileNotFoundError, VersionError, FormatError):
                out[name] = self.tag_target(name)
        return out

    def tag_target(self, name: str) -> str:
        """The id of the version tagged ``name`` (FormatError: a damaged tag file)."""
        key = self._tag_path(name)
        try:
            text = self.store.get(key).decode("ascii").strip()
        except FileNotFoundError:
            raise VersionError(f"{self.store.url(self.root)}: no tag {name!r}") from None
        except UnicodeDecodeError:
            text = ""
        if not _ID.fullmatch(text):
            raise FormatError("a tag file holds one version id (hex digits)",
                              self.store.url(key))
        return text

    def set_tag(self, name: str, version_id: str, move: bool = False) -> None:
        """Name version ``version_id`` ``name``: created once (TagExistsError when the tag
        names another version), replaced only with ``move``."""
        store, path = self.store, self._tag_path(name)
        store.makedirs(store.join(self.dir, TAGS_DIR))
        data = (version_id + "\n").encode("ascii")
        if move:
            store.put(path, data, fsync=self.fsync)
        elif not store.put_if_absent(path, data, fsync=self.fsync):
            held = self.tag_target(name)
            if held != version_id:
                raise TagExistsError(f"{store.url(self.root)}: tag {name!r} names version "
                                     f"{held} already (tags do not move: untag it first, "
                                     "or pass move=True)")
        if self.fsync:
            store.sync_dir(store.join(self.dir, TAGS_DIR))

    def delete_tag(self, name: str) -> None:
        try:
            self.store.delete(self._tag_path(name))
        except FileNotFoundError:
            raise VersionError(f"{self.store.url(self.root)}: no tag {name!r}") from None

    # -- writing ----------------------------------------------------------------------------

    def write_pages(self, seq: int, pages: Sequence[np.ndarray]) -> np.ndarray:
        """Store ``pages`` (entry arrays) in commit ``seq``'s page file; returns their
        :data:`PAGEREF` records, in order."""
        refs = np.zeros(len(pages), dtype=PAGEREF)
        if not pages:
            return refs
        blobs, spans, pos = [], [], 0
        for entries in pages:
            blob = encode_page(entries)
            spans.append((pos, len(blob)))
            blobs.append(blob)
            pos += len(blob)
        self._make_dir()
        for _ in range(8):  # a token taken already: another writer's (1 in 8 million)
            fid = seq | (secrets.randbelow(_TOKENS - 1) + 1) << SEQ_BITS
            if self.store.put_if_absent(self._ix(fid), blobs, fsync=self.fsync):
                break
        else:
            raise VersionError(f"{self.store.url(self.dir)}: no free page file name for "
                               f"commit {seq}")
        for i, (off, n) in enumerate(spans):
            refs[i] = (fid, off, n)
        for ref, entries in zip(refs, pages, strict=True):
            self.pages.remember(ref, entries)
        return refs

    def _make_dir(self) -> None:
        if not self._dir_made:
            self.store.makedirs(self.dir)
            self._dir_made = True

    def sync_published(self, seq: int) -> None:
        """Make version ``seq`` durable after it was published with ``fsync`` off: its
        manifest and the directory naming it (it has no index pages of its own)."""
        self.store.sync_file(self._mf(seq))
        self.store.sync_dir(self.dir)

    def publish(self, manifest: Manifest) -> None:
        """Make ``manifest`` the newest version (the commit point): its manifest created
        only if its seq is free (:class:`VersionTakenError` otherwise); its pages must be written
        already."""
        store = self.store
        self._make_dir()
        if not store.conditional:
            self._lease()
        try:
            created = store.put_if_absent(self._mf(manifest.seq), manifest.encode(),
                                          fsync=self.fsync)
        except OSError:
            if not self.holds(manifest):  # a lost answer to a put that took effect: ours
                raise
            created = True
        if not created:
            found = self._found(manifest.seq)
            if found is None or found.id != manifest.id:
                raise VersionTakenError(store.url(self.root), manifest.seq, found)
        if self.fsync:
            store.sync_dir(self.dir)
        # A hint only: a lost or stale HEAD is corrected by looking for newer names.
        with contextlib.suppress(OSError):
            store.overwrite(store.join(self.dir, HEAD_FILE),
                            f"{manifest.seq:020d}\n".encode("ascii"))

    def _lease(self) -> None:
        """On a store that cannot create an object only if absent, two processes' commits
        could both take one seq: a writer leaves its lease (``versions/WRITER``: who,
        when) and refuses to commit while another writer's is younger than
        :data:`LEASE_SECONDS`."""
        path = self.store.join(self.dir, LEASE_FILE)
        with contextlib.suppress(FileNotFoundError, ValueError, UnicodeDecodeError):
            held = json.loads(self.store.get(path))
            if isinstance(held, dict) and held.get("writer") != self._writer and \
                    isinstance(held.get("time"), (int, float)) and \
                    _now() - held["time"] < LEASE_SECONDS:
                raise LockError(
                    f"{self.store.url(self.root)}: this store cannot create an object only "
                    "if absent, so one process at a time may write it; process "
                    f"{held.get('pid')} on {held.get('host')} committed "
                    f"{_now() - held['time']:.0f} s ago")
        lease = {"writer": self._writer, "pid": os.getpid(), "host": socket.gethostname(),
                 "time": _now()}
        self.store.put(path, json.dumps(lease).encode(), fsync=False)

    def release_lease(self) -> None:
        """A writer closing lets its lease go (see :meth:`_lease`)."""
        if self.store.conditional:
            return
        path = self.store.join(self.dir, LEASE_FILE)
        with contextlib.suppress(FileNotFoundError, ValueError, UnicodeDecodeError):
            held = json.loads(self.store.get(path))
            if isinstance(held, dict) and held.get("writer") == self._writer:
                self.store.delete(path)

    def holds(self, manifest: Manifest) -> bool:
        """Whether ``manifest`` is published (after a publish that raised)."""
        found = self._found(manifest.seq)
        return found is not None and found.id == manifest.id

    def _found(self, seq: int) -> Manifest | None:
        try:
            return self.load(seq)
        except (OSError, FormatError, VersionError):
            return None

    def has_version(self, seq: int) -> bool:
        """Whether a manifest of seq ``seq`` exists (counting or not)."""
        return self.store.isfile(self._mf(seq))

    def drop(self, seq: int, superseded: float) -> bool:
        """Delete version ``seq``'s manifest unless a reader holds it (or, on object
        stores, it was replaced less than ``grace`` seconds ago); True when dropped."""
        path = self._mf(seq)
        if not self._locks:
            if self.store.remote and _now() - superseded < self.grace:
                return False
            with contextlib.suppress(FileNotFoundError):
                self.store.delete(path)
            self.outcomes.delete_marker(seq)
            return True
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            return True
        except OSError as exc:
            raise storage_error(exc, path) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.unlink(path)
        except (BlockingIOError, FileNotFoundError) as exc:
            return isinstance(exc, FileNotFoundError)
        except OSError as exc:
            raise storage_error(exc, path) from None
        finally:
            os.close(fd)
        self.outcomes.delete_marker(seq)  # after the manifest: a marker alone means nothing
        return True

    def page_files(self) -> list[int]:
        """Ids of every page file present."""
        out = []
        for name in self.store.listdir(self.dir):
            m = _IX.fullmatch(name)
            if m:
                out.append(int(m.group(1)) | int(m.group(2) or "0", 16) << SEQ_BITS)
        return sorted(out)

    def delete_page_file(self, fid: int) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.store.delete(self._ix(fid))

    def decide(self, manifest: Manifest, owner_gone: bool) -> str | None:
        """The outcome of ``manifest``'s version, deciding an undecided transaction as
        aborted when its owner cannot finish it any more (``owner_gone``); roll a
        commit forward into this dataset."""
        found = self.outcomes.outcome(manifest)
        if found is None and owner_gone:
            found = self.outcomes.record_of(manifest).claim(ABORT, fsync=self.fsync)
            self.outcomes.forget(manifest.seq)
        if found == COMMIT:
            self.outcomes.roll_forward(manifest)
        return found

    def drop_aborted(self, manifest: Manifest) -> None:
        """Delete the manifest of a version whose transaction aborted (it never counts;
        its seq is free again)."""
        with contextlib.suppress(FileNotFoundError):
            self.store.delete(self._mf(manifest.seq))
        self.outcomes.forget(manifest.seq)

    def remove_leftovers(self, latest: int | None, owner_gone: bool = True) -> None:
        """A writer's tidying at open: decide the transactions that published versions
        past the newest committed one (``owner_gone``: no process can still be finishing
        them, as locally the writer holds the lock every writer takes), roll committed
        ones forward, and delete what interrupted commits left: temporary files, page
        files and manifests newer than the newest version that counts.  Where owners may
        still be at work (object stores), only what is decided goes."""
        newest = latest
        if latest is not None:  # the newest that counts keeps its outcome itself first
            with contextlib.suppress(VersionError, FormatError):
                self.decide(self.load(latest), owner_gone)
        for seq in [s for s in self.seqs() if latest is None or s > latest]:
            with contextlib.suppress(VersionError, FormatError):
                manifest = self.load(seq)
                outcome = self.decide(manifest, owner_gone)
                if outcome == COMMIT:
                    newest = seq if newest is None else max(newest, seq)
                elif outcome == ABORT:
                    self.drop_aborted(manifest)
        if not owner_gone:
            return
        for name in self.store.listdir(self.dir):
            m = _IX.fullmatch(name) or _MF.fullmatch(name) or _OK.fullmatch(name)
            if name.endswith(".tmp") or (m and (newest is None or int(m.group(1)) > newest)):
                with contextlib.suppress(FileNotFoundError):
                    self.store.delete(self.store.join(self.dir, name))
        tags = self.store.join(self.dir, TAGS_DIR)
        for name in self.store.listdir(tags):
            if name.endswith(".tmp"):  # a tag being written when the writer died
                with contextlib.suppress(FileNotFoundError):
                    self.store.delete(self.store.join(tags, name))


def kept_seqs(manifests: Sequence[Manifest], tags: dict[str, str], keep_last: int | None,
              older_than: float | None = None) -> set[int]:
    """Seqs a retention policy keeps: the newest always, the tagged ones, the newest
    ``keep_last`` (None: all), minus those made before ``older_than``."""
    if not manifests:
        return set()
    ordered = sorted(manifests, key=lambda m: m.seq)
    kept = {m.seq for m in ordered} if keep_last is None else \
        {m.seq for m in ordered[-max(keep_last, 1):]}
    if older_than is not None:
        kept = {s for s in kept if next(m for m in ordered if m.seq == s).time >= older_than}
    by_id = {m.id: m.seq for m in ordered}
    kept |= {by_id[v] for v in tags.values() if v in by_id}
    kept.add(ordered[-1].seq)
    return kept


def _now() -> float:
    return time.time()


def _aware(when: _dt.datetime) -> _dt.datetime:
    # A naive datetime is local time, as numpy and pandas read it.
    return when.astimezone() if when.tzinfo is None else when


def made_at(manifest: Manifest) -> _dt.datetime:
    """When ``manifest``'s version was made, to the microsecond (as ``versions()`` says
    it: the same time given back as ``as_of`` finds that version)."""
    return _dt.datetime.fromtimestamp(manifest.time, _dt.UTC)


def versions_iter(repo: Repository) -> Iterator[Manifest]:
    """Every published version, newest first (those dropped meanwhile skipped)."""
    for seq in reversed(repo.seqs()):
        with contextlib.suppress(VersionError):
            yield repo.load(seq)


__all__ = ["DEFAULT_GRACE", "SEQ_BITS", "Hold", "Repository", "check_tag",
           "kept_seqs", "new_id", "page_file_name", "page_file_seq", "seq_of",
           "versions_iter"]
