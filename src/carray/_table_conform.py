"""Rows given to a table's ``append``, as one converted array per column."""

from __future__ import annotations

from typing import Any

import numpy as np

from carray.tables_interop import normalise_rows
from carray.vlstring import StringColumn


def conform_rows(columns: dict[str, Any], values: Any) -> dict[str, Any]:
    """Incoming rows as one converted array per column of ``columns`` (name -> column),
    all checked before any write."""
    cols = normalise_rows(values, list(columns))
    out, lengths = {}, set()
    for name, col in columns.items():
        v = cols[name]
        if isinstance(col, StringColumn):
            v = np.asarray(v, dtype=object).reshape(-1) if not hasattr(v, "buffers") else v
        else:
            v = np.asarray(v, dtype=col.dtype)
            if v.shape == col.shape[1:]:
                v = v.reshape((1, *v.shape))
            if v.shape[1:] != col.shape[1:]:
                raise ValueError(f"column {name!r}: rows of shape {v.shape[1:]}, expected "
                                 f"{col.shape[1:]}")
        out[name] = v
        lengths.add(len(v))
    if len(lengths) > 1:
        raise ValueError(f"appended columns have different lengths: {sorted(lengths)}")
    return out
