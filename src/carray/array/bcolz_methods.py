"""The rest of bcolz's carray API: ``reshape``, the leftover (the last partial chunk of
rows, kept decoded), string keys (``a["x > 3"]``), and ``repr``/``str`` printed as bcolz
prints them.

Functions of a carray's public API, which :class:`carray.array.array.carray` calls.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from carray.compute.parse import Expression, caller_scope
from carray.compute.strings import expression
from carray.errors import IndexingError

if TYPE_CHECKING:
    from carray.core.params import CParams

# Arrays of more items than this print only their first and last rows, as bcolz does
# (numpy's summarisation threshold and edge items, in numpy 1.x's style).
_PRINT_ALL = 1000
_PRINT_EDGE = 3


def bcolz_size(n: int) -> str:
    """A byte count as bcolz prints it: plain below 1 KiB, else two decimals and a unit."""
    if n < 1024:
        return str(int(n))
    value = float(n)
    for unit in ("KB", "MB", "GB", "TB"):
        value /= 1024
        if value < 1024 or unit == "TB":
            break
    return f"{value:.2f} {unit}"


def bcolz_cparams(cp: CParams) -> str:
    """Compression parameters as bcolz prints them (the filter pipeline when it is more
    than one shuffle)."""
    text = (f"cparams(clevel={cp.clevel}, shuffle={int(cp.shuffle)}, cname={cp.cname!r}, "
            f"quantize={cp.quantize}")
    if len(cp.filters) > 1:
        text += f", filters={list(cp.filters)!r}"
    return text + ")"


def new_shape(size: int, shape: Any) -> tuple[int, ...]:
    """``shape`` (an int or a tuple, at most one -1) for ``size`` items, as numpy reads it."""
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    if not all(isinstance(n, (int, np.integer)) for n in shape):
        raise TypeError(f"a shape is ints, got {shape!r}")
    shape = tuple(int(n) for n in shape)
    unknown = [i for i, n in enumerate(shape) if n == -1]
    if len(unknown) > 1 or any(n < -1 for n in shape):
        raise ValueError(f"invalid shape {shape}: at most one -1 and no other negative length")
    known = math.prod(n for n in shape if n != -1)
    if unknown:
        if known == 0 or size % known:
            raise ValueError(f"cannot reshape {size} items into shape {shape}")
        shape = tuple(size // known if n == -1 else n for n in shape)
    if math.prod(shape) != size:
        raise ValueError(f"cannot reshape {size} items into shape {shape}")
    return shape


def reshape(a: Any, newshape: Any, **kwargs: Any) -> Any:
    """A new carray holding the items of ``a`` (in C order) in shape ``newshape`` (see
    :meth:`carray.array.array.carray.reshape`)."""
    shape = new_shape(a.size, newshape)
    kwargs.setdefault("cparams", a.cparams)
    cls: Any = type(a)
    if not shape:
        return cls(np.asarray(a[()] if not a.shape else a[:]).reshape(()), **kwargs)
    kwargs.setdefault("expectedlen", shape[0])
    out = cls(np.empty((0, *shape[1:]), dtype=a.dtype), **kwargs)
    rowsize = math.prod(shape[1:])
    pending: list[np.ndarray] = []
    npending = 0
    for block in _flat_blocks(a):
        pending.append(block)
        npending += block.size
        if rowsize and npending >= rowsize:
            flat = np.concatenate(pending)
            whole = npending - npending % rowsize
            out.append(flat[:whole].reshape((-1, *shape[1:])))
            pending, npending = [flat[whole:]], npending - whole
    if not rowsize and shape[0]:
        out.resize(shape[0])  # rows of no items: only the length to record
    out.flush()
    return out


def expression_mask(a: Any, text: str, depth: int) -> Any:
    """A string key of ``a``: a boolean expression over the variables where the user
    indexed (``depth`` frames above the caller), as a lazy mask of ``a``'s shape
    (bcolz's ``a["b > 3"]``).

    Raises
    ------
    ExpressionError
        The expression cannot be parsed, or names an unknown variable.
    IndexingError
        Its value is not a boolean array of ``a``'s shape.
    """
    mask = expression(Expression.parse(text).tree, caller_scope(depth + 1))
    if getattr(mask, "dtype", None) != np.dtype(bool) or \
            tuple(getattr(mask, "shape", ())) != tuple(a.shape):
        raise IndexingError(f"a string key is a boolean expression of the array's shape "
                            f"{tuple(a.shape)}; {text!r} gives "
                            f"{getattr(mask, 'dtype', type(mask).__name__)} of shape "
                            f"{getattr(mask, 'shape', ())}")
    return mask


def _flat_blocks(a: Any) -> Iterator[np.ndarray]:
    if not a.shape:
        yield np.asarray(a[()], dtype=a.dtype).reshape(1)
        return
    for block in a.iterblocks():
        yield block.reshape(-1)


def leftover_array(a: Any) -> np.ndarray:
    """The decoded last partial chunk of rows of ``a`` (see
    :attr:`carray.array.array.carray.leftover_array`)."""
    if a.engine.order == "F" and a.ndim > 1:
        raise ValueError("a Fortran-order array keeps no decoded rows (its rows are the "
                         "stored array's last axis)")
    return a.engine.tail_buffer()


def _blocksize(a: Any) -> int:
    """Blosc's block size in the first stored chunk (0 when none is stored yet)."""
    try:
        header = a.engine.read_stored(0)[:16]
    except (LookupError, OSError, ValueError):
        return 0
    return int.from_bytes(header[8:12], "little") if len(header) >= 16 else 0


def described(a: Any) -> str:
    """``repr(a)``, as bcolz prints it."""
    shape = f"({a.shape[0]},)" if a.ndim == 1 else str(a.shape)
    ratio = a.nbytes / a.cbytes if a.cbytes else math.nan  # nothing stored: no ratio
    lines = [f"carray({shape}, {a.dtype})",
             f"  nbytes := {bcolz_size(a.nbytes)}; cbytes := {bcolz_size(a.cbytes)}; "
             f"ratio: {ratio:.2f}",
             f"  cparams := {bcolz_cparams(a.cparams)}"]
    chunksize = math.prod(a.chunks) * a.dtype.itemsize
    if a.blocks is None:
        lines.append(f"  chunklen := {a.chunklen}; chunksize: {chunksize}; "
                     f"blocksize: {_blocksize(a)}")
    else:
        lines.append(f"  chunks := {a.chunks}; blocks := {a.blocks}; chunksize: {chunksize}")
    if a.rootdir:
        lines.append(f"  rootdir := {a.rootdir!r}")
        lines.append(f"  mode    := {a.mode!r}")
    return "\n".join(lines) + "\n" + printed(a)


def printed(a: Any) -> str:
    """``str(a)``: its items, only the first and last rows of a large array."""
    if not a.shape:
        return str(a[()])
    if a.size <= _PRINT_ALL or len(a) <= 2 * _PRINT_EDGE:
        return np.array2string(a[:], threshold=max(a.size, 1))
    edge = _PRINT_EDGE
    first = np.array2string(a[:edge])[:-1]
    last = np.array2string(a[-edge:])[1:]
    return f"{first} ..., {last}"


def html_summary(a: Any) -> str:
    """An HTML summary for notebooks: shape, chunks, sizes and the first and last rows
    (only those are read)."""
    from carray.core.html import edge_rows, summary_html
    from carray.core.util import human

    first, last = edge_rows(len(a) if a.ndim else 0)
    ratio = a.nbytes / a.cbytes if a.cbytes else 0.0
    facts = [("shape", a.shape), ("dtype", a.dtype), ("chunks", a.chunks),
             ("blocks", a.blocks), ("codec", f"{a.cparams.cname} "
                                                f"level {a.cparams.clevel}"),
             ("nbytes", human(a.nbytes)), ("cbytes", human(a.cbytes)),
             ("ratio", f"{ratio:.2f}"), ("rootdir", a.rootdir or "memory")]
    if not a.ndim:  # a 0-d array: its one value is the preview
        return summary_html("carray", [*facts, ("value", a[()])])
    head = [[i, v] for i, v in zip(first, a[first.start:first.stop], strict=True)]
    tail = [[i, v] for i, v in zip(last, a[last.start:last.stop], strict=True)]
    return summary_html("carray", facts, ["", "value"], head, tail)
