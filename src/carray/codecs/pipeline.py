"""Blosc2 filter pipelines and plugin ids, as chunk headers record them.

Facts relied on (docs/formats/blosc2-chunk.md): bytes 16-21 of an extended
(32-byte) Blosc2 header hold the six filter slots, applied in slot order;
bytes 24-29 their meta values; when bits 5-7 of the flags byte are 6, byte 22
holds the codec id.  Ids 32-159 are plugins libblosc2 registers, 160-255
users' own.  A Blosc1 chunk records at most one shuffle, in its flags.
"""

from __future__ import annotations

import os

import numpy as np

from carray.core.params import FILTER_CODES, CParams
from carray.errors import CodecError, CodecUnavailableError

_HEADER = 32  # an extended Blosc2 header

# Ids of libblosc2's registered plugins (32-159), by name; 160-255 are users' own.
# A chunk names its codec in byte 22 when bits 5-7 of its flags are 6.
_PLUGIN_CODECS = {32: "ndlz", 33: "zfp_acc", 34: "zfp_prec", 35: "zfp_rate",
                  36: "openhtj2k", 37: "grok"}
_PLUGIN_FILTERS = {32: "ndcell", 33: "ndmean", 35: "bytedelta", 36: "int_trunc"}
_UDCODEC_FORMAT = 6
_BUILTIN_COMPCODES = range(6)  # blosclz, lz4, lz4hc, (snappy), zlib, zstd
_BUILTIN_FILTER_IDS = range(5)  # none, shuffle, bitshuffle, delta, trunc_prec


def plugin_names(chunk: bytes | bytearray | memoryview | np.ndarray) -> list[str]:
    """The plugin codec and filters a Blosc2 chunk's header names (empty when none).

    These are decoded by libblosc2's plugins, some of which (ZFP, NDLZ, NDCELL,
    NDMEAN) need the frame the chunk belongs to for its block shape.
    """
    if len(chunk) < _HEADER:
        return []
    head = bytes(chunk[:_HEADER])
    if head[0] <= 2 or (head[2] & 0x05) != 0x05:
        return []
    names = []
    if head[2] >> 5 == _UDCODEC_FORMAT and head[22] not in _BUILTIN_COMPCODES:
        names.append("codec " + _PLUGIN_CODECS.get(head[22], f"id {head[22]}"))
    names += ["filter " + _PLUGIN_FILTERS.get(f, f"id {f}") for f in head[16:22]
              if f not in _BUILTIN_FILTER_IDS]
    return names


def decode_error(chunk: bytes | bytearray | memoryview | np.ndarray,
                 path: str | os.PathLike[str] | None, what: str, code: int) -> CodecError:
    """The error for a failed decode: :class:`CodecUnavailableError` naming the plugin
    codec or filter when the chunk uses one, else :class:`CodecError`."""
    plugins = plugin_names(chunk)
    if plugins:
        return CodecUnavailableError(
            f"{path or 'chunk'}: uses {', '.join(plugins)}, which libblosc2 cannot decode "
            f"here (error {code}): the plugin is missing, or needs the frame the chunk "
            "belongs to")
    return CodecError(f"{path or 'chunk'}: Blosc failed to {what} (error {code})")


def check_blosc1_filters(cparams: CParams, where: str | None = None) -> None:
    """Refuse a filter pipeline a Blosc1 chunk cannot record (it holds one shuffle flag).

    Raises
    ------
    CodecError
        Naming ``where`` (a path) when given, and the filters that do not fit.
    """
    if not cparams.single_shuffle:
        raise CodecError(
            f"{where + ': ' if where else ''}Blosc1 chunks (the bcolz layout, Bloscpack, "
            f"blosc1=True) store only a single shuffle, not the filters "
            f"{list(cparams.filters or ())}; use a Blosc2 layout (superchunk or b2nd)")


def blosc2_filters(cparams: CParams) -> tuple[list[int], list[int]]:
    """The filter codes and filters_meta of ``cparams``'s pipeline, in order."""
    if not cparams.filters:
        return [0], [0]  # no filter
    return ([FILTER_CODES[name] for name, _ in cparams.filters],
            [meta for _, meta in cparams.filters])


__all__ = ["blosc2_filters", "check_blosc1_filters", "decode_error", "plugin_names"]
