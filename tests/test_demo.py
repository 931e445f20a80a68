"""README's first command: the demo runs on its defaults and reports what happened."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import main
from harness.demo import run_demo
from harness.log import DLSN


def test_demo_holds_at_least_once_with_exact_redeliveries(tmp_path: Path) -> None:
    lines: list[str] = []
    result = run_demo(tmp_path, say=lines.append)
    assert result.ok
    assert (result.written, result.lost) == (1000, 0)
    # The tutorial stores the last record received; 650 were processed and the offset was
    # stored at the 600th, so the 600th and the 50 after it are processed again.
    assert result.redelivered == 51
    assert result.processed == 1051
    assert result.segments == 4 and result.truncated_segments == 2
    assert result.resumed_from > DLSN(2, 0, 0)
    assert lines[-1] == (
        "at-least-once HELD: 1000 of 1000 records processed, 0 lost, "
        "51 redelivered (allowed under at-least-once)"
    )
    assert (tmp_path / "namespace" / "logs" / "demo-stream" / "db").is_dir()
    assert (tmp_path / "offsets").is_dir()


def test_cli_runs_the_demo_by_default(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 0
    out = capsys.readouterr().out
    assert "at-least-once HELD" in out and "0 lost" in out


def test_cli_rejects_a_bad_record_count(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--records", "0"]) == 2
    assert "--records must be >= 1, got 0" in capsys.readouterr().err


@pytest.mark.slow
def test_python_dash_m_harness_is_the_first_readme_command(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "harness", "demo", "--dir", str(tmp_path), "--records", "200"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "at-least-once HELD: 200 of 200 records processed, 0 lost" in result.stdout
    assert result.stderr == ""


def test_cli_answers_an_unusable_directory_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    assert main(["demo", "--dir", str(blocker)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: cannot use '{blocker}/namespace' as a namespace directory")
    assert "Not a directory" in err and err.count("\n") == 1
