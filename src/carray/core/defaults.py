"""Process-wide defaults: the compression and format new arrays get, and how ``eval`` runs.

bcolz kept these on a module-level ``defaults`` object that users change by
assignment (``bcolz.defaults.out_flavor = "numpy"``), for a block of code
(``with bcolz.defaults_ctx(vm="python"): ...``) or through
``bcolz.cparams.setdefaults(clevel=9)``; all three are here.  Every value is
checked when it is set, so a typo fails at the assignment, not at the next
array created.

This module sits just above :mod:`carray.core.params`: the array constructor asks
:func:`default_cparams` for the parameters of an array created without any.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any

from carray.core.params import CParams

#: Evaluators ``eval`` knows; None lets it choose per expression (numexpr when the
#: expression calls functions, numpy otherwise); "dask" evaluates with dask's arrays
#: (table queries, which run block by block, evaluate as "python" does).
VMS = (None, "numexpr", "python", "dask")
#: What ``eval`` returns: a carray (``"bcolz"`` is bcolz's name for it) or a numpy array.
OUT_FLAVORS = ("carray", "bcolz", "numpy")
#: Layouts new stored arrays and tables may get by default (None: carray's own).
DEFAULT_FORMATS = (None, "superchunk", "bcolz")


def _check_vm(vm: Any) -> str | None:
    if vm not in VMS:
        raise ValueError(f"vm must be one of {VMS}, got {vm!r}")
    return vm


def _check_out_flavor(flavor: Any) -> str:
    if flavor not in OUT_FLAVORS:
        raise ValueError(f"out_flavor must be one of {OUT_FLAVORS}, got {flavor!r}")
    return flavor


def _check_format(fmt: Any) -> str | None:
    if fmt not in DEFAULT_FORMATS:
        raise ValueError(f"format must be one of {DEFAULT_FORMATS}, got {fmt!r}")
    return fmt


class Defaults:
    """The settable defaults (one instance: :data:`defaults`).

    Attributes
    ----------
    cparams : mapping
        The compression parameters of new arrays, read as a read-only dict
        (``clevel``, ``shuffle``, ``cname``, ``quantize``, and ``filters`` for a
        longer pipeline); set from a :class:`~carray.core.params.CParams` or a dict.
    vm : {None, 'numexpr', 'python'}
        The evaluator of :func:`carray.eval`; None chooses per expression.
        ``eval_vm`` is the same setting under bcolz's name.
    out_flavor : {'carray', 'bcolz', 'numpy'}
        What :func:`carray.eval` returns. ``eval_out_flavor`` is bcolz's name.
    format : {None, 'superchunk', 'bcolz'}
        The layout of a new stored array or table created without ``format=``: None
        (the default) is carray's own ('superchunk' arrays, versioned tables);
        'bcolz' writes bcolz 1.x directories, which keep bcolz's habits (tables flush
        after every change, several handles of one process may open one directory:
        see :mod:`carray.stores.lock`).  Paths ending in ``.b2nd`` stay Blosc2 frames.
    """

    __slots__ = ("_cparams", "_format", "_out_flavor", "_vm")

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Back to the built-in defaults."""
        self._cparams = CParams()
        self._vm: str | None = None
        self._out_flavor = "carray"
        self._format: str | None = None

    @property
    def cparams(self) -> Mapping[str, Any]:
        return MappingProxyType(self._cparams.to_dict())

    @cparams.setter
    def cparams(self, value: CParams | Mapping[str, Any]) -> None:
        self._cparams = CParams.coerce(dict(value) if isinstance(value, Mapping) else value)

    def compression(self) -> CParams:
        """The default compression parameters as a :class:`~carray.core.params.CParams`."""
        return self._cparams

    @property
    def vm(self) -> str | None:
        return self._vm

    @vm.setter
    def vm(self, value: str | None) -> None:
        self._vm = _check_vm(value)

    @property
    def out_flavor(self) -> str:
        return self._out_flavor

    @out_flavor.setter
    def out_flavor(self, value: str) -> None:
        self._out_flavor = _check_out_flavor(value)

    # bcolz's own attribute names for the same two settings.
    eval_vm = vm
    eval_out_flavor = out_flavor

    @property
    def format(self) -> str | None:
        return self._format

    @format.setter
    def format(self, value: str | None) -> None:
        self._format = _check_format(value)

    def snapshot(self) -> tuple[CParams, str | None, str, str | None]:
        """Every setting, for :meth:`restore`."""
        return self._cparams, self._vm, self._out_flavor, self._format

    def restore(self, state: tuple[CParams, str | None, str, str | None]) -> None:
        """Put back settings taken by :meth:`snapshot`."""
        self._cparams, self._vm, self._out_flavor, self._format = state

    def __repr__(self) -> str:
        return (f"defaults(cparams={self._cparams!r}, vm={self._vm!r}, "
                f"out_flavor={self._out_flavor!r}, format={self._format!r})")


#: The one set of defaults every array and evaluation reads.
defaults = Defaults()
# defaults_ctx blocks may nest; the lock only keeps two threads from interleaving
# a save and a restore (the settings themselves are process-wide, as in bcolz).
_ctx_lock = threading.RLock()


def default_cparams() -> CParams:
    """The compression parameters of a new array created without ``cparams``."""
    return defaults.compression()


def resolve_cparams(cparams: CParams | Mapping[str, Any] | None) -> CParams:
    """The parameters a new array gets from its ``cparams`` argument, as bcolz resolves it.

    None takes the current defaults; a dict changes only the fields it gives
    (None values are left out), the others coming from the defaults; a
    :class:`~carray.core.params.CParams` is taken as it is.
    """
    if cparams is None:
        return default_cparams()
    if isinstance(cparams, CParams):
        return cparams
    if isinstance(cparams, Mapping):
        return cparams_from_defaults(**dict(cparams))
    raise TypeError(f"cparams must be a CParams or a dict, not {type(cparams).__name__}")


def cparams_from_defaults(**fields: Any) -> CParams:
    """The current defaults with ``fields`` (those not None) changed, each checked."""
    unknown = set(fields) - {"clevel", "cname", "shuffle", "quantize", "filters"}
    if unknown:
        raise ValueError(f"unknown compression parameters: {sorted(unknown)}")
    return default_cparams().replace(**{k: v for k, v in fields.items() if v is not None})


@contextlib.contextmanager
def defaults_ctx(cparams: CParams | Mapping[str, Any] | None = None, vm: str | None = None,
                 out_flavor: str | None = None,
                 format: str | None = None) -> Iterator[Defaults]:  # noqa: A002
    """Change some defaults for the duration of a ``with`` block.

    Parameters
    ----------
    cparams : CParams or dict, optional
        Compression parameters of arrays created inside the block.
    vm : {'numexpr', 'python', 'dask'}, optional
        The evaluator of :func:`carray.eval` inside the block.
    out_flavor : {'carray', 'bcolz', 'numpy'}, optional
        What :func:`carray.eval` returns inside the block.
    format : {'superchunk', 'bcolz'}, optional
        The layout of stored arrays and tables created inside the block.

    Every setting is checked before any is changed, and all are restored on
    leaving the block, also when it raises.
    """
    new_cp = None if cparams is None else CParams.coerce(
        dict(cparams) if isinstance(cparams, Mapping) else cparams)
    if vm is not None:
        _check_vm(vm)
    if out_flavor is not None:
        _check_out_flavor(out_flavor)
    _check_format(format)
    with _ctx_lock:
        saved = defaults.snapshot()
        if new_cp is not None:
            defaults.cparams = new_cp
        if vm is not None:
            defaults.vm = vm
        if out_flavor is not None:
            defaults.out_flavor = out_flavor
        if format is not None:
            defaults.format = format
    try:
        yield defaults
    finally:
        with _ctx_lock:
            defaults.restore(saved)


class cparams:  # noqa: N801 - bcolz's spelling, which its users call
    """bcolz's ``cparams``: compression parameters, the defaults filling the gaps.

    ``cparams(clevel=9, cname="zstd")`` returns a :class:`~carray.core.params.CParams`
    whose unspecified fields are the current defaults (not the built-in ones),
    as bcolz does; :meth:`setdefaults` changes those defaults.
    """

    def __new__(cls, clevel: int | None = None, shuffle: int | None = None,  # type: ignore[misc]
                cname: str | None = None, quantize: int | None = None,
                filters: Any = None) -> CParams:
        return cparams_from_defaults(clevel=clevel, shuffle=shuffle, cname=cname,
                                     quantize=quantize, filters=filters)

    @staticmethod
    def setdefaults(clevel: int | None = None, shuffle: int | None = None,
                    cname: str | None = None, quantize: int | None = None,
                    filters: Any = None) -> None:
        """Change the default compression parameters of new arrays.

        Only the given fields change; each is checked as :class:`CParams` checks it.
        """
        defaults.cparams = cparams(clevel=clevel, shuffle=shuffle, cname=cname,
                                   quantize=quantize, filters=filters)


__all__ = ["OUT_FLAVORS", "VMS", "Defaults", "cparams", "cparams_from_defaults",
           "default_cparams", "defaults", "defaults_ctx", "resolve_cparams"]
