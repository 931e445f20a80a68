"""The engine end to end: toy processors explored, caught, shrunk, replayed, reproduced.

Every broken toy is caught with its expected anomaly on the memory backend by a search, and
its shrunk schedule fails it the same way on LevelDB while its correct twin passes that same
schedule on both backends; every correct toy passes a search on both backends.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest

import harness
from harness import (
    AnomalyKind,
    ConfigError,
    CounterexampleFound,
    Crash,
    Guarantee,
    Produce,
    Replay,
    Run,
    Schedule,
    Status,
    explore,
    replay,
    run_once,
    simulate,
)
from harness.catalogue import Subject
from harness.catalogue.pitfalls import PITFALLS
from harness.catalogue.toys import TOYS
from harness.check.verdict import LOG_KINDS
from harness.faults import ALL_FAULTS, Fault
from harness.faults.schedule import Step
from harness.history.io import write_jsonl, write_parquet

BROKEN = sorted(name for name, toy in TOYS.items() if toy.expected)
CORRECT = sorted(name for name, toy in TOYS.items() if not toy.expected)
BACKENDS = ("memory", "leveldb")


def found(toy: Subject, tmp_path: Path, **options: object) -> CounterexampleFound:
    with pytest.raises(CounterexampleFound) as caught:
        explore(
            toy.processor,
            guarantee=toy.guarantee,
            topology=toy.topology,
            faults=toy.needs,
            max_examples=1000,
            failures_dir=tmp_path,
            **options,  # type: ignore[arg-type]
        )
    return caught.value


def kinds(verdict: harness.Verdict) -> set[AnomalyKind]:
    return {anomaly.kind for anomaly in verdict.anomalies}


@pytest.mark.parametrize("name", BROKEN)
def test_a_broken_toy_is_caught_and_its_twin_passes_the_same_schedule(
    name: str, tmp_path: Path
) -> None:
    toy = TOYS[name]
    failure = found(toy, tmp_path).failure
    assert failure.verdict.status is Status.INVALID
    assert kinds(failure.verdict) & toy.expected, failure.verdict.summary()
    assert len(failure.schedule) <= 8, failure.schedule.describe()
    assert toy.twin is not None
    twin = TOYS[toy.twin]
    for backend in BACKENDS:
        _, verdict = run_once(
            toy.processor,
            failure.schedule,
            toy.guarantee,
            topology=toy.topology,
            backend=backend,  # type: ignore[arg-type]
        )
        assert kinds(verdict) == kinds(failure.verdict), (backend, verdict.summary())
        _, verdict = run_once(
            twin.processor,
            failure.schedule,
            toy.guarantee,
            topology=twin.topology,
            backend=backend,  # type: ignore[arg-type]
        )
        assert verdict.status is Status.VALID, (backend, verdict.summary())


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", CORRECT)
def test_a_correct_toy_passes_a_search(name: str, backend: str) -> None:
    toy = TOYS[name]
    result = explore(
        toy.processor,
        guarantee=toy.guarantee,
        topology=toy.topology,
        faults=toy.scope,
        backend=backend,  # type: ignore[arg-type]
        max_examples=150 if backend == "memory" else 20,
        failures_dir=None,
    )
    assert result.examples == (150 if backend == "memory" else 20)


def test_every_anomaly_and_every_fault_catches_some_broken_subject() -> None:
    broken = [s for s in (*TOYS.values(), *PITFALLS.values()) if not s.correct]
    # the log's own anomalies (LOG_KINDS) are no processor's doing: the reference log and the
    # doubles keep that contract; tests/test_jepsen_histories.py shows each caught and passed
    assert set().union(*(s.expected for s in broken)) == set(AnomalyKind) - LOG_KINDS
    needed = set().union(*(s.needs for s in broken))
    # a restart and a producer crash break nothing on their own: correct toys are explored
    # under them (ALL_FAULTS) and must stay valid
    assert needed == set(ALL_FAULTS) - {Fault.RESTART, Fault.PRODUCER_CRASH}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    ("name", "steps", "kind"),
    [
        ("off_by_one_resume", (Produce(0, 3), Run(5), Crash()), AnomalyKind.SKIP),
        ("rewind_on_restart", (Produce(0, 2), Run(8), Crash()), AnomalyKind.OFFSET_REGRESSION),
    ],
)
def test_skips_and_offset_regressions_are_reported_by_name(
    name: str, steps: tuple[Step, ...], kind: AnomalyKind, backend: str
) -> None:
    toy = TOYS[name]
    _, verdict = run_once(toy.processor, Schedule(steps), toy.guarantee, backend=backend)  # type: ignore[arg-type]
    assert kind in kinds(verdict), verdict.summary()


def test_commit_before_processing_shrinks_to_the_minimal_story(tmp_path: Path) -> None:
    toy = TOYS["commit_before_processing"]
    failure = found(toy, tmp_path).failure
    # write one record, read it and commit its offset, crash before the output; the drain
    # restarts the processor, which resumes after the lost record
    assert failure.schedule == Schedule((Produce(0, 1), Run(3), Crash()))
    for seed in range(4):
        shrunk = found(toy, tmp_path, seed=seed).failure.schedule
        assert len(shrunk) <= 3 + 3, shrunk.describe()


def test_the_report_names_verdict_schedule_seed_and_replay_command(tmp_path: Path) -> None:
    failure = found(TOYS["commit_before_processing"], tmp_path).failure
    report = failure.report().splitlines()
    assert report[0] == (
        "at-least-once does NOT hold for harness.catalogue.toys:commit_before_processing "
        "(memory backend): INVALID"
    )
    assert report[1] == "INVALID under at-least-once"
    assert any(line.startswith("  lost x1: records [r0]") for line in report)
    assert "  0. Produce(partition=0, count=1, ack=True)" in report
    assert f"schedule JSON: {failure.schedule.dumps()}" in report
    assert (
        f"seed: {failure.seed}  (explore(..., seed={failure.seed}) repeats this search)" in report
    )
    assert report[-2] == f"replay: python -m harness replay {failure.replay_file}"
    out = failure.replay_file.with_name(failure.replay_file.stem + "-report")
    assert report[-1] == f"report: python -m harness report {failure.replay_file} --out {out}"
    assert failure.replay_file is not None and failure.replay_file.parent == tmp_path


def test_the_printed_replay_command_reproduces_the_failure(tmp_path: Path) -> None:
    failure = found(TOYS["two_step_counter"], tmp_path).failure
    command = failure.replay_command.split()
    assert command[:4] == ["python", "-m", "harness", "replay"]
    result = subprocess.run(
        [sys.executable, *command[1:]], capture_output=True, text=True, check=False
    )
    assert result.returncode == 1, result.stderr
    assert "exactly-once for harness.catalogue.toys:two_step_counter (memory backend): INVALID" in (
        result.stdout
    )
    assert "count-mismatch" in result.stdout
    history, verdict = replay(failure.replay_file)  # type: ignore[arg-type]
    assert history == failure.history
    assert verdict == failure.verdict


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_same_seed_gives_byte_identical_history_files(backend: str, tmp_path: Path) -> None:
    toy = TOYS["unfenced_counter"]
    first = found(toy, tmp_path / "a").failure
    second = found(toy, tmp_path / "b").failure
    assert first.schedule == second.schedule
    assert first.verdict == second.verdict
    files = []
    for run in ("one", "two"):
        history = simulate(toy.processor, first.schedule, topology=toy.topology, backend=backend)  # type: ignore[arg-type]
        write_jsonl(history, tmp_path / f"{run}.jsonl")
        write_parquet(history, tmp_path / f"{run}.parquet")
        files.append(history)
    for suffix in ("jsonl", "parquet"):
        assert (tmp_path / f"one.{suffix}").read_bytes() == (
            tmp_path / f"two.{suffix}"
        ).read_bytes()
    memory = simulate(toy.processor, first.schedule, topology=toy.topology)
    assert memory.events == files[0].events


def test_a_guarantee_or_backend_that_does_not_exist_is_a_config_error() -> None:
    toy = TOYS["process_then_commit"]
    with pytest.raises(
        ConfigError, match=r"got 'at-most-once'; choose one of at-least-once, exactly-once$"
    ):
        explore(toy.processor, guarantee="at-most-once", failures_dir=None)
    with pytest.raises(ConfigError, match=r"got 'rocksdb'; choose one of memory, leveldb$"):
        explore(toy.processor, guarantee="at-least-once", backend="rocksdb", failures_dir=None)  # type: ignore[arg-type]


def reads_a_partition_that_does_not_exist(ctx: harness.Context) -> None:
    for _ in ctx.read("in-7"):
        pass


def test_a_processor_misusing_the_api_gets_the_config_error_not_a_verdict() -> None:
    with pytest.raises(ConfigError, match=r"unknown input partition 'in-7'; this topology's"):
        simulate(reads_a_partition_that_does_not_exist, Schedule((Run(2),)))


def test_replaying_a_file_that_is_not_a_replay_file_fails_in_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"steps": []}')
    with pytest.raises(ConfigError, match="is not a replay file"):
        replay(bad)
    result = subprocess.run(
        [sys.executable, "-m", "harness", "replay", str(tmp_path / "missing.json")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.startswith("error: cannot read replay file ")
    assert len(result.stderr.splitlines()) == 1


def test_a_spark_job_replay_file_given_to_a_processor_s_reader_says_which_doors_run_it(
    tmp_path: Path,
) -> None:
    """``Replay.load`` reads a processor's file only; ``replay()`` reads a job's too (its
    reader, here on a file that is not whole, says what is wrong with it)."""
    job_file = tmp_path / "fb_append-0123456789ab.json"
    job_file.write_text('{"harness_spark_job_replay": 2, "job": "job.py", "schedule": {}}')
    with pytest.raises(ConfigError, match=r"is a spark-job replay file.*harness\.replay\(FILE\)"):
        Replay.load(job_file)
    with pytest.raises(ConfigError, match=r"is not a whole spark-job replay file: 'app'"):
        replay(job_file)


def test_guarantees_are_values_of_one_enum() -> None:
    assert [g.value for g in Guarantee] == ["at-least-once", "exactly-once"]


def test_without_a_failures_dir_the_replay_command_carries_the_schedule(tmp_path: Path) -> None:
    toy = TOYS["commit_before_processing"]
    with pytest.raises(CounterexampleFound) as caught:
        explore(toy.processor, guarantee=toy.guarantee, faults=toy.needs, failures_dir=None)
    failure = caught.value.failure
    assert failure.replay_file is None
    command = shlex.split(failure.replay_command)
    assert command[:4] == ["python", "-m", "harness", "replay"]
    result = subprocess.run(
        [sys.executable, *command[1:]], capture_output=True, text=True, check=False, cwd=tmp_path
    )
    assert result.returncode == 1, result.stderr
    assert "lost x1: records [r0]" in result.stdout
    assert list(tmp_path.iterdir()) == []


SCRIPT = """
import harness

def broken(ctx):
    out = ctx.output("out")
    for record in ctx.read("in-0", ctx.offsets.get("in-0")):
        ctx.offsets.put("in-0", record.next)
        out.emit(record)
        out.commit()

if __name__ == "__main__":
    try:
        harness.explore(broken, guarantee="at-least-once", faults=["crash"], failures_dir=".")
    except harness.CounterexampleFound as exc:
        print(exc.failure.replay_command)
"""


def test_a_processor_defined_in_a_script_replays_from_its_file(tmp_path: Path) -> None:
    script = tmp_path / "my_processor.py"
    script.write_text(SCRIPT)
    printed = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, check=True, cwd=tmp_path
    ).stdout.strip()
    command = shlex.split(printed)
    result = subprocess.run(
        [sys.executable, *command[1:]], capture_output=True, text=True, check=False, cwd=tmp_path
    )
    assert result.returncode == 1, result.stderr
    assert "at-least-once for __main__:broken (memory backend): INVALID" in result.stdout
