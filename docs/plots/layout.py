"""How a 2-d carray is cut into chunks and blocks, and which blocks reading one row
decodes. The chunk and block shapes are the array's own, read back from carray."""

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Rectangle

import carray as ca

a = ca.zeros((20, 30), dtype="f8", chunks=(8, 12), blocks=(4, 4))
(rows, cols), (crow, ccol), (brow, bcol) = a.shape, a.chunks, a.blocks
row = 9                                          # the row read: a[9, :]
nchunks = (-(-rows // crow), -(-cols // ccol))

fig, ax = plt.subplots(figsize=(8, 5.6))
decoded = 0
for ci in range(nchunks[0]):
    for cj in range(nchunks[1]):
        r0, c0 = ci * crow, cj * ccol
        # An edge chunk stores whole blocks: the array's items, padded to a block.
        stored_r = min(crow, -(-(rows - r0) // brow) * brow)
        stored_c = min(ccol, -(-(cols - c0) // bcol) * bcol)
        for bi in range(0, stored_r, brow):
            for bj in range(0, stored_c, bcol):
                touched = r0 + bi <= row < r0 + bi + brow
                decoded += touched
                ax.add_patch(Rectangle((c0 + bj, r0 + bi), bcol, brow,
                                       facecolor="#f4a261" if touched else "#e9f1f7",
                                       edgecolor="#7a9cb8", linewidth=0.6))
        pad_c, pad_r = c0 + stored_c, r0 + stored_r
        if pad_c > cols:
            ax.add_patch(Rectangle((cols, r0), pad_c - cols, stored_r, fill=False,
                                   hatch="...", edgecolor="#9aa5ad", linewidth=0))
        if pad_r > rows:
            ax.add_patch(Rectangle((c0, rows), stored_c, pad_r - rows, fill=False,
                                   hatch="...", edgecolor="#9aa5ad", linewidth=0))
        ax.add_patch(Rectangle((c0, r0), stored_c, stored_r, fill=False,
                               edgecolor="#1d3557", linewidth=2.2))
        ax.text(c0 + 0.6, r0 + stored_r - 0.7, f"chunk {ci * nchunks[1] + cj}", fontsize=9,
                color="#1d3557", weight="bold")
ax.add_patch(Rectangle((0, 0), cols, rows, fill=False, edgecolor="black", linewidth=1.2,
                       linestyle="--"))
ax.plot([0, cols], [row + 0.5, row + 0.5], color="#c1121f", linewidth=2)
padded = (-(-rows // brow) * brow, -(-cols // bcol) * bcol)   # the stored extent
ax.text(padded[1] + 0.5, row + 0.8, "a[9, :]", color="#c1121f", fontsize=10)
ax.set_xlim(-0.5, padded[1] + 6)
ax.set_ylim(padded[0] + 0.5, -0.5)
ax.set_aspect("equal")
ax.set_xticks(np.arange(0, padded[1] + 1, bcol))
ax.set_yticks(np.arange(0, padded[0] + 1, brow))
ax.set_xlabel("axis 1")
ax.set_ylabel("axis 0")
ax.set_title(f"shape {a.shape}, chunks {a.chunks}, blocks {a.blocks}: "
             f"a[9, :] decodes the {decoded} shaded blocks", fontsize=10)
