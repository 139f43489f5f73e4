"""A group writer's description merged with a version another writer published first
(object stores; docs/spec/commit.md, "Rebasing").

The members a commit publishes are rebased one by one (their own datasets, see
:mod:`carray.versions.rebase`); what is left is the group's description of its
nodes.  Each node takes the side that changed it; a node both writers changed
differently is a conflict, except a member this commit published, whose new version
already holds the other writer's changes to it.
"""

from __future__ import annotations

import json
from typing import Any

from carray.errors import ConflictError


def _same(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def merge_nodes(base: dict[str, Any], mine: dict[str, Any], theirs: dict[str, Any],
                published: set[str], where: str) -> dict[str, Any]:
    """The nodes of a group version on top of ``theirs`` with this writer's changes
    from ``base`` to ``mine`` (``published``: member paths whose new versions this
    writer's commit published)."""
    out: dict[str, Any] = {}
    clashes = []
    for path in dict.fromkeys([*theirs, *mine]):
        b, m, t = base.get(path), mine.get(path), theirs.get(path)
        if path in published and m is not None:
            out[path] = m
        elif _same(m, b):
            if t is not None:
                out[path] = t
        elif _same(t, b) or _same(t, m):
            if m is not None:
                out[path] = m
        else:
            clashes.append(path or "/")
    if clashes:
        raise ConflictError(f"{where}: another writer changed node(s) "
                            f"{', '.join(map(repr, clashes))} that this writer changed too; "
                            "refresh and apply the change again, or discard it",
                            [f"{where}: {p}" for p in clashes])
    return out


__all__ = ["merge_nodes"]
