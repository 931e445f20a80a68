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
from harness.catalogue.toys import commit_before_processing, dedup_transformer, rewind_on_restart
from harness.check.verdict import AnomalyKind
from harness.engine.explorer import explore_system
from harness.engine.system import Simulated, SystemUnderTest
from harness.errors import ConfigError
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


def test_a_planned_counterexample_whose_fault_matters_is_kept_as_planned(
    tmp_path: Path, broken: list[str]
) -> None:
    explored = explore_job(JOB, EO, workdir=tmp_path, max_schedules=5, sigkill=False)
    assert explored.verdict is not None and explored.schedules == 1
    assert explored.failure is not None
    assert explored.failure.schedule == planned_schedules()[0]
    # one run more, the schedule without its crash, which holds: the crash is kept
    assert explored.shrink_runs == 1
    assert broken == [f"{tmp_path.name}/schedule-0", "shrink/1"]


def forgets_every_record(ctx: Any) -> None:
    """A job's own bug, no fault needed: it commits every offset and writes nothing."""
    ctx.output("out")
    for record in ctx.read("in-0", ctx.offsets.get("in-0")):
        ctx.offsets.put("in-0", record.next)


def test_a_planned_counterexample_that_fails_without_its_fault_is_shown_without_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workdirs: list[str] = []
    monkeypatch.setattr(jobsearch, "run_job", _played(forgets_every_record, workdirs))
    explored = explore_job(JOB, EO, workdir=tmp_path, max_schedules=5, sigkill=False)
    assert explored.verdict is not None and explored.failure is not None
    assert AnomalyKind.LOST in {a.kind for a in explored.verdict.anomalies}
    first = planned_schedules()[0]
    assert any(isinstance(step, CrashQuery) for step in first.steps)
    assert explored.failure.schedule.steps == tuple(
        step for step in first.steps if isinstance(step, ProduceRecords | RunBatches)
    )
    assert workdirs == [f"{tmp_path.name}/schedule-0", "shrink/1"]


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
    assert "30 schedules (8 systematic, 22 drawn)" in done.summary()


def test_coverage_names_the_faults_a_system_s_runs_fired_and_only_then() -> None:
    from harness.search.coverage import Coverage

    fired = Coverage(systematic=14, drawn=2, fired={"after-write/raise": 3, "task/retried": 1})
    assert fired.summary() == (
        "16 schedules (14 systematic, 2 drawn), faults fired: after-write/raise x3, task/retried x1"
    )
    assert fired.to_json()["fired"] == {"after-write/raise": 3, "task/retried": 1}
    assert "fired" not in Coverage(drawn=7).to_json()
    assert (
        Coverage(systematic=3).summary()
        == "3 schedules (3 systematic, 0 drawn), faults fired: none"
    )


def _two_bugs(workdirs: list[str]) -> Callable[..., JobResult]:
    """A ``run_job`` with two bugs: a crash after the write duplicates (the rewinding toy's),
    any other crash loses records (the toy that commits before it processes)."""

    def run_job(
        job: SparkJob, schedule: StreamSchedule, *, workdir: Path, spark: Any = None, **_: Any
    ) -> JobResult:
        workdirs.append(f"{workdir.parent.name}/{workdir.name}")
        after_write = any(
            isinstance(step, CrashQuery) and step.point is CrashPoint.AFTER_WRITE
            for step in schedule.steps
        )
        return _play(rewind_on_restart if after_write else commit_before_processing, schedule)

    return run_job


def test_the_engine_searches_a_job_on_for_other_problems_with_max_problems(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workdirs: list[str] = []
    monkeypatch.setattr(jobsearch, "run_job", _two_bugs(workdirs))
    with pytest.raises(CounterexampleFound) as caught:
        jobsearch.explore_spark_job(
            JOB, EO, workdir=tmp_path / "w", max_problems=2, failures_dir=tmp_path / "f"
        )
    failures = caught.value.failures
    kinds = [failure.verdict.anomalies[0].kind for failure in failures]
    assert kinds == [AnomalyKind.DUPLICATE, AnomalyKind.LOST]
    plan = planned_schedules()
    # the second search resumes the plan: after-write of batch 1 shows the known duplicate,
    # before-write of batch 0 the loss; no planned schedule is run twice
    assert [failure.schedule for failure in failures] == [plan[0], plan[2]]
    # each planned failure is run once more without its crash (which holds): shrink/<n>
    assert workdirs == ["w/schedule-0", "shrink/1", "w/schedule-1", "w/schedule-2", "shrink/2"]
    assert failures[1].coverage.systematic == 3 and failures[1].coverage.reused == 1
    assert all(f.replay_file is not None and f.replay_file.exists() for f in failures)
    assert "2 distinct problems found" in str(caught.value)
    with pytest.raises(ConfigError, match="max_problems must be an integer >= 1"):
        explore_system(SparkJobSystem(JOB, workdir=tmp_path), EO, max_examples=1, max_problems=0)


def _door(tmp_path: Path, *more: str) -> list[str]:
    return [
        *("jobs/stand_in.py", "--guarantee", "exactly-once", "--input", "events"),
        *("--output", "out", "--workdir", str(tmp_path / "w")),
        *("--failures-dir", str(tmp_path / "failures"), *more),
    ]


@pytest.fixture
def no_jvm(monkeypatch: pytest.MonkeyPatch) -> None:
    """The door starts no session (its runs are the stand-in's)."""
    from harness.spark.streaming import job

    monkeypatch.setattr(job, "quiet_session", lambda: None)


def _printed(capsys: pytest.CaptureFixture[str], code: int) -> dict[str, Any]:
    """The door's ``--json``, checked against the envelope's schema and the exit code."""
    from test_report import _schema_errors

    from harness.report.schema import OUTPUT_SCHEMA

    printed: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert _schema_errors(printed, OUTPUT_SCHEMA, OUTPUT_SCHEMA, "output") == []
    assert printed["status"] == {0: "valid", 1: "invalid", 2: "unknown"}[code]
    return printed


@pytest.mark.usefixtures("no_jvm")
def test_the_spark_job_door_prints_every_problem_in_the_doors_json_shape(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from harness.cli import main
    from harness.report.schema import OUTPUT_FIELDS

    monkeypatch.setattr(jobsearch, "run_job", _two_bugs([]))
    code = main(["spark-job", *_door(tmp_path, "--max-problems", "2", "--json")])
    assert code == 1
    printed = _printed(capsys, code)
    assert set(OUTPUT_FIELDS["run"]) < set(printed)  # run's keys, and kafka's problems
    assert (
        printed["summary"] == "exactly-once does not hold for jobs/stand_in.py: 2 distinct problems"
    )
    problems = printed["problems"]
    assert [p["verdict"]["anomalies"][0]["kind"] for p in problems] == ["duplicate", "lost"]
    assert printed["schedule"] == problems[0]["schedule"] == printed["stream_schedule"]
    assert printed["backend"] == "spark" and printed["coverage"]["systematic"] == 1  # as kafka
    assert printed["tried"] == printed["coverage"]["summary"]
    for problem in problems:
        assert problem["replay_command"] == f"python -m harness replay {problem['replay_file']}"
        saved = JobReplay.load(problem["replay_file"])
        assert saved.schedule.to_json() == problem["schedule"]
    # the text: each problem's report, with the common doors' replay and report commands
    assert main(["spark-job", *_door(tmp_path / "text")]) == 1
    text = capsys.readouterr().out
    assert "stand_in.py (spark backend): INVALID" in text
    (saved,) = (tmp_path / "text" / "failures").iterdir()
    assert f"replay: python -m harness replay {saved}\n" in text
    assert f"report: python -m harness report {saved} --out " in text


@pytest.mark.usefixtures("no_jvm", "correct")
def test_the_spark_job_door_says_what_held_and_exits_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from harness.cli import main

    code = main(["spark-job", *_door(tmp_path, "--max-examples", "15", "--json")])
    assert code == 0
    printed = _printed(capsys, code)
    assert printed["verdict"] is None and printed["problems"] == []
    assert printed["examples"] == 15 and printed["coverage"]["drawn"] == 1
    assert printed["coverage"]["fired"]["after-commit/sigkill"] == 2
    assert "held for " in printed["summary"]
    assert "stand_in.py: 15 schedules (14 systematic, 1 drawn)" in printed["summary"]
    assert main(["spark-job", *_door(tmp_path, "--max-examples", "2")]) == 0
    assert "stand_in.py: 2 schedules (2 systematic, 0 drawn)" in capsys.readouterr().out


@pytest.mark.usefixtures("broken")
def test_the_fixture_s_explorer_raises_the_engine_s_counterexample(tmp_path: Path) -> None:
    explorer = jobsearch.JobExplorer(None, tmp_path)
    with pytest.raises(CounterexampleFound) as caught:
        explorer("jobs/stand_in.py", guarantee="exactly-once", inputs=("events",), outputs=("out",))
    assert caught.value.failure.schedule == planned_schedules()[0]
    assert isinstance(caught.value, AssertionError)  # a pytest failure, as harness_explore's
    (saved,) = (tmp_path / "failures").iterdir()
    assert f"replay: python -m harness replay {saved}" in str(caught.value)


def test_the_catalogue_names_the_four_built_in_variants_and_their_claims() -> None:
    from harness.catalogue.streams import STREAM_SUBJECTS, stream_subject

    assert [s.name for s in STREAM_SUBJECTS] == [v.value for v in Variant]
    for subject in STREAM_SUBJECTS:
        assert subject.guarantee is Variant(subject.name).guarantee  # each holds its claim
        assert subject.expected(subject.guarantee) == frozenset()
        assert stream_subject(subject.target) is subject
    append = stream_subject("variant:foreach-batch-append")
    assert append.expected(EO) == {AnomalyKind.DUPLICATE}
    with pytest.raises(ConfigError, match=r"'parkette' \(did you mean 'parquet'\?\)"):
        stream_subject("variant:parkette")


@pytest.mark.usefixtures("no_jvm")
def test_a_built_in_variant_is_reached_through_the_spark_job_door(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from harness.cli import main

    monkeypatch.setattr(variantsearch, "run_stream", _variant_played(rewind_on_restart))
    door = ["spark-job", "variant:foreach-batch-append", "--workdir", str(tmp_path / "w")]
    door += ["--failures-dir", str(tmp_path / "f"), "--max-examples", "3", "--json"]
    code = main(door)  # its own claim, at-least-once: the rewinding stand-in holds it
    printed = _printed(capsys, code)
    assert code == 0 and printed["guarantee"] == "at-least-once"
    assert printed["processor"] == "variant:foreach-batch-append" and printed["examples"] == 3
    code = main([*door, "--guarantee", "exactly-once"])
    printed = _printed(capsys, code)
    assert code == 1 and printed["problems"][0]["verdict"]["anomalies"][0]["kind"] == "duplicate"
    (saved,) = (tmp_path / "f").iterdir()
    variant = JobReplay.load(saved).variant
    assert variant is not None and variant["variant"] == "foreach-batch-append"
    assert printed["problems"][0]["replay_command"] == f"python -m harness replay {saved}"
    assert main(["spark-job", "variant:parkette"]) == 2
    assert "did you mean 'parquet'" in capsys.readouterr().err
    assert main(["spark-job", "variant:parquet", "--input", "e", "--", "x"]) == 2
    assert "--input, arguments after -- apply to a job only" in capsys.readouterr().err
    assert main(["spark-job", "job.py", "--guarantee", "exactly-once", "--output", "o"]) == 2
    assert "--input TOPIC is required for the job 'job.py'" in capsys.readouterr().err
