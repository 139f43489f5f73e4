"""The format registry: the one place that knows every on-disk format carray reads.

Each format is a frozen :class:`Format`: its name, what kind of thing it holds
(an ``"array"``, a ``"table"``, a ``"dataset"`` of named variables, or a single
``"file"`` of chunks), its file extensions, how to recognise it from what is
stored (``sniff``, through a :mod:`carray.stores` store), and how to open,
verify, describe (``info``) and show the first rows (``head``) of it.
``carray.open``, ``convert``, the CLI and the xarray backend all ask here.

Adding a format is adding one :class:`Format` to :data:`FORMATS` (in the order
sniffing should try it).  Which array layout opens a directory stays with the
layouts (:func:`carray.layouts.sniff_layout`); the registry builds on it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal

import numpy as np

from carray.array.array import carray
from carray.core.params import CNAMES, CParams, Shuffle
from carray.core.problems import Checked, Finding, Problem, guarded
from carray.errors import CArrayError, ContainerNotFoundError, FormatError, VersionsUnsupportedError
from carray.formats.bloscpack import verify as _blp_verify
from carray.formats.bloscpack.frame import MAGIC as BLP_MAGIC
from carray.formats.ds import verify as _ds_verify
from carray.formats.ds.header import MAGIC as DS_MAGIC
from carray.formats.ds.header import unescape
from carray.groups.group import Group, open_group
from carray.groups.store import is_group
from carray.integrations import group_zarr, table_files, zarr_arrays
from carray.layouts import LAYOUTS, LayoutKind, sniff_layout
from carray.layouts.b2nd import frame_verify as _b2frame_verify
from carray.layouts.b2nd.header import SPARSE_INDEX
from carray.layouts.b2nd.meta import cparams_of as frame_cparams
from carray.layouts.bcolz.layout import META_DIR, STORAGE_FILE
from carray.stores import Store, is_url, resolve
from carray.table.day import index_facts, value_facts
from carray.table.store import ROOTDIRS, is_ctable
from carray.table.table import ctable
from carray.table.verify import verify_table

Kind = Literal["array", "table", "dataset", "file", "group"]
Location = str | os.PathLike


@dataclass(frozen=True)
class Format:
    """One on-disk format.

    Attributes
    ----------
    name : str
        What users call it (``--to NAME``).
    kind : {'array', 'table', 'dataset', 'file'}
    extensions : tuple of str
        Lower-case suffixes (with the dot) a path in this format usually has; the
        first is the one written by default.
    description : str
        A few words for messages and help.
    sniff : callable
        ``sniff(probe) -> bool``: whether what is stored at ``probe.path`` (a
        :class:`Probe`) is in this format (magic bytes or marker files; never the
        extension alone).
    open : callable
        ``open(path, mode, storage_options) -> object``: a carray, ctable, numpy
        array or dict of variables.
    verify : callable
        ``verify(store, path)`` yields :class:`~carray.core.problems.Problem` and
        :class:`~carray.core.problems.Checked` findings.
    info : callable
        ``info(path, storage_options) -> dict``: a JSON-able description.
    head : callable
        ``head(path, rows, storage_options) -> dict``: name -> first ``rows`` rows
        (numpy arrays) of each column or variable (arrays: one entry).
    remote : bool
        Whether paths may be URLs (``s3://...``).
    writable : bool
        Whether :func:`carray.integrations.convert.convert` can write it.
    container : bool
        Whether ``open`` gives a carray or ctable (what :func:`carray.open` returns).
    """

    name: str
    kind: Kind
    extensions: tuple[str, ...]
    description: str
    sniff: Callable[[Probe], bool]
    open: Callable[[str, str, dict | None], Any]
    verify: Callable[[Store, str], Iterator[Finding]]
    info: Callable[[str, dict | None], dict]
    head: Callable[[str, int, dict | None], dict[str, Any]]
    remote: bool = True
    writable: bool = True
    container: bool = False


# -- sniffing helpers ---------------------------------------------------------------------------

#: Bytes read from the start of a file to sniff it: the longest magic (HDF5's) is 8.
HEAD_BYTES = 8


class Probe:
    """What is stored at one path, looked at lazily and at most once per question, so
    trying every format costs one small read of a file, or one look at a directory."""

    def __init__(self, store: Store, path: str) -> None:
        self.store, self.path = store, path

    @cached_property
    def head(self) -> bytes:
        """The first bytes of a file (empty for a directory or an unreadable file)."""
        if not self.store.isfile(self.path):
            return b""
        try:
            with self.store.open(self.path) as h:
                return h.pread(HEAD_BYTES, 0)
        except OSError:
            return b""

    @cached_property
    def table(self) -> bool:
        return is_ctable(self.path, self.store)

    @cached_property
    def group(self) -> bool:
        return self.store.isdir(self.path) and is_group(self.store, self.path)

    @cached_property
    def layout(self) -> str | None:
        """The array layout's name (None: not an array, or a table's root)."""
        if self.table:  # a table's root also holds bcolz's __attrs__
            return None
        kind = sniff_layout(self.path, self.store)
        return kind.name if kind is not None else None

    @cached_property
    def zarr(self) -> bool:
        """Whether a directory holds a Zarr v3 array (its ``zarr.json`` says so)."""
        return self.store.isdir(self.path) and zarr_arrays.is_zarr_array(self.store, self.path)

    @cached_property
    def zarr_group(self) -> bool:
        """Whether a directory holds a Zarr v3 group (its ``zarr.json`` says so)."""
        return self.store.isdir(self.path) and group_zarr.is_zarr_group(self.store, self.path)

    @cached_property
    def frame_kind(self) -> str | None:
        """``"b2nd"``, ``"caterva"`` or ``"schunk"`` for a Blosc2 frame, else None."""
        if self.layout != "b2nd":
            return None
        from carray.layouts.b2nd.frame import Frame

        try:
            with Frame((self.store, self.path)) as frame:
                return frame.kind
        except (FormatError, OSError):
            return "b2nd"  # damaged: still a frame, and verify will say what is wrong


def _magic(*prefixes: bytes) -> Callable[[Probe], bool]:
    """A sniffer for a single file starting with one of ``prefixes``."""
    return lambda probe: probe.head.startswith(prefixes)


def _layout_sniffer(name: str) -> Callable[[Probe], bool]:
    return lambda probe: probe.layout == name


def _frame_sniffer(kind: str) -> Callable[[Probe], bool]:
    return lambda probe: probe.frame_kind == kind


def _layout_verify(name: str) -> Callable[[Store, str], Iterator[Finding]]:
    kind: LayoutKind = next(k for k in LAYOUTS if k.name == name)
    return kind.verify


def _local(path: str, what: str) -> str:
    if is_url(path):
        raise ValueError(f"{path}: {what} files are read on local paths only")
    return path


# -- arrays and tables --------------------------------------------------------------------------


def _open_array(path: str, mode: str, storage_options: dict | None) -> carray:
    return carray(rootdir=path, mode=mode, storage_options=storage_options)


def _open_table(path: str, mode: str, storage_options: dict | None) -> ctable:
    return ctable(rootdir=path, mode=mode, storage_options=storage_options)


def _array_info(path: str, storage_options: dict | None) -> dict:
    with _open_array(path, "r", storage_options) as a:
        return describe_array(a, sniff(path, storage_options))


def stored_bytes(location: str | None, storage_options: dict | None = None) -> int | None:
    """Bytes of every file under ``location`` (a directory or a file): what it takes on
    disk, framing, metadata and spare room included; None in memory or where it would
    cost a listing request per directory (URLs)."""
    if location is None or is_url(location):
        return None
    store, key = resolve(location, storage_options)
    total, todo = 0, [key]
    while todo:
        path = todo.pop()
        if store.isdir(path):
            todo += [store.join(path, name) for name in store.listdir(path)]
        elif store.isfile(path):
            total += store.size(path)
    return total


def ratio(nbytes: int, cbytes: int) -> float | None:
    """``nbytes / cbytes`` to 3 decimals; None when nothing is stored (no chunks written,
    as for a lazily filled array), where no ratio is true."""
    return round(nbytes / cbytes, 3) if cbytes else None


def describe_array(a: carray, fmt: Format | None = None) -> dict:
    """The facts ``carray info`` shows for an array, as a JSON-able dict."""
    grid = [-(-n // max(c, 1)) for n, c in zip(a.shape, a.chunks, strict=True)]
    where = a.rootdir if a.rootdir is not None else "memory"
    return {
        "type": "carray", "format": fmt.name if fmt else None,
        "shape": list(a.shape), "dtype": str(a.dtype),
        "chunks": list(a.chunks), "blocks": None if a.blocks is None else list(a.blocks),
        "layout": f"{fmt.description} {where!r}" if fmt else "in memory",
        "nchunks": a.nchunks, "grid": grid, "leftover": a.leftover,
        "codec": a.cparams.cname, "clevel": a.cparams.clevel,
        "shuffle": a.cparams.shuffle.name.lower(),
        "nbytes": a.nbytes, "cbytes": a.cbytes, "ratio": ratio(a.nbytes, a.cbytes),
        "disk_bytes": stored_bytes(a.rootdir),
        "attrs": a.attrs.getall(),
        **history_of(a),
    }


def history_of(container: Any) -> dict:
    """``{"version": id, "versions": [...]}`` of a container that keeps versions (else
    nothing): its version and the kept ones, newest first."""
    try:
        kept = container.versions()
    except (VersionsUnsupportedError, NotImplementedError):
        return {}
    return {"version": container.version,
            "versions": [{"id": v.id, "time": v.time.isoformat(timespec="seconds"),
                          "message": v.message, "tags": list(v.tags), "shape": list(v.shape),
                          "nbytes": v.nbytes, "cbytes": v.cbytes, "kind": v.kind}
                         for v in kept]}


def describe_table(t: ctable) -> dict:
    """The facts ``carray info`` shows for a table, as a JSON-able dict."""
    columns = []
    for name in t.names:
        col = t.cols[name]
        columns.append({"name": name, "dtype": str(col.dtype) if col.ndim == 1 else
                        f"{col.dtype}{tuple(col.shape[1:])}", "nbytes": col.nbytes,
                        "cbytes": col.cbytes,
                        "ratio": ratio(col.nbytes, col.cbytes),
                        "disk_bytes": stored_bytes(col.rootdir), **value_facts(col)})
    return {"type": "ctable", "rows": len(t), "columns": columns, "nbytes": t.nbytes,
            "cbytes": t.cbytes, "disk_bytes": stored_bytes(t.rootdir),
            "indexes": index_facts(t), "attrs": t.attrs.getall(), **history_of(t)}


def _table_info(path: str, storage_options: dict | None) -> dict:
    with _open_table(path, "r", storage_options) as t:
        return describe_table(t)


def _array_head(path: str, rows: int, storage_options: dict | None) -> dict[str, Any]:
    with _open_array(path, "r", storage_options) as a:
        return {"value": _take(a, rows)}


def _table_head(path: str, rows: int, storage_options: dict | None) -> dict[str, Any]:
    with _open_table(path, "r", storage_options) as t:
        return {name: _take(t.cols[name], rows) for name in t.names}


def _take(a: Any, rows: int) -> Any:
    """The first ``rows`` rows of ``a`` (sliced, never read whole); a 0-d array's value."""
    if not a.ndim:
        return np.asarray(a[()])
    return np.asarray(a[:rows]) if len(a) else np.asarray(a[:0])


# -- groups -----------------------------------------------------------------------------------


def _open_group(path: str, mode: str, storage_options: dict | None) -> Group:
    return open_group(path, "r" if mode == "r" else "a", storage_options=storage_options)


def describe_group(g: Group) -> dict:
    """The facts ``carray info`` shows for a group: its tree and version history."""
    members = []
    for path, kind, _ in _walk_nodes(g):
        members.append({"path": path, "kind": kind})
    return {"type": "group", "tree": g.tree(), "members": members, "attrs": dict(g.attrs),
            "disk_bytes": stored_bytes(g.url),
            **({"version": g.version, "versions": [
                {"id": v.id, "time": v.time.isoformat(timespec="seconds"),
                 "message": v.message, "tags": list(v.tags), "kind": v.kind}
                for v in g.versions()]} if g.url else {})}


def _walk_nodes(g: Group) -> Iterator[tuple[str, str, str]]:
    """``(path, kind, name)`` of every node below ``g``, without opening members."""
    for name in g:
        kind = g.kind_of(name)
        path = f"{g.path}/{name}" if g.path else name
        yield path, kind, name
        if kind == "group":
            yield from _walk_nodes(g[name])


def _group_info(path: str, storage_options: dict | None) -> dict:
    with _open_group(path, "r", storage_options) as g:
        return describe_group(g)


def _group_head(path: str, rows: int, storage_options: dict | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with _open_group(path, "r", storage_options) as g:
        for member, kind, obj in g.walk():
            if kind == "array":
                out[member] = _take(obj, rows)
            elif kind == "table":
                for name in obj.names:
                    out[f"{member}/{name}"] = _take(obj.cols[name], rows)
    return out


def _verify_group(store: Store, path: str) -> Iterator[Finding]:
    """Every member of the group's newest version, verified by its own format."""
    with open_group((store, path), "r") as g:
        for member, kind, _ in _walk_nodes(g):
            if kind == "group":
                continue
            location = g.member_location(member)
            sub = store.join(path, location)
            probe = Probe(store, sub)
            fmt = next((f for f in FORMATS if f.kind == kind and f.sniff(probe)), None)
            if fmt is None:
                yield Problem(store.url(sub), "", f"group member {member!r}: no {kind} here")
                continue
            yield from guarded(fmt.verify(store, sub), store.url(sub))


# -- single files ---------------------------------------------------------------------------------


def _open_npy(path: str, mode: str, storage_options: dict | None) -> np.ndarray:
    try:
        return np.load(_local(path, ".npy"), mmap_mode="r", allow_pickle=False)
    except (ValueError, EOFError) as exc:
        raise FormatError(f"not a readable .npy file: {exc}", path) from None


def _npy_info(path: str, storage_options: dict | None) -> dict:
    a = _open_npy(path, "r", storage_options)
    return {"type": "npy", "shape": list(a.shape), "dtype": str(a.dtype),
            "fortran_order": bool(a.flags.f_contiguous and not a.flags.c_contiguous),
            "nbytes": int(a.nbytes), "file_size": os.path.getsize(path)}


def _npy_head(path: str, rows: int, storage_options: dict | None) -> dict[str, Any]:
    a = _open_npy(path, "r", storage_options)
    return {"value": np.array(a[:rows]) if a.ndim else np.array(a)}


def _verify_npy(store: Store, path: str) -> Iterator[Finding]:
    """A .npy file has no chunks: its header parses and its data is all there."""
    url = store.url(path)
    try:
        a = _open_npy(path, "r", None)
        np.asarray(a[-1:] if a.ndim and len(a) else a).copy()  # the last bytes are there
    except (FormatError, ValueError, OSError) as exc:
        yield Problem.from_error(exc, url)
        return
    yield Checked(url)


def _open_blp(path: str, mode: str, storage_options: dict | None) -> np.ndarray:
    """The array a Bloscpack file holds, or its bytes (as uint8) when it holds no array."""
    from carray.formats import bloscpack

    meta = bloscpack.info(path, storage_options=storage_options)["metadata"]
    if isinstance(meta, dict) and meta.get("container") == "numpy":
        return bloscpack.unpack_array(path, storage_options=storage_options)
    return np.frombuffer(bloscpack.unpack_bytes(path, storage_options=storage_options),
                         np.uint8)


def _blp_info(path: str, storage_options: dict | None) -> dict:
    from carray.formats import bloscpack

    return bloscpack.info(path, storage_options=storage_options)


def _blp_head(path: str, rows: int, storage_options: dict | None) -> dict[str, Any]:
    a = _open_blp(path, "r", storage_options)
    return {"value": a[:rows] if a.ndim else a}


def file_cparams(path: str, storage_options: dict | None = None) -> CParams | None:
    """How the chunks of a Bloscpack file or a Blosc2 frame (SChunk) at ``path`` are
    compressed (None for other formats, or a Bloscpack file without chunks).

    A frame's header records its codec, level and filters.  A Bloscpack file's chunks
    are Blosc1 chunks, whose headers record the codec and shuffle but no level: Blosc's
    default (5) stands for it, 0 for chunks stored uncompressed.
    """
    name = guess(path, storage_options).name
    if name == "b2frame":
        with _dataset_module("b2frame").read_frame(path, storage_options=storage_options) as f:
            h = f.header
            return frame_cparams(h.compcode, h.clevel, h.filters, h.filters_meta)
    if name != "bloscpack":
        return None
    from carray.formats import bloscpack

    first = bloscpack.info(path, storage_options=storage_options)["first_chunk"]
    if first is None or first["codec"] not in CNAMES:
        return None
    shuffle = Shuffle.BITSHUFFLE if first["bitshuffle"] else \
        Shuffle.SHUFFLE if first["shuffle"] else Shuffle.NOSHUFFLE
    return CParams(clevel=0 if first["memcpyed"] else 5, cname=first["codec"], shuffle=shuffle)


def _open_frame(path: str, mode: str, storage_options: dict | None) -> np.ndarray:
    return _dataset_module("b2frame").read_array(path, storage_options=storage_options)


def _frame_info(path: str, storage_options: dict | None) -> dict:
    with _dataset_module("b2frame").read_frame(path, storage_options=storage_options) as f:
        h = f.header
        cp = frame_cparams(h.compcode, h.clevel, h.filters, h.filters_meta)
        return {"type": "b2frame", "kind": f.kind, "shape": list(f.shape),
                "dtype": str(f.dtype), "chunks": list(f.chunkshape), "nchunks": f.nchunks,
                "codec": cp.cname, "clevel": cp.clevel, "shuffle": cp.shuffle.name.lower(),
                "nbytes": h.nbytes, "cbytes": h.cbytes, "vlmeta": sorted(f.vlmeta_raw)}


def _dataset_module(name: str) -> Any:
    import importlib

    module = "carray.layouts.b2nd.frame" if name == "b2frame" else f"carray.formats.{name}"
    return importlib.import_module(module)


def _open_ds(path: str, mode: str, storage_options: dict | None) -> dict:
    return _dataset_module("ds").read(path, storage_options=storage_options)


def _ds_info(path: str, storage_options: dict | None) -> dict:
    ds = _dataset_module("ds")
    header = ds.read_header(path, storage_options=storage_options)
    return describe_dataset(dict(header), "ds")


def _ds_head(path: str, rows: int, storage_options: dict | None) -> dict[str, Any]:
    from carray.formats.ds.reader import Reader

    out = {}
    with Reader(path, storage_options) as reader:  # one open, one header for every variable
        for key, v in reader.header.layouts.items():
            if v.shape is None:
                continue
            # The first block reads only its own bits of a mask, not the whole mask.
            first = next(reader.iter_rows(v, rows), None) if rows else None
            out[unescape(key)] = first if first is not None else \
                reader.read_variable(v, (slice(0, rows),) if v.shape else None)
    return out


def _open_nc(path: str, mode: str, storage_options: dict | None) -> dict:
    return _dataset_module("netcdf").read(_local(path, "NetCDF"))


def _nc_info(path: str, storage_options: dict | None) -> dict:
    return describe_dataset(_dataset_module("netcdf").read_header(_local(path, "NetCDF")),
                            "netcdf")


def _nc_head(path: str, rows: int, storage_options: dict | None) -> dict[str, Any]:
    d = _open_nc(path, "r", storage_options)
    return {name: (v[:rows] if getattr(v, "ndim", 0) else v)
            for name, v in d.items() if not name.startswith(".")}


def _verify_nc(store: Store, path: str) -> Iterator[Finding]:
    url = store.url(path)
    try:
        d = _open_nc(path, "r", None)
    except Exception as exc:  # noqa: BLE001 - the NetCDF library raises its own types
        yield Problem(url, "", f"not a readable NetCDF file: {exc}")
        return
    yield Checked(url, sum(1 for name in d if not name.startswith(".")))


def describe_dataset(header: dict, fmt: str) -> dict:
    """A ds-shaped header (variable -> attributes with ``.dims``/``.size``/``.type``) as
    the facts ``carray info`` shows."""
    from carray.formats.ds.header import default_dims, unescape

    variables = []
    for key, entry in header.items():
        if key.startswith("."):
            continue
        size = entry.get(".size")
        dims = entry.get(".dims") or default_dims(key, len(size or []))
        variables.append({"name": unescape(key), "type": entry.get(".type", "float64"),
                          "dims": list(dims), "shape": size,
                          "attrs": {k: v for k, v in entry.items() if not k.startswith(".")}})
    return {"type": fmt, "variables": variables, "attrs": header.get(".", {})}


# -- the formats ----------------------------------------------------------------------------------

_NC_MAGIC = (b"CDF\x01", b"CDF\x02", b"CDF\x05", b"\x89HDF\r\n\x1a\n")

#: Every format, in the order sniffing tries them: tables first (a table's root
#: looks like a bcolz array's), frames before directories, files by magic.
FORMATS: tuple[Format, ...] = (
    Format("group", "group", (".cagroup",), "carray group", lambda probe: probe.group,
           _open_group, _verify_group, _group_info, _group_head),
    Format("ctable", "table", (".ctable", ".bcolz"), "table directory",
           lambda probe: probe.table, _open_table, verify_table,
           _table_info, _table_head, container=True),
    Format("b2nd", "array", (".b2nd",), "b2nd frame",
           _frame_sniffer("b2nd"), _open_array, _layout_verify("b2nd"), _array_info,
           _array_head, container=True),
    Format("caterva", "array", (".caterva",), "caterva frame",
           _frame_sniffer("caterva"), _open_array, _layout_verify("b2nd"), _array_info,
           _array_head, writable=False, container=True),
    Format("carray", "array", (".carray", ".ca"), "superchunk directory",
           _layout_sniffer("superchunk"), _open_array, _layout_verify("superchunk"),
           _array_info, _array_head, container=True),
    Format("bcolz", "array", (".bcolz",), "bcolz directory",
           _layout_sniffer("bcolz"), _open_array, _layout_verify("bcolz"), _array_info,
           _array_head, container=True),
    Format("zarr", "array", (".zarr",), "Zarr v3 array", lambda probe: probe.zarr,
           zarr_arrays.open_zarr, zarr_arrays.verify, zarr_arrays.info, zarr_arrays.head),
    # A group of arrays: shown and checked as a dataset is (converted as a group).
    Format("zarr-group", "dataset", (), "Zarr v3 group", lambda probe: probe.zarr_group,
           group_zarr.open_root, group_zarr.verify, group_zarr.info,
           group_zarr.head, remote=False, writable=False),
    Format("parquet", "table", (".parquet", ".pq"), "Parquet file",
           _magic(table_files.PARQUET_MAGIC), table_files.open_parquet,
           table_files.verify_parquet, table_files.parquet_info, table_files.parquet_head,
           remote=False),
    Format("bloscpack", "file", (".blp",), "Bloscpack file",
           _magic(BLP_MAGIC), _open_blp, _blp_verify.verify, _blp_info, _blp_head,
           writable=False),
    Format("b2frame", "file", (".b2frame",), "Blosc2 frame",
           _frame_sniffer("schunk"), _open_frame, _b2frame_verify.verify, _frame_info,
           lambda p, n, o: {"value": _open_frame(p, "r", o)[:n]}, writable=False),
    Format("ds", "dataset", (".ds",), "ds file", _magic(DS_MAGIC), _open_ds,
           _ds_verify.verify, _ds_info, _ds_head),
    Format("netcdf", "dataset", (".nc", ".nc4", ".nc3", ".netcdf"), "NetCDF file",
           _magic(*_NC_MAGIC), _open_nc, _verify_nc, _nc_info, _nc_head, remote=False),
    Format("npy", "array", (".npy",), "numpy .npy file", _magic(np.lib.format.MAGIC_PREFIX),
           _open_npy, _verify_npy, _npy_info, _npy_head, remote=False),
    # CSV has no magic: last, a .csv file whose first bytes are text.
    Format("csv", "table", (".csv",), "CSV file",
           lambda probe: table_files.looks_like_csv(probe.path, probe.head),
           table_files.open_csv, table_files.verify_csv, table_files.csv_info,
           table_files.csv_head, remote=False),
)


def get(name: str) -> Format:
    """The format called ``name``; raises ValueError naming the known ones."""
    for fmt in FORMATS:
        if fmt.name == name:
            return fmt
    raise ValueError(f"unknown format {name!r} (known: {', '.join(f.name for f in FORMATS)})")


def extension_of(path: Location) -> str:
    """The lower-case suffix of ``path`` (``""`` when none)."""
    return os.path.splitext(os.fspath(path).rstrip("/\\"))[1].lower()


def for_extension(path: Location, kinds: tuple[Kind, ...] | None = None) -> Format | None:
    """The format whose extensions include ``path``'s, of one of ``kinds`` (None: none)."""
    ext = extension_of(path)
    for fmt in FORMATS:
        if ext and ext in fmt.extensions and (kinds is None or fmt.kind in kinds):
            return fmt
    return None


def locate(path: Location, storage_options: dict | None = None) -> tuple[Store, str]:
    """The store and key of an existing ``path``; ContainerNotFoundError when nothing is there."""
    text = os.fspath(path)
    store, key = resolve(text, storage_options if is_url(text) else None)
    store.invalidate(key)
    if not store.exists(key):
        raise ContainerNotFoundError(f"{store.url(key)}: no such dataset or file")
    return store, key


def sniff(path: Location, storage_options: dict | None = None) -> Format:
    """The format of what is stored at ``path``, told by its bytes and files.

    Raises
    ------
    ContainerNotFoundError
        Nothing is at ``path``.
    FormatError
        Something is there, in no format carray knows.
    """
    store, key = locate(path, storage_options)
    probe = Probe(store, key)
    for fmt in FORMATS:
        if fmt.sniff(probe):
            return fmt
    known = ", ".join(f.name for f in FORMATS)
    if store.isdir(key):  # say which marker files were looked for
        markers = f"{META_DIR}/{STORAGE_FILE} (an array), {ROOTDIRS} (a table), {SPARSE_INDEX}"
        raise FormatError(f"a directory with none of {markers} (a sparse frame): not in any "
                          f"format carray reads (known: {known})", store.url(key))
    raise FormatError(f"not in any format carray reads (known: {known})", store.url(key))


def guess(path: Location, storage_options: dict | None = None) -> Format:
    """As :func:`sniff`, but when no format recognises the bytes and the extension names
    one, that one: its own reader then says precisely what is wrong with the file."""
    try:
        return sniff(path, storage_options)
    except FormatError:
        fmt = for_extension(path)
        if fmt is None:
            raise
        return fmt


def open_any(path: Location, mode: str = "r", storage_options: dict | None = None) -> Any:
    """Open whatever is at ``path`` with its format's opener (see :func:`sniff`)."""
    text = os.fspath(path)
    return guess(text, storage_options).open(text, mode, storage_options)


def verify(path: Location, storage_options: dict | None = None) -> Iterator[Finding]:
    """Every problem (and every chunk checked) of what is at ``path``, whatever its format.

    A missing path or an unknown format is itself the one problem found.
    """
    text = os.fspath(path)
    try:
        store, key = locate(text, storage_options)
        fmt = guess(text, storage_options)
    except (CArrayError, OSError, ValueError, ImportError) as exc:
        # Nothing there, an unknown format, or a URL no file system serves.
        yield Problem(text, "", " ".join(str(exc).removeprefix(f"{text}: ").removeprefix(
            f"{os.path.abspath(text)}: ").split()))
        return
    yield from guarded(fmt.verify(store, key), store.url(key))


__all__ = ["FORMATS", "HEAD_BYTES", "Format", "Probe", "describe_array", "describe_dataset", "describe_group", "describe_table",
           "extension_of", "file_cparams", "for_extension", "get", "guess", "locate", "open_any", "sniff",
           "verify"]
