"""The state of one group tree: its members, its description and its commits.

A group is a directory (docs/formats/group.md, "Files")::

    __group__                 the marker
    versions/                 the group's versions: manifests whose ``meta`` describes
                              every node (consolidated: kind, directory, dims, shape,
                              dtype, chunks, sizes, attributes, and for a member array
                              or table the id of its version)
    .carray-transactions/ID   the record of each group commit
    temp/, events/, sub/x/    members: arrays and tables in carray's own layout, each
                              with its own ``versions/``; a sub-group is a directory

A group commit publishes, in order, the new version of every member that changed
(each naming the commit's record), then the group's version (naming it too), then
writes the record: that one put is the commit point.  A crash before it leaves
every member and the group at their previous versions (a version naming a record
that does not exist never counts), after it all at the new ones.  A reader opens
each member at the version its group version names, so it sees one state of the
whole tree.

Members keep every version (the group's versions refer to them); a member changed
through the group publishes through the group's commit (its dataset's
``coordinator``), so every change to a member is a group version too.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
from numpy.lib.format import dtype_to_descr

from carray.array.array import carray
from carray.attrs import values as attrvalues
from carray.codecs import parallel as _parallel
from carray.core.checkedjson import dumps_checked, load_marker
from carray.errors import (
    ContainerExistsError,
    ContainerNotFoundError,
    FormatError,
    ReadOnlyError,
    ShapeError,
    VersionsUnsupportedError,
)
from carray.groups.rebase import merge_nodes
from carray.layouts.base import clear_for_create
from carray.stores import Store, staging
from carray.stores.lock import WriteLock
from carray.table.table import ctable
from carray.versions import Repository
from carray.versions.dataset import VersionedDataset, VersionInfo, open_dataset, retention_of
from carray.versions.outcomes import relative
from carray.versions.repo import DEFAULT_GRACE
from carray.versions.transaction import publish_together, rebase_and_stage

GROUP_FILE = "__group__"
TXN_DIR = ".carray-transactions"
#: The marker: format version 2 carries a checksum; groups of version 1 read as before.
_MARKER = dumps_checked({"format": "carray-group", "format_version": 2})
_RESERVED = {GROUP_FILE, "versions", TXN_DIR}
GROUP, ARRAY, TABLE = "group", "array", "table"
#: Members flushed at once by a group commit, at most.
MAX_PARALLEL_FLUSHES = 8
#: Members keep every version: the group's versions name them.
_KEEP_ALL = {"versions": "all"}


def check_group_marker(store: Store, root: str) -> None:
    """Raise FormatError unless ``root/__group__`` is a group marker this build reads
    (ChecksumError: a damaged one)."""
    key = store.join(root, GROUP_FILE)
    marker = load_marker(store.get(key), store.url(key), GROUP_FILE,
                         version_key="format_version", readable=(1, 2), checked_from=2,
                         known=("format",))
    if marker.get("format") != "carray-group":
        raise FormatError(f"unsupported group marker {marker!r:.80}", store.url(key))


def is_group(store: Store, path: str) -> bool:
    """Whether ``path`` holds a group (its marker)."""
    return store.isfile(store.join(path, GROUP_FILE))


def split_path(path: str) -> list[str]:
    """The parts of a member path ``"a/b/c"`` (checked: each a safe directory name)."""
    if not isinstance(path, str):
        raise TypeError(f"member names are str, got {path!r}")
    parts = [p for p in path.strip("/").split("/") if p]
    for part in parts:
        if part in (".", "..") or part in _RESERVED or part.startswith(("__", ".")) or \
                "\\" in part or "\x00" in part or "~" in part:
            raise ValueError(f"member name {part!r} is not allowed: names become directory "
                             "names, so they cannot be '.', '..', reserved, start with '.' or "
                             "'__', or hold '\\', '~' or NUL")
    return parts


def join_path(*parts: str) -> str:
    return "/".join(p.strip("/") for p in parts if p.strip("/"))


def parent_of(path: str) -> str:
    return path.rsplit("/", 1)[0] if "/" in path else ""


def check_nodes(nodes: Any, where: str | None) -> None:
    """Raise FormatError unless ``nodes`` is a description this module wrote: every
    node a known kind under a group, in a directory inside the group's."""
    def bad(what: str) -> FormatError:
        return FormatError(f"the group's version is damaged: {what}", where)

    if not isinstance(nodes, dict) or nodes.get("", {}).get("kind") != GROUP:
        raise bad("no root group")
    for path, node in nodes.items():
        if not isinstance(node, dict) or node.get("kind") not in (GROUP, ARRAY, TABLE):
            raise bad(f"node {path!r} is of no known kind")
        if not path:
            continue
        try:
            split_path(path)
            split_path(str(node.get("dir", "")).replace("~", "_"))
        except (TypeError, ValueError) as exc:
            raise bad(f"node {path!r}: {exc}") from None
        if not isinstance(node.get("dir"), str) or not node["dir"] or \
                node["dir"].startswith("/"):
            raise bad(f"node {path!r} has no directory inside the group's")
        if nodes.get(parent_of(path), {}).get("kind") != GROUP:
            raise bad(f"node {path!r} is not under a group")
        dims = node.get("dims")
        if dims is not None and (not isinstance(dims, list) or
                                 not all(isinstance(d, str) and d for d in dims)):
            raise bad(f"dims of {path!r} are not names")
        if "version" in node and not isinstance(node["version"], str):
            raise bad(f"the version of {path!r} is not an id")


def _copied(nodes: dict[str, Any]) -> dict[str, Any]:
    """A deep copy of a description (JSON values only): a version keeps its own."""
    return json.loads(json.dumps(nodes))


def _encode_attrs(attrs: dict[str, Any]) -> dict[str, Any]:
    return {attrvalues.check_name(k): attrvalues.encode_typed(v) for k, v in attrs.items()}


class GroupTree:
    """The nodes of one group tree and the handles of its open members.

    Use :meth:`create`, :meth:`open` or :meth:`memory`.  Nodes are described by path
    (``""`` is the root); :class:`carray.group.Group` is a view of one path.
    """

    def __init__(self, store: Store | None, root: str, dataset: VersionedDataset | None,
                 readonly: bool, fsync: bool = True, storage_options: dict | None = None,
                 lock: WriteLock | None = None) -> None:
        self.store, self.root, self.dataset = store, root, dataset
        self.readonly, self.fsync = readonly, fsync
        self.storage_options = storage_options
        self._lock = lock
        meta = dataset.meta if dataset is not None else {}
        nodes = meta.get("nodes") if isinstance(meta, dict) else None
        if dataset is not None:
            check_nodes(nodes, self.url)
        self.nodes: dict[str, dict[str, Any]] = \
            _copied(nodes) if nodes else {"": {"kind": GROUP}}
        self._open: dict[str, Any] = {}  # member containers (in memory: the members)
        self._depth = 0
        self._collecting = False
        self._pending: dict[int, VersionedDataset] = {}
        self._pending_lock = threading.Lock()
        self._saved = self.nodes  # in memory: the nodes when the transaction began
        self._message: str | None = None
        #: Make every change a version at once (else at commit, flush or close).
        self.auto_flush = False
        self.closed = False

    # -- making and opening -------------------------------------------------------------

    @classmethod
    def memory(cls) -> GroupTree:
        return cls(None, "", None, False)

    @classmethod
    def create(cls, store: Store, root: str, mode: str, fsync: bool,
               storage_options: dict | None, timeout: float | None = None,
               versions: Any = None) -> GroupTree:
        """A new group at ``root`` (``mode`` 'w' replaces what is there, once its writer's
        lock is taken: see :mod:`carray.stores.lock`, ``timeout`` for the wait)."""
        old = WriteLock.acquire(store, root, take_over=mode == "w", timeout=timeout)
        try:
            clear_for_create(store, root, "w" if mode == "w" else "x")
            lock = staging.new_directory(store, root)  # locked before it has its name
        finally:
            if old is not None:
                old.release()  # it locked the directory removed
        try:
            store.put(store.join(root, GROUP_FILE), _MARKER, fsync=fsync)
            dataset = VersionedDataset(Repository(store, root, fsync), False, None,
                                       keep=retention_of(versions))
            dataset.meta = {"kind": GROUP, "nodes": {"": {"kind": GROUP, "attrs": {}}}}
            dataset.publish(kind="create")
        except BaseException:
            if lock is not None:
                lock.release()
            raise
        return cls(store, root, dataset, False, fsync, storage_options, lock).held_by(lock)

    @classmethod
    def open(cls, store: Store, root: str, readonly: bool, fsync: bool,
             storage_options: dict | None, version: str | None = None,
             tag: str | None = None, as_of: Any = None,
             timeout: float | None = None, versions: Any = None) -> GroupTree:
        """The group at ``root``: a reader holds the version asked for (the newest by
        default), a writer works on the newest."""
        key = store.join(root, GROUP_FILE)
        if not store.isfile(key):
            raise ContainerNotFoundError(f"{store.url(root)}: no group here")
        check_group_marker(store, root)
        lock = None if readonly else WriteLock.acquire(store, root, timeout=timeout)
        try:
            repo = Repository(store, root, fsync)
            dataset = open_dataset(repo, readonly, version, tag, as_of, keep=versions)
            if timeout is not None:  # another writer's unfinished commit waited for so long
                dataset.decide_after = timeout
            if not readonly:
                repo.remove_leftovers(dataset.head.seq if dataset.head else None,
                                      owner_gone=not store.remote)
            if not isinstance(dataset.meta, dict) or dataset.meta.get("kind") != GROUP:
                raise FormatError("the version does not describe a group", store.url(root))
            return cls(store, root, dataset, readonly, fsync, storage_options, lock).held_by(lock)
        except BaseException:
            if lock is not None:
                lock.release()
            raise

    def held_by(self, lock: WriteLock | None) -> GroupTree:
        """Have a later ``mode='w'`` open of this process take the group over from this
        tree (:meth:`discard`); returns the tree."""
        if lock is not None:
            lock.on_takeover(self.discard)
        return self

    def discard(self, reason: str = "the group was closed without committing") -> None:
        """Close without committing (a later ``mode='w'`` open of this process replaces
        the group, or what was being written failed): members are closed the same way,
        their unflushed changes dropped, and every later use of them raises saying
        ``reason``."""
        if not self.closed:
            self._let_go(lambda container: container.abandon(reason), clear=True)

    def _let_go(self, finish: Callable[[Any], None], clear: bool) -> None:
        """Closed: each open member let go by ``finish(member)`` (if that fails, closed
        without writing: its files and lock go all the same), the version held and the
        writer's lock released; ``clear``: forget the members."""
        self.closed = True
        for container in self._open.values():
            self._unwatch(container)
            try:
                finish(container)
            except Exception:  # noqa: BLE001 - let go all the same
                with contextlib.suppress(Exception):
                    container.discard()
        if clear:
            self._open.clear()
        if self.dataset is not None:
            self.dataset.release()
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    @property
    def url(self) -> str | None:
        return None if self.store is None else self.store.url(self.root)

    @property
    def version(self) -> str | None:
        head = self.dataset.head if self.dataset is not None else None
        return None if head is None else head.id

    def check_writable(self) -> None:
        if self.closed:
            raise ValueError("the group is closed")
        if self.readonly:
            raise ReadOnlyError(f"{self.url}: group opened read-only (mode 'r' or an "
                                "earlier version)")

    # -- nodes --------------------------------------------------------------------------

    def node(self, path: str) -> dict[str, Any]:
        try:
            return self.nodes[path]
        except KeyError:
            raise KeyError(path) from None

    def children(self, path: str) -> list[str]:
        """Names of the direct children of group ``path``, sorted."""
        prefix = f"{path}/" if path else ""
        return sorted(p[len(prefix):] for p in self.nodes
                      if p and p.startswith(prefix) and "/" not in p[len(prefix):])

    def dir_of(self, path: str) -> str:
        """The directory of node ``path``, relative to the root's."""
        if not path:
            return ""
        return str(self.nodes[path].get("dir", path))

    def _new_dir(self, path: str) -> str:
        """A directory for new node ``path``: under its parent's, its name unless
        something stays there for earlier versions (then ``name~k``)."""
        parent, leaf = parent_of(path), path.rsplit("/", 1)[-1]
        base = join_path(self.dir_of(parent), leaf)
        if self.store is None:
            return base
        taken = {str(n.get("dir", p)) for p, n in self.nodes.items()}
        candidate, k = base, 0
        while candidate in taken or self.store.exists(self.store.join(self.root, candidate)):
            k += 1
            candidate = f"{base}~{k}"
        return candidate

    def _member_storage(self) -> dict[str, Any]:
        """What members take of the group's storage options (its grace on object
        stores: a member's versions go with the group's)."""
        repo = self.dataset.repo if self.dataset is not None else None
        return {} if repo is None or repo.grace == DEFAULT_GRACE else {"grace": repo.grace}

    def _location(self, directory: str) -> str:
        assert self.store is not None
        return self.store.url(self.store.join(self.root, directory))

    def _prepare(self, path: str) -> list[str]:
        """Check ``path`` is free for a new node and make its missing parent groups."""
        self.check_writable()
        parts = split_path(path)
        if not parts:
            raise ValueError("a member needs a name")
        for i in range(1, len(parts)):
            parent = "/".join(parts[:i])
            if parent not in self.nodes:
                self.add_group(parent, {})
            elif self.nodes[parent]["kind"] != GROUP:
                raise ValueError(f"{parent!r} is an {self.nodes[parent]['kind']}, not a group")
        full = "/".join(parts)
        if full in self.nodes:
            raise ContainerExistsError(f"{full!r} already exists in the group")
        return parts

    def add_group(self, path: str, attrs: dict[str, Any]) -> None:
        with self.change():
            full = "/".join(self._prepare(path))
            node: dict[str, Any] = {"kind": GROUP, "attrs": _encode_attrs(attrs)}
            if self.store is not None:
                node["dir"] = self._new_dir(full)
            self.nodes[full] = node

    def add_member(self, path: str, kind: str, make: Any, dims: Any = None) -> Any:
        """Create member ``path``: ``make(location, extra_kwargs)`` builds the container
        (``location`` None in memory)."""
        with self.change():
            full = "/".join(self._prepare(path))
            node: dict[str, Any] = {"kind": kind}
            extra: dict[str, Any] = {}
            if self.store is not None:
                node["dir"] = self._new_dir(full)
                extra = {"rootdir": self._location(node["dir"]), "mode": "w",
                         "fsync": self.fsync,
                         "storage": {**_KEEP_ALL, **self._member_storage()},
                         "storage_options": self.storage_options}
            container = make(extra)
            self.nodes[full] = node
            self._open[full] = container
            self._watch(container)
            if dims is not None:
                self.set_dims(full, dims)
        return container

    def set_dims(self, path: str, dims: Any) -> None:
        self.check_writable()
        node = self.node(path)
        if node["kind"] != ARRAY:
            raise TypeError(f"{path!r} is a {node['kind']}: only arrays have dims")
        a = self.member(path)
        dims = (dims,) if isinstance(dims, str) else tuple(dims)
        if len(dims) != a.ndim or not all(isinstance(d, str) and d for d in dims):
            raise ShapeError(f"{path!r} has {a.ndim} axes: dims must be {a.ndim} non-empty "
                             f"names, got {dims!r}")
        if len(set(dims)) != len(dims):
            raise ValueError(f"dims of {path!r} repeat a name: {dims!r}")
        node["dims"] = list(dims)
        self.changed()  # the commit checks the dimensions

    def dims_of(self, path: str) -> tuple[str, ...]:
        node = self.node(path)
        if node["kind"] != ARRAY:
            raise TypeError(f"{path!r} is a {node['kind']}: only arrays have dims")
        if "dims" in node:
            return tuple(node["dims"])
        leaf = path.rsplit("/", 1)[-1]
        return tuple(f"{leaf}_dim_{i}" for i in range(len(self._shape_of(path))))

    def _shape_of(self, path: str) -> tuple[int, ...]:
        if path in self._open:
            return tuple(self._open[path].shape)
        return tuple(self.node(path).get("shape", ()))

    def dim_sizes(self, group: str) -> dict[str, int]:
        """Every dimension named by arrays in ``group`` and below, with its length."""
        out: dict[str, int] = {}
        prefix = f"{group}/" if group else ""
        for path, node in self.nodes.items():
            if node["kind"] == ARRAY and (not group or path.startswith(prefix)):
                for dim, n in zip(self.dims_of(path), self._shape_of(path), strict=False):
                    out.setdefault(dim, n)
        return out

    def check_dims(self) -> None:
        """Arrays that share a dimension name in one group or its ancestors agree on its
        length (ShapeError naming both otherwise)."""
        seen: dict[tuple[str, str], tuple[str, int]] = {}
        for path in sorted(self.nodes, key=lambda p: p.count("/")):
            node = self.nodes[path]
            if node["kind"] != ARRAY or "dims" not in node:
                continue
            scopes = [parent_of(path)]
            while scopes[-1]:
                scopes.append(parent_of(scopes[-1]))
            for dim, n in zip(node["dims"], self._shape_of(path), strict=False):
                for scope in scopes:
                    other = seen.get((scope, dim))
                    if other is not None and other[1] != n:
                        raise ShapeError(
                            f"dimension {dim!r} is {other[1]} long in {other[0]!r} but {n} in "
                            f"{path!r}: arrays sharing a dimension grow together "
                            "(Group.append, or change them inside Group.transaction())")
                seen.setdefault((parent_of(path), dim), (path, n))

    def delete(self, path: str) -> None:
        self.check_writable()
        self.node(path)
        gone = [p for p in self.nodes if p == path or p.startswith(f"{path}/")]
        for p in gone:
            container = self._open.pop(p, None)
            if container is not None:
                self._unwatch(container)
                with contextlib.suppress(Exception):
                    container.discard()
            del self.nodes[p]
        self.changed()

    # -- members ------------------------------------------------------------------------

    def member(self, path: str) -> Any:
        """The container of member ``path``, opened once per tree."""
        found = self._open.get(path)
        if found is not None:
            return found
        node = self.node(path)
        if node["kind"] == GROUP:
            raise TypeError(f"{path!r} is a group")
        if self.store is None:
            raise KeyError(path)
        location = self._location(self.dir_of(path))
        if not self.store.isdir(self.store.join(self.root, self.dir_of(path))):
            raise ContainerNotFoundError(f"{location}: member {path!r} of the group is "
                                         "missing (its directory is gone)")
        opener = carray if node["kind"] == ARRAY else ctable
        if self.readonly:
            container = opener(rootdir=location, mode="r", version=node.get("version"),
                               storage_options=self.storage_options)
        else:
            container = opener(rootdir=location, mode="a", fsync=self.fsync,
                               storage_options=self.storage_options,
                               storage=self._member_storage())
            self._watch(container)
        self._open[path] = container
        return container

    def _watch(self, container: Any) -> None:
        if self.store is not None and not self.readonly:
            container.versioned_dataset().coordinator = self._member_published

    def _unwatch(self, container: Any) -> None:
        if self.store is not None and not self.readonly:
            with contextlib.suppress(Exception):
                container.versioned_dataset().coordinator = None

    def _member_published(self, dataset: VersionedDataset, message: str | None, kind: str,
                          force: bool) -> str | None:
        """A member's commit: within a group transaction (or a group commit collecting
        its members), held for the group's; else a group commit of its own."""
        if message is not None and self._message is None:  # the group's own comes first
            self._message = message
        if self._depth or self._collecting:
            with self._pending_lock:  # members may flush on several threads
                self._pending[id(dataset)] = dataset
            return dataset.head.id if dataset.head is not None else None
        self._publish([dataset], kind)
        return dataset.head.id if dataset.head is not None else None

    # -- committing ---------------------------------------------------------------------

    def changed(self) -> None:
        """The description changed: a version at the next commit (at once with
        :attr:`auto_flush`, unless a change or transaction is open)."""
        if self.store is not None and not self._depth and self.auto_flush:
            self.commit()

    @contextlib.contextmanager
    def change(self, message: str | None = None) -> Iterator[None]:
        """One operation of the group's: whole or not at all (a failure puts the nodes
        back as they were before it and drops the members it made); part of the next
        version, as any change."""
        self.check_writable()
        saved, opened = _copied(self.nodes), set(self._open)
        self._depth += 1
        if message is not None:
            self._message = message
        try:
            yield
            if self._depth == 1:
                self.check_dims()  # refused here, not at a commit that may come much later
        except BaseException:
            self.nodes = saved
            self._drop_members_outside(opened)
            raise
        finally:
            self._depth -= 1
        self.changed()

    @contextlib.contextmanager
    def transaction(self, message: str | None = None) -> Iterator[None]:
        """Changes inside commit as one group version at the end.  When the block raises
        (or the commit is refused), nothing of it is committed, then or later: the group
        and its open members go back to the newest version (changes not committed before
        the block go with it)."""
        self.check_writable()
        if not self._depth and self.dataset is None:  # in memory: the state to go back to
            self._saved = _copied(self.nodes)
        self._depth += 1
        if message is not None:
            self._message = message
        try:
            yield
        except BaseException:
            self._depth -= 1
            if not self._depth:
                self.reset()
            raise
        self._depth -= 1
        if not self._depth:
            try:
                self.commit()
            except BaseException:
                self.reset()
                raise

    def reset(self) -> None:
        """Drop every change not committed: the description goes back to the newest
        version's, open members to theirs; members made since are closed (their
        directories go once no version names them)."""
        self._pending.clear()
        self._message = None
        if self.dataset is None:
            self.nodes = self._saved
        else:
            if not self.readonly:
                self.dataset.reset_head()
            head = self.dataset.head
            self.nodes = _copied(head.meta.get("nodes", {}) if head is not None
                                 else {"": {"kind": GROUP}})
        self._drop_members_outside(set(self.nodes))
        if self.dataset is not None:
            for container in self._open.values():
                with contextlib.suppress(Exception):  # not stored in a versioned layout
                    container.reset()

    def _drop_members_outside(self, keep: set[str]) -> None:
        for path in [p for p in self._open if p not in keep or p not in self.nodes]:
            container = self._open.pop(path)
            self._unwatch(container)
            with contextlib.suppress(Exception):
                container.discard()

    def commit(self, message: str | None = None, kind: str = "commit") -> str | None:
        """Flush every open member and publish one group version of all that changed."""
        if self.store is None:
            self.check_dims()  # in memory nothing is published, but the rule holds
            return None
        if self.readonly:
            return self.version
        if message is not None:
            self._message = message
        self._collecting = True
        try:
            # Members flush side by side: each one's writes and fsyncs overlap the others'.
            flushes = [container.flush for container in self._open.values()]
            _parallel.run(flushes, width=min(len(flushes), MAX_PARALLEL_FLUSHES))
        finally:
            self._collecting = False
        return self._publish(list(self._pending.values()), kind)

    def _publish(self, datasets: list[VersionedDataset], kind: str) -> str | None:
        """One group version of the members' staged changes and the description: the
        members' versions and the group's published as one transaction recorded in the
        group's directory (:mod:`carray.versions.transaction`)."""
        assert self.store is not None and self.dataset is not None
        self.check_dims()
        pending = [ds for ds in datasets if ds.take_staged()]
        message, self._message = self._message, None
        self._pending.clear()
        self.nodes = self._describe()
        # The version keeps its own copy: the working nodes change after it.
        self.dataset.meta = {"kind": GROUP, "nodes": _copied(self.nodes)}
        if not pending and not self.dataset.take_staged():
            return self.version
        owners = {id(c.versioned_dataset()): c for c in self._open.values()}

        def rebase(ds: VersionedDataset, newer: Any) -> None:
            if ds is self.dataset:
                self._rebase(newer, {id(d) for d in pending})
            else:
                rebase_and_stage(ds, owners[id(ds)], newer)

        dataset = self.dataset

        def describe() -> None:  # the members' new versions are known now
            self.nodes = self._describe()
            dataset.meta = {"kind": GROUP, "nodes": _copied(self.nodes)}

        publish_together([*pending, self.dataset], message, self.root, rebase, kind=kind,
                         fsync=self.fsync, before_last=describe)
        if not self.store.remote:  # (object stores: at close, as a version's grace allows)
            self._reclaim_members(pending)
        return self.version

    def _rebase(self, newer: Any, mine: set[int]) -> None:
        """The group's version lost the race to ``newer``: merge its description with this
        writer's (members this commit published keep this writer's description)."""
        assert self.dataset is not None and self.dataset.head is not None
        published = {p for p, c in self._open.items() if id(c.versioned_dataset()) in mine}
        self.nodes = merge_nodes(self.dataset.head.meta.get("nodes", {}), self.nodes,
                                 newer.meta.get("nodes", {}), published, self.url or "")
        check_nodes(self.nodes, self.url)
        self.dataset.adopt_newer(newer)
        self.dataset.meta = {"kind": GROUP, "nodes": _copied(self.nodes)}

    def _named(self) -> dict[str, set[str]]:
        """Member directory -> the ids of its versions that kept group versions name."""
        assert self.dataset is not None
        named: dict[str, set[str]] = {}
        for manifest in self.dataset.manifests():
            nodes = manifest.meta.get("nodes", {}) if isinstance(manifest.meta, dict) else {}
            for path, node in nodes.items():
                if node.get("kind") in (ARRAY, TABLE) and "version" in node:
                    named.setdefault(str(node.get("dir", path)), set()).add(node["version"])
        return named

    def _reclaim_members(self, published: list[VersionedDataset]) -> None:
        """After a commit: the versions of the members it published that no kept group
        version names go (members keep what the group's versions name, no more)."""
        assert self.store is not None
        named = self._named()
        for ds in published:
            rel = relative(self.store, ds.repo.root, self.root)
            with contextlib.suppress(OSError):
                ds.reclaim(keep_last=1, use_retention=False,
                           keep_ids=frozenset(named.get(rel, ())))

    def _describe(self) -> dict[str, dict[str, Any]]:
        """The nodes as the next version records them."""
        return {path: self.described(path) for path in self.nodes}

    def described(self, path: str) -> dict[str, Any]:
        """Node ``path`` as it is now: an open member's sizes, attributes and version
        taken from it."""
        node = dict(self.node(path))
        container = self._open.get(path)
        if container is not None:
            node.update(describe_member(container))
        return node

    # -- versions -----------------------------------------------------------------------

    def _versioned(self) -> VersionedDataset:
        if self.dataset is None:
            raise VersionsUnsupportedError("a group in memory keeps no versions")
        return self.dataset

    # What carray.versions.history.History asks of a group (Group's version methods).

    def commit_changes(self, message: str | None) -> str:
        self._versioned()
        return self.commit(message) or ""

    def version_list(self) -> list[VersionInfo]:
        return self._versioned().versions()

    def tag_version(self, tag: str, version_id: str, move: bool) -> None:
        self._versioned().tag(tag, version_id, move=move)

    def untag_version(self, tag: str) -> None:
        self._versioned().untag(tag)

    def restore_version(self, version: str) -> str:
        """Make group version ``version`` the newest again: its nodes, and each member at
        the version it named (a member restored is a new version of it), as one new group
        version; returns its id."""
        dataset = self._versioned()
        self.check_writable()
        old = dataset.repo.find(version)
        nodes = old.meta.get("nodes") if isinstance(old.meta, dict) else None
        check_nodes(nodes, self.url)
        assert isinstance(nodes, dict)
        with self.transaction(f"restore {old.id}"):
            for path in list(self._open):
                if self.nodes[path].get("dir") != nodes.get(path, {}).get("dir"):
                    container = self._open.pop(path)
                    self._unwatch(container)
                    container.close()
            self.nodes = _copied(nodes)
            for path, node in self.nodes.items():
                if node["kind"] in (ARRAY, TABLE):
                    member = self.member(path)
                    if "version" in node and member.version != node["version"]:
                        member.restore(node["version"])
        return self.version or ""

    def refresh_version(self) -> bool:
        """Move to the newest version; False when this handle had it.  A reader's members
        reopen at the versions it names; a writer's open members put their pending
        changes on top of theirs, and its description is merged with the newest."""
        dataset = self._versioned()
        if not self.readonly:
            newest = dataset.repo.latest()
            if dataset.head is not None and newest.seq == dataset.head.seq:
                return False
            for container in self._open.values():
                container.refresh()
            self._rebase(newest, {id(c.versioned_dataset()) for c in self._open.values()})
            return True
        if not dataset.refresh():
            return False
        assert dataset.head is not None
        self.nodes = _copied(dataset.head.meta.get("nodes", {}))
        for container in self._open.values():
            container.close()
        self._open.clear()
        return True

    def prune_versions(self, keep_last: int | None, older_than: float | None) -> int:
        """Drop the group versions past the newest ``keep_last`` or made before
        ``older_than`` (never the newest, a tagged or a held one), then every member's
        versions no remaining group version names, and the directories of members none
        names; returns how many group versions went."""
        dataset = self._versioned()
        self.check_writable()
        dropped = dataset.reclaim(keep_last, older_than, use_retention=False)
        named = self._named()
        for path, node in self.nodes.items():
            if node["kind"] in (ARRAY, TABLE):
                member_dataset = self.member(path).versioned_dataset()
                keep = frozenset(named.get(self.dir_of(path), set()))
                member_dataset.reclaim(keep_last=1, use_retention=False, keep_ids=keep)
        self._remove_unnamed(set(named) | {self.dir_of(p) for p in self.nodes})
        return int(dropped)

    def _remove_unnamed(self, named: set[str]) -> None:
        """Delete member directories no kept version names (dropped members, members a
        failed commit made)."""
        assert self.store is not None
        store = self.store
        keep_parents = {"/".join(d.split("/")[:i]) for d in named
                        for i in range(1, d.count("/") + 1)}

        def visit(rel: str) -> None:
            for name in store.listdir(store.join(self.root, rel) if rel else self.root):
                sub = join_path(rel, name)
                key = store.join(self.root, sub)
                if name in _RESERVED or name.startswith(".") or sub in named or \
                        not store.isdir(key):
                    continue
                if sub in keep_parents:
                    visit(sub)
                elif any(store.exists(store.join(key, marker))
                         for marker in ("versions", "meta", "__table__")):
                    with contextlib.suppress(OSError):  # a member's, nothing else
                        store.rmtree(key)

        visit("")

    # -- closing ------------------------------------------------------------------------

    def close(self) -> None:
        if self.closed:
            return
        try:
            if not self.readonly and self.store is not None:
                self.commit()
                if self.dataset is not None:
                    self.dataset.tidy()
                    self._reclaim_members([c.versioned_dataset() for c in self._open.values()])
        finally:
            self._let_go(lambda container: container.close(), clear=self.store is not None)


def describe_member(container: Any) -> dict[str, Any]:
    """What a group version records of a member array or table (consolidated)."""
    version = container.version
    out: dict[str, Any] = {"nbytes": int(container.nbytes), "cbytes": int(container.cbytes),
                           "attrs": _encode_attrs(dict(container.attrs))}
    if version is not None:
        out["version"] = version
    if isinstance(container, ctable):
        out.update(length=len(container),
                   columns={n: _descr(container.dtype[n]) for n in container.names})
    else:
        out.update(shape=list(container.shape), dtype=_descr(container.dtype),
                   chunks=list(container.chunks))
    return out


def _descr(dtype: Any) -> Any:
    """numpy's description of ``dtype``, without metadata (which it cannot keep)."""
    dtype = np.dtype(dtype)
    if dtype.metadata:
        dtype = np.dtype(dtype.descr) if dtype.names else np.dtype(dtype.str)
    return dtype_to_descr(dtype)
