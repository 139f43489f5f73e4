"""The process-wide Blosc thread count (carray.codecs.threads)."""

import blosc
import blosc2
import pytest

import carray
from carray.codecs import threads


@pytest.fixture
def restore_threads():
    before = threads.get_nthreads()
    yield
    threads.set_nthreads(before)


def test_detect_number_of_cores_is_positive():
    assert threads.detect_number_of_cores() >= 1


def test_set_returns_previous_and_applies_to_the_libraries(restore_threads):
    before = threads.get_nthreads()
    assert threads.set_nthreads(1) == before
    assert threads.get_nthreads() == 1
    assert blosc2.nthreads == 1
    assert threads.set_nthreads(2) == 1
    assert blosc2.nthreads == 2
    assert blosc.set_nthreads(2) == 2  # python-blosc returns the count it had


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2", None])
def test_set_rejects_non_positive_ints(bad, restore_threads):
    before = threads.get_nthreads()
    with pytest.raises(ValueError, match="nthreads"):
        threads.set_nthreads(bad)
    assert threads.get_nthreads() == before


def test_package_level_functions_drive_the_codec_setting(restore_threads):
    assert carray.get_nthreads is threads.get_nthreads
    assert carray.detect_number_of_cores is threads.detect_number_of_cores
    carray.set_nthreads(1)
    assert threads.get_nthreads() == 1 and blosc2.nthreads == 1


def test_params_module_holds_data_only():
    import carray.core.params as params

    assert not hasattr(params, "set_nthreads")
    assert not hasattr(params, "get_nthreads")


def test_a_decoder_stays_single_threaded_whatever_blosc_nthreads_says(monkeypatch):
    import os

    import numpy as np

    from carray.codecs import blosc as codec

    if not codec.Decoder.available():
        pytest.fail("the libblosc2 context API is not available")
    monkeypatch.setenv("BLOSC_NTHREADS", "4")
    data = np.arange(2**21, dtype="f8")
    chunk = codec.compress2(data, 8, carray.CParams(cname="lz4", clevel=5))
    before = len(os.listdir("/proc/self/task"))
    with codec.Decoder() as d:
        out = np.empty_like(data)
        d.decompress_into(chunk, out)
        # A context made with the variable set would have started its own threads.
        assert len(os.listdir("/proc/self/task")) == before
    np.testing.assert_array_equal(out, data)
    assert os.environ["BLOSC_NTHREADS"] == "4"  # put back
