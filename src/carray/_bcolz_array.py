"""The rest of bcolz's carray API: ``reshape``, the leftover (the last partial chunk of
rows, kept decoded), and ``repr``/``str`` printed as bcolz prints them.

Mixed into :class:`carray.array.carray`; uses only its public API.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from carray.engine import ArrayEngine
    from carray.params import CParams

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


class BcolzArrayAPI:
    """``reshape``, ``leftover_*`` and bcolz's ``repr``/``str`` for a carray."""

    if TYPE_CHECKING:  # provided by the class this is mixed into
        @property
        def shape(self) -> tuple[int, ...]: ...

        @property
        def dtype(self) -> np.dtype: ...

        @property
        def ndim(self) -> int: ...

        @property
        def size(self) -> int: ...

        @property
        def nbytes(self) -> int: ...

        @property
        def cbytes(self) -> int: ...

        @property
        def cratio(self) -> float: ...

        @property
        def chunks(self) -> tuple[int, ...]: ...

        @property
        def blocks(self) -> tuple[int, ...] | None: ...

        @property
        def chunklen(self) -> int: ...

        @property
        def leftover(self) -> int: ...

        @property
        def cparams(self) -> CParams: ...

        @property
        def rootdir(self) -> str | None: ...

        @property
        def mode(self) -> str: ...

        @property
        def engine(self) -> ArrayEngine: ...

        def iterblocks(self, blen: int | None = None, start: int = 0,
                       stop: int | None = None) -> Iterator[np.ndarray]: ...

        def __getitem__(self, key: Any) -> Any: ...

        def __len__(self) -> int: ...

    # -- reshape --------------------------------------------------------------------------

    def reshape(self, *newshape: Any, **kwargs: Any) -> Any:
        """A new carray holding the same items (in C order) in shape ``newshape``.

        Parameters
        ----------
        *newshape : int or tuple of int
            The new shape, as one tuple or as ints; one axis may be -1 (worked out
            from the size).
        **kwargs
            As for :class:`carray` (``rootdir``, ``cparams``, ...); the default is an
            array in memory with this array's cparams.

        Notes
        -----
        Items are copied a block at a time, never all decoded at once.  Unlike
        bcolz, the original array on disk is left as it is: the result goes where
        ``rootdir`` says.
        """
        shape = new_shape(self.size, newshape[0] if len(newshape) == 1 else newshape)
        kwargs.setdefault("cparams", self.cparams)
        cls: Any = type(self)
        if not shape:
            return cls(np.asarray(self[()] if not self.shape else self[:]).reshape(()),
                       **kwargs)
        kwargs.setdefault("expectedlen", shape[0])
        out = cls(np.empty((0, *shape[1:]), dtype=self.dtype), **kwargs)
        rowsize = math.prod(shape[1:])
        pending: list[np.ndarray] = []
        npending = 0
        for block in self._flat_blocks():
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

    def _flat_blocks(self) -> Iterator[np.ndarray]:
        if not self.shape:
            yield np.asarray(self[()], dtype=self.dtype).reshape(1)
            return
        for block in self.iterblocks():
            yield block.reshape(-1)

    # -- the leftover: the last, partial run of chunk rows ------------------------------

    @property
    def leftover_array(self) -> np.ndarray:
        """The decoded last partial chunk of rows, ``chunklen`` rows long (read-only;
        rows past :attr:`leftover_elements` are not items)."""
        if self.engine.order == "F" and self.ndim > 1:
            raise ValueError("a Fortran-order array keeps no decoded rows (its rows are the "
                             "stored array's last axis)")
        return self.engine.tail_buffer()

    @property
    def leftover_elements(self) -> int:
        """Rows in the last, partial chunk."""
        return self.leftover

    @property
    def leftover_bytes(self) -> int:
        """Bytes of items in the last, partial chunk."""
        return self.leftover * math.prod(self.shape[1:]) * self.dtype.itemsize

    @property
    def leftover_ptr(self) -> int:
        """The address of :attr:`leftover_array`'s data (valid while the array is unchanged)."""
        return int(self.leftover_array.ctypes.data)

    # -- display --------------------------------------------------------------------------

    def _blocksize(self) -> int:
        """Blosc's block size in the first stored chunk (0 when none is stored yet)."""
        try:
            header = self.engine.read_stored(0)[:16]
        except (LookupError, OSError, ValueError):
            return 0
        return int.from_bytes(header[8:12], "little") if len(header) >= 16 else 0

    def __repr__(self) -> str:
        shape = f"({self.shape[0]},)" if self.ndim == 1 else str(self.shape)
        lines = [f"carray({shape}, {self.dtype})",
                 f"  nbytes := {bcolz_size(self.nbytes)}; cbytes := {bcolz_size(self.cbytes)}; "
                 f"ratio: {self.cratio:.2f}",
                 f"  cparams := {bcolz_cparams(self.cparams)}"]
        chunksize = math.prod(self.chunks) * self.dtype.itemsize
        if self.blocks is None:
            lines.append(f"  chunklen := {self.chunklen}; chunksize: {chunksize}; "
                         f"blocksize: {self._blocksize()}")
        else:
            lines.append(f"  chunks := {self.chunks}; blocks := {self.blocks}; "
                         f"chunksize: {chunksize}")
        if self.rootdir:
            lines.append(f"  rootdir := {self.rootdir!r}")
            lines.append(f"  mode    := {self.mode!r}")
        return "\n".join(lines) + "\n" + str(self)

    def __str__(self) -> str:
        if not self.shape:
            return str(self[()])
        if self.size <= _PRINT_ALL or len(self) <= 2 * _PRINT_EDGE:
            return np.array2string(self[:], threshold=max(self.size, 1))
        edge = _PRINT_EDGE
        head = np.array2string(self[:edge])[:-1]
        tail = np.array2string(self[-edge:])[1:]
        return f"{head} ..., {tail}"
