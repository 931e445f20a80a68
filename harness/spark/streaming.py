"""Spark Structured Streaming under crash schedules: a real query, crashed, restarted, checked.

:func:`run_stream` puts one :class:`Variant` of a streaming query (the reference log as its
source, through :mod:`harness.spark.datasource`) under a :class:`StreamSchedule` and returns
a :class:`StreamResult` whose :class:`~harness.history.events.History` the checkers judge::

    result = run_stream(Variant.FOREACH_BATCH_APPEND, schedule, workdir=tmp)
    check(result.history, Guarantee.EXACTLY_ONCE)  # INVALID, duplicate, after an after-write crash

**Schedules** are plain data (JSON round trip, :meth:`StreamSchedule.dumps`), drawn by
:func:`stream_schedules`. Steps:

* :class:`ProduceRecords` ``(count, log)``: the producer appends ``count`` records to log
  ``log`` (modulo the logs) and commits: ``append`` then ``ack`` events.
* :class:`RunBatches` ``(batches)``: a query starts from the checkpoint, runs up to ``batches``
  micro-batches of the available input (``Trigger.AvailableNow``) and stops cleanly.
* :class:`CrashQuery` ``(batch, point, how)``: a query starts from the checkpoint and runs
  until its micro-batch number ``batch`` (0-based, counted in this run, a replayed batch
  included), which crashes at ``point``:

  - ``BEFORE_WRITE``: the batch's offsets are in the checkpoint's offset log, nothing of it is
    written (the source fails while planning the batch's partitions);
  - ``AFTER_WRITE``: the batch's output is written, the checkpoint has not committed it (the
    ``foreachBatch`` function fails after its write; for the Parquet sink, whose write and
    commit happen inside Spark, the run stops after the batch and the checkpoint's commit
    entry for it is removed, which is the state a crash between the sink's commit and the
    checkpoint's leaves on disk);

  and ``how``: ``RAISE`` (in this process: the micro-batch raises, the query dies with an
  exception) or ``SIGKILL`` (the query runs in a child driver process, ``python -m
  harness.spark._driver``, which blocks at the crash point and is killed with ``SIGKILL``,
  together with its JVM and Python workers). The runner knows how many batches a run will
  have (it plans them as the source does), so a ``batch`` beyond the run's last crashes the
  last one. A SIGKILL at ``AFTER_WRITE`` of the Parquet sink lands as the next batch is
  planned, after the batch's commit (there is no hook inside Spark's sink commit); the
  :class:`FiredCrash` records where each crash really landed.

Every step is valid in every state; a run with nothing to process starts no query. After the
steps the run **drains**: a fresh query processes everything, the sinks are observed, and the
history ends ``complete`` when the checkpoint's committed offsets reach every log's end.

**Variants** and what each promises (:attr:`Variant.guarantee`): ``PARQUET`` (file sink with a
checkpoint: exactly-once, read back through the sink's metadata log), ``FOREACH_BATCH_APPEND``
(``foreachBatch`` appending to an external file without the batch id: at-least-once only,
duplicates after an after-write crash), ``FOREACH_BATCH_IDEMPOTENT`` (``foreachBatch``
overwriting ``batch-<id>``: exactly-once), ``STATEFUL_COUNT`` (a streaming count per key in
update mode, written idempotently per batch: the final counts match the input).

Spark runs are not byte-for-byte reproducible the way the simulator's are (timings differ),
but the history is: batches are planned from the schedule alone (``maxRecordsPerBatch``,
deterministic offsets), crashes fire at planned batches, and observations are sorted.
Importing this module imports neither pyspark nor Hypothesis.
"""

from __future__ import annotations

import contextlib
import enum
import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Final, TypeAlias, final

from harness.check.verdict import Guarantee
from harness.errors import ConfigError, HarnessError
from harness.history.events import (
    Aggregate,
    Event,
    EventKind,
    History,
    HistoryMeta,
    SinkKind,
    SinkSpec,
)
from harness.log.dlsn import DLSN
from harness.log.namespace import leveldb_uri, open_namespace
from harness.log.record import LogRecord

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy
    from pyspark.sql import SparkSession

__all__ = [
    "STREAM_SCHEDULE_VERSION",
    "CrashHow",
    "CrashPoint",
    "CrashQuery",
    "FiredCrash",
    "InjectedCrash",
    "ProduceRecords",
    "RunBatches",
    "RunSpec",
    "StreamConfig",
    "StreamResult",
    "StreamSchedule",
    "StreamStep",
    "Variant",
    "run_stream",
    "stream_schedules",
]

STREAM_SCHEDULE_VERSION: Final = 1
_INITIAL: Final = DLSN.INITIAL.to_json()
_CHILD_JVM_OPTIONS: Final = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
_WORKER_TIMEOUT: Final = "Python worker failed to connect back"
"""Spark's error when a Python worker it started misses its fixed 10 s connect-back
deadline (seen on a loaded 2-core machine, as the source plans a batch): the drain then
starts again from the checkpoint, as an operator would, up to ``_DRAIN_ATTEMPTS`` times."""
_DRAIN_ATTEMPTS: Final = 3


class InjectedCrash(HarnessError):
    """Raised inside a query at a schedule's crash point (never by a correct run otherwise)."""


class Variant(str, enum.Enum):
    """A streaming query configuration under test, named by its sink."""

    PARQUET = "parquet"
    """Parquet file sink with a checkpoint."""
    FOREACH_BATCH_APPEND = "foreach-batch-append"
    """``foreachBatch`` appending each batch to an external file, ignoring the batch id."""
    FOREACH_BATCH_IDEMPOTENT = "foreach-batch-idempotent"
    """``foreachBatch`` writing each batch to ``batch-<id>`` (overwritten on replay)."""
    STATEFUL_COUNT = "stateful-count"
    """``groupBy(key).count()`` in update mode, each batch's counts written per batch id."""

    @property
    def guarantee(self) -> Guarantee:
        """The strongest guarantee the variant keeps under crashes."""
        if self is Variant.FOREACH_BATCH_APPEND:
            return Guarantee.AT_LEAST_ONCE
        return Guarantee.EXACTLY_ONCE

    @property
    def sink_name(self) -> str:
        return "counts" if self is Variant.STATEFUL_COUNT else "out"

    @property
    def sink_spec(self) -> SinkSpec:
        if self is Variant.STATEFUL_COUNT:
            return SinkSpec(kind=SinkKind.TABLE, aggregate=Aggregate.COUNT)
        return SinkSpec(kind=SinkKind.LOG)


class CrashPoint(str, enum.Enum):
    """Where in a micro-batch a crash lands."""

    BEFORE_WRITE = "before-write"
    """The batch is in the checkpoint's offset log; nothing of it is written."""
    AFTER_WRITE = "after-write"
    """The batch's output is written; the checkpoint has not committed the batch."""


class CrashHow(str, enum.Enum):
    """How the query dies."""

    RAISE = "raise"
    """In this process: the micro-batch raises and the query terminates with the exception."""
    SIGKILL = "sigkill"
    """The query runs in a child driver process, killed with SIGKILL (JVM and workers too)."""


@final
@dataclass(frozen=True, slots=True)
class ProduceRecords:
    """The producer appends ``count`` records to log number ``log`` (modulo the logs)."""

    count: int = 1
    log: int = 0
    op: ClassVar[str] = "produce"


@final
@dataclass(frozen=True, slots=True)
class RunBatches:
    """A query starts from the checkpoint, runs up to ``batches`` micro-batches, stops."""

    batches: int = 1
    op: ClassVar[str] = "run"


@final
@dataclass(frozen=True, slots=True)
class CrashQuery:
    """A query starts from the checkpoint and crashes in its micro-batch ``batch``."""

    batch: int = 0
    point: CrashPoint = CrashPoint.AFTER_WRITE
    how: CrashHow = CrashHow.RAISE
    op: ClassVar[str] = "crash"


StreamStep: TypeAlias = ProduceRecords | RunBatches | CrashQuery
_STEP_TYPES: Final[Mapping[str, type[StreamStep]]] = {
    cls.op: cls for cls in (ProduceRecords, RunBatches, CrashQuery)
}
_LIMITS: Final[Mapping[str, tuple[int, int]]] = {
    "count": (0, 1_000_000),
    "log": (0, 1_000),
    "batches": (1, 10_000),
    "batch": (0, 10_000),
}
_ENUMS: Final[Mapping[str, type[enum.Enum]]] = {"point": CrashPoint, "how": CrashHow}


def _step_to_json(step: StreamStep) -> dict[str, Any]:
    data: dict[str, Any] = {"op": step.op}
    for f in fields(step):
        value = getattr(step, f.name)
        data[f.name] = value.value if isinstance(value, enum.Enum) else value
    return data


def _step_from_json(data: object, where: str) -> StreamStep:
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where} must be a JSON object such as {{'op': 'run'}}, got {data!r}")
    op = data.get("op")
    cls = _STEP_TYPES.get(op) if isinstance(op, str) else None
    if cls is None:
        raise ConfigError(f"{where} has unknown op {op!r}; known ops: {', '.join(_STEP_TYPES)}")
    names = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - names - {"op"})
    if unknown:
        raise ConfigError(
            f"{where} ({op}) has unknown field(s) {unknown}; it takes {sorted(names)}"
        )
    kwargs: dict[str, Any] = {}
    for name in names:
        if name not in data:
            continue
        value = data[name]
        if name in _ENUMS:
            try:
                kwargs[name] = _ENUMS[name](value)
            except ValueError:
                choices = ", ".join(str(m.value) for m in _ENUMS[name])
                raise ConfigError(
                    f"{where} ({op}) field {name!r} must be one of {choices}, got {value!r}"
                ) from None
        else:
            kwargs[name] = value
    return cls(**kwargs)


def _check_step(step: object, where: str) -> None:
    if type(step) not in _STEP_TYPES.values():
        raise ConfigError(
            f"{where} is {step!r}, not a stream step; use ProduceRecords, RunBatches or "
            "CrashQuery from harness.spark.streaming"
        )
    for f in fields(step):  # type: ignore[arg-type]
        value = getattr(step, f.name)
        if f.name in _ENUMS:
            if not isinstance(value, _ENUMS[f.name]):
                raise ConfigError(
                    f"{where} field {f.name!r} must be a {_ENUMS[f.name].__name__}, got {value!r}"
                )
            continue
        low, high = _LIMITS[f.name]
        if type(value) is not int or not low <= value <= high:
            raise ConfigError(
                f"{where} field {f.name!r} must be an integer in [{low}, {high}], got {value!r}"
            )


@final
@dataclass(frozen=True, slots=True)
class StreamSchedule:
    """Steps to execute in order, then a fault-free drain unless ``drain`` is False."""

    steps: tuple[StreamStep, ...] = ()
    drain: bool = True
    version: int = STREAM_SCHEDULE_VERSION

    def __post_init__(self) -> None:
        steps: object = self.steps
        if not isinstance(steps, tuple):
            object.__setattr__(self, "steps", tuple(steps))  # type: ignore[arg-type]
        if type(self.drain) is not bool:
            raise ConfigError(f"stream schedule drain must be True or False, got {self.drain!r}")
        if self.version != STREAM_SCHEDULE_VERSION:
            raise ConfigError(
                f"stream schedule version {self.version!r} is not supported; this harness reads "
                f"version {STREAM_SCHEDULE_VERSION}"
            )
        for i, step in enumerate(self.steps):
            _check_step(step, f"stream schedule step {i}")

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "drain": self.drain,
            "steps": [_step_to_json(step) for step in self.steps],
        }

    def dumps(self) -> str:
        """Compact one-line JSON, identical for equal schedules."""
        return json.dumps(self.to_json(), separators=(",", ":"))

    @classmethod
    def from_json(cls, data: object) -> StreamSchedule:
        """Build a schedule from its JSON form (a dict, or text); bad input raises ConfigError."""
        if isinstance(data, str | bytes):
            try:
                data = json.loads(data)
            except ValueError as exc:
                raise ConfigError(f"stream schedule is not valid JSON: {exc}") from None
        if not isinstance(data, Mapping):
            raise ConfigError(f"a stream schedule is a JSON object with 'steps', got {data!r:.80}")
        unknown = sorted(set(data) - {"version", "drain", "steps"})
        if unknown:
            raise ConfigError(f"stream schedule has unknown field(s) {unknown}")
        version = data.get("version", STREAM_SCHEDULE_VERSION)
        steps = data.get("steps", [])
        if not isinstance(steps, Sequence) or isinstance(steps, str | bytes):
            raise ConfigError(f"stream schedule 'steps' must be a list, got {steps!r:.80}")
        return cls(
            steps=tuple(_step_from_json(s, f"step {i}") for i, s in enumerate(steps)),
            drain=data.get("drain", True),
            version=version,
        )

    def describe(self) -> str:
        """One step per line, numbered, for humans."""
        lines = []
        for i, step in enumerate(self.steps):
            args = ", ".join(
                f"{f.name}={getattr(step, f.name)!s}"
                if isinstance(getattr(step, f.name), enum.Enum)
                else f"{f.name}={getattr(step, f.name)!r}"
                for f in fields(step)
            )
            lines.append(f"{i:3d}. {type(step).__name__}({args})")
        lines.append("     drain" if self.drain else "     (no drain)")
        return "\n".join(lines)

    @property
    def kills(self) -> int:
        """How many steps SIGKILL a child driver process."""
        return sum(isinstance(s, CrashQuery) and s.how is CrashHow.SIGKILL for s in self.steps)


@final
@dataclass(frozen=True, slots=True)
class StreamConfig:
    """The world a run builds: input logs, keys, batch size, time limits.

    ``logs``: the input logs (one Spark input partition each); record ``n`` (``r<n>``) has key
    ``k<n % keys>``; ``max_records_per_batch`` caps each micro-batch (the source's
    ``maxRecordsPerBatch``); ``timeout_s`` bounds every query run and every wait for a child.
    """

    logs: tuple[str, ...] = ("in0", "in1")
    keys: int = 3
    max_records_per_batch: int = 4
    shuffle_partitions: int = 2
    timeout_s: float = 300.0

    def __post_init__(self) -> None:
        if not self.logs or len(set(self.logs)) != len(self.logs):
            raise ConfigError(f"logs must be distinct log names, at least one: {self.logs!r}")
        for name in ("keys", "max_records_per_batch", "shuffle_partitions"):
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise ConfigError(f"{name} must be an integer >= 1, got {value!r}")
        if not self.timeout_s > 0:
            raise ConfigError(f"timeout_s must be > 0, got {self.timeout_s!r}")


@final
@dataclass(frozen=True, slots=True)
class RunSpec:
    """One query run, as plain data: what :mod:`harness.spark._driver` executes (in this
    process or in a child driver). Internal to the runner; documented for the driver."""

    variant: Variant
    uri: str
    logs: tuple[str, ...]
    max_records: int
    shuffle_partitions: int
    checkpoint: str
    sink: str
    store: str
    stop_after: int | None = None
    """The source reports no new data once this many batches were planned in the run."""
    raise_at: int | None = None
    """The source raises while planning this batch (before-write crash, in-process)."""
    block_at: int | None = None
    """The source signals and blocks while planning this batch (before-write, SIGKILL)."""
    after_write_at: int | None = None
    """``foreachBatch`` fails (in-process) or signals and blocks (child) after this batch's
    write."""
    signal: str | None = None
    """A FIFO the child's crash points and its end are reported on, one line each."""

    def to_json(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["variant"] = self.variant.value
        data["logs"] = list(self.logs)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunSpec:
        values = dict(data)
        values["variant"] = Variant(values["variant"])
        values["logs"] = tuple(values["logs"])
        return cls(**values)


@final
@dataclass(frozen=True, slots=True)
class FiredCrash:
    """A crash that happened: the step that asked for it, the instance that died, where.

    ``batch`` is the batch's number in its run; ``rows`` the rows the batch had written
    when it died (None when nothing was written or the count is unknown).
    """

    step: int
    process: int
    point: CrashPoint
    how: CrashHow
    batch: int
    rows: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "process": self.process,
            "point": self.point.value,
            "how": self.how.value,
            "batch": self.batch,
            "rows": self.rows,
        }


@final
@dataclass(frozen=True, slots=True)
class StreamResult:
    """What :func:`run_stream` returns: the history and the crashes that fired."""

    variant: Variant
    schedule: StreamSchedule
    history: History
    crashes: tuple[FiredCrash, ...]
    query_runs: int
    """Queries started (in this process or in child drivers), the drain's included."""

    @property
    def replayed_rows(self) -> int:
        """Rows written by batches that then crashed before their commit: each is written
        again when the batch is replayed, so a sink that is not idempotent shows exactly this
        many duplicates."""
        return sum(
            c.rows or 0 for c in self.crashes if c.point is CrashPoint.AFTER_WRITE and c.rows
        )


@dataclass(slots=True)
class _Outcome:
    fired: bool = False
    point: CrashPoint | None = None
    batch: int | None = None
    rows: int | None = None
    error: str | None = None


@dataclass(slots=True)
class _Recorder:
    events: list[Event] = field(default_factory=list)

    def add(self, kind: EventKind, **values: Any) -> None:
        self.events.append(Event(index=len(self.events), kind=kind, **values))


def run_stream(
    variant: Variant,
    schedule: StreamSchedule,
    *,
    workdir: str | os.PathLike[str],
    config: StreamConfig | None = None,
    spark: SparkSession | None = None,
    run_id: str = "run",
) -> StreamResult:
    """Run ``variant`` under ``schedule`` in ``workdir`` (a fresh, empty directory) and record
    the history. ``spark`` is the session for in-process runs (default: the process's, from
    :func:`harness.spark.session.spark_session`); SIGKILL steps start child drivers.
    Raises :class:`HarnessError` when the harness itself cannot proceed (a child that
    never reports, a query that outlives ``timeout_s``); failures of the query under test
    are recorded in the history instead (``error`` events, an incomplete end).
    """
    if not isinstance(variant, Variant):
        raise ConfigError(f"variant must be a Variant, got {variant!r}")
    if not isinstance(schedule, StreamSchedule):
        raise ConfigError(f"schedule must be a StreamSchedule, got {schedule!r}")
    runner = _Runner(variant, schedule, Path(workdir), config or StreamConfig(), spark, run_id)
    return runner.run()


class _Runner:
    def __init__(
        self,
        variant: Variant,
        schedule: StreamSchedule,
        workdir: Path,
        config: StreamConfig,
        spark: SparkSession | None,
        run_id: str,
    ) -> None:
        self.variant = variant
        self.schedule = schedule
        self.config = config
        self.workdir = workdir.absolute()
        workdir.mkdir(parents=True, exist_ok=True)
        if any(workdir.iterdir()):
            raise ConfigError(f"workdir {str(workdir)!r} must be empty: a run starts from nothing")
        self.uri = leveldb_uri(self.workdir / "namespace")
        self.checkpoint = self.workdir / "checkpoint"
        self.sink = self.workdir / "sink"
        self.store = self.workdir / "store"
        self.store.mkdir()
        self._spark = spark
        self.run_id = run_id
        self.recorder = _Recorder()
        self.crashes: list[FiredCrash] = []
        self.records = 0
        self.offsets = dict.fromkeys(config.logs, 0)
        self.processes = 0
        self.query_runs = 0
        self.children = 0
        with open_namespace(self.uri) as namespace:
            for log in config.logs:
                namespace.create_log(log)

    # -- the steps ---------------------------------------------------------------------

    def run(self) -> StreamResult:
        for index, step in enumerate(self.schedule.steps):
            if isinstance(step, ProduceRecords):
                self._produce(step)
            else:
                self._query(index, step)
        end = "incomplete: the schedule has no drain"
        if self.schedule.drain:
            self.recorder.add(EventKind.DRAIN)
            end = self._drain()
        self.recorder.add(EventKind.END, detail=end)
        meta = HistoryMeta(
            partitions=self.config.logs,
            sinks={self.variant.sink_name: self.variant.sink_spec},
            run_id=self.run_id,
            extra={
                "system": "spark-structured-streaming",
                "variant": self.variant.value,
                "schedule": self.schedule.to_json(),
                "max_records_per_batch": self.config.max_records_per_batch,
                "crashes": [c.to_json() for c in self.crashes],
            },
        )
        return StreamResult(
            variant=self.variant,
            schedule=self.schedule,
            history=History(meta=meta, events=tuple(self.recorder.events)),
            crashes=tuple(self.crashes),
            query_runs=self.query_runs,
        )

    def _produce(self, step: ProduceRecords) -> None:
        if step.count == 0:
            return
        log = self.config.logs[step.log % len(self.config.logs)]
        written: list[tuple[str, int]] = []
        with (
            open_namespace(self.uri) as namespace,
            namespace.open_log(log) as manager,
            manager.open_writer() as writer,
        ):
            for _ in range(step.count):
                number = self.records
                record_id, key = f"r{number}", f"k{number % self.config.keys}"
                payload = {"id": record_id, "key": key, "value": 1}
                writer.write(LogRecord(number, json.dumps(payload, separators=(",", ":")).encode()))
                offset = self.offsets[log]
                self.recorder.add(
                    EventKind.APPEND,
                    partition=log,
                    offset=offset,
                    record_id=record_id,
                    key=key,
                    value=1,
                )
                written.append((record_id, offset))
                self.records += 1
                self.offsets[log] += 1
            writer.commit()
        for record_id, offset in written:
            self.recorder.add(EventKind.ACK, partition=log, offset=offset, record_id=record_id)

    def _batches_ahead(self) -> int:
        """How many micro-batches a query started now runs: a batch the checkpoint logged but
        did not commit (replayed first), then the batches the source plans up to every log's
        end, exactly as :class:`~harness.spark.datasource.DLogStreamReader` plans them."""
        from harness.spark.datasource import (
            SourceOptions,
            decode_offsets,
            latest_offsets,
            plan_batch_end,
        )

        state = _checkpoint_state(self.checkpoint)
        batches = 1 if state.uncommitted is not None else 0
        start = decode_offsets(state.uncommitted or state.committed, what="checkpoint offset")
        options = SourceOptions(
            uri=self.uri, logs=self.config.logs, max_records=self.config.max_records_per_batch
        )
        latest = latest_offsets(self.uri, self.config.logs)
        while True:
            end = plan_batch_end(options, start, latest, self.config.max_records_per_batch)
            if all(end[log] == start.get(log, DLSN.INITIAL) for log in end):
                return batches
            batches += 1
            start = end

    def _spec(self, **gate: Any) -> RunSpec:
        return RunSpec(
            variant=self.variant,
            uri=self.uri,
            logs=self.config.logs,
            max_records=self.config.max_records_per_batch,
            shuffle_partitions=self.config.shuffle_partitions,
            checkpoint=str(self.checkpoint),
            sink=str(self.sink),
            store=str(self.store),
            **gate,
        )

    def _query(self, index: int, step: RunBatches | CrashQuery) -> None:
        ahead = self._batches_ahead()
        if not ahead:
            return  # nothing to process: no query starts, so nothing can crash
        self.processes += 1
        process = self.processes
        self.recorder.add(EventKind.START, process=process)
        self.query_runs += 1
        if isinstance(step, RunBatches):
            outcome = self._in_process(self._spec(stop_after=step.batches))
        elif step.how is CrashHow.RAISE:
            outcome = self._raise(step, min(step.batch, ahead - 1))
        else:
            outcome = self._kill(step, ahead)
        if outcome.fired:
            assert isinstance(step, CrashQuery) and outcome.batch is not None
            self.recorder.add(EventKind.CRASH, process=process, detail="process")
            self.crashes.append(
                FiredCrash(
                    step=index,
                    process=process,
                    point=outcome.point or step.point,
                    how=step.how,
                    batch=outcome.batch,
                    rows=outcome.rows,
                )
            )
        elif outcome.error is not None:
            self.recorder.add(EventKind.ERROR, process=process, detail=outcome.error)

    def _raise(self, step: CrashQuery, batch: int) -> _Outcome:
        if step.point is CrashPoint.BEFORE_WRITE:
            return self._in_process(self._spec(raise_at=batch))
        if self.variant is not Variant.PARQUET:
            return self._in_process(self._spec(after_write_at=batch))
        # The file sink writes and commits inside Spark: stop after the batch, then take
        # back the checkpoint's commit entry, which leaves the files of a crash between the
        # sink's commit and the checkpoint's.
        before = _commit_ids(self.checkpoint)
        outcome = self._in_process(self._spec(stop_after=batch + 1))
        if outcome.error is not None:
            return outcome
        new = sorted(_commit_ids(self.checkpoint) - before)
        if len(new) != batch + 1:
            raise HarnessError(
                f"the Parquet query ran {len(new)} batches where {batch + 1} were planned "
                f"(checkpoint {self.checkpoint}); the runner's batch plan is wrong"
            )
        last = new[-1]
        for name in (str(last), f".{last}.crc"):
            with contextlib.suppress(FileNotFoundError):
                (self.checkpoint / "commits" / name).unlink()
        return _Outcome(fired=True, batch=batch)

    def _in_process(self, spec: RunSpec) -> _Outcome:
        from harness.spark import _driver

        result = _driver.run_in_process(self._session(), spec, timeout_s=self.config.timeout_s)
        return _Outcome(
            fired=bool(result.get("fired")),
            batch=result.get("batch"),
            rows=result.get("rows"),
            error=result.get("error"),
        )

    def _session(self) -> SparkSession:
        if self._spark is None:
            from harness.spark.session import spark_session

            self._spark = spark_session()
        return self._spark

    # -- SIGKILL of a child driver ----------------------------------------------------------

    def _kill(self, step: CrashQuery, ahead: int) -> _Outcome:
        self.children += 1
        number = self.children
        fifo = self.workdir / f"child-{number}.signal"
        os.mkfifo(fifo)
        batch = min(step.batch, ahead - 1)
        if step.point is CrashPoint.BEFORE_WRITE:
            spec = self._spec(block_at=batch, signal=str(fifo))
        elif self.variant is Variant.PARQUET:
            # no hook between the file sink's write and its commit: the kill lands as the
            # next batch is planned (a one-batch run: as its only batch is planned)
            spec = self._spec(block_at=min(step.batch + 1, ahead - 1), signal=str(fifo))
        else:
            spec = self._spec(after_write_at=batch, signal=str(fifo))
        spec_path = self.workdir / f"child-{number}.json"
        spec_path.write_text(json.dumps(spec.to_json()), encoding="utf-8")
        log_path = self.workdir / f"child-{number}.log"
        env = dict(os.environ)
        env["HARNESS_SPARK_TMPDIR"] = str(self.workdir / f"child-{number}-spark")
        env["PYTHONUNBUFFERED"] = "1"
        # a driver that lives for a few batches: the quick JIT tier and a small collector
        # start it in about two thirds of the time; semantics are untouched
        env["JAVA_TOOL_OPTIONS"] = " ".join(
            filter(None, [env.get("JAVA_TOOL_OPTIONS"), _CHILD_JVM_OPTIONS])
        )
        # Opened read-write so that the FIFO always has a writer: select() then waits for
        # data instead of reporting end-of-file while no child has it open.
        channel = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)
        try:
            with log_path.open("wb") as log:
                child = subprocess.Popen(
                    [sys.executable, "-m", "harness.spark._driver", str(spec_path)],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                    env=env,
                )
            try:
                message = _await_line(child, channel, self.config.timeout_s, log_path)
            except BaseException:
                _kill_tree(child)
                raise
        finally:
            os.close(channel)
        words = message.split()
        if words[0] == "fired":
            _kill_tree(child)
            rows = int(words[3])
            return _Outcome(
                fired=True,
                point=CrashPoint(words[1]),
                batch=int(words[2]),
                rows=rows if rows >= 0 else None,
            )
        _wait_exit(child, self.config.timeout_s, log_path)
        if words[0] == "done":
            return _Outcome()
        return _Outcome(error=message.partition(" ")[2] or "the child driver failed")

    # -- the drain ------------------------------------------------------------------------

    def _drain(self) -> str:
        from harness.spark import _driver
        from harness.spark.datasource import latest_offsets

        outcome = _Outcome()
        if self._batches_ahead():  # else the checkpoint has every log's end committed already
            self.processes += 1
            self.recorder.add(EventKind.START, process=self.processes)
            self.query_runs += 1
            for _ in range(_DRAIN_ATTEMPTS):
                outcome = self._in_process(self._spec())
                if outcome.error is None or _WORKER_TIMEOUT not in outcome.error:
                    break
            if outcome.error is not None:
                self.recorder.add(EventKind.ERROR, process=self.processes, detail=outcome.error)
        state = _checkpoint_state(self.checkpoint)
        latest = latest_offsets(self.uri, self.config.logs)
        behind = [
            log
            for log in self.config.logs
            if state.committed.get(log, _INITIAL) != latest[log].to_json()
        ]
        self._observe(_driver.observe(self._session(), self._spec()))
        if outcome.error is not None:
            return f"incomplete: the drain's query failed: {outcome.error}"
        if state.uncommitted is not None or behind:
            return (
                "incomplete: after the drain the checkpoint has not committed the end of "
                f"log(s) {', '.join(behind) or '(a batch is still uncommitted)'}"
            )
        return "complete"

    def _observe(self, rows: Sequence[Mapping[str, Any]]) -> None:
        sink = self.variant.sink_name
        if self.variant is Variant.STATEFUL_COUNT:
            for row in rows:
                self.recorder.add(
                    EventKind.OBSERVE, sink=sink, key=str(row["key"]), value=int(row["count"])
                )
            return
        for output_id, row in enumerate(rows, start=1):
            self.recorder.add(
                EventKind.OBSERVE,
                sink=sink,
                output_id=output_id,
                record_id=row.get("record_id"),
                part=0,
                parts=1,
                key=row.get("key"),
            )


@dataclass(slots=True)
class _CheckpointState:
    committed: dict[str, dict[str, int]]
    """The source offset of the last committed batch (DLSN JSON per log); empty if none."""
    uncommitted: dict[str, dict[str, int]] | None
    """The end offset of a batch in the offset log but not committed (a restart replays it
    first); None when there is none."""


def _batch_ids(directory: Path) -> set[int]:
    if not directory.is_dir():
        return set()
    return {int(p.name) for p in directory.iterdir() if p.name.isdigit()}


def _commit_ids(checkpoint: Path) -> set[int]:
    return _batch_ids(checkpoint / "commits")


def _logged_offset(checkpoint: Path, batch: int) -> dict[str, dict[str, int]]:
    path = checkpoint / "offsets" / str(batch)
    lines = path.read_text(encoding="utf-8").splitlines()
    if len(lines) < 3:
        raise HarnessError(
            f"Spark checkpoint offset file {path} has {len(lines)} lines; expected 'v1', the "
            "batch metadata and the source's offset"
        )
    offset = json.loads(lines[2])
    if not isinstance(offset, dict):
        raise HarnessError(f"Spark checkpoint offset file {path}: {lines[2]!r} is not an offset")
    return offset


def _checkpoint_state(checkpoint: Path) -> _CheckpointState:
    """Read Spark's checkpoint: ``offsets/<id>`` (``v1``, the batch metadata, then one offset
    line per source) and ``commits/<id>``."""
    offsets = _batch_ids(checkpoint / "offsets")
    commits = _commit_ids(checkpoint)
    committed = _logged_offset(checkpoint, max(commits)) if commits else {}
    uncommitted = None
    if offsets and max(offsets) > max(commits, default=-1):
        uncommitted = _logged_offset(checkpoint, max(offsets))
    return _CheckpointState(committed=committed, uncommitted=uncommitted)


# -- child processes ------------------------------------------------------------------------


def _await_line(child: subprocess.Popen[bytes], channel: int, timeout_s: float, log: Path) -> str:
    """The first line the child (or its Spark processes) writes to the FIFO ``channel``."""
    deadline = time.monotonic() + timeout_s
    buffered = b""
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise HarnessError(
                f"the child driver (pid {child.pid}) reported nothing in {timeout_s:.0f}s; "
                f"its output is in {log}"
            )
        # a bounded wait on the FIFO, waking up to notice a child that died silently
        ready, _, _ = select.select([channel], [], [], min(remaining, 0.5))
        if ready:
            with contextlib.suppress(BlockingIOError):
                buffered += os.read(channel, 4096)
        if b"\n" in buffered:
            return buffered.split(b"\n", 1)[0].decode("utf-8", "replace").strip()
        if not ready and child.poll() is not None:
            raise HarnessError(
                f"the child driver (pid {child.pid}) exited with status {child.returncode} "
                f"without reporting; its output is in {log}:\n{_tail(log)}"
            )


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no output)"


def _wait_exit(child: subprocess.Popen[bytes], timeout_s: float, log: Path) -> None:
    try:
        child.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_tree(child)
        raise HarnessError(
            f"the child driver (pid {child.pid}) did not exit within {timeout_s:.0f}s after "
            f"finishing; its output is in {log}"
        ) from None


def _proc_stat(pid: int) -> tuple[str, int, int] | None:
    """``(state, ppid, pgrp)`` of a process from ``/proc``, None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields_after_name = text[text.rfind(")") + 2 :].split()
    return fields_after_name[0], int(fields_after_name[1]), int(fields_after_name[2])


def _descendants(root: int) -> set[int]:
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            stat = _proc_stat(int(entry.name))
            if stat is not None:
                parents.setdefault(stat[1], []).append(int(entry.name))
    found: set[int] = set()
    todo = [root]
    while todo:
        for child in parents.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _alive(pid: int) -> bool:
    stat = _proc_stat(pid)
    return stat is not None and stat[0] not in ("Z", "X")


def _kill_tree(child: subprocess.Popen[bytes]) -> None:
    """SIGKILL the child driver, its JVM and every process they started (by id), then wait
    until all are gone, so that nothing of the dead driver still holds a log or the
    checkpoint when the next run starts."""
    pids = _descendants(child.pid) | {child.pid}
    own_group = os.getpgrp()
    groups: set[int] = set()
    for pid in pids:
        stat = _proc_stat(pid)
        if stat is not None and stat[2] != own_group:
            groups.add(stat[2])
    for group in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, signal.SIGKILL)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    child.wait()
    deadline = time.monotonic() + 60.0
    while any(_alive(pid) for pid in pids):
        if time.monotonic() > deadline:
            raise HarnessError(
                f"processes {sorted(p for p in pids if _alive(p))} of the killed driver are "
                "still alive 60s after SIGKILL"
            )
        # polling /proc: a killed process's exit cannot be waited for by a non-parent
        time.sleep(0.01)


# -- schedules for Hypothesis ---------------------------------------------------------------


def stream_schedules(
    *,
    logs: int = 2,
    max_steps: int = 4,
    max_count: int = 12,
    max_batch: int = 2,
    sigkill: bool = False,
) -> SearchStrategy[StreamSchedule]:
    """Schedules of up to ``max_steps`` steps: a :class:`ProduceRecords` (1 to ``max_count``
    records into one of ``logs`` logs), a :class:`CrashQuery` (at batch 0 to ``max_batch``),
    then produce / run / crash steps. Crashes are ``RAISE`` unless ``sigkill`` (then at most
    one ``SIGKILL``: each costs a child JVM). Shrinking removes steps and lowers counts."""
    from hypothesis import strategies as st

    for name, value, low in (
        ("logs", logs, 1),
        ("max_steps", max_steps, 2),
        ("max_count", max_count, 1),
        ("max_batch", max_batch, 0),
    ):
        if type(value) is not int or value < low:
            raise ConfigError(f"{name} must be an integer >= {low}, got {value!r}")
    hows = [CrashHow.RAISE, CrashHow.SIGKILL] if sigkill else [CrashHow.RAISE]
    produce = st.builds(
        ProduceRecords,
        count=st.integers(1, max_count),
        log=st.integers(0, logs - 1),
    )
    run = st.builds(RunBatches, batches=st.integers(1, 3))
    crash = st.builds(
        CrashQuery,
        batch=st.integers(0, max_batch),
        point=st.sampled_from(list(CrashPoint)),
        how=st.sampled_from(hows),
    )
    rest = st.lists(st.one_of(crash, produce, run), min_size=0, max_size=max_steps - 2)

    def assemble(parts: tuple[ProduceRecords, CrashQuery, list[StreamStep]]) -> StreamSchedule:
        first, crash_step, more = parts
        steps: list[StreamStep] = [first, crash_step, *more]
        kills = [
            i
            for i, s in enumerate(steps)
            if isinstance(s, CrashQuery) and s.how is CrashHow.SIGKILL
        ]
        for i in kills[1:]:
            step = steps[i]
            assert isinstance(step, CrashQuery)
            steps[i] = CrashQuery(batch=step.batch, point=step.point, how=CrashHow.RAISE)
        return StreamSchedule(steps=tuple(steps))

    return st.tuples(produce, crash, rest).map(assemble)
