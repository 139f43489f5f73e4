"""What the nodes of a parsed expression mean: one operator and function table.

Every operator has numpy's meaning: ``&``, ``|``, ``^`` and ``~`` are numpy's
bitwise ufuncs, which are logical on booleans (and ``and``/``or``/``not`` are
parsed as them, see :mod:`carray.compute.parse`).  :func:`walk` evaluates a
tree once for every consumer: with numpy (:func:`evaluate_numpy`), as a lazy
expression (:mod:`carray.compute.strings`) or with dask's arrays, each by
handing its own ``apply`` and variable ``lookup``.  :func:`numexpr_text` says
when numexpr gives numpy's result for a tree and its operands' dtypes.

Literals adapt to what they meet: a string compared with (or listed against)
a datetime64 operand is read as a date, a ``str`` against a bytes operand is
encoded, and a string against a numeric operand is an :class:`ExpressionError`.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from carray.compute.kleene import isnull, notnull
from carray.errors import ExpressionError


def _text(values: Any, pattern: Any, func: str) -> tuple[Any, Any]:
    """String operands of ``func(values, pattern)`` numpy's string functions take (Python
    ``str`` objects as ``StringDType``).

    Raises
    ------
    ExpressionError
        ``values`` is not text, or ``pattern`` is not a string of the same kind.
    """
    arr = np.asarray(values)
    if arr.dtype == np.dtype(object):
        try:
            arr = arr.astype(np.dtypes.StringDType())
        except (TypeError, ValueError):
            raise ExpressionError(f"{func}() needs strings, got values of other "
                                  "types") from None
    if arr.dtype.kind not in "SUT":
        raise ExpressionError(f"{func}() needs a string operand, got {arr.dtype}")
    wanted = bytes if arr.dtype.kind == "S" else str
    if isinstance(pattern, str) and wanted is bytes:
        pattern = pattern.encode()
    if not isinstance(pattern, wanted):
        raise ExpressionError(f"{func}() needs a {wanted.__name__} to look for, got "
                              f"{pattern!r}")
    return arr, pattern


def contains(s: Any, sub: Any) -> Any:
    """Whether each string of ``s`` contains ``sub``."""
    s, sub = _text(s, sub, "contains")
    return np.greater_equal(np.strings.find(s, sub), 0)


def startswith(s: Any, prefix: Any) -> Any:
    """Whether each string of ``s`` starts with ``prefix``."""
    s, prefix = _text(s, prefix, "startswith")
    return np.strings.startswith(s, prefix)


def endswith(s: Any, suffix: Any) -> Any:
    """Whether each string of ``s`` ends with ``suffix``."""
    s, suffix = _text(s, suffix, "endswith")
    return np.strings.endswith(s, suffix)


class IsIn:
    """Membership in a fixed set of values (``x in [...]``; ``invert``: ``not in``),
    as a one-operand function that lazy expressions, dask and pruning recognise."""

    __name__ = "isin"

    def __init__(self, members: np.ndarray, invert: bool = False) -> None:
        self.members = members
        self.invert = invert

    def __call__(self, values: Any) -> Any:
        return isin_values(values, self.members, self.invert)

    def __repr__(self) -> str:
        return f"{'not ' if self.invert else ''}in {self.members.tolist()!r}"


def isin_values(values: Any, members: np.ndarray, invert: bool = False) -> Any:
    """``np.isin(values, members, invert=invert)``; Python objects (strings) are looked up
    in a set, as numpy would sort them (some 30 times slower)."""
    if isinstance(values, np.ndarray) and values.dtype == object and values.size:
        try:
            lookup = frozenset(members.tolist())
        except TypeError:  # unhashable members: numpy's way
            return np.isin(values, members, invert=invert)
        hits = np.fromiter(map(lookup.__contains__, values.ravel()), dtype=bool,
                           count=values.size).reshape(values.shape)
        return ~hits if invert else hits
    return np.isin(values, members, invert=invert)


#: The functions expressions may call (numexpr's names, and a few more).
FUNCTIONS: dict[str, Callable[..., Any]] = {
    "where": np.where, "abs": np.absolute, "sqrt": np.sqrt, "exp": np.exp, "expm1": np.expm1,
    "log": np.log, "log10": np.log10, "log1p": np.log1p, "sin": np.sin, "cos": np.cos,
    "tan": np.tan, "arcsin": np.arcsin, "arccos": np.arccos, "arctan": np.arctan,
    "arctan2": np.arctan2, "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh,
    "arcsinh": np.arcsinh, "arccosh": np.arccosh, "arctanh": np.arctanh, "real": np.real,
    "imag": np.imag, "conj": np.conjugate, "floor": np.floor, "ceil": np.ceil,
    "isnan": np.isnan, "isfinite": np.isfinite, "isinf": np.isinf,
    "minimum": np.minimum, "maximum": np.maximum,
    "contains": contains, "startswith": startswith, "endswith": endswith,
    "isnull": isnull, "notnull": notnull, "isna": isnull, "notna": notnull,
}
BINOPS: dict[type, Any] = {
    ast.Add: np.add, ast.Sub: np.subtract, ast.Mult: np.multiply, ast.Div: np.true_divide,
    ast.FloorDiv: np.floor_divide, ast.Mod: np.remainder, ast.Pow: np.power,
    ast.LShift: np.left_shift, ast.RShift: np.right_shift,
    ast.BitAnd: np.bitwise_and, ast.BitOr: np.bitwise_or, ast.BitXor: np.bitwise_xor,
}
UNARY: dict[type, Any] = {ast.USub: np.negative, ast.Invert: np.invert,
                          ast.Not: np.logical_not}
CMPOPS: dict[type, Any] = {
    ast.Lt: np.less, ast.LtE: np.less_equal, ast.Gt: np.greater, ast.GtE: np.greater_equal,
    ast.Eq: np.equal, ast.NotEq: np.not_equal,
}
MEMBERSHIP: dict[type, bool] = {ast.In: False, ast.NotIn: True}  # -> IsIn's ``invert``
#: Each comparison with its operands swapped (``3 < x`` is ``x > 3``).
SWAPPED: dict[type, type] = {ast.Lt: ast.Gt, ast.LtE: ast.GtE, ast.Gt: ast.Lt, ast.GtE: ast.LtE,
                             ast.Eq: ast.Eq, ast.NotEq: ast.NotEq}
#: Each comparison's operator as written.
SYMBOLS: dict[type, str] = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
                            ast.Eq: "==", ast.NotEq: "!="}


# -- literals meeting operands ---------------------------------------------------------------


def coerce(value: Any, dtype: np.dtype, name: str) -> Any:
    """``value`` (a literal) made comparable with an operand of ``dtype`` called ``name``.

    Raises
    ------
    ExpressionError
        A string meets a numeric operand, or is not a date when it meets a datetime.
    """
    if not isinstance(value, (str, bytes)):
        return value
    kind = dtype.kind
    if kind == "M":
        try:
            date = np.datetime64(value.decode() if isinstance(value, bytes) else value)
        except ValueError:
            raise ExpressionError(f"{value!r} is not a date, and {name!r} is "
                                  f"{dtype}") from None
        # The column's unit when that loses nothing; a finer constant stays finer, so
        # numpy compares in the finer unit and '12:00' is not truncated to the day.
        exact = date.astype(dtype)
        return exact if exact.astype(date.dtype) == date else date
    if kind in "biufcm":
        raise ExpressionError(f"{name!r} is numeric ({dtype}): it cannot be compared with "
                              f"the string {value!r}")
    if kind == "S" and isinstance(value, str):
        return value.encode()
    if kind == "U" and isinstance(value, bytes):
        return value.decode()
    return value


def _coerce_pair(left: Any, right: Any, lnode: ast.AST, rnode: ast.AST) -> tuple[Any, Any]:
    if isinstance(right, (str, bytes)) and hasattr(left, "dtype"):
        right = coerce(right, np.dtype(left.dtype), ast.unparse(lnode))
    elif isinstance(left, (str, bytes)) and hasattr(right, "dtype"):
        left = coerce(left, np.dtype(right.dtype), ast.unparse(rnode))
    return left, right


def members(values: list[Any], operand: Any, node: ast.AST) -> np.ndarray:
    """The literals of ``x in [...]`` as an array comparable with operand ``x``."""
    dtype = getattr(operand, "dtype", None)
    if dtype is not None:
        values = [coerce(v, np.dtype(dtype), ast.unparse(node)) for v in values]
    if not values:
        return np.empty(0, dtype=dtype if dtype is not None else float)
    return np.array(values)


# -- evaluation ------------------------------------------------------------------------------


def _call(func: Any, *args: Any) -> Any:
    return func(*args)


def walk(tree: ast.AST, lookup: Callable[[str], Any], apply: Callable[..., Any] = _call,
         functions: Mapping[str, Callable[..., Any]] = FUNCTIONS) -> Any:
    """Evaluate a normalised tree: variables come from ``lookup(name)``, and every
    operation is ``apply(func, *operands)`` (numpy's functions, from the tables above)."""
    def rec(node: ast.AST) -> Any:
        return walk(node, lookup, apply, functions)

    if isinstance(tree, ast.Expression):
        return rec(tree.body)
    if isinstance(tree, ast.Constant):
        return tree.value
    if isinstance(tree, ast.Name):
        return lookup(tree.id)
    if isinstance(tree, ast.BinOp):
        op = BINOPS.get(type(tree.op))
        if op is None:
            raise ExpressionError(f"unsupported operator {type(tree.op).__name__}")
        return apply(op, rec(tree.left), rec(tree.right))
    if isinstance(tree, ast.UnaryOp):
        value = rec(tree.operand)
        return value if isinstance(tree.op, ast.UAdd) else apply(UNARY[type(tree.op)], value)
    if isinstance(tree, ast.Compare) and len(tree.ops) == 1:
        op_type, rnode = type(tree.ops[0]), tree.comparators[0]
        left = rec(tree.left)
        if op_type in MEMBERSHIP and isinstance(rnode, (ast.List, ast.Tuple)):
            values = [rec(e) for e in rnode.elts]
            return apply(IsIn(members(values, left, tree.left), MEMBERSHIP[op_type]), left)
        if op_type in CMPOPS:
            left, right = _coerce_pair(left, rec(rnode), tree.left, rnode)
            return apply(CMPOPS[op_type], left, right)
    if isinstance(tree, ast.Call) and isinstance(tree.func, ast.Name) and \
            tree.func.id in functions:
        return apply(functions[tree.func.id], *(rec(a) for a in tree.args))
    raise ExpressionError(f"{ast.unparse(tree)!r} is not allowed in an expression")


def evaluate_numpy(tree: ast.AST, env: Mapping[str, Any]) -> Any:
    """Evaluate a normalised expression tree with numpy, variables from ``env``."""
    return walk(tree, env.__getitem__)


# -- numexpr -----------------------------------------------------------------------------------

# Operand dtypes numexpr computes exactly as numpy does (float32 is left out: numexpr
# compares it with a Python float in float64, numpy in float32).
_NE_DTYPES = frozenset(np.dtype(t) for t in ("?", "i4", "i8", "f8"))
_NE_FLOAT_FUNCS = frozenset({
    "abs", "sqrt", "exp", "expm1", "log", "log10", "log1p", "sin", "cos", "tan", "arcsin",
    "arccos", "arctan", "arctan2", "sinh", "cosh", "tanh", "arcsinh", "arccosh", "arctanh",
    "floor", "ceil"})


def numexpr_text(tree: ast.AST, dtypes: Mapping[str, Any]) -> str | None:
    """The tree in numexpr's syntax when numexpr evaluates it as numpy would for operands
    of ``dtypes`` (name -> dtype, or a scalar's type), else None."""
    return ast.unparse(tree) if _ne_kind(tree, dtypes) is not None else None


def _ne_kind(node: ast.AST, dtypes: Mapping[str, Any]) -> str | None:
    """The result kind ('b', 'i' or 'f') of ``node`` under numexpr, None where numexpr
    would not give numpy's answer."""
    if isinstance(node, ast.Expression):
        return _ne_kind(node.body, dtypes)
    if isinstance(node, ast.Constant):
        v = node.value
        return "b" if isinstance(v, bool) else "i" if isinstance(v, int) else \
            "f" if isinstance(v, float) else None
    if isinstance(node, ast.Name):
        dt = np.dtype(dtypes[node.id]) if node.id in dtypes else None
        return dt.kind if dt in _NE_DTYPES else None
    if isinstance(node, ast.UnaryOp):
        k = _ne_kind(node.operand, dtypes)
        ok = {ast.USub: "if", ast.UAdd: "bif", ast.Invert: "bi"}.get(type(node.op), "")
        return k if k is not None and k in ok else None
    if isinstance(node, ast.Compare):
        if type(node.ops[0]) not in CMPOPS:
            return None
        pair = {_ne_kind(node.left, dtypes), _ne_kind(node.comparators[0], dtypes)}
        return "b" if None not in pair and ("b" not in pair or pair == {"b"}) else None
    if isinstance(node, ast.BinOp):
        return _ne_binop(type(node.op), _ne_kind(node.left, dtypes),
                         _ne_kind(node.right, dtypes))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        kinds = [_ne_kind(a, dtypes) for a in node.args]
        if node.func.id == "where" and len(kinds) == 3 and kinds[0] == "b" and \
                kinds[1] == kinds[2] and kinds[1] in ("i", "f"):
            return kinds[1]
        if node.func.id in _NE_FLOAT_FUNCS and kinds and all(k == "f" for k in kinds):
            return "f"
    return None


def _ne_binop(op: type, left: str | None, right: str | None) -> str | None:
    if left is None or right is None:
        return None
    kinds = {left, right}
    if op in (ast.BitAnd, ast.BitOr, ast.BitXor):
        return left if len(kinds) == 1 and left in "bi" else None
    if "b" in kinds:
        return None
    if op in (ast.LShift, ast.RShift, ast.FloorDiv, ast.Mod):
        return "i" if kinds == {"i"} else None  # numexpr's float modulo is C's fmod
    if op is ast.Pow:
        return "f" if "f" in kinds else None  # numexpr gives 0 for int ** -int
    if op is ast.Div:
        return "f"
    return "f" if "f" in kinds else "i"


__all__ = ["BINOPS", "CMPOPS", "FUNCTIONS", "MEMBERSHIP", "UNARY", "IsIn", "coerce",
           "contains", "endswith", "evaluate_numpy", "isin_values", "members", "numexpr_text",
           "startswith", "walk"]
