"""Progress bars on the long verbs: on a terminal only, silenced by ``--quiet``."""

from __future__ import annotations

import io
import sys

import numpy as np
import pytest

from carray.cli.main import main


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _terminal(monkeypatch) -> _Terminal:
    """stderr as a terminal (what the bar draws on); stdout stays a pipe.  Called in the
    test itself: pytest puts its own capture back on sys.stderr after fixtures run."""
    err = _Terminal()
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.setenv("COLUMNS", "160")
    return err


@pytest.fixture
def files(tmp_path):
    np.save(tmp_path / "a.npy", np.arange(300_000, dtype="f8"))
    (tmp_path / "more.bin").write_bytes(np.arange(50_000, dtype="f8").tobytes())
    return tmp_path


def _bar_drawn(text: str, what: str) -> bool:
    return "100.0%" in text and what in text


def test_pack_unpack_append_draw_a_bar_on_a_terminal(files, monkeypatch):
    terminal = _terminal(monkeypatch)
    a, blp = str(files / "a.npy"), str(files / "a.blp")
    assert main(["pack", a, blp, "--chunk-size", "64K"]) == 0
    assert _bar_drawn(terminal.getvalue(), "a.blp") and "MiB" in terminal.getvalue()
    terminal.seek(0), terminal.truncate()
    assert main(["unpack", blp, str(files / "b.npy")]) == 0
    assert _bar_drawn(terminal.getvalue(), "b.npy")
    terminal.seek(0), terminal.truncate()
    assert main(["pack", "--bytes", str(files / "more.bin"), str(files / "m.blp")]) == 0
    terminal.seek(0), terminal.truncate()
    assert main(["append", str(files / "m.blp"), str(files / "more.bin")]) == 0
    assert _bar_drawn(terminal.getvalue(), ">> ")


@pytest.mark.parametrize("quiet", [["--quiet"], ["-q"]])
def test_quiet_silences_the_bar(files, monkeypatch, quiet):
    terminal = _terminal(monkeypatch)
    assert main([*quiet, "pack", str(files / "a.npy"), str(files / "a.blp")]) == 0
    assert main(["unpack", str(files / "a.blp"), str(files / "b.npy"), *quiet]) == 0
    assert terminal.getvalue() == ""


def test_no_bar_off_a_terminal(files, capsys):
    assert main(["pack", str(files / "a.npy"), str(files / "a.blp")]) == 0
    assert capsys.readouterr().err == ""


def test_demo_counts_its_steps_and_keeps_stdout(monkeypatch, capsys):
    terminal = _terminal(monkeypatch)
    assert main(["demo", "--rows", "20000"]) == 0
    out = capsys.readouterr().out
    assert "python-blosc2 reads it back" in out  # printed lines stay in stdout
    assert "16/16" in terminal.getvalue() and "steps" in terminal.getvalue()
    assert "python-blosc2" not in terminal.getvalue()
