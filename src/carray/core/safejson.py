"""The one JSON parser for metadata files: bounded nesting, every failure a FormatError.

Python's JSON decoder recurses once per nesting level, so a file holding
``[[[[...`` a hundred thousand deep raises ``RecursionError`` (or, decoded
further by recursive code, exhausts the stack).  Metadata is never deep: the
nesting is measured before parsing and refused beyond :data:`MAX_DEPTH`.
"""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np

from carray.errors import FormatError

#: Deepest nesting of arrays and objects accepted in a metadata file.
MAX_DEPTH = 64

# A JSON string with its escapes, and anything that is not a bracket.
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


def json_depth(text: str) -> int:
    """The deepest nesting of ``[``/``{`` in JSON ``text`` (brackets in strings ignored)."""
    if "[" not in text and "{" not in text:
        return 0
    # Done by regular expressions and numpy, not a Python loop: headers can be large.
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text)).encode("ascii")
    if not brackets:
        return 0
    codes = np.frombuffer(brackets, np.uint8)
    steps = np.where((codes == ord("[")) | (codes == ord("{")), 1, -1)
    return int(np.cumsum(steps).max())


def load_json(data: bytes | str, source: str, *, what: str = "metadata",
              max_depth: int = MAX_DEPTH, offset: int | None = None) -> Any:
    """Parse one JSON metadata document.

    Parameters
    ----------
    data : bytes or str
        The document (bytes are decoded as UTF-8).
    source : str
        The file or key it was read from, named in errors.
    what : str
        What the document is, for messages (``"meta/attrs"``).
    max_depth : int
        Deepest nesting of arrays and objects accepted.
    offset : int, optional
        Where the document starts in ``source``, for messages.

    Raises
    ------
    FormatError
        Not UTF-8, not JSON, or nested deeper than ``max_depth``.
    """
    try:
        text = data if isinstance(data, str) else bytes(data).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FormatError(f"{what} is not UTF-8: {exc}", source, offset) from None
    # The count of opening brackets bounds the depth from above and costs far less than
    # measuring it: a small document (a tiny file's header) skips the measure.
    if text.count("[") + text.count("{") > max_depth \
            and (depth := json_depth(text)) > max_depth:
        raise FormatError(f"{what} nests {depth} levels deep (at most {max_depth})",
                          source, offset)
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError; ints past Python's limit
        raise FormatError(f"{what} is not valid JSON: {exc}"[:400], source, offset) from None
