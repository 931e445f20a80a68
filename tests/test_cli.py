"""The command line's check, report and replay commands: outputs, files and exit codes."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness.catalogue.toys import commit_before_processing, process_then_commit
from harness.check import Guarantee
from harness.cli import main
from harness.engine import Replay, run_once
from harness.faults import Crash, Produce, Run, Schedule
from harness.history.io import write_history
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
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
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
    assert "invalid choice: 'turbo'; choose from 'dev', 'ci', 'nightly'" in (
        capsys.readouterr().err
    )
    monkeypatch.setenv("HARNESS_PROFILE", "turbo")  # the environment's, checked as strictly
    assert main(["run", "--all"]) == 2
    assert (
        "HARNESS_PROFILE='turbo' (environment): unknown profile, got 'turbo'; choose one of "
        "dev, ci, nightly" in capsys.readouterr().err
    )
    monkeypatch.delenv("HARNESS_PROFILE")
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


def test_unknown_topology_keys_are_errors_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    processor = [
        "run",
        "harness.catalogue.toys:process_then_commit",
        "--guarantee",
        "at-least-once",
    ]
    assert main([*processor, "--topology", '{"partitons": 5}']) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --topology: unknown topology key 'partitons'; the keys are ")
    assert err.count("\n") == 1
    assert main([*processor, "--topology", "[5]"]) == 2
    assert "--topology must be a JSON object" in capsys.readouterr().err

    replay_file = _replay_file(tmp_path, process_then_commit)
    data = json.loads(replay_file.read_text())
    data["topology"]["segment_record"] = 4
    replay_file.write_text(json.dumps(data))
    assert main(["replay", str(replay_file)]) == 2
    assert "unknown topology key 'segment_record'" in capsys.readouterr().err
    del data["topology"]["segment_record"], data["topology"]["keys"]
    replay_file.write_text(json.dumps(data))
    assert main(["replay", str(replay_file)]) == 2
    err = capsys.readouterr().err
    assert "the topology has no 'keys' key" in err and "KeyError" not in err


def test_a_closed_stdout_ends_the_command_quietly(tmp_path: Path) -> None:
    """`python -m harness report FILE | head -1`: the reader goes away, no traceback."""
    replay_file = _replay_file(tmp_path, commit_before_processing)
    read_end, write_end = os.pipe()
    os.close(read_end)  # every write fails with EPIPE, as after `head -1` has exited
    try:
        result = subprocess.run(
            [sys.executable, "-m", "harness", "report", str(replay_file)],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
        )
    finally:
        os.close(write_end)
    assert result.stderr == ""
    assert result.returncode == 141  # 128 + SIGPIPE, as a shell reports it


def test_a_missing_package_is_one_line_naming_it_and_the_fix() -> None:
    """A broken install (a core dependency gone): one line naming it and the fix, exit 2."""
    missing, command, fix = "greenlet", "kafka", "pip install --force-reinstall stream-harness"
    code = (
        f"import sys; sys.modules[{missing!r}] = None; from harness.cli import main; "
        f"sys.exit(main([{command!r}, '--help']))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False
    )
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert f"needs the package {missing!r}" in lines[0] and fix in lines[0]


def test_a_failure_spells_its_seed_as_the_command_line_takes_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    argv = ["run", "--guarantee", "at-least-once", "--faults", "crash", "--seed", "7"]
    assert main([*argv, "harness.catalogue.toys:commit_before_processing"]) == 1
    out = capsys.readouterr().out
    assert "seed: 7  (--seed 7 repeats this search)" in out.splitlines()
    assert "explore(" not in out


SPARK_FREE = (
    "import sys; from harness.cli import main; code = main(sys.argv[1:]); "
    "print(code, sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'py4j')))"
)


def test_check_spark_s_error_line_reaches_a_file_that_holds_stdout_and_stderr_alike(
    tmp_path: Path,
) -> None:
    """The command's stderr goes through the JVM notice's filter (a pipe and a thread) while
    it checks; an error found before any JVM starts (here: no ``--guarantee``) is printed
    there, and must be passed on before the process exits, wherever stderr goes."""
    pytest.importorskip("pyarrow")
    history, _ = run_once(commit_before_processing, BUGGY, "at-least-once")
    target = tmp_path / "run.parquet"
    write_history(history, target)
    output = tmp_path / "output.txt"
    with output.open("wb") as both:
        code = subprocess.run(
            [sys.executable, "-m", "harness", "check-spark", str(target)],
            stdout=both,
            stderr=both,
            check=False,
        ).returncode
    lines = output.read_text(encoding="utf-8").splitlines()
    assert code == 2
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    assert "--guarantee is required" in lines[0] or "pyspark" in lines[0]


@pytest.mark.parametrize("kind", ["missing", "jsonl", "empty-dir"])
def test_check_spark_rejects_a_bad_history_before_any_jvm_starts(kind: str, tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    if kind == "missing":
        target, said = tmp_path / "nope.parquet", "no such file or directory"
    elif kind == "jsonl":
        history, _ = run_once(commit_before_processing, BUGGY, "at-least-once")
        target = tmp_path / "run.jsonl"
        write_history(history, target)
        said = f"it looks like a JSONL history: check it with `python -m harness check {target}"
    else:
        target, said = tmp_path, "the directory holds no .parquet file"
    result = subprocess.run(
        [sys.executable, "-c", SPARK_FREE, "check-spark", str(target)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout == "2 []\n"  # exit code 2, and pyspark never imported
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1
    assert said in result.stderr


# -- one JSON envelope for every command's --json -------------------------------------------

STATUS_OF_EXIT = {0: "valid", 1: "invalid", 2: "unknown"}


def _output(capsys: pytest.CaptureFixture[str], argv: list[str]) -> dict[str, Any]:
    """Run ``argv``, check its JSON against the envelope's schema and its status against the
    exit code, and return it."""
    from test_report import _schema_errors

    from harness.report.schema import OUTPUT_SCHEMA

    code = main(argv)
    printed = json.loads(capsys.readouterr().out)
    assert _schema_errors(printed, OUTPUT_SCHEMA, OUTPUT_SCHEMA, "output") == []
    assert list(printed)[:4] == ["harness_output", "command", "status", "summary"]
    assert printed["status"] == STATUS_OF_EXIT[code]
    return dict(printed)


def test_every_command_prints_one_versioned_envelope(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    processor = ["run", "--examples", "20", "--guarantee", "at-least-once", "--json"]
    held = _output(capsys, [*processor, "harness.catalogue.toys:process_then_commit"])
    assert (held["command"], held["status"], held["verdict"]) == ("run", "valid", None)
    found = _output(
        capsys, [*processor, "--faults", "crash", "harness.catalogue.toys:commit_before_processing"]
    )
    assert (found["command"], found["status"]) == ("run", "invalid")
    assert found["verdict"]["status"] == "invalid" and found["schedule"]["steps"]
    assert found["replay_command"].startswith("python -m harness replay ")

    replayed = _output(
        capsys, ["replay", str(_replay_file(tmp_path, commit_before_processing)), "--json"]
    )
    assert (replayed["command"], replayed["status"]) == ("replay", "invalid")

    history, _ = run_once(process_then_commit, Schedule(BUGGY.steps, drain=False), "exactly-once")
    write_history(history, tmp_path / "unsettled.jsonl")
    checked = _output(
        capsys,
        ["check", str(tmp_path / "unsettled.jsonl"), "--guarantee", "exactly-once", "--json"],
    )
    assert (checked["command"], checked["status"]) == ("check", "unknown")

    matrix = _output(
        capsys, ["run", "dlog-reader-offsets:reader-with-offsets", "--examples", "5", "--json"]
    )
    assert (matrix["command"], matrix["status"]) == ("matrix", "valid")
    assert matrix["totals"] == {"caught": 0, "buggy": 0, "passed": 1, "correct": 1}
    listed = _output(capsys, ["list", "--json"])
    assert (listed["command"], listed["status"]) == ("list", "valid")


def test_the_envelope_takes_exactly_its_commands_keys() -> None:
    from harness.errors import ConfigError
    from harness.report.json_report import output_json

    with pytest.raises(ConfigError, match=r"the check output takes the keys \['guarantee'"):
        output_json("check", "valid", "x", guarantee="at-least-once")
    with pytest.raises(ConfigError, match="unknown command 'chek'"):
        output_json("chek", "valid", "x")


def test_the_output_schema_file_is_the_schema_constant() -> None:
    from harness.report.schema import OUTPUT_SCHEMA

    path = Path(__file__).resolve().parent.parent / "harness" / "report" / "output.schema.json"
    assert json.loads(path.read_text(encoding="utf-8")) == OUTPUT_SCHEMA


# -- live progress and colour: on terminals only ---------------------------------------------


class _Terminal(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


FIND_BUG = [
    "run",
    "harness.catalogue.toys:commit_before_processing",
    "--guarantee",
    "at-least-once",
    "--faults",
    "crash",
    "--examples",
    "30",
]


@pytest.fixture
def terminal(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Callable[[], tuple[Any, Any]]:
    """Call it in the test (pytest's capture resets sys.stdout after fixtures) to make stdout
    and stderr a terminal, outside CI, colour allowed."""
    monkeypatch.chdir(tmp_path)
    for name in ("CI", "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    monkeypatch.setenv("COLUMNS", "100")  # rich's width for a stream it cannot measure

    def use() -> tuple[Any, Any]:
        out, err = _Terminal(), _Terminal()
        monkeypatch.setattr(sys, "stdout", out)
        monkeypatch.setattr(sys, "stderr", err)
        return out, err

    return use


def test_a_terminal_gets_live_progress_and_colour(terminal: Callable[[], tuple[Any, Any]]) -> None:
    out, err = terminal()
    assert main(FIND_BUG) == 1
    drawn = err.getvalue()
    for said in (
        "explore commit_before_processing",
        "/30 schedules",
        "failing",
    ):
        assert said in drawn, said
    assert "ETA" in drawn and "\x1b[2K" in drawn  # a live line, redrawn in place
    assert "\x1b[1;31mINVALID\x1b[0m under at-least-once" in out.getvalue()
    assert "\x1b[35mlost\x1b[0m x1" in out.getvalue()


def test_the_live_line_fits_80_columns_by_cutting_the_name_not_the_clocks(
    terminal: Callable[[], tuple[Any, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    import re

    monkeypatch.setenv("COLUMNS", "80")
    _, err = terminal()
    assert main(FIND_BUG) == 1
    lines = [re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", line) for line in err.getvalue().split("\r")]
    drawn = [line.strip() for line in lines if "explore" in line]
    assert drawn
    for line in drawn:
        assert len(line) <= 80, line
        assert re.search(r"\d\d:\d\d ETA (\d\d:\d\d|-+:--)", line), line  # whole clocks
        name = re.findall(r"explore (\S+)", line)[0]
        whole = "commit_before_processing"
        assert name == whole or (name.endswith("…") and whole.startswith(name[:-1])), line
    assert any(re.findall(r"explore (\S+…)", line) for line in drawn)  # cut when it must be


def test_the_live_line_is_taken_down_when_its_block_ends_even_by_an_error(
    terminal: Callable[[], tuple[Any, Any]],
) -> None:
    from harness.report.live import LiveProgress

    _, err = terminal()
    with pytest.raises(KeyError), LiveProgress("work", 3) as live:
        live.step(completed=1)
        raise KeyError("the work failed")
    drawn = err.getvalue()
    assert "1/3 schedules" in drawn
    live.log("after the block")
    assert err.getvalue() == drawn + "after the block\n"  # plain: no live line to draw above


@pytest.mark.parametrize(
    ("env", "flag"), [({"CI": "true"}, None), ({}, "--json"), ({"TERM": "dumb"}, None)]
)
def test_no_live_progress_in_ci_under_json_or_on_a_dumb_terminal(
    terminal: Callable[[], tuple[Any, Any]],
    monkeypatch: pytest.MonkeyPatch,
    env: dict[str, str],
    flag: str | None,
) -> None:
    out, err = terminal()
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert main(FIND_BUG + ([flag] if flag else [])) == 1
    assert err.getvalue() == ""
    if flag == "--json":
        assert json.loads(out.getvalue())["status"] == "invalid"


def test_no_colour_with_no_color_or_without_a_terminal(
    terminal: Callable[[], tuple[Any, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    out, err = terminal()
    monkeypatch.setenv("NO_COLOR", "1")
    assert main(FIND_BUG) == 1
    assert "does NOT hold" in out.getvalue() and "\x1b[" not in out.getvalue()
    assert "/30 schedules" in err.getvalue()  # progress stays, without colour
    plain = io.StringIO()
    monkeypatch.delenv("NO_COLOR")
    monkeypatch.setattr(sys, "stdout", plain)
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert main(FIND_BUG) == 1
    assert "does NOT hold" in plain.getvalue() and "\x1b[" not in plain.getvalue()


def test_the_matrix_shows_its_cells_live(terminal: Callable[[], tuple[Any, Any]]) -> None:
    out, err = terminal()
    assert main(["run", "dlog-reader-offsets:reader-with-offsets", "--examples", "10"]) == 0
    drawn = err.getvalue()
    assert "matrix" in drawn and "/1 cells" in drawn and "schedules" in drawn
    assert "[1/1] dlog-reader-offsets reader-with-offsets (memory): ok" in drawn
    assert "1/1 correct passed" in out.getvalue()


def test_the_matrix_table_fits_100_columns() -> None:
    from harness.catalogue.seeds import SCENARIOS
    from harness.check import Status
    from harness.cli.matrix import VariantResult, render_table

    results = [  # every scenario variant on the wider backend name, with its widest figures
        VariantResult(
            scenario=s.name,
            variant=v.name,
            backend="leveldb",
            correct=v.correct,
            guarantee=s.guarantee,
            expected=v.expected,
            needs=v.needs,
            statuses=(Status.VALID,) if v.correct else (Status.INVALID, Status.UNKNOWN),
            found=v.expected,
            detect_seconds=() if v.correct else (123.456,),
            shrunk_steps=() if v.correct else (30,),
            examples=1000,
            seconds=999.0,
        )
        for s in SCENARIOS.values()
        for v in s.variants
    ]
    table = render_table(results).splitlines()
    assert max(len(line) for line in table) <= 100, max(table, key=len)
    assert table[0].split() == [
        "variant",
        "backend",
        "expected",
        "found",
        "detect",
        "s",
        "steps",
        "ok",
    ]
    assert f"{results[0].scenario} ({results[0].guarantee.value})" in table


def test_the_jvms_incubator_notice_is_left_out_and_the_rest_passed_on() -> None:
    from harness.cli.check_spark import NoticeFilter, filter_notice

    chunks = [
        b"WARNING: Using incub",  # the notice, cut across reads
        b"ator modules: jdk.incubator.vector\nSLF4J: a line\n\rprogress 1/3",
        b"\rprogress 2/3\nWARNING: something else\nlast words",
    ]
    notice = NoticeFilter()
    passed = [notice.feed(chunk) for chunk in chunks] + [notice.end()]
    assert passed == [
        b"",  # held: it may be the notice
        b"SLF4J: a line\n\rprogress 1/3",  # a partial line goes on at once
        b"\rprogress 2/3\nWARNING: something else\nlast words",
        b"",
    ]
    # the same through file descriptors, as the JVM's stderr goes
    read_end, write_end = os.pipe()
    os.write(write_end, b"".join(chunks))
    os.close(write_end)
    out_read, out_write = os.pipe()
    try:
        filter_notice(read_end, out_write)
    finally:
        os.close(read_end)
        os.close(out_write)
    with os.fdopen(out_read, "rb") as out:
        assert out.read() == b"".join(passed)
