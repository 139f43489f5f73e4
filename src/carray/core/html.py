"""HTML summaries of containers for notebooks (``_repr_html_``).

A summary is a small table of facts (shape, dtype, sizes, ratio, where it lives)
and a preview of the first and last rows, so showing a large array in a
notebook reads a few chunks, never the whole array.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

import numpy as np

#: Rows shown at each end of a container in a notebook.
EDGE_ROWS = 5


def edge_rows(n: int, rows: int = EDGE_ROWS) -> tuple[range, range]:
    """Row numbers to preview: all of ``n`` when few, else ``rows`` at each end."""
    if n <= 2 * rows:
        return range(n), range(0)
    return range(rows), range(n - rows, n)


def _cell(value: Any) -> str:
    if value is np.ma.masked:  # a missing value, as numpy prints it
        return "--"
    if isinstance(value, np.ndarray):
        value = np.array2string(value, threshold=6, edgeitems=2, separator=", ")
    return html.escape(str(value))


def summary_html(title: str, facts: Sequence[tuple[str, Any]],
                 headers: Sequence[str] | None = None,
                 head: Sequence[Sequence[Any]] = (),
                 tail: Sequence[Sequence[Any]] = ()) -> str:
    """``title``, a two-column table of ``facts``, then ``head`` and ``tail`` rows under
    ``headers`` with an ellipsis row between them when ``tail`` is not empty."""
    out = [f"<div><strong>{html.escape(title)}</strong>", "<table>"]
    out += [f"<tr><th style='text-align:left'>{html.escape(k)}</th><td>{_cell(v)}</td></tr>"
            for k, v in facts]
    out.append("</table>")
    if headers is not None and (head or tail):
        out.append("<table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in headers)
                   + "</tr>")
        out += ["<tr>" + "".join(f"<td>{_cell(v)}</td>" for v in row) + "</tr>"
                for row in head]
        if tail:
            out.append("<tr>" + "<td>&hellip;</td>" * len(headers) + "</tr>")
            out += ["<tr>" + "".join(f"<td>{_cell(v)}</td>" for v in row) + "</tr>"
                    for row in tail]
        out.append("</table>")
    out.append("</div>")
    return "\n".join(out)
