"""The ``carray_group`` xarray backend: ``xarray.open_dataset`` and ``xarray.open_datatree``
on carray groups.

Every array of a group (tables are left out) is a lazy variable, indexed through
:class:`GroupBackendArray` (a :class:`~carray.integrations.xarray_arrays.LazyBackendArray`;
outer indexing: carray reads only the chunks and blocks a
selection touches) and decoded by xarray (``mask_and_scale``, ``decode_times``,
``decode_coords``... as for NetCDF).  Dimension names are the arrays' ``dims``; the
group's attributes are the Dataset's.  The handle shows one group version: the newest,
or the one asked for with ``version=`` or ``tag=``; ``group="a/b"`` opens a sub-group and
``chunks={}`` gives dask chunks equal to carray's (``encoding["preferred_chunks"]``).
Variables and Datasets pickle without an open handle: they reopen the group, at the same
version, where they are unpickled.  :func:`carray.from_xarray` writes groups.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import xarray as xr
from xarray.backends import AbstractDataStore, BackendEntrypoint
from xarray.backends.store import StoreBackendEntrypoint
from xarray.core import indexing

from carray.integrations.xarray_arrays import LazyBackendArray

__all__ = ["GroupBackendArray", "GroupBackendEntrypoint", "GroupDataStore", "is_group"]


def is_group(obj: Any) -> bool:
    """Whether ``obj`` is an open carray Group."""
    from carray.groups.group import Group

    return isinstance(obj, Group)


class _Source:
    """Where a group is and which version: reopened (once per process) by the arrays that
    read it, so it pickles without an open handle."""

    def __init__(self, path: str | None, version: str | None, storage_options: dict | None,
                 opened: Any) -> None:
        self.path, self.version, self.storage_options = path, version, storage_options
        self._root = opened
        self._lock = threading.Lock()

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_lock"] = None
        if self.path is not None:
            state["_root"] = None  # an in-memory group travels with its arrays
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def root(self) -> Any:
        with self._lock:
            if self._root is None:
                import carray as ca

                if self.path is None:
                    raise ValueError("a group in memory cannot be reopened from a pickle")
                self._root = ca.open_group(self.path, mode="r", version=self.version,
                                           storage_options=self.storage_options)
            return self._root


class GroupBackendArray(LazyBackendArray):
    """One array of a group, read on indexing (carray reads only the chunks and blocks the
    selection touches); the array is taken from the source's group on first read."""

    def __init__(self, source: _Source, member: str, shape: tuple[int, ...],
                 dtype: np.dtype) -> None:
        super().__init__(shape, dtype)
        self.source, self.member = source, member

    def _arguments(self) -> tuple:
        return self.source, self.member, self.shape, self.dtype

    def _open(self) -> Any:
        return self.source.root()[self.member]

    def _read(self, opened: Any, key: tuple) -> np.ndarray:
        key = _bounded(key, self.shape)
        if sum(isinstance(k, np.ndarray) for k in key) > 1:
            return np.asarray(opened.oindex[key])
        return np.asarray(opened[key])


def _bounded(key: tuple, shape: tuple[int, ...]) -> tuple:
    """``key`` with its slices made explicit for ``shape``: an open group handle may show
    an array grown since the variable was made, and the variable keeps its own shape."""
    out = []
    for k, n in zip(key, shape, strict=False):
        if isinstance(k, slice):
            start, stop, step = k.indices(n)
            k = slice(start, None if stop < 0 else stop, step)
        out.append(k)
    return tuple(out) + tuple(key[len(out):])


def _default_dims(name: str, ndim: int) -> tuple[str, ...]:
    return tuple(f"{name}_dim_{i}" for i in range(ndim))


class GroupDataStore(AbstractDataStore):
    """The arrays and attributes of one group (its direct children) as an xarray store;
    it pickles as the source and the group's path (a Dataset holds its store)."""

    def __init__(self, source: _Source, path: str) -> None:
        self.source, self.path = source, path
        self._variables: dict[str, xr.Variable] | None = None

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_variables": None}

    @property
    def group(self) -> Any:
        """The group shown (opened through the source)."""
        return self.source.root()[self.path]

    def _variable(self, group: Any, name: str, a: Any) -> xr.Variable:
        dims = tuple(group.dims_of(name)) or _default_dims(name, len(a.shape))
        member = f"{self.path}/{name}".strip("/")
        lazy = indexing.LazilyIndexedArray(
            GroupBackendArray(self.source, member, tuple(a.shape), np.dtype(a.dtype)))
        var = xr.Variable(dims, lazy, dict(a.attrs))
        chunks = tuple(a.chunks) if getattr(a, "chunks", None) else tuple(a.shape)
        var.encoding["chunks"] = chunks
        var.encoding["preferred_chunks"] = dict(zip(dims, chunks, strict=True))
        return var

    def get_variables(self) -> dict[str, xr.Variable]:
        if self._variables is None:
            group = self.group
            self._variables = {name: self._variable(group, name, a)
                               for name, a in group.arrays()}
        return dict(self._variables)

    def get_attrs(self) -> dict[str, Any]:
        return dict(self.group.attrs)

    def get_dimensions(self) -> dict[str, int]:
        sizes: dict[str, int] = {}
        for var in self.get_variables().values():
            sizes.update(zip(map(str, var.dims), var.shape, strict=True))
        return sizes

    def close(self) -> None:
        pass  # the handle is the source's; nothing else stays open


def _open(filename_or_obj: Any, version: str | None, tag: str | None, as_of: Any,
          storage_options: dict | None) -> tuple[Any, _Source]:
    """The root group asked for, and the source its arrays reopen (at the version found
    for ``version``, ``tag`` or ``as_of``, by its id)."""
    import carray as ca

    if is_group(filename_or_obj):
        if version is not None or tag is not None or as_of is not None:
            raise ValueError("version=, tag= and as_of= open a group by its path, not an "
                             "open group")
        root = filename_or_obj
        return root, _Source(root.url, root.version if root.url else None,
                             storage_options, root)
    if not isinstance(filename_or_obj, (str, os.PathLike)):
        raise ValueError("the carray_group backend opens a group by its path or URL, or an "
                         f"open carray Group; got {type(filename_or_obj).__name__}")
    path = os.fspath(filename_or_obj)
    root = ca.open_group(path, mode="r", version=version, tag=tag, as_of=as_of,
                         storage_options=storage_options)
    return root, _Source(path, root.version, storage_options, root)


def _node(root: Any, group: str | None) -> Any:
    name = (group or "").strip("/")
    if not name:
        return root
    if name not in root or not is_group(root[name]):
        raise ValueError(f"group={group!r}: no such group in {root.url or 'the group'}")
    return root[name]


def _group_paths(g: Any) -> Iterator[str]:
    """The paths of ``g`` and of every group below it, depth first (no member opened)."""
    yield g.path
    for name in g:
        if g.kind_of(name) == "group":
            yield from _group_paths(g[name])


class GroupBackendEntrypoint(BackendEntrypoint):
    """Open carray groups with ``xarray.open_dataset(path)`` and ``xarray.open_datatree``
    (or ``engine="carray_group"``).

    Backend arguments: ``group="a/b"`` (a sub-group), ``version=`` / ``tag=`` / ``as_of=``
    (an older version of the group; ``as_of`` a time, as :func:`carray.open_group`
    takes it), ``storage_options`` (remote paths).
    """

    description = "carray groups (arrays with named dimensions, versioned together)"
    url = ""
    supports_groups = True
    open_dataset_parameters = ("filename_or_obj", "drop_variables", "mask_and_scale",
                               "decode_times", "concat_characters", "decode_coords",
                               "use_cftime", "decode_timedelta", "group", "version", "tag",
                               "as_of", "storage_options")

    def open_dataset(self, filename_or_obj: Any, *,
                     drop_variables: str | Iterable[str] | None = None,
                     mask_and_scale: Any = True, decode_times: Any = True,
                     concat_characters: Any = True, decode_coords: Any = True,
                     use_cftime: Any = None, decode_timedelta: Any = None,
                     group: str | None = None, version: str | None = None,
                     tag: str | None = None, as_of: Any = None,
                     storage_options: dict | None = None) -> xr.Dataset:
        root, source = _open(filename_or_obj, version, tag, as_of, storage_options)
        store = GroupDataStore(source, _node(root, group).path)
        return StoreBackendEntrypoint().open_dataset(
            store, mask_and_scale=mask_and_scale, decode_times=decode_times,
            concat_characters=concat_characters, decode_coords=decode_coords,
            drop_variables=drop_variables, use_cftime=use_cftime,
            decode_timedelta=decode_timedelta)

    def open_groups_as_dict(self, filename_or_obj: Any, *,
                            drop_variables: str | Iterable[str] | None = None,
                            group: str | None = None, version: str | None = None,
                            tag: str | None = None, as_of: Any = None,
                            storage_options: dict | None = None,
                            **decoders: Any) -> dict[str, xr.Dataset]:
        """Every group from ``group`` (default the root) down, by path (``"/"``, ``"/a"``,
        ``"/a/b"``), each a Dataset of its own arrays."""
        root, source = _open(filename_or_obj, version, tag, as_of, storage_options)
        top = _node(root, group)
        out = {}
        for path in _group_paths(top):
            name = "/" + path[len(top.path):].strip("/")
            out[name] = StoreBackendEntrypoint().open_dataset(
                GroupDataStore(source, path), drop_variables=drop_variables, **decoders)
        return out

    def open_datatree(self, filename_or_obj: Any, *,
                      drop_variables: str | Iterable[str] | None = None,
                      **kwargs: Any) -> xr.DataTree:
        """The group (or ``group=``) and every group below it as a DataTree."""
        return xr.DataTree.from_dict(
            self.open_groups_as_dict(filename_or_obj, drop_variables=drop_variables, **kwargs))

    def guess_can_open(self, filename_or_obj: Any) -> bool:
        """An open Group, or a local directory holding a group."""
        if is_group(filename_or_obj):
            return True
        if not isinstance(filename_or_obj, (str, os.PathLike)):
            return False
        return _is_group_dir(os.fspath(filename_or_obj))


def _is_group_dir(path: str) -> bool:
    """Whether the local directory ``path`` holds a group (its marker file)."""
    if not os.path.isdir(path):
        return False
    from carray.groups.store import is_group
    from carray.stores import resolve

    try:
        store, key = resolve(path)
        return is_group(store, key)
    except (OSError, ValueError):
        return False
