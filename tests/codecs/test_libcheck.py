"""The import-time check of the ctypes layer over libblosc2, and its fallback."""

from __future__ import annotations

import ctypes
import subprocess
import sys
import textwrap

import blosc2
import numpy as np
import pytest

from carray.codecs import _libcheck, blosc
from carray.codecs._libcheck import PublicLibrary, self_check


def test_the_installed_wheel_passes_the_check():
    assert not isinstance(blosc._lib, PublicLibrary)
    assert self_check(blosc._lib, blosc._DParams) is None


class _Lying:
    """A library whose decode writes nothing but says it did."""

    def blosc2_decompress(self, src, srcsize, dest, destsize):
        return destsize

    def blosc2_getitem(self, src, srcsize, start, nitems, dest, destsize):
        return destsize


def test_a_library_decoding_wrongly_is_caught():
    assert "other values" in self_check(_Lying(), None)


def test_a_missing_function_is_caught():
    assert self_check(object(), None)


def test_the_public_library_decodes_whole_and_part():
    lib = PublicLibrary()
    values = np.arange(10_000, dtype=np.int64)
    chunk = bytes(blosc2.compress2(values, typesize=8))
    out = np.zeros_like(values)
    assert lib.blosc2_decompress(chunk, len(chunk), out.ctypes.data, out.nbytes) == out.nbytes
    assert np.array_equal(out, values)
    part = np.zeros(10, np.int64)
    assert lib.blosc2_getitem(chunk, len(chunk), 500, 10, part.ctypes.data, part.nbytes) == 80
    assert np.array_equal(part, values[500:510])
    assert lib.blosc2_getitem(chunk, len(chunk), 9_995, 10, part.ctypes.data, 80) < 0
    assert self_check(lib, None) is None


def test_fallback_warns():
    with pytest.warns(_libcheck.LibraryFallbackWarning, match="cannot load it"):
        lib = _libcheck.fallback("cannot load it")
    assert isinstance(lib, PublicLibrary)


@pytest.mark.parametrize("how", ["loader", "layout"])
def test_import_falls_back_when_the_wheel_changes(how, tmp_path):
    # A fresh interpreter, so the real module stays loaded here.
    patch = {
        # The wheel's library cannot be loaded at all.
        "loader": "ctypes.CDLL = lambda *a, **k: (_ for _ in ()).throw(OSError('gone'))",
        # It loads, but decodes nothing (as a changed calling convention might).
        "layout": "_real = ctypes.CDLL\n"
                  "def _cdll(*a, **k):\n"
                  "    lib = _real(*a, **k)\n"
                  "    if 'blosc2' in str(a[0]):\n"
                  "        class Broken:\n"
                  "            def __getattr__(self, name):\n"
                  "                f = getattr(lib, name)\n"
                  "                return (lambda *x: 0) if 'decompress' in name else f\n"
                  "        return Broken()\n"
                  "    return lib\n"
                  "ctypes.CDLL = _cdll",
    }[how]
    script = textwrap.dedent("""
        import ctypes, warnings
        {patch}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import numpy as np
            import carray as ca
            from carray.codecs import blosc
        assert type(blosc._lib).__name__ == "PublicLibrary", type(blosc._lib)
        assert any("public API" in str(w.message) for w in caught), caught
        a = ca.carray(np.arange(100_000), rootdir={root!r}, mode="w")
        a.close()
        b = ca.open({root!r}, mode="r")
        assert b[12_345] == 12_345 and np.array_equal(b[:], np.arange(100_000))
        assert np.array_equal(b[99_990:], np.arange(99_990, 100_000))
        print("fell back")
    """).format(patch=patch, root=str(tmp_path / "a.carray"))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert "fell back" in done.stdout


def test_ctypes_is_what_the_module_uses():
    assert isinstance(blosc._lib, ctypes.CDLL)
