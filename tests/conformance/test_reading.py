"""A drawn table reads back what it was given: as pandas, as rows, as masked arrays and
null counts, in every place."""

from __future__ import annotations

import numpy as np
from hypothesis import given

from .tables import SETTINGS, TIMEOUT, assert_frame_like, canon, each_place, tables

pytestmark = TIMEOUT


@SETTINGS
@given(drawn=tables())
def test_a_table_reads_back_what_it_was_given(drawn, tmp_path):
    with each_place(drawn, tmp_path) as built:
        for place, t, ref in built:
            df = ref.frame
            got = t.todataframe()
            assert_frame_like(got[list(df.columns)], df, place)
            assert t.null_counts() == {**{k: int(v) for k, v in df.isna().sum().items()},
                                       "n": 0}, place
            for name in df.columns:
                assert t.cols[name].null_count() == int(df[name].isna().sum()), (place, name)
            records = np.ma.asanyarray(t.cols["n"][:])
            assert records.tolist() == ref.nested.tolist(), place  # None: a missing field
            rows = list(t.iter(outcols=["i64", "s", "z"]))
            assert [r.i64 for r in rows] == canon(df["i64"]), place
            assert [r.s for r in rows] == canon(df["s"]), place
            assert canon([r.z for r in rows]) == canon(df["z"]), place
