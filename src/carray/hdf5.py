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

import os
from typing import Any

import numpy as np

from carray.defaults import resolve_cparams
from carray.errors import ContainerNotFoundError, FormatError

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
        How the file is opened: 'w' replaces it, 'a' adds the node to it.
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
    with tables.open_file(os.fspath(filepath), mode=mode) as f:
        node = f.create_table(where or "/", name, dtype, filters=filters,
                              expectedrows=max(len(table), 1), createparents=True)
        for lo in range(0, len(table), blen):
            hi = min(lo + blen, len(table))
            rows = np.empty(hi - lo, dtype=dtype)
            for n in table.names:
                values = table.cols[n][lo:hi]
                rows[n] = _encoded(values, dtype[n].itemsize) if n in text else values
            node.append(rows)
        for key, value in table.attrs.getall().items():
            node.attrs[key] = value
        node.attrs[TEXT_ATTR] = list(text)
        node.flush()


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
