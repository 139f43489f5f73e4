"""Nested columns: a table column whose values are records of a structured dtype,
stored field by field.

On disk a nested column ``b`` of dtype ``[('sc1', 'i4'), ('sc3', 'f8')]`` is a
directory holding one column directory per field, ``b/sc1`` and ``b/sc3``, and
``b/__rootdirs__`` naming them in order: the layout the carray/BLZ proposals draw
for nested dtypes (the root of a nested type holds its components), and itself
a table directory, so each field is a real column that opens on its own.  A
field with a structured dtype is nested again, one directory level deeper.

``t.cols['b']['sc1']`` is the field's column; reading rows of ``b`` gives the
records, and rows of the table hold them as nested records.
"""

from __future__ import annotations

from carray.table.bcolz.refresh import is_nested_column
from carray.table.table import NestedColumn, wants_nested_column

__all__ = ["NestedColumn", "is_nested_column", "wants_nested_column"]
