"""Edit carray's JSON metadata files in tests the way a hostile or foreign writer would:
the new content keeps a valid checksum when the file had one, so the reader's checks
of what the file says are what a test reaches (not the checksum)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from carray.core.checkedjson import dumps_checked, load_checked


def read_meta(path: str | Path) -> dict[str, Any]:
    """A metadata file's JSON object, without its checksum member."""
    obj, _ = load_checked(Path(path).read_bytes(), str(path), "test")
    return obj


def write_meta(path: str | Path, obj: Any, checked: bool = True) -> None:
    """Write ``obj`` as carray writes metadata (with a valid checksum when ``checked``)."""
    Path(path).write_bytes(dumps_checked(obj) if checked and isinstance(obj, dict)
                           else (json.dumps(obj) + "\n").encode())


def edit_meta(path: str | Path, change: Callable[[dict[str, Any]], Any] | None = None,
              **values: Any) -> dict[str, Any]:
    """Set ``values`` in (or apply ``change`` to) a metadata file's object, keeping the
    file checksummed if it was; returns the new object."""
    raw = Path(path).read_bytes()
    obj, checked = load_checked(raw, str(path), "test")
    obj.update(values)
    if change is not None:
        obj = change(obj) or obj
    write_meta(path, obj, checked)
    return obj
