"""The frame committer: a commit that fails (a full disk) leaves the frame at the last
commit, and the layout that tried it commits again once the fault is gone."""

from __future__ import annotations

import os
import shutil

import blosc2
import numpy as np
import pytest
from injection import Faults

from carray.chunks.grid import deblock, reblock
from carray.codecs import blosc
from carray.core.params import CParams
from carray.layouts.b2nd.layout import B2ndLayout
from carray.layouts.base import ArrayMeta

CP = CParams(cname="zstd", clevel=3)


def _meta(rows: int) -> ArrayMeta:
    return ArrayMeta(np.dtype("f8"), (rows, 7), (4, 3), (2, 2), cparams=CP)


def _write(layout: B2ndLayout, arr: np.ndarray) -> None:
    g = _meta(len(arr)).grid
    for n in range(g.nchunks):
        ext = np.zeros(g.ext_chunks, arr.dtype)
        valid = arr[g.chunk_slices(g.chunk_coords(n))]
        ext[tuple(slice(0, k) for k in valid.shape)] = valid
        layout.write_chunk(n, blosc.compress2(reblock(ext, g), 8, CP, blocksize=g.block_nbytes))


def _read(path) -> np.ndarray:
    """The frame as carray reads it, checked against python-blosc2."""
    layout, m, _ = B2ndLayout.open(path, readonly=True)
    g = m.grid
    out = np.empty(m.shape, m.dtype)
    for n in range(g.nchunks):
        raw = np.empty(g.chunk_nbytes, np.uint8)
        blosc.decompress_into(layout.read_chunk(n), raw, layout.chunk_path(n))
        sl = g.chunk_slices(g.chunk_coords(n))
        ext = deblock(raw, g).view(m.dtype).reshape(g.ext_chunks)
        out[sl] = ext[tuple(slice(0, s.stop - s.start) for s in sl)]
    layout.close()
    theirs = blosc2.open(os.fspath(path), mode="r")[...]
    np.testing.assert_array_equal(theirs, out)
    return out


def _pristine(tmp_path, contiguous: bool, old: np.ndarray):
    pristine = tmp_path / "pristine.b2nd"
    layout = B2ndLayout.create(pristine, _meta(0), contiguous=contiguous)
    _write(layout, old)
    layout.commit(_meta(len(old)), 0)
    layout.close()
    return pristine


@pytest.mark.parametrize("contiguous", [True, False])
def test_failed_commit_keeps_last_commit_and_retries(tmp_path, monkeypatch, contiguous):
    old, new = np.arange(56.0).reshape(8, 7), -np.arange(84.0).reshape(12, 7)
    pristine, path = _pristine(tmp_path, contiguous, old), tmp_path / "x.b2nd"
    failures = 0
    for at in range(1, 100):
        (shutil.copytree if not contiguous else shutil.copy)(pristine, path)
        layout = B2ndLayout.open(path)[0]
        _write(layout, new)
        faults = Faults(monkeypatch, at)  # the commit's operation number ``at`` fails
        try:
            layout.commit(_meta(12), 0)
        except OSError:
            faults.stop()
            failures += 1
            # On disk: the last commit, or the new one when only a sync after it failed.
            got = _read(path)
            assert got.shape in ((8, 7), (12, 7))
            np.testing.assert_array_equal(got, old if got.shape == (8, 7) else new)
            layout.commit(_meta(12), 0)  # the fault is gone: the same writer succeeds
        faults.stop()
        layout.close()
        del layout  # its finalizer closes it again: that must not touch the next copy
        np.testing.assert_array_equal(_read(path), new)
        shutil.rmtree(path) if not contiguous else os.unlink(path)
        if not faults.fired:
            break
    assert failures >= 3  # the faults hit offsets, syncs and the commit point


def test_failed_shrink_gives_back_the_reclaimed_space(tmp_path, monkeypatch):
    """Shrinking reclaims the space of chunks appended since the last commit; when the
    commit then fails, those chunks are the writer's again, untouched by the next one."""
    old, new = np.arange(56.0).reshape(8, 7), -np.arange(84.0).reshape(12, 7)
    path = _pristine(tmp_path, True, old)
    layout = B2ndLayout.open(path)[0]
    _write(layout, new)
    faults = Faults(monkeypatch, 1)  # the first write of the commit fails
    with pytest.raises(OSError):
        layout.commit(_meta(4), 0)
    faults.stop()
    assert faults.fired
    np.testing.assert_array_equal(_read(path), old)
    layout.commit(_meta(12), 0)
    layout.close()
    np.testing.assert_array_equal(_read(path), new)


def test_closing_again_deletes_nothing(tmp_path, monkeypatch):
    """A sparse writer whose close could not delete the chunk files no commit uses any
    more leaves them to the next writer: closing again (its finalizer does) deletes
    nothing."""
    path = _pristine(tmp_path, False, np.arange(56.0).reshape(8, 7))
    layout = B2ndLayout.open(path)[0]
    _write(layout, -np.arange(84.0).reshape(12, 7))
    layout.commit(_meta(12), 0)  # the old chunk files are kept a while for readers
    faults = Faults(monkeypatch, 1)  # the close's first delete fails
    layout.close()
    faults.stop()
    assert faults.fired
    left = sorted(os.listdir(path))
    layout.close()
    assert sorted(os.listdir(path)) == left
    np.testing.assert_array_equal(_read(path), -np.arange(84.0).reshape(12, 7))
