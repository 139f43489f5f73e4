"""The one way a dtype read from a file reaches numpy: parsed literally, then checked.

Every metadata source (superchunk and bcolz ``meta/storage``, b2nd metalayers,
Bloscpack metadata, typed attributes, ds and NetCDF conversions) names its
item type in text the file controls.  Handing that text to numpy unchecked
lets a file ask for items numpy builds from raw bytes as Python object
references (``'O'``, also hidden in a field or a sub-array) or of a
variable-size kind (``'T'``, numpy's StringDType): reading such items either
crashes the interpreter or returns objects made from file bytes.  Absurd
sizes are refused too, so that no later step allocates what a header claims.
"""

from __future__ import annotations

import ast
from typing import Any

import numpy as np

from carray.errors import FormatError, UnsafeDataError, UnsupportedDTypeError

#: Longest dtype text parsed; real descrs, even of wide records, are far shorter.
MAX_DESCR_CHARS = 1 << 16
#: Deepest bracket nesting in a dtype text (records of records of sub-arrays ...).
MAX_DESCR_DEPTH = 32
#: Largest item accepted from a file: bigger items only come from damaged headers.
MAX_ITEMSIZE = 1 << 28
#: Most dimensions of a sub-array item (numpy allows 64 dimensions in all).
MAX_ITEM_NDIM = 32
#: Kinds whose items are plain fixed-size bytes (``V`` covers records and raw bytes).
FIXED_KINDS = frozenset("biufcmMSUV")
#: Most dimensions of an array read from a file (numpy's own limit).
MAX_NDIM = 64
#: Largest byte count an array may claim (numpy indexes with signed 64-bit ints).
MAX_NBYTES = 2**63 - 1


def checked_dtype(descr: Any, *, source: str, allow_object: bool = False,
                  allow_empty: bool = False) -> np.dtype:
    """Parse a dtype read from file metadata and refuse what is unsafe to read.

    Parameters
    ----------
    descr : str, list, tuple or numpy.dtype
        The stored type: ``str(dtype)`` or ``dtype.str`` text, the literal repr of
        a record descr, a descr as JSON lists, or an already parsed dtype.
        Text is parsed literally, never evaluated.
    source : str
        The file (or key) the type comes from, named in every error.
    allow_object : bool
        Accept object items (the caller's explicit opt-in, e.g. bcolz pickles).
    allow_empty : bool
        Accept items of zero bytes.

    Returns
    -------
    numpy.dtype

    Raises
    ------
    UnsafeDataError
        The type holds Python objects (anywhere, fields and sub-arrays
        included) and ``allow_object`` is false, or is of a variable-size kind.
    FormatError
        The text is no dtype, or its items are empty, absurdly large or deep.
    """
    dtype = descr if isinstance(descr, np.dtype) else parse_descr(descr, source)
    return check_dtype(dtype, source=source, allow_object=allow_object,
                       allow_empty=allow_empty)


def parse_descr(descr: Any, source: str) -> np.dtype:
    """A dtype from stored text or JSON lists, without checking what it holds.

    Raises
    ------
    FormatError
        ``descr`` is not a dtype, or too long or deep to be a real one.
    """
    if isinstance(descr, (bytes, bytearray)):
        try:
            descr = bytes(descr).decode("utf-8")
        except UnicodeDecodeError:
            raise FormatError(f"dtype {bytes(descr)[:40]!r} is not UTF-8 text",
                              source) from None
    if isinstance(descr, str):
        _check_text(descr, source)
        spec: Any = descr
    elif isinstance(descr, (list, tuple)):
        _check_text(repr(descr), source)
        spec = _as_descr(descr)
    else:
        raise FormatError(f"dtype must be text or a descr list, got {descr!r:.80}", source)
    try:
        return np.dtype(spec)
    except (TypeError, ValueError, SyntaxError, OverflowError, KeyError, IndexError,
            RecursionError, MemoryError):
        pass
    if not isinstance(spec, str):
        raise FormatError(f"{descr!r:.80} is not a NumPy dtype", source)
    try:
        # Record dtypes are stored as the repr of their descr: parse it literally.
        return np.dtype(_as_descr(ast.literal_eval(spec)))
    except (TypeError, ValueError, SyntaxError, OverflowError, KeyError, IndexError,
            RecursionError, MemoryError) as exc:
        raise FormatError(f"dtype {spec[:80]!r} is not a NumPy dtype ({exc})"[:300],
                          source) from None


def check_dtype(dtype: np.dtype, *, source: str, allow_object: bool = False,
                allow_empty: bool = False) -> np.dtype:
    """Refuse a parsed dtype whose items are not plain fixed-size bytes.

    See :func:`checked_dtype` for the parameters and errors.
    """
    if not isinstance(dtype, np.dtype):
        raise FormatError(f"{dtype!r:.80} is not a NumPy dtype", source)
    _walk(dtype, dtype, source, allow_object, 0)
    if dtype.itemsize == 0 and not allow_empty:
        raise FormatError(f"dtype {dtype} has items of 0 bytes", source)
    if dtype.itemsize > MAX_ITEMSIZE:
        raise FormatError(f"dtype {dtype} has items of {dtype.itemsize} bytes, more than the "
                          f"{MAX_ITEMSIZE} accepted", source)
    return dtype


def _walk(dt: np.dtype, top: np.dtype, source: str, allow_object: bool, depth: int) -> None:
    # ``top`` is the whole dtype, named in messages; ``dt`` the part being looked at.
    if depth > MAX_DESCR_DEPTH:
        raise FormatError(f"dtype nests deeper than {MAX_DESCR_DEPTH} levels", source)
    if dt.kind == "O":
        if not allow_object:
            raise UnsafeDataError(
                f"{source}: dtype {_name(top)} holds Python objects, which numpy would build "
                "from file bytes; refused (object items need an explicit opt-in such as "
                "allow_pickle=True, only for trusted files)")
        return
    if dt.subdtype is not None:
        base, shape = dt.subdtype
        if len(shape) > MAX_ITEM_NDIM:
            raise FormatError(f"dtype {_name(top)} has items of {len(shape)} dimensions, more "
                              f"than {MAX_ITEM_NDIM}", source)
        _walk(base, top, source, allow_object, depth + 1)
        return
    if dt.names is not None and dt.fields is not None:
        for name in dt.names:
            _walk(dt.fields[name][0], top, source, allow_object, depth + 1)
        return
    if dt.kind not in FIXED_KINDS or dt.hasobject:
        raise UnsafeDataError(f"{source}: dtype {_name(top)} holds a part that is not of a "
                              f"fixed-size kind ({_name(dt)}, kind {dt.kind!r}); refused")


def _name(dt: np.dtype) -> str:
    return str(dt)[:80]


def _check_text(text: str, source: str) -> None:
    if len(text) > MAX_DESCR_CHARS:
        raise FormatError(f"dtype text of {len(text)} characters (at most {MAX_DESCR_CHARS})",
                          source)
    depth = deepest = 0
    for ch in text:
        if ch in "([{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in ")]}":
            depth -= 1
    if deepest > MAX_DESCR_DEPTH:
        raise FormatError(f"dtype text nests {deepest} brackets deep (at most "
                          f"{MAX_DESCR_DEPTH})", source)


def _as_descr(x: Any) -> Any:
    """JSON lists back into numpy's descr: a list of fields, each a tuple."""
    if isinstance(x, list):
        if x and all(isinstance(i, int) and not isinstance(i, bool) for i in x):
            return tuple(x)  # a sub-array shape
        return [tuple(_as_descr(i) for i in f) if isinstance(f, (list, tuple)) else f
                for f in x]
    return x



def checked_shape(shape: Any, *, itemsize: int, source: str, what: str = "shape"
                  ) -> tuple[int, ...]:
    """A shape read from file metadata: ints >= 0 whose items numpy could index.

    This bounds what a header may claim before anything is sized from it; the
    caller still checks the claim against the files that hold the data.

    Raises
    ------
    FormatError
        Not a list of ints >= 0, more than :data:`MAX_NDIM` of them, or more
        than :data:`MAX_NBYTES` bytes of items of ``itemsize``.
    """
    if not isinstance(shape, (list, tuple)) or len(shape) > MAX_NDIM or not all(
            isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape):
        raise FormatError(f"{what} must be a list of at most {MAX_NDIM} ints >= 0, got "
                          f"{shape!r:.120}", source)
    total = max(itemsize, 1)
    for n in shape:
        total *= n
    if total > MAX_NBYTES:
        raise FormatError(f"{what} {list(shape)} of {itemsize}-byte items is more than "
                          f"{MAX_NBYTES} bytes", source)
    return tuple(shape)


def fitted_text(values: Any, dtype: np.dtype, where: str = "values") -> np.ndarray:
    """``values`` as an array of the fixed-width text ``dtype`` (``U``/``S``), refused
    when one of them is longer than its width rather than cut, as numpy would.

    Raises
    ------
    UnsupportedDTypeError
        A string longer than ``dtype`` holds.
    """
    given = np.asarray(values)
    out = given.astype(dtype)
    if given.dtype.kind in "USOT" and given.size:
        width = dtype.itemsize // (4 if dtype.kind == "U" else 1)
        longest = int(np.char.str_len(given.astype(str if dtype.kind == "U" else bytes)
                                      if given.dtype.kind in "OT" else given).max())
        if longest > width:
            raise UnsupportedDTypeError(
                f"{where}: a string of {longest} characters does not fit {dtype} "
                f"({width} at most); it would be cut")
    return out
