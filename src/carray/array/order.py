"""Fortran-order arrays: an ``order='F'`` carray stores the transpose of the array its
users see (axes reversed), so each stored chunk holds its items in Fortran order and
whole reads come back Fortran-contiguous.

These helpers turn keys on the user's array into keys on the stored one; the
facade (:class:`carray.array.array.carray`) applies them around its engine calls.
"""

from __future__ import annotations

from carray.chunks.keys import CoordKey, OrthoKey

ORDERS = ("C", "F")


def check_order(order: str) -> str:
    """``order`` if it is 'C' or 'F'."""
    if order not in ORDERS:
        raise ValueError(f"order must be 'C' or 'F', got {order!r}")
    return order


def stored_okey(okey: OrthoKey) -> OrthoKey:
    """The selection ``okey`` makes, on the stored (transposed) array: every axis kept,
    in reverse order; the caller transposes what it reads and finishes with ``okey``."""
    sel = okey.sel_shape
    return OrthoKey(okey.shape[::-1], okey.axes[::-1], (), (), sel[::-1])


def stored_ckey(ckey: CoordKey) -> CoordKey:
    """The items ``ckey`` picks, by their coordinates on the stored array."""
    return CoordKey(ckey.shape[::-1], ckey.coords[::-1], ckey.out_shape)
