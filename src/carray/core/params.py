"""Compression parameters as small frozen dataclasses: data only.

The thread count Blosc runs with is a codec setting (``carray.codecs.threads``).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import asdict, dataclass, replace
from typing import Any

CNAMES = ("blosclz", "lz4", "lz4hc", "zlib", "zstd")


class Shuffle(enum.IntEnum):
    """The Blosc shuffle filter applied before compression."""

    NOSHUFFLE = 0
    SHUFFLE = 1
    BITSHUFFLE = 2


NOSHUFFLE, SHUFFLE, BITSHUFFLE = Shuffle.NOSHUFFLE, Shuffle.SHUFFLE, Shuffle.BITSHUFFLE

#: The filters a Blosc2 chunk's pipeline may hold, by name, with the code its
#: header stores for each (bytedelta is one of Blosc2's registered filters).
FILTER_CODES = {"shuffle": 1, "bitshuffle": 2, "delta": 3, "trunc_prec": 4, "bytedelta": 35}
#: A Blosc2 chunk header has six filter slots.
MAX_FILTERS = 6
_SHUFFLE_NAMES = {Shuffle.SHUFFLE: "shuffle", Shuffle.BITSHUFFLE: "bitshuffle"}


def _filter_entry(entry: Any) -> tuple[str, int]:
    """One pipeline entry as ``(name, meta)``: from a name, a ``(name, meta)`` pair or a
    :class:`Shuffle`."""
    if isinstance(entry, Shuffle):
        if entry == Shuffle.NOSHUFFLE:
            raise ValueError("NOSHUFFLE is not a filter; leave it out of filters")
        entry = _SHUFFLE_NAMES[entry]
    name, meta = (entry, 0) if isinstance(entry, str) else tuple(entry) if \
        isinstance(entry, (tuple, list)) and len(entry) == 2 else (None, None)
    if name not in FILTER_CODES:
        raise ValueError(f"unknown filter {entry!r}: filters are names among "
                         f"{', '.join(FILTER_CODES)}, or (name, meta) pairs")
    if not isinstance(meta, int) or isinstance(meta, bool) or not 0 <= meta <= 255:
        raise ValueError(f"filter {name!r}: meta must be an int from 0 to 255, got {meta!r}")
    if name == "trunc_prec" and not 1 <= meta <= 64:
        raise ValueError(f"('trunc_prec', bits) keeps 1 to 64 mantissa bits, got {meta!r}")
    return name, meta


def _shuffle_of(filters: tuple[tuple[str, int], ...]) -> Shuffle:
    """The shuffle a pipeline applies last (what the one-filter ``shuffle`` field shows)."""
    for name, _ in reversed(filters):
        if name in ("shuffle", "bitshuffle"):
            return Shuffle.SHUFFLE if name == "shuffle" else Shuffle.BITSHUFFLE
    return Shuffle.NOSHUFFLE


def _settle_pipeline(shuffle: Any, filters: Iterable[Any] | None
                     ) -> tuple[Shuffle, tuple[tuple[str, int], ...]]:
    """``(shuffle, filters)`` saying the same pipeline: given filters decide the shuffle
    shown, or the shuffle alone makes a one-filter pipeline."""
    if isinstance(shuffle, bool):  # old bcolz files say "shuffle": true
        shuffle = int(shuffle)
    if shuffle is not None:
        try:
            shuffle = Shuffle(shuffle)
        except ValueError:
            raise ValueError(f"shuffle must be 0, 1 or 2, got {shuffle!r}") from None
    if filters is None:
        shuffle = Shuffle.SHUFFLE if shuffle is None else shuffle
        return shuffle, ((_SHUFFLE_NAMES[shuffle], 0),) if shuffle else ()
    if isinstance(filters, (str, bytes)) or not hasattr(filters, "__iter__"):
        raise ValueError(f"filters must be a sequence of filters, got {filters!r}")
    pipeline = tuple(_filter_entry(f) for f in filters)
    if len(pipeline) > MAX_FILTERS:
        raise ValueError(f"at most {MAX_FILTERS} filters fit a Blosc2 chunk, got "
                         f"{len(pipeline)}")
    if len(pipeline) > 2 and any(name == "delta" for name, _ in pipeline):
        # Measured with libblosc2 3.3: such chunks decode to wrong values.
        raise ValueError(f"delta works in a pipeline of at most two filters, got "
                         f"{list(pipeline)}: libblosc2 does not decode longer ones")
    derived = _shuffle_of(pipeline)
    if shuffle is not None and shuffle != derived:
        raise ValueError(f"shuffle={shuffle!r} contradicts filters={list(pipeline)}; "
                         "give one or the other")
    return derived, pipeline


@dataclass(frozen=True, init=False)
class CParams:
    """How chunks are compressed.

    Parameters
    ----------
    clevel : int
        Compression level, 0 (no compression) to 9.
    cname : str
        Codec: one of ``blosclz``, ``lz4``, ``lz4hc``, ``zlib``, ``zstd``.
    shuffle : Shuffle or int
        0 no shuffle, 1 byte shuffle, 2 bit shuffle: the one-filter shorthand
        for ``filters`` (default byte shuffle).  With ``filters`` given it is
        the last shuffle of the pipeline, and may be left out.
    quantize : int
        For floating point data, keep this many significant decimal digits
        before compressing (lossy, as bcolz's ``quantize``); 0 disables it.
    filters : sequence, optional
        The Blosc2 filter pipeline, applied in order before the codec: up to
        six of ``"shuffle"``, ``"bitshuffle"``, ``"delta"``, ``"bytedelta"`` and
        ``("trunc_prec", bits)`` (keep ``bits`` mantissa bits of floats: lossy),
        each a name or a ``(name, meta)`` pair.  Stored as a tuple of
        ``(name, meta)`` pairs; without it, the pipeline is ``shuffle`` alone.
        Blosc1 chunks (the bcolz layout) hold only a single shuffle.
    """

    clevel: int = 5
    cname: str = "lz4"
    shuffle: Shuffle = Shuffle.SHUFFLE
    quantize: int = 0
    filters: tuple[tuple[str, int], ...] = (("shuffle", 0),)

    def __init__(self, clevel: int = 5, cname: str = "lz4", shuffle: int | None = None,
                 quantize: int = 0, filters: Iterable[Any] | None = None) -> None:
        # Frozen: each field is set once, here, after ``shuffle`` and ``filters`` are
        # made to say the same pipeline (either may be given; one derives the other).
        if not isinstance(clevel, int) or not 0 <= clevel <= 9:
            raise ValueError(f"clevel must be an int from 0 to 9, got {clevel!r}")
        if cname not in CNAMES:
            raise ValueError(f"cname must be one of {', '.join(CNAMES)}; got {cname!r}")
        if not isinstance(quantize, int) or quantize < 0:
            raise ValueError(f"quantize must be an int >= 0, got {quantize!r}")
        shuffle_, filters_ = _settle_pipeline(shuffle, filters)
        for name, value in (("clevel", clevel), ("cname", cname), ("shuffle", shuffle_),
                            ("quantize", quantize), ("filters", filters_)):
            object.__setattr__(self, name, value)

    @property
    def single_shuffle(self) -> bool:
        """True when the pipeline is at most one shuffle (what a Blosc1 chunk can hold)."""
        return len(self.filters) <= 1 and all(
            name in ("shuffle", "bitshuffle") and not meta for name, meta in self.filters)

    @property
    def lossless(self) -> CParams:
        """These parameters without the lossy steps (for metadata chunks: offsets, vlmeta)."""
        kept = tuple(f for f in self.filters if f[0] != "trunc_prec")
        if kept == self.filters and not self.quantize:
            return self
        return self.replace(filters=kept, quantize=0)

    @classmethod
    def coerce(cls, value: CParams | dict[str, Any] | None) -> CParams:
        """Accept a CParams, a dict of its fields (bcolz style) or None (the defaults)."""
        if value is None:
            return cls()
        if isinstance(value, cls):
            return value
        if isinstance(value, dict):
            unknown = set(value) - {"clevel", "cname", "shuffle", "quantize", "filters"}
            if unknown:
                raise ValueError(f"unknown compression parameters: {sorted(unknown)}")
            fields = {k: v for k, v in value.items() if v is not None}
            return cls(**fields)
        raise TypeError(f"cparams must be a CParams or a dict, not {type(value).__name__}")

    def replace(self, **changes: Any) -> CParams:
        """A copy with some fields changed (a new ``shuffle`` replaces the pipeline, and
        new ``filters`` the shuffle)."""
        if "filters" in changes and "shuffle" not in changes:
            changes["shuffle"] = None
        elif "shuffle" in changes and "filters" not in changes:
            changes["filters"] = None
        return replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """The bcolz ``meta/storage`` form: clevel, shuffle, cname, quantize (and
        ``filters``, as ``[name, meta]`` lists, when the pipeline is more than a shuffle)."""
        d = asdict(self)
        out = {"clevel": d["clevel"], "shuffle": int(d["shuffle"]),
               "cname": d["cname"], "quantize": d["quantize"]}
        if not self.single_shuffle:
            out["filters"] = [list(f) for f in self.filters]
        return out

    def __repr__(self) -> str:
        pipeline = f"shuffle={self.shuffle.name}" if self.single_shuffle else \
            f"filters={list(self.filters)}"
        return (f"CParams(clevel={self.clevel}, cname={self.cname!r}, "
                f"{pipeline}, quantize={self.quantize})")


#: bcolz spelled the class in lower case; keep that spelling working.
cparams = CParams

