"""benchmarks/bench_carray.py: a 100 MB 1-d array written, appended to and read, on
disk, by carray and its peers (median times; lower is better)."""

import matplotlib.pyplot as plt
import numpy as np
from _results import COLORS, load

data = load("bench_carray")
ops = ["write", "append", "read", "element", "slice"]
labels = ["write", "append", "full read", "10,000 items", "1,000 slices"]
cases = [c for c in data["configs"] if c["where"] == "disk"]

fig, axes = plt.subplots(1, len(cases), figsize=(12, 3.8), sharey=True)
for ax, case in zip(axes, cases, strict=True):
    libs = [lib for lib in COLORS if lib in case["results"]]
    width = 0.8 / len(libs)
    for k, lib in enumerate(libs):
        times = [case["results"][lib][op] for op in ops]
        ax.bar(np.arange(len(ops)) + k * width, times, width, label=lib, color=COLORS[lib])
    ax.set_yscale("log")
    ax.set_xticks(np.arange(len(ops)) + 0.4 - width / 2, labels, rotation=35, ha="right")
    ax.set_title(f"{case['kind']}, {case['cname']}", fontsize=10)
axes[0].set_ylabel("seconds (log)")
axes[-1].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
mb = data["size_bytes"] // 2**20
fig.suptitle(f"{mb} MB on disk, {data['machine']['cpus']} cores, median of {data['repeat']}",
             fontsize=10)
