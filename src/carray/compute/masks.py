"""``a[mask]`` and ``a[mask] = value`` for a boolean mask shaped like the whole array.

numpy's meaning: the selected items, in C order, as a 1-d array.  The mask may
be a lazy expression (``a[a > 40]``), a boolean carray or a numpy boolean
array; the array and the mask are read together in slabs of whole chunk rows
along axis 0 (:func:`carray.compute.slabs.row_slabs`), which hold the items in
C order, so memory stays at a slab (a few at once on worker threads) plus the
result.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from carray.compute import protocols
from carray.compute._types import is_carray
from carray.compute.evaluate import plan_chunks, threaded_for, values_at, waves
from carray.compute.expr import Expr
from carray.compute.slabs import row_slabs


def is_mask_key(src: Any, key: Any) -> bool:
    """Whether ``key`` is one boolean mask of ``src``'s whole shape that this module
    selects with: a lazy expression or a carray (any ndim), or a numpy array of ndim > 1
    (1-d numpy masks are the orthogonal rule's, with the same result)."""
    shape = tuple(src.shape)
    if not shape or getattr(key, "dtype", None) != np.dtype(bool):
        return False
    if isinstance(key, Expr) or is_carray(key):
        return tuple(key.shape) == shape
    return isinstance(key, np.ndarray) and key.ndim > 1 and key.shape == shape


def select(src: Any, mask: Any) -> np.ndarray:
    """The items of ``src`` (a carray or expression) where ``mask`` is true, in C order.

    Parameters
    ----------
    src : carray or LazyExpr
        The values.
    mask : LazyExpr, carray or numpy.ndarray of bool
        Of ``src``'s shape.

    Returns
    -------
    numpy.ndarray
        1-d, of ``src``'s dtype.
    """
    chunks = plan_chunks(src)

    def pick(region: tuple[slice, ...]) -> np.ndarray:
        where = np.asarray(values_at(mask, region), dtype=bool)
        if not where.any():
            return np.empty(0, dtype=src.dtype)
        return np.asarray(values_at(src, region))[where]

    parts = [got for _, got in waves(row_slabs(tuple(src.shape), chunks), pick,
                                     threaded_for(chunks, src)) if got.size]
    if not parts:
        return np.empty(0, dtype=src.dtype)
    return parts[0].copy() if len(parts) == 1 else np.concatenate(parts)


def assign(dest: Any, mask: Any, value: Any) -> None:
    """``dest[mask] = value``: a scalar everywhere the mask is true, or a 1-d array of
    one value per true item (in C order), as numpy assigns; slabs with no true item are
    neither read nor written."""
    values = np.asarray(value)
    if values.ndim > 1 or (values.ndim == 1 and values.size != 1):
        from carray.compute.reduce import reduce

        wanted = int(np.count_nonzero(mask)) if isinstance(mask, np.ndarray) else \
            int(reduce("count_nonzero", mask))
        if values.ndim > 1 or values.size != wanted:
            raise ValueError(f"NumPy boolean array indexing assignment cannot assign "
                             f"{values.size} input values to the {wanted} output values "
                             "where the mask is true")
    elif values.ndim == 1:
        values = values.reshape(())
    done = 0
    for region in row_slabs(tuple(dest.shape), plan_chunks(dest)):
        where = np.asarray(values_at(mask, region), dtype=bool)
        hits = int(np.count_nonzero(where))
        if not hits:
            continue
        block = np.array(dest[region])
        block[where] = values if values.ndim == 0 else values[done:done + hits]
        done += hits
        dest[region] = block


protocols.register_methods({"is_mask_key": is_mask_key, "select": select})
