"""The ds format: NetCDF-like datasets in one file, written once, read fast.

Format facts this module relies on (ds storage format 1.0, as ds-format 5.0.2 writes and
reads it; the byte-level details were checked against files that package wrote):

* A file is three parts: the line ``ds-1.0``, one line of JSON (the header), then the
  body, raw bytes up to the end of the file. Each line ends with a single ``\\n``; the body
  starts right after the second one. A reader must insist on the ``ds-`` prefix and on
  version ``1.0`` (files of the older "experimental" format are incompatible).
* The header is a JSON object. Every key except ``"."`` is a variable (its name escaped,
  see below) whose value holds the variable's attributes plus layout keys starting with a
  dot: ``.dims`` (dimension names), ``.size`` (shape; ``[]`` for a scalar; ``null`` for a
  variable with no data), ``.offset`` (where its bytes start, counted from the body start),
  ``.len`` (how many bytes, mask and string lengths included), ``.type``, ``.missing``
  (true if a missing-value mask precedes the values) and ``.endian`` (``"l"`` or ``"b"``).
  ``"."`` holds the dataset attributes. Absent keys mean: type float64, big endian,
  size ``[]``, offset 0, no mask, and dims ``<name>_1, <name>_2, ...``.
* Types: float32, float64, int8/16/32/64, uint8/16/32/64, bool, ``str`` (byte strings)
  and ``unicode`` (text, stored UTF-8).
* A variable's bytes: when ``.missing``, first the mask, one bit per element in C order,
  most significant bit first, 1 meaning missing, padded with zero bits to whole bytes;
  then the values in C order, **only the non-missing ones**. Numbers are raw in the
  ``.endian`` byte order. bool values are bit-packed like the mask (``ceil(n/8)`` bytes).
  Strings are a table of uint64 byte lengths (in ``.endian`` order) followed by the
  strings back to back, without separators.
* Names: a variable whose name starts with ``.`` or ``\\`` is stored under the key with a
  ``\\`` put in front; keys starting with ``.`` are not variables. In memory, as in
  ds-format, a dataset's keys are these escaped names, and names starting with ``.`` are
  hidden (not written).
* ds-format writes variables in sorted name order, back to back (each ``.offset`` is the
  sum of the ``.len`` before it), keys with default JSON separators and ASCII escapes.
* Attribute values are written as ds-format writes them (numpy values as Python values,
  arrays and tuples as lists, NaN as ``NaN``); values JSON has no form for are refused
  (:mod:`carray.attrs.peers`, docs/formats/ds.md).

What ds-format 5.0.2 gets wrong, and what this module does about it:

* Its reader reads ``int(n/8)`` bytes of a bool variable instead of ``ceil(n/8)``, so it
  fails on bool variables whose stored count is not a multiple of 8. We read ``ceil``.
* Its writer over-counts ``.len`` of string variables (masked elements count as the two
  characters of ``'--'``; object arrays of bytes count their repr), so every later
  ``.offset`` is too large. We write exact lengths; reading, we accept a string ``.len``
  larger than the data and, when the header is laid out back to back, correct the later
  offsets (see :mod:`carray.formats.ds.reader`).
* Its reader returns None for variables of size 0; we return an empty array of the stated
  shape and type (None only for ``.size: null``).

The dataset structure is ds-format's: a dict of variable name -> data, and ``'.'`` ->
metadata::

    {
        'temp': np.ma.MaskedArray(...),           # numpy arrays; masked if values are missing
        'time': np.array([...]),
        '.': {
            'temp': {'units': 'K', '.dims': ['time', 'y', 'x']},
            'time': {'.dims': ['time']},
            '.': {'title': 'dataset attributes'},
        },
    }

Strings read back as object arrays (of ``str`` for unicode, of ``bytes`` for str), as in
ds-format, so no string is padded or truncated.

Every function taking a ``path`` also takes a URL (``s3://bucket/x.ds``, ``memory://x.ds``,
any fsspec file system) with ``storage_options`` for its file system: reads then fetch the
same byte ranges they read from a local file, and writes put the whole file at once.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, overload

import numpy as np

from carray.attrs import peers as attrpeers
from carray.errors import UnstorableAttributeError, UnsupportedDTypeError
from carray.formats.ds.header import (
    LAYOUT_KEYS,
    NUMERIC_TYPES,
    STRING_TYPES,
    TYPES,
    VERSION_LINE,
    default_dims,
    escape,
    unescape,
)
from carray.formats.ds.reader import Reader, apply_outer, normalize_index
from carray.formats.local_write import write_bytes, write_file
from carray.stores import LocalStore, resolve

Dataset = dict
"""A ds dataset: ``{name: data, ..., '.': {name: attrs, ..., '.': dataset attrs}}``."""

__all__ = [
    "Dataset", "dims", "encode", "escape", "merge", "meta", "read", "read_header", "read_variable",
    "select", "unescape", "variables", "write",
]

PathLike = str | os.PathLike


# -- reading ---------------------------------------------------------------------------------

def read_header(path: PathLike, *, storage_options: dict | None = None) -> dict:
    """Read and check the header of a ds file, without reading the body.

    Parameters
    ----------
    path : str or os.PathLike
        The ``.ds`` file: a local path or a URL.
    storage_options : dict, optional
        Options of the URL's file system (credentials, endpoint, ...).

    Returns
    -------
    dict
        The header as stored: escaped variable name -> attributes and layout keys
        (``.dims``, ``.size``, ``.offset``, ``.len``, ``.type``, ``.missing``, ``.endian``),
        and ``'.'`` -> dataset attributes.

    Raises
    ------
    carray.errors.FormatError
        If the file is not ds 1.0, the header is malformed, or a variable's bytes would
        run past the end of the file.
    FileNotFoundError
        If there is no such file.
    """
    with Reader(path, storage_options) as reader:
        return reader.header.meta


meta = read_header  # ds-format's name for it


def _resolve(reader: Reader, names) -> list[str]:
    layouts = reader.header.layouts
    if names is None:
        return list(layouts)
    if isinstance(names, str):
        names = [names]
    keys = []
    for name in names:
        key = name if name in layouts else escape(name)
        if key not in layouts:
            raise KeyError(f"{reader.path}: no variable {name!r}")
        keys.append(key)
    return keys


def read(path: PathLike, variables: Iterable[str] | str | None = None,
         sel: Mapping[str, object] | None = None, *,
         storage_options: dict | None = None) -> Dataset:
    """Read a ds file, or only some variables, or only a selection along dimensions.

    Only the bytes of what is asked are read, by positioned reads at each variable's
    ``.offset`` (files up to 64 KiB are read in one system call or request). For a
    selection:

    * along the first dimension, the rows from the first to the last selected one: one
      contiguous byte range (C order);
    * along other dimensions, nothing less: those rows are read and cut in memory;
    * masked variables first read their whole bit mask, because the position of a stored
      value depends on how many elements before it are missing;
    * str/unicode variables read their length table up to the last selected value, then
      only the selected strings.

    See :mod:`carray.formats.ds.reader` for the details.

    Parameters
    ----------
    path : str or os.PathLike
        The ``.ds`` file: a local path or a URL.
    variables : list of str, optional
        Variables to read (as dataset keys; a name starting with ``.`` may also be given
        unescaped). Default: all.
    sel : dict, optional
        ``{dim: key}`` with ``key`` an int (the dimension is dropped), a slice, or a
        sequence of ints or booleans; applied to every variable read that has ``dim``,
        independently per dimension.
    storage_options : dict, optional
        Options of the URL's file system.

    Returns
    -------
    dict
        The dataset: variable -> numpy array (masked array if the file marks missing
        values; numpy scalar for an unmasked 0-d variable; None for a variable with
        ``.size: null``), and ``'.'`` -> the header entries of the variables read (with
        ``.size``/``.dims`` updated by ``sel``) and ``'.'`` -> dataset attributes
        (attribute values as JSON gives them).

    Raises
    ------
    carray.errors.FormatError
        Bad input, naming the file and the variable.
    KeyError
        A requested variable, or a ``sel`` dimension, is not in the file.
    FileNotFoundError
        There is no such file.
    """
    with Reader(path, storage_options) as reader:
        header = reader.header
        keys = _resolve(reader, variables)
        if sel:
            known = {dim for v in header.layouts.values() for dim in v.dims}
            for dim in sel:
                if dim not in known:
                    raise KeyError(f"{reader.path}: no dimension {dim!r}")
        d: Dataset = {}
        metadata: dict = {}
        d["."] = metadata
        for key in keys:
            v = header.layouts[key]
            entry = header.meta[key]
            if sel and v.shape is not None and any(dim in sel for dim in v.dims):
                index = tuple(sel.get(dim, slice(None)) for dim in v.dims)
                data = reader.read_variable(v, index)
                kept = normalize_index(index, v.shape)
                entry[".dims"] = [dim for dim, k in zip(v.dims, kept, strict=True)
                                  if not isinstance(k, int)]
                entry[".size"] = list(np.shape(data))
            else:
                data = reader.read_variable(v)
            d[key] = data
            metadata[key] = dict(entry)
        metadata["."] = dict(header.meta.get(".", {}))
    return d


def encode_attrs(attrs: Mapping, where: str, keep_layout: bool = True) -> dict:
    """Attributes as ds-format writes them (:func:`carray.attrs.peers.json_value`: numpy
    values as their Python values, arrays and tuples as lists, NaN as ``NaN``).

    Raises
    ------
    carray.errors.UnstorableAttributeError
        A value JSON has no form for (complex numbers, bytes, dates, sets), named.
    """
    out = {}
    for k, v in attrs.items():
        if keep_layout and isinstance(k, str) and k.startswith("."):
            out[k] = v
            continue
        try:
            out[k] = attrpeers.json_value(v, "ds")
        except UnstorableAttributeError as exc:
            raise UnstorableAttributeError(f"{where}: attribute {k!r}: {exc}") from None
    return out


def read_variable(path: PathLike, name: str, index: tuple | None = None, *,
                  storage_options: dict | None = None):
    """Read one variable, or the part of it picked by ``index``.

    Parameters
    ----------
    path : str or os.PathLike
        The ``.ds`` file: a local path or a URL.
    name : str
        Variable (dataset key, or unescaped name).
    index : tuple, optional
        One key per axis (int, slice, or 1-d array of ints or booleans), applied per axis
        independently ("outer" indexing, as xarray does).
    storage_options : dict, optional
        Options of the URL's file system.

    Returns
    -------
    numpy.ndarray, numpy.ma.MaskedArray, numpy scalar or None
        As for :func:`read`.
    """
    with Reader(path, storage_options) as reader:
        [key] = _resolve(reader, [name])
        return reader.read_variable(reader.header.layouts[key], index)


# -- the in-memory structure ------------------------------------------------------------------

def variables(d: Mapping) -> list[str]:
    """Dataset keys of the variables of ``d`` (hidden ones excluded), in the order written."""
    return sorted((k for k in d if not k.startswith(".")), key=unescape)


@overload
def dims(d: Mapping[str, Any], var: str) -> list[str]: ...
@overload
def dims(d: Mapping[str, Any], var: None = None) -> dict[str, int]: ...


def dims(d: Mapping[str, Any], var: str | None = None) -> list[str] | dict[str, int]:
    """Dimensions of one variable (a list of names), or of the dataset (name -> size).

    Variables without ``.dims`` get ds-format's made-up names ``<var>_1, <var>_2, ...``.
    """
    metadata = d.get(".", {})
    if var is not None:
        data = d.get(var)
        names = metadata.get(var, {}).get(".dims")
        if names is None:
            names = default_dims(var, np.ndim(data) if data is not None else 0)
        return list(names)
    sizes: dict[str, int] = {}
    for name in variables(d):
        if d[name] is not None:
            for dim, n in zip(dims(d, name), np.shape(d[name]), strict=False):
                sizes.setdefault(dim, n)
    return sizes


def select(d: Mapping, variables_: Iterable[str] | None = None,
           sel: Mapping[str, object] | None = None) -> Dataset:
    """In-memory counterpart of ``read(path, variables, sel)`` for a dataset already read.

    Keys of ``sel`` are applied per dimension as in :func:`read`. Data are not copied
    where numpy indexing gives views.
    """
    names = variables(d) if variables_ is None else list(variables_)
    metadata = d.get(".", {})
    out: Dataset = {".": {".": dict(metadata.get(".", {}))}}
    for name in names:
        if name not in d:
            raise KeyError(f"no variable {name!r}")
        data = d[name]
        entry = dict(metadata.get(name, {}))
        names_ = dims(d, name)
        if sel and data is not None and any(dim in sel for dim in names_):
            index = tuple(sel.get(dim, slice(None)) for dim in names_)
            keys = normalize_index(index, np.shape(data))
            data = apply_outer(np.asanyarray(data), keys)
            entry[".dims"] = [dim for dim, k in zip(names_, keys, strict=True)
                              if not isinstance(k, int)]
            entry[".size"] = list(np.shape(data))
        out[name] = data
        out["."][name] = entry
    return out


def merge(datasets: Sequence[Mapping | PathLike], dim: str, *,
          storage_options: dict | None = None) -> Dataset:
    """Concatenate datasets along ``dim``.

    Variables with ``dim`` are joined along it (they must be in every dataset); the others
    are taken from the first dataset, as are the attributes. Masked arrays stay masked.

    Parameters
    ----------
    datasets : sequence of dict or path
        Datasets (as :func:`read` returns them) or ``.ds`` files (local paths or URLs,
        read whole), in order.
    dim : str
        The dimension to join along.
    storage_options : dict, optional
        Options of the file system of the paths that are URLs.

    Returns
    -------
    dict
        The merged dataset, in memory.  To merge files into a file without holding them
        in memory, see :func:`carray.formats.merge.merge_files` (``carray ds merge``).
    """
    if isinstance(datasets, str | os.PathLike | Mapping):
        raise TypeError("merge takes a sequence of datasets or paths, not a single one")
    if not datasets:
        raise ValueError("merge needs at least one dataset")
    opened = [read(d, storage_options=storage_options) if isinstance(d, str | os.PathLike)
              else _mapping(d, "a dataset") for d in datasets]
    return _merged(opened, dim)


def _merged(datasets: Sequence[Mapping], dim: str) -> Dataset:
    """The datasets (in memory) joined along ``dim``, as :func:`merge` says."""
    first = datasets[0]
    out = select(first)
    for name in variables(first):
        names_ = dims(first, name)
        if first[name] is None or dim not in names_:
            continue
        axis = names_.index(dim)
        parts = []
        for i, d in enumerate(datasets):
            if name not in d or d[name] is None:
                raise ValueError(f"dataset {i} has no variable {name!r} to merge along {dim!r}")
            if dims(d, name) != names_:
                raise ValueError(f"variable {name!r}: dims {dims(d, name)} in dataset {i}, "
                                 f"{names_} in dataset 0")
            parts.append(d[name])
        masked = any(isinstance(p, np.ma.MaskedArray) for p in parts)
        joined = (np.ma.concatenate if masked else np.concatenate)(parts, axis=axis)
        out[name] = joined
        out["."][name][".size"] = list(joined.shape)
    return out


# -- writing ---------------------------------------------------------------------------------

def _as_array(name: str, value):
    """ds-format's normalisation of variable data: scalars and lists become arrays, None in
    a list is a missing value. Strings go to object arrays, where numpy's fixed-width
    string types would drop trailing NUL characters."""
    if value is None or isinstance(value, np.ndarray):
        return value
    if isinstance(value, (str, bytes)):
        return np.array(value, dtype=object)
    if not isinstance(value, (list, tuple)):
        return np.asarray(value)
    arr = np.asarray(value, dtype=object)
    missing = np.equal(arr, np.array(None, dtype=object))
    present = arr[~missing]
    if present.size and all(isinstance(x, (str, bytes)) for x in present):
        filled = arr.copy()
    else:
        filled = np.asarray(np.where(missing, 0, arr).tolist()) if missing.any() \
            else np.asarray(value)
    if missing.any():
        # A placeholder of the right kind: masked values are not written.
        sample = present[0] if present.size else 0
        filled[missing] = "" if isinstance(sample, str) else b"" if isinstance(
            sample, bytes) else 0
        return np.ma.MaskedArray(filled, mask=missing)
    return filled


_KIND_NAMES = {"f": "float", "i": "int", "u": "uint"}


def _type_of(name: str, data: np.ndarray, values: np.ndarray) -> str:
    dt = data.dtype
    if dt.kind in "fiu":
        type_ = _KIND_NAMES[dt.kind] + str(dt.itemsize * 8)
        if type_ in NUMERIC_TYPES:
            return type_
    elif dt.kind == "b":
        return "bool"
    elif dt.kind == "S":
        return "str"
    elif dt.kind == "U":
        return "unicode"
    elif dt.kind == "O":
        kinds = {type(x) for x in values.flat}
        if kinds <= {str, np.str_}:
            return "unicode"
        if kinds <= {bytes, np.bytes_}:
            return "str"
        raise UnsupportedDTypeError(
            f"variable {unescape(name)!r}: object arrays must hold only str or only bytes, "
            f"not {sorted(k.__name__ for k in kinds)}")
    raise UnsupportedDTypeError(
        f"variable {unescape(name)!r}: dtype {dt} has no ds type (ds stores {', '.join(TYPES)})")


def _endian(dt: np.dtype) -> str:
    order = dt.byteorder
    if order == "=":
        order = "<" if sys.byteorder == "little" else ">"
    return "l" if order == "<" else "b"  # 1-byte types ('|') are written as "b", as ds-format


def _encode(name: str, data, declared: str | None) -> tuple[dict, list]:
    """The layout keys of a variable (``.offset`` still 0) and its bytes, as a list.
    ``declared`` is the ``.type`` given in the metadata, used only when there is no data.

    Kept lean: writing many tiny files makes per-call costs count.
    """
    if data is None:
        type_ = declared or "float64"
        if type_ not in TYPES:
            raise ValueError(f"variable {unescape(name)!r}: .type {type_!r} is not a ds type")
        return {".size": None, ".offset": 0, ".len": 0, ".type": type_, ".missing": False}, []
    # (numpy imports numpy.ma on first use: plain arrays do not ask for it)
    if type(data) is not np.ndarray and isinstance(data, np.ma.MaskedArray):
        mask = data.mask
        missing = mask is not np.ma.nomask and bool(mask.any())
        flat = data.data.ravel()
    else:
        missing = False
        flat = data.ravel()  # C order, contiguous
    parts: list[bytes | memoryview] = []
    if missing:
        flat_mask = mask.ravel()
        parts.append(np.packbits(flat_mask).tobytes())
        flat = flat[~flat_mask]
    type_ = _type_of(name, data, flat)
    layout = {".size": list(data.shape), ".offset": 0, ".len": 0, ".type": type_,
              ".missing": missing}
    if type_ == "bool":
        parts.append(np.packbits(flat).tobytes())
    elif type_ in STRING_TYPES:
        if type_ == "unicode":
            items = [x.encode("utf-8") for x in flat.tolist()]
        else:
            items = flat.tolist()
        parts.append(np.array([len(x) for x in items], dtype="<u8").tobytes())
        parts.append(b"".join(items))
        layout[".endian"] = "l"
    else:
        # Large arrays go to the file straight from their buffer, without a copy.
        parts.append(flat.data.cast("B") if flat.nbytes > 1 << 16 else flat.tobytes())
        layout[".endian"] = _endian(flat.dtype)
    layout[".len"] = sum(p.nbytes if isinstance(p, memoryview) else len(p) for p in parts)
    return layout, parts


def _json_default(obj):
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(f"attribute value {obj!r} of type {type(obj).__name__} is not JSON "
                    f"serializable")


# json.dumps's defaults (separators ", " and ": ", ASCII), as ds-format writes; made once
# because json.dumps builds a new encoder on every call that passes default=.
_JSON = json.JSONEncoder(default=_json_default)
_LAYOUT_KEYS = frozenset(LAYOUT_KEYS)
# Files up to this size are joined and written with one call; larger ones part by part
# (joining would copy every array).
_JOIN_LIMIT = 1 << 20


def _mapping(obj, what: str) -> Mapping:
    if not isinstance(obj, dict) and not isinstance(obj, Mapping):
        raise TypeError(f"{what} must be a dict, not {type(obj).__name__}")
    return obj


# Numeric dtypes (by numpy's ``dtype.char``) and their ds types, for the plain path.
_PLAIN_TYPES = {np.dtype(t).char: name for name, t in NUMERIC_TYPES.items()}


def _encode_plain(d: dict) -> list | None:
    """:func:`encode` of the commonest dataset, or None when ``d`` is not one of them:
    numeric arrays (no masks, no strings, no bools), metadata of ``.dims`` alone, no
    dataset attributes, no escaped names.  The bytes are those :func:`encode` writes;
    anything it would refuse is left to it.  Writing many tiny files makes its per-call
    cost count."""
    metadata = d.get(".", {})
    if type(metadata) is not dict or metadata.get(".", {}) != {}:
        return None
    names = []
    for name in d:
        if type(name) is not str or name[:1] == "\\":
            return None
        if name[:1] != ".":
            names.append(name)
    names.sort()
    header: dict = {}
    body: list = []
    offset = 0
    sizes: dict = {}
    for name in names:
        data = d[name]
        if type(data) is not np.ndarray or (type_ := _PLAIN_TYPES.get(data.dtype.char)) is None:
            return None
        user = metadata.get(name)
        given = None if type(user) is not dict or len(user) != 1 else user.get(".dims")
        if user is None:
            dims_ = default_dims(name, data.ndim)
        elif type(given) is list and len(given) == data.ndim:
            dims_ = list(given)
        else:
            return None
        for dim, n in zip(dims_, data.shape, strict=True):
            if type(dim) is not str or sizes.setdefault(dim, n) != n:
                return None
        flat = data.ravel()
        nbytes = flat.nbytes
        header[name] = {".dims": dims_, ".size": list(data.shape), ".offset": offset,
                        ".len": nbytes, ".type": type_, ".missing": False,
                        ".endian": _endian(flat.dtype)}
        body.append(flat.data.cast("B") if nbytes > 1 << 16 else flat.tobytes())
        offset += nbytes
    header["."] = {}
    return [VERSION_LINE + _JSON.encode(header).encode("ascii") + b"\n", *body]


def encode(d: Mapping) -> list:
    """The bytes of ``d`` as a ds file, as a list of buffers (see :func:`write`)."""
    if type(d) is dict and (plain := _encode_plain(d)) is not None:
        return plain
    return _encode_any(d)


def _encode_any(d: Mapping) -> list:
    """:func:`encode` of any dataset, checking everything."""
    _mapping(d, "a dataset")
    for name in d:
        if not isinstance(name, str):
            raise TypeError(f"dataset keys are variable names (str), not {name!r}")
    metadata = _mapping(d.get(".", {}), "dataset metadata d['.']")
    attrs = _mapping(metadata.get(".", {}), "dataset attributes d['.']['.']")
    header: dict = {}
    body: list = []
    offset = 0
    dim_sizes: dict[str, tuple[int, str]] = {}
    for name in variables(d):
        data = _as_array(name, d[name])
        user = _mapping(metadata.get(name, {}), f"metadata of variable {unescape(name)!r}")
        # User attributes and .dims first, then the layout keys: ds-format's key order.
        entry = encode_attrs({k: v for k, v in user.items() if k not in _LAYOUT_KEYS},
                              f"variable {unescape(name)!r}")
        names_ = entry.get(".dims")
        ndim = 0 if data is None else data.ndim
        if names_ is None:
            names_ = default_dims(name, ndim)
        elif isinstance(names_, str) or not isinstance(names_, Sequence):
            raise ValueError(f"variable {unescape(name)!r}: .dims must be a list of strings")
        for dim in names_:
            if not isinstance(dim, str):
                raise ValueError(f"variable {unescape(name)!r}: .dims must be a list of "
                                 f"strings")
        if data is not None:
            if len(names_) != ndim:
                raise ValueError(f"variable {unescape(name)!r}: {len(names_)} dims "
                                 f"{list(names_)} for data of {ndim} dimensions")
            for dim, n in zip(names_, data.shape, strict=True):
                seen = dim_sizes.setdefault(dim, (n, name))
                if seen[0] != n:
                    raise ValueError(f"variable {unescape(name)!r}: dimension {dim!r} has "
                                     f"size {n}, but {seen[0]} in {unescape(seen[1])!r}")
        entry[".dims"] = list(names_)
        layout, parts = _encode(name, data, user.get(".type"))
        layout[".offset"] = offset
        offset += layout[".len"]
        entry.update(layout)
        # In memory the keys are already escaped names: written as they are, so a key
        # starting with a backslash not followed by '.' or another backslash comes back
        # unchanged.
        header[name] = entry
        body.extend(parts)
    header["."] = encode_attrs(attrs, "dataset", keep_layout=False)
    try:
        text = _JSON.encode(header)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"dataset metadata cannot be written as JSON: {exc}") from None
    return [VERSION_LINE + text.encode("ascii") + b"\n", *body]


def write(path: PathLike, d: Mapping, *, fsync: bool = False,
          storage_options: dict | None = None) -> None:
    """Write a dataset to a ds file, atomically (a local file under a temporary name, then
    renamed; an object in one put).

    Parameters
    ----------
    path : str or os.PathLike
        Destination, a local path or a URL; replaced if it exists.
    d : dict
        The dataset (see the module docstring). Variable data may be numpy arrays, masked
        arrays (the mask is stored only if something is masked), numpy or Python scalars,
        lists (None items become missing values) or None (metadata only; give ``.type`` in
        its metadata). ``.dims`` default to ``<var>_1, <var>_2, ...``. Keys starting with
        ``.`` (other than ``'.'``) are hidden and not written.
    fsync : bool, default False
        Flush the file, then its directory, to stable storage before returning.  A ds
        file is written once, whole, and programs write thousands of small ones, so by
        default nothing waits for the disk, as ds-format, netCDF4 and h5py do not (see
        "Guarantees" in the README).  Either way the file is replaced atomically:
        readers, and a crash of this process, see the old file or the new one, never a
        mix or a part; a write that fails (a full disk) leaves the old file as it was.
        Only with ``fsync=True`` does the new file survive a crash of the machine or a
        power cut: without it such a crash may leave a new file empty or short.  A
        file that replaces another is synced before it takes the name whatever
        ``fsync`` says, so the old data is never lost with it.  Without fsync a new
        file costs one ``open``, one ``write`` and one ``rename`` (see
        :mod:`carray.formats.local_write`).
    storage_options : dict, optional
        Options of the URL's file system.

    Raises
    ------
    carray.errors.UnsupportedDTypeError
        A variable's dtype has no ds type (float16, complex, datetime64, ...).
    ValueError
        ``.dims`` do not match the data, or a dimension has different sizes.
    """
    store, key = resolve(path, storage_options)
    parts = encode(d)
    local = isinstance(store, LocalStore)
    if sum(memoryview(p).nbytes for p in parts) <= _JOIN_LIMIT:
        data = b"".join(parts)  # small files: one write call
        if local:
            write_bytes(key, data, fsync=fsync)
        else:
            store.put(key, [data], fsync=fsync)
    elif local:
        write_file(key, [parts], fsync=fsync)
    else:
        store.put(key, parts, fsync=fsync)
