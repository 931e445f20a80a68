"""Spark Structured Streaming under crash schedules: a real query, crashed, restarted, checked.

:func:`run_stream` puts one :class:`Variant` of a streaming query (the reference log as its
source, through :mod:`harness.spark.streaming.datasource`) under a
:class:`~harness.faults.streams.StreamSchedule` and returns a :class:`StreamResult`
whose :class:`~harness.history.events.History` the checkers judge::

    result = run_stream(Variant.FOREACH_BATCH_APPEND, schedule, workdir=tmp)
    check(result.history, Guarantee.EXACTLY_ONCE)  # INVALID, duplicate, after an after-write crash

Each step of the schedule runs as :mod:`harness.faults.streams` describes it. A
``CrashQuery`` crashes its run's micro-batch ``batch`` at ``point``:

- ``BEFORE_WRITE``: the batch's offsets are in the checkpoint's offset log, nothing of it is
  written (the source fails while planning the batch's partitions);
- ``AFTER_WRITE``: the batch's output is written, the checkpoint has not committed it (the
  ``foreachBatch`` function fails after its write; for the Parquet sink, whose write and
  commit happen inside Spark, the run stops after the batch and the checkpoint's commit
  entry for it is removed, which is the state a crash between the sink's commit and the
  checkpoint's leaves on disk);

killed ``RAISE`` (in this process: the micro-batch raises, the query dies with an exception)
or ``SIGKILL`` (the query runs in a child driver process, ``python -m
harness.spark.streaming._driver``, which blocks at the crash point and is killed with
``SIGKILL``, together with its JVM and Python workers). The runner knows how many batches a
run will have (it plans them as the source does), so a ``batch`` beyond the run's last
crashes the last one. A SIGKILL at ``AFTER_WRITE`` of the Parquet sink lands as the next batch
is planned, after the batch's commit (there is no hook inside Spark's sink commit); the
:class:`FiredCrash` records where each crash really landed.

Every step is valid in every state; a run with nothing to process starts no query. After the
steps the run **drains**: a fresh query processes everything, the sinks are observed, and the
history ends ``complete`` when the checkpoint's committed offsets reach every log's end.

**Failures of Spark are verdicts, never exceptions.** Whatever Spark does when a query
starts, runs, drains or is observed (an exception from the engine, a Python worker that
misses its deadline, a JVM that dies, a sink that cannot be read, a query that outlives
``timeout_s``), the run records an ``error`` event with Spark's message and ends
``incomplete: <why>``, which the checkers report as UNKNOWN. :func:`run_stream` raises only
for bad arguments (:class:`~harness.errors.ConfigError`) and for failures of the harness's
own world (its LevelDB namespace, its working directory).

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
import dataclasses
import enum
import json
import os
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, final

from harness.check.verdict import Guarantee
from harness.errors import ConfigError, HarnessError, MissingDependency
from harness.faults.streams import (
    CrashHow,
    CrashPoint,
    CrashQuery,
    FailTask,
    ProduceRecords,
    ResendRecords,
    RunBatches,
    StreamSchedule,
)
from harness.history.events import (
    RESENT,
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
from harness.spark.streaming._children import ChildSilent, Reports, kill_tree, launch, wait_exit
from harness.spark.streaming._gate import gate_path, start_gate

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "FiredCrash",
    "InjectedCrash",
    "RunSpec",
    "StreamConfig",
    "StreamResult",
    "Variant",
    "run_stream",
]

_INITIAL: Final = DLSN.INITIAL.to_json()
_START_FAILURES: Final = ("Python worker failed to connect back", "CANNOT_OPEN_SOCKET")
"""Spark's errors when its Python source runner, a fresh process per query, missed its fixed
10 s deadline to connect back to the JVM (a starved machine): the query died while it
initialized its source, before any batch."""
_ATTEMPTS: Final = 3
"""Query starts per step when Python workers miss their deadline (see :meth:`_Runner._retry`)."""
_ERROR_CHARS: Final = 500
_TRACEBACK: Final = "Traceback (most recent call last):"


def first_line(text: str) -> str:
    """One line for an error message: its first non-blank line, and when the message holds a
    Python traceback (a source that raised inside Spark) the traceback's exception line
    too; stripped, at most 500 characters."""
    lines = text.splitlines()
    head = next((line.strip() for line in lines if line.strip()), "(no message)")
    if _TRACEBACK in text:
        after = lines[next(i for i, line in enumerate(lines) if _TRACEBACK in line) + 1 :]
        raised = next((line for line in after if line.strip() and not line[0].isspace()), "")
        if raised.strip() and raised.strip() not in head:
            head = f"{head} ... {raised.strip()}"
    return head[:_ERROR_CHARS]


def describe(exc: BaseException) -> str:
    """One line for a failure of Spark: the exception's type and its message's first line."""
    return f"{type(exc).__name__}: {first_line(str(exc))}"


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
    """One query run, as plain data: what :mod:`harness.spark.streaming._driver` executes (in this
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
    start_gate: str | None = None
    """The machine's start gate (:mod:`harness.spark.streaming._gate`), held from the
    query's ``start()`` until its source is initialized; None: the caller holds it."""

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
    restarts: tuple[str, ...] = ()
    """Spark's errors for query starts that were made again because a Python worker missed
    its connect-back deadline before the query did anything (not in the history: nothing
    happened); empty on an unstarved machine."""

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


def play(
    schedule: StreamSchedule,
    recorder: _Recorder,
    produce: Callable[[ProduceRecords | ResendRecords], None],
    query: Callable[[int, RunBatches | CrashQuery | FailTask], Any],
    drain: Callable[[], str],
) -> None:
    """Execute ``schedule``: each produce (or resend) or query step in order, then the drain
    (a ``drain`` event, ``drain()`` says how the run ended), then the ``end`` event."""
    for index, step in enumerate(schedule.steps):
        if isinstance(step, (ProduceRecords, ResendRecords)):
            produce(step)
        else:
            query(index, step)
    end = "incomplete: the schedule has no drain"
    if schedule.drain:
        recorder.add(EventKind.DRAIN)
        end = drain()
    recorder.add(EventKind.END, detail=end)


def append_records(
    recorder: _Recorder,
    uri: str,
    log: str,
    first: int,
    count: int,
    offset: int,
    *,
    keys: int,
    record: Callable[[int, str, str], LogRecord],
    resent: Sequence[int] = (),
) -> None:
    """The producer appends records ``r<first>``... (``count``, key ``k<n % keys>``, value 1)
    to ``log`` from Kafka-style offset ``offset`` in one commit: an ``append`` event per record,
    then, once the commit returned, an ``ack`` each. ``record(n, record_id, key)`` makes the
    stored record. With ``resent`` (record numbers), the producer appends those records again
    instead (an at-least-once upstream's resend: ``append`` detail ``resent``)."""
    numbers = list(resent) or list(range(first, first + count))
    detail = RESENT if resent else None
    written: list[tuple[str, int]] = []
    with (
        open_namespace(uri) as namespace,
        namespace.open_log(log) as manager,
        manager.open_writer() as writer,
    ):
        for at, number in enumerate(numbers, offset):
            record_id, key = f"r{number}", f"k{number % keys}"
            writer.write(record(number, record_id, key))
            recorder.add(
                EventKind.APPEND,
                partition=log,
                offset=at,
                record_id=record_id,
                key=key,
                value=1,
                detail=detail,
            )
            written.append((record_id, at))
        writer.commit()
    for record_id, at in written:
        recorder.add(EventKind.ACK, partition=log, offset=at, record_id=record_id)


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
    Never raises for a failure of Spark: an engine that fails to start a query, to run it,
    to drain or to observe the sink, a JVM or child driver that dies or hangs past
    ``timeout_s``, all are recorded in the history (an ``error`` event with Spark's message)
    and end the run ``incomplete: <why>``, which the checkers report as UNKNOWN. Raises
    :class:`ConfigError` for bad arguments, :class:`~harness.errors.MissingDependency`
    without pyspark or Java, and :class:`HarnessError` when the harness's own world fails
    (its namespace, its directories, processes that survive SIGKILL).
    """
    if not isinstance(variant, Variant):
        raise ConfigError(f"variant must be a Variant, got {variant!r}")
    if not isinstance(schedule, StreamSchedule):
        raise ConfigError(f"schedule must be a StreamSchedule, got {schedule!r}")
    for step in schedule.steps:
        if isinstance(step, CrashQuery) and step.point is CrashPoint.AFTER_COMMIT:
            raise ConfigError(
                f"{step!r}: the built-in variants crash before-write or after-write; "
                "after-commit crashes are for unchanged jobs (harness.spark.streaming.job)"
            )
        if isinstance(step, (FailTask, ResendRecords)):
            raise ConfigError(
                f"{step!r}: the built-in variants take produce, run and crash steps; task "
                "failures and resends are for unchanged jobs (harness.spark.streaming.job)"
            )
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
        self.restarts: list[str] = []
        with open_namespace(self.uri) as namespace:
            for log in config.logs:
                namespace.create_log(log)

    # -- the steps ---------------------------------------------------------------------

    def run(self) -> StreamResult:
        play(self.schedule, self.recorder, self._produce, self._query, self._drain)
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
            restarts=tuple(self.restarts),
        )

    def _produce(self, step: ProduceRecords | ResendRecords) -> None:
        assert isinstance(step, ProduceRecords), "run_stream refuses resends"
        if step.count == 0:
            return
        log = self.config.logs[step.log % len(self.config.logs)]

        def record(number: int, record_id: str, key: str) -> LogRecord:
            payload = {"id": record_id, "key": key, "value": 1}
            return LogRecord(number, json.dumps(payload, separators=(",", ":")).encode())

        append_records(
            self.recorder,
            self.uri,
            log,
            self.records,
            step.count,
            self.offsets[log],
            keys=self.config.keys,
            record=record,
        )
        self.records += step.count
        self.offsets[log] += step.count

    def _batches_ahead(self) -> int:
        """How many micro-batches a query started now runs: a batch the checkpoint logged but
        did not commit (replayed first), then the batches the source plans up to every log's
        end, exactly as :class:`~harness.spark.streaming.datasource.DLogStreamReader` plans them."""
        from harness.spark.streaming.datasource import (
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
            start_gate=gate_path(),
            **gate,
        )

    def _query(self, index: int, step: RunBatches | CrashQuery | FailTask) -> None:
        assert not isinstance(step, FailTask), "run_stream refuses task failures"
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

    def _in_process(self, spec: RunSpec, *, drain: bool = False) -> _Outcome:
        from harness.spark.streaming import _driver

        def attempt() -> _Outcome:
            try:
                session = self._session()
            except (ConfigError, MissingDependency):
                raise
            except Exception as exc:  # a JVM that fails to start is Spark's failure
                return _Outcome(error=describe(exc))
            result = _driver.run_in_process(session, spec, timeout_s=self.config.timeout_s)
            return _Outcome(
                fired=bool(result.get("fired")),
                batch=result.get("batch"),
                rows=result.get("rows"),
                error=result.get("error"),
            )

        return self._retry(attempt, drain=drain)

    def _retry(self, attempt: Callable[[], _Outcome], *, drain: bool) -> _Outcome:
        """``attempt()``, made again (at most ``_ATTEMPTS`` in all) while it fails because a
        Python worker of Spark missed its start deadline and left the checkpoint as it was:
        the query died initializing its source, nothing happened. The drain is made again
        even when it got somewhere: it processes whatever remains."""
        outcome = _Outcome()
        for number in range(1, _ATTEMPTS + 1):
            before = _checkpoint_files(self.checkpoint)
            outcome = attempt()
            error = outcome.error
            if error is None or not any(text in error for text in _START_FAILURES):
                break
            if number == _ATTEMPTS or (not drain and _checkpoint_files(self.checkpoint) != before):
                break
            self.restarts.append(error)
        return outcome

    def _session(self) -> SparkSession:
        if self._spark is None:
            from harness.spark.session import spark_session

            self._spark = spark_session()
        return self._spark

    # -- SIGKILL of a child driver ----------------------------------------------------------

    def _kill(self, step: CrashQuery, ahead: int) -> _Outcome:
        batch = min(step.batch, ahead - 1)
        if step.point is CrashPoint.BEFORE_WRITE:
            spec = self._spec(block_at=batch)
        elif self.variant is Variant.PARQUET:
            # no hook between the file sink's write and its commit: the kill lands as the
            # next batch is planned (a one-batch run: as its only batch is planned)
            spec = self._spec(block_at=min(step.batch + 1, ahead - 1))
        else:
            spec = self._spec(after_write_at=batch)
        return self._retry(lambda: self._child(spec), drain=False)

    def _child(self, spec: RunSpec) -> _Outcome:
        """Run ``spec`` in a child driver; SIGKILL it, whole, when it reaches its crash point.

        The child's JVM boots and its query starts under the machine's start gate, held
        here until the child reports ``started``: a JVM booting next to a Python source
        runner is what starves the runner past its deadline."""
        self.children += 1
        number = self.children
        fifo = self.workdir / f"child-{number}.signal"
        os.mkfifo(fifo)
        spec = dataclasses.replace(spec, signal=str(fifo), start_gate=None)
        log_path = self.workdir / f"child-{number}.log"
        # Opened read-write so that the FIFO always has a writer: select() then waits for
        # data instead of reporting end-of-file while no child has it open.
        channel = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)
        try:
            with contextlib.ExitStack() as gate:
                gate.enter_context(start_gate(gate_path()))
                child = self._launch(spec, number, log_path)
                reports = Reports(child, channel, log_path)
                try:
                    message = reports.next(self.config.timeout_s)
                    if message == "started":
                        gate.close()
                        message = reports.next(self.config.timeout_s)
                except ChildSilent as exc:
                    kill_tree(child)
                    return _Outcome(error=first_line(str(exc)))
                except BaseException:
                    kill_tree(child)
                    raise
        finally:
            os.close(channel)
        return self._reported(child, message, log_path)

    def _launch(self, spec: RunSpec, number: int, log_path: Path) -> subprocess.Popen[bytes]:
        spec_path = self.workdir / f"child-{number}.json"
        spec_path.write_text(json.dumps(spec.to_json()), encoding="utf-8")
        scratch = self.workdir / f"child-{number}-spark"
        return launch("harness.spark.streaming._driver", spec_path, scratch, log_path)

    def _reported(self, child: subprocess.Popen[bytes], message: str, log: Path) -> _Outcome:
        words = message.split()
        if words and words[0] == "fired":
            kill_tree(child)
            rows = int(words[3])
            return _Outcome(
                fired=True,
                point=CrashPoint(words[1]),
                batch=int(words[2]),
                rows=rows if rows >= 0 else None,
            )
        try:
            wait_exit(child, self.config.timeout_s, log)
        except ChildSilent as exc:
            return _Outcome(error=first_line(str(exc)))
        if words and words[0] == "done":
            return _Outcome()
        return _Outcome(error=message.partition(" ")[2] or "the child driver failed")

    # -- the drain ------------------------------------------------------------------------

    def _drain(self) -> str:
        from harness.spark.streaming.datasource import latest_offsets

        outcome = _Outcome()
        if self._batches_ahead():  # else the checkpoint has every log's end committed already
            self.processes += 1
            self.recorder.add(EventKind.START, process=self.processes)
            self.query_runs += 1
            outcome = self._in_process(self._spec(), drain=True)
            if outcome.error is not None:
                self.recorder.add(EventKind.ERROR, process=self.processes, detail=outcome.error)
        state = _checkpoint_state(self.checkpoint)
        latest = latest_offsets(self.uri, self.config.logs)
        behind = [
            log
            for log in self.config.logs
            if state.committed.get(log, _INITIAL) != latest[log].to_json()
        ]
        unobserved = self._observe()
        if outcome.error is not None:
            return f"incomplete: the drain's query failed: {outcome.error}"
        if unobserved is not None:
            return f"incomplete: the sink could not be observed: {unobserved}"
        if state.uncommitted is not None or behind:
            return (
                "incomplete: after the drain the checkpoint has not committed the end of "
                f"log(s) {', '.join(behind) or '(a batch is still uncommitted)'}"
            )
        return "complete"

    def _observe(self) -> str | None:
        """Record what the sink holds (``observe`` events); when Spark cannot read it, record
        an ``error`` event instead and return its one-line description."""
        from harness.spark.streaming import _driver

        try:
            rows = _driver.observe(self._session(), self._spec())
        except (ConfigError, MissingDependency):
            raise
        except Exception as exc:  # Spark's failure to read the sink: a verdict, not a crash
            error = describe(exc)
            self.recorder.add(EventKind.ERROR, process=self.processes, detail=error)
            return error
        self._record_observations(rows)
        return None

    def _record_observations(self, rows: Sequence[Mapping[str, Any]]) -> None:
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


def _checkpoint_files(checkpoint: Path) -> tuple[set[int], set[int]]:
    """The batch ids in the checkpoint's offset and commit logs: what a query run changes."""
    return _batch_ids(checkpoint / "offsets"), _commit_ids(checkpoint)
