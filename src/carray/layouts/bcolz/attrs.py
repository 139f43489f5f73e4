"""User attributes of bcolz directories: ``__attrs__`` as bcolz writes it, exact types
beside it.

``__attrs__`` holds a JSON object of the attributes as bcolz itself writes them
(Python's ``json``: numpy scalars as their values, tuples and arrays as lists, NaN as
the ``NaN`` token; :func:`carray.attrs.peers.json_attrs`), so bcolz shows each value as
it would have stored it.  Values JSON has no form for (complex numbers, bytes, dates,
sets) are refused when set, as bcolz refuses them.

What JSON would not give back as it was (a ``numpy.float32``, a tuple, a NaN of other
bits) is also kept in its typed form (docs/formats/attributes.md) in
``__attrs__.carray``, a file bcolz never reads.  Reading, an attribute takes its typed
value when that value still writes as the JSON ``__attrs__`` holds for it, and the
JSON value otherwise (bcolz changed it since), so a change bcolz makes always shows.
"""

from __future__ import annotations

import json
import struct
from typing import Any

from carray.attrs import peers as attrpeers
from carray.attrs import values as attrvalues
from carray.core.safejson import load_json
from carray.errors import FormatError, UnstorableAttributeError
from carray.stores import Store

ATTRS_FILE = "__attrs__"
TYPED_FILE = "__attrs__.carray"
_NAN = struct.pack("<d", float("nan"))


def _dumps(obj: Any) -> bytes:
    return (json.dumps(obj, ensure_ascii=True) + "\n").encode("ascii")


def _exact(value: Any) -> bool:
    """Whether JSON gives ``value`` back as it is (same types, same bits)."""
    t = type(value)
    if value is None or t in (bool, int, str):
        return True
    if t is float:  # JSON's NaN token reads back as the default NaN
        return value == value or struct.pack("<d", value) == _NAN
    if t is list:
        return all(_exact(v) for v in value)
    if t is dict:
        return all(_exact(v) for v in value.values())
    return False


def _read(store: Store, key: str) -> dict[str, Any] | None:
    try:
        text = store.get(key)
    except FileNotFoundError:
        return None
    if not text.strip():
        return {}
    found = load_json(text, store.url(key), what=store.basename(key))
    if not isinstance(found, dict):
        raise FormatError(f"{store.basename(key)} must hold a JSON object", store.url(key))
    return found


def load(store: Store, rootdir: str) -> dict[str, Any]:
    """The attributes of the bcolz directory at ``rootdir`` (see the module doc)."""
    plain = _read(store, store.join(rootdir, ATTRS_FILE))
    if not plain:
        return {}
    out = dict(plain)
    typed_key = store.join(rootdir, TYPED_FILE)
    typed = _read(store, typed_key) or {}
    exact = attrvalues.load_typed(typed, store.url(typed_key)) if typed else {}
    for name, value in exact.items():
        if name not in plain:
            continue  # bcolz deleted it since
        try:
            still = json.dumps(attrpeers.json_value(value, "bcolz"))
        except UnstorableAttributeError:
            continue
        if still == json.dumps(plain[name]):
            out[name] = value
    return out


def save(store: Store, rootdir: str, attrs: dict[str, Any], fsync: bool) -> None:
    """Write ``attrs``: refused (nothing written) when bcolz's JSON cannot hold one."""
    plain = attrpeers.json_attrs(attrs, "bcolz")
    typed = {k: attrvalues.encode_typed(v) for k, v in attrs.items() if not _exact(v)}
    typed_key = store.join(rootdir, TYPED_FILE)
    if typed:
        store.put(typed_key, _dumps(typed), fsync=fsync)
    elif store.exists(typed_key):
        store.delete(typed_key)
    store.put(store.join(rootdir, ATTRS_FILE), _dumps(plain), fsync=fsync)
