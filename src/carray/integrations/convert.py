"""Converting between formats: arrays (carray directories, bcolz, .b2nd, .npy) and
datasets (.ds, .nc).

Each side is a row of a small table chosen by ``to=`` or by the destination's
extension.  Arrays are copied a block of rows at a time (never the whole array in
memory), into a temporary name renamed into place at the end, so an interrupted
conversion leaves no half-written destination.  The destination keeps the
source's chunk and block shapes where its format can hold them.

Either side may be a local path or an fsspec URL (``s3://bucket/x``,
``memory://x``), except ``.npy`` files and NetCDF datasets, which stay local;
``storage_options`` go to the file system of whichever side is a URL.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import itertools
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from carray import registry
from carray.array import transfer
from carray.array.array import carray
from carray.array.container import close_or_discard
from carray.core.params import CParams
from carray.errors import ContainerExistsError, UnsupportedOptionError
from carray.formats.local_write import write_file
from carray.integrations import blp_moves, zarr_arrays, zarr_moves
from carray.integrations.table_files import table_format_for
from carray.integrations.zarr_arrays import cparams_of
from carray.stores import LOCAL, Store, is_url, resolve
from carray.stores.staging import staged

# Rows copied per step: whole source chunks, about this many bytes.
_COPY_BYTES = 64 * 2**20


def options_for(location: str | os.PathLike, storage_options: dict | None) -> dict | None:
    """``storage_options`` if ``location`` is a URL, else None (local paths take none)."""
    return storage_options if is_url(os.fspath(location)) else None


def _local_only(location: str | os.PathLike, what: str) -> None:
    if is_url(os.fspath(location)):
        raise ValueError(f"{os.fspath(location)}: {what} are read and written on local "
                         "paths only; copy the file to or from the URL yourself")


# -- datasets ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class DatasetFormat:
    """A dataset format: a module with ``read``, ``write`` and ``read_header``.

    The module is imported only when used; ``remote`` says whether its functions
    take ``storage_options`` and URLs.
    """

    name: str
    extensions: tuple[str, ...]
    module: str
    write_options: tuple[str, ...] = ()  # keyword options its writer accepts
    remote: bool = False

    def _mod(self):
        return importlib.import_module(self.module)

    def _where(self, path, storage_options: dict | None) -> dict:
        """The keywords that pass ``storage_options`` on for ``path``."""
        if not self.remote:
            _local_only(path, f"{self.name} files")
            return {}
        options = options_for(path, storage_options)
        return {"storage_options": options} if options else {}

    def read(self, path, variables=None, sel=None, *,
             storage_options: dict | None = None) -> dict:
        return self._mod().read(path, variables, sel, **self._where(path, storage_options))

    def read_header(self, path, *, storage_options: dict | None = None) -> dict:
        return self._mod().read_header(path, **self._where(path, storage_options))

    def write(self, path, dataset, *, storage_options: dict | None = None, **options) -> None:
        unknown = set(options) - set(self.write_options)
        if unknown:
            raise ValueError(f"{self.name} output does not take {', '.join(sorted(unknown))}")
        self._mod().write(path, dataset, **options, **self._where(path, storage_options))


FORMATS: tuple[DatasetFormat, ...] = (
    DatasetFormat("ds", (".ds",), "carray.formats.ds", write_options=("fsync",), remote=True),
    DatasetFormat("netcdf", (".nc", ".nc4", ".nc3", ".netcdf"), "carray.formats.netcdf",
                  write_options=("unlimited", "fsync")),
)


def _ext(path) -> str:
    return os.path.splitext(os.fspath(path).rstrip("/\\"))[1].lower()


def format_for(path: str | os.PathLike, name: str | None = None) -> DatasetFormat:
    """The dataset format named ``name``, or else the one whose extension ``path`` has."""
    if name is not None:
        for fmt in FORMATS:
            if fmt.name == name:
                return fmt
        raise ValueError(f"unknown dataset format {name!r} (known: "
                         f"{', '.join(f.name for f in FORMATS)})")
    ext = _ext(path)
    for fmt in FORMATS:
        if ext in fmt.extensions:
            return fmt
    known = ", ".join(e for f in FORMATS for e in f.extensions)
    raise ValueError(f"{os.fspath(path)}: no dataset reader or writer for extension "
                     f"{ext or '(none)'!r} (known: {known}; or pass --to FORMAT)")


def read_any(path, variables=None, sel=None, *, storage_options: dict | None = None) -> dict:
    """Read any supported dataset file (by extension), local or at a URL (``.ds``)."""
    return format_for(path).read(path, variables, sel, storage_options=storage_options)


def write_any(path, dataset, fmt: str | None = None, *, storage_options: dict | None = None,
              **options) -> None:
    """Write a dataset in the format of ``path``'s extension (or ``fmt``)."""
    format_for(path, fmt).write(path, dataset, storage_options=storage_options, **options)


# -- arrays -----------------------------------------------------------------------------------

#: Array formats convert writes: name -> (extensions, what it is), from the registry.
ARRAY_FORMATS: dict[str, tuple[tuple[str, ...], str]] = {
    **{f.name: (f.extensions, f.description) for f in registry.FORMATS
       if f.kind == "array" and f.writable},
    # A file of an array's chunks (whole rows each), written by blp_moves.
    "bloscpack": ((".blp",), "Bloscpack file"),
}


def array_format_for(path: str | os.PathLike, name: str | None = None) -> str:
    """The array format named ``name``, or the one ``path``'s extension names.

    A path with no extension is a carray (superchunk) directory; any other
    extension no array writer knows is refused (rather than, say, writing a carray
    directory named ``x.zarr``).
    """
    if name is not None:
        if name not in ARRAY_FORMATS:
            raise ValueError(f"unknown array format {name!r} (known: {', '.join(ARRAY_FORMATS)})")
        return name
    ext = _ext(path)
    if not ext:
        return "carray"
    for fmt, (extensions, _) in ARRAY_FORMATS.items():
        if ext in extensions:
            return fmt
    known = ", ".join(e for exts, _ in ARRAY_FORMATS.values() for e in exts)
    raise ValueError(f"{os.fspath(path)}: no array writer for {ext!r} files (known: {known}; "
                     "or pass --to FORMAT)")


def open_array(path: str | os.PathLike, storage_options: dict | None = None) -> Any:
    """An array to copy from, in any array format the registry knows: a carray (local
    or at a URL; ``storage_options`` then go to its file system), or a numpy array
    (a ``.npy`` file memory-mapped, a Bloscpack file or Blosc2 SChunk decoded)."""
    path = os.fspath(path)
    options = options_for(path, storage_options)
    fmt = registry.guess(path, options)
    if fmt.kind == "table":
        raise ValueError(f"{path}: a table, not an array; convert its columns one by one")
    if fmt.kind == "dataset":
        raise ValueError(f"{path}: a {fmt.description} (a dataset), not an array")
    if not fmt.remote:
        _local_only(path, f"{fmt.description}s")
    src = fmt.open(path, "r", options)
    # Anything sliced by rows will do: carrays, numpy and Zarr arrays.
    if not all(hasattr(src, n) for n in ("shape", "dtype", "__getitem__")):  # pragma: no cover
        close_array(src)
        raise ValueError(f"{path}: a {fmt.description}, not an array")
    return src


def close_array(src: Any) -> None:
    """Release what :func:`open_array` holds open (nothing for a ``.npy`` file)."""
    close = getattr(src, "close", None)
    if close is not None and not isinstance(src, np.ndarray):
        close()


def source_cparams(src: Any, path: str | os.PathLike | None = None,
                   storage_options: dict | None = None) -> CParams | None:
    """How ``src`` (from :func:`open_array` of ``path``) is compressed, as carray's
    parameters: a carray's own; the nearest Blosc ones of a Zarr array
    (:func:`carray.integrations.zarr_arrays.cparams_of`); a Bloscpack file's or a Blosc2
    frame's (:func:`carray.registry.file_cparams`).  None when it is not compressed or
    carray cannot tell (the destination then takes carray's defaults)."""
    own = getattr(src, "cparams", None)
    if isinstance(own, CParams):
        return own
    zarr = cparams_of(src)
    if zarr is not None or path is None:
        return zarr
    return registry.file_cparams(os.fspath(path), options_for(path, storage_options))


def _grid_of(src: Any, fmt: str) -> dict[str, Any]:
    """Chunk keywords for the destination: the source's where the format can hold them."""
    chunks = getattr(src, "chunks", None)
    if chunks is None:
        return {}
    blocks = getattr(src, "blocks", None)
    if not isinstance(blocks, tuple):  # zarr's ``blocks`` is an indexer, not a shape
        blocks = None
    rows = blocks is None and tuple(chunks[1:]) == tuple(max(n, 1) for n in src.shape[1:])
    if fmt == "bcolz":
        return {"chunklen": chunks[0]} if rows else {}
    return {"chunks": tuple(chunks), "blocks": blocks}


def _given_grid(fmt: str, shape: tuple[int, ...], chunks: tuple[int, ...] | None,
                blocks: tuple[int, ...] | None, cparams: Any) -> dict[str, Any]:
    """The chunk keywords of a destination in format ``fmt`` that ``chunks`` and
    ``blocks`` ask for (empty when neither is given).

    Raises
    ------
    UnsupportedOptionError
        A shape does not have one positive size per axis of ``shape``, or the format
        cannot hold it (``.npy`` files are neither chunked nor compressed, bcolz chunks
        are runs of whole rows without blocks, Zarr arrays have no blocks).
    """
    given = {name: tuple(value) for name, value in (("chunks", chunks), ("blocks", blocks))
             if value is not None}
    if fmt == "npy" and (given or cparams is not None):
        asked = ", ".join([*given, *(["compression"] if cparams is not None else [])])
        raise UnsupportedOptionError(f"a .npy file is neither chunked nor compressed: "
                                     f"{asked} cannot apply")
    for name, value in given.items():
        if len(value) != len(shape):
            raise UnsupportedOptionError(f"{name} {value} is for a {len(value)}-d array, "
                                         f"but the array is {len(shape)}-d (shape {shape})")
        if min(value, default=1) < 1:
            raise UnsupportedOptionError(f"{name} {value}: every size must be at least 1")
    if fmt in ("bcolz", "bloscpack"):
        if "blocks" in given:
            what = "bcolz directories" if fmt == "bcolz" else "Bloscpack files"
            raise UnsupportedOptionError(f"{what} have no blocks (Blosc splits their "
                                         "chunks itself): leave out blocks")
        if "chunks" in given:
            if given["chunks"][1:] != shape[1:]:
                rows = ",".join(map(str, ("N", *shape[1:])))
                what = "bcolz directories" if fmt == "bcolz" else "Bloscpack files"
                raise UnsupportedOptionError(f"{what} chunk by whole rows: chunks "
                                             f"{given['chunks']} must be {rows} for an array "
                                             f"of shape {shape}")
            return {"chunklen": given["chunks"][0]}
    if fmt == "zarr" and "blocks" in given:
        raise UnsupportedOptionError("Zarr arrays have no blocks: leave out blocks")
    return given


def _place(store: Store, path: str) -> str:
    """What identifies ``path`` across stores, to refuse copying a dataset onto itself."""
    return store.url(path) if store.remote else os.path.abspath(path)


def _attrs_of(source: Any) -> dict[str, Any]:
    """The attributes of an array to copy from, as they were set (a Zarr array's read
    back from their JSON form); none for numpy arrays."""
    attrs = getattr(source, "attrs", None)
    if attrs is None:
        return {}
    return zarr_arrays.read_attrs(source) if zarr_arrays.is_zarr(source) \
        else dict(attrs.items())


def _copy_to_carray(source: Any, target: str, fmt: str, given: dict[str, Any], cparams: Any,
                    progress: Callable[[int, int], None] | None,
                    storage_options: dict | None,
                    origin: tuple[str, dict | None] = ("", None),
                    max_mem: int | str | None = None) -> transfer.MoveStats:
    """Copy ``source`` into a new carray dataset of format ``fmt`` at ``target``, keeping
    its chunk and block shapes and compression unless ``given`` (chunk keywords from
    :func:`_given_grid`) or ``cparams`` say otherwise, and its attributes; returns which
    chunks moved as stored bytes and which were decoded (:mod:`carray.array.transfer`).
    ``origin``: where a source that is not a carray was opened (a Zarr array's or a
    Bloscpack file's chunks are read from there), with its storage options.  New chunks
    with ``max_mem`` are made by :func:`carray.array.rechunk.rechunk` within that budget."""
    if max_mem is not None and _new_chunks(source, given) is not None:
        return _rechunk_to(source, target, fmt, given, cparams, progress, storage_options,
                           max_mem)
    movable = _movable(source, origin)
    try:
        return _copy_to_new(source, movable, target, fmt, given, cparams, progress,
                            storage_options)
    finally:
        if isinstance(movable, blp_moves.BlpSource):
            movable.close()


def _movable(source: Any, origin: tuple[str, dict | None]) -> Any:
    """``source`` as something whose stored chunks :mod:`carray.array.transfer` can move: a
    carray itself, a Zarr array or a Bloscpack file (read from ``origin``); None when it
    has no chunks to move."""
    if isinstance(source, carray):
        return source
    return zarr_moves.source_of(source, *origin) or blp_moves.source_of(source, *origin)


def _copy_to_new(source: Any, movable: Any, target: str, fmt: str, given: dict[str, Any],
                 cparams: Any, progress: Callable[[int, int], None] | None,
                 storage_options: dict | None) -> transfer.MoveStats:
    """:func:`_copy_to_carray` once the source's movable chunks are known."""
    shape, dtype = tuple(source.shape), source.dtype
    grid = _grid_of(movable if isinstance(movable, blp_moves.BlpSource) else source, fmt)
    if fmt == "b2nd" and isinstance(source, carray) and grid.get("blocks") is None:
        grid["blocks"] = transfer.natural_blocks(source)  # so the chunks can move
    if "chunks" in given or "chunklen" in given:  # the source's blocks may not fit them
        grid = {"blocks": None, **given} if fmt != "bcolz" else given
    else:
        grid.update(given)
    out = carray(np.empty((0, *shape[1:]), dtype=dtype), rootdir=target,
                 mode="w", format="superchunk" if fmt == "carray" else fmt,
                 cparams=cparams, expectedlen=shape[0], storage_options=storage_options,
                 **grid)
    try:
        for key, value in _attrs_of(source).items():
            out.attrs[key] = value
        if movable is not None:
            stats = transfer.fill(out, movable, _items_progress(progress, dtype.itemsize))
        else:
            for _, block in _row_blocks(source, progress):
                out.append(block)
            out.flush()
            stats = transfer.MoveStats(decoded=out.engine.grid.nchunks)
            stats.reasons["a source without carray chunks, read as items"] = stats.decoded
    except BaseException:
        # Closed before the temporary is removed, so nothing writes into it later.
        with contextlib.suppress(Exception):
            out.discard()
        raise
    close_or_discard(out)
    return stats


def _items_progress(progress: Callable[[int, int], None] | None, itemsize: int
                    ) -> Callable[[int, int], None] | None:
    """``progress(bytes_done, bytes_total)`` called with items instead."""
    if progress is None:
        return None
    return lambda done, total: progress(done * itemsize, total * itemsize)


def _new_chunks(source: Any, given: dict[str, Any]) -> tuple[int, ...] | None:
    """The chunk shape ``given`` asks for, where it differs from ``source``'s (None: the
    same, or none asked for: the chunks can move)."""
    if "chunks" in given:
        chunks = tuple(given["chunks"])
    elif "chunklen" in given:
        chunks = (given["chunklen"], *tuple(source.shape)[1:])
    else:
        return None
    return None if chunks == tuple(getattr(source, "chunks", ()) or ()) else chunks


def _rechunk_to(source: Any, target: str, fmt: str, given: dict[str, Any], cparams: Any,
                progress: Callable[[int, int], None] | None, storage_options: dict | None,
                max_mem: int | str) -> transfer.MoveStats:
    """:func:`_copy_to_carray` with new chunks, built at ``target`` within ``max_mem``
    (every chunk is new: none moves)."""
    from carray.array.rechunk import rechunk

    chunks = _new_chunks(source, given)
    options = {"storage_options": storage_options} if storage_options else {}
    out = rechunk(source, chunks, given.get("blocks"), rootdir=target, max_mem=max_mem,
                  progress=progress, in_place=True, cparams=cparams,
                  format="superchunk" if fmt == "carray" else fmt, **options)
    try:
        for key, value in _attrs_of(source).items():
            out.attrs[key] = value
        stats = transfer.MoveStats(decoded=out.engine.grid.nchunks)
    except BaseException:
        with contextlib.suppress(Exception):
            out.discard()
        raise
    close_or_discard(out)
    stats.reasons["new chunks, rechunked within max_mem"] = stats.decoded
    return stats


def _destination(src: str, dst: str, fmt: str, overwrite: bool,
                 storage_options: dict | None) -> tuple[Store, str, dict | None]:
    """Where ``dst`` is (its store, path and options), once it may be written."""
    if fmt == "npy":
        _local_only(dst, ".npy files")
    sstore, spath = resolve(src, options_for(src, storage_options))
    dst_options = options_for(dst, storage_options)
    store, path = resolve(dst, dst_options)
    store.invalidate(path)
    if store.exists(path) and not overwrite:
        raise ContainerExistsError(f"{store.url(path)}: already exists "
                                   "(pass overwrite=True / --force)")
    if _place(sstore, spath) == _place(store, path):
        raise ValueError("source and destination are the same path")
    return store, path, dst_options


def convert_array(src: str | os.PathLike, dst: str | os.PathLike, to: str | None = None, *,
                  chunks: tuple[int, ...] | None = None,
                  blocks: tuple[int, ...] | None = None, cparams: Any = None,
                  overwrite: bool = False,
                  progress: Callable[[int, int], None] | None = None,
                  storage_options: dict | None = None,
                  max_mem: int | str | None = "256MiB") -> transfer.MoveStats | None:
    """Copy an array between carray directories, bcolz 1.x, ``.b2nd``, Zarr v3 and ``.npy``.

    Chunks that mean the same bytes in both formats move as their stored bytes, checked
    by the source's checksums; the others are decoded and compressed again.

    Parameters
    ----------
    src, dst : path or URL
        Source (its format is found from what is there) and destination. Either may
        be an fsspec URL (``s3://bucket/x.b2nd``), except for ``.npy`` files.
    to : str, optional
        Destination format (default: from ``dst``'s extension; see :data:`ARRAY_FORMATS`).
    chunks, blocks, cparams : optional
        Override the destination's chunk and block shapes and compression
        (defaults: the source's, where the format can hold them).  bcolz takes
        chunks of whole rows, ``(n, *shape[1:])``, as its ``chunklen`` ``n``.
    overwrite : bool
        Replace an existing ``dst`` (the old one stays until the copy is complete).
    progress, storage_options : optional
        ``progress(bytes_done, bytes_total)``, called as the copy goes; the options of
        the fsspec file systems of ``src`` and ``dst`` where they are URLs.
    max_mem : int or str, optional
        With new ``chunks`` (carray, bcolz, ``.b2nd``): what the rechunk may hold
        (:func:`carray.array.rechunk.rechunk`).  None: rows of source chunks are copied.

    Returns
    -------
    MoveStats or None
        How many chunks moved as bytes and how many were decoded, and why (None for
        ``.npy``).  The copy is built under a temporary name beside ``dst`` and renamed
        in (on an object store that copies every object): whatever fails, nothing is
        left at ``dst`` or under the temporary name.

    Raises
    ------
    ContainerExistsError
        ``dst`` exists and ``overwrite`` is false.
    UnsupportedOptionError
        ``chunks`` or ``blocks`` without one size per axis, or that the destination
        cannot hold (``.npy``: none; bcolz: whole rows, no blocks; Zarr: no blocks).
    ValueError
        Same source and destination, a table or 0-d source, or a ``.npy`` URL.
    """
    src, dst = os.fspath(src), os.fspath(dst)
    fmt = array_format_for(dst, to)
    store, path, dst_options = _destination(src, dst, fmt, overwrite, storage_options)
    source = open_array(src, storage_options)
    try:
        shape = tuple(source.shape)
        if not shape:
            raise ValueError(f"{src}: a 0-d array has no rows to copy")
        try:
            given = _given_grid(fmt, shape, chunks, blocks, cparams)
        except UnsupportedOptionError as exc:
            raise UnsupportedOptionError(f"cannot convert to {dst}: {exc}") from None
        if cparams is None and fmt != "npy":
            cparams = source_cparams(source, src, storage_options)
        with staged(store, path, overwrite=overwrite) as staging:
            return _copy(source, fmt, staging.location, given, cparams, progress,
                         dst_options, (src, options_for(src, storage_options)), max_mem)
    finally:
        close_array(source)


def _copy(source: Any, fmt: str, tmp: str, given: dict[str, Any], cparams: Any,
          progress: Callable[[int, int], None] | None, storage_options: dict | None,
          origin: tuple[str, dict | None] = ("", None),
          max_mem: int | str | None = None) -> transfer.MoveStats | None:
    """Copy ``source`` to a new ``fmt`` array at ``tmp`` (chunk keywords ``given``);
    which chunks moved as bytes (None: not a chunked output)."""
    if fmt == "npy":
        _copy_to_npy(source, tmp, progress)
        return None
    if fmt == "zarr":
        return _copy_to_zarr(source, tmp, given.get("chunks"), cparams, progress,
                             storage_options)
    if fmt == "bloscpack":
        if source.dtype.hasobject:
            raise UnsupportedOptionError("object arrays cannot be stored in Bloscpack files")
        return blp_moves.copy_to_blp(source, tmp, given.get("chunklen"), cparams,
                                     storage_options)
    return _copy_to_carray(source, tmp, fmt, given, cparams, progress, storage_options, origin,
                           max_mem)


def _row_blocks(source: Any, progress: Callable[[int, int], None] | None
                ) -> Iterator[tuple[int, np.ndarray]]:
    """``(first row, rows)`` of ``source`` in blocks of whole chunks of about
    ``_COPY_BYTES``, reporting the bytes done so far after each."""
    shape, itemsize = source.shape, source.dtype.itemsize
    rowbytes = max(int(np.prod(shape[1:], dtype=np.int64)) * itemsize, 1)
    step = getattr(source, "chunks", (1,))[0]
    blen = max(step, _COPY_BYTES // rowbytes // step * step)
    total = int(np.prod(shape, dtype=np.int64)) * itemsize
    done = 0
    for start in range(0, shape[0], blen):
        block = np.asarray(source[start:start + blen])
        yield start, block
        done += block.nbytes
        if progress is not None:
            progress(done, total)


def _copy_to_zarr(source: Any, tmp: str, chunks: tuple[int, ...] | None, cparams: Any,
                  progress: Callable[[int, int], None] | None,
                  storage_options: dict | None) -> transfer.MoveStats | None:
    """Write ``source`` as a Zarr v3 array, with its chunk shape and codec where given:
    a bcolz source's Blosc1 chunks move as bytes (:mod:`carray.integrations.zarr_moves`),
    anything else is written through Zarr (None)."""
    from carray.integrations.zarr_arrays import write_zarr

    if isinstance(source, carray):
        moved = zarr_moves.copy_to_zarr(source, tmp, chunks, cparams, _attrs_of(source),
                                        storage_options)
        if moved is not None:
            if progress is not None:
                total = source.nbytes
                progress(total, total)
            return moved

    chunks = chunks or getattr(source, "chunks", None)
    write_zarr(tmp, tuple(source.shape), source.dtype, _row_blocks(source, progress),
               chunks=None if chunks is None else tuple(chunks),
               cparams=cparams,
               attrs=_attrs_of(source),
               storage_options=storage_options,
               fill_value=getattr(source, "dflt", None))
    return None


def _copy_to_npy(source: Any, tmp: str, progress: Callable[[int, int], None] | None) -> None:
    """Write ``source`` as a ``.npy`` file at ``tmp``: its header, then its rows a block
    at a time with plain writes (a memory map would turn a full disk into SIGBUS)."""
    blocks = ((np.ascontiguousarray(block),) for _, block in _row_blocks(source, progress))
    write_file(tmp, itertools.chain([(_npy_header(source.shape, source.dtype),)], blocks),
               fsync=True)


def _npy_header(shape: tuple[int, ...], dtype: np.dtype) -> bytes:
    """The header of a ``.npy`` file of a C-order array: version 1.0, or 2.0 when it is
    too long for 1.0 (as :func:`numpy.save` does)."""
    if np.dtype(dtype).hasobject:
        raise UnsupportedOptionError("object arrays cannot be written to .npy files "
                                     "without pickles")
    fields = {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)),
              "fortran_order": False, "shape": tuple(shape)}
    out = io.BytesIO()
    try:
        np.lib.format.write_array_header_1_0(out, fields)
    except ValueError:  # more than 64 KiB of header
        out = io.BytesIO()
        np.lib.format.write_array_header_2_0(out, fields)
    return out.getvalue()


# -- tables -----------------------------------------------------------------------------------


def convert_table(src: str | os.PathLike, dst: str | os.PathLike, to: str | None = None, *,
                  overwrite: bool = False,
                  progress: Callable[[int, int], None] | None = None,
                  storage_options: dict | None = None, **options: Any) -> None:
    """Convert a table between a ctable directory, a Parquet file, a CSV file and a dataset.

    The source is a ctable, a Parquet file, a CSV file or a ``.ds``/``.nc`` dataset whose
    variables are 1-d along one dimension; the destination's format comes from
    ``to`` or its extension (``.ctable``/``.bcolz``, ``.parquet``, ``.csv``, ``.ds``,
    ``.nc``).  Rows move a batch at a time between ctables, Parquet and CSV files; datasets are
    read or written whole.  ``progress(rows_done, rows_total)`` follows the rows.
    """
    from carray.integrations.table_files import convert_table as run

    src, dst = os.fspath(src), os.fspath(dst)
    extra = {k for k, v in options.items() if v is not None}
    if extra:
        raise ValueError(f"{src}: table conversions do not take {', '.join(sorted(extra))}")
    src_format = registry.guess(src, options_for(src, storage_options))
    side, dataset = _table_side(src, src_format.name, src_format.kind)
    dst_name = table_format_for(dst, to)
    dst_dataset = None
    if dst_name is None:
        try:
            dst_dataset = format_for(dst, to)
        except ValueError:
            raise ValueError(f"{dst}: a table converts to a ctable directory (.ctable), a "
                             "Parquet file (.parquet), a CSV file (.csv) or a dataset (.ds, "
                             ".nc); pass --to FORMAT") from None
        dst_name = "dataset"
    if side == "dataset" and dst_name == "dataset":
        raise ValueError(f"{src}: convert a dataset to a dataset with convert(), not as a table")
    for path, name in ((src, side), (dst, dst_name)):
        if name != "ctable":
            _local_only(path, f"{name} files")
    store, path = resolve(dst, options_for(dst, storage_options))
    store.invalidate(path)
    if store.exists(path) and not overwrite:
        raise ContainerExistsError(f"{store.url(path)}: already exists "
                                   "(pass overwrite=True / --force)")
    sstore, spath = resolve(src, options_for(src, storage_options))
    if _place(sstore, spath) == _place(store, path):
        raise ValueError("source and destination are the same path")
    with staged(store, path, overwrite=overwrite) as staging:
        run(src, side, dst, dst_name, store=store, key=path, tmp=staging.tmp,
            dataset_format=dataset or dst_dataset, progress=progress,
            storage_options=storage_options)


def is_table_conversion(src: str | os.PathLike, dst: str | os.PathLike, to: str | None = None,
                        storage_options: dict | None = None) -> bool:
    """Whether :func:`convert` moves a table (its ``progress`` then counts rows, not bytes)."""
    kind = registry.guess(src, options_for(src, storage_options)).kind
    return kind == "table" or (kind == "dataset" and
                               table_format_for(os.fspath(dst), to) is not None)


def _table_side(path: str, name: str, kind: str) -> tuple[str, DatasetFormat | None]:
    """What :func:`carray.integrations.table_files.convert_table` calls a source format."""
    if kind == "dataset":
        return "dataset", format_for(path, name)
    if kind != "table":
        raise ValueError(f"{path}: not a table (a {name} {kind})")
    return name, None


# -- both -------------------------------------------------------------------------------------


def is_dataset_path(path: str | os.PathLike, to: str | None) -> bool:
    """Whether ``path`` (or the format ``to``) is a dataset: by what is stored at an
    existing path, else by the name or the extension."""
    if to is not None:
        return to in {f.name for f in FORMATS}
    text = os.fspath(path)
    store, key = resolve(text, None) if not is_url(text) else (None, None)
    if store is not None and key is not None and store.exists(key):
        return registry.guess(text).kind == "dataset"
    return any(_ext(path) in f.extensions for f in FORMATS)


def convert(src: str | os.PathLike, dst: str | os.PathLike, to: str | None = None, *,
            storage_options: dict | None = None, **options: Any) -> Any:
    """Convert ``src`` to ``dst``: datasets (.ds, .nc), arrays (see :func:`convert_array`),
    tables (:func:`convert_table`) or groups (a carray group, NetCDF-4, HDF5, a Zarr v3
    group or a flat ds file: :func:`carray.integrations.group_files.convert_group`).

    The source's format is told by what is stored there (:func:`carray.registry.sniff`);
    the destination's by ``to`` or its extension, and an extension no writer knows is
    refused.  Either side may be an fsspec URL where its format allows it;
    ``storage_options`` go to the file system of each side that is one.

    Returns what :func:`convert_array` or the group conversion returns (which chunks
    moved as stored bytes), None for datasets and tables.
    """
    from carray.integrations import group_files

    hinted = registry.for_extension(src)
    if hinted is not None and not hinted.remote:  # refused by name, before looking
        _local_only(src, f"{hinted.extensions[0]} files")
    if group_files.is_group_conversion(src, dst, to, storage_options):
        return group_files.convert_group(src, dst, to, storage_options=storage_options,
                                         **options)
    src_format = registry.guess(src, options_for(src, storage_options))
    if is_table_conversion(src, dst, to, storage_options):
        convert_table(src, dst, to, storage_options=storage_options, **options)
    elif src_format.kind == "dataset":
        if to in ARRAY_FORMATS or (to is None and _ext(dst) in
                                   {e for exts, _ in ARRAY_FORMATS.values() for e in exts}):
            raise ValueError(f"cannot convert {os.fspath(src)} to {os.fspath(dst)}: one is a "
                             "dataset (.ds, .nc) and the other an array")
        reader, writer = format_for(src, src_format.name), format_for(dst, to)
        dataset = reader.read(src, storage_options=storage_options)
        if is_url(os.fspath(dst)):  # one put, whole or not at all
            writer.write(dst, dataset, storage_options=storage_options, **options)
        else:
            path = os.path.abspath(os.fspath(dst))
            with staged(LOCAL, path, overwrite=True) as staging:
                writer.write(staging.tmp, dataset, **options)
    elif is_dataset_path(dst, to):
        raise ValueError(f"cannot convert {os.fspath(src)} to {os.fspath(dst)}: one is a "
                         f"dataset (.ds, .nc) and the other an array "
                         f"({src_format.description})")
    else:
        return convert_array(src, dst, to, storage_options=storage_options, **options)
    return None
