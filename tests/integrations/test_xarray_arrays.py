"""The base of the backends' lazy arrays: opened once on first read, read under a lock
(unless the subclass reads concurrently), pickled as the arguments that reopen it; and
every backend's array reopens lazily in another process."""

from __future__ import annotations

import pickle
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

xr = pytest.importorskip("xarray", reason="xarray is the 'xarray' extra (CI has it)")

import carray as ca  # noqa: E402
from carray.formats import ds  # noqa: E402
from carray.integrations.xarray_arrays import LazyBackendArray  # noqa: E402
from carray.integrations.xarray_backend import (  # noqa: E402
    CarrayBackendArray,
    DsBackendArray,
)
from carray.integrations.xarray_group_backend import GroupBackendArray, _Source  # noqa: E402

OUTER = xr.core.indexing.OuterIndexer


class Ramp(LazyBackendArray):
    """0, 1, 2, ... opened slowly, with a handle that cannot be pickled; counts its opens
    and the reads under way at once."""

    opens = 0

    def __init__(self, n: int, concurrent: bool = False) -> None:
        super().__init__((n,), np.dtype("i8"))
        self.n, self.concurrent_reads = n, concurrent
        self.reading = self.most = 0

    def _arguments(self) -> tuple:
        return self.n, self.concurrent_reads

    def _open(self):
        type(self).opens += 1
        time.sleep(0.05)
        return threading.Lock(), np.arange(self.n)  # a lock does not pickle

    def _read(self, opened, key: tuple) -> np.ndarray:
        self.reading += 1
        self.most = max(self.most, self.reading)
        time.sleep(0.01)
        self.reading -= 1
        return opened[1][key]


@pytest.mark.parametrize("concurrent", [False, True])
def test_opened_once_by_the_first_read_of_many_threads(concurrent):
    Ramp.opens = 0
    ramp = Ramp(100, concurrent)
    assert not ramp.is_open
    got: list = [None] * 8

    def read(i: int) -> None:
        got[i] = ramp[OUTER((slice(i, i + 3),))]

    threads = [threading.Thread(target=read, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert Ramp.opens == 1 and ramp.is_open
    assert [g.tolist() for g in got] == [[i, i + 1, i + 2] for i in range(8)]
    # Serialised unless the subclass says its reads may overlap.
    assert (ramp.most > 1) if concurrent else ramp.most == 1


def test_pickles_as_its_arguments_not_what_it_opened():
    ramp = Ramp(10, True)
    ramp[OUTER((slice(0, 2),))]
    clone = pickle.loads(pickle.dumps(ramp))  # the open lock would not pickle
    assert ramp.is_open and not clone.is_open
    assert clone.n == 10 and clone.concurrent_reads
    assert clone[OUTER((np.array([9, 0]),))].tolist() == [9, 0]
    assert clone.is_open


_ELSEWHERE = """
import pickle, sys
import numpy as np
arrays = pickle.loads(sys.stdin.buffer.read())
for array, key in arrays:
    assert not array.is_open
    print(np.asarray(array._raw_getitem(key)).tolist())
    assert array.is_open
"""


def test_every_backend_array_reopens_in_another_process(tmp_path):
    values = np.arange(24.0).reshape(4, 6)
    ds.write(tmp_path / "x.ds", {"v": values})
    ca.carray(values, rootdir=tmp_path / "a.carray", mode="w", chunks=(2, 3)).close()
    ca.ctable({"n": np.arange(5), "f": np.arange(5.0) / 2},
              rootdir=tmp_path / "t.ctable", mode="w").close()
    ca.from_xarray(xr.Dataset({"v": (("y", "x"), values)}), tmp_path / "g").close()
    root = ca.open_group(tmp_path / "g", mode="r")
    key = (slice(1, 3), np.array([5, 0]))
    arrays = [
        (DsBackendArray(str(tmp_path / "x.ds"), "v", (4, 6), np.dtype("f8")), key),
        (CarrayBackendArray(str(tmp_path / "a.carray"), None, (4, 6), np.dtype("f8")), key),
        (CarrayBackendArray(str(tmp_path / "t.ctable"), "f", (5,), np.dtype("f8")),
         (np.array([4, 1]),)),
        (GroupBackendArray(_Source(str(tmp_path / "g"), root.version, None, root), "v",
                           (4, 6), np.dtype("f8")), key),
    ]
    for array, k in arrays:
        array._raw_getitem(k)  # open here first: the pickle must leave that behind
        assert array.is_open
    out = subprocess.run([sys.executable, "-c", _ELSEWHERE], input=pickle.dumps(arrays),
                         capture_output=True, check=True, timeout=120)
    expected = values[1:3][:, [5, 0]].tolist()
    assert out.stdout.decode().splitlines() == [str(expected), str(expected), "[2.0, 0.5]",
                                                 str(expected)]
    root.close()
