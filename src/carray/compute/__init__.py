"""Computing on compressed arrays: numpy's protocols, streamed reductions, lazy expressions.

* :class:`ComputeMixin` (inherited by ``carray``) gives operators, numpy's
  ``__array_ufunc__``/``__array_function__`` and the reductions ``sum``,
  ``prod``, ``mean``, ``std``, ``var``, ``min``, ``max``, ``any``, ``all``,
  ``argmin``, ``argmax`` and ``count_nonzero`` (numpy's arguments: ``axis``,
  ``keepdims``, ``dtype``, ``where=``...), streamed chunk by chunk.
* :class:`LazyExpr` is what operators and ufuncs on carrays return.
* :mod:`.zones` lets per-chunk min/max summaries answer without reading.
"""

from carray.compute import functions as _functions  # noqa: F401,I001 - registers numpy functions
from carray.compute._types import array_type, register_array_type
from carray.compute.protocols import FALLBACK_BYTES, ComputeMixin, LazyExpr
from carray.compute.reduce import reduce
from carray.compute.strings import expression

__all__ = ["FALLBACK_BYTES", "ComputeMixin", "LazyExpr", "array_type", "expression", "reduce",
           "register_array_type"]
