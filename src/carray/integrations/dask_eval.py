"""``carray.eval(..., vm="dask")``: an expression string evaluated by dask, as bcolz did.

The carray operands become dask arrays (:func:`carray.integrations.dask_read.to_dask`:
each task reads one region), the tree is evaluated with the operator and function
table every expression uses (:mod:`carray.compute.ops`), numpy's functions
dispatching to dask's on dask operands, and the result is computed by dask's
scheduler.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from carray.array.array import carray
from carray.compute import LazyExpr
from carray.compute.ops import walk
from carray.compute.parse import Expression
from carray.errors import UnknownNameError


def evaluate(expr: Expression, scope: Mapping[str, Any]) -> Any:
    """The value of ``expr`` (a numpy array or a scalar), its operands from ``scope``.

    Raises
    ------
    ImportError
        dask (with its array extra) is not installed.
    ExpressionError
        A name is not in ``scope``.
    """
    try:
        import dask.array as da
    except ImportError as exc:
        raise ImportError("vm='dask' needs dask's arrays: pip install 'dask[array]'; or "
                          "use vm='numexpr' or 'python'") from exc
    from carray.integrations.dask_read import to_dask

    wrapped: dict[str, Any] = {}  # one dask array per operand, however often it is named

    def lookup(name: str) -> Any:
        if name not in scope:
            raise UnknownNameError(f"{name!r} in {expr.text!r} is not a known variable")
        if name not in wrapped:
            value = scope[name]
            if isinstance(value, carray):
                value = to_dask(value)
            elif isinstance(value, LazyExpr):  # read region by region, as dask asks
                value = da.from_array(value, chunks="auto", asarray=True)
            wrapped[name] = value
        return wrapped[name]

    value = walk(expr.tree, lookup)
    if isinstance(value, da.Array):
        value = value.compute()
    return value if np.ndim(value) == 0 else np.asarray(value)
