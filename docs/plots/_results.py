"""The benchmark results kept in benchmarks/results/, for the figures of the docs."""

import json
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
COLORS = {"carray": "#1d3557", "python-blosc2": "#e76f51", "zarr": "#2a9d8f",
          "h5py": "#e9c46a", "numpy": "#8d99ae"}


def load(name: str) -> dict:
    """The JSON results of one benchmark script."""
    return json.loads((RESULTS / f"{name}.json").read_text(encoding="utf-8"))
