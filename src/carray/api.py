"""Factories and ``open``: the bcolz 1.x top-level API."""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from carray import registry
from carray.array.array import carray
from carray.array.expression import BlockEvaluator, Expression, caller_scope, collect_result
from carray.chunks.shapes import calc_chunklen, check_nbytes
from carray.compute.parse import Reduction
from carray.compute.reduce import reduce
from carray.compute.strings import expression as lazy_expression
from carray.compute.strings import wants_lazy
from carray.core.defaults import defaults
from carray.errors import FormatError, ShapeError
from carray.groups.group import Group, open_group
from carray.table.table import ctable


def _shape_and_dtype(shape: int | tuple[int, ...], dtype: Any) -> tuple[int, np.dtype]:
    """bcolz factories take an N-d shape: rows along the first axis, the rest in the dtype."""
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    if not shape:
        raise ValueError("shape must have at least one dimension")
    dt = np.dtype(dtype)
    check_nbytes(shape, dt.itemsize)
    if len(shape) > 1:
        try:
            dt = np.dtype((dt, shape[1:]))
        except (ValueError, OverflowError) as exc:  # rows numpy cannot make one item of
            raise ShapeError(f"rows of shape {tuple(shape[1:])} of {dt}: {exc}") from None
    return int(shape[0]), dt


def fill(shape: int | tuple[int, ...], dflt: Any = None, dtype: Any = float,
         **kwargs: Any) -> carray | ctable:
    """A carray of ``shape`` filled with ``dflt``; other arguments as for :class:`carray`.

    A structured ``dtype`` makes a ctable with one column per field, as bcolz does (and
    as :func:`fromiter` does).
    """
    n, dt = _shape_and_dtype(shape, dtype)
    kwargs.setdefault("expectedlen", n)
    if dt.names and not dt.subdtype:
        return _table_fill(n, dflt, dt, kwargs)
    a = carray(np.empty(0, dtype=dt), dflt=dflt, **kwargs)
    if n:
        a.resize(n)
    return a


def _table_fill(n: int, dflt: Any, dt: np.dtype, kwargs: dict) -> ctable:
    """A ctable of ``n`` rows of ``dflt`` (a record of ``dt``; None: zeros)."""
    record = np.zeros((), dtype=dt) if dflt is None else np.asarray(dflt, dtype=dt)
    table_args = {k: kwargs.pop(k) for k in ("rootdir", "mode", "auto_flush", "format",
                                             "storage", "storage_options", "fsync")
                  if k in kwargs}
    names = list(dt.names or ())
    columns = [fill(n, record[name][()], dt[name], **kwargs) for name in names]
    return ctable(columns, names=names, **kwargs, **table_args)


def zeros(shape: int | tuple[int, ...], dtype: Any = float, **kwargs: Any) -> carray | ctable:
    """A carray of zeros (a ctable for a structured ``dtype``)."""
    return fill(shape, None, dtype, **kwargs)


def ones(shape: int | tuple[int, ...], dtype: Any = float, **kwargs: Any) -> carray | ctable:
    """A carray of ones (a ctable for a structured ``dtype``)."""
    base = np.dtype(dtype)
    return fill(shape, np.ones((), dtype=base.base)[()], dtype, **kwargs)


def arange(start: Any = None, stop: Any = None, step: Any = None, dtype: Any = None,
           **kwargs: Any) -> carray:
    """Like ``numpy.arange``, built chunk by chunk (never the whole range in memory)."""
    if stop is None:
        start, stop = 0, start
    start = 0 if start is None else start
    step = 1 if step is None else step
    n = len(range(0, int(np.ceil((stop - start) / step)))) if step else 0
    dt = np.dtype(dtype) if dtype is not None else \
        np.arange(start, start + step, step, dtype=np.result_type(start, stop, step)).dtype
    kwargs.setdefault("expectedlen", n)
    a = carray(np.empty(0, dtype=dt), **kwargs)
    blen = a.chunklen
    for i in range(0, n, blen):
        m = min(blen, n - i)
        a.append(np.arange(m, dtype=dt) * dt.type(step) + dt.type(start + i * step)
                 if dt.kind not in "mM" else np.arange(start + i * step, start + (i + m) * step,
                                                      step, dtype=dt))
    a.flush()
    return a


def fromiter(iterable: Iterable, dtype: Any, count: int = -1, **kwargs: Any) -> Any:
    """A carray from an iterable, read ``count`` items at a time (-1: until exhausted).

    A structured ``dtype`` makes a ctable with one column per field.
    """
    dt = np.dtype(dtype)
    if dt.names:
        return _table_fromiter(iterable, dt, count, kwargs)
    if count is not None and count >= 0:
        kwargs.setdefault("expectedlen", count)
    a = carray(np.empty(0, dtype=dt), **kwargs)
    it = iter(iterable)
    remaining = count if count is not None and count >= 0 else None
    blen = a.chunklen
    while remaining is None or remaining > 0:
        take = blen if remaining is None else min(blen, remaining)
        block = list(itertools.islice(it, take))
        if not block:
            break
        a.append(np.array(block, dtype=dt))
        if remaining is not None:
            remaining -= len(block)
    if remaining:
        raise ValueError(f"iterable too short: {remaining} items missing of {count}")
    a.flush()
    return a


def _table_fromiter(iterable: Iterable, dt: np.dtype, count: int, kwargs: dict) -> Any:
    if count is not None and count >= 0:
        kwargs.setdefault("expectedlen", count)
        iterable = itertools.islice(iterable, count)
    t = ctable(np.empty(0, dtype=dt), **kwargs)
    blen = min(c.chunklen for c in t.cols.values()) if t.names else 1024
    it = iter(iterable)
    n = 0
    while True:
        block = list(itertools.islice(it, blen))
        if not block:
            break
        t.append(np.array(block, dtype=dt))
        n += len(block)
    if count is not None and count >= 0 and n < count:
        raise ValueError(f"iterable too short: {count - n} items missing of {count}")
    t.flush()
    return t


def eval(expression: str, user_dict: dict | None = None, vm: str | None = None,  # noqa: A001
         out_flavor: str | None = None, blen: int | None = None, **kwargs: Any) -> Any:
    """Evaluate an expression over carrays, arrays and scalars, block by block.

    Names are looked up in ``user_dict``, then in the caller's variables (as
    bcolz does).  Operands must have equal lengths; only one block of each is
    decoded at a time.  With an N-d carray or a lazy expression among the
    operands, the expression is a :class:`carray.compute.LazyExpr` (operands
    broadcast as in numpy), computed chunk by chunk.

    Parameters
    ----------
    expression : str
        numexpr syntax, e.g. ``"a * 2 + sin(b)"`` or ``"(x < 0.1) & (y > 0.5)"``;
        also ``"x in [1, 2]"``, ``"name == b'abc'"`` and, on datetime64 operands,
        ``"day >= '2013-06-01'"`` (see :mod:`carray.compute.ops`).
    vm : {None, 'numexpr', 'python', 'dask'}
        The evaluator (default ``carray.defaults.vm``: None picks per expression);
        'dask' evaluates with dask's arrays (the carray operands read region by region
        by dask's scheduler), as bcolz did; it needs dask installed.
    out_flavor : {'carray', 'numpy'}
        The result's type (default ``carray.defaults.out_flavor``); other keyword
        arguments go to the result carray.

    Notes
    -----
    As in numexpr, the expression may end with a reduction, ``sum(...)`` or
    ``prod(...)``, of all items or along an ``axis`` (``"sum(x * y, axis=1)"``),
    whatever the ``vm``: a scalar, or an array of the remaining axes.
    """
    vm = defaults.vm if vm is None else vm
    out_flavor = defaults.out_flavor if out_flavor is None else out_flavor
    scope = caller_scope(1)
    scope.update(user_dict or {})
    reduction = Reduction.parse(expression)
    if reduction is not None:
        return _eval_reduction(reduction, scope, out_flavor, kwargs)
    parsed = Expression.parse(expression)
    if vm == "dask":
        return _eval_dask(parsed, scope, out_flavor, kwargs)
    if wants_lazy(parsed.names, scope):  # N-d operands broadcast, as in carray.compute
        lazy = lazy_expression(parsed.tree, scope)
        return np.asarray(lazy) if out_flavor == "numpy" else lazy.compute(**kwargs)
    ev = BlockEvaluator(parsed, {}, scope, vm=vm, blen=blen, prune=False)
    return collect_result(ev, out_flavor, kwargs)


def _eval_reduction(reduction: Reduction, scope: dict, out_flavor: str, kwargs: dict) -> Any:
    """``eval`` of an expression ending with a reduction, streamed over the chunks."""
    value = lazy_expression(reduction.inner.tree, scope)
    if not hasattr(value, "shape"):  # scalars only
        value = np.asarray(value)
    result = reduce(reduction.op, value, axis=reduction.axis)
    if np.ndim(result) == 0 or out_flavor == "numpy":
        return result
    return carray(result, **kwargs)


def _eval_dask(parsed: Expression, scope: dict, out_flavor: str, kwargs: dict) -> Any:
    """``eval`` with vm='dask' (dask is imported only then: it is slow to import)."""
    if out_flavor not in ("carray", "bcolz", "numpy"):
        raise ValueError(f"out_flavor must be 'carray' or 'numpy', got {out_flavor!r}")
    from carray.integrations import dask_eval

    value = dask_eval.evaluate(parsed, scope)
    if np.ndim(value) == 0:
        return value[()] if isinstance(value, np.ndarray) else value
    return value if out_flavor == "numpy" else carray(value, **kwargs)


def iterblocks(cobj: carray, blen: int | None = None, start: int = 0,
               stop: int | None = None) -> Iterator[np.ndarray]:
    """Iterate over ``cobj`` in blocks of ``blen`` rows (bcolz's top-level form)."""
    return cobj.iterblocks(blen, start, stop)


def _container_format(rootdir: str, storage_options: dict | None) -> Any:
    """The registry's format for ``rootdir``, which must hold a carray, ctable or group."""
    # The registry sits above the containers; asked here only when a path is opened.
    fmt = registry.sniff(rootdir, storage_options)
    if not fmt.container and fmt.kind != "group":
        raise FormatError(f"a {fmt.description}, not a carray or ctable (read it with "
                          "carray.registry.open_any, or `carray convert` it)", rootdir)
    return fmt


def open(rootdir: str | os.PathLike, mode: str | None = None, *,  # noqa: A001
         storage_options: dict | None = None, **kwargs: Any) -> carray | ctable | Group:
    """Open a dataset (a carray, a ctable or a group); the format is told by what is
    stored.

    Parameters
    ----------
    rootdir : str or path
        A local path or any fsspec URL (``s3://bucket/data``, ``memory://x``).
    mode : {'a', 'r', 'w'}, optional
        'r' never writes.  'a' (the default) reads and writes.  'w' replaces the
        dataset: this process's older handles of it are closed, their unflushed
        changes dropped (see :mod:`carray.stores.lock`).  An earlier version
        (``version=``, ``tag=``, ``as_of=``) opens read-only: with 'a' or 'w' it
        raises :class:`carray.errors.ModeError`.
    storage_options : dict, optional
        Passed to the fsspec file system of a URL (credentials, endpoint, ...).
    **kwargs
        As for :class:`carray` or :class:`ctable`.

    Raises
    ------
    ContainerNotFoundError
        Nothing is at ``rootdir``.
    FormatError
        Something is there, but not a carray or ctable in any format carray knows.
    """
    rootdir = os.fspath(rootdir)
    kind = _container_format(rootdir, storage_options).kind
    if kind == "group":
        # 'w' opens a group to write it (carray.group(path, mode='w') replaces one); no
        # mode opens it to write, or an earlier version read-only.
        pinned = any(kwargs.get(k) is not None for k in ("version", "tag", "as_of"))
        group_mode = {"r": "r", "a": "a", "w": "a", None: None if pinned else "a"}[mode]
        return open_group(rootdir, group_mode, storage_options=storage_options, **kwargs)
    if kind == "table":
        return open_table(rootdir, mode, storage_options=storage_options, **kwargs)
    return open_array(rootdir, mode, storage_options=storage_options, **kwargs)


def open_array(rootdir: str | os.PathLike, mode: str | None = None, *,
               storage_options: dict | None = None, **kwargs: Any) -> carray:
    """Open an array (superchunk or bcolz directory, b2nd or caterva frame).

    Parameters are as for :func:`open`; raises FormatError when ``rootdir`` holds a
    table or anything else that is not an array.
    """
    rootdir = os.fspath(rootdir)
    fmt = _container_format(rootdir, storage_options)
    if fmt.kind != "array":
        raise FormatError(f"a {fmt.description}, not an array (open it with "
                          "carray.open_table)", rootdir)
    return carray(rootdir=rootdir, mode=mode, storage_options=storage_options, **kwargs)


def open_table(rootdir: str | os.PathLike, mode: str | None = None, *,
               storage_options: dict | None = None, **kwargs: Any) -> ctable:
    """Open a table directory; parameters as for :func:`open`.

    Raises FormatError when ``rootdir`` holds an array or anything else.
    """
    rootdir = os.fspath(rootdir)
    fmt = _container_format(rootdir, storage_options)
    if fmt.kind != "table":
        raise FormatError(f"a {fmt.description}, not a table (open it with "
                          "carray.open_array)", rootdir)
    return ctable(rootdir=rootdir, mode=mode, storage_options=storage_options, **kwargs)


@contextlib.contextmanager
def transaction(*containers: Any, message: str | None = None) -> Iterator[None]:
    """Changes made inside to several arrays and tables commit as one version each, all
    or none, when the block ends.

    When the block raises, or the commit fails, nothing of it is committed, then or
    later: every container is put back to its newest version (changes made before the
    block and not committed are dropped with it).  The containers must be writable,
    kept in carray's own layout in one store (a table's columns count with their
    table); the commit protocol is in docs/spec/commit.md.

    Examples
    --------
    >>> with ca.transaction(temperature, events, message="day 12"):  # doctest: +SKIP
    ...     temperature.append(frames)
    ...     events.append(rows)
    """
    from carray.versions.transaction import common_root, publish_together, rebase_and_stage

    owners = {id(c.versioned_dataset()): c for c in containers}
    datasets = [c.versioned_dataset() for c in owners.values()]
    stores = {ds.repo.store.identity for ds in datasets}
    if len(stores) > 1:
        raise ValueError("a transaction's datasets must live in one store")
    try:
        with contextlib.ExitStack() as stack:
            for ds in datasets:
                stack.enter_context(ds.held())
            yield
            for c in owners.values():
                c.flush()
        publish_together(datasets, message, common_root(datasets),
                         lambda ds, newer: rebase_and_stage(ds, owners[id(ds)], newer),
                         fsync=all(ds.repo.fsync for ds in datasets))
    except BaseException:
        for c in owners.values():
            with contextlib.suppress(Exception):  # closed meanwhile: nothing to put back
                c.reset()
        raise


def prune(rootdir: str | os.PathLike, keep_last: int | None = None, older_than: Any = None,
          *, storage_options: dict | None = None) -> int:
    """Drop the versions of a stored array or table past its newest ``keep_last`` or made
    before ``older_than`` (a datetime, or a timedelta back from now) -- never the newest,
    a tagged one or one a reader holds -- and reuse their bytes; returns how many went.
    A group's versions go with the member versions only they named."""
    with open(rootdir, mode="a", storage_options=storage_options) as c:
        return c.prune(keep_last, older_than)


__all__ = ["arange", "calc_chunklen", "eval", "fill", "fromiter", "iterblocks", "ones", "open",
           "open_array", "open_table", "prune", "transaction", "zeros"]
