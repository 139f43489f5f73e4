"""Zarr v3 arrays, read and written through the ``zarr`` package (``pip install carray[zarr]``).

A Zarr v3 array is a directory (or a prefix on an object store) holding a
``zarr.json`` document whose ``zarr_format`` is 3 and ``node_type`` is
``"array"``, and one object per chunk.  carray recognises it by that document,
describes, previews and verifies it, and converts to and from it
(:func:`carray.convert.convert`); the chunk bytes are always the ``zarr``
package's business.

Attributes are written in carray's plain JSON form (:mod:`carray.attrvalues`):
values JSON holds exactly as themselves, others (numpy scalars and arrays, NaN
and infinities, complex numbers, datetimes, tuples, ...) as
``{"__carray__": <typed value>}``, whose floats follow Zarr v3's fill values
(``"NaN"``, ``"Infinity"``, ``"-Infinity"``, ``"0x..."`` bits).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from carray import attrvalues
from carray.errors import FormatError, UnstorableAttributeError
from carray.problems import Checked, Finding, Problem
from carray.stores import Store

#: The document at the root of every Zarr v3 node.
ZARR_JSON = "zarr.json"
#: Largest ``zarr.json`` read when sniffing (arrays' documents are a few KiB).
_MAX_JSON = 1 << 20


def _zarr() -> Any:
    try:
        import zarr
    except ImportError:
        raise ImportError("reading and writing Zarr arrays needs the zarr package "
                          "(pip install 'carray[zarr]')") from None
    return zarr


def node_document(store: Store, path: str) -> dict | None:
    """The parsed ``zarr.json`` of the Zarr v3 node at ``path`` (None: not a v3 node)."""
    key = store.join(path, ZARR_JSON)
    try:
        if not store.isfile(key) or store.size(key) > _MAX_JSON:
            return None
        doc = json.loads(store.get(key))
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("zarr_format") != 3:
        return None
    return doc


def is_zarr_array(store: Store, path: str) -> bool:
    """Whether ``path`` holds a Zarr v3 array (its ``zarr.json`` says so)."""
    doc = node_document(store, path)
    return doc is not None and doc.get("node_type") == "array"


def open_zarr(path: str, mode: str = "r", storage_options: dict | None = None) -> Any:
    """The ``zarr.Array`` at ``path`` (a local path or an fsspec URL)."""
    zarr = _zarr()
    kwargs = {"storage_options": storage_options} if storage_options else {}
    try:
        return zarr.open_array(store=path, mode="r" if mode == "r" else "r+", **kwargs)
    except (FileNotFoundError, ValueError, TypeError, KeyError) as exc:
        raise FormatError(f"not a readable Zarr v3 array: {exc}", path) from None


def _codecs(z: Any) -> str:
    names = [type(c).__name__.removesuffix("Codec").lower()
             for c in (*z.filters, z.serializer, *z.compressors) if c is not None]
    return ", ".join(names) or "none"


def info(path: str, storage_options: dict | None = None) -> dict:
    """What ``carray info`` shows for a Zarr array (JSON-able)."""
    z = open_zarr(path, "r", storage_options)
    stored = int(z.nbytes_stored())
    return {"type": "zarr", "zarr_format": 3, "shape": list(z.shape), "dtype": str(z.dtype),
            "chunks": list(z.chunks),
            "shards": None if z.shards is None else list(z.shards),
            "codecs": _codecs(z), "nbytes": int(z.nbytes), "stored bytes": stored,
            "ratio": round(z.nbytes / stored, 3) if stored else 0.0,
            "attrs": read_attrs(z, path)}


def read_attrs(z: Any, source: str | None = None) -> dict[str, Any]:
    """The attributes of the Zarr array ``z``, read back from carray's plain JSON form.

    Raises
    ------
    FormatError
        A marked value that does not decode, naming the array and the attribute.
    """
    where = source or str(getattr(z, "store_path", "") or getattr(z, "path", "zarr array"))
    return attrvalues.load_plain(dict(z.attrs), where)


def is_zarr(obj: Any) -> bool:
    """Whether ``obj`` is an array of the ``zarr`` package (as :func:`open_zarr` returns)."""
    return type(obj).__module__.split(".")[0] == "zarr"


def encode_attrs(attrs: dict) -> dict[str, Any]:
    """Attributes as Zarr stores them: carray's plain JSON form.

    Raises
    ------
    UnstorableAttributeError
        A value carray does not store, naming the attribute.
    """
    out = {}
    for key, value in attrs.items():
        try:
            out[attrvalues.check_name(key)] = attrvalues.to_json(value)
        except UnstorableAttributeError as exc:
            raise UnstorableAttributeError(f"attribute {key!r}: {exc}") from None
    return out


def head(path: str, rows: int, storage_options: dict | None = None) -> dict[str, Any]:
    """The first ``rows`` rows of a Zarr array (only those chunks are read)."""
    z = open_zarr(path, "r", storage_options)
    return {"value": np.asarray(z[:rows] if z.ndim else z[()])}


def _chunk_regions(shape: tuple[int, ...], chunks: tuple[int, ...]) -> Iterator[tuple]:
    ranges = [range(0, n, c) for n, c in zip(shape, chunks, strict=True)]
    for corner in itertools.product(*ranges):
        yield tuple(slice(s, min(s + c, n)) for s, c, n in zip(corner, chunks, shape,
                                                                strict=True))


def verify(store: Store, path: str) -> Iterator[Finding]:
    """Decode every chunk of the Zarr array at ``path``, one problem per chunk that fails."""
    url = store.url(path)
    try:
        z = open_zarr(url if store.remote else path, "r")
    except (FormatError, ImportError, OSError) as exc:
        yield Problem.from_error(exc, url)
        return
    if not z.ndim:
        regions: Iterable[tuple] = [()]
    else:
        regions = _chunk_regions(tuple(z.shape), tuple(z.chunks))
    for region in regions:
        try:
            z[region]
        except Exception as exc:  # noqa: BLE001 - the codecs raise their own types
            where = ", ".join(f"{s.start}:{s.stop}" for s in region)
            yield Problem(url, f"chunk [{where}]", f"cannot be decoded: {exc}")
            continue
        yield Checked(url)


def _compressors(cparams: Any) -> Any:
    """Zarr's Blosc codec with carray's codec, level and shuffle (Zarr's default when the
    codec is not one Blosc offers)."""
    if cparams is None:
        return "auto"
    from zarr.codecs import BloscCodec

    shuffle: Any = {0: "noshuffle", 1: "shuffle", 2: "bitshuffle"}.get(int(cparams.shuffle),
                                                                        "shuffle")
    if cparams.cname not in ("blosclz", "lz4", "lz4hc", "zlib", "zstd"):
        return "auto"
    return (BloscCodec(cname=cparams.cname, clevel=cparams.clevel, shuffle=shuffle),)


def write_zarr(path: str, shape: tuple[int, ...], dtype: np.dtype,
               blocks: Iterable[tuple[int, np.ndarray]], *,
               chunks: tuple[int, ...] | None = None, cparams: Any = None,
               attrs: dict | None = None, storage_options: dict | None = None) -> None:
    """Write a new Zarr v3 array at ``path`` from ``(first row, rows)`` blocks.

    ``chunks`` default to Zarr's choice; ``cparams`` (a :class:`carray.CParams`)
    become a Blosc codec with the same codec, level and shuffle; ``attrs`` are
    written by :func:`encode_attrs`.
    """
    zarr = _zarr()
    kwargs: dict[str, Any] = {"storage_options": storage_options} if storage_options else {}
    z = zarr.create_array(store=path, shape=shape, dtype=dtype,
                          chunks=tuple(chunks) if chunks else "auto",
                          compressors=_compressors(cparams),
                          attributes=encode_attrs(dict(attrs or {})),
                          overwrite=True, **kwargs)
    for start, block in blocks:
        z[start:start + len(block)] = block

