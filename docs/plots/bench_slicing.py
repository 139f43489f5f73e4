"""benchmarks/bench_slicing.py: planes, a box and single items of a 3-d array, read by
carray and its peers, in memory and on disk (median time per read; lower is better)."""

import matplotlib.pyplot as plt
import numpy as np
from _results import load

data = load("bench_slicing")
cases = ["slice0", "slice1", "slice2", "box", "element"]
labels = ["a[i, :, :]", "a[:, j, :]", "a[:, :, k]", f"{data['box']}³ box", "one item"]
configs = ["carray", "blosc2-auto", "zarr", "h5py"]
colors = ["#1d3557", "#e76f51", "#2a9d8f", "#e9c46a"]

fig, axes = plt.subplots(1, 2, figsize=(12, 3.8), sharey=True)
for ax, where in zip(axes, ["memory", "disk"], strict=True):
    width = 0.8 / len(configs)
    for k, (name, color) in enumerate(zip(configs, colors, strict=True)):
        config = data["configs"][where][name]
        times = [config["times_s"][case] for case in cases]
        label = config["lib"] + (f", blocks {tuple(config['blocks'])}" if config["blocks"] else "")
        ax.bar(np.arange(len(cases)) + k * width, times, width, label=label, color=color)
    ax.set_yscale("log")
    ax.set_xticks(np.arange(len(cases)) + 0.4 - width / 2, labels, rotation=20, ha="right")
    ax.set_title(where, fontsize=10)
axes[0].set_ylabel("seconds per read (log)")
axes[1].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
shape = "x".join(map(str, data["shape"]))
chunks = "x".join(map(str, data["chunks"]))
fig.suptitle(f"{shape} {data['dtype']}, chunks {chunks}, {data['cname']} level {data['clevel']}",
             fontsize=10)
