"""One engine, two systems under test: the engine's search drives a streaming job as it drives
the simulator (:mod:`harness.engine.system`, ``SparkJobSystem``).

No Spark here: ``run_job`` is replaced by a stand-in that plays each stream schedule on the
simulator (a produce is a produce, a crash of micro-batch ``b`` is a crash after ``3 + 2b``
calls), so the search loop, its plan, its drawn phase, its shrinking, its coverage and its
replay file are checked in a second against real histories and the real checker. The job's
own runs are checked in ``tests/test_spark_job*.py``.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness import CounterexampleFound, Crash, Guarantee, Produce, Run, Schedule, Status, simulate
from harness.catalogue.toys import dedup_transformer, rewind_on_restart
from harness.check.verdict import AnomalyKind
from harness.engine.explorer import explore_system
from harness.engine.system import Simulated, SystemUnderTest
from harness.faults.streams import (
    CrashHow,
    CrashPoint,
    CrashQuery,
    FailTask,
    ProduceRecords,
    RunBatches,
    StreamSchedule,
)
from harness.sim.topology import Topology
from harness.spark.streaming import jobsearch, variantsearch
from harness.spark.streaming.job import JobResult, SparkJob
from harness.spark.streaming.jobsearch import (
    JobReplay,
    SparkJobSystem,
    explore_job,
    planned_schedules,
)
from harness.spark.streaming.runner import FiredCrash, StreamResult, Variant
from harness.spark.streaming.variantsearch import VariantSystem, explore_variant

JOB = SparkJob("jobs/stand_in.py", inputs=("events",), outputs=("out",))
EO = Guarantee.EXACTLY_ONCE


def _played(processor: Callable[..., None], workdirs: list[str]) -> Callable[..., JobResult]:
    """A ``run_job`` that plays a stream schedule on the simulator with ``processor`` (each
    run's directory, relative to the search's, appended to ``workdirs``)."""

    def run_job(
        job: SparkJob, schedule: StreamSchedule, *, workdir: Path, spark: Any = None, **_: Any
    ) -> JobResult:
        workdirs.append(f"{workdir.parent.name}/{workdir.name}")
        return _play(processor, schedule)

    return run_job


def _play(processor: Callable[..., None], schedule: StreamSchedule) -> JobResult:
    """``schedule`` played on the simulator: a produce is a produce, a crash of micro-batch
    ``b`` a crash after ``3 + 2b`` calls, a run or a failed task four calls."""
    steps: list[Any] = []
    crashes = []
    for number, step in enumerate(schedule.steps):
        if isinstance(step, ProduceRecords):
            steps.append(Produce(count=step.count))
        elif isinstance(step, RunBatches | FailTask):
            steps.append(Run(calls=4))
        elif isinstance(step, CrashQuery):
            steps += [Run(calls=3 + 2 * step.batch), Crash()]
            crashes.append(FiredCrash(number, 0, step.point, step.how, step.batch))
    history = simulate(processor, Schedule(tuple(steps)))
    return JobResult(schedule, history, tuple(crashes), query_runs=1)


@pytest.fixture
def broken(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Each run of the job is ``rewind_on_restart``'s: every restart writes again."""
    workdirs: list[str] = []
    monkeypatch.setattr(jobsearch, "run_job", _played(rewind_on_restart, workdirs))
    return workdirs


@pytest.fixture
def correct(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Each run of the job is ``dedup_transformer``'s: exactly-once."""
    workdirs: list[str] = []
    monkeypatch.setattr(jobsearch, "run_job", _played(dedup_transformer, workdirs))
    return workdirs


def test_both_systems_are_the_engine_s_systems(tmp_path: Path) -> None:
    simulated: SystemUnderTest[Schedule] = Simulated(rewind_on_restart, Topology())
    job: SystemUnderTest[StreamSchedule] = SparkJobSystem(JOB, workdir=tmp_path)
    assert simulated.backend == "memory" and job.backend == "spark"
    assert job.name == JOB.app


@pytest.mark.usefixtures("broken")
def test_the_engine_finds_a_job_s_planned_counterexample_and_saves_its_replay_file(
    tmp_path: Path,
) -> None:
    with pytest.raises(CounterexampleFound) as caught:
        explore_system(
            SparkJobSystem(JOB, workdir=tmp_path / "w"),
            EO,
            max_examples=20,
            planned=20,
            failures_dir=tmp_path / "failures",
        )
    failure = caught.value.failure
    assert failure.schedule == planned_schedules()[0]  # the first planned crash: after-write
    assert failure.backend == "spark" and failure.processor == JOB.app
    assert AnomalyKind.DUPLICATE in {a.kind for a in failure.verdict.anomalies}
    assert failure.examples == 1 and dict(failure.coverage.fired) == {"after-write/raise": 1}
    assert "faults fired: after-write/raise x1" in failure.report()
    assert failure.replay_file is not None
    saved = json.loads(Path(failure.replay_file).read_text())
    assert saved["harness_spark_job_replay"] == 2 and saved["job"]["app"] == JOB.app
    replay = JobReplay.load(failure.replay_file)
    assert replay.schedule == failure.schedule and replay.guarantee is EO
    assert failure.replay_command == f"python -m harness replay {failure.replay_file}"


def test_explore_job_runs_the_plan_then_draws_and_says_what_fired(
    tmp_path: Path, correct: list[str]
) -> None:
    runs: list[int] = []
    explored = explore_job(
        JOB,
        EO,
        workdir=tmp_path,
        max_schedules=16,
        on_schedule=lambda number, result, verdict: runs.append(number),
    )
    assert explored.status is Status.VALID and explored.failure is None
    assert explored.schedules == 16 and explored.planned == 14 and runs == list(range(16))
    for point in CrashPoint:
        for how in CrashHow:
            assert explored.fired[f"{point.value}/{how.value}"] >= 2
    assert "16 schedules (14 planned)" in explored.coverage()
    assert correct == [f"{tmp_path.name}/schedule-{n}" for n in runs]


def test_a_drawn_job_counterexample_is_made_smaller_by_the_engine(
    tmp_path: Path, broken: list[str]
) -> None:
    explored = explore_job(
        JOB,
        EO,
        workdir=tmp_path / "w",
        plan=[],
        max_schedules=20,
        seed=3,
        failures_dir=tmp_path / "failures",
    )
    assert explored.verdict is not None and explored.failure is not None
    assert AnomalyKind.DUPLICATE in {a.kind for a in explored.verdict.anomalies}
    drawn = jobsearch.draw_schedule(random.Random(3), sigkill=True)
    assert drawn.steps == (ProduceRecords(2), CrashQuery(2, CrashPoint.BEFORE_WRITE))
    assert explored.schedules == 1 and explored.shrink_runs == 8  # the job's budget, spent
    assert broken[1:] == [f"shrink/{n}" for n in range(1, 9)]
    assert explored.failure.schedule.steps == (
        ProduceRecords(1),
        CrashQuery(0, CrashPoint.BEFORE_WRITE),
    )
    assert explored.replay_file is not None
    assert JobReplay.load(explored.replay_file).schedule == explored.failure.schedule
    reported = explored.reported()
    assert reported is not None and reported.schedule == explored.failure.schedule


def test_a_planned_counterexample_is_not_shrunk_nor_run_again(
    tmp_path: Path, broken: list[str]
) -> None:
    explored = explore_job(JOB, EO, workdir=tmp_path, max_schedules=5, sigkill=False)
    assert explored.verdict is not None and explored.schedules == 1
    assert explored.shrink_runs == 0
    assert broken == [f"{tmp_path.name}/schedule-0"]


def _variant_played(processor: Callable[..., None]) -> Callable[..., StreamResult]:
    """A ``run_stream`` that plays a stream schedule on the simulator with ``processor``."""

    def run_stream(
        variant: Variant, schedule: StreamSchedule, *, workdir: Path, **_: Any
    ) -> StreamResult:
        played = _play(processor, schedule)
        return StreamResult(variant, schedule, played.history, played.crashes, query_runs=1)

    return run_stream


def test_a_built_in_variant_is_searched_through_the_engine_s_door(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(variantsearch, "run_stream", _variant_played(rewind_on_restart))
    system = VariantSystem(Variant.FOREACH_BATCH_APPEND, workdir=tmp_path / "w")
    assert len(system.planned) == 8  # 2 points x 2 batches x 2 ways, no task nor resend
    assert all(
        step.point is not CrashPoint.AFTER_COMMIT
        for schedule in system.planned
        for step in schedule.steps
        if isinstance(step, CrashQuery)
    )
    with pytest.raises(CounterexampleFound) as caught:
        explore_variant(
            "foreach-batch-append", EO, workdir=tmp_path / "w", failures_dir=tmp_path / "f"
        )
    failure = caught.value.failure
    assert failure.processor == "variant:foreach-batch-append" and failure.backend == "spark"
    assert failure.replay_file is not None
    replay = JobReplay.load(failure.replay_file)
    assert replay.job is None and replay.variant is not None
    assert replay.variant["variant"] == "foreach-batch-append"
    again = jobsearch.replay_job(replay, workdir=tmp_path / "replay")  # the file names it
    assert again.verdict.status is Status.INVALID
    assert again.history.events == failure.history.events


def test_a_correct_variant_stand_in_holds_and_draws_only_what_variants_take(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(variantsearch, "run_stream", _variant_played(dedup_transformer))
    ran: list[StreamSchedule] = []
    system = VariantSystem(
        Variant.PARQUET, workdir=tmp_path, on_run=lambda n, result: ran.append(result.schedule)
    )
    done = explore_system(system, EO, max_examples=30, planned=30, failures_dir=None)
    assert done.examples == 30 and done.coverage.systematic == 8 and done.coverage.drawn == 22
    steps = [step for schedule in ran for step in schedule.steps]
    assert not any(isinstance(step, FailTask) for step in steps)
    assert not any(
        isinstance(step, CrashQuery) and step.point is CrashPoint.AFTER_COMMIT for step in steps
    )
    assert "30 schedules (8 planned, 22 drawn)" in done.summary()


def test_coverage_names_the_faults_a_system_s_runs_fired_and_only_then() -> None:
    from harness.search.coverage import Coverage

    fired = Coverage(systematic=14, drawn=2, fired={"after-write/raise": 3, "task/retried": 1})
    assert fired.summary() == (
        "16 schedules (14 planned, 2 drawn), faults fired: after-write/raise x3, task/retried x1"
    )
    assert fired.to_json()["fired"] == {"after-write/raise": 3, "task/retried": 1}
    assert "fired" not in Coverage(drawn=7).to_json()
    assert (
        Coverage(systematic=3).summary() == "3 schedules (3 planned, 0 drawn), faults fired: none"
    )
