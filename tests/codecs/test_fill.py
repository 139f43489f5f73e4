"""Blosc2 special chunks carray writes for chunks of one repeated value."""

from __future__ import annotations

import numpy as np
import pytest

from carray.codecs.fill import fill_chunk, special_code, special_item

blosc2 = pytest.importorskip("blosc2", reason="blosc2 is a test dependency")


@pytest.mark.parametrize(("value", "dtype"), [(0, "f8"), (1.5, "f4"), (-7, "i2"),
                                                (np.nan, "f8"), (3, ">i4"), (b"ab", "S2")])
def test_fill_chunks_decode_in_python_blosc2(value, dtype):
    item = np.asarray(value, dtype=dtype)
    chunk = fill_chunk(item.tobytes(), 400 * item.itemsize, 40 * item.itemsize)
    assert chunk is not None and special_code(chunk)
    decoded = np.frombuffer(blosc2.decompress2(chunk), dtype=dtype)
    np.testing.assert_array_equal(decoded, np.full(400, item))
    assert special_item(chunk, np.dtype(dtype)) == item.tobytes()


def test_wide_items_have_no_value_chunk():
    assert fill_chunk(b"\x01" * 300, 3000, 300) is None
    assert special_code(fill_chunk(bytes(300), 3000, 300)) == 1  # zeros of any width
    assert special_item(b"\x05" * 40, np.dtype("f8")) is None     # a Blosc1 chunk
