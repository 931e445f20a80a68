"""``python -m harness generate``: histories of any size with planted anomalies, without Spark,
that the checkers then judge as it says; long reads of a history tell a progress meter."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_cli import _Terminal, terminal  # noqa: F401 (the fixture)

from harness._progress import Amount, metering
from harness.cli import main
from harness.history.io import dumps_jsonl, read_history


def _generate(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert main(["generate", *argv, "--json"]) == 0
    printed: dict[str, Any] = json.loads(capsys.readouterr().out)
    return printed


def _check(capsys: pytest.CaptureFixture[str], path: Path, guarantee: str) -> dict[str, Any]:
    main(["check", str(path), "--guarantee", guarantee, "--json"])
    printed: dict[str, Any] = json.loads(capsys.readouterr().out)
    return printed


@pytest.mark.parametrize("suffix", [".parquet", ".jsonl"])
def test_a_generated_history_gets_the_verdict_it_announces(
    suffix: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / f"h{suffix}"
    plants = ["--plant", "lost=2", "--plant", "duplicate=1", "--plant", "count-mismatch=2"]
    made = _generate(capsys, str(path), "--records", "3000", *plants)
    assert "pyspark" not in sys.modules  # pyarrow only
    assert made["command"] == "generate" and made["events"] > 5 * 3000
    assert sorted(made["planted"]) == ["count-mismatch", "duplicate", "lost"]
    for guarantee, answer in made["expected"].items():
        verdict = _check(capsys, path, guarantee)["verdict"]
        assert verdict["status"] == answer["status"]
        counts = {a["kind"]: a["count"] for a in verdict["anomalies"]}
        assert counts == answer["anomalies"], guarantee
        tolerated = {a["kind"]: a["count"] for a in verdict["tolerated"]}
        assert tolerated == answer["tolerated"], guarantee
    if suffix == ".jsonl":  # the very file write_jsonl writes for the same history
        assert path.read_text(encoding="utf-8") == dumps_jsonl(read_history(path))


def test_a_clean_history_is_valid_and_a_bad_plant_names_the_kind_meant(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    made = _generate(capsys, str(tmp_path / "clean.parquet"), "--records", "200")
    assert made["planted"] == {}
    assert {a["status"] for a in made["expected"].values()} == {"valid"}
    assert _check(capsys, tmp_path / "clean.parquet", "exactly-once")["status"] == "valid"
    assert main(["generate", str(tmp_path / "x.parquet"), "--plant", "lots=1"]) == 2
    assert "unknown kind 'lots' (did you mean 'lost'?)" in capsys.readouterr().err
    assert main(["generate", str(tmp_path / "x.csv")]) == 2
    assert not (tmp_path / "x.parquet").exists()
    capsys.readouterr()
    nested = tmp_path / "new" / "dir" / "h.jsonl"  # missing directories are made
    assert _generate(capsys, str(nested), "--records", "100")["path"] == str(nested)
    assert read_history(nested).meta.run_id == "generated"
    assert [p.name for p in nested.parent.iterdir()] == ["h.jsonl"]  # no temporary left


@pytest.mark.parametrize("suffix", [".parquet", ".jsonl"])
def test_reading_a_large_history_tells_the_meter_how_far_it_got(
    suffix: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / f"big{suffix}"
    made = _generate(capsys, str(path), "--records", "30000")
    seen: list[Amount] = []
    with metering(seen.append):
        history = read_history(path)
    reading = [a for a in seen if a.what == "reading the history"]
    assert len(reading) >= 2  # during the read, not once at its end
    assert [a.done for a in reading] == sorted(a.done for a in reading)
    assert reading[-1].done <= len(history.events) == made["events"]
    assert reading[-1].total in (None, made["events"])


def test_report_on_a_large_history_shows_its_progress(
    terminal: Callable[[], tuple[Any, Any]],  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = tmp_path / "big.parquet"
    _generate(capsys, str(path), "--records", "30000", "--plant", "lost=1")
    _, err = terminal()
    assert main(["report", str(path), "--guarantee", "at-least-once"]) == 1
    drawn = err.getvalue()
    assert "reading the history" in drawn and "events" in drawn
    assert "checking 150," in drawn  # then the check, with the size it works on
