"""``carray convert SRC DST [--to FORMAT]``: convert arrays, tables, datasets and groups.

Arrays: carray directories, bcolz 1.x directories, ``.b2nd`` frames and ``.npy``
files; datasets: ``.ds`` and ``.nc``; groups: carray groups, NetCDF-4, HDF5, Zarr v3
groups and flat ``.ds`` files (:mod:`carray.integrations.group_files`).  Either side may be an fsspec URL
(``s3://bucket/x``; ``.npy`` and ``.nc`` stay local), with ``--storage-option``
for its file system.  The work is :func:`carray.integrations.convert.convert`; this module
parses options and draws the progress bar.
"""

from __future__ import annotations

import argparse

from carray.cli._ui import progress
from carray.cli.main import add_storage_options
from carray.core.params import CParams
from carray.errors import ContainerExistsError, UnsupportedOptionError
from carray.integrations.convert import (
    ARRAY_FORMATS,
    FORMATS,
    convert,
    format_for,
    options_for,
    read_any,
    write_any,
)
from carray.integrations.table_files import TABLE_EXTENSIONS
from carray.stores import resolve

__all__ = ["clean_errors", "format_for", "read_any", "register", "write_any"]

# Copies of at least this many bytes show a progress bar on a terminal.
_BAR_BYTES = 64 * 2**20


def clean_errors(func):
    """Kept for the verb modules that decorate with it: every error now becomes one line
    in :func:`carray.cli.main.main`, which also names the path the verb worked on."""
    return func


def _shape(text: str | None, option: str) -> tuple[int, ...] | None:
    if text is None:
        return None
    try:
        return tuple(int(x) for x in text.split(","))
    except ValueError:
        raise ValueError(f"{option}: expected comma-separated ints, got {text!r}") from None


def _exists(path: str, storage_options: dict | None) -> bool:
    store, key = resolve(path, options_for(path, storage_options))
    store.invalidate(key)
    return store.exists(key)


def _refuse(options: list[str], why: str) -> None:
    """Fail on options this kind of conversion cannot use, rather than ignore them."""
    if options:
        raise UnsupportedOptionError(f"{', '.join(options)}: {why}")


def register(subparsers: argparse._SubParsersAction) -> None:
    arrays = ", ".join(f"{name} ({', '.join(ext) or 'a directory'})"
                       for name, (ext, _) in ARRAY_FORMATS.items())
    datasets = ", ".join(e for f in FORMATS for e in f.extensions)
    p = subparsers.add_parser(
        "convert", help="convert an array, a table, a dataset or a group between formats",
        description=f"Convert an array ({arrays}), a table (ctable directory, .parquet, "
                    f".csv, and to or from .ds/.nc), a dataset ({datasets}) or a group (a carray "
                    "group, to and from .nc, .h5/.hdf5, a Zarr v3 group (.zarr) and a flat "
                    ".ds; a dataset without an output extension becomes a group). The source "
                    "may be in any format `carray info` reads; the destination format "
                    "follows its extension, or --to; a destination without an extension is "
                    "a carray directory, one with an unknown extension is refused.")
    p.add_argument("src", help="input array, table or dataset (a path or a URL)")
    p.add_argument("dst", help="output path or URL")
    p.add_argument("--to", metavar="FORMAT",
                   choices=[*ARRAY_FORMATS, *(f.name for f in FORMATS), *TABLE_EXTENSIONS,
                            "group", "hdf5"],
                   help="output format, instead of guessing it from DST's extension")
    p.add_argument("--chunks", metavar="C0,C1,...",
                   help="chunk shape of the output array, one size per axis (bcolz: whole "
                        "rows, N followed by the other axes' sizes; .npy: none)")
    p.add_argument("--blocks", metavar="B0,B1,...",
                   help="block shape of the output array, one size per axis (carray and "
                        ".b2nd outputs only)")
    p.add_argument("--max-mem", metavar="SIZE",
                   help="with --chunks: memory the rechunk may hold (e.g. 256MiB, 1GB; "
                        "default 256MiB); it goes through an intermediate array on disk "
                        "beside DST when one pass would read too much")
    p.add_argument("--codec", choices=["blosclz", "lz4", "lz4hc", "zlib", "zstd"],
                   help="Blosc codec of the output array (default: the input's codec, "
                        "level and shuffle. A Zarr input's Blosc codec is kept as it is; "
                        "its other compressors become the nearest Blosc codec: zstd as "
                        "zstd, gzip and zlib as zlib, lz4 as lz4, at their level and "
                        "without shuffle; no compressor gives level 0, any other lz4 at "
                        "level 5. Bloscpack inputs keep their codec and shuffle, at level "
                        "5 as their chunks record none; .npy inputs get lz4 at level 5)")
    p.add_argument("--clevel", type=int,
                   help="compression level of the output array, 0-9 (default: the input's)")
    p.add_argument("--force", action="store_true", help="replace an existing output")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="say, per array, how many chunks moved as their stored bytes "
                        "and how many were decoded and compressed again, and why")
    bar = p.add_mutually_exclusive_group()
    bar.add_argument("--progress", action="store_true", default=None,
                     help="always show a progress bar")
    bar.add_argument("--no-progress", dest="progress", action="store_false",
                     help="never show a progress bar")
    p.add_argument("--unlimited", metavar="DIM", action="append", default=[],
                   help="make DIM unlimited (NetCDF output; repeatable)")
    add_storage_options(p)
    p.set_defaults(func=run)


@clean_errors
def run(args: argparse.Namespace) -> int:
    from carray.integrations.convert import is_dataset_path, is_table_conversion
    from carray.integrations.group_files import is_group_conversion

    storage = args.storage_options
    array_options = [f"--{name.replace('_', '-')}" for name in
                     ("chunks", "blocks", "codec", "clevel", "max_mem")
                     if getattr(args, name) is not None]
    unlimited = ["--unlimited"] if args.unlimited else []
    if is_group_conversion(args.src, args.dst, args.to, storage):
        _refuse(array_options + unlimited, "a group conversion keeps each array's chunks and "
                                          "compression and takes none of these")
        with progress(f"{args.src} -> {args.dst}", quiet=args.quiet or args.progress is False,
                      min_total=0 if args.progress else _BAR_BYTES,
                      always=bool(args.progress)) as report:
            moves = convert(args.src, args.dst, args.to, overwrite=args.force,
                            progress=report, storage_options=storage)
        _say_moves(args, moves or {})
        return 0
    if is_table_conversion(args.src, args.dst, args.to, storage):
        _refuse(array_options + unlimited, "only array conversions take these; this one "
                                          "converts a table")
        with progress(f"{args.src} -> {args.dst}", quiet=args.quiet or args.progress is False,
                      always=bool(args.progress), unit="rows") as report:
            convert(args.src, args.dst, args.to, overwrite=args.force, progress=report,
                    storage_options=storage)
        return 0
    if is_dataset_path(args.src, None):
        _refuse(array_options, "only array conversions take these; this one converts a "
                               "dataset")
        if not args.force and _exists(args.dst, storage):
            raise ContainerExistsError(f"{args.dst}: already exists (pass --force)")
        options = {"unlimited": args.unlimited} if args.unlimited else {}
        convert(args.src, args.dst, args.to, storage_options=storage, **options)
        return 0
    _refuse(unlimited, "only a dataset converted to NetCDF has unlimited dimensions; this "
                       "converts an array")
    _refuse(["--max-mem"] if args.max_mem is not None and args.chunks is None else [],
            "it bounds the memory of a rechunk: give the new chunks with --chunks")
    # A bar only for copies big enough to wait for, unless asked (--progress) or refused.
    with progress(f"{args.src} -> {args.dst}", quiet=args.quiet or args.progress is False,
                  min_total=0 if args.progress else _BAR_BYTES,
                  always=bool(args.progress)) as report:
        moves = convert(args.src, args.dst, args.to, chunks=_shape(args.chunks, "--chunks"),
                        blocks=_shape(args.blocks, "--blocks"),
                        cparams=_cparams(args, storage), overwrite=args.force,
                        progress=report, storage_options=storage,
                        max_mem=args.max_mem or "256MiB")
    _say_moves(args, {"": moves} if moves is not None else {})
    return 0


def _say_moves(args: argparse.Namespace, moves: dict) -> None:
    """With --verbose, one line per array: chunks moved as bytes, decoded, and why."""
    if not args.verbose:
        return
    if not moves:
        print(f"{args.dst}: no chunks moved as bytes (the output is not carray chunks)")
    for path, stats in moves.items():
        print(f"{args.dst}{'/' + path if path else ''}: {stats.summary()}")


def _cparams(args: argparse.Namespace, storage: dict | None) -> CParams | None:
    """The output's compression when --codec or --clevel change the input's (None: the
    input's as it is)."""
    if not args.codec and args.clevel is None:
        return None
    from carray.integrations.convert import close_array, open_array, source_cparams

    src = open_array(args.src, storage)
    try:
        base = source_cparams(src, args.src, storage) or CParams()
    finally:
        close_array(src)
    return base.replace(**{k: v for k, v in (("cname", args.codec), ("clevel", args.clevel))
                           if v is not None})
