"""Groups: named arrays, tables and groups that change together, one version per change.

>>> import carray as ca, numpy as np
>>> g = ca.group()                          # in memory; ca.group("run.cagroup") on disk
>>> t = g.create_array("time", np.arange(3), dims="time")
>>> temp = g.create_array("temp", np.zeros((3, 2)), dims=("time", "x"))
>>> g.append({"time": [3], "temp": np.ones((1, 2))}, dim="time")
>>> g["temp"].shape
(4, 2)

On disk every change to the group or to a member commits one group version
(:mod:`carray.groups.store`); ``with g.transaction():`` makes several changes one.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from carray.array.array import carray
from carray.array.container import pinned_mode, version_asked
from carray.attrs import values as attrvalues
from carray.attrs.mapping import Attrs
from carray.errors import ShapeError
from carray.groups.store import (
    ARRAY,
    GROUP,
    TABLE,
    GroupTree,
    is_group,
    join_path,
    split_path,
)
from carray.stores import Store, resolve
from carray.stores.lock import timeout_of
from carray.table.table import ctable
from carray.versions.dataset import VersionInfo
from carray.versions.history import History

_MODES = ("r", "a", "w", "x")


class _GroupAttrs:
    """Where a group's attributes live: its node in the tree's description."""

    def __init__(self, tree: GroupTree, path: str) -> None:
        self._tree, self._path = tree, path

    def load_attrs(self) -> dict[str, Any]:
        stored = self._tree.node(self._path).get("attrs", {})
        return attrvalues.load_typed(stored, self._tree.url or "<memory>")

    def save_attrs(self, attrs: dict[str, Any]) -> None:
        self._tree.check_writable()
        self._tree.node(self._path)["attrs"] = {
            attrvalues.check_name(k): attrvalues.encode_typed(v) for k, v in attrs.items()}
        self._tree.changed()


class Group(Mapping[str, Any]):
    """A group of arrays, tables and groups (see the module doc).

    Use :func:`group` or :func:`open_group`; ``g.create_group`` and ``g["sub"]`` give
    views of sub-groups of the same tree.
    """

    def __init__(self, tree: GroupTree, path: str = "") -> None:
        self._tree, self._path = tree, path

    # -- where ----------------------------------------------------------------------------

    @property
    def path(self) -> str:
        """The group's path in its tree (``""`` for the root)."""
        return self._path

    @property
    def name(self) -> str:
        return self._path.rsplit("/", 1)[-1] if self._path else "/"

    @property
    def url(self) -> str | None:
        """Where the tree is stored (None in memory)."""
        return self._tree.url

    @property
    def readonly(self) -> bool:
        return self._tree.readonly

    @property
    def attrs(self) -> Attrs:
        """The group's attributes; a change is a group version."""
        # Read from the tree's description each time: a failed transaction puts it back.
        return Attrs(_GroupAttrs(self._tree, self._path), "r" if self.readonly else "a")

    def _full(self, name: str) -> str:
        return join_path(self._path, "/".join(split_path(name)))

    # -- members --------------------------------------------------------------------------

    def __getitem__(self, name: str) -> Any:
        path = self._full(name)
        if not path or path == self._path:
            return self
        node = self._tree.node(path)
        return Group(self._tree, path) if node["kind"] == GROUP else self._tree.member(path)

    def __contains__(self, name: object) -> bool:
        try:
            return isinstance(name, str) and self._full(name) in self._tree.nodes
        except ValueError:
            return False

    def __iter__(self) -> Iterator[str]:
        return iter(self._tree.children(self._path))

    def __len__(self) -> int:
        return len(self._tree.children(self._path))

    def __delitem__(self, name: str) -> None:
        self._tree.delete(self._full(name))

    def member_location(self, name: str) -> str:
        """The directory of member ``name``, relative to the tree's root directory."""
        return self._tree.dir_of(self._full(name))

    def kind_of(self, name: str) -> str:
        """``"group"``, ``"array"`` or ``"table"``."""
        return str(self._tree.node(self._full(name))["kind"])

    def _of_kind(self, kind: str) -> list[tuple[str, Any]]:
        return [(n, self[n]) for n in self if self.kind_of(n) == kind]

    def arrays(self) -> list[tuple[str, carray]]:
        return self._of_kind(ARRAY)

    def tables(self) -> list[tuple[str, ctable]]:
        return self._of_kind(TABLE)

    def groups(self) -> list[tuple[str, Group]]:
        return self._of_kind(GROUP)

    def walk(self) -> Iterator[tuple[str, str, Any]]:
        """``(path, kind, object)`` of every node below, depth first, by name."""
        for name in self:
            kind = self.kind_of(name)
            obj = self[name]
            yield join_path(self._path, name), kind, obj
            if kind == GROUP:
                yield from obj.walk()

    def create_array(self, name: str, data: Any = None, *, shape: Any = None,
                     dtype: Any = None, dims: Any = None, attrs: dict | None = None,
                     **carray_args: Any) -> carray:
        """A new member array: from ``data``, or of ``shape`` and ``dtype`` filled with
        the default value (``dflt``); ``dims`` name its axes; other arguments as for
        :class:`carray.carray` (``chunks``, ``cparams``, ...)."""
        for key in ("rootdir", "mode", "storage_options"):
            if key in carray_args:
                raise TypeError(f"create_array places the array itself: no {key!r}")
        if data is None:
            if shape is None:
                raise ValueError("create_array needs data, or a shape (and dtype)")
            shape = (int(shape),) if np.ndim(shape) == 0 else tuple(int(n) for n in shape)
            data = np.empty((0, *shape[1:]), dtype=np.dtype(dtype or float))
        else:
            if dtype is not None:
                data = np.asarray(data, dtype=dtype)
            shape = None

        def make(extra: dict[str, Any]) -> carray:
            a = carray(data, **carray_args, **extra)
            if shape is not None and shape[0]:
                a.resize(shape)
            if attrs:
                a.attrs.update(attrs)
            return a

        return self._tree.add_member(self._full(name), ARRAY, make, dims)

    def create_table(self, name: str, data: Any = None, *, attrs: dict | None = None,
                     **ctable_args: Any) -> ctable:
        """A new member table from ``data`` (what :class:`carray.ctable` takes)."""
        for key in ("rootdir", "mode", "storage_options", "format"):
            if key in ctable_args:
                raise TypeError(f"create_table places the table itself: no {key!r}")

        def make(extra: dict[str, Any]) -> ctable:
            t = ctable(data, **ctable_args, **extra)
            if attrs:
                t.attrs.update(attrs)
            return t

        return self._tree.add_member(self._full(name), TABLE, make)

    def create_group(self, name: str, attrs: dict | None = None) -> Group:
        """A new sub-group (its missing parents too)."""
        path = self._full(name)
        self._tree.add_group(path, dict(attrs or {}))
        return Group(self._tree, path)

    def require_group(self, name: str) -> Group:
        """The sub-group ``name``, made when missing."""
        return self[name] if name in self else self.create_group(name)

    # -- dimensions -----------------------------------------------------------------------

    def dims_of(self, name: str) -> tuple[str, ...]:
        """The dimension names of member array ``name`` (``"<name>_dim_<i>"`` where none
        were given)."""
        return self._tree.dims_of(self._full(name))

    def set_dims(self, name: str, dims: Any) -> None:
        """Name the axes of member array ``name`` (a group version)."""
        self._tree.set_dims(self._full(name), dims)

    @property
    def dims(self) -> dict[str, int]:
        """Every dimension named in this group and below, with its length."""
        return self._tree.dim_sizes(self._path)

    @property
    def coords(self) -> dict[str, carray]:
        """The coordinate arrays of this group: 1-d arrays named like their dimension."""
        return {name: self[name] for name in self if self.kind_of(name) == ARRAY
                and self.dims_of(name) == (name,)}

    def append(self, values: Mapping[str, Any], dim: str, message: str | None = None) -> None:
        """Grow member arrays along dimension ``dim`` in one group version.

        ``values`` maps member names (relative to this group) to what each appends
        along its axis named ``dim``; every array of this group and below that has
        ``dim`` must be given, and all must grow by the same length.
        """
        if not isinstance(dim, str):
            raise TypeError(f"dim is a dimension name, got {dim!r}")
        given = {self._full(k): v for k, v in values.items()}
        having = {p for p, node in self._tree.nodes.items()
                  if node["kind"] == ARRAY and (not self._path or p.startswith(f"{self._path}/"))
                  and dim in self._tree.dims_of(p)}
        missing, extra = sorted(having - set(given)), sorted(set(given) - having)
        if extra:
            raise ShapeError(f"{', '.join(extra)}: not an array of this group with dimension "
                             f"{dim!r}")
        if missing:
            raise ShapeError(f"append along {dim!r} must give every array that has it; "
                             f"missing: {', '.join(missing)}")
        blocks, grows = {}, set()
        for path, value in given.items():
            a = self._tree.member(path)
            axis = self._tree.dims_of(path).index(dim)
            block = a.as_values(value) if hasattr(a, "as_values") else np.asarray(value)
            block = np.asarray(block)
            if block.ndim == a.ndim - 1:
                block = np.expand_dims(block, axis)
            if block.ndim != a.ndim or block.shape[:axis] + block.shape[axis + 1:] != \
                    a.shape[:axis] + a.shape[axis + 1:]:
                raise ShapeError(f"{path}: cannot append a block of shape {block.shape} along "
                                 f"{dim!r} to an array of shape {a.shape}")
            if axis != 0:
                raise ShapeError(f"{path}: appending grows the first axis; {dim!r} is axis "
                                 f"{axis}")
            blocks[path] = block
            grows.add(block.shape[axis])
        if len(grows) > 1:
            raise ShapeError(f"append along {dim!r} must grow every array by the same length, "
                             f"got {sorted(grows)}")
        with self._tree.change(message):
            for path, block in blocks.items():
                self._tree.member(path).append(block)

    # -- versions -------------------------------------------------------------------------

    def transaction(self, message: str | None = None) -> Any:
        """A context: changes made inside to the group and its members commit as one
        version when it ends (nothing commits when it raises)."""
        return self._tree.transaction(message)

    def commit(self, message: str | None = None) -> str | None:
        """Flush every member and commit what changed; the newest version's id."""
        return self._tree.commit(message)

    def snapshot(self, tag: str, message: str | None = None, move: bool = False) -> str:
        """Commit, then name the newest version ``tag`` (a tag naming another version
        raises :class:`carray.errors.TagExistsError` unless ``move=True``)."""
        return History(self._tree).snapshot(tag, message, move)

    def untag(self, tag: str) -> None:
        History(self._tree).untag(tag)

    def restore(self, version: str) -> str:
        """Make an earlier version of the whole tree the newest again (members as they
        were then), as a new version; returns its id."""
        return History(self._tree).restore(version)

    def refresh(self) -> bool:
        """Move to the newest version; False when this handle had it (a reader shows it;
        a writer puts its changes not committed on top of it)."""
        return History(self._tree).refresh()

    def prune(self, keep_last: int | None = None, older_than: Any = None) -> int:
        """Drop the versions past the newest ``keep_last`` or made before ``older_than``
        (a datetime, or a timedelta back from now) -- never the newest, a tagged one or
        one a reader holds -- with the member versions only they named; returns how many
        group versions went."""
        return History(self._tree).prune(keep_last, older_than)

    def versions(self) -> list[VersionInfo]:
        """Kept versions of the whole tree, newest first."""
        return History(self._tree).versions()

    @property
    def version(self) -> str | None:
        """The id of the version this handle shows (None in memory)."""
        return self._tree.version

    # -- showing --------------------------------------------------------------------------

    def tree(self) -> str:
        """The tree below this group as text: one line per node with its kind, shape,
        dtype, chunks and sizes (from the group's description: no member is opened)."""
        lines = [self.name if self._path else "/"]
        self._tree_lines(self._path, "", lines)
        return "\n".join(lines)

    def _tree_lines(self, path: str, indent: str, lines: list[str]) -> None:
        names = self._tree.children(path)
        for i, name in enumerate(names):
            last = i == len(names) - 1
            full = join_path(path, name)
            lines.append(f"{indent}{'└── ' if last else '├── '}{name}"
                         f"{_node_text(self._tree, full)}")
            if self._tree.node(full)["kind"] == GROUP:
                self._tree_lines(full, indent + ("    " if last else "│   "), lines)

    def __repr__(self) -> str:
        where = self.url or "memory"
        return f"<carray.Group {self.name!r} at {where}: {len(self)} members>"

    # -- closing --------------------------------------------------------------------------

    def close(self) -> None:
        """Commit what is pending and close every member (the whole tree)."""
        self._tree.close()

    def discard(self) -> None:
        """Close the whole tree without committing: what was not committed is dropped."""
        self._tree.discard()

    def __enter__(self) -> Group:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _node_text(tree: GroupTree, path: str) -> str:
    node = tree.described(path)
    kind = node["kind"]
    if kind == GROUP:
        return "/"
    sizes = ""
    if "nbytes" in node:
        sizes = f" {_bytes(node['nbytes'])} -> {_bytes(node['cbytes'])}"
    if kind == TABLE:
        cols = ", ".join(node.get("columns", {}))
        return f"  table {node.get('length', '?')} rows ({cols}){sizes}"
    shape = tuple(node.get("shape", ()))
    dims = tree.dims_of(path)
    named = ", ".join(f"{d}: {n}" for d, n in zip(dims, shape, strict=False))
    dtype = _dtype_text(node.get("dtype"))
    return f"  ({named}) {dtype} chunks {tuple(node.get('chunks', ()))}{sizes}"


def _dtype_text(descr: Any) -> str:
    """A stored dtype as numpy names it (``float64``, ``<U5``, a record's fields)."""
    try:
        dtype = np.lib.format.descr_to_dtype(descr)
    except (TypeError, ValueError, KeyError):
        return "?"
    return dtype.name if dtype.kind not in "USVO" else dtype.str if dtype.names is None \
        else str(dtype)


def _bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def group(path: str | os.PathLike | tuple[Store, str] | None = None, mode: str = "a",
          storage_options: dict | None = None, fsync: bool = True,
          auto_flush: bool = False, storage: dict | None = None) -> Group:
    """A group: in memory (``path`` None), or stored at ``path`` (a local path or an
    fsspec URL).

    Parameters
    ----------
    path : str or path, optional
        Where the group is kept.
    mode : {'a', 'w', 'x', 'r'}
        'a' opens the group there or makes one; 'w' replaces what is there; 'x' makes
        one and refuses an existing path; 'r' opens one read-only.
    storage_options : dict, optional
        For the fsspec file system of a URL.
    fsync : bool, default True
        Make every commit durable before it counts.
    auto_flush : bool, default False
        Make every change a version at once; by default changes (to the group and
        its members) become one version at ``commit()``, ``flush()`` or ``close()``.
    storage : dict, optional
        ``{"versions": N | "all"}``: group versions kept besides tagged and held ones
        (default 1, as for arrays and tables; members keep the versions those name);
        ``{"lock_timeout": seconds}``: how long a writer waits for another process's
        writer of the group to close (see :mod:`carray.stores.lock`).
    """
    timeout = _lock_timeout(storage)
    if mode not in _MODES:
        raise ValueError(f"mode must be one of {_MODES}, got {mode!r}")
    if path is None:
        if mode == "r":
            raise ValueError("a group in memory cannot be opened read-only")
        return Group(GroupTree.memory())
    store, root = resolve(path, storage_options)
    versions = (storage or {}).get("versions")
    if mode == "r" or (mode == "a" and store.exists(root) and is_group(store, root)):
        tree = GroupTree.open(store, root, mode == "r", fsync, storage_options,
                              timeout=timeout, versions=versions)
    else:
        tree = GroupTree.create(store, root, mode, fsync, storage_options, timeout,
                                versions)
    _take_grace(tree, storage)
    tree.auto_flush = auto_flush
    return Group(tree)


def open_group(path: str | os.PathLike | tuple[Store, str], mode: str | None = None,
               version: str | None = None,
               tag: str | None = None, as_of: Any = None,
               storage_options: dict | None = None, fsync: bool = True,
               storage: dict | None = None, auto_flush: bool = False) -> Group:
    """The group stored at ``path``: read-only by default, at its newest version or the
    one named by ``version`` (an id), ``tag`` or ``as_of`` (a time, as for
    :class:`carray.carray`); mode 'a' to change it (the newest only: an earlier version
    with mode 'a' raises :class:`carray.errors.ModeError`).  ``storage={"lock_timeout": seconds}`` as for
    :func:`group`."""
    timeout = _lock_timeout(storage)
    at = version_asked(version, tag, as_of)
    mode = pinned_mode(mode, at) or "r"
    if mode not in ("r", "a"):
        raise ValueError(f"open_group takes mode 'r' or 'a', got {mode!r}")
    store, root = resolve(path, storage_options)
    tree = GroupTree.open(store, root, mode == "r", fsync, storage_options, **at,
                          timeout=timeout)
    _take_grace(tree, storage)
    tree.auto_flush = auto_flush
    return Group(tree)


def _take_grace(tree: GroupTree, storage: dict | None) -> None:
    """``storage={"grace": seconds}``: how long a replaced version stays readable on
    object stores (the group's, and its members')."""
    if storage and "grace" in storage and tree.dataset is not None:
        tree.dataset.repo.grace = float(storage["grace"])


def _lock_timeout(storage: dict | None) -> float:
    """The ``lock_timeout`` of a group's ``storage`` option (which takes it and
    ``versions``)."""
    unknown = sorted(set(storage or {}) - {"lock_timeout", "versions", "grace"})
    if unknown:
        raise ValueError(f"a group's storage option takes lock_timeout, versions and grace, got "
                         f"{', '.join(map(repr, unknown))}")
    return timeout_of(storage)


__all__ = ["Group", "group", "open_group"]
