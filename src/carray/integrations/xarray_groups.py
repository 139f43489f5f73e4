"""xarray Datasets in carray groups: :func:`from_xarray` writes one (the ``carray_group``
backend of :mod:`carray.integrations.xarray_group_backend` opens one with
``xarray.open_dataset`` / ``xarray.open_datatree``).

How a Dataset is stored (as xarray encodes it for NetCDF, through xarray's own coders):

* Every variable, data variable or coordinate, is one array of the group, its dimension
  names the array's ``dims``, its attributes the array's attributes; the Dataset's
  attributes are the group's.  Non-dimension coordinates are listed, the CF way, in the
  ``coordinates`` attribute of the variables they belong to (or of the group).
* Values are CF-encoded: datetimes and timedeltas become numbers with ``units`` (``"days
  since ..."``) and ``calendar``; NaNs of a variable given a ``_FillValue`` (in its
  encoding) become that value; ``scale_factor``/``add_offset`` and ``dtype`` in the
  encoding pack values; bools, complex numbers and bytes stay as they are.
* Strings are fixed-width arrays: a ``U``/``S`` variable as it is, an object variable of
  str (bytes) items as ``U`` (``S``) as wide as its longest item.  An object variable
  holding anything else (None included) is refused: there is no missing string.
* Variables are read into memory to be written, but for dask-backed numeric ones, which
  are computed and appended one slab of blocks (along the first axis) at a time.

The encoding (``encoding={"var": {...}}``, or a variable's own ``.encoding``) may hold
xarray's CF keys (``dtype``, ``_FillValue``, ``missing_value``, ``scale_factor``,
``add_offset``, ``units``, ``calendar``) and the storage keys ``chunks`` (a tuple, or a
mapping from dimension name to length), ``blocks``, ``cparams`` (a :class:`CParams` or a
dict) or ``compressor`` (a codec name such as ``"zstd"``, or a :class:`CParams`).
"""

from __future__ import annotations

import os
from collections.abc import Hashable, Iterator, Mapping
from typing import Any, NamedTuple

import numpy as np
import xarray as xr
from xarray import conventions

from carray.attrs.values import normalise
from carray.core.params import CParams
from carray.errors import ContainerNotFoundError, UnstorableAttributeError
from carray.integrations.xarray_group_backend import (
    GroupBackendArray,
    GroupBackendEntrypoint,
    GroupDataStore,
    is_group,
)
from carray.stores import resolve
from carray.stores.staging import staged

__all__ = ["GroupBackendArray", "GroupBackendEntrypoint", "GroupDataStore", "from_xarray"]

#: Encoding keys xarray's CF coders read.
CF_KEYS = ("dtype", "_FillValue", "missing_value", "scale_factor", "add_offset", "units",
           "calendar")
#: Encoding keys choosing how an array is stored.
STORAGE_KEYS = ("chunks", "blocks", "cparams", "compressor")
#: Attributes that say how stored numbers are read (compared when appending).
_PACKING_ATTRS = ("units", "calendar", "_FillValue", "missing_value", "scale_factor",
                  "add_offset", "dtype")
_MODES = ("w", "a")


# -- writing ----------------------------------------------------------------------------------

def from_xarray(ds: xr.Dataset, path: Any, mode: str = "w", append_dim: str | None = None,
                encoding: Mapping[Hashable, Mapping[str, Any]] | None = None,
                storage_options: dict | None = None, *, group: str | None = None,
                storage: dict | None = None) -> Any:
    """Write an xarray Dataset into a carray group, as one group version.

    Parameters
    ----------
    ds : xarray.Dataset or xarray.DataTree
        What to write: data variables and coordinates become arrays of the group; a
        DataTree's nodes become sub-groups (each with the variables of its own, the
        inherited coordinates staying in the ancestor that holds them).
    path : str, os.PathLike, carray Group or None
        Where the group is (a directory or URL), a group already open for writing, or
        None for a new group in memory.
    mode : {"w", "a"}, default "w"
        ``"w"`` replaces what the group holds; ``"a"`` adds the variables to the group
        (replacing those of the same name) or, with ``append_dim``, appends to them.
    append_dim : str, optional
        Grow every array of the group that has this dimension by the Dataset's
        variables along it (``mode="a"`` only), in one version.  The Dataset must give
        every such array, with the same dimensions; its new values are encoded as the
        stored ones are (the same ``units``, ``calendar``, ``dtype``, ``_FillValue``...).
        Variables without the dimension must be in the group already, with the same
        shape, and are left as stored; variable attributes are not rewritten, dataset
        attributes are updated.
    encoding : mapping, optional
        Per-variable encoding, ``{"name": {"chunks": ..., "dtype": ..., ...}}`` (see the
        module's notes).  When appending, only the keys that agree with what is stored.
        For a DataTree, one such mapping per node: ``{"/": {...}, "/a/b": {...}}``.
    storage_options : dict, optional
        For remote paths (fsspec options).
    group : str, optional
        A sub-group of the group at ``path`` to write into (``"a/b"``), created if need be.
    storage : dict, optional
        For a group made here: ``{"versions": N | "all"}``, the versions it keeps.

    Returns
    -------
    carray Group
        The group written (the root of ``path``): the one given, or a new one in memory,
        open for writing; for a path, the writer is closed (its lock released) and the
        group reopened read-only at the version written.

    Raises
    ------
    ValueError
        A bad mode, encoding, variable name or attribute value; when appending, variables
        or dimensions that do not match the group's, or values that cannot be stored as
        the group's are.  Nothing is written then.
    """
    plans = _checked_plans(ds, mode, append_dim, encoding)  # before anything changes
    if mode == "w" and isinstance(path, (str, os.PathLike)):
        return _replace(path, plans, group, storage_options, storage)
    root = _open_root(path, mode, storage_options, append=append_dim is not None,
                      storage=storage)
    opened = root is not path and root.url is not None
    try:
        if append_dim is None:
            _write_all(root, (group or "").strip("/"), plans, replace=mode == "w")
        else:
            _append(_sub_group(root, group, create=False), ds, append_dim,
                    _checked_encoding(ds, encoding))
    finally:
        if opened:
            root.close()  # the writer's lock goes with it
    if opened:
        import carray as ca

        return ca.open_group(path, mode="r", storage_options=storage_options)
    return root


def _replace(path: str | os.PathLike, plans: list[tuple[str, _Plan]], group: str | None,
             storage_options: dict | None, storage: dict | None = None) -> Any:
    """A new group written whole at ``path`` (mode 'w'): built under a temporary name and
    put in place once complete (:func:`carray.stores.staging.staged`), so a failure
    leaves what was there; reopened read-only at the version written."""
    import carray as ca

    store, key = resolve(path, storage_options)
    with staged(store, key, overwrite=True) as staging:
        root = ca.group(staging.location, mode="w", storage_options=storage_options,
                        storage=storage)
        try:
            _write_all(root, (group or "").strip("/"), plans, replace=True)
        except BaseException:
            root.discard()  # members closed without writing: their files let go
            raise
        root.close()  # (members whose last write fails are let go all the same)
    return ca.open_group(path, mode="r", storage_options=storage_options)


def _checked_plans(ds: Any, mode: str, append_dim: str | None,
                   encoding: Mapping[Any, Any] | None) -> list[tuple[str, _Plan]]:
    """The arguments checked, and what to write by sub-group path (none to append)."""
    if not isinstance(ds, (xr.Dataset, xr.DataTree)):
        raise ValueError("from_xarray writes an xarray.Dataset or DataTree, got "
                         f"{type(ds).__name__}")
    if mode not in _MODES:
        raise ValueError(f"mode must be 'w' or 'a', got {mode!r}")
    if append_dim is not None and (mode != "a" or isinstance(ds, xr.DataTree)):
        raise ValueError("append_dim needs mode='a' and a Dataset (append to each group of "
                         "a tree with group=)")
    if isinstance(ds, xr.DataTree):
        return _tree_plans(ds, encoding)
    _check_names(ds)
    user = _checked_encoding(ds, encoding)
    return [("", _plan(ds, user))] if append_dim is None else []


def _check_names(ds: xr.Dataset) -> None:
    for name, var in ds.variables.items():
        for what, label in [(name, "variable")] + [(d, "dimension") for d in var.dims]:
            if not isinstance(what, str) or not what or "/" in what:
                raise ValueError(f"{label} name {what!r}: names must be non-empty str "
                                 "without '/' to be stored in a group")


def _checked_encoding(ds: xr.Dataset, encoding: Mapping[Hashable, Mapping[str, Any]] | None
                      ) -> dict[str, dict[str, Any]]:
    """The ``encoding`` argument checked: known variables and keys only."""
    out: dict[str, dict[str, Any]] = {}
    for name, enc in (encoding or {}).items():
        if name not in ds.variables:
            raise ValueError(f"encoding names {name!r}, which is not a variable of the "
                             f"dataset ({', '.join(map(str, ds.variables))})")
        if not isinstance(enc, Mapping):
            raise ValueError(f"encoding of {name!r} must be a dict, got {type(enc).__name__}")
        unknown = sorted(set(enc) - set(CF_KEYS) - set(STORAGE_KEYS))
        if unknown:
            raise ValueError(f"encoding of {name!r}: unknown keys {unknown}; known: "
                             f"{', '.join(CF_KEYS + STORAGE_KEYS)}")
        if "cparams" in enc and "compressor" in enc:
            raise ValueError(f"encoding of {name!r}: give 'cparams' or 'compressor', not both")
        out[str(name)] = dict(enc)
    return out


def _open_root(path: Any, mode: str, storage_options: dict | None, *, append: bool,
               storage: dict | None = None) -> Any:
    import carray as ca

    if is_group(path):
        if path.readonly:
            raise ValueError("the group is open read-only: open it with mode 'a' to write")
        return path
    if path is not None and not isinstance(path, (str, os.PathLike)):
        raise ValueError(f"path must be a str, a path, a carray Group or None, got "
                         f"{type(path).__name__}")
    if append:
        if path is None:
            raise ValueError("append_dim appends to an existing group: give its path")
        try:
            return ca.open_group(path, mode="a", storage_options=storage_options)
        except ContainerNotFoundError as exc:
            raise ValueError(f"{os.fspath(path)}: no group to append to ({exc})") from None
    return ca.group(path, mode=mode, storage_options=storage_options, storage=storage)


def _sub_group(root: Any, group: str | None, *, create: bool) -> Any:
    """The sub-group ``group`` of ``root`` (``root`` itself for None or ``"/"``)."""
    name = (group or "").strip("/")
    if not name:
        return root
    if name in root:
        node = root[name]
        if not is_group(node):
            raise ValueError(f"group={group!r}: {name!r} is a {root.kind_of(name)}, not a group")
        return node
    if not create:
        raise ValueError(f"group={group!r}: no such group in {root.url or 'the group'}")
    return root.create_group(name)


def _storage_args(name: str, var: xr.Variable, enc: Mapping[str, Any],
                  explicit: bool) -> dict[str, Any]:
    """carray's arguments (``chunks``, ``blocks``, ``cparams``) from an encoding."""
    args: dict[str, Any] = {}
    for key in ("chunks", "blocks"):
        value = enc.get(key)
        if value is None or var.ndim == 0:
            continue
        if isinstance(value, Mapping):
            value = tuple(int(value.get(d, n)) for d, n in zip(var.dims, var.shape, strict=True))
        elif not (isinstance(value, (tuple, list)) and len(value) == var.ndim
                  and all(isinstance(n, (int, np.integer)) and n > 0 for n in value)):
            if not explicit:
                continue  # a stale encoding (another shape): carray chooses
            raise ValueError(f"encoding of {name!r}: {key} must give a positive int for each "
                             f"of {var.dims}, got {value!r}")
        args[key] = tuple(max(1, min(int(n), s)) for n, s in zip(value, var.shape, strict=True))
    cparams = enc.get("cparams", enc.get("compressor"))
    if cparams is not None:
        if isinstance(cparams, str):
            cparams = {"cname": cparams}
        try:
            args["cparams"] = CParams.coerce(cparams)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"encoding of {name!r}: bad cparams/compressor ({exc})") from None
    return args


def _prepared(ds: xr.Dataset, user: Mapping[str, Mapping[str, Any]]) -> xr.Dataset:
    """A shallow copy of ``ds`` whose variables carry the CF part of the encoding."""
    out = ds.copy(deep=False)
    for name, var in out.variables.items():
        enc = dict(var.encoding)
        if var.dtype.kind in "OUS" and "dtype" not in user.get(str(name), {}):
            enc.pop("dtype", None)  # an old width would cut longer strings
        enc.update({k: v for k, v in user.get(str(name), {}).items() if k in CF_KEYS})
        var.encoding = enc
    return out


def _encoded(ds: xr.Dataset, user: Mapping[str, Mapping[str, Any]]
             ) -> tuple[dict[str, xr.Variable], dict[str, Any]]:
    """The variables and attributes to store, CF-encoded as xarray does for NetCDF."""
    prepared = _prepared(ds, user)
    try:
        variables, attrs = conventions.encode_dataset_coordinates(prepared)
        variables, attrs = conventions.cf_encoder(variables, attrs)
    except (TypeError, OverflowError, NotImplementedError) as exc:
        raise ValueError(f"the dataset cannot be CF-encoded: {exc}") from exc
    return {str(k): v for k, v in variables.items()}, dict(attrs)


def _fixed_width(name: str, values: np.ndarray) -> np.ndarray:
    """Object arrays of str (bytes) as fixed-width ``U`` (``S``) arrays."""
    if values.dtype != object:
        return values
    items = values.ravel().tolist()
    for kind, types in (("U", str), ("S", bytes)):
        if all(isinstance(v, types) for v in items):
            width = max((len(v) for v in items), default=1) or 1
            return values.astype(f"{kind}{width}")
    bad = next(v for v in items if not isinstance(v, (str, bytes)) or
               type(v) is not type(items[0]))
    if bad is None or isinstance(bad, float) and np.isnan(bad):
        raise ValueError(f"variable {name!r}: missing strings (None or NaN) cannot be stored: "
                         "a fixed-width string array has no missing value")
    raise ValueError(f"variable {name!r}: an object array is stored only when it holds str "
                     f"items (or bytes items) alone; it holds {type(bad).__name__} {bad!r}")


def _is_text(var: xr.Variable) -> bool:
    """Whether ``var`` holds strings (fixed-width, or str/bytes objects)."""
    if var.dtype.kind in "US":
        return True
    if var.dtype != object or not var.size:
        return False
    return isinstance(np.asarray(var[(0,) * var.ndim].values).item(), (str, bytes))


def _checked_attrs(where: str, attrs: Mapping[Any, Any]) -> dict[str, Any]:
    try:
        return {str(k): normalise(k, v) for k, v in attrs.items()}
    except UnstorableAttributeError as exc:
        raise ValueError(f"{where}: {exc}") from None


def _values(name: str, var: xr.Variable) -> Any:
    """The values to store: a numpy array, or the dask array of a dask-backed numeric
    variable (computed slab by slab when written)."""
    if var.chunks and var.dtype.kind in "biufcmM" and var.ndim:
        return var.data
    values = _fixed_width(name, np.asarray(var.values))
    if values.dtype.kind in "OV":
        raise ValueError(f"variable {name!r}: dtype {values.dtype} cannot be stored")
    return values


def _create(g: Any, name: str, dims: tuple[str, ...], values: Any, attrs: dict[str, Any],
            args: dict[str, Any]) -> None:
    """Member array ``name`` of ``g`` holding ``values``; a dask array is computed one
    slab of blocks along the first axis at a time, each appended to the array (named
    dimensions once it is whole, so that it agrees with the arrays sharing them)."""
    if isinstance(values, np.ndarray):
        g.create_array(name, data=values, dims=dims, attrs=attrs, **args)
        return
    slabs = (np.asarray(values.blocks[i]) for i in range(values.numblocks[0]))
    a = g.create_array(name, data=next(slabs), attrs=attrs, **args)
    for slab in slabs:
        a.append(slab)
    g.set_dims(name, dims)


class _Plan(NamedTuple):
    """What writing a Dataset stores: its arrays and the group's attributes."""

    arrays: list[tuple[str, tuple[str, ...], Any, dict[str, Any], dict[str, Any]]]
    attrs: dict[str, Any]


def _plan(ds: xr.Dataset, user: Mapping[str, Mapping[str, Any]]) -> _Plan:
    """Every array to create (name, dims, values, attributes, carray arguments), encoded
    and checked."""
    variables, gattrs = _encoded(ds, user)
    arrays = []
    for name, var in variables.items():
        source = ds.variables[name]
        explicit = user.get(name, {})
        enc = explicit if any(k in explicit for k in STORAGE_KEYS) else source.encoding
        if "chunks" not in explicit and source.chunks:  # dask's, before a stale encoding
            enc = {**enc, "chunks": tuple(int(c[0]) for c in source.chunks)}
        arrays.append((name, tuple(map(str, var.dims)), _values(name, var),
                       _checked_attrs(f"attributes of {name!r}", var.attrs),
                       _storage_args(name, var, enc, enc is explicit)))
    return _Plan(arrays, _checked_attrs("dataset attributes", gattrs))


def _related(a: str, b: str) -> bool:
    """Whether group paths ``a`` and ``b`` are one, or one is inside the other."""
    return a == b or not a or not b or a.startswith(b + "/") or b.startswith(a + "/")


def _sharing(g: Any, target: str, dims: set[str]
             ) -> Iterator[tuple[str, tuple[str, ...], Any]]:
    """``(path, dims, array)`` of the arrays below ``g`` that name one of ``dims`` and
    share dimensions with group ``target`` (they are in it, in an ancestor or in a
    sub-group of it); no other array is opened."""
    for name in g:
        path = f"{g.path}/{name}" if g.path else name
        kind = g.kind_of(name)
        if kind == "group" and _related(path, target):
            yield from _sharing(g[name], target, dims)
        elif kind == "array" and set(g.dims_of(name)) & dims:
            yield path, tuple(g.dims_of(name)), g[name]


def _check_sizes(root: Any, group: str | None, plan: _Plan, *, replace: bool) -> None:
    """The planned arrays' dimensions agree in length with the arrays they will share
    them with (those of the group, its ancestors and its sub-groups that stay)."""
    target = (group or "").strip("/")
    planned = {name for name, *_ in plan.arrays}
    sizes: dict[str, int] = {}
    for _, dims, values, _, _ in plan.arrays:
        sizes.update(zip(dims, values.shape, strict=True))
    for path, dims, a in _sharing(root, target, set(sizes)):
        parent, _, name = path.rpartition("/")
        inside = path.startswith(target + "/") if target else True
        if (replace and inside) or (parent == target and name in planned):
            continue  # gone by then
        for dim, n in zip(dims, a.shape, strict=True):
            if sizes.get(dim, n) != n:
                raise ValueError(f"dimension {dim!r} is {sizes[dim]} long in the dataset but "
                                 f"{n} in {path!r} of the group, which shares it")


def _write(root: Any, group: str | None, plan: _Plan, *, replace: bool) -> None:
    """Create (or replace) the planned arrays in ``root``'s sub-group ``group``, and set
    its attributes, in one version."""
    _check_sizes(root, group, plan, replace=replace)
    with root.transaction(message="from_xarray"):
        g = _sub_group(root, group, create=True)
        if replace:
            for name in list(g):
                del g[name]
            for key in list(g.attrs):
                del g.attrs[key]
        for name, dims, values, attrs, args in plan.arrays:
            if name in g:
                del g[name]
            _create(g, name, dims, values, attrs, args)
        if plan.attrs:
            g.attrs.update(plan.attrs)


def _tree_plans(tree: xr.DataTree, encoding: Mapping[str, Any] | None
                ) -> list[tuple[str, _Plan]]:
    """A plan for every node of ``tree`` (its own variables), by path below ``tree``; the
    encoding maps node paths (``"/"``, ``"/a/b"``) to per-variable encodings."""
    by_path = {str(k).strip("/"): v for k, v in (encoding or {}).items()}
    plans = []
    for node in tree.subtree:
        rel = str(node.path)[len(str(tree.path)):].strip("/")
        ds = node.to_dataset(inherit=False)
        _check_names(ds)
        plans.append((rel, _plan(ds, _checked_encoding(ds, by_path.pop(rel, None)))))
    if by_path:
        raise ValueError(f"encoding names groups the tree does not have: {sorted(by_path)}")
    return plans


def _write_all(root: Any, group: str, plans: list[tuple[str, _Plan]], *,
               replace: bool) -> None:
    """Write every plan into its sub-group of ``root``'s ``group``, in one version."""
    with root.transaction(message="from_xarray"):
        for rel, plan in plans:
            where = "/".join(p for p in (group, rel) if p)
            _write(root, where, plan, replace=replace and not rel)


# -- appending --------------------------------------------------------------------------------

def _same(a: Any, b: Any) -> bool:
    """Attribute values equal (NaN equal to NaN, arrays item by item)."""
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str) and a == b
    try:
        x, y = np.asarray(a), np.asarray(b)
        if x.shape != y.shape:
            return False
        nan = x.dtype.kind in "fc" and y.dtype.kind in "fc"
        return bool(np.array_equal(x, y, equal_nan=nan))
    except (TypeError, ValueError):
        return bool(a == b)


def _same_units(a: Any, b: Any) -> bool:
    """Two CF time units saying the same (``"days since 2000-01-01"`` and ``"days since
    2000-01-01 00:00:00"``)."""
    if not (isinstance(a, str) and isinstance(b, str)) or " since " not in a + b:
        return False
    (unit_a, _, ref_a), (unit_b, _, ref_b) = a.partition(" since "), b.partition(" since ")
    if unit_a.strip().lower() != unit_b.strip().lower():
        return False
    import pandas as pd

    try:
        return bool(pd.Timestamp(ref_a.strip()) == pd.Timestamp(ref_b.strip()))
    except (ValueError, OverflowError):
        return ref_a.strip() == ref_b.strip()


def _stored_encoding(var: xr.Variable, dtype: np.dtype, attrs: Mapping[str, Any]
                     ) -> dict[str, Any]:
    """The encoding that makes ``var`` come out as the stored numbers of its array."""
    enc = {k: attrs[k] for k in ("_FillValue", "missing_value", "scale_factor", "add_offset")
           if k in attrs}
    if dtype.kind in "fc" and var.dtype.kind in "fc":
        # Stored floats without a fill value hold NaN as itself: xarray adds none either.
        enc.setdefault("_FillValue", None)
    if var.dtype.kind in "mM" or var.dtype == object and var.dtype.kind not in "US":
        enc.update({k: attrs[k] for k in ("units", "calendar") if k in attrs})
    if dtype.kind in "iufcmM" and not (var.dtype == bool and attrs.get("dtype") == "bool"):
        enc["dtype"] = dtype
    return enc


def _raw_for_append(name: str, var: xr.Variable, stored: Any,
                    user: Mapping[str, Any]) -> xr.Variable:
    """``var`` set to be encoded as its stored array is (the stored ``dtype``,
    ``_FillValue``, ``units``..., then the CF keys of the user's encoding)."""
    want = np.dtype(stored.dtype)
    if _is_text(var) != (want.kind in "US"):
        raise ValueError(f"variable {name!r}: dtype {var.dtype} does not match the stored "
                         f"{want}")
    raw = var.copy(deep=False)
    raw.attrs = {k: v for k, v in var.attrs.items() if k not in _PACKING_ATTRS
                 or k == "units" and var.dtype.kind not in "mMO"}
    raw.encoding = {**_stored_encoding(var, want, dict(stored.attrs)),
                    **{k: v for k, v in user.items() if k in CF_KEYS}}
    return raw


def _encoded_for_append(raws: dict[str, xr.Variable]) -> dict[str, xr.Variable]:
    """CF-encoded together, so bounds variables take their parent's time units."""
    failures = (TypeError, OverflowError, ValueError)
    try:
        encoded, _ = conventions.cf_encoder(raws, {})
    except failures as exc:
        for name, raw in raws.items():  # name the variable: encode them one by one
            try:
                conventions.encode_cf_variable(raw, name=name)
            except failures as one:
                raise ValueError(f"variable {name!r}: its new values cannot be encoded as "
                                 f"the stored ones are ({one})") from None
        raise ValueError(f"the new values cannot be encoded as the stored ones are ({exc})"
                         ) from None
    return {str(k): v for k, v in encoded.items()}


def _stored_block(name: str, encoded: xr.Variable, stored: Any) -> np.ndarray:
    """The encoded values of one variable, checked against its stored array: the same
    packing attributes and dtype (strings no wider)."""
    sattrs, want = dict(stored.attrs), np.dtype(stored.dtype)
    for key in _PACKING_ATTRS:
        if key == "units" and _same_units(encoded.attrs.get(key), sattrs.get(key)):
            continue
        if key in encoded.attrs and not _same(encoded.attrs[key], sattrs.get(key)):
            raise ValueError(f"variable {name!r}: its new values encode with {key}="
                             f"{encoded.attrs[key]!r}, the stored ones with "
                             f"{sattrs.get(key)!r}")
    values = _fixed_width(name, np.asarray(encoded.values))
    if values.dtype.kind in "US" and values.dtype.kind == want.kind:
        if values.dtype.itemsize > want.itemsize:
            raise ValueError(f"variable {name!r}: strings longer than the stored width "
                             f"({want}) cannot be appended")
        return values.astype(want)
    if values.dtype != want:
        raise ValueError(f"variable {name!r}: encoded as {values.dtype}, which does not "
                         f"match the stored {want}")
    return values


def _check_append(g: Any, ds: xr.Dataset, dim: str) -> list[str]:
    """The names of the variables to grow; ValueError when ``ds`` does not fit ``g``."""
    if dim not in ds.dims:
        raise ValueError(f"append_dim {dim!r} is not a dimension of the dataset "
                         f"({', '.join(map(str, ds.dims))})")
    stored = {name: tuple(g.dims_of(name)) for name, _ in g.arrays()}
    growing = sorted(n for n, dims in stored.items() if dim in dims)
    if not growing:
        raise ValueError(f"no array of the group has the dimension {dim!r}")
    given = sorted(str(n) for n, v in ds.variables.items() if dim in v.dims)
    if given != growing:
        lacking, extra = sorted(set(growing) - set(given)), sorted(set(given) - set(growing))
        raise ValueError(f"appending along {dim!r}: the group's arrays along it are "
                         f"{growing}; the dataset lacks {lacking} and adds {extra}")
    sizes = g.dims
    for name, var in ds.variables.items():
        if str(name) not in stored:
            raise ValueError(f"appending along {dim!r}: variable {name!r} is not in the group")
        if tuple(var.dims) != stored[str(name)]:
            raise ValueError(f"variable {name!r}: dims {tuple(var.dims)} in the dataset, "
                             f"{stored[str(name)]} in the group")
        for d, n in zip(var.dims, var.shape, strict=True):
            if d != dim and sizes.get(d) != n:
                raise ValueError(f"variable {name!r}: dimension {d!r} has length {n}, "
                                 f"{sizes.get(d)} in the group")
    return growing


def _check_indexes(g: Any, ds: xr.Dataset, dim: str) -> None:
    """The dimension coordinates not along ``dim`` must be the stored ones."""
    for name, var in ds.variables.items():
        if var.dims != (name,) or name == dim:
            continue
        stored = g[str(name)]
        raw = _raw_for_append(str(name), var, stored, {})
        values = _stored_block(str(name), _encoded_for_append({str(name): raw})[str(name)],
                               stored)
        same = values.shape == tuple(stored.shape) and np.array_equal(
            values, np.asarray(stored[:]), equal_nan=values.dtype.kind in "fc")
        if not same:
            raise ValueError(f"coordinate {name!r} differs from the stored one: appending "
                             f"along {dim!r} keeps the other coordinates as they are")


def _append(g: Any, ds: xr.Dataset, dim: str, user: Mapping[str, Mapping[str, Any]]) -> None:
    """Grow every array of ``g`` along ``dim`` by ``ds``'s variables, in one version."""
    growing = _check_append(g, ds, dim)
    for name, enc in user.items():
        fixed = sorted(set(enc) & set(STORAGE_KEYS))
        if fixed:
            raise ValueError(f"encoding of {name!r}: {fixed} are chosen when an array is "
                             "created, not when appending")
    _check_indexes(g, ds, dim)
    stored = {name: g[name] for name in growing}
    raws = {name: _raw_for_append(name, ds.variables[name], stored[name], user.get(name, {}))
            for name in growing}
    encoded = _encoded_for_append(raws)
    blocks = {name: _stored_block(name, encoded[name], stored[name]) for name in growing}
    gattrs = _checked_attrs("dataset attributes", ds.attrs)
    current = dict(g.attrs)
    changed = {k: v for k, v in gattrs.items() if k not in current or not _same(current[k], v)}
    with g.transaction(message=f"append along {dim}"):
        g.append(blocks, dim=dim)
        if changed:
            g.attrs.update(changed)
