"""The rest of bcolz 1.2's module-level API, so ``import carray as bcolz`` scripts run.

Defaults (``defaults``, ``defaults_ctx``, ``cparams.setdefaults``) live in
:mod:`carray.core.defaults`, low enough for the array constructor to read them; this
module re-exports them beside what needs the containers: ``walk`` opens
datasets, so it sits at the same layer as :mod:`carray.api`.

Where carray differs from bcolz, on purpose:

* ``defaults.cparams`` reads as a read-only dict: changing a key of it in
  place would otherwise be silently lost; assign a new dict or call
  ``cparams.setdefaults`` instead.
* ``defaults.vm`` is None by default (carray picks numexpr or numpy per
  expression), and ``'dask'`` is refused (use :func:`carray.from_dask`).
* ``blosc_version`` reports the libblosc2 that decodes everything carray reads.
"""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Iterator
from importlib import metadata
from typing import Any

import blosc2 as _blosc2

from carray import registry
from carray.api import open as _open
from carray.codecs import threads as _threads
from carray.core.defaults import cparams, default_cparams, defaults, defaults_ctx
from carray.core.params import BITSHUFFLE, CNAMES, NOSHUFFLE, SHUFFLE
from carray.errors import CArrayError

detect_number_of_cores = _threads.detect_number_of_cores

#: The marker files that make a directory a ctable or a carray (any layout).


class _Filters(dict):
    """bcolz's ``filters``: its shuffle codes mapped to their names (``{0: 'noshuffle',
    1: 'shuffle', 2: 'bitshuffle'}``), with names for ``CParams(shuffle=...)`` and the
    entries of ``CParams(filters=[...])`` as attributes.

    ``NOSHUFFLE``, ``SHUFFLE`` and ``BITSHUFFLE`` are bcolz's shuffle codes (also
    top-level constants); the others name Blosc2 filters for a pipeline, e.g.
    ``filters=[filters.trunc_prec(12), filters.SHUFFLE]``.
    """

    NOSHUFFLE = NOSHUFFLE
    SHUFFLE = SHUFFLE
    BITSHUFFLE = BITSHUFFLE
    DELTA = "delta"
    BYTEDELTA = "bytedelta"
    TRUNC_PREC = "trunc_prec"

    @staticmethod
    def trunc_prec(bits: int) -> tuple[str, int]:
        """The filter keeping ``bits`` mantissa bits of each float (lossy)."""
        return ("trunc_prec", bits)


filters = _Filters({NOSHUFFLE: "noshuffle", SHUFFLE: "shuffle", BITSHUFFLE: "bitshuffle"})


def _dataset_kind(path: str) -> str | None:
    """'ctable', 'carray' or None, from the marker files alone (nothing is opened)."""
    try:
        kind = registry.sniff(path).kind
    except CArrayError:
        return None
    return {"table": "ctable", "array": "carray"}.get(kind)


def walk(dir: str | os.PathLike, classname: str | None = None,  # noqa: A002 - bcolz's name
         mode: str = "r") -> Iterator[Any]:
    """Yield every carray and ctable found under a directory, opened.

    Parameters
    ----------
    dir : str or path
        Where to start; a dataset there is yielded itself.
    classname : {None, 'carray', 'ctable'}
        Only objects of this class.
    mode : {'r', 'a'}
        The mode each object is opened in: 'r' (the default) takes no lock, so
        writers can open the datasets while the yielded handles live; 'a' gives
        writable handles, each holding its dataset's write lock until closed
        (bcolz's default was 'a').

    Notes
    -----
    Directories are visited top-down in name order.  A dataset's own
    directories (a ctable's columns, a carray's ``data``) are parts of it and
    are not searched further; ``.b2nd`` frame files count as carrays.
    """
    if classname not in (None, "carray", "ctable"):
        raise ValueError(f"classname must be None, 'carray' or 'ctable', got {classname!r}")
    if mode not in ("a", "r"):
        raise ValueError(f"mode must be 'a' or 'r' (walk never truncates), got {mode!r}")
    root = os.fspath(dir)
    if not os.path.isdir(root):
        raise NotADirectoryError(f"{root}: not a directory")
    yield from _walk(root, classname, mode)


def _walk(path: str, classname: str | None, mode: str) -> Iterator[Any]:
    kind = _dataset_kind(path)
    if kind is not None:
        if classname in (None, kind):
            yield _open(path, mode=mode)
        return
    try:
        names = sorted(os.listdir(path))
    except OSError:
        return
    for name in names:
        child = os.path.join(path, name)
        if os.path.isdir(child):
            yield from _walk(child, classname, mode)
        elif _dataset_kind(child) is not None and classname in (None, "carray"):
            yield _open(child, mode=mode)


def blosc_version() -> tuple[str, str]:
    """``(version, date)`` of the Blosc library that (de)compresses chunks (libblosc2)."""
    text = str(_blosc2.blosclib_version)
    version, _, date = text.partition(" ")
    return version, date.strip("()")


def blosc_compressor_list() -> list[str]:
    """The codec names ``cparams(cname=...)`` accepts and this Blosc build provides."""
    built = {str(c.name).lower() for c in _blosc2.compressor_list()}
    return [name for name in CNAMES if name in built]


def blosc_set_nthreads(nthreads: int) -> int:
    """Set the threads Blosc (de)compresses with; returns the previous count."""
    return _threads.set_nthreads(nthreads)


def set_nthreads(nthreads: int) -> int:
    """Set the threads of Blosc and of numexpr (when installed), as bcolz does.

    Returns
    -------
    int
        The previous Blosc thread count.
    """
    previous = _threads.set_nthreads(nthreads)
    try:
        import numexpr
    except ImportError:
        return previous
    numexpr.set_num_threads(nthreads)
    return previous


def _version_of(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def print_versions(file: Any = None) -> None:
    """Print the versions of carray, the libraries it uses, Python and the platform."""
    lib, date = blosc_version()
    rows = [
        ("carray", _version_of("carray")),
        ("NumPy", _version_of("numpy")),
        ("python-blosc2", _version_of("blosc2")),
        ("libblosc2", f"{lib} ({date})" if date else lib),
        ("python-blosc", _version_of("blosc")),
        ("Blosc codecs", ", ".join(blosc_compressor_list())),
        ("Blosc threads", str(_threads.get_nthreads())),
        ("numexpr", _version_of("numexpr")),
        ("dask", _version_of("dask")),
        ("pandas", _version_of("pandas")),
        ("Python", sys.version.replace("\n", " ")),
        ("Platform", f"{platform.system()}-{platform.release()}-{platform.machine()}"),
        ("Byte order", sys.byteorder),
        ("Detected cores", str(detect_number_of_cores())),
    ]
    width = max(len(name) for name, _ in rows)
    rule = "-" * 72
    lines = [rule, *(f"{name + ':':<{width + 1}} {value}" for name, value in rows), rule]
    print("\n".join(lines), file=file if file is not None else sys.stdout)


__all__ = ["blosc_compressor_list", "blosc_set_nthreads", "blosc_version", "cparams",
           "default_cparams", "defaults", "defaults_ctx", "detect_number_of_cores", "filters",
           "print_versions", "set_nthreads", "walk"]
