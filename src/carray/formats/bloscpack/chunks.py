"""A Bloscpack array file written from chunks compressed elsewhere (moved as bytes).

:func:`write_chunks` takes the file's Blosc1 chunks as they come, every one but the
last holding ``chunk_size`` uncompressed bytes (docs/formats/bloscpack.md), and
writes the header, the numpy metadata, the offsets table and each chunk followed
by its checksum, as :func:`carray.formats.bloscpack.pack_array` lays them out.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from carray.codecs.checksums import get_checksum
from carray.formats.bloscpack.frame import BlpHeader, calculate_chunks, dtype_meta, encode_metadata
from carray.formats.bloscpack.write import put_blp
from carray.stores import resolve


def write_chunks(path: str | os.PathLike, dtype: np.dtype, shape: tuple[int, ...],
                 chunk_size: int, chunks: Iterable[Any], *, checksum: str = "adler32",
                 fsync: bool = True, storage_options: dict | None = None) -> None:
    """Write a ``.blp`` file of a C-ordered array of ``dtype`` and ``shape`` from its
    Blosc1 ``chunks`` (``chunk_size`` uncompressed bytes each, the last one the rest).

    Raises
    ------
    ValueError
        The chunks do not hold the array's bytes (counted from their headers as they
        are written, the file then left unwritten).
    """
    from carray.codecs import blosc

    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    nchunks, csize, last = calculate_chunks(nbytes, chunk_size)
    impl = get_checksum(checksum)
    header = BlpHeader(True, True, impl.id, dtype.itemsize, csize, last, nchunks,
                       10 * nchunks)
    meta = encode_metadata({"dtype": dtype_meta(dtype), "shape": list(shape), "order": "C",
                            "container": "numpy"})[0]

    def digested() -> Iterator[tuple[Any, bytes]]:
        count = 0
        for count, chunk in enumerate(chunks, 1):
            expected = last if count == nchunks else csize
            got = blosc.read_header(chunk).nbytes
            if count > nchunks or got != expected:
                raise ValueError(f"chunk {count - 1} of {nchunks} holds {got} bytes, the "
                                 f"file's chunks hold {expected}")
            yield chunk, impl.digest(chunk) if impl.size else b""
        if count != nchunks:
            raise ValueError(f"{count} chunks given for a file of {nchunks}")

    store, key = resolve(os.fspath(path), storage_options)
    put_blp(store, key, [header.pack(), meta], header.total_slots, digested(), fsync)
