"""Timezone-aware timestamps: UTC instants in a ``datetime64`` column, the zone beside.

numpy's ``datetime64`` has no zone, so a pandas ``datetime64[ns, tz]`` or Arrow
``timestamp(unit, tz)`` column is stored as the UTC instants (``t['ts'][:]`` gives
them as plain ``datetime64``) and its zone name is kept in the column's attributes
(:data:`ZONE_ATTR`, stored and versioned with the column).  Converting back to
pandas or Arrow puts the zone on again; queries compare the UTC instants.
"""

from __future__ import annotations

import datetime
from typing import Any

import numpy as np

#: The column attribute that names a timestamp column's zone.
ZONE_ATTR = "__timezone__"


class ZonedTimes(np.ndarray):
    """UTC ``datetime64`` instants that remember the zone they came with (``.timezone``);
    a table stores them as a column whose attributes keep the zone."""

    timezone: str | None

    def __new__(cls, utc: np.ndarray, timezone: str) -> ZonedTimes:
        out = np.asarray(utc).view(cls)
        out.timezone = timezone
        return out

    def __array_finalize__(self, obj: Any) -> None:
        self.timezone = getattr(obj, "timezone", None)


def _zone_name(tz: Any) -> str:
    """A zone as the name both pandas and Arrow understand (``'Europe/Paris'``,
    ``'UTC'``, ``'+05:30'`` for a fixed offset)."""
    if isinstance(tz, datetime.timezone):
        offset = tz.utcoffset(None)
        if not offset:
            return "UTC"
        sign, minutes = ("-", -offset // datetime.timedelta(minutes=1)) if \
            offset < datetime.timedelta(0) else ("+", offset // datetime.timedelta(minutes=1))
        return f"{sign}{minutes // 60:02d}:{minutes % 60:02d}"
    name = getattr(tz, "key", None) or getattr(tz, "zone", None) or str(tz)
    return "UTC" if name in ("utc", "UTC", "tzutc()") else name


def _missing_masked(zoned: ZonedTimes) -> Any:
    """Zoned instants, masked where NaT (missing, as pandas and Arrow say) if any is."""
    nat = np.isnat(zoned)
    return np.ma.MaskedArray(zoned, mask=nat) if nat.any() else zoned


def from_pandas(values: Any) -> Any:
    """Pandas ``datetime64[unit, tz]`` values (a Series, an index or an array) as UTC
    instants with their zone (:class:`ZonedTimes`), masked where NaT."""
    import pandas as pd

    dtype = values.dtype
    utc = pd.DatetimeIndex(values).tz_convert("UTC").tz_localize(None)
    return _missing_masked(ZonedTimes(np.asarray(utc, dtype=f"datetime64[{dtype.unit}]"),
                                      _zone_name(dtype.tz)))


def from_arrow(arr: Any) -> Any:
    """An Arrow ``timestamp(unit, tz)`` array as UTC instants with its zone
    (:class:`ZonedTimes`), masked where null."""
    import pyarrow as pa

    unit = arr.type.unit
    naive = arr.cast(pa.timestamp(unit))  # the stored values are the UTC instants
    return _missing_masked(ZonedTimes(np.asarray(naive.to_numpy(zero_copy_only=False),
                                                 dtype=f"datetime64[{unit}]"), arr.type.tz))


def keep_zone(values: Any, col: Any) -> Any:
    """Column ``col`` made of ``values``, with the zone of zoned values kept in its
    attributes; returns ``col``."""
    zone = getattr(values, "timezone", None)
    if zone is not None:
        col.attrs[ZONE_ATTR] = zone
    return col


def zone_of(col: Any) -> str | None:
    """The zone of a timestamp column, or None (not a timestamp column, or naive)."""
    if getattr(col, "dtype", None) is None or np.dtype(col.dtype).kind != "M" or \
            not hasattr(col, "attrs"):
        return None
    zone = col.attrs.get(ZONE_ATTR)
    return zone if isinstance(zone, str) else None


def to_pandas(values: np.ndarray, zone: str) -> Any:
    """UTC instants as a pandas ``DatetimeArray`` in ``zone``."""
    import pandas as pd

    return pd.DatetimeIndex(values).tz_localize("UTC").tz_convert(zone).array


def arrow_type(col: Any, zone: str) -> Any:
    """The Arrow type of a zoned timestamp column."""
    import pyarrow as pa

    unit = np.datetime_data(col.dtype)[0]
    return pa.timestamp(unit, tz=zone)


def to_arrow(values: np.ndarray, zone: str) -> Any:
    """UTC instants as an Arrow ``timestamp(unit, zone)`` array (NaT as null)."""
    import pyarrow as pa

    unit = np.datetime_data(values.dtype)[0]
    return pa.array(values, type=pa.timestamp(unit, tz=zone))
