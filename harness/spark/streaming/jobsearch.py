"""Searching an unchanged Spark job's crash schedules: planned first, then drawn.

:func:`planned_schedules` lists, for a small workload, one schedule per crash point of every
micro-batch: for each way of dying (``RAISE`` in this process, ``SIGKILL`` of a child driver),
each point (``before-write``, ``after-write``, ``after-commit``) and each batch of the first
run, ``produce, crash at (batch, point, how), produce`` (the last produce is input arriving
while the job is down), then the drain. :func:`explore_job` hands the job to the engine's
search loop (:func:`harness.engine.explorer.explore_system`) as a :class:`SparkJobSystem`
(:class:`StreamSystem`: what the job and the built-in variants share), which runs that plan,
then schedules drawn from a seeded generator (:func:`draw_schedule`: more produce, run and
crash steps, at most one SIGKILL each), judges each history with the local checker and stops
at the first counterexample, saved as a replay file (:class:`JobReplay`). The
:class:`JobExploration` says what was tried: the crash points that fired, by point and way,
against those planned. The planned schedules are already minimal (one crash); a drawn
counterexample is made smaller greedily with a few more runs. No pyspark on import.
"""

from __future__ import annotations

import hashlib
import json
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, final

from harness._shown import counted, shown
from harness.check.verdict import Guarantee, Status, Verdict
from harness.engine.replay_file import DEFAULT_FAILURES_DIR as _FAILURES_DIR
from harness.engine.reruns import Rerun
from harness.engine.system import SystemAttempt, SystemPlan, SystemRun
from harness.errors import ConfigError
from harness.faults.streams import (
    CrashHow,
    CrashPoint,
    CrashQuery,
    FailTask,
    ProduceRecords,
    ResendRecords,
    RunBatches,
    StreamSchedule,
    StreamStep,
)
from harness.history.events import History
from harness.search.coverage import Coverage
from harness.sim.budget import RunBudget
from harness.spark.streaming.job import JobResult, SparkJob, run_job

if TYPE_CHECKING:
    import os

    from pyspark.sql import SparkSession

    from harness.engine.results import Exploration
    from harness.faults.kinds import Fault

__all__ = [
    "JOB_REPLAY_READER",
    "JOB_REPLAY_VERSION",
    "JobCoverage",
    "JobExploration",
    "JobFailure",
    "JobExplorer",
    "JobReplay",
    "SparkJobSystem",
    "draw_schedule",
    "explore_job",
    "explore_spark_job",
    "planned_schedules",
    "replay_job",
]

JOB_REPLAY_VERSION: Final = 2
"""Version 2 holds the job itself (``job``), so ``python -m harness replay FILE`` runs it."""
JOB_REPLAY_READER: Final = "harness.spark.streaming.jobsearch:JobReplay.read"
"""The reader a job's replay file names (``system``), so that every door that replays
(:func:`harness.replay`, ``pytest --harness-replay``, the CLI) reads it."""
_LATER: Final = ProduceRecords(count=2)
"""Input that arrives while the job is down, after a planned fault."""
POINTS: Final = (CrashPoint.AFTER_WRITE, CrashPoint.BEFORE_WRITE, CrashPoint.AFTER_COMMIT)
"""The points in the order the plan tries them: the classic duplicate window first."""


def planned_schedules(
    *,
    batches: int = 2,
    records: int = 4,
    logs: int = 1,
    hows: Sequence[CrashHow] = (CrashHow.RAISE, CrashHow.SIGKILL),
    points: Sequence[CrashPoint] = POINTS,
    tasks: bool = True,
    resends: bool = False,
) -> list[StreamSchedule]:
    """Every single crash at every point of ``batches`` micro-batches (module docstring):
    ``records`` records spread over ``logs`` input partitions first, two more after the
    crash. In-process crashes come first (they cost a query start, a SIGKILL a JVM), then
    (``tasks``) a task of each batch failing once, then (``resends``: the job's upstream is
    at-least-once) a resend of the records so far, and a resend after a crash after the
    write, then the SIGKILLs."""
    if type(batches) is not int or batches < 1 or type(records) is not int or records < 1:
        raise ConfigError(
            f"batches and records must be integers >= 1, got {batches!r}, {records!r}"
        )
    produce = [
        ProduceRecords(count=n, log=i) for i, n in enumerate(_spread(records, max(1, logs))) if n
    ]

    def schedule(*middle: StreamStep, after: StreamStep = _LATER) -> StreamSchedule:
        return StreamSchedule(steps=(*produce, *middle, after))

    plan = []
    for how in hows:
        if how is CrashHow.SIGKILL:  # the in-process faults first: a kill costs a JVM
            plan.extend(_in_process_faults(schedule, batches, produce, tasks, resends))
        for point in points:
            for batch in range(batches):
                plan.append(schedule(CrashQuery(batch=batch, point=point, how=how)))
    if CrashHow.SIGKILL not in hows:
        plan.extend(_in_process_faults(schedule, batches, produce, tasks, resends))
    return plan


def _in_process_faults(
    schedule: Callable[..., StreamSchedule],
    batches: int,
    produce: Sequence[ProduceRecords],
    tasks: bool,
    resends: bool,
) -> list[StreamSchedule]:
    """A task of each batch failing once; an upstream's resend of every partition's records
    so far, and one after a crash after the write (``resends``)."""
    plan = [schedule(FailTask(batch=batch)) for batch in range(batches)] if tasks else []
    if resends:
        again = [ResendRecords(count=p.count, log=p.log) for p in produce]
        plan.append(schedule(*again))
        plan.append(schedule(CrashQuery(0, CrashPoint.AFTER_WRITE), after=again[0]))
    return plan


def _spread(total: int, parts: int) -> list[int]:
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def draw_schedule(
    rng: random.Random,
    *,
    logs: int = 1,
    sigkill: bool = True,
    resends: bool = False,
    points: Sequence[CrashPoint] = POINTS,
    tasks: bool = True,
) -> StreamSchedule:
    """A drawn schedule: a produce, a crash, then up to three produce / run / crash /
    task-failure (and, with ``resends``, resend) steps; at most one SIGKILL (each costs a
    JVM). ``points`` and ``tasks=False`` narrow it to what a built-in variant takes."""
    kills = 0

    def crash() -> CrashQuery:
        nonlocal kills
        how = CrashHow.RAISE
        if sigkill and kills == 0 and rng.random() < 0.25:
            how, kills = CrashHow.SIGKILL, 1
        return CrashQuery(batch=rng.randrange(3), point=rng.choice(points), how=how)

    def produce() -> ProduceRecords:
        return ProduceRecords(count=rng.randint(1, 6), log=rng.randrange(logs))

    def other(kind: int) -> StreamStep:
        if kind == 0:
            return produce()
        if kind == 1:
            return RunBatches(rng.randint(1, 2))
        if kind == 2:
            return crash()
        if kind == 3:
            return FailTask(batch=rng.randrange(2))
        return ResendRecords(count=rng.randint(1, 3), log=rng.randrange(logs))

    kinds = [0, 1, 2, *([3] if tasks else []), *([4] if resends else [])]
    steps: list[StreamStep] = [produce(), crash()]
    for _ in range(rng.randrange(4)):
        steps.append(other(rng.choice(kinds)))
    return StreamSchedule(steps=tuple(steps))


@final
@dataclass(frozen=True, slots=True)
class JobReplay:
    """A failing schedule of a job, saved: what ``spark-job --replay FILE`` runs again, and
    (with ``job``, the job's JSON: :meth:`SparkJob.to_json`) what ``python -m harness replay
    FILE`` and ``report FILE`` run without the original command line."""

    app: str
    guarantee: Guarantee
    schedule: StreamSchedule
    summary: str = ""
    job: Mapping[str, Any] | None = None
    seed: int | None = None
    variant: Mapping[str, Any] | None = None
    """A built-in variant's failure instead of a job's: ``{"variant": NAME, "config":
    {...}}`` (:mod:`harness.spark.streaming.variantsearch`); written only when set."""

    def to_json(self) -> dict[str, Any]:
        data = {
            "harness_spark_job_replay": JOB_REPLAY_VERSION,
            "system": JOB_REPLAY_READER,
            "app": self.app,
            "guarantee": self.guarantee.value,
            "schedule": self.schedule.to_json(),
            "verdict": self.summary,
            "seed": self.seed,
            "job": None if self.job is None else dict(self.job),
        }
        if self.variant is not None:
            data["variant"] = dict(self.variant)
        return data

    def save(self, directory: str | os.PathLike[str]) -> Path:
        folder = Path(directory)
        folder.mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha1(self.schedule.dumps().encode()).hexdigest()[:10]
        name = f"spark-job-{Path(self.app.split(':')[0]).stem}-{digest}.json"
        path = folder / name
        path.write_text(json.dumps(self.to_json(), indent=2) + "\n", encoding="utf-8")
        return path

    def keep(self, directory: str | os.PathLike[str]) -> tuple[Path | None, str | None]:
        """:meth:`save` as the engine keeps a replay file: the file, or None and why not."""
        try:
            return self.save(directory), None
        except OSError as exc:
            return None, f"cannot write the replay file in {str(directory)!r}: {exc}"

    @classmethod
    def from_json(cls, data: object, where: str = "the replay file") -> JobReplay:
        """A replay file's content; version 1 files (no job) still read."""
        version = data.get("harness_spark_job_replay") if isinstance(data, Mapping) else None
        if not isinstance(data, Mapping) or version not in _READ_VERSIONS:
            raise ConfigError(
                f"{where} is not a spark-job replay file (no harness_spark_job_replay: "
                f"{JOB_REPLAY_VERSION}); pass a file that spark-job saved"
            )
        job, seed, variant = data.get("job"), data.get("seed"), data.get("variant")
        try:
            return cls(
                app=str(data["app"]),
                guarantee=Guarantee(data["guarantee"]),
                schedule=StreamSchedule.from_json(data["schedule"]),
                summary=str(data.get("verdict", "")),
                job=job if isinstance(job, Mapping) else None,
                seed=seed if type(seed) is int else None,
                variant=variant if isinstance(variant, Mapping) else None,
            )
        except (KeyError, ValueError) as exc:
            raise ConfigError(f"{where} is not a whole spark-job replay file: {exc}") from None

    @classmethod
    def read(cls, data: object, where: str) -> JobReplay:
        """:meth:`from_json`, as the engine's :func:`~harness.engine.replay_file.load_replay`
        calls the reader a replay file names."""
        return cls.from_json(data, where)

    @property
    def processor(self) -> str:
        """What the file replays: the job's app (``variant:NAME`` for a variant)."""
        return self.app

    def run_again(self, *, budget: RunBudget | None = None) -> tuple[History, Verdict]:
        """Run the file's schedule again on this process's session (started quiet, as the
        command line's, if none runs: the JVM would log every injected crash), in a new
        temporary directory that is kept (``harness-replay-spark-job-*``), and judge it:
        :func:`harness.replay` for a job's file. ``budget``'s seconds bound each query run
        of the job."""
        import tempfile

        from harness.spark.session import running_session
        from harness.spark.streaming.job import quiet_session

        subject = None  # a built-in variant's file: the file says which
        if self.variant is None:
            subject = self.spark_job()
            if budget is not None:
                subject = replace(subject, timeout_s=float(budget.seconds))
        workdir = Path(tempfile.mkdtemp(prefix="harness-replay-spark-job-"))
        spark = running_session() or quiet_session()
        done = replay_job(self, workdir=workdir / "run", job=subject, spark=spark)
        return done.history, done.verdict

    @classmethod
    def recognise(cls, source: str) -> JobReplay | None:
        """The spark-job replay file (or its JSON, given inline) ``source`` is, or None when
        it is another kind of file, or none that can be read (the caller's own reader then
        says why): how ``python -m harness replay`` and ``report`` tell the two apart."""
        try:
            text = source if source.lstrip().startswith("{") else Path(source).read_text("utf-8")
            data = json.loads(text)
        except (OSError, ValueError, RecursionError):  # too deep a nesting: not ours
            return None
        if not isinstance(data, Mapping) or "harness_spark_job_replay" not in data:
            return None
        return cls.from_json(data, f"replay file {shown(source)}")

    @classmethod
    def load(cls, path: str | Path) -> JobReplay:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot read replay file {str(path)!r}: {exc}") from None
        return cls.from_json(data, repr(str(path)))

    def spark_job(self) -> SparkJob:
        """The job the file names; a :class:`ConfigError` when it does not hold it (a lineage
        function that could not be named, or a version 1 file)."""
        if self.job is None:
            raise ConfigError(
                f"this replay file of {self.app!r} does not hold the job (its lineage function "
                "cannot be imported by name, or an older harness wrote it); run it with "
                "python -m harness spark-job ... --replay FILE"
            )
        return SparkJob.from_json(self.job, "the replay file's job")


_READ_VERSIONS: Final = (1, JOB_REPLAY_VERSION)


@final
@dataclass(frozen=True, slots=True)
class JobCoverage:
    """What a search of a job tried: schedules, planned ones, the faults that fired by
    ``"<point>/<how>"`` (and ``task/retry``, ``resend``), the time spent."""

    schedules: int = 0
    planned: int = 0
    fired: Mapping[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    shrink_runs: int = 0

    def summary(self) -> str:
        reached = ", ".join(f"{k} x{v}" for k, v in sorted(self.fired.items())) or "none"
        return (
            f"{counted(self.schedules, 'schedule')} ({self.planned} planned), faults fired: "
            f"{reached}; {self.seconds:.0f}s"
            + (f"; shrunk in {counted(self.shrink_runs, 'run')}" if self.shrink_runs else "")
        )


@final
@dataclass(frozen=True, slots=True)
class JobFailure:
    """A checked run of a job (a counterexample, or a replay of one): the reports'
    :class:`~harness.report.Reported` protocol, so ``gather``/``write_report`` render it like
    any other run."""

    verdict: Verdict
    history: History
    schedule: StreamSchedule
    processor: str
    replay_command: str | None = None
    seed: int | None = None
    backend: str = "spark"
    coverage: JobCoverage | None = None
    replay_file: Path | None = None


def replay_job(
    replay: JobReplay,
    *,
    workdir: str | Path,
    job: SparkJob | None = None,
    spark: SparkSession | None = None,
    replay_command: str | None = None,
) -> JobFailure:
    """Run a saved schedule again (against ``job``, default the file's own: a job, or a
    built-in variant) and judge it."""
    from harness.check.local import check

    if job is None and replay.variant is not None:
        from harness.spark.streaming.variantsearch import replay_variant

        return replay_variant(replay, workdir=workdir, spark=spark, replay_command=replay_command)

    subject = replay.spark_job() if job is None else job
    result = run_job(subject, replay.schedule, workdir=workdir, spark=spark, run_id="replay")
    return JobFailure(
        verdict=check(result.history, replay.guarantee),
        history=result.history,
        schedule=replay.schedule,
        processor=subject.app,
        replay_command=replay_command,
        seed=replay.seed,
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
    seed: int = 0
    seconds: float = 0.0
    failure: JobResult | None = None
    verdict: Verdict | None = None
    replay_file: Path | None = None
    first_failure_s: float | None = None
    shrink_runs: int = 0
    """Runs spent making a counterexample smaller (a planned one's: one, without its faults)."""

    @property
    def status(self) -> Status:
        return Status.VALID if self.verdict is None else self.verdict.status

    def tried(self) -> JobCoverage:
        """What was tried, as a value (a failure's report carries it)."""
        return JobCoverage(
            self.schedules, self.planned, dict(self.fired), self.seconds, self.shrink_runs
        )

    def coverage(self) -> str:
        return self.tried().summary()

    def reported(self) -> JobFailure | None:
        """The counterexample as a run the reports render (None when none was found)."""
        if self.failure is None or self.verdict is None:
            return None
        command = (
            None if self.replay_file is None else f"python -m harness replay {self.replay_file}"
        )
        return JobFailure(
            verdict=self.verdict,
            history=self.failure.history,
            schedule=self.failure.schedule,
            processor=str(self.failure.history.meta.extra.get("app", "")),
            replay_command=command,
            seed=self.seed,
            coverage=self.tried(),
            replay_file=self.replay_file,
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
    """Search ``job`` with the engine's loop (:func:`harness.engine.explorer.explore_system`
    over a :class:`SparkJobSystem`): the planned schedules (default :func:`planned_schedules`
    for ``job``), then drawn ones, up to ``max_schedules`` in all; stop at the first history
    that is not VALID (INVALID, or UNKNOWN: a run that could not be judged never passes). A
    drawn counterexample is made smaller with at most ``shrink_runs`` more runs."""
    from harness.check.local import check
    from harness.engine.explorer import explore_system
    from harness.engine.results import CounterexampleFound

    wanted = Guarantee(guarantee)

    def seen(number: int, result: JobResult) -> None:
        if on_schedule is not None:
            on_schedule(number, result, check(result.history, wanted))

    system = SparkJobSystem(
        job,
        workdir=workdir,
        spark=spark,
        sigkill=sigkill,
        plan=plan,
        shrink_runs=shrink_runs,
        on_run=seen,
    )
    explored = JobExploration(
        guarantee=wanted, planned=min(len(system.planned), max_schedules), seed=seed
    )
    started = time.monotonic()
    try:
        done = explore_system(
            system,
            wanted,
            max_examples=max_schedules,
            planned=max_schedules,
            seed=seed,
            failures_dir=failures_dir,
        )
        explored.schedules, explored.fired = done.examples, dict(done.coverage.fired)
    except CounterexampleFound as found:
        failure = found.failure
        assert isinstance(failure.schedule, StreamSchedule)
        explored.schedules, explored.fired = failure.examples, dict(failure.coverage.fired)
        explored.failure = system.results[failure.schedule.dumps()]
        explored.verdict, explored.replay_file = failure.verdict, failure.replay_file
        explored.first_failure_s = failure.first_failure_seconds
    explored.shrink_runs = system.shrink_spent
    explored.seconds = time.monotonic() - started
    return explored


def explore_spark_job(
    job: SparkJob,
    guarantee: Guarantee | str,
    *,
    workdir: str | Path,
    max_examples: int = 20,
    seed: int = 0,
    max_problems: int = 1,
    sigkill: bool = True,
    failures_dir: str | os.PathLike[str] | None = _FAILURES_DIR,
    spark: SparkSession | None = None,
    on_run: Callable[[int, JobResult], None] | None = None,
) -> Exploration:
    """The engine's front for a job, as :func:`harness.explore` is for a processor: search
    ``job`` (a :class:`SparkJobSystem`: every planned schedule first, then drawn ones, up to
    ``max_examples``) with :func:`harness.engine.explorer.explore_system`; return the
    :class:`~harness.engine.results.Exploration` when the guarantee held, else raise
    :class:`~harness.engine.results.CounterexampleFound` with every distinct problem found
    (up to ``max_problems``; each further search runs the rest of the budget, seconds a
    schedule), each saved as a replay file in ``failures_dir`` that ``python -m harness
    replay FILE`` and ``report FILE`` run again. The command line and the
    ``harness_spark_job`` fixture call this."""
    from harness.engine.explorer import explore_system

    system = SparkJobSystem(job, workdir=workdir, spark=spark, sigkill=sigkill, on_run=on_run)
    return explore_system(
        system,
        guarantee,
        max_examples=max_examples,
        planned=max_examples,
        seed=seed,
        failures_dir=failures_dir,
        max_problems=max_problems,
    )


class StreamSystem:
    """What the engine's two streaming systems share (:class:`SparkJobSystem`, a user's job;
    :class:`~harness.spark.streaming.variantsearch.VariantSystem`, a built-in variant): each
    run in its own directory of ``workdir`` (``schedule-<n>``, ``shrink/<n>``); the plan
    given (the default is the subclass's), the drawn phase :func:`draw_schedule` from a seeded
    generator, the shrinking a few greedy steps (:func:`_smaller`, at most ``shrink_runs``
    runs, none for a planned schedule: it has one fault already); a failure is not run
    again (each run costs seconds). ``results`` keeps each schedule's run result by its JSON
    (:meth:`StreamSchedule.dumps`). A subclass plays one schedule (:meth:`play`) and names
    the system and its replay file."""

    draws: Mapping[str, Any] = MappingProxyType({})
    """Keywords of :func:`draw_schedule` for this kind of system (what its runs refuse)."""

    def __init__(
        self,
        plan: Sequence[StreamSchedule],
        *,
        logs: int,
        workdir: str | Path,
        spark: SparkSession | None = None,
        sigkill: bool = True,
        resends: bool = False,
        shrink_runs: int = 8,
        on_run: Callable[[int, Any], None] | None = None,
    ) -> None:
        self.planned: tuple[StreamSchedule, ...] = tuple(plan)
        self.logs, self.workdir, self.spark = logs, Path(workdir), spark
        self.sigkill, self.resends = sigkill, resends
        self.shrink_runs, self.on_run = shrink_runs, on_run
        self.results: dict[str, Any] = {}
        self.runs = 0
        """Search runs so far (each in ``schedule-<n>``)."""
        self.shrink_spent = 0
        """Runs spent making a drawn counterexample smaller (each in ``shrink/<n>``)."""
        self._shrinking = False

    @property
    def backend(self) -> str:
        return "spark"

    def play(self, schedule: StreamSchedule, where: Path, run_id: str) -> tuple[Any, SystemRun]:
        """Run one schedule in ``where``: the system's own result, and what the engine takes."""
        raise NotImplementedError

    def run(self, schedule: StreamSchedule, budget: RunBudget) -> SystemRun:
        """One run (``budget`` does not apply: the runners have their own time-outs)."""
        if self._shrinking:
            self.shrink_spent += 1
            where, run_id = self.workdir / "shrink" / str(self.shrink_spent), "run"
        else:
            where = self.workdir / f"schedule-{self.runs}"
            run_id, number = where.name, self.runs
            self.runs += 1
        result, ran = self.play(schedule, where, run_id)
        self.results[schedule.dumps()] = result
        if not self._shrinking and self.on_run is not None:
            self.on_run(number, result)
        return ran

    def plan(self, faults: frozenset[Fault], budget: RunBudget) -> SystemPlan[StreamSchedule]:
        return SystemPlan(self.planned)

    def drawn(
        self,
        attempt: SystemAttempt[StreamSchedule],
        faults: frozenset[Fault],
        *,
        budget: int,
        max_steps: int,
        seed: int,
    ) -> tuple[StreamSchedule, Verdict] | None:
        """Up to ``budget`` schedules of :func:`draw_schedule` from ``random.Random(seed)``."""
        rng = random.Random(seed)
        for _ in range(budget):
            schedule = draw_schedule(
                rng, logs=self.logs, sigkill=self.sigkill, resends=self.resends, **self.draws
            )
            _, verdict, failed = attempt(schedule, False)
            if failed:
                return schedule, verdict
        return None

    def simplify(
        self, schedule: StreamSchedule, still_fails: Callable[[StreamSchedule], bool]
    ) -> StreamSchedule:
        self._shrinking = True
        try:
            if schedule in self.planned:  # already small: only asked whether its fault matters
                calm = _without_faults(schedule)
                return calm if calm != schedule and still_fails(calm) else schedule
            return _greedy(schedule, still_fails, self.shrink_runs)
        finally:
            self._shrinking = False

    def rerun(
        self,
        schedule: StreamSchedule,
        history: History,
        verdict: Verdict,
        *,
        budget: RunBudget,
        timed_out: bool,
    ) -> Rerun:
        return Rerun(history, verdict, None, ())

    def coverage(
        self,
        plan: SystemPlan[StreamSchedule],
        planned: int,
        drawn: int,
        reused: int,
        fired: Mapping[str, int],
    ) -> Coverage:
        return Coverage(
            systematic=planned, drawn=drawn, reused=reused, fired=MappingProxyType(dict(fired))
        )


@final
class SparkJobSystem(StreamSystem):
    """An unchanged Spark job as the engine's system under test
    (:class:`harness.engine.system.SystemUnderTest` over :class:`StreamSchedule`): each run
    is :func:`run_job`; its plan :func:`planned_schedules` for the job (or ``plan``); its
    replay file a :class:`JobReplay` holding the job (:class:`StreamSystem` for the rest)."""

    def __init__(
        self,
        job: SparkJob,
        *,
        workdir: str | Path,
        spark: SparkSession | None = None,
        sigkill: bool = True,
        plan: Sequence[StreamSchedule] | None = None,
        shrink_runs: int = 8,
        on_run: Callable[[int, JobResult], None] | None = None,
    ) -> None:
        if plan is None:
            hows = (CrashHow.RAISE, CrashHow.SIGKILL) if sigkill else (CrashHow.RAISE,)
            plan = planned_schedules(logs=len(job.logs()), hows=hows, resends=job.upstream_resends)
        super().__init__(
            plan,
            logs=len(job.logs()),
            workdir=workdir,
            spark=spark,
            sigkill=sigkill,
            resends=job.upstream_resends,
            shrink_runs=shrink_runs,
            on_run=on_run,
        )
        self.job = job

    @property
    def name(self) -> str:
        return self.job.app

    def play(
        self, schedule: StreamSchedule, where: Path, run_id: str
    ) -> tuple[JobResult, SystemRun]:
        result = run_job(self.job, schedule, workdir=where, spark=self.spark, run_id=run_id)
        return result, SystemRun(result.history, tuple(_fired(result)))

    def replay(
        self, guarantee: Guarantee, schedule: StreamSchedule, seed: int, verdict: Verdict
    ) -> JobReplay:
        summary = verdict.summary().splitlines()[0]
        return JobReplay(self.job.app, guarantee, schedule, summary, self.job.to_json(), seed)


@final
class JobExplorer:
    """The ``harness_spark_job`` pytest fixture: ``harness_spark_job("job.py", guarantee=...,
    inputs=("events",), sinks=("sqlite:/tmp/e.db:events",))`` explores the job on the test's
    session (its worlds in the test's ``tmp_path``) with :func:`explore_spark_job`, through
    the ``harness_explore`` fixture's front (``explorer``): its progress, its failures
    directory (``.harness/failures``), its test properties and report files. It returns the
    engine's :class:`~harness.engine.results.Exploration` when the guarantee holds and raises
    :class:`~harness.engine.results.CounterexampleFound` (an ``AssertionError``: the verdict,
    the schedule, what was tried, ``python -m harness replay FILE``) when it does not.
    ``max_examples`` (the old ``max_schedules``), ``seed`` and ``max_problems``: the call's,
    else what the test's marker, options or environment give, else 12, 0 and 1 (each
    schedule starts Spark queries: the profiles' budgets are not this fixture's). Under
    ``pytest --harness-replay FILE`` a call whose app is the file's runs the file's schedule
    once against this call's job and guarantee, and no search (another call is skipped)."""

    def __init__(self, spark: Any, workdir: Path, explorer: Any = None) -> None:
        self.spark = spark
        self.workdir = workdir
        self.explorer = explorer

    def _setting(self, key: str, given: int | None, default: int) -> int:
        settings = getattr(self.explorer, "settings", None)
        if given is not None:
            return given
        if settings is not None and settings.source(key) not in ("default", "profile"):
            value = getattr(settings, key)
            return default if value is None else int(value)
        return default

    def __call__(
        self,
        app: str,
        *,
        guarantee: Guarantee | str,
        max_examples: int | None = None,
        max_schedules: int | None = None,
        seed: int | None = None,
        max_problems: int | None = None,
        sigkill: bool = True,
        **job: Any,
    ) -> Exploration:
        __tracebackhide__ = True
        from contextlib import nullcontext

        from harness.engine.results import CounterexampleFound

        subject = SparkJob(app, **job)
        explorer = self.explorer
        replaying = None if explorer is None else explorer.system_replay(subject.app)
        if replaying is not None:
            return self._replay(subject, replaying, Guarantee(guarantee))
        failures_dir = self.workdir / "failures" if explorer is None else explorer.failures_dir()
        try:
            with nullcontext() if explorer is None else explorer.searching():
                return explore_spark_job(
                    subject,
                    guarantee,
                    workdir=self.workdir / "schedules",
                    max_examples=self._setting(
                        "max_examples", max_schedules if max_examples is None else max_examples, 12
                    ),
                    seed=self._setting("seed", seed, 0),
                    max_problems=self._setting("max_problems", max_problems, 1),
                    sigkill=sigkill,
                    failures_dir=failures_dir,
                    spark=self.spark,
                )
        except CounterexampleFound as found:
            if explorer is not None:
                explorer.found(found, found.failure.coverage.summary())
            raise found.with_traceback(None) from None

    def _replay(self, job: SparkJob, replaying: Any, guarantee: Guarantee) -> Exploration:
        """``pytest --harness-replay FILE``: the file's schedule run once against the test's
        job (its options as the test gives them) under the test's guarantee; the test fails
        with the verdict as a replay of a processor's file fails it."""
        __tracebackhide__ = True
        from harness.engine.results import Exploration, Failure

        if not isinstance(replaying, JobReplay):
            raise ConfigError(f"--harness-replay gives {replaying!r:.80}, not a job's file")
        started = time.monotonic()
        where, more = self.workdir / "replay", 1
        while where.exists():  # another call of the same test replayed the file already
            more += 1
            where = self.workdir / f"replay-{more}"
        done = replay_job(
            replace(replaying, guarantee=guarantee),
            workdir=where,
            job=job,
            spark=self.spark,
        )
        seed = replaying.seed or 0
        if done.verdict.status is Status.VALID:
            return Exploration(job.app, guarantee, 1, seed)
        found = self.explorer.replay_failed(
            Failure(
                processor=job.app,
                guarantee=guarantee,
                backend="spark",
                verdict=done.verdict,
                schedule=replaying.schedule,
                history=done.history,
                seed=seed,
                examples=1,
                first_failure_example=1,
                first_failure_seconds=time.monotonic() - started,
                replay_file=None,  # the file replayed: the explorer names it
                replay_command="",
            )
        )
        raise found.with_traceback(None) from None


def _fired(result: JobResult) -> list[str]:
    """The faults that fired in a run, by coverage name: ``<point>/<how>`` per crash,
    ``task/retried`` or ``task/not-retried`` per task failure, ``resend`` per resend step
    that appended records."""
    names = [f"{c.point.value}/{c.how.value}" for c in result.crashes]
    names += [
        "task/retried" if failed.get("retried") else "task/not-retried"
        for failed in result.task_failures
    ]
    if result.resends:
        names.append("resend")
    return names


def _without_faults(schedule: StreamSchedule) -> StreamSchedule:
    """``schedule`` with its crashes, task failures and resends left out: a planned failure
    that still fails without them is the job's own bug, and is shown without a fault that
    played no part (one run more, never a search)."""
    calm = tuple(s for s in schedule.steps if isinstance(s, ProduceRecords | RunBatches))
    return replace(schedule, steps=calm)


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
        if isinstance(step, ResendRecords) and step.count > 1:
            add([*steps[:index], ResendRecords(1, step.log), *steps[index + 1 :]])
        if isinstance(step, CrashQuery):
            if step.how is CrashHow.SIGKILL:
                add([*steps[:index], CrashQuery(step.batch, step.point), *steps[index + 1 :]])
            if step.batch > 0:
                add([*steps[:index], CrashQuery(0, step.point, step.how), *steps[index + 1 :]])
    return found


def _greedy(
    schedule: StreamSchedule, still_fails: Callable[[StreamSchedule], bool], budget: int
) -> StreamSchedule:
    """Take the first candidate of :func:`_smaller` that still fails, again, until none does
    or ``budget`` candidates were tried. Spark runs cost seconds, so this is a few steps, not
    Hypothesis's search."""
    runs = 0
    improved = True
    while improved and runs < budget:
        improved = False
        for candidate in _smaller(schedule):
            if runs >= budget:
                break
            runs += 1
            if still_fails(candidate):
                schedule, improved = candidate, True
                break
    return schedule


def _shrink(
    job: SparkJob,
    result: JobResult,
    verdict: Verdict,
    workdir: Path,
    spark: SparkSession | None,
    budget: int,
) -> tuple[JobResult, Verdict, int]:
    """:func:`_greedy` outside a search: the smallest schedule that fails the same way (the
    same status, the same anomaly kinds), its run, its verdict and the runs spent."""
    from harness.check.local import check

    kinds = {a.kind for a in verdict.anomalies}
    runs: dict[str, tuple[JobResult, Verdict]] = {result.schedule.dumps(): (result, verdict)}

    def still_fails(candidate: StreamSchedule) -> bool:
        again = run_job(job, candidate, workdir=workdir / str(len(runs)), spark=spark)
        checked = check(again.history, verdict.guarantee)
        runs[candidate.dumps()] = (again, checked)
        return checked.status is verdict.status and {a.kind for a in checked.anomalies} == kinds

    smallest = _greedy(result.schedule, still_fails, budget)
    return (*runs[smallest.dumps()], len(runs) - 1)
