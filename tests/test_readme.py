"""Every Python example of README.md runs as written.

Each ```python block is run on its own (a fresh namespace) in a temporary working
directory, so an example that names something it never defines, or whose claim
no longer holds (its own asserts), fails here. The pages of docs/ are checked by
test_docs_examples.py.
"""

from __future__ import annotations

import pytest
from doc_examples import ROOT, missing_from_all, python_blocks, run_examples

README = ROOT / "README.md"
BLOCKS = python_blocks(README)


def test_readme_has_examples():
    assert len(BLOCKS) >= 3


def test_readme_is_short():
    # What a newcomer reads first; the manual is docs/.
    assert README.read_text(encoding="utf-8").count("\n") < 300


@pytest.mark.parametrize(("line", "code"), BLOCKS, ids=[f"line{n}" for n, _ in BLOCKS])
def test_readme_example_needs_only_the_all_extra(line, code):
    # The README's first line installs '.[all]' and says the examples then run.
    missing = missing_from_all(code)
    assert not missing, f"README.md:{line} needs {sorted(missing)}, not in the 'all' extra"


@pytest.mark.parametrize(("line", "code"), BLOCKS, ids=[f"line{n}" for n, _ in BLOCKS])
def test_readme_example(line, code, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run_examples([(line, code)], README)
