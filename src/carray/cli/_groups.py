"""What ``carray info``, ``verify`` and ``head`` do with a group (:func:`carray.group`).

* info prints the group's tree (:meth:`carray.Group.tree`), its version and kept
  versions, and its attributes;
* verify checks every member array and table with its own format's checks (each
  member's directory, as ``carray verify`` would check it alone) and names the
  member in every problem found;
* head prints the first rows of every array and table, or of one member given as
  ``GROUP/member/path``; missing values show as ``--``, as they do for the group's
  NetCDF copy: an array's items equal to its ``_FillValue`` or ``missing_value``
  attribute, and a table's missing rows.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from carray import registry
from carray.core.problems import Finding, Problem
from carray.errors import CArrayError, ContainerNotFoundError
from carray.groups.group import Group, open_group
from carray.stores import is_url, resolve
from carray.versions import Repository
from carray.versions.outcomes import COMMIT


def members(g: Group) -> Iterator[tuple[str, str]]:
    """``(path, kind)`` of every array and table below ``g``, depth first, by name,
    without opening any."""
    for name in g:
        kind = g.kind_of(name)
        path = f"{g.path}/{name}" if g.path else name
        if kind == "group":
            yield from members(g[name])
        else:
            yield path, kind


# -- info -------------------------------------------------------------------------------------


def info_rows(info: dict) -> list[tuple[str, str]]:
    """The ``name : value`` lines under a group's tree: what it holds and its size."""
    kinds = [m["kind"] for m in info.get("members", [])]
    counts = ", ".join(f"{kinds.count(k)} {k}{'' if kinds.count(k) == 1 else 's'}"
                       for k in ("array", "table", "group"))
    rows = [("members", counts)]
    if info.get("disk_bytes") is not None:
        from carray.cli._ui import human

        rows.append(("on disk", human(info["disk_bytes"])))
    return rows


# -- verify -----------------------------------------------------------------------------------


def _member_findings(path: str, member: str, kind: str, location: str,
                     storage_options: dict | None) -> Iterator[Finding]:
    """The findings of one member's directory, each problem naming the member."""
    try:
        fmt = registry.sniff(location, storage_options)
    except (CArrayError, OSError) as exc:
        yield Problem(location, "", f"group member {member!r} ({kind}): {exc}")
        return
    if fmt.kind != kind:
        yield Problem(location, "", f"group member {member!r}: the group says a {kind}, "
                                    f"but a {fmt.description} is there")
        return
    for finding in registry.verify(location, storage_options):
        if isinstance(finding, Problem):
            yield Problem(finding.path, finding.where,
                          f"group member {member!r}: {finding.what}")
        else:
            yield finding


def verify_group(path: str, storage_options: dict | None = None) -> Iterator[Finding]:
    """Every problem of the group at ``path``: its marker, every kept version (its
    manifest, its description, and every member opened at the version it names, as a
    reader of that version opens them), then each member directory any kept version
    names (every kept version of it, with its own format's checks), and every chunk
    checked."""
    options = storage_options if is_url(path) else None
    try:
        open_group(path, "r", storage_options=options).close()
    except (CArrayError, OSError, ValueError) as exc:
        yield Problem(path, "", f"the group does not open: {exc}")
        return
    store, root = resolve(path, options)
    repo = Repository(store, root)
    located: dict[str, tuple[str, str]] = {}
    for seq in repo.seqs():
        try:
            manifest = repo.load(seq)
            outcome = repo.outcomes.outcome(manifest)
        except CArrayError as exc:
            yield Problem.from_error(exc, repo.url(seq))
            continue
        if outcome is None:
            yield Problem(repo.url(seq), "", f"group version {manifest.id} was published by "
                          "a commit whose outcome is recorded nowhere: it does not count")
        elif outcome == COMMIT:
            yield from _version_findings(path, repo.url(seq), manifest.id, options, located)
    for location, (member, kind) in located.items():
        yield from _member_findings(path, member, kind, location, options)


def _version_findings(path: str, url: str, version: str, options: dict | None,
                      located: dict[str, tuple[str, str]]) -> Iterator[Problem]:
    """Open one group version and each of its members as a reader of it does; note
    where each member lives in ``located``."""
    try:
        g = open_group(path, "r", version=version, storage_options=options)
    except (CArrayError, OSError, ValueError) as exc:
        yield Problem(url, "", f"group version {version} does not open: {exc}")
        return
    with g:
        for member, kind in list(members(g)):
            location = os.path.join(path, g.member_location(member)) if not is_url(path) \
                else f"{path.rstrip('/')}/{g.member_location(member)}"
            located.setdefault(location, (member, kind))
            try:
                g[member].close()
            except (CArrayError, OSError, ValueError) as exc:
                yield Problem(location, "", f"group member {member!r} at group version "
                                            f"{version}: {exc}")


# -- head -------------------------------------------------------------------------------------


def split_member(path: str, storage_options: dict | None = None) -> tuple[str, str] | None:
    """``(group, member)`` when ``path`` names a member inside a stored group
    (``run.cagroup/sub/temp``); None when it does not."""
    text = path.rstrip("/")
    head, tail = text, ""
    while True:
        head, _, last = head.rpartition("/")
        if not head:
            return None
        tail = f"{last}/{tail}" if tail else last
        try:
            fmt = registry.sniff(head, storage_options if is_url(head) else None)
        except (CArrayError, OSError):
            continue
        return (head, tail) if fmt.kind == "group" else None


def _first_rows(obj: Any, kind: str, rows: int) -> dict[str, Any]:
    if kind == "table":
        out = {}
        for name in obj.names:
            values = obj.cols[name][:rows]  # masked where rows are missing
            out[name] = values if np.ma.isMaskedArray(values) else np.asarray(values)
        return out
    values = np.asarray(obj[()] if not obj.ndim else obj[:rows])
    return {"value": masked_as_netcdf(values, obj.attrs)}


def masked_as_netcdf(values: np.ndarray, attrs: Any) -> np.ndarray:
    """``values`` masked where NetCDF readers mask them: items equal to the
    ``_FillValue`` or one of the ``missing_value`` attributes (NaN matching NaN)."""
    if values.dtype.kind not in "biufcmMSU":
        return values
    missing = np.zeros(values.shape, bool)
    for key in ("_FillValue", "missing_value"):
        for fill in np.ravel(np.asarray(attrs.get(key, []), dtype=object)):
            try:
                value = np.asarray(fill).astype(values.dtype)
            except (TypeError, ValueError, OverflowError):
                continue  # a fill value the array's type cannot hold marks nothing
            missing |= np.isnan(values) if values.dtype.kind in "fc" and \
                np.isnan(value) else values == value
    return np.ma.masked_array(values, missing) if missing.any() else values


def head_group(path: str, member: str, rows: int, storage_options: dict | None,
               show: Callable[[dict[str, Any]], None]) -> None:
    """``show`` the first ``rows`` rows of every array and table in the group at
    ``path`` (only ``member`` and below when given), each under a ``== path ==`` line."""
    options = storage_options if is_url(path) else None
    with open_group(path, "r", storage_options=options) as g:
        if member and member not in g:
            raise ContainerNotFoundError(f"{path}: the group has no member {member!r}")
        kind = g.kind_of(member) if member else "group"
        chosen = list(members(g[member])) if kind == "group" else [(member, kind)]
        for n, (name, what) in enumerate(chosen):
            obj = g[name]
            shape = "" if what == "table" else \
                f" {tuple(obj.shape)} {obj.dtype} ({', '.join(g.dims_of(name))})"
            print(("\n" if n else "") + f"== {name}: {what}{shape} ==")
            show(_first_rows(obj, what, rows))
