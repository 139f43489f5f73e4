"""The report of ``bench_versions.py``: its targets, met or missed, as Markdown."""

from __future__ import annotations


def ms(s: dict) -> str:
    return f"{s['median'] * 1e3:.2f} ms ({s['min'] * 1e3:.2f}-{s['max'] * 1e3:.2f})"


def x(s: dict) -> str:
    return f"{s['median']:.2f}x ({s['min']:.2f}-{s['max']:.2f})"


def kib(s: dict) -> str:
    return f"{s['median'] / 1024:.1f} KiB ({s['min'] / 1024:.1f}-{s['max'] / 1024:.1f})"


def pct(s: dict) -> str:
    return f"{s['median'] * 100:+.1f}% ({s['min'] * 100:+.1f}-{s['max'] * 100:+.1f})"


def verdict(ok: bool) -> str:
    return "met" if ok else "**missed**"


def targets(res: dict) -> list[dict]:
    """Each target of issue 23: what was measured and whether it is met (on the median)."""
    rows = []
    if "commits" in res:
        rows += _commit_targets(res["commits"])
    if "one_chunk" in res:
        rows += _one_chunk_targets(res["one_chunk"])
    if "open" in res:
        rows += _open_targets(res["open"])
    if "time_travel" in res:
        rows += _time_travel_targets(res["time_travel"])
    if "edits" in res:
        rows += _edits_targets(res["edits"])
    return rows


def _commit_targets(c: dict) -> list[dict]:
    rows = []
    rows.append({"target": f"{c['n_commits']} one-chunk append commits, fsync off: "
                           ">= 10x icechunk",
                 "carray": ms(c["carray_nofsync"]) + " a commit",
                 "icechunk": ms(c["icechunk"]) + " a commit", "ratio": x(c["ratio_nofsync"]),
                 "met": c["ratio_nofsync"]["median"] >= 10})
    rows.append({"target": f"same, carray fsync on ({c['carray_fsync_fsyncs']['median']:.0f} "
                           "fsyncs a commit): >= 5x icechunk",
                 "carray": ms(c["carray_fsync"]) + " a commit",
                 "icechunk": ms(c["icechunk"]) + " a commit", "ratio": x(c["ratio_fsync"]),
                 "met": c["ratio_fsync"]["median"] >= 5})
    return rows


def _one_chunk_targets(o: dict) -> list[dict]:
    rows = []
    on, off, ic = o["carray_fsync"], o["carray_nofsync"], o.get("icechunk")
    worst = max(on["wchar"]["median"], off["wchar"]["median"])
    rows.append({"target": f"edit 1 chunk of {o['nchunks']:,} + commit: <= 64 KiB written "
                           "(wchar)",
                 "carray": kib(off["wchar"]) + " (fsync off), " + kib(on["wchar"]) + " (on)",
                 "icechunk": kib(ic["wchar"]) if ic else "",
                 "ratio": f"{ic['wchar']['median'] / worst:.1f}x fewer bytes" if ic else "",
                 "met": worst <= 64 * 1024})
    rows.append({"target": "same: <= 5 ms, fsync off",
                 "carray": ms(off["time_s"]), "icechunk": ms(ic["time_s"]) if ic else "",
                 "ratio": f"{ic['time_s']['median'] / off['time_s']['median']:.1f}x" if ic
                 else "", "met": off["time_s"]["median"] <= 0.005})
    rest = on["time_s"]["median"] - on["fsync_s"]["median"]
    rows.append({"target": "same: <= 5 ms plus its fsyncs, fsync on",
                 "carray": f"{ms(on['time_s'])}, of which {on['fsyncs']['median']:.0f} fsyncs "
                           f"{on['fsync_s']['median'] * 1e3:.2f} ms: {rest * 1e3:.2f} ms besides",
                 "icechunk": "", "ratio": "", "met": rest <= 0.005})
    return rows


def _open_targets(op: dict) -> list[dict]:
    rows = []
    for kind, what in (("latest", "open the newest version"),
                       ("id", f"open one of {op['versions']:,} kept versions by id"),
                       ("as_of", "same by as_of")):
        for sfx, where in (("", "same process"), ("_fresh", "fresh process")):
            key = f"carray_{kind}{sfx}"
            rows.append({"target": f"{what} ({where}): <= 20 ms",
                         "carray": ms(op[key]),
                         "icechunk": ms(op[f"icechunk_{kind}{sfx}"]) if f"icechunk_{kind}{sfx}"
                         in op else "",
                         "ratio": x(op[f"ratio_{kind}{sfx}"]) if f"ratio_{kind}{sfx}" in op
                         else "", "met": op[key]["median"] <= 0.020})
    return rows


def _time_travel_targets(tt: dict) -> list[dict]:
    rows = []
    for name, k in tt["old_versions"].items():
        rows.append({"target": f"open + read version {k:,} of {tt['versions']:,}: within 10% "
                               "of the newest",
                     "carray": f"{ms(tt['carray_' + name])} vs {ms(tt['carray_latest'])}: "
                               f"{x(tt['old_over_latest_' + name])}",
                     "icechunk": f"{ms(tt['icechunk_' + name])} vs {ms(tt['icechunk_latest'])}"
                     if "icechunk_latest" in tt else "",
                     "ratio": "", "met": tt["old_over_latest_" + name]["median"] <= 1.10})
        if "ratio_" + name in tt:
            rows.append({"target": "same: >= 5x icechunk's time travel",
                         "carray": ms(tt["carray_" + name]),
                         "icechunk": ms(tt["icechunk_" + name]), "ratio": x(tt["ratio_" + name]),
                         "met": tt["ratio_" + name]["median"] >= 5})
    return rows


def _edits_targets(e: dict) -> list[dict]:
    rows = []
    ce, ie = e["carray"], e.get("icechunk")
    rows.append({"target": f"{e['edits']:,} one-element edits + commit, default retention: "
                           "directory grows < 20%",
                 "carray": f"{ce['before'][0] / 2**20:.2f} -> {ce['after'][0] / 2**20:.2f} MiB: "
                           f"{pct(ce['growth'])}",
                 "icechunk": f"{ie['before'][0] / 2**20:.2f} -> {ie['after'][0] / 2**20:.2f} "
                             f"MiB: {pct(ie['growth'])}" if ie else "",
                 "ratio": "", "met": ce["growth"]["median"] < 0.20})
    if ie:
        rows.append({"target": "same: time a commit (context)",
                     "carray": ms(ce["per_commit_s"]), "icechunk": ms(ie["per_commit_s"]),
                     "ratio": x(e["ratio_per_commit"]), "met": None})
    return rows


def report(res: dict) -> str:
    p = res["params"]
    lines = ["# bench_versions", "",
             f"carray {res['versions']['carray']} against icechunk "
             f"{res['versions'].get('icechunk', '-')} (zarr {res['versions'].get('zarr', '-')}, "
             "local file system storage), same int64 data, same chunk lengths, Blosc lz4 "
             f"clevel 5 shuffle. {p['rounds']} rounds, both libraries back to back in each; "
             "median (range) over rounds. Ratio = icechunk / carray from the same round "
             "(> 1: carray faster). Load average at start: "
             f"{res['machine']['load_start']}, at end: {res['machine']['load_end']}.", "",
             "| target | carray | icechunk | ratio | |", "| --- | --- | --- | --- | --- |"]
    for row in res["targets"]:
        met = "" if row["met"] is None else verdict(row["met"])
        lines.append(f"| {row['target']} | {row['carray']} | {row['icechunk']} | "
                     f"{row['ratio']} | {met} |")
    if "one_chunk" in res:
        o = res["one_chunk"]
        lines += ["", f"## One chunk of {o['nchunks']:,} (chunk length {o['chunklen']}): "
                  "bytes and time of edit + commit", "",
                  "| | time | commit alone | fsyncs | in fsync | wchar | write_bytes | "
                  "new files |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
        for lib, v in o.items():
            if not isinstance(v, dict) or "time_s" not in v:
                continue
            lines.append(f"| {lib} | {ms(v['time_s'])} | {ms(v['commit_s'])} | "
                         f"{v['fsyncs']['median']:.0f} | {ms(v['fsync_s'])} | "
                         f"{kib(v['wchar'])} | {kib(v['write_bytes'])} | "
                         f"{kib(v['new_file_bytes'])} |")
        lines += ["", f"Build of the {o['nchunks']:,}-chunk array: " +
                  ", ".join(f"{k} {v:.1f} s" for k, v in o["build_s"].items()) + "."]
    if "history" in res:
        h = res["history"]
        lines += ["", f"History of {h['edits']:,} one-element edits, built in " +
                  ", ".join(f"{k} {v:.1f} s" for k, v in h["build_s"].items()) +
                  " (carray: fsync off). One more edit + commit on it, "
                  "defaults: " + ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in
                                           h["commit_at_end_s"].items()) + "."]
    lines += ["", "Parameters: " + ", ".join(f"{k}={v}" for k, v in p.items()), ""]
    return "\n".join(lines)
