"""Page digests: every byte a ranged read hands out was checked."""

from __future__ import annotations

import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from carray.codecs.checksums import get_checksum
from carray.codecs.pages import PagedReader, checked_head, npages, page_digests
from carray.errors import ChecksumError, FormatError

ADLER = get_checksum("adler32")


def _reader(data: bytes, page: int = 64, stored: bytes | None = None) -> PagedReader:
    stored = data if stored is None else stored
    return PagedReader(len(data), lambda o, n: stored[o:o + n], page_digests(data, ADLER, page),
                       ADLER, page, "f.blp", 100)


@given(st.binary(min_size=1, max_size=700), st.data())
def test_reads_return_exactly_the_bytes(data, draw):
    r = _reader(data)
    a = draw.draw(st.integers(0, len(data)))
    n = draw.draw(st.integers(0, len(data) + 10))
    assert r.read(a, n) == data[a:a + n]
    buf = bytearray(n)
    got = r.read_into(a, buf)
    assert bytes(buf[:got]) == data[a:a + n]


@pytest.mark.parametrize("flip", range(0, 300, 7))
def test_a_flip_anywhere_in_the_pages_read_is_caught(flip):
    data = os.urandom(300)
    bad = bytearray(data)
    bad[flip] ^= 0x10
    r = _reader(data, stored=bytes(bad))
    with pytest.raises(ChecksumError) as err:
        r.read(flip, 1)
    assert err.value.offset == 100 + flip - flip % 64
    # A read of other pages does not look at the damaged one.
    other = (flip // 64 + 2) % 5
    lo = other * 64
    assert r.read(lo, 10) == data[lo:lo + 10]


def test_a_flip_in_the_digests_is_caught():
    data = os.urandom(200)
    digests = bytearray(page_digests(data, ADLER, 64))
    digests[5] ^= 1
    r = PagedReader(200, lambda o, n: data[o:o + n], bytes(digests), ADLER, 64)
    with pytest.raises(ChecksumError):
        r.read(70, 5)
    assert r.read(0, 10) == data[:10]


def test_wrong_digest_length_and_truncation_are_format_errors():
    data = os.urandom(200)
    with pytest.raises(FormatError):
        PagedReader(200, lambda o, n: data[o:o + n], b"\0" * 3, ADLER, 64)
    r = PagedReader(200, lambda o, n: data[o:o + n - 1], page_digests(data, ADLER, 64),
                    ADLER, 64)
    with pytest.raises(FormatError):
        r.read(0, 10)


def test_checked_head_keeps_whole_pages_only():
    data = os.urandom(300)
    digests = page_digests(data, ADLER, 64)
    assert checked_head(data[:150], 300, digests, ADLER, 64) == data[:128]
    assert checked_head(data, 300, digests, ADLER, 64) == data
    bad = bytearray(data)
    bad[3] ^= 1
    with pytest.raises(ChecksumError):
        checked_head(bytes(bad[:150]), 300, digests, ADLER, 64)


def test_npages():
    assert [npages(n, 64) for n in (0, 1, 64, 65, 128)] == [0, 1, 1, 2, 2]


@given(st.integers(0, 300_000), st.integers(0, 300_000))
def test_long_reads_straight_into_the_buffer_check_every_byte(a, n):
    data = os.urandom(250_001)
    stored = bytearray(data)
    r = PagedReader(len(data), lambda o, k: bytes(stored[o:o + k]),
                    page_digests(data, ADLER, 4096), ADLER, 4096, "f.blp", 0,
                    lambda o, out: _into(stored, o, out))
    buf = bytearray(n)
    got = r.read_into(a, buf)
    assert bytes(buf[:got]) == data[a:a + n]
    if got:  # damage in any page the read touches, even outside what it returns
        lo, hi = a - a % 4096, min(-(-(a + got) // 4096) * 4096, len(data))
        for at in (lo, a, a + got - 1, hi - 1):
            stored[at] ^= 1
            with pytest.raises(ChecksumError):
                r.read_into(a, bytearray(n))
            stored[at] ^= 1


def _into(stored: bytearray, offset: int, out) -> int:
    view = memoryview(out).cast("B")
    chunk = stored[offset:offset + len(view)]
    view[:len(chunk)] = chunk
    return len(chunk)


@given(st.binary(max_size=3000), st.sampled_from(["adler32", "crc32", "md5", "sha256"]),
       st.sampled_from([1, 7, 64, 4096]))
def test_page_digests_are_each_pages_digest_in_order(data, name, page):
    ck = get_checksum(name)
    want = b"".join(ck.digest(data[i:i + page]) for i in range(0, len(data), page))
    assert page_digests(data, ck, page) == want
