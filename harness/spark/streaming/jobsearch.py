"""Searching an unchanged Spark job's crash schedules: planned first, then drawn.

:func:`planned_schedules` lists, for a small workload, one schedule per crash point of every
micro-batch: for each way of dying (``RAISE`` in this process, ``SIGKILL`` of a child driver),
each point (``before-write``, ``after-write``, ``after-commit``) and each batch of the first
run, ``produce, crash at (batch, point, how), produce`` (the last produce is input arriving
while the job is down), then the drain. :func:`explore_job` runs that plan, then schedules
drawn from a seeded generator (:func:`draw_schedule`: more produce, run and crash steps,
at most one SIGKILL each), judges each history with the local checker and stops at the first
counterexample, which it saves as a replay file (:class:`JobReplay`). The
:class:`JobExploration` says what was tried: the crash points that fired, by point and way,
against those planned. The planned schedules are already minimal (one crash);
a drawn counterexample is made smaller greedily with a few more runs. No pyspark on import.
"""

from __future__ import annotations

import hashlib
import json
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, final

from harness.check.verdict import Guarantee, Status, Verdict
from harness.errors import ConfigError
from harness.faults.streams import (
    CrashHow,
    CrashPoint,
    CrashQuery,
    ProduceRecords,
    RunBatches,
    StreamSchedule,
    StreamStep,
)
from harness.spark.streaming.job import JobResult, SparkJob, run_job

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "JOB_REPLAY_VERSION",
    "JobExploration",
    "JobExplorer",
    "JobReplay",
    "draw_schedule",
    "explore_job",
    "planned_schedules",
]

JOB_REPLAY_VERSION: Final = 1
POINTS: Final = (CrashPoint.AFTER_WRITE, CrashPoint.BEFORE_WRITE, CrashPoint.AFTER_COMMIT)
"""The points in the order the plan tries them: the classic duplicate window first."""


def planned_schedules(
    *,
    batches: int = 2,
    records: int = 4,
    logs: int = 1,
    hows: Sequence[CrashHow] = (CrashHow.RAISE, CrashHow.SIGKILL),
    points: Sequence[CrashPoint] = POINTS,
) -> list[StreamSchedule]:
    """Every single crash at every point of ``batches`` micro-batches (module docstring):
    ``records`` records spread over ``logs`` input partitions first, two more after the
    crash. In-process crashes come first (they cost a query start, a SIGKILL a JVM)."""
    if type(batches) is not int or batches < 1 or type(records) is not int or records < 1:
        raise ConfigError(
            f"batches and records must be integers >= 1, got {batches!r}, {records!r}"
        )
    produce = [
        ProduceRecords(count=n, log=i) for i, n in enumerate(_spread(records, max(1, logs))) if n
    ]
    plan = []
    for how in hows:
        for point in points:
            for batch in range(batches):
                crash = CrashQuery(batch=batch, point=point, how=how)
                steps: list[StreamStep] = [*produce, crash, ProduceRecords(count=2)]
                plan.append(StreamSchedule(steps=tuple(steps)))
    return plan


def _spread(total: int, parts: int) -> list[int]:
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def draw_schedule(rng: random.Random, *, logs: int = 1, sigkill: bool = True) -> StreamSchedule:
    """A drawn schedule: a produce, a crash, then up to three produce / run / crash steps;
    at most one SIGKILL (each costs a JVM)."""
    kills = 0

    def crash() -> CrashQuery:
        nonlocal kills
        how = CrashHow.RAISE
        if sigkill and kills == 0 and rng.random() < 0.25:
            how, kills = CrashHow.SIGKILL, 1
        return CrashQuery(batch=rng.randrange(3), point=rng.choice(POINTS), how=how)

    def produce() -> ProduceRecords:
        return ProduceRecords(count=rng.randint(1, 6), log=rng.randrange(logs))

    steps: list[StreamStep] = [produce(), crash()]
    for _ in range(rng.randrange(4)):
        kind = rng.randrange(3)
        steps.append(
            produce() if kind == 0 else RunBatches(rng.randint(1, 2)) if kind == 1 else crash()
        )
    return StreamSchedule(steps=tuple(steps))


@final
@dataclass(frozen=True, slots=True)
class JobReplay:
    """A failing schedule of a job, saved: what ``spark-job --replay FILE`` runs again."""

    app: str
    guarantee: Guarantee
    schedule: StreamSchedule
    summary: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "harness_spark_job_replay": JOB_REPLAY_VERSION,
            "app": self.app,
            "guarantee": self.guarantee.value,
            "schedule": self.schedule.to_json(),
            "verdict": self.summary,
        }

    def save(self, directory: str | Path) -> Path:
        folder = Path(directory)
        folder.mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha1(self.schedule.dumps().encode()).hexdigest()[:10]
        name = f"spark-job-{Path(self.app.split(':')[0]).stem}-{digest}.json"
        path = folder / name
        path.write_text(json.dumps(self.to_json(), indent=2) + "\n", encoding="utf-8")
        return path

    @classmethod
    def load(cls, path: str | Path) -> JobReplay:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot read replay file {str(path)!r}: {exc}") from None
        if not isinstance(data, dict) or data.get("harness_spark_job_replay") != JOB_REPLAY_VERSION:
            raise ConfigError(
                f"{str(path)!r} is not a spark-job replay file (no harness_spark_job_replay: "
                f"{JOB_REPLAY_VERSION}); pass a file that spark-job saved"
            )
        return cls(
            app=str(data["app"]),
            guarantee=Guarantee(data["guarantee"]),
            schedule=StreamSchedule.from_json(data["schedule"]),
            summary=str(data.get("verdict", "")),
        )


@final
@dataclass
class JobExploration:
    """What :func:`explore_job` tried and found."""

    guarantee: Guarantee
    schedules: int = 0
    planned: int = 0
    fired: dict[str, int] = field(default_factory=dict)
    """``"<point>/<how>"`` -> crashes that fired there."""
    seconds: float = 0.0
    failure: JobResult | None = None
    verdict: Verdict | None = None
    replay_file: Path | None = None
    first_failure_s: float | None = None
    shrink_runs: int = 0
    """Runs spent making a drawn counterexample smaller."""

    @property
    def status(self) -> Status:
        return Status.VALID if self.verdict is None else self.verdict.status

    def coverage(self) -> str:
        reached = ", ".join(f"{k} x{v}" for k, v in sorted(self.fired.items())) or "none"
        return (
            f"{self.schedules} schedules ({self.planned} planned), crashes fired: {reached}; "
            f"{self.seconds:.0f}s"
            + (f"; shrunk in {self.shrink_runs} runs" if self.shrink_runs else "")
        )


def explore_job(
    job: SparkJob,
    guarantee: Guarantee | str,
    *,
    workdir: str | Path,
    max_schedules: int = 20,
    plan: Sequence[StreamSchedule] | None = None,
    seed: int = 0,
    sigkill: bool = True,
    failures_dir: str | Path | None = None,
    spark: SparkSession | None = None,
    on_schedule: Callable[[int, JobResult, Verdict], None] | None = None,
    shrink_runs: int = 8,
) -> JobExploration:
    """Run the planned schedules (default :func:`planned_schedules` for ``job``), then drawn
    ones, up to ``max_schedules`` in all; stop at the first history that is not VALID
    (INVALID, or UNKNOWN: a run that could not be judged never passes). A drawn
    counterexample is made smaller with at most ``shrink_runs`` more runs (:func:`_shrink`)."""
    from harness.check.local import check

    wanted = Guarantee(guarantee)
    if plan is None:
        hows = (CrashHow.RAISE, CrashHow.SIGKILL) if sigkill else (CrashHow.RAISE,)
        plan = planned_schedules(logs=len(job.logs()), hows=hows)
    explored = JobExploration(guarantee=wanted, planned=min(len(plan), max_schedules))
    rng = random.Random(seed)
    started = time.monotonic()
    for number in range(max_schedules):
        schedule = (
            plan[number]
            if number < len(plan)
            else draw_schedule(rng, logs=len(job.logs()), sigkill=sigkill)
        )
        result = run_job(
            job,
            schedule,
            workdir=Path(workdir) / f"schedule-{number}",
            spark=spark,
            run_id=f"schedule-{number}",
        )
        verdict = check(result.history, wanted)
        explored.schedules += 1
        for crash in result.crashes:
            name = f"{crash.point.value}/{crash.how.value}"
            explored.fired[name] = explored.fired.get(name, 0) + 1
        if on_schedule is not None:
            on_schedule(number, result, verdict)
        if verdict.status is not Status.VALID:
            explored.first_failure_s = time.monotonic() - started
            if number >= len(plan) and shrink_runs > 0:  # a drawn one: make it smaller
                result, verdict, explored.shrink_runs = _shrink(
                    job, result, verdict, Path(workdir) / "shrink", spark, shrink_runs
                )
                schedule = result.schedule
            explored.failure, explored.verdict = result, verdict
            if failures_dir is not None:
                replay = JobReplay(job.app, wanted, schedule, verdict.summary().splitlines()[0])
                explored.replay_file = replay.save(failures_dir)
            break
    explored.seconds = time.monotonic() - started
    return explored


@final
class JobExplorer:
    """The ``harness_spark_job`` pytest fixture: ``harness_spark_job("job.py", guarantee=...,
    inputs=("events",), sinks=("sqlite:/tmp/e.db:events",))`` explores the job on the test's
    session in its ``tmp_path`` and raises ``AssertionError`` with the verdict, the schedule,
    what was tried and the replay file when the guarantee does not hold; returns the
    :class:`JobExploration` when it does."""

    def __init__(self, spark: Any, workdir: Path) -> None:
        self.spark = spark
        self.workdir = workdir

    def __call__(
        self,
        app: str,
        *,
        guarantee: Guarantee | str,
        max_schedules: int = 12,
        seed: int = 0,
        sigkill: bool = True,
        **job: Any,
    ) -> JobExploration:
        subject = SparkJob(app, **job)
        explored = explore_job(
            subject,
            guarantee,
            workdir=self.workdir / "schedules",
            max_schedules=max_schedules,
            seed=seed,
            sigkill=sigkill,
            failures_dir=self.workdir / "failures",
            spark=self.spark,
        )
        if explored.verdict is not None:
            assert explored.failure is not None
            raise AssertionError(
                f"{explored.verdict.summary()}\n{explored.failure.schedule.describe()}\n"
                f"tried: {explored.coverage()}\nreplay file: {explored.replay_file}"
            )
        return explored


def _smaller(schedule: StreamSchedule) -> list[StreamSchedule]:
    """Candidates one step simpler: a step left out, a count of 1, a crash at batch 0 or
    raised in process instead of killed."""
    steps = list(schedule.steps)
    found: list[StreamSchedule] = []

    def add(new: list[StreamStep]) -> None:
        if new != steps:
            found.append(StreamSchedule(steps=tuple(new)))

    for index in range(len(steps)):
        add(steps[:index] + steps[index + 1 :])
    for index, step in enumerate(steps):
        if isinstance(step, ProduceRecords) and step.count > 1:
            add([*steps[:index], ProduceRecords(1, step.log), *steps[index + 1 :]])
        if isinstance(step, CrashQuery):
            if step.how is CrashHow.SIGKILL:
                add([*steps[:index], CrashQuery(step.batch, step.point), *steps[index + 1 :]])
            if step.batch > 0:
                add([*steps[:index], CrashQuery(0, step.point, step.how), *steps[index + 1 :]])
    return found


def _shrink(
    job: SparkJob,
    result: JobResult,
    verdict: Verdict,
    workdir: Path,
    spark: SparkSession | None,
    budget: int,
) -> tuple[JobResult, Verdict, int]:
    """Greedy: take the first candidate of :func:`_smaller` that fails the same way (the
    same status, the same anomaly kinds), again, until none does or ``budget`` runs are
    spent. Spark runs cost seconds, so this is a few steps, not Hypothesis's search."""
    from harness.check.local import check

    kinds = {a.kind for a in verdict.anomalies}
    runs = 0
    improved = True
    while improved and runs < budget:
        improved = False
        for candidate in _smaller(result.schedule):
            if runs >= budget:
                break
            runs += 1
            again = run_job(job, candidate, workdir=workdir / str(runs), spark=spark)
            checked = check(again.history, verdict.guarantee)
            if checked.status is verdict.status and {a.kind for a in checked.anomalies} == kinds:
                result, verdict, improved = again, checked, True
                break
    return result, verdict, runs
