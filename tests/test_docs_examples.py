"""Every Python example of the documentation (docs/**/*.md) runs as written.

The ```python blocks of a page run in order in one namespace and one temporary
working directory, as a reader pasting them one after another would: a later block
may use what an earlier one made. An example whose claim no longer holds (its own
asserts) fails here, naming the page and line.
"""

from __future__ import annotations

import pytest
from doc_examples import DOCS, doc_pages, missing_from_all, python_blocks, run_examples

PAGES = doc_pages()
IDS = [str(p.relative_to(DOCS)) for p in PAGES]


def test_docs_have_examples():
    # The user guide and the how-tos are examples first.
    assert len(PAGES) >= 10
    assert any(p.parent.name == "howto" for p in PAGES)


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_doc_examples_need_only_the_all_extra(page):
    for line, code in python_blocks(page):
        missing = missing_from_all(code)
        assert not missing, f"{page}:{line} needs {sorted(missing)}, not in the 'all' extra"


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_doc_examples(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run_examples(python_blocks(page), page)
