"""The format pages under docs/formats/ that the code cites exist, and nothing cites
documents the repository does not have."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted([*(ROOT / "src" / "carray").rglob("*.py"), *(ROOT / "benchmarks").glob("*.py"),
                  *(ROOT / "tests").rglob("*.py"), ROOT / "tests" / "data" / "FIXTURES.md"])
CITE = re.compile(r"docs/formats/([\w.-]+\.md)")
# Documents of the project's drafting that are not part of the repository.
FOREIGN = re.compile(r"\b(?:specs|seeds)/|QUIRKS")


def test_every_cited_page_exists():
    cited = {(path, name) for path in SOURCES
             for name in CITE.findall(path.read_text(encoding="utf-8"))}
    assert cited, "no module cites docs/formats/"
    missing = sorted(f"{p.relative_to(ROOT)} -> {n}" for p, n in cited
                     if not (ROOT / "docs" / "formats" / n).is_file())
    assert not missing


def test_no_reference_to_documents_outside_the_repository():
    hits = [f"{path.relative_to(ROOT)}: {line.strip()}"
            for path in SOURCES if path.name != "test_format_docs.py"
            for line in path.read_text(encoding="utf-8").splitlines() if FOREIGN.search(line)]
    assert not hits


def test_index_lists_every_page():
    pages = {p.name for p in (ROOT / "docs" / "formats").glob("*.md")} - {"README.md"}
    index = (ROOT / "docs" / "formats" / "README.md").read_text(encoding="utf-8")
    assert pages == set(re.findall(r"\(([\w-]+\.md)\)", index))
