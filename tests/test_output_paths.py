"""A bad output path is one ``error:`` line and exit 2, found before the work runs, with no
partial file left; a counterexample is always kept somewhere it can be found."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

import harness.engine.replay_file
from harness import CounterexampleFound, explore
from harness.catalogue.toys import commit_before_processing
from harness.check import Guarantee
from harness.cli import main
from harness.engine import Replay, run_once
from harness.errors import ConfigError
from harness.faults import Crash, Produce, Run, Schedule
from harness.history.io import write_history
from harness.sim.topology import Topology

BAD: dict[str, Callable[[Path], str]] = {
    "a NUL": lambda tmp: str(tmp / "a\0b"),
    "a lone surrogate": lambda tmp: str(tmp / "bad\udc80\ud800"),
    "a name too long": lambda tmp: str(tmp / ("x" * 300)),
    "under a file": lambda tmp: str(tmp / "file" / "below"),
}


def _one_error_line(capsys: pytest.CaptureFixture[str], *words: str) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: "), err
    assert "Traceback" not in err
    for word in words:
        assert word in err, err
    return err


def _files(tmp: Path) -> set[str]:
    return {str(p.relative_to(tmp)) for p in tmp.rglob("*")}


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "file").write_text("a file\n", "utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _replay_file(tmp: Path) -> Path:
    name = "harness.catalogue.toys:commit_before_processing"
    spec = Replay(
        name,
        Guarantee.AT_LEAST_ONCE,
        Topology(),
        "memory",
        Schedule((Produce(0, 1), Run(3), Crash())),
    )
    return spec.save(tmp / "replays")


def _history(tmp: Path) -> Path:
    schedule = Schedule((Produce(0, 1), Run(3), Crash()))
    history, _ = run_once(commit_before_processing, schedule, Guarantee.AT_LEAST_ONCE)
    path = tmp / "h.jsonl"
    write_history(history, path)
    return path


@pytest.mark.parametrize("bad", BAD)
def test_run_checks_failures_dir_and_markdown_before_anything_runs(
    bad: str, workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = BAD[bad](workdir)
    before = _files(workdir)
    # the processor does not even exist: the path is refused before it is looked for
    args = ["run", "nosuch_module:proc", "--guarantee", "at-least-once"]
    assert main([*args, "--failures-dir", path]) == 2
    _one_error_line(capsys, "--failures-dir")
    assert main(["run", "queue-reader", "--markdown", path]) == 2
    _one_error_line(capsys, "--markdown")
    assert _files(workdir) == before


@pytest.mark.parametrize("bad", BAD)
def test_report_check_and_replay_refuse_a_bad_output_before_the_work(
    bad: str, workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    replay_file, history = _replay_file(workdir), _history(workdir)
    path = BAD[bad](workdir)
    before = _files(workdir)
    assert main(["report", str(replay_file), "--out", path]) == 2
    _one_error_line(capsys, "--out")
    assert main(["check", str(history), "--guarantee", "at-least-once", "--out", path]) == 2
    _one_error_line(capsys, "--out")
    assert main(["replay", str(replay_file), "--history", path + ".jsonl"]) == 2
    _one_error_line(capsys, "--history")
    assert capsys.readouterr().out == ""  # no verdict printed: nothing ran
    assert _files(workdir) == before


def test_a_directory_where_a_file_is_wanted_and_the_reverse(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    replay_file, history = _replay_file(workdir), _history(workdir)
    assert main(["check", str(history), "--guarantee", "at-least-once", "--out", "replays"]) == 2
    _one_error_line(capsys, "it is a directory")
    assert main(["report", str(replay_file), "--out", "file"]) == 2
    _one_error_line(capsys, "it is a file, not a directory")
    assert main(["replay", str(replay_file), "--history", "h.txt"]) == 2
    _one_error_line(capsys, "must end in one of .jsonl, .parquet")


def test_outputs_that_can_be_written_are_written_whole(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    replay_file, history = _replay_file(workdir), _history(workdir)
    assert main(["replay", str(replay_file), "--history", "new/dir/h.parquet"]) == 1
    assert main(["check", str(history), "--guarantee", "at-least-once", "--out", "o/v.json"]) == 1
    assert {"new/dir/h.parquet", "o/v.json"} <= _files(workdir)
    assert not [name for name in _files(workdir) if ".tmp" in name]


def test_a_device_or_pipe_is_refused_not_replaced_by_a_file(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the atomic rename once replaced the node itself: `check --out /dev/null` run as root
    # left a regular file at /dev/null; a FIFO shows it without root
    history = _history(workdir)
    os.mkfifo(workdir / "fifo")
    assert main(["check", str(history), "--guarantee", "at-least-once", "--out", "fifo"]) == 2
    err = _one_error_line(capsys, "'fifo'", "not a regular file")
    assert "PosixPath" not in err
    assert stat.S_ISFIFO(os.stat(workdir / "fifo").st_mode)


def test_a_link_to_a_file_is_written_through_and_stays_a_link(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    history = _history(workdir)
    (workdir / "real.json").write_text("old\n", "utf-8")
    (workdir / "link.json").symlink_to("real.json")
    assert main(["check", str(history), "--guarantee", "at-least-once", "--out", "link.json"]) == 1
    assert (workdir / "link.json").is_symlink()
    assert '"status": "invalid"' in (workdir / "real.json").read_text("utf-8")


def test_explore_refuses_an_unusable_failures_dir_before_the_search(workdir: Path) -> None:
    def never(ctx: object) -> None:
        raise AssertionError("the search ran")

    for bad in BAD.values():
        with pytest.raises(ConfigError, match="the failures directory"):
            explore(never, guarantee="at-least-once", failures_dir=bad(workdir))


def test_a_counterexample_is_kept_in_the_fallback_directory_when_its_own_is_gone(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fallback = workdir / "fallback"
    monkeypatch.setattr(harness.engine.replay_file, "FALLBACK_FAILURES_DIR", fallback)
    target = workdir / "failures"

    def breaks_its_failures_dir(ctx: object) -> None:
        if not target.exists():
            target.write_text("now a file\n", "utf-8")  # after explore checked it
        commit_before_processing(ctx)  # type: ignore[arg-type]

    breaks_its_failures_dir.__qualname__ = "commit_before_processing"
    with pytest.raises(CounterexampleFound) as found:
        explore(breaks_its_failures_dir, guarantee="at-least-once", failures_dir=target)
    failure = found.value.failure
    assert failure.replay_file is not None and failure.replay_file.parent == fallback
    assert f"saved in {fallback} instead" in str(found.value)
    assert f"replay: python -m harness replay {failure.replay_file}" in str(found.value)


def test_a_processor_that_changes_directory_does_not_move_the_counterexample(
    workdir: Path,
) -> None:
    elsewhere = workdir / "elsewhere"
    elsewhere.mkdir()

    def wanders(ctx: object) -> None:
        os.chdir(elsewhere)
        commit_before_processing(ctx)  # type: ignore[arg-type]

    wanders.__qualname__ = "commit_before_processing"
    try:
        with pytest.raises(CounterexampleFound) as found:
            explore(wanders, guarantee="at-least-once", failures_dir="failures")
    finally:
        os.chdir(workdir)
    failure = found.value.failure
    # the path the report gives leads to the file from where the search was started
    assert failure.replay_file is not None and failure.replay_file.parts[0] == "failures"
    assert (workdir / failure.replay_file).is_file()
    assert not (elsewhere / "failures").exists()
