"""``carray pack``, ``carray unpack`` and ``carray append``: Bloscpack (``.blp``) files.

``pack`` stores a ``.npy`` file as an array (dtype, shape and order kept) and any
other file as bytes; ``unpack`` writes a ``.npy`` file back when the ``.blp`` held
an array, else the raw bytes.  ``carray info X.blp`` is answered by
:func:`run_info_blp`.  Files are compatible with bloscpack 0.16's ``blpk`` tool.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from carray.cli._ui import progress
from carray.cli.convert import clean_errors
from carray.codecs.checksums import CHECKSUMS
from carray.core.params import CNAMES
from carray.formats import bloscpack

_SHUFFLES = {"noshuffle": 0, "shuffle": 1, "bitshuffle": 2, "0": 0, "1": 1, "2": 2}


def _blosc_options(p: argparse.ArgumentParser) -> None:
    d = bloscpack.DEFAULT_CPARAMS
    p.add_argument("--codec", choices=CNAMES, help=f"Blosc codec (default {d.cname})")
    p.add_argument("--clevel", type=int, choices=range(10), metavar="0-9",
                   help=f"compression level (default {d.clevel})")
    p.add_argument("--shuffle", choices=list(_SHUFFLES), help="shuffle filter (default shuffle)")


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "pack", help="compress a .npy file (as an array) or any file (as bytes) to .blp",
        description="Write a Bloscpack file, readable by bloscpack 0.16 (blpk).")
    p.add_argument("src", help="input: a .npy file, or any file (packed as bytes)")
    p.add_argument("dst", help="output .blp file")
    _blosc_options(p)
    p.add_argument("--typesize", type=int, default=bloscpack.DEFAULT_TYPESIZE,
                   help="Blosc typesize for bytes input (arrays use their itemsize; default 8)")
    p.add_argument("--chunk-size", default=None, metavar="SIZE",
                   help="uncompressed bytes per chunk: 65536, 512K, 1M (default), max")
    p.add_argument("--checksum", default="adler32", choices=[c.name for c in CHECKSUMS],
                   help="digest after every chunk (default adler32)")
    p.add_argument("--no-offsets", action="store_true",
                   help="omit the chunk offsets table (the file cannot be appended to)")
    p.add_argument("--max-app-chunks", type=int, default=None, metavar="N",
                   help="offset slots reserved for appends (default 10 x chunks)")
    p.add_argument("--metadata", default=None, metavar="JSON",
                   help="JSON stored in the metadata section (arrays: extra keys)")
    p.add_argument("--bytes", action="store_true", help="pack a .npy file as plain bytes")
    p.add_argument("-f", "--force", action="store_true", help="overwrite DST")
    p.set_defaults(func=run_pack)

    p = subparsers.add_parser("unpack", help="decompress a .blp file (.npy if it holds an "
                                             "array, else raw bytes)")
    p.add_argument("src", help="input .blp file")
    p.add_argument("dst", help="output file")
    p.add_argument("--no-verify", action="store_true", help="skip checksum verification")
    p.add_argument("-f", "--force", action="store_true", help="overwrite DST")
    p.set_defaults(func=run_unpack)

    p = subparsers.add_parser("append", help="append a .npy file or any file to a .blp file")
    p.add_argument("dst", help=".blp file to extend (needs an offsets table)")
    p.add_argument("src", help="data to append: .npy (array files) or any file (bytes)")
    _blosc_options(p)
    p.set_defaults(func=run_append)


def _cparams(args: argparse.Namespace):
    changes: dict[str, Any] = {}
    if args.codec is not None:
        changes["cname"] = args.codec
    if args.clevel is not None:
        changes["clevel"] = args.clevel
    if args.shuffle is not None:
        changes["shuffle"] = _SHUFFLES[args.shuffle]
    return bloscpack.DEFAULT_CPARAMS.replace(**changes)


def _is_npy(path: str) -> bool:
    with open(path, "rb") as f:
        return f.read(6) == b"\x93NUMPY"


def _label(src: str, arrow: str, dst: str) -> str:
    """The progress bar's label: file names only, so the bar keeps its room."""
    return f"{os.path.basename(src)} {arrow} {os.path.basename(dst)}"


def _refuse_overwrite(args: argparse.Namespace) -> None:
    if os.path.exists(args.dst) and not args.force:
        raise ValueError(f"{args.dst} exists (use --force to overwrite)")


@clean_errors
def run_pack(args: argparse.Namespace) -> int:
    _refuse_overwrite(args)
    try:
        metadata = None if args.metadata is None else json.loads(args.metadata)
    except json.JSONDecodeError as exc:
        raise ValueError(f"--metadata is not valid JSON: {exc}") from None
    common = dict(cparams=_cparams(args), chunk_size=args.chunk_size,
                  checksum=args.checksum, offsets=not args.no_offsets,
                  max_app_chunks=args.max_app_chunks)
    # Both read the input a chunk at a time: memory holds a few chunks, not the file.
    with progress(_label(args.src, "->", args.dst), quiet=args.quiet) as report:
        common["progress"] = report
        if not args.bytes and _is_npy(args.src):
            if metadata is not None and not isinstance(metadata, dict):
                raise ValueError("--metadata for an array must be a JSON object")
            bloscpack.pack_npy(args.src, args.dst, metadata=metadata, **common)
        else:
            with open(args.src, "rb") as src:
                bloscpack.pack_bytes(src, args.dst, typesize=args.typesize,
                                     metadata=metadata, **common)
    return 0


@clean_errors
def run_unpack(args: argparse.Namespace) -> int:
    _refuse_overwrite(args)
    # A .npy file when the .blp holds an array, else the raw bytes; written a chunk at a time.
    with progress(_label(args.src, "->", args.dst), quiet=args.quiet) as report:
        bloscpack.unpack_file(args.src, args.dst, verify=not args.no_verify, progress=report)
    return 0


@clean_errors
def run_append(args: argparse.Namespace) -> int:
    # Read a chunk at a time: a .npy file for array files, raw bytes otherwise.
    with open(args.src, "rb") as src, \
            progress(_label(args.src, ">>", args.dst), quiet=args.quiet) as report:
        added = bloscpack.append(args.dst, src, cparams=_cparams(args), progress=report)
    print(f"appended {os.path.getsize(args.src)} bytes to {args.dst}: {added} new chunks")
    return 0


def format_info(d: dict) -> str:
    """The ``carray info`` text for a Bloscpack file."""
    h = d["header"]
    rows = [
        ("type", "bloscpack"),
        ("format", f"{h['format_version']}"),
        ("file size", f"{d['file_size']}"),
        ("chunks", f"{h['nchunks']} x {h['chunk_size']} B, last {h['last_chunk']} B"),
        ("typesize", f"{h['typesize']}"),
        ("checksum", d["checksum"]),
        ("offsets", "yes" if h["offsets"] else "no"),
        ("append slots", f"{h['max_app_chunks']}"),
        ("nbytes", f"{d['nbytes']}"),
        ("cbytes", f"{d['cbytes']}"),
    ]
    if d["nbytes"]:
        rows.append(("ratio", f"{d['nbytes'] / max(d['cbytes'], 1):.2f}"))
    if d["offsets"]:
        first = ", ".join(str(o) for o in d["offsets"][:5])
        rows.append(("first offsets", first + (", ..." if len(d["offsets"]) > 5 else "")))
    c = d["first_chunk"]
    if c:
        shuffle = "bitshuffle" if c["bitshuffle"] else "shuffle" if c["shuffle"] else "none"
        rows.append(("first chunk", f"blosc v{c['version']} {c['codec']} shuffle={shuffle} "
                                    f"typesize={c['typesize']} blocksize={c['blocksize']}"))
    mh = d["metadata_header"]
    if mh:
        rows.append(("metadata", json.dumps(d["metadata"], ensure_ascii=False)))
        rows.append(("metadata header", f"{mh['meta_codec']} level {mh['meta_level']}, "
                                        f"{mh['meta_checksum']}, {mh['meta_size']} B "
                                        f"(stored {mh['meta_comp_size']} of "
                                        f"{mh['max_meta_size']})"))
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}} : {v}" for k, v in rows)


def run_info_blp(path: str, as_json: bool = False) -> int:
    """Print the header, metadata and offsets summary of a ``.blp`` file."""
    d = bloscpack.info(path)
    print(json.dumps(d, indent=2) if as_json else format_info(d), file=sys.stdout)
    return 0
