"""What an array is, as opposed to what it holds: the facts fixed when it was made (dtype,
chunk and block shapes, codec, fill value, order, expected length)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from carray.core.params import CParams
from carray.layouts.base import ArrayMeta


@dataclass(frozen=True, eq=False)
class ArrayDescription:
    """The fixed description of an array (its shape, which changes, is not part of it).

    Attributes
    ----------
    dtype : numpy.dtype
        The item type.
    chunks, blocks : tuple of int
        The chunk shape, and the block shape inside chunks (None: Blosc's own blocks over
        runs of whole rows).
    cparams : CParams
        Codec parameters of new chunks.
    dflt : numpy.ndarray
        The fill value, a 0-d array of ``dtype``.
    expectedlen : int
        How long the first axis was expected to grow.
    order : {'C', 'F'}
        'F' when the stored array is the transpose of the one users see.
    """

    dtype: np.dtype
    chunks: tuple[int, ...]
    blocks: tuple[int, ...] | None
    cparams: CParams
    dflt: np.ndarray
    expectedlen: int
    order: str

    @classmethod
    def of(cls, meta: ArrayMeta) -> ArrayDescription:
        return cls(dtype=meta.dtype, chunks=tuple(meta.chunks),
                   blocks=None if meta.blocks is None else tuple(meta.blocks),
                   cparams=meta.cparams,
                   dflt=np.asarray(meta.dflt if meta.dflt is not None else 0, dtype=meta.dtype),
                   expectedlen=meta.expectedlen, order=meta.order)

    def meta(self, shape: tuple[int, ...]) -> ArrayMeta:
        """What a layout records about an array of this description and ``shape``."""
        return ArrayMeta(dtype=self.dtype, shape=shape, chunks=self.chunks, blocks=self.blocks,
                         cparams=self.cparams, dflt=self.dflt, expectedlen=self.expectedlen,
                         order=self.order)
