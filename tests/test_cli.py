"""The command line's check, report and replay commands: outputs, files and exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.catalogue.toys import commit_before_processing, process_then_commit
from harness.check import Guarantee
from harness.cli import main
from harness.faults import Crash, Produce, Run, Schedule
from harness.history.io import write_history
from harness.runner import Replay, run_once
from harness.sim.topology import Topology

BUGGY = Schedule((Produce(0, 1), Run(3), Crash()))


def _replay_file(tmp_path: Path, processor: object) -> Path:
    name = f"harness.catalogue.toys:{processor.__name__}"  # type: ignore[attr-defined]
    spec = Replay(name, Guarantee.AT_LEAST_ONCE, Topology(), "memory", BUGGY)
    return spec.save(tmp_path)


def test_report_renders_a_replay_file_and_writes_three_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    replay_file = _replay_file(tmp_path, commit_before_processing)
    out = tmp_path / "report"
    assert main(["report", str(replay_file), "--out", str(out)]) == 1
    text = capsys.readouterr().out
    assert (
        "INVALID: at-least-once does NOT hold for harness.catalogue.toys:commit_before_processing"
        in text
    )
    assert "lost x1" in text
    assert sorted(p.name for p in out.iterdir()) == ["report.html", "report.json", "report.txt"]
    assert json.loads((out / "report.json").read_text())["verdict"]["status"] == "invalid"

    assert main(["report", str(replay_file), "--out", str(tmp_path / "h"), "--format", "html"]) == 1
    assert [p.name for p in (tmp_path / "h").iterdir()] == ["report.html"]


def test_check_a_stored_history(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    history, _ = run_once(commit_before_processing, BUGGY, "at-least-once")
    path = tmp_path / "run.jsonl"
    write_history(history, path)
    out = tmp_path / "verdict.json"
    assert main(["check", str(path), "--guarantee", "at-least-once", "--out", str(out)]) == 1
    assert capsys.readouterr().out.startswith(f"at-least-once for {path}: INVALID")
    assert json.loads(out.read_text())["status"] == "invalid"

    good, _ = run_once(process_then_commit, BUGGY, "at-least-once")
    write_history(good, path)
    assert main(["check", str(path), "--guarantee", "at-least-once", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "valid"

    # an unsettled history cannot show that nothing was lost: UNKNOWN, exit 2
    unsettled, _ = run_once(process_then_commit, Schedule(BUGGY.steps, drain=False), "exactly-once")
    write_history(unsettled, path)
    assert main(["check", str(path), "--guarantee", "exactly-once"]) == 2


def test_user_mistakes_are_one_line_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nope.jsonl"
    assert main(["check", str(missing), "--guarantee", "at-least-once"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: cannot read history '{missing}'") and err.count("\n") == 1
    assert main(["report", str(missing)]) == 2
    assert "--guarantee is required" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert main(["replay", str(bad)]) == 2
    assert "is not JSON" in capsys.readouterr().err
    assert main(["run", "--all", "dlog-reader-offsets"]) == 2
    assert "either --all or target names" in capsys.readouterr().err
    assert main(["run", "--profile", "turbo", "--all"]) == 2
    assert "unknown harness profile 'turbo'; choose one of dev, ci, nightly" in (
        capsys.readouterr().err
    )
    assert main(["frobnicate"]) == 2
    assert main(["--help"]) == 0


def test_replay_json_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    replay_file = _replay_file(tmp_path, process_then_commit)
    assert main(["replay", str(replay_file), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "valid"


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib.metadata import version

    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"stream-harness {version('stream-harness')}\n"
