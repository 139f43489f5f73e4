"""Tables to and from HDF5 files through PyTables (the optional ``hdf5`` extra):
:meth:`carray.ctable.tohdf5` and :meth:`carray.ctable.fromhdf5`, as in bcolz.

A table becomes one PyTables ``Table`` node with a field per column, written and
read a block of rows at a time.  PyTables stores text only as bytes, so text
columns (``U`` and variable-length strings) are written UTF-8 encoded, as bytes
as wide as their longest value, and their names are kept in the node attribute
``carray_text_columns`` so they come back as text.  The table's user attributes
become the node's attributes.
"""

from __future__ import annotations

import errno
import os
import shutil
import zlib
from typing import Any

import numpy as np

from carray.core.defaults import resolve_cparams
from carray.errors import ContainerNotFoundError, FormatError
from carray.stores import LOCAL
from carray.stores.files import fsync_path
from carray.stores.staging import no_space_left, staged

TEXT_ATTR = "carray_text_columns"
# PyTables' names for Blosc's codecs inside HDF5 (its "blosc:<cname>" filters).
_BLOSC_CNAMES = ("blosclz", "lz4", "lz4hc", "snappy", "zlib", "zstd")


def _tables() -> Any:
    try:
        import tables
    except ImportError:  # pragma: no cover - depends on the environment
        raise ImportError("HDF5 files need PyTables: pip install 'carray[hdf5]'") from None
    return tables


def _is_text(col: Any) -> bool:
    return col.dtype.kind in "UOT"  # fixed-width, object or numpy's variable-width strings


def _encoded(values: np.ndarray, width: int) -> np.ndarray:
    return np.array([str(v).encode("utf-8") for v in values.tolist()], dtype=f"S{max(width, 1)}")


def _disk_dtype(table: Any, text: list[str], blen: int) -> np.dtype:
    """The node's row type: each text column as bytes wide enough for its longest value."""
    fields = []
    for name in table.names:
        col = table.cols[name]
        if name in text:
            width = 1
            for lo in range(0, len(table), blen):
                block = col[lo:lo + blen]
                width = max([width, *(len(str(v).encode("utf-8")) for v in block.tolist())])
            fields.append((name, np.dtype(f"S{width}")))
        else:
            fields.append((name, col.dtype if col.ndim == 1 else
                           np.dtype((col.dtype, col.shape[1:]))))
    return np.dtype(fields)


def tohdf5(table: Any, filepath: str | os.PathLike, nodepath: str = "/ctable",
           mode: str = "w", cparams: Any = None, cname: str | None = None) -> None:
    """Write ``table`` to the PyTables table ``nodepath`` of the HDF5 file ``filepath``.

    Parameters
    ----------
    table : ctable
        What to write.
    filepath : str or path
        The HDF5 file.
    nodepath : str
        Where in the file; its parent groups are created.
    mode : {'w', 'a'}
        How the file is opened: 'w' replaces it, 'a' adds the node to it.  Either way
        the new file is written under a temporary name (for 'a', a copy of the old
        one) and put in place whole, so a failure leaves the old file as it was.
    cparams : CParams or dict, optional
        Compression level and Blosc codec (default: ``carray.defaults.cparams``).
    cname : str, optional
        Any PyTables compressor (``'zlib'``, ``'blosc:zstd'``, ...) instead of Blosc
        with ``cparams``' codec.
    """
    tables = _tables()
    cp = resolve_cparams(cparams)
    if cname is None:
        if cp.cname not in _BLOSC_CNAMES:
            raise ValueError(f"PyTables has no Blosc codec {cp.cname!r}; pass cname=")
        cname = f"blosc:{cp.cname}"
    filters = tables.Filters(complevel=cp.clevel, complib=cname,
                             shuffle=int(cp.shuffle) == 1, bitshuffle=int(cp.shuffle) == 2)
    text = [n for n in table.names if _is_text(table.cols[n])]
    blen = max(min((table.cols[n].chunklen for n in table.names
                    if hasattr(table.cols[n], "chunklen")), default=2**14), 1)
    dtype = _disk_dtype(table, text, blen)
    where, _, name = nodepath.rstrip("/").rpartition("/")
    if mode not in ("w", "a"):
        raise ValueError(f"mode must be 'w' or 'a', got {mode!r}")
    path = os.path.abspath(os.fspath(filepath))
    with staged(LOCAL, path, overwrite=True) as staging:
        if mode == "a" and os.path.isfile(path):
            shutil.copyfile(path, staging.tmp)
        with tables.open_file(staging.tmp, mode=mode) as f:
            node = f.create_table(where or "/", name, dtype, filters=filters,
                                  expectedrows=max(len(table), 1), createparents=True)
            sums = _write_rows(node, table, dtype, text, blen)
        fsync_path(staging.tmp)
        _check_written(staging.tmp, nodepath, sums, blen, len(table))


def _write_rows(node: Any, table: Any, dtype: np.dtype, text: list[str],
                blen: int) -> list[int]:
    """The rows of ``table`` appended to the PyTables table ``node`` ``blen`` at a time,
    then its attributes; returns the CRC-32 of each block of rows."""
    sums = []
    for lo in range(0, len(table), blen):
        hi = min(lo + blen, len(table))
        rows = np.empty(hi - lo, dtype=dtype)
        for n in table.names:
            values = table.cols[n][lo:hi]
            rows[n] = _encoded(values, dtype[n].itemsize) if n in text else values
        node.append(rows)
        sums.append(zlib.crc32(rows.tobytes()))
    for key, value in table.attrs.getall().items():
        node.attrs[key] = value
    node.attrs[TEXT_ATTR] = list(text)
    node.flush()
    return sums


def _check_written(path: str, nodepath: str, sums: list[int], blen: int, nrows: int) -> None:
    """Read the table written back, block by block: PyTables reports no failed write (a
    full disk leaves a file whose last rows read as zeros), so one shows here.

    Raises
    ------
    OSError
        A block reads back other than it was written: ENOSPC when the file system is
        full, else EIO.
    """
    tables = _tables()
    try:
        with tables.open_file(path, mode="r") as f:
            node = f.get_node(nodepath)
            good = node.nrows == nrows
            for k, expected in enumerate(sums if good else []):
                if zlib.crc32(node.read(k * blen, (k + 1) * blen).tobytes()) != expected:
                    good = False
                    break
    except (tables.HDF5ExtError, tables.NoSuchNodeError, OSError):
        good = False  # not even readable: cut short
    if not good:
        code = errno.ENOSPC if no_space_left(LOCAL, path) else errno.EIO
        raise OSError(code, f"{os.strerror(code)} (the HDF5 file written reads back "
                            "other than it was written)")


def fromhdf5(cls: Any, filepath: str | os.PathLike, nodepath: str = "/ctable",
             **kwargs: Any) -> Any:
    """A ``cls`` (ctable) from the PyTables table ``nodepath`` of ``filepath``; other
    keyword arguments go to the new table (``rootdir``, ``cparams``, ...)."""
    tables = _tables()
    path = os.fspath(filepath)
    if not os.path.exists(path):
        raise ContainerNotFoundError(f"{path}: no such HDF5 file")
    with tables.open_file(path, mode="r") as f:
        try:
            node = f.get_node(nodepath)
        except tables.NoSuchNodeError:
            raise FormatError(f"no node {nodepath!r}", path) from None
        if not isinstance(node, tables.Table):
            raise FormatError(f"node {nodepath!r} is not a table", path)
        attrs = {k: node.attrs[k] for k in node.attrs._f_list("user")}
        text = [str(n) for n in attrs.pop(TEXT_ATTR, [])]
        names = list(node.dtype.names)
        first = node.read(0, min(node.nrows, 1))
        out = cls(_decoded(first, text), names=names, expectedlen=node.nrows, **kwargs)
        blen = max(node.chunkshape[0] if node.chunkshape else 0, 2**14)
        for lo in range(len(first), node.nrows, blen):
            block = node.read(lo, min(lo + blen, node.nrows))
            out.append(_decoded(block, text))
    for key, value in attrs.items():
        out.attrs[key] = value.tolist() if isinstance(value, (np.ndarray, np.generic)) \
            else value
    out.flush()
    return out


def _decoded(rows: np.ndarray, text: list[str]) -> list[np.ndarray]:
    """The columns of ``rows``, text columns decoded from UTF-8."""
    out = []
    for n in rows.dtype.names or ():
        col = rows[n]
        if n in text:
            col = np.array([v.decode("utf-8") for v in col.tolist()], dtype=object) \
                if len(col) else np.empty(0, dtype="U1")
        out.append(col)
    return out
