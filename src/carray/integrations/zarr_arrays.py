"""Zarr v3 arrays, read and written through the ``zarr`` package (``pip install carray[zarr]``).

A Zarr v3 array is a directory (or a prefix on an object store) holding a
``zarr.json`` document whose ``zarr_format`` is 3 and ``node_type`` is
``"array"``, and one object per chunk.  carray recognises it by that document,
describes, previews and verifies it, and converts to and from it
(:func:`carray.integrations.convert.convert`); the chunk bytes are always the ``zarr``
package's business.

Attributes are written as zarr-python and xarray write them
(:func:`carray.attrs.peers.json_attrs`): numpy scalars as their values, arrays and
tuples as lists, NaN as the ``NaN`` token, and ``_FillValue`` in xarray's form for
the array's type (floats as the base64 text of their float64 bytes); values JSON has
no form for (complex numbers, bytes, dates, sets) are refused.  Read back, a
``_FillValue`` is a scalar of the array's type, the others what JSON gives.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from carray.attrs import peers as attrpeers
from carray.core.params import CNAMES, CParams, Shuffle
from carray.core.problems import Checked, Finding, Problem
from carray.errors import FormatError
from carray.stores import Store

#: The document at the root of every Zarr v3 node.
ZARR_JSON = "zarr.json"
#: Largest ``zarr.json`` read when sniffing (arrays' documents are a few KiB).
_MAX_JSON = 1 << 20


def zarr_module() -> Any:
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
    zarr = zarr_module()
    kwargs = {"storage_options": storage_options} if storage_options else {}
    try:
        return zarr.open_array(store=path, mode="r" if mode == "r" else "r+", **kwargs)
    except (FileNotFoundError, ValueError, TypeError, KeyError) as exc:
        raise FormatError(f"not a readable Zarr v3 array: {exc}", path) from None


def _codec_text(codec: Any) -> str:
    """A codec as its Zarr name and configuration: ``blosc(cname=zstd, clevel=7, ...)``."""
    doc = codec.to_dict()
    config = ", ".join(f"{k}={v}" for k, v in (doc.get("configuration") or {}).items())
    return f"{doc['name']}({config})"


def _codecs(z: Any) -> str:
    return ", ".join(_codec_text(c) for c in (*z.filters, z.serializer, *z.compressors)
                     if c is not None) or "none"


#: Zarr compressors (by name; numcodecs' without their ``numcodecs.`` prefix) and the
#: Blosc codec nearest each; a Zarr Blosc codec keeps its own parameters.
NEAREST_BLOSC = {"zstd": "zstd", "gzip": "zlib", "zlib": "zlib", "lz4": "lz4"}
_SHUFFLES = {"noshuffle": Shuffle.NOSHUFFLE, "shuffle": Shuffle.SHUFFLE,
             "bitshuffle": Shuffle.BITSHUFFLE}


def cparams_of(array: Any) -> CParams | None:
    """The Blosc parameters nearest to how a Zarr array's chunks are compressed (None when
    ``array`` is not a Zarr array).

    * A Blosc codec keeps its cname, clevel and shuffle (``snappy``, which carray's
      Blosc lacks, becomes ``lz4``).
    * zstd, gzip or zlib, and lz4 become that codec in Blosc (gzip as zlib) at the same
      level (at most 9, Blosc's highest; lz4 at Blosc's default 5), without shuffle, as
      Zarr applied none (byte shuffle when a numcodecs shuffle precedes them).
    * No compressor gives level 0: chunks stored uncompressed.
    * Any other compressor gives carray's defaults (lz4, level 5, byte shuffle).
    """
    if type(array).__module__.split(".")[0] != "zarr":
        return None
    docs = [c.to_dict() for c in array.compressors]
    names = [doc["name"].removeprefix("numcodecs.") for doc in docs]
    shuffle = Shuffle.SHUFFLE if "shuffle" in names else Shuffle.NOSHUFFLE
    for name, doc in zip(names, docs, strict=True):
        config = doc.get("configuration") or {}
        if name == "blosc":
            return _from_blosc(config)
        if name in NEAREST_BLOSC:
            level = int(config.get("level", 5)) if name != "lz4" else 5
            if name == "zstd":
                level = 3 if level == 0 else max(level, 1)  # zstd's 0 is its default, 3
            return CParams(clevel=min(level, 9), cname=NEAREST_BLOSC[name], shuffle=shuffle)
    return CParams(clevel=0) if not docs else CParams()


def _from_blosc(config: dict) -> CParams:
    """A Zarr (or numcodecs) Blosc codec's configuration as carray's parameters."""
    cname = str(config.get("cname", "lz4"))
    raw = config.get("shuffle", "shuffle")
    # numcodecs spells shuffles as ints (-1: automatic, a byte shuffle for wide items).
    shuffle = _SHUFFLES.get(raw, Shuffle.SHUFFLE) if isinstance(raw, str) else \
        Shuffle(raw) if raw in (0, 1, 2) else Shuffle.SHUFFLE
    return CParams(clevel=min(int(config.get("clevel", 5)), 9),
                   cname=cname if cname in CNAMES else "lz4", shuffle=shuffle)


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
    """The attributes of the Zarr array ``z`` (see the module doc).

    Raises
    ------
    FormatError
        A ``_FillValue`` that is not one of the array's type, naming the array.
    """
    where = source or str(getattr(z, "store_path", "") or getattr(z, "path", "zarr array"))
    return decode_attrs(dict(z.attrs), z.dtype, where)


def decode_attrs(raw: dict[str, Any], dtype: Any, where: str) -> dict[str, Any]:
    """Attributes as stored in a Zarr node (``dtype``: the array's, None for a group)."""
    attrs = dict(raw)
    if dtype is not None and attrs.get("_FillValue") is not None:
        try:
            attrs["_FillValue"] = attrpeers.zarr_fill_from_json(attrs["_FillValue"],
                                                                np.dtype(dtype), where)
        except ValueError as exc:
            raise FormatError(str(exc)) from None
    return attrs


def is_zarr(obj: Any) -> bool:
    """Whether ``obj`` is an array of the ``zarr`` package (as :func:`open_zarr` returns)."""
    return type(obj).__module__.split(".")[0] == "zarr"


def encode_attrs(attrs: dict, dtype: Any = None, where: str = "Zarr array") -> dict[str, Any]:
    """Attributes as zarr-python and xarray store them (see the module doc); ``dtype``,
    an array's, types its ``_FillValue``.

    Raises
    ------
    UnstorableAttributeError
        A value Zarr's JSON attributes cannot hold, or a ``_FillValue`` that is not a
        value of ``dtype``, naming the attribute.
    """
    out = attrpeers.json_attrs(attrs, "Zarr")
    if dtype is not None and "_FillValue" in attrs:
        fill = attrpeers.fill_value_for(attrs["_FillValue"], np.dtype(dtype), where) \
            if np.dtype(dtype).kind not in "OT" else str(attrs["_FillValue"])
        out["_FillValue"] = attrpeers.zarr_fill_to_json(fill, np.dtype(dtype))
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


def compressors_for(cparams: Any) -> Any:
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
               attrs: dict | None = None, storage_options: dict | None = None,
               fill_value: Any = None) -> None:
    """Write a new Zarr v3 array at ``path`` from ``(first row, rows)`` blocks.

    ``chunks`` default to Zarr's choice; ``cparams`` (a :class:`carray.CParams`)
    become a Blosc codec with the same codec, level and shuffle; ``attrs`` are
    written by :func:`encode_attrs`; ``fill_value`` is what Zarr reads for chunks never
    written (the source's fill value; Zarr's default when None).
    """
    zarr = zarr_module()
    kwargs: dict[str, Any] = {"storage_options": storage_options} if storage_options else {}
    z = zarr.create_array(store=path, shape=shape, dtype=dtype,
                          chunks=tuple(chunks) if chunks else "auto",
                          compressors=compressors_for(cparams),
                          attributes=encode_attrs(dict(attrs or {}), dtype, path),
                          fill_value=fill_value, overwrite=True, **kwargs)
    try:
        for start, block in blocks:
            z[start:start + len(block)] = block
    except BaseException:
        settle()
        raise


def settle() -> None:
    """Wait for the writes Zarr started and has not finished: when one of a call's chunk
    writes fails, the others go on running on Zarr's event loop, and would write into a
    directory being removed."""
    from zarr.core.sync import sync

    async def drain() -> None:
        here = asyncio.current_task()
        await asyncio.gather(*(t for t in asyncio.all_tasks() if t is not here),
                             return_exceptions=True)

    sync(drain())

