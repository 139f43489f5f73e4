"""One versioned dataset as a writer or reader holds it: its newest version, the
members (arrays) attached to it, commits and what they reclaim.

Each member (a superchunk layout: the dataset itself, a table's column) keeps its
own working index; a commit asks every changed member to make its chunks durable
and hand over the index pages it changed (:meth:`Member.stage`), writes those pages
in one file, then publishes one manifest naming every member's pages: arrays and
tables alike change in one atomic step.  Within :meth:`VersionedDataset.transaction`
the members' commits are staged and published once, at its end.

After publishing, versions no retention rule keeps (and no reader holds) are
dropped, and each member frees the records only they referred to.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from carray.errors import (
    ContainerNotFoundError,
    NewerVersionError,
    ReadOnlyError,
    VersionError,
    VersionTakenError,
)
from carray.stores.lock import DEFAULT_TIMEOUT
from carray.versions.index import PAGEREF, npages
from carray.versions.manifest import Manifest, MemberState
from carray.versions.outcomes import ABORT, COMMIT
from carray.versions.repo import (
    Hold,
    Repository,
    check_tag,
    kept_seqs,
    made_at,
    new_id,
    page_file_seq,
)

#: Times a seq may be found taken by versions that then abort, before giving up.
_MAX_SETTLES = 100
#: Seconds a writer on an object store waits for another writer's unfinished
#: transaction before deciding it aborted (its owner is taken to be gone): the stores'
#: ``lock_timeout``.
DEFAULT_DECIDE_AFTER = DEFAULT_TIMEOUT


@dataclass
class Staged:
    """What a member hands a commit: its sizes, attributes, and the index pages it
    changed since ``base_pages`` (the page references its working index started from).
    ``durable()``, when given, waits until the chunks it names are durable (raising
    what failed): the manifest is published only after it returns, so the member's
    data syncs overlap the writing of the version's index pages."""

    name: str
    path: str
    shape: tuple[int, ...]
    nbytes: int
    cbytes: int
    nchunks: int
    pages: dict[int, np.ndarray]
    base_pages: np.ndarray
    attrs: Any = field(default_factory=dict)
    durable: Callable[[], None] | None = None
    #: The page numbers ``base_pages`` refer to (None: one per page from the first).
    base_numbers: np.ndarray | None = None
    #: Pages whose chunks now all hold the fill value: no reference for them.
    filled: frozenset[int] = frozenset()


def page_table(st: Staged, refs: Iterator[Any]) -> tuple[np.ndarray, np.ndarray | None]:
    """The page references of a staged member after its commit (``refs`` gives those of
    its stored pages, in order), and their page numbers when not one per page (a
    sparse table: the pages missing hold only fill entries)."""
    top = npages(st.nchunks)
    old = np.arange(len(st.base_pages), dtype=np.int64) if st.base_numbers is None \
        else np.asarray(st.base_numbers, np.int64)
    keep = old < top
    replaced = sorted(st.filled | set(st.pages))
    if replaced:
        keep &= ~np.isin(old, replaced)
    new = np.asarray(list(st.pages), np.int64)
    base = np.asarray(st.base_pages) if len(st.base_pages) else np.zeros(0, PAGEREF)
    table = np.concatenate([base[keep],
                            np.array([next(refs) for _ in new], dtype=PAGEREF)])
    numbers = np.concatenate([old[keep], new])
    order = np.argsort(numbers, kind="stable")
    table, numbers = table[order], numbers[order]
    return table, None if len(numbers) == top else numbers


@dataclass(frozen=True)
class Membership:
    """Where an array lives in a dataset of several (a table's column): the dataset,
    the member's name, and its directory relative to the dataset's root."""

    dataset: VersionedDataset
    name: str

    @property
    def path(self) -> str:
        return self.name


class Member(Protocol):
    """An array attached to a :class:`VersionedDataset`."""

    member_name: str

    def stage(self) -> Staged | None:
        """Make the chunks written since the last commit durable and return what to
        publish; None when nothing changed."""

    def published(self, state: MemberState, seq: int) -> None:
        """``state`` (from :meth:`stage`) is now the member's committed state."""

    def reclaim(self, remaining: Sequence[tuple[int, MemberState]],
                dropped: Sequence[int] = ()) -> None:
        """Versions not in ``remaining`` (``(seq, state)``, oldest first) were dropped
        (``dropped``: the seqs this reclaim dropped): free what only they referred to."""


@dataclass(frozen=True)
class VersionInfo:
    """A kept version, as :meth:`carray.carray.versions` lists it."""

    id: str
    time: _dt.datetime
    message: str | None
    tags: tuple[str, ...]
    shape: tuple[int, ...]
    nbytes: int
    cbytes: int
    kind: str = "commit"


def retention_of(setting: Any) -> int | None:
    """``storage={"versions": N | "all"}`` as a number of commits kept (None: all)."""
    if setting is None:
        return 1
    if setting == "all":
        return None
    if isinstance(setting, int) and not isinstance(setting, bool) and setting >= 1:
        return setting
    raise ValueError(f"versions must be a count >= 1 or 'all', got {setting!r}")


class VersionedDataset:
    """See the module doc.

    Parameters
    ----------
    repo : Repository
        The dataset's ``versions/``.
    readonly : bool
        A reader: holds ``head`` (never changes it).
    head : Manifest or None
        The version opened (None: a new dataset, nothing published yet).
    hold : Hold, optional
        A reader's hold on ``head``.
    keep : int or None
        Commits kept besides tagged and held versions (None: all).
    """

    def __init__(self, repo: Repository, readonly: bool, head: Manifest | None,
                 hold: Hold | None = None, keep: int | None = 1,
                 pinned: bool = False) -> None:
        self.repo = repo
        self.readonly = readonly
        self.head = head
        self.pinned = pinned  # opened at a version asked for, not the newest
        self._hold = hold
        self.keep = keep
        self.decide_after = DEFAULT_DECIDE_AFTER
        self._reclaimed_at = time.monotonic()  # (see _reclaim_due)
        self.meta: Any = dict(head.meta) if head is not None else {}
        self._members: dict[str, Member] = {}
        self._depth = 0
        self._staged: dict[str, Staged] = {}
        self._pending_message: str | None = None
        self._known: dict[int, Manifest] = {}
        self._dropped_members: set[str] = set()
        #: A container owns the members (a table): a member's own commit only stages it,
        #: and every version is published by the container's commit, ``owner(message)``,
        #: which stages every member first (so no version holds half a change).
        self.owner: Callable[[str | None], None] | None = None
        #: The dataset is a member of a group: each version it publishes is published by
        #: the group's commit, ``coordinator(dataset, message, kind, force)``, under the
        #: group's transaction record, with a group version naming it.
        self.coordinator: Callable[[VersionedDataset, str | None, str, bool],
                                   str | None] | None = None
        self._committing = False
        #: Why this handle cannot commit any more (a failed transaction over datasets).
        self.broken: str | None = None
        #: Called with the versions kept after each reclaim (a table deletes the
        #: directories of dropped columns none of them refers to).
        self.on_reclaim: Callable[[list[Manifest]], None] | None = None

    # -- members --------------------------------------------------------------------------

    def attach(self, member: Member) -> None:
        self._members[member.member_name] = member

    def detach(self, name: str, member: Member | None = None) -> None:
        """Forget member ``name`` (only if it is ``member``, when given: a handle closed
        late, by the garbage collector, must not take its successor's place away)."""
        if member is None or self._members.get(name) is member:
            self._members.pop(name, None)

    def state(self, name: str) -> MemberState | None:
        """Member ``name`` in the version held (None: not in it)."""
        if self.head is None:
            return None
        with contextlib.suppress(KeyError):
            return self.head.member(name)
        return None

    @property
    def member_names(self) -> list[str]:
        return [] if self.head is None else [m.name for m in self.head.members]

    def drop_member(self, name: str) -> None:
        """Leave member ``name`` out of the next version."""
        self.check_writable()
        self._members.pop(name, None)
        self._staged.pop(name, None)
        self._dropped_members.add(name)

    # -- committing -----------------------------------------------------------------------

    def check_writable(self) -> None:
        if self.broken:
            raise ReadOnlyError(f"{self.repo.store.url(self.repo.root)}: {self.broken}")
        if self.readonly:
            where = self.repo.store.url(self.repo.root)
            what = f"version {self.head.id}" if self.pinned and self.head else "mode 'r'"
            raise ReadOnlyError(f"{where}: opened read-only ({what}); open the newest version "
                                "with mode='a' to change it")

    @contextlib.contextmanager
    def transaction(self, message: str | None = None) -> Iterator[None]:
        """Members' commits inside are published together, once, at the end (nothing
        is published when the block raises)."""
        self.check_writable()
        self._depth += 1
        if message is not None:
            self._pending_message = message
        try:
            yield
        except BaseException:
            self._depth -= 1
            if not self._depth:
                self._staged.clear()
                self._pending_message = None
            raise
        self._depth -= 1
        if not self._depth:
            self.publish()

    @property
    def in_transaction(self) -> bool:
        return self._depth > 0

    def commit(self, member: Member | None = None, message: str | None = None,
               kind: str = "commit", force: bool = False) -> str | None:
        """Stage ``member`` (or every attached member) and, outside a transaction,
        publish; returns the id of the newest version."""
        self.check_writable()
        for m in [member] if member is not None else list(self._members.values()):
            staged = m.stage()
            if staged is not None:
                self._staged[m.member_name] = staged
            else:  # nothing to publish now (what was staged before was undone)
                self._staged.pop(m.member_name, None)
        if message is not None:
            self._pending_message = message
        if self._depth or (self.owner is not None and member is not None):
            # Inside a transaction, or a member of an owned dataset (a table's column):
            # the owner's commit publishes every member together.
            return None
        return self.publish(kind=kind, force=force)

    @contextlib.contextmanager
    def committing(self, message: str | None = None) -> Iterator[None]:
        """The owner's commit: members' commits inside are staged, and published together
        at the end (see :attr:`owner`)."""
        self.check_writable()
        was, self._committing = self._committing, True
        if not self._depth:
            self._staged.clear()  # every member is staged again by the owner
        try:
            with self.transaction(message):
                yield
        finally:
            self._committing = was

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """Members' commits inside are staged and not published: the caller publishes
        (a transaction over several datasets); staged changes go when the block raises."""
        self.check_writable()
        self._depth += 1
        try:
            yield
        except BaseException:
            self._staged.clear()
            self._pending_message = None
            raise
        finally:
            self._depth -= 1

    def publish(self, kind: str = "commit", force: bool = False, txn: str | None = None,
                reclaim: bool = True, message: str | None = None) -> str | None:
        """Publish what is staged as a new version (nothing staged and nothing else
        changed: no new version, unless ``force``); returns the newest version's id.

        ``txn``: the record of a transaction over several datasets that decides whether
        this version counts (it then reclaims nothing: see :mod:`.transaction`)."""
        self.check_writable()
        if self.owner is not None and not self._committing and txn is None:
            self._staged.clear()  # the owner stages every member again
            self.owner(message or self._pending_message)
            return self.head.id if self.head is not None else None
        if self.coordinator is not None and txn is None:
            return self.coordinator(self, message or self._pending_message, kind, force)
        staged, self._staged = self._staged, {}
        message, self._pending_message = message or self._pending_message, None
        head = self.head
        meta_changed = head is None or self.meta != head.meta or self._dropped_members
        if not staged and not meta_changed and not force:
            return head.id if head is not None else None
        seq = head.seq + 1 if head is not None else 0
        order = [(name, st.pages) for name, st in staged.items()]
        blobs = [page for _, pages in order for page in pages.values()]
        refs = iter(self.repo.write_pages(seq, blobs))
        states: dict[str, MemberState] = {}
        for name, st in staged.items():
            table, numbers = page_table(st, refs)
            states[name] = MemberState(name, st.path, st.shape, st.nbytes, st.cbytes,
                                       st.nchunks, table, st.attrs, numbers)
        members = [states.pop(m.name, m) for m in (head.members if head else ())
                   if m.name not in self._dropped_members]
        members += list(states.values())
        manifest = Manifest(new_id(seq), seq, head.id if head else None, self._now(),
                            message, tuple(members), kind=kind, meta=self.meta,
                            retention={"keep_last": self.keep}, txn=txn)
        failure = None
        try:
            for st in staged.values():
                if st.durable is not None:
                    st.durable()
            self._publish_manifest(manifest)
        except BaseException as exc:  # published or not: the disk says
            if isinstance(exc, NewerVersionError) or not self.repo.holds(manifest):
                self._staged = staged  # still to publish (rebased, or retried)
                self._pending_message = message
                raise
            failure = exc  # published (a later step failed): finish, then report it
        self.head = manifest
        self._known[seq] = manifest
        self._dropped_members.clear()
        for name in staged:
            member = self._members.get(name)
            if member is not None:
                member.published(manifest.member(name), seq)
        if reclaim and self._reclaim_due():
            with contextlib.suppress(OSError):
                self.reclaim(scan=False)
        if failure is not None:
            raise failure
        return manifest.id

    def _publish_manifest(self, manifest: Manifest) -> None:
        """Publish ``manifest`` at its seq; when another version holds it already, wait
        for that version's transaction to be decided (or decide it, see
        :meth:`_settle_taken`): aborted, the seq is free again; committed,
        :class:`NewerVersionError` tells the caller to rebase onto it."""
        for _ in range(_MAX_SETTLES):
            try:
                self.repo.publish(manifest)
                return
            except VersionTakenError as taken:
                newer = self._settle_taken(manifest.seq, taken.taker)
                if newer is not None:
                    raise NewerVersionError(self.repo.store.url(self.repo.root), newer) from None
        raise VersionError(f"{self.repo.store.url(self.repo.root)}: version "
                           f"{manifest.seq} keeps being taken and given up")

    def _settle_taken(self, seq: int, taker: Manifest | None = None) -> Manifest | None:
        """The newest committed version once the version at ``seq`` (another writer's) is
        decided; None when it aborted (its seq is free again).  An undecided one is
        waited for, and decided as aborted when its owner cannot be at work any more:
        at once where writers hold the lock every writer takes (local), else after
        :attr:`decide_after` seconds without a decision."""
        first_seen = time.monotonic()
        delay = 0.005
        while True:
            if taker is None:
                try:
                    taker = self.repo.load(seq)
                except VersionError:
                    return None  # dropped meanwhile: an aborted one its writer cleared
            gone = not self.repo.store.remote or \
                time.monotonic() - first_seen >= self.decide_after
            outcome = self.repo.decide(taker, owner_gone=gone)
            if outcome == ABORT:
                self.repo.drop_aborted(taker)
                return None
            if outcome == COMMIT:
                # Usually the newest: one look for a later one saves finding it again.
                return taker if not self.repo.has_version(seq + 1) else self.repo.latest()
            taker = None  # undecided: read it again after a while
            time.sleep(delay)
            delay = min(delay * 2, 0.25)

    def reset_head(self) -> None:
        """Forget what is staged and go back to the newest version that counts (after a
        transaction that published this dataset aborted)."""
        self.abandon()
        if not self.readonly:
            head = None
            with contextlib.suppress(ContainerNotFoundError):
                head = self.repo.latest()
            self.head = head
            self.meta = dict(head.meta) if head is not None and \
                isinstance(head.meta, dict) else {}

    def adopt_newer(self, newer: Manifest) -> None:
        """Take ``newer`` (a version another writer published) as the version this writer
        works on: its changes, rebased by its container, go on top of it (and are staged
        again by it)."""
        self.head = newer
        self._known[newer.seq] = newer
        self._staged.clear()

    def _reclaim_due(self) -> bool:
        """Whether a commit reclaims now: always locally; on object stores, where a
        replaced version stays ``grace`` seconds and reclaiming lists the versions,
        once in a quarter of that (and at close)."""
        if not self.repo.store.remote:
            return True
        now = time.monotonic()
        if now - self._reclaimed_at < self.repo.grace / 4:
            return False
        self._reclaimed_at = now
        return True

    def _now(self) -> float:
        """A new version's time: never before its parent's (``as_of`` searches by time),
        whatever the clock did."""
        now = time.time()
        return now if self.head is None else max(now, self.head.time)

    def abandon(self) -> None:
        """Forget what was staged or described for the next version (its publish failed:
        the owner reloads its members from the newest version)."""
        self._staged.clear()
        self._dropped_members.clear()
        self._pending_message = None
        self.meta = dict(self.head.meta) if self.head is not None and \
            isinstance(self.head.meta, dict) else {}

    def take_staged(self) -> bool:
        """Whether anything is staged or changed for the next version."""
        head = self.head
        return bool(self._staged) or head is None or self.meta != head.meta or \
            bool(self._dropped_members)

    def publish_version(self, old: Manifest, message: str | None = None) -> str:
        """Publish ``old``'s members and description again, as the newest version (a
        restore).  Attached members do not follow: their owner reopens them."""
        self.check_writable()
        assert self.head is not None
        seq = self.head.seq + 1
        manifest = Manifest(new_id(seq), seq, self.head.id, self._now(), message, old.members,
                            kind="restore", meta=old.meta, retention={"keep_last": self.keep})
        self.repo.publish(manifest)
        self.head, self._known[seq] = manifest, manifest
        self.meta = dict(old.meta) if isinstance(old.meta, dict) else {}
        with contextlib.suppress(OSError):
            self.reclaim()
        return manifest.id

    # -- history ---------------------------------------------------------------------------

    def manifests(self) -> list[Manifest]:
        """Every committed version, oldest first (loaded once, then remembered)."""
        out = []
        for seq in self.repo.seqs():
            found = self._known.get(seq)
            if found is None:
                with contextlib.suppress(VersionError):
                    found = self._known[seq] = self.repo.load(seq)
            if found is not None and self.repo.committed(found):
                out.append(found)
        return out

    def versions(self) -> list[VersionInfo]:
        """Kept versions, newest first."""
        tags: dict[str, list[str]] = {}
        for name, vid in self.repo.tags().items():
            tags.setdefault(vid, []).append(name)
        out = []
        for m in reversed(self.manifests()):
            shape, nbytes, cbytes = _sizes(m)
            out.append(VersionInfo(m.id, made_at(m),
                                   m.message, tuple(sorted(tags.get(m.id, ()))), shape,
                                   nbytes, cbytes, m.kind))
        return out

    def tag(self, tag: str, version_id: str, move: bool = False) -> None:
        """Name version ``version_id`` (kept until :meth:`untag`); a tag naming another
        version raises :class:`carray.errors.TagExistsError` unless ``move``."""
        self.check_writable()
        check_tag(tag)
        self.repo.find(version_id)  # VersionError when it is not kept
        self.repo.set_tag(tag, version_id, move=move)

    def refresh(self) -> bool:
        """A reader moves to (and holds) the newest version; False when it has it."""
        latest = self.repo.latest_seq()
        if self.head is not None and latest == self.head.seq:
            return False
        manifest, hold = self.repo.open_version()
        self.release()
        self.head, self._hold, self.pinned = manifest, hold, False
        self.meta = dict(manifest.meta)
        return True

    def untag(self, tag: str) -> None:
        self.check_writable()
        self.repo.delete_tag(tag)
        with contextlib.suppress(OSError):
            self.reclaim()

    def reclaim(self, keep_last: int | None = None, older_than: float | None = None,
                use_retention: bool = True, scan: bool = True,
                keep_ids: frozenset[str] = frozenset()) -> int:
        """Drop the versions no rule keeps and no reader holds, and free what only they
        referred to; returns how many were dropped.  Without ``scan``, only the page
        files the dropped versions referred to are candidates for deletion (a commit's
        reclaim); with it, every page file present (page files a crash left behind
        too).  Versions whose ids are in ``keep_ids`` stay (a group's versions name
        them)."""
        if self.readonly or self.head is None:
            return 0
        keep = self.keep if use_retention else None
        if keep_last is not None:
            keep = keep_last if keep is None else min(keep, keep_last)
        if keep is None and older_than is None:
            return 0  # every version is kept: nothing to drop, nothing to free
        manifests = self.manifests()
        for m in manifests:  # outcomes kept in the dataset before versions go
            if m.txn is not None:
                self.repo.outcomes.roll_forward(m)
        kept = kept_seqs(manifests, self.repo.tags(), keep, older_than)
        kept |= {m.seq for m in manifests if m.id in keep_ids}
        dropped: list[int] = []
        remaining = []
        candidates: set[int] = set()
        for i, m in enumerate(manifests):
            if m.seq in kept:
                remaining.append(m)
                continue
            later = manifests[i + 1].time if i + 1 < len(manifests) else time.time()
            if self.repo.drop(m.seq, later):
                self._known.pop(m.seq, None)
                dropped.append(m.seq)
                candidates.update(int(s) for ms in m.members for s in ms.pages["seq"])
            else:
                remaining.append(m)
        for name, member in self._members.items():
            states = []
            for m in remaining:
                with contextlib.suppress(KeyError):
                    states.append((m.seq, m.member(name)))
            member.reclaim(states, dropped)
        if self.on_reclaim is not None:
            self.on_reclaim(remaining)
        referenced = {int(s) for m in remaining for ms in m.members for s in ms.pages["seq"]}
        for fid in self.repo.page_files() if scan else sorted(candidates):
            # Files of commits after the head may be another writer's, still publishing.
            if fid not in referenced and page_file_seq(fid) <= self.head.seq:
                self.repo.delete_page_file(fid)
        return len(dropped)

    def tidy(self) -> None:
        """At a writer's close: drop the versions past the retention that readers held
        (their readers may have closed since the last commit), and let a writer's lease
        go."""
        if not self.readonly:
            with contextlib.suppress(OSError):
                self.repo.release_lease()
        if not self.readonly and not self.broken and self.keep is not None \
                and self.head is not None and not self.in_transaction and len(self.repo.seqs()) > self.keep:
            self.reclaim()

    # -- readers ---------------------------------------------------------------------------

    def release(self) -> None:
        if self._hold is not None:
            self._hold.release()
            self._hold = None


def _sizes(m: Manifest) -> tuple[tuple[int, ...], int, int]:
    """(shape, nbytes, cbytes) of a version: its one array's, or a table's (rows,
    totals)."""
    if len(m.members) == 1 and not m.meta.get("kind"):
        ms = m.members[0]
        return ms.shape, ms.nbytes, ms.cbytes
    rows = m.meta.get("length", 0) if isinstance(m.meta, dict) else 0
    return (int(rows),), sum(x.nbytes for x in m.members), sum(x.cbytes for x in m.members)


def open_dataset(repo: Repository, readonly: bool, version: str | None = None,
                 tag: str | None = None, as_of: _dt.datetime | None = None,
                 keep: Any = None) -> VersionedDataset:
    """The dataset at ``repo``: a reader holds the version asked for (the newest by
    default); a writer works on the newest."""
    pinned = version is not None or tag is not None or as_of is not None
    if readonly:
        manifest, hold = repo.open_version(version, tag, as_of)
        return VersionedDataset(repo, True, manifest, hold, pinned=pinned)
    if pinned:
        raise ReadOnlyError("a version other than the newest opens read-only (mode='r')")
    head = repo.latest()
    recorded = head.retention.get("keep_last", 1) if isinstance(head.retention, dict) else 1
    setting = recorded if keep is None else retention_of(keep)
    return VersionedDataset(repo, False, head, keep=setting)
