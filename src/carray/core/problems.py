"""What verification finds: problems, and chunks that checked out.

Every layout and file format verifies itself with the same parsing code its
reader uses, yielding :class:`Problem` for each thing wrong (collecting instead
of raising) and :class:`Checked` for each chunk fully decoded, so a caller can
print every problem and count what was fine.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from carray.errors import CArrayError, FormatError


@dataclass(frozen=True)
class Problem:
    """One thing wrong with stored data.

    Attributes
    ----------
    path : str
        The file or directory (as the user would name it: a path or a URL).
    where : str
        Where inside it ("offset 1234", "chunk 5", "meta/sizes"), or "".
    what : str
        What is wrong.
    """

    path: str
    where: str
    what: str

    def __str__(self) -> str:
        where = f" at {self.where}" if self.where else ""
        return f"{self.path}{where}: {self.what}"

    @classmethod
    def from_error(cls, exc: Exception, path: str, where: str = "") -> Problem:
        """A problem from a carray error, keeping the file and offset it names."""
        if isinstance(exc, FormatError) and exc.path is not None:
            message = str(exc).removeprefix(f"{exc.path}")
            message = message.removeprefix(f" at offset {exc.offset}")
            return cls(exc.path, f"offset {exc.offset}" if exc.offset is not None else where,
                       message.removeprefix(": "))
        text = str(exc)
        for name in (path, str(getattr(exc, "filename", "") or "")):
            if name and text.startswith(f"{name}: "):
                text = text[len(name) + 2:]
        return cls(path, where, text)


@dataclass(frozen=True)
class Checked:
    """``count`` chunks of ``path`` were read, checksummed and decoded without a problem."""

    path: str
    count: int = 1


Finding = Problem | Checked


def tally(findings: Iterable[Finding]) -> tuple[list[Problem], int]:
    """All problems and the number of chunks checked fine, from a stream of findings."""
    problems: list[Problem] = []
    checked = 0
    for f in findings:
        if isinstance(f, Problem):
            problems.append(f)
        else:
            checked += f.count
    return problems, checked


def guarded(findings: Iterator[Finding], path: str) -> Iterator[Finding]:
    """``findings``, with a carray error raised while producing them yielded as a problem."""
    try:
        yield from findings
    except CArrayError as exc:
        yield Problem.from_error(exc, path)


__all__ = ["Checked", "Finding", "Problem", "guarded", "tally"]
