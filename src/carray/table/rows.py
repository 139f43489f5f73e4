"""A table a block of rows at a time: iterating, copying and printing it, over one
committed state (see :mod:`carray.table.bcolz.refresh`); functions of a ctable's public API,
which :class:`carray.table.table.ctable` calls."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from carray.array.bcolz_methods import bcolz_cparams, bcolz_size
from carray.array.container import built_whole
from carray.core.util import skip_and_limit
from carray.table.bcolz import refresh
from carray.table.columns.kinds import as_rows, empty_like, python_values, read_masked


def _block_rows(t: Any) -> int:
    """Rows read at a time: the shortest chunk of the table's columns."""
    return max(min((c.chunklen for c in t.column_objects()), default=1024), 1)


def iter_rows(t: Any, rows: Callable[[], range], names: list[str], limit: int | None,
              skip: int, out_flavor: Any) -> Iterator[Any]:
    """The rows ``rows()`` names of table ``t`` (asked again for each block: a reader
    may have moved to another version), columns ``names`` (``'nrow__'``: the row
    number), as ``out_flavor`` (namedtuples, tuples)."""
    blen = _block_rows(t)

    def block(i: int) -> list | None:  # block i of the rows of the state read now
        part = rows()[i * blen:(i + 1) * blen]
        cols = t.column_dict()  # the columns of that state (a reader may have moved on)
        values = [list(part) if n == "nrow__" else
                  python_values(cols[n], read_masked(cols[n], part)) for n in names]
        return (list(zip(*values, strict=True)) if values else [()] * len(part)) or None

    return as_rows(skip_and_limit(refresh.blockwise(t.read_committed, block), skip, limit),
                   names, out_flavor)


def iter_blocks(t: Any, rows: Callable[[], range], names: list[str],
                blen: int | None) -> Iterator[np.ndarray]:
    """The rows ``rows()`` names of table ``t`` (step 1; see :func:`iter_rows`), columns
    ``names``, as structured arrays of ``blen`` rows (default: the shortest chunk)."""
    size = blen or min((c.chunklen for c in t.column_objects()), default=1024)

    def block(i: int) -> np.ndarray | None:  # block i of the rows of the state read now
        part = rows()[i * size:(i + 1) * size]
        return t.records(slice(part.start, part.stop), names) if part else None

    return refresh.blockwise(t.read_committed, block)


def copy_table(t: Any, cls: Any, kwargs: dict[str, Any]) -> Any:
    """A copy of table ``t`` made by ``cls(**kwargs)``, attributes included: a stored one
    built under a temporary name and put in place whole (see
    :func:`carray.array.container.built_whole`)."""
    attrs = t.attrs.checked()  # refused before anything is written
    cols = t.column_dict()
    col_attrs = {n: c.attrs.checked() for n, c in cols.items() if hasattr(c, "attrs")}
    kwargs.setdefault("cparams", t.cparams)
    kwargs.setdefault("expectedlen", max(len(t), 1))

    def build(args: dict[str, Any]) -> Any:
        out = cls({n: empty_like(c) for n, c in cols.items()}, **args)
        try:
            blen = min((c.chunklen for c in cols.values()), default=1)
            for i in range(0, len(t), blen):
                out.append({n: read_masked(c, range(i, min(i + blen, len(t))))
                            for n, c in cols.items()})
            out.attrs.update(attrs)
            for name, checked in col_attrs.items():  # nested columns have none
                out.cols[name].attrs.update(checked)
            out.flush()
        except BaseException:
            out.discard()
            raise
        return out

    if kwargs.get("rootdir") is None:
        return build(kwargs)
    return built_whole(kwargs.pop("rootdir"), kwargs, build)


def described(t: Any) -> str:
    """``repr(t)``, as bcolz prints it."""
    where = f"\n  rootdir := {t.rootdir!r}" if t.rootdir else ""
    ratio = t.nbytes / t.cbytes if t.cbytes else 0.0
    return (f"ctable({t.shape}, {t.dtype})\n  nbytes: {bcolz_size(t.nbytes)}; "
            f"cbytes: {bcolz_size(t.cbytes)}; ratio: {ratio:.2f}\n"
            f"  cparams := {bcolz_cparams(t.cparams)}{where}\n{printed(t)}")


def printed(t: Any) -> str:
    """``str(t)``: its rows, only the first and last ones of a long table."""
    if len(t) <= 20:
        return str(t[:])
    return f"{str(t[:3])[:-1]} ..., {str(t[-3:])[1:]}"
