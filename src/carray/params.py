"""Compression parameters and global settings, as small frozen dataclasses."""

from __future__ import annotations

import enum
import os
from dataclasses import asdict, dataclass, replace
from typing import Any

CNAMES = ("blosclz", "lz4", "lz4hc", "zlib", "zstd")


class Shuffle(enum.IntEnum):
    """The Blosc shuffle filter applied before compression."""

    NOSHUFFLE = 0
    SHUFFLE = 1
    BITSHUFFLE = 2


NOSHUFFLE, SHUFFLE, BITSHUFFLE = Shuffle.NOSHUFFLE, Shuffle.SHUFFLE, Shuffle.BITSHUFFLE


@dataclass(frozen=True)
class CParams:
    """How chunks are compressed.

    Parameters
    ----------
    clevel : int
        Compression level, 0 (no compression) to 9.
    cname : str
        Codec: one of ``blosclz``, ``lz4``, ``lz4hc``, ``zlib``, ``zstd``.
    shuffle : Shuffle or int
        0 no shuffle, 1 byte shuffle, 2 bit shuffle.
    quantize : int
        For floating point data, keep this many significant decimal digits
        before compressing (lossy, as bcolz's ``quantize``); 0 disables it.
    """

    clevel: int = 5
    cname: str = "lz4"
    shuffle: Shuffle = Shuffle.SHUFFLE
    quantize: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.shuffle, bool):  # old bcolz files say "shuffle": true
            object.__setattr__(self, "shuffle", int(self.shuffle))
        if not isinstance(self.clevel, int) or not 0 <= self.clevel <= 9:
            raise ValueError(f"clevel must be an int from 0 to 9, got {self.clevel!r}")
        if self.cname not in CNAMES:
            raise ValueError(f"cname must be one of {', '.join(CNAMES)}; got {self.cname!r}")
        try:
            object.__setattr__(self, "shuffle", Shuffle(self.shuffle))
        except ValueError:
            raise ValueError(f"shuffle must be 0, 1 or 2, got {self.shuffle!r}") from None
        if not isinstance(self.quantize, int) or self.quantize < 0:
            raise ValueError(f"quantize must be an int >= 0, got {self.quantize!r}")

    @classmethod
    def coerce(cls, value: CParams | dict[str, Any] | None) -> CParams:
        """Accept a CParams, a dict of its fields (bcolz style) or None (the defaults)."""
        if value is None:
            return cls()
        if isinstance(value, cls):
            return value
        if isinstance(value, dict):
            unknown = set(value) - {"clevel", "cname", "shuffle", "quantize"}
            if unknown:
                raise ValueError(f"unknown compression parameters: {sorted(unknown)}")
            fields = {k: v for k, v in value.items() if v is not None}
            return cls(**fields)
        raise TypeError(f"cparams must be a CParams or a dict, not {type(value).__name__}")

    def replace(self, **changes: Any) -> CParams:
        """A copy with some fields changed."""
        return replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """The bcolz ``meta/storage`` form: clevel, shuffle, cname, quantize."""
        d = asdict(self)
        return {"clevel": d["clevel"], "shuffle": int(d["shuffle"]),
                "cname": d["cname"], "quantize": d["quantize"]}

    def __repr__(self) -> str:
        return (f"CParams(clevel={self.clevel}, cname={self.cname!r}, "
                f"shuffle={self.shuffle.name}, quantize={self.quantize})")


#: bcolz spelled the class in lower case; keep that spelling working.
cparams = CParams


def detect_number_of_cores() -> int:
    """Cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        return os.cpu_count() or 1


_nthreads = detect_number_of_cores()


def set_nthreads(nthreads: int) -> int:
    """Set how many threads Blosc uses to (de)compress; returns the previous value."""
    global _nthreads
    if not isinstance(nthreads, int) or nthreads < 1:
        raise ValueError(f"nthreads must be a positive int, got {nthreads!r}")
    from carray.codecs import blosc as _blosc

    previous, _nthreads = _nthreads, nthreads
    _blosc.set_nthreads(nthreads)
    return previous


def get_nthreads() -> int:
    """How many threads Blosc uses."""
    return _nthreads
