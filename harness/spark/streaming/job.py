"""An unchanged PySpark Structured Streaming job as a system under test: :func:`run_job`.

A :class:`SparkJob` names the job's code (``job.py``, ``job.py:function`` or
``module:function``, with its arguments), its input topics, and what the harness observes:
Kafka output topics and other sinks (:class:`JobSink`: a Spark file sink, a SQLite table
or lines in files, written by the job's ``foreachBatch``). :func:`run_job` runs one
:class:`~harness.faults.streams.StreamSchedule` against it and returns a :class:`JobResult`
whose history the checkers judge::

    job = SparkJob("wordcount.py", inputs=("words",), sinks=("sqlite:/tmp/c.db:counts",),
                   table=("word", "count"), value_format="words")
    result = run_job(job, schedule, workdir=tmp)
    check(result.history, Guarantee.EXACTLY_ONCE)

Each ``RunBatches`` / ``CrashQuery`` step runs the job's code anew (a redeployed driver),
under :func:`harness.spark.streaming._interpose.interposed`: its Kafka source and sink are the
reference log's, its query runs ``Trigger.AvailableNow`` (so it stops once the input is
processed) and its paths are the schedule's copies. A ``CrashQuery`` crashes the run's
micro-batch ``batch`` at ``before-write``, ``after-write`` or ``after-commit``, raised in this
process (``RAISE``) or by a SIGKILL of a child driver (``SIGKILL``), as
:mod:`harness.spark.streaming._faultgate` describes. ``ProduceRecords`` steps between runs
are input arriving while the job is down. The run then drains (a last fault-free run),
observes the sinks (``observe`` events, attributed to input records by the sink's lineage)
and ends ``complete`` when the drain's query ended normally. A failure of Spark or of the
job is an ``error`` event and, in the drain, an ``incomplete`` end (UNKNOWN), never an
exception; a bad option of the job (an unknown Kafka option) raises
:class:`~harness.errors.ConfigError`. Importing this module imports no pyspark.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, final

from harness._usage import did_you_mean
from harness.errors import ConfigError, MissingDependency
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
    EventKind,
    History,
    HistoryMeta,
    SinkKind,
    SinkSpec,
)
from harness.log.namespace import leveldb_uri, open_namespace
from harness.log.record import LogRecord
from harness.spark.streaming._children import ChildSilent, Reports, kill_tree, launch, wait_exit
from harness.spark.streaming.runner import (
    FiredCrash,
    _Outcome,
    _Recorder,
    append_records,
    describe,
    first_line,
    play,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "JOB_MASTER",
    "JobResult",
    "JobSink",
    "RowLineage",
    "SparkJob",
    "job_session",
    "quiet_session",
    "run_job",
]

BASE_TIMESTAMP_MS: Final = 1_700_000_000_000
_TOKEN: Final = re.compile(r"(?<![A-Za-z0-9_])[rR](\d{1,12})(?![A-Za-z0-9_])")
_SINK_KINDS: Final = ("kafka", "files", "sqlite", "lines", "table")
_VALUE_FORMATS: Final = ("json", "text", "words")
JOB_MASTER: Final = "local[2,2]"
"""The master the harness starts a job's session on when none runs (the CLI, a child
driver): two cores, and a failed task tried again once, as on a cluster (Spark's local mode
retries no task unless its master says so: ``local[N,M]``, M attempts)."""

RowLineage = Callable[[Mapping[str, Any]], "str | Iterable[str] | None"]
"""Which input record id(s) an output row (a dict of its columns) comes from. The lineage
adapter of :mod:`harness.spark.streaming.job`; meant to be unified with the Kafka door's
lineage functions (which take a ``Produced`` message) behind one protocol later."""


def row_ids(row: Mapping[str, Any], id_column: str | None) -> list[str]:
    """The default row lineage: the ``id_column``'s value, else every ``r<N>`` token found
    in the row's values (strings, bytes, nested JSON), in order, once each."""
    if id_column is not None:
        value = row.get(id_column)
        return [] if value is None else [str(value)]
    text = json.dumps(
        {
            k: v.decode("utf-8", "replace") if isinstance(v, (bytes, bytearray)) else v
            for k, v in row.items()
        },
        default=str,
    )
    return list(dict.fromkeys(f"r{int(m.group(1))}" for m in _TOKEN.finditer(text)))


_FILE_FORMATS: Final = ("parquet", "json", "csv", "orc", "text")
"""Spark's file sink formats: a user who names one as the sink's kind is told files:PATH."""


@final
@dataclass(frozen=True, slots=True)
class JobSink:
    """A sink the harness observes after the drain, in the job's own terms (its paths are
    redirected like the job's): ``kafka:TOPIC``, ``files:PATH`` (a Spark file sink, read
    through its ``_spark_metadata`` log), ``sqlite:DB:TABLE`` (each row, or with
    :attr:`SparkJob.table` a key -> count table), ``lines:GLOB`` (each non-empty line of
    the matching files), ``table:NAME`` (what ``writeStream.toTable(NAME)`` wrote: a file
    sink at the table's warehouse path) or ``console`` (the rows the console sink would
    have printed)."""

    kind: str
    location: str
    table: str | None = None

    @classmethod
    def parse(cls, spec: str) -> JobSink:
        kind, _, rest = str(spec).partition(":")
        if kind == "console" and not rest:
            return cls("console", "")
        if kind not in _SINK_KINDS or not rest:
            hint = did_you_mean(kind, (*_SINK_KINDS, "console")) if kind not in _SINK_KINDS else ""
            if kind in _FILE_FORMATS and rest:  # a format's name where the kind goes
                hint = f"; a {kind} file sink, as any Spark file sink, is files:{rest}"
            raise ConfigError(
                f"sink {spec!r:.80} must be kafka:TOPIC, files:PATH, sqlite:DB:TABLE, "
                f"lines:GLOB, table:NAME or console{hint}"
            )
        if kind == "sqlite":
            location, _, table = rest.rpartition(":")
            if not location or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", table):
                raise ConfigError(f"sink {spec!r:.80} must be sqlite:DB:TABLE (a plain table name)")
            return cls(kind, location, table)
        return cls(kind, rest)

    @property
    def name(self) -> str:
        if self.kind in ("kafka", "console"):
            return self.location or self.kind
        return f"{self.kind}:{self.location}" + (f":{self.table}" if self.table else "")


def _values(value_format: str, record_id: str, key: str) -> tuple[bytes, bytes]:
    if value_format == "json":
        body = json.dumps({"id": record_id, "key": key, "value": 1}, separators=(",", ":"))
    elif value_format == "text":
        body = f"{record_id} {key} 1"
    else:
        body = key
    return key.encode(), body.encode()


@final
@dataclass(frozen=True)
class SparkJob:
    """An unchanged job and what the harness feeds it and observes (module docstring).

    ``inputs``: the topics the harness produces to (``partitions`` each); record ``n`` is
    ``r<n>`` with key ``k<n % keys>`` and value ``{"id":"r<n>","key":..,"value":1}``
    (``value_format`` ``json``), ``r<n> k<m> 1`` (``text``) or ``k<m>`` (``words``: the key
    alone, for word counts). ``outputs``: Kafka topics the job may write, observed as
    sinks. ``table``: ``(key_column, count_column)`` makes the ``sqlite``/``files`` sinks a
    key -> count table checked against the input's keys. ``lineage``/``id_column``: how an
    output row names its input (default: ``r<N>`` tokens in its values).
    ``max_offsets_per_trigger``: the Kafka source's ``maxOffsetsPerTrigger`` when the job
    sets none (None: the job's own, else everything available per batch).
    ``upstream_resends``: the input's producer resends (an at-least-once upstream).
    """

    app: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...] = ()
    sinks: tuple[JobSink, ...] = ()
    argv: tuple[str, ...] = ()
    partitions: int = 1
    keys: int = 3
    value_format: str = "json"
    table: tuple[str, str] | None = None
    id_column: str | None = None
    lineage: RowLineage | None = None
    max_offsets_per_trigger: int | None = None
    shuffle_partitions: int = 2
    timeout_s: float = 300.0
    upstream_resends: bool = False
    """The input's producer is at-least-once: the search also plans and draws its resends
    (``ResendRecords``), as the simulator's ``Topology(upstream_resends=True)``."""

    def __post_init__(self) -> None:
        file, colon, function = str(self.app).rpartition(":")
        if not (colon and file.endswith(".py")):
            file, function = str(self.app), ""
        if file.endswith(".py"):  # the job runs in the schedule's directory
            app = os.path.abspath(file) + (f":{function}" if function else "")
            object.__setattr__(self, "app", app)
        object.__setattr__(self, "inputs", tuple(self.inputs))
        object.__setattr__(self, "outputs", tuple(self.outputs))
        object.__setattr__(self, "argv", tuple(self.argv))
        object.__setattr__(
            self,
            "sinks",
            tuple(s if isinstance(s, JobSink) else JobSink.parse(s) for s in self.sinks),
        )
        if not self.inputs:
            raise ConfigError("a Spark job needs at least one input topic")
        if self.value_format not in _VALUE_FORMATS:
            raise ConfigError(
                f"value_format must be one of {_VALUE_FORMATS}, got {self.value_format!r}"
            )
        if not self.checked_sinks():
            raise ConfigError("a Spark job needs an output topic or a sink to observe")
        for name in ("partitions", "keys", "shuffle_partitions"):
            if type(getattr(self, name)) is not int or getattr(self, name) < 1:
                raise ConfigError(f"{name} must be an integer >= 1, got {getattr(self, name)!r}")

    def checked_sinks(self) -> tuple[JobSink, ...]:
        declared = {s.name for s in self.sinks}
        kafka = tuple(JobSink("kafka", t) for t in self.outputs if t not in declared)
        return kafka + self.sinks

    def sink_spec(self, sink: JobSink) -> SinkSpec:
        if self.table is not None and sink.kind in ("sqlite", "files", "console", "table"):
            return SinkSpec(kind=SinkKind.TABLE, aggregate=Aggregate.COUNT)
        return SinkSpec(kind=SinkKind.LOG)

    def logs(self) -> tuple[str, ...]:
        from harness.spark.streaming._kafkalog import kafka_log

        return tuple(kafka_log(t, p) for t in self.inputs for p in range(self.partitions))

    def to_json(self) -> dict[str, Any] | None:
        """The job as JSON, for a replay file that runs it again without the command line;
        None when its lineage function cannot be found again by name (a lambda, a local
        function)."""
        lineage = None
        if self.lineage is not None:
            lineage = _named(self.lineage)
            if lineage is None:
                return None
        return {
            "app": self.app,
            "inputs": list(self.inputs),
            "outputs": list(self.outputs),
            "sinks": [
                s.kind
                if s.kind == "console"
                else f"{s.kind}:{s.location}" + (f":{s.table}" if s.table else "")
                for s in self.sinks
            ],
            "argv": list(self.argv),
            "partitions": self.partitions,
            "keys": self.keys,
            "value_format": self.value_format,
            "table": None if self.table is None else list(self.table),
            "id_column": self.id_column,
            "lineage": lineage,
            "max_offsets_per_trigger": self.max_offsets_per_trigger,
            "shuffle_partitions": self.shuffle_partitions,
            "timeout_s": self.timeout_s,
            "upstream_resends": self.upstream_resends,
        }

    @classmethod
    def from_json(cls, data: object, where: str = "the job") -> SparkJob:
        """The job :meth:`to_json` wrote; bad input raises :class:`ConfigError`."""
        if not isinstance(data, Mapping) or not isinstance(data.get("app"), str):
            raise ConfigError(f"{where} must be an object naming its app, got {data!r:.80}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"{where} has unknown key(s) {unknown}; known: {sorted(known)}")
        values = dict(data)
        try:
            if values.get("table") is not None:
                key, count = values["table"]
                values["table"] = (str(key), str(count))
            if values.get("lineage") is not None:
                from harness.effects.sources import load_named

                values["lineage"] = load_named(str(values["lineage"]), "lineage function")
            for name in ("inputs", "outputs", "sinks", "argv"):
                values[name] = tuple(str(v) for v in values.get(name, ()))
            return cls(**values)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"{where} is not a Spark job's JSON: {exc}") from None


def _named(function: Callable[..., Any]) -> str | None:
    """``module:qualname`` of ``function`` when importing that name gives it back."""
    from harness.effects.sources import load_named

    module = getattr(function, "__module__", None)
    name = f"{module}:{getattr(function, '__qualname__', '')}"
    if not module or module == "__main__" or "<" in name:
        return None
    try:
        return name if load_named(name, "lineage function") is function else None
    except ConfigError:
        return None


@final
@dataclass(frozen=True, slots=True)
class JobResult:
    """What :func:`run_job` returns: the history, the crashes that fired, the query runs."""

    schedule: StreamSchedule
    history: History
    crashes: tuple[FiredCrash, ...]
    query_runs: int
    errors: tuple[str, ...] = ()
    task_failures: tuple[Mapping[str, Any], ...] = ()
    """Each task a ``FailTask`` step failed: ``step``, ``process``, ``batch``, ``at`` (read,
    write) and ``retried`` (the run went on: Spark retried it)."""
    resends: int = 0
    """Records the upstream appended again (``ResendRecords``)."""


def run_job(
    job: SparkJob,
    schedule: StreamSchedule,
    *,
    workdir: str | os.PathLike[str],
    spark: SparkSession | None = None,
    run_id: str = "run",
) -> JobResult:
    """Run ``schedule`` against ``job`` in the empty directory ``workdir`` (module docstring)."""
    if not isinstance(job, SparkJob):
        raise ConfigError(f"job must be a SparkJob, got {job!r:.80}")
    if not isinstance(schedule, StreamSchedule):
        raise ConfigError(f"schedule must be a StreamSchedule, got {schedule!r:.80}")
    return _JobRunner(job, schedule, Path(workdir), spark, run_id).run()


@dataclass
class _JobRunner:
    job: SparkJob
    schedule: StreamSchedule
    workdir: Path
    spark: SparkSession | None
    run_id: str
    recorder: _Recorder = field(default_factory=_Recorder)
    crashes: list[FiredCrash] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    records: int = 0
    processes: int = 0
    offsets: dict[str, int] = field(default_factory=dict)
    appended: dict[str, list[int]] = field(default_factory=dict)
    """Per log, the numbers of the records produced to it (what a resend appends again)."""
    txids: int = 0
    task_failures: list[dict[str, int]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.workdir = self.workdir.absolute()
        self.workdir.mkdir(parents=True, exist_ok=True)
        if any(self.workdir.iterdir()):
            raise ConfigError(
                f"workdir {str(self.workdir)!r} must be empty: a run starts from nothing"
            )
        self.uri = leveldb_uri(self.workdir / "namespace")
        self.logs = self.job.logs()
        self.offsets = dict.fromkeys(self.logs, 0)
        self.appended = {log: [] for log in self.logs}
        with open_namespace(self.uri) as namespace:
            for log in self.logs:
                namespace.create_log(log)

    def run(self) -> JobResult:
        play(self.schedule, self.recorder, self._produce, self._query, self._drain)
        meta = HistoryMeta(
            partitions=self.logs,
            sinks={s.name: self.job.sink_spec(s) for s in self.job.checked_sinks()},
            run_id=self.run_id,
            extra={
                "system": "spark-job",
                "app": self.job.app,
                "schedule": self.schedule.to_json(),
                "crashes": [c.to_json() for c in self.crashes],
                "task_failures": list(self.task_failures),
            },
        )
        return JobResult(
            schedule=self.schedule,
            history=History(meta=meta, events=tuple(self.recorder.events)),
            crashes=tuple(self.crashes),
            query_runs=self.processes,
            errors=tuple(self.errors),
            task_failures=tuple(self.task_failures),
            resends=sum(
                1 for e in self.recorder.events if e.kind is EventKind.APPEND and e.detail == RESENT
            ),
        )

    def _produce(self, step: ProduceRecords | ResendRecords) -> None:
        from harness.spark.streaming._kafkalog import encode_message

        log = self.logs[step.log % len(self.logs)]
        again = self.appended[log][-step.count :] if isinstance(step, ResendRecords) else []
        if step.count == 0 or (isinstance(step, ResendRecords) and not again):
            return  # nothing to resend: the log has no records yet
        value_format = self.job.value_format

        def record(number: int, record_id: str, key: str) -> LogRecord:
            payload = encode_message(*_values(value_format, record_id, key))
            self.txids += 1  # increasing, resends included; a fresh log starts at the base
            return LogRecord(BASE_TIMESTAMP_MS + self.txids - 1, payload)

        append_records(
            self.recorder,
            self.uri,
            log,
            self.records,
            step.count,
            self.offsets[log],
            keys=self.job.keys,
            record=record,
            resent=again,
        )
        if not again:
            self.appended[log].extend(range(self.records, self.records + step.count))
            self.records += step.count
        self.offsets[log] += len(again) or step.count

    # -- query runs ---------------------------------------------------------------------

    def _gate(self, step: RunBatches | CrashQuery | FailTask | None) -> Any:
        from harness.spark.streaming._faultgate import Gate

        directory = self.workdir / "runs" / str(self.processes)
        if isinstance(step, FailTask):  # a Kafka sink's task fails after writing, else a read
            at = "write" if any(s.kind == "kafka" for s in self.job.checked_sinks()) else "read"
            gate = Gate(directory=str(directory), task=step.batch, task_at=at)
        elif isinstance(step, CrashQuery):
            gate = Gate(
                directory=str(directory),
                point=step.point.value,
                batch=step.batch,
                kill=step.how is CrashHow.SIGKILL,
                signal=str(directory / "signal") if step.how is CrashHow.SIGKILL else None,
            )
        else:
            gate = Gate(directory=str(directory), stop_after=step.batches if step else None)
        gate.save()
        return gate

    def _spec(self, gate: Any) -> dict[str, Any]:
        from harness.spark.streaming._interpose import JobRun

        run = JobRun(
            root=str(self.workdir / "world"),
            gate=gate.directory,
            uri=self.uri,
            inputs=dict.fromkeys(self.job.inputs, self.job.partitions),
            outputs=tuple(self.job.outputs),
            timeout_s=self.job.timeout_s,
            max_offsets=self.job.max_offsets_per_trigger,
            first=self.processes == 1,
        )
        return {"run": run.to_json(), "app": self.job.app, "argv": list(self.job.argv)}

    def _query(self, index: int, step: RunBatches | CrashQuery | FailTask | None) -> _Outcome:
        self.processes += 1
        process = self.processes
        self.recorder.add(EventKind.START, process=process)
        gate = self._gate(step)
        spec = self._spec(gate)
        if isinstance(step, CrashQuery) and step.how is CrashHow.SIGKILL:
            outcome = self._child(spec, gate)
        else:
            outcome = self._in_process(spec, gate)
        if outcome.fired and isinstance(step, CrashQuery):
            self.recorder.add(EventKind.CRASH, process=process, detail="process")
            self.crashes.append(
                FiredCrash(
                    step=index,
                    process=process,
                    point=outcome.point or step.point,
                    how=step.how,
                    batch=outcome.batch or 0,
                    rows=outcome.rows,
                )
            )
        elif outcome.error is not None:
            self.errors.append(outcome.error)
            self.recorder.add(EventKind.ERROR, process=process, detail=outcome.error)
        failed = gate.task_failed()
        if failed is not None:  # retried when the run went on without an error
            retried = outcome.error is None and not outcome.fired
            self.task_failures.append(
                {"step": index, "process": process, **failed, "retried": retried}
            )
        return outcome

    def _session(self) -> SparkSession:
        """The process's session itself, not one of its ``newSession()`` sessions: Spark 4.x
        finds a Python data source's stream reader and writer only on the session it was
        registered with (measured with pyspark 4.3: DATA_SOURCE_NOT_FOUND on a new session
        for one or the other). :func:`~harness.spark.streaming._interpose.interposed`
        puts back every setting the job changes."""
        if self.spark is None:
            self.spark = job_session()
        from harness.spark.streaming.kafka_source import register_kafka

        register_kafka(self.spark)
        return self.spark

    def _in_process(self, spec: dict[str, Any], gate: Any) -> _Outcome:
        from harness.spark.streaming import _interpose

        try:
            session = self._session()
        except (ConfigError, MissingDependency):
            raise
        except Exception as exc:  # a JVM that fails to start is Spark's failure
            return _Outcome(error=describe(exc))
        run = _interpose.JobRun.from_json(spec["run"])
        error = None
        try:
            with _interpose.interposed(run, session) as state:
                try:
                    _interpose.run_app(spec["app"], spec["argv"])
                finally:
                    _settle(session, run.timeout_s)
            if state.refused is not None:  # even if the job caught it: the run is not ours
                raise state.refused
            if state.timed_out:
                error = f"the job's query did not finish within {run.timeout_s:.0f}s; stopped"
            elif state.queries == 0:
                error = "the job ended without starting a streaming query"
        except ConfigError:
            raise
        except Exception as exc:  # the job's or Spark's failure: a verdict, not a crash
            error = _describe(exc)
        return self._outcome(gate, error)

    def _outcome(self, gate: Any, error: str | None) -> _Outcome:
        fired = gate.fired()
        if fired is not None:
            return _Outcome(
                fired=True,
                point=CrashPoint(fired["point"]),
                batch=fired["batch"],
                rows=fired["rows"],
            )
        query = _query_record(gate.directory)
        if error is None and query is not None and query.get("uncommit"):
            batch = _uncommit(query, gate)
            if batch is not None:
                return _Outcome(fired=True, point=CrashPoint.AFTER_WRITE, batch=batch)
        return _Outcome(error=error)

    def _child(self, spec: dict[str, Any], gate: Any) -> _Outcome:
        """Run the job in a child driver; SIGKILL it, whole, when it reaches its crash point."""
        directory = Path(gate.directory)
        fifo = directory / "signal"
        os.mkfifo(fifo)
        spec_path = directory / "child.json"
        spec_path.write_text(json.dumps(spec), encoding="utf-8")
        log_path = directory / "child.log"
        channel = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)
        try:
            child = launch(
                "harness.spark.streaming._job_driver", spec_path, directory / "spark", log_path
            )
            reports = Reports(child, channel, log_path)
            try:
                message = reports.next(self.job.timeout_s)
                while message == "started":
                    message = reports.next(self.job.timeout_s)
            except ChildSilent as exc:
                kill_tree(child)
                return _Outcome(error=first_line(str(exc)))
            except BaseException:
                kill_tree(child)
                raise
        finally:
            os.close(channel)
        if message.startswith("fired"):
            kill_tree(child)
            return self._outcome(gate, None)
        try:
            wait_exit(child, self.job.timeout_s, log_path)
        except ChildSilent as exc:
            return _Outcome(error=first_line(str(exc)))
        if message == "done":
            return self._outcome(gate, None)
        return _Outcome(error=message.partition(" ")[2] or "the child driver failed")

    # -- the drain ----------------------------------------------------------------------

    def _drain(self) -> str:
        outcome = self._query(len(self.schedule.steps), None)
        unobserved = self._observe()
        if outcome.error is not None:
            return f"incomplete: the drain's query failed: {outcome.error}"
        if unobserved is not None:
            return f"incomplete: a sink could not be observed: {unobserved}"
        return "complete"

    def _observe(self) -> str | None:
        from harness.spark.streaming import _observe

        root = str(self.workdir / "world")
        next_id = 1
        for sink in self.job.checked_sinks():
            try:
                rows = _observe.sink_rows(
                    sink, root, self.uri, self._query_records(), self._session
                )
            except (ConfigError, MissingDependency):
                raise
            except Exception as exc:  # Spark or SQLite could not read it: a verdict
                error = describe(exc)
                self.recorder.add(EventKind.ERROR, process=self.processes, detail=error)
                return error
            if self.job.sink_spec(sink).kind is SinkKind.TABLE:
                self._observe_table(sink, rows)
                continue
            for row in rows:
                ids: list[str | None] = [*self._lineage(row)] or [None]
                for part, record_id in enumerate(ids):
                    self.recorder.add(
                        EventKind.OBSERVE,
                        sink=sink.name,
                        output_id=next_id,
                        record_id=record_id,
                        part=part,
                        parts=len(ids),
                    )
                    next_id += 1
        return None

    def _lineage(self, row: Mapping[str, Any]) -> list[str]:
        if self.job.lineage is None:
            return row_ids(row, self.job.id_column)
        found = self.job.lineage(row)
        if found is None:
            return []
        return [found] if isinstance(found, str) else [str(i) for i in found]

    def _observe_table(self, sink: JobSink, rows: Sequence[Mapping[str, Any]]) -> None:
        assert self.job.table is not None
        key_column, count_column = self.job.table
        counts: dict[str, int] = {}
        for row in rows:
            if key_column not in row or count_column not in row:
                raise ConfigError(
                    f"sink {sink.name} has no columns {key_column!r} and {count_column!r} "
                    f"(it has {sorted(row)}); name them with table=(key_column, count_column)"
                )
            counts[str(row[key_column])] = int(row[count_column])
        for key in sorted(counts):
            self.recorder.add(EventKind.OBSERVE, sink=sink.name, key=key, value=counts[key])

    def _query_records(self) -> list[dict[str, Any]]:
        runs = self.workdir / "runs"
        found = [_query_record(str(runs / str(n))) for n in range(1, self.processes + 1)]
        return [q for q in found if q is not None]


def job_session() -> SparkSession:
    """The process's session, or one started on :data:`JOB_MASTER` when none runs."""
    from harness.spark.session import running_session, spark_session

    return running_session() or spark_session(JOB_MASTER)


def quiet_session() -> SparkSession:
    """:func:`job_session` for a front door, its logging off: the JVM logs every failed
    query with its traceback, the crashes are the harness's own and the verdict says what
    they did, so a CLI user sees none of them."""
    spark = job_session()
    spark.sparkContext.setLogLevel("OFF")
    jvm: Any = spark.sparkContext._jvm
    log4j = jvm.org.apache.logging.log4j
    log4j.core.config.Configurator.setAllLevels("org.apache.spark", log4j.Level.OFF)
    return spark


def _describe(exc: BaseException) -> str:
    """One line for a failure: :func:`describe`, plus the Java exception's line of a Py4J
    error (whose first line only names the JVM call)."""
    java = next((line[2:] for line in str(exc).splitlines() if line.startswith(": ")), None)
    head = describe(exc)
    return head if java is None else f"{head} {first_line(java)}"[:500]


def _query_record(directory: str) -> dict[str, Any] | None:
    path = Path(directory) / "query.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


def _uncommit(query: Mapping[str, Any], gate: Any) -> int | None:
    """Take back the checkpoint's commit entry of the run's last batch: the state a crash
    between a file sink's commit and the checkpoint's leaves. None when the run ran no
    batch or the job has no checkpoint of its own."""
    last = gate.last()
    checkpoint = query.get("checkpoint")
    if last is None or not checkpoint:
        return None
    commits = Path(checkpoint) / "commits"
    ids = (
        sorted(int(p.name) for p in commits.iterdir() if p.name.isdigit())
        if commits.is_dir()
        else []
    )
    if not ids:
        return None
    for name in (str(ids[-1]), f".{ids[-1]}.crc"):
        with contextlib.suppress(FileNotFoundError):
            (commits / name).unlink()
    return int(last)


def _settle(session: SparkSession, timeout_s: float) -> None:
    """Let the job's queries end (``AvailableNow`` ends them), then stop any left."""
    for query in session.streams.active:
        with contextlib.suppress(Exception):
            query.awaitTermination(max(1, int(timeout_s)))
        with contextlib.suppress(Exception):
            query.stop()
