"""``numpy.histogram`` and ``numpy.histogram_bin_edges`` of carrays and expressions,
streamed.

The edges are numpy's own: given, or computed by numpy from the range (given, or
the smallest and largest value, one streamed min/max each), which is all numpy
reads of the data for an int ``bins``.  Every chunk is then counted by
``numpy.histogram`` with the same ``bins`` and range, so each item falls in the
bin numpy would put it in, and the counts are added up.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from carray.compute.evaluate import values_at
from carray.compute.reduce import reduce
from carray.compute.slabs import scan
from carray.errors import UnsupportedOptionError


def histogram_bin_edges(a: Any, bins: Any = 10, range: Any = None,  # noqa: A002
                        weights: Any = None) -> np.ndarray:
    """The bin edges ``numpy.histogram`` would use, as ``numpy.histogram_bin_edges``: numpy
    computes them from the range alone, here from a stand-in holding the data's min and
    max (numpy's errors included)."""
    if isinstance(bins, str):
        raise UnsupportedOptionError(f"histogram bins={bins!r} (estimated from the data) is "
                                     "not supported on carrays; give a number of bins or "
                                     "the edges")
    if range is not None or np.ndim(bins) != 0 or a.size == 0:
        stand_in = np.zeros(0, dtype=a.dtype)
    else:
        stand_in = np.array([reduce("min", a), reduce("max", a)], dtype=a.dtype)
    return np.histogram_bin_edges(stand_in, bins, range=range)


def histogram(a: Any, bins: Any = 10, range: Any = None,  # noqa: A002
              density: bool | None = None, weights: Any = None
              ) -> tuple[np.ndarray, np.ndarray]:
    """Counts (or summed ``weights``) per bin, and the edges, as ``numpy.histogram``.

    Parameters
    ----------
    a : carray or LazyExpr
        The values (flattened, as numpy does).
    bins : int or sequence of scalars
        A number of equal bins or the edges (data-estimated rules such as
        ``"auto"`` are not supported).
    range : (float, float), optional
        The range of equal bins; default the data's min and max.
    density : bool, optional
        Normalise to a probability density, as numpy does.
    weights : carray, LazyExpr or numpy.ndarray, optional
        Of ``a``'s shape: each item counts its weight.

    Returns
    -------
    hist, bin_edges : numpy.ndarray
    """
    edges = histogram_bin_edges(a, bins, range)
    # Equal bins: every chunk gets numpy's outer edges, so numpy bins each item where it
    # would bin it in the whole array.
    lohi = range if np.ndim(bins) != 0 or range is not None else (edges[0], edges[-1])
    if weights is not None and tuple(np.shape(weights)) != tuple(a.shape):
        raise ValueError("weights should have the same shape as a.")
    # The same bins and range for every chunk as numpy is given, so numpy bins each item
    # where it would bin it in the whole array.
    chunk_bins = bins if np.ndim(bins) != 0 else len(edges) - 1
    empty_w = None if weights is None else np.zeros(0, dtype=np.asarray(
        values_at(weights, (slice(0, 0),) * len(a.shape)) if a.shape else weights).dtype)
    total, _ = np.histogram(np.zeros(0, dtype=a.dtype), chunk_bins, range=lohi,
                            weights=empty_w)

    def count(block: np.ndarray, region: Any) -> np.ndarray:
        w = None if weights is None else np.asarray(values_at(weights, region))
        return np.histogram(block, chunk_bins, range=lohi, weights=w)[0]

    if a.size:
        for _, part in scan(a, count):
            total += part
    if density:
        widths = np.diff(edges)
        return total / widths / total.sum(), edges
    return total, edges
