"""Verification of a Bloscpack file with the parser its reader uses.

The header, metadata section (and its digest), offsets table and every chunk
header are checked as reading does; then each chunk's digest is compared and
the chunk decoded.  Nothing is written.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from carray.core.problems import Checked, Finding, Problem
from carray.errors import CArrayError
from carray.formats.bloscpack.read import BlpFile
from carray.stores import Store


def verify(store: Store, path: str) -> Iterator[Finding]:
    """Yield every problem of the ``.blp`` file at ``path`` (and each chunk checked)."""
    url = store.url(path)
    try:
        f = BlpFile((store, path))
    except CArrayError as exc:
        yield Problem.from_error(exc, url)
        return
    with f:
        try:
            lay = f.layout(verify=True)
            spans = f.spans(lay)
        except CArrayError as exc:
            yield Problem.from_error(exc, url)
            return
        impl = lay.header.checksum_impl
        for s in spans:
            try:
                rec = f.pread(s.cbytes + impl.size, s.offset, f"chunk {s.index}")
                chunk = memoryview(rec)[:s.cbytes]
                if impl.size and impl.digest(chunk) != rec[s.cbytes:]:
                    yield Problem(url, f"offset {s.offset}",
                                  f"chunk {s.index}: {impl.name} checksum mismatch")
                    continue
                f.decode(chunk, np.empty(s.nbytes, np.uint8), s)
                yield Checked(url)
            except CArrayError as exc:
                yield Problem.from_error(exc, url)
