"""Layouts: how an array's chunks and metadata map to storage.

A layout knows nothing of selections; an array never parses a header.
"""

from carray.layouts.base import ArrayMeta, Layout
from carray.layouts.memory import MemoryLayout

__all__ = ["ArrayMeta", "Layout", "MemoryLayout"]
