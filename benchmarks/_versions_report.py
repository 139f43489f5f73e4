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
    if "writers" in res:
        rows += _writers_targets(res["writers"])
    if "rebase" in res:
        rows += _rebase_targets(res["rebase"])
    return rows


def per_s(s: dict) -> str:
    return f"{s['median']:.0f}/s ({s['min']:.0f}-{s['max']:.0f})"


def _writers_targets(w: dict) -> list[dict]:
    rows = []
    what = f"{w['writers']} writer processes x {w['commits_per_writer']} commits of one chunk"
    for key, where in (("local_carray_fsync", "locally, carray fsync on"),
                       ("local_carray_nofsync", "locally, carray fsync off"),
                       ("local_carray_held", "locally, carray writers keeping their handle"),
                       ("s3_carray", "on moto S3")):
        if key not in w:
            continue
        ic = w.get(key.split("_")[0] + "_icechunk")
        ratio = w.get("ratio_" + key)
        target = ": commits/s (context)" if key.endswith("held") else \
            ": commits/s >= 3x icechunk"
        rows.append({"target": f"{what}, {where}{target}",
                     "carray": per_s(w[key]["commits_per_s"]),
                     "icechunk": per_s(ic["commits_per_s"]) if ic else "",
                     "ratio": x(ratio) if ratio else "",
                     "met": None if ratio is None or key.endswith("held")
                     else ratio["median"] >= 3})
    return rows


def _rebase_targets(rb: dict) -> list[dict]:
    rows = []
    for where, name in (("memory", "memory://"), ("s3", "moto S3")):
        lib = rb.get(f"{where}_carray")
        if lib is None:
            continue
        ic = rb.get(f"{where}_icechunk")
        for kind, what in (("append", "an append"), ("edit", "an edit of another chunk")):
            rows.append({"target": f"one rebase of {what}, {name}: commit with a race vs "
                                   "alone, extra (context)",
                         "carray": f"{ms(lib[kind + '_rebase'])} vs {ms(lib[kind + '_alone'])}: "
                                   f"+{ms(lib[kind + '_extra'])}",
                         "icechunk": f"{ms(ic[kind + '_rebase'])} vs {ms(ic[kind + '_alone'])}: "
                                     f"+{ms(ic[kind + '_extra'])}"
                         if ic and kind + "_rebase" in ic else "",
                         "ratio": "", "met": None})
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
             "local file system storage" +
             (f"; the writers and rebase cases also on moto {res['versions']['moto']} S3 on "
              "127.0.0.1" if "moto" in res["versions"] else "") +
             "), same int64 data, same chunk lengths, Blosc lz4 "
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
    if "writers" in res:
        lines += _writers_section(res["writers"])
    if "rebase" in res:
        lines += _rebase_section(res["rebase"])
    lines += ["", "Parameters: " + ", ".join(f"{k}={v}" for k, v in p.items()), ""]
    return "\n".join(lines)


_WHAT = {
    "local_carray_fsync": "opens the array (waiting for the lock), appends one chunk, "
                          "commits, closes; fsync on (the default)",
    "local_carray_nofsync": "same, `fsync=False`",
    "local_carray_held": "opens the array once (waiting for the lock) and keeps it for "
                         "all its commits, the others waiting; fsync on (context)",
    "local_icechunk": "takes an `flock` of a file beside the repository, writable session, "
                      "writes its own chunk of a pre-sized array, commits with "
                      "`rebase_with=ConflictDetector()`, lets the flock go",
    "s3_carray": "holds its handle; appends one chunk, commits (a lost race rebases)",
    "s3_icechunk": "writable session, writes its own chunk of a pre-sized array, commits "
                   "with `rebase_with=ConflictDetector()` (no lock)",
}


def _writers_section(w: dict) -> list[str]:
    total = w["writers"] * w["commits_per_writer"]
    lines = ["", f"## {w['writers']} writer processes, {total} commits of {w['rows']:,} rows "
             "into one dataset", "",
             "| where | library: each commit | commits/s | wall | rebases | |",
             "| --- | --- | --- | --- | --- | --- |"]
    for key, what in _WHAT.items():
        if key not in w:
            continue
        v = w[key]
        rebases = f"{v['rebases']['median']:.0f}" if "rebases" in v else "-"
        lines.append(f"| {key.split('_')[0]} | {key.split('_')[1]}: {what} | "
                     f"{per_s(v['commits_per_s'])} | {ms(v['wall_s'])} | {rebases} | |")
    if "local_icechunk_unlocked" in w:
        lines += ["", "icechunk's writers on its local file system storage without the "
                  "flock (its own warning: not safe for concurrent commits): " +
                  "; ".join(f"`{o}` ({w['local_icechunk_unlocked'].count(o)} of "
                            f"{len(w['local_icechunk_unlocked'])} rounds)"
                            for o in dict.fromkeys(w["local_icechunk_unlocked"])) + "."]
    if "icechunk_append_conflict" in w:
        lines += ["", "Two icechunk sessions appending to one array, the second committed "
                  "with `rebase_with=BasicConflictSolver()`: "
                  f"`{w['icechunk_append_conflict']}`."]
    return lines


def _rebase_section(rb: dict) -> list[str]:
    lines = ["", f"## The cost of one rebase ({rb['rows']:,}-row chunks, {rb['inner']} "
             "trials a round, time of `commit()`)", "",
             "| store | library | change | alone | after another writer's commit | extra |",
             "| --- | --- | --- | --- | --- | --- |"]
    for lib, v in rb.items():
        if not isinstance(v, dict) or "_" not in lib or lib == "requests":
            continue
        where, name = lib.split("_")
        for kind in ("append", "edit"):
            if kind + "_rebase" in v:
                lines.append(f"| {where} | {name} | {kind} | {ms(v[kind + '_alone'])} | "
                             f"{ms(v[kind + '_rebase'])} | {ms(v[kind + '_extra'])} |")
    if rb.get("requests"):
        lines += ["", "Requests of one change + commit on moto S3 (moto's recorder):", "",
                  "| library | change | alone | with a rebase |", "| --- | --- | --- | --- |"]
        for lib, kinds in rb["requests"].items():
            for kind in ("append", "edit"):
                if kind + "_alone" in kinds:
                    lines.append(f"| {lib.split('_')[1]} | {kind} | "
                                 f"{_requests(kinds[kind + '_alone'])} | "
                                 f"{_requests(kinds[kind + '_rebase'])} |")
    return lines


def _requests(counts: dict) -> str:
    parts = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()) if k != "total")
    return f"{counts['total']} ({parts})"
