"""Every MUST of the commit protocol (docs/spec/commit.md) is checked by a test that
names its label."""

from __future__ import annotations

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_every_must_of_the_commit_spec_has_a_test_naming_it():
    spec = (ROOT / "docs" / "spec" / "commit.md").read_text(encoding="utf-8")
    labels = set(re.findall(r"\[(C\d+)\]", spec))
    assert labels, "the spec names no labels"
    tests = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "tests").rglob("*.py")
                      if p.name != pathlib.Path(__file__).name)
    missing = sorted((lab for lab in labels if not re.search(rf"(?<![A-Za-z0-9]){lab}(?![0-9])", tests)),
                     key=lambda lab: int(lab[1:]))
    assert not missing, f"labels of docs/spec/commit.md no test names: {missing}"
