"""``copy_group``: a stored carray group copied whole, its arrays' chunks moved as bytes."""

from __future__ import annotations

import os
from typing import Any

from carray.array.transfer import MoveStats
from carray.integrations.group_files import convert_group


def copy_group(group: Any, dst: str | os.PathLike, *, overwrite: bool = False,
               storage_options: dict | None = None) -> dict[str, MoveStats]:
    """Copy a stored carray group (a :class:`carray.Group`, committed first, or its path or
    URL) to a new carray group at ``dst``.

    Each array's chunks move as their stored bytes, checked by their checksums (see
    :mod:`carray.array.transfer`); tables are copied a batch of rows at a time.  The copy
    is built beside ``dst`` and renamed into place, so a failure leaves nothing there.

    Returns
    -------
    dict
        By member path, a :class:`carray.array.transfer.MoveStats` saying how many of that
        array's chunks moved and how many were decoded (and why).

    Raises
    ------
    ValueError
        ``group`` is a group in memory or a sub-group.
    ContainerExistsError
        ``dst`` exists and ``overwrite`` is false.
    """
    if isinstance(group, (str, os.PathLike)):
        src = os.fspath(group)
    else:
        if group.url is None or group.path:
            raise ValueError("only a stored root group can be copied; create a group and "
                             "copy members into it")
        if not group.readonly:
            group.commit("before a copy")
        src = group.url
    return convert_group(src, dst, "group", overwrite=overwrite,
                         storage_options=storage_options)
