"""The PySpark API, interposed for one query run of an unchanged job: :func:`interposed`.

While the context is open (one query run, in this process or in a child driver):

* ``SparkSession.builder...getOrCreate()`` returns the harness's session (local mode, a
  session of its own on the harness's JVM), with the job's builder settings applied where
  Spark lets a running session take them (static and core settings are ignored);
  ``spark.stop()`` does nothing (the harness owns the JVM);
* ``readStream.format("kafka")`` / ``writeStream.format("kafka")`` / ``write.format("kafka")``
  become the reference log's Kafka source and sink
  (:mod:`harness.spark.streaming.kafka_source`), the job's options validated first;
* ``writeStream.start()`` runs with ``Trigger.AvailableNow`` whatever trigger the job set,
  so the query stops once the input the run can see is processed (the job's own
  ``awaitTermination()`` then returns), and carries the run's crash points
  (:class:`~harness.spark.streaming._faultgate.Gate`); ``foreachBatch`` functions are
  wrapped to report their write;
* the job's own paths (``checkpointLocation``, ``path``, file sinks, batch reads and writes,
  ``spark.sql.streaming.checkpointLocation``, ``sqlite3.connect``) are redirected under the
  schedule's directory (:func:`redirect`): fresh per schedule, kept across its restarts;
  the job runs with the schedule's ``cwd`` directory as its working directory.

Everything is put back when the context closes. This module imports pyspark.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

from pyspark.sql import DataFrameReader, DataFrameWriter, SparkSession
from pyspark.sql.conf import RuntimeConfig
from pyspark.sql.streaming.readwriter import DataStreamReader, DataStreamWriter

from harness.errors import ConfigError
from harness.faults.streams import CrashPoint
from harness.log.dlsn import DLSN
from harness.spark.streaming._driver import _await_sources
from harness.spark.streaming._faultgate import Gate
from harness.spark.streaming._gate import gate_path, start_gate
from harness.spark.streaming._interpose_paths import redirect, table_path
from harness.spark.streaming.datasource import latest_offsets
from harness.spark.streaming.kafka_source import (
    KAFKA_SOURCE_NAME,
    kafka_sink_options,
    kafka_source_options,
    register_kafka,
)

__all__ = ["QUERY_FILE", "JobRun", "SecondQuery", "interposed", "redirect", "run_app"]

QUERY_FILE: Final = "query.json"
"""What the run's query was (sink format, paths, schema), in the run's gate directory."""
_SETTINGS: Final = {"spark.sql.shuffle.partitions": "2", "spark.sql.adaptive.enabled": "false"}
"""The harness's settings for a job's run (a job's own settings override them): few
partitions for a few records, and plans that do not change between a batch and its replay."""
_NO_HOOK_SINKS: Final = frozenset({"foreachbatch", "kafka", "console"})


@dataclass(frozen=True, slots=True)
class JobRun:
    """Everything one query run of a job needs, as plain data (a child driver reads it)."""

    root: str
    """The schedule's directory: redirected paths live under ``root/fs`` and ``root/cwd``."""
    gate: str
    """This run's gate directory (:class:`Gate`, :data:`QUERY_FILE`)."""
    uri: str
    inputs: dict[str, int]
    """Input topic -> partitions."""
    outputs: tuple[str, ...]
    timeout_s: float = 300.0
    max_offsets: int | None = None
    """``maxOffsetsPerTrigger`` when the job sets none (None: the job's own)."""
    first: bool = True
    """The schedule's first run of the job (see ``_State.pinned``)."""

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["outputs"] = list(self.outputs)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> JobRun:
        values = dict(data)
        values["outputs"] = tuple(values["outputs"])
        return cls(**values)


class SecondQuery(ConfigError):
    """The job started a second streaming query, which the harness does not model: its runs
    are one query's (one gate of crash points, one query record for the observation and the
    after-write fallback, one ``AvailableNow`` run to drain). The message names both queries
    and what is supported; the run stops rather than put one query under crashes and let
    the other run unwatched."""

    def __init__(self, first: str, second: str) -> None:
        super().__init__(
            f"the job starts a second streaming query, {second}, after {first}: several "
            "queries per job are not modelled (the harness runs one streaming query per job: "
            "its crash points, its drain and its observed sinks are that query's); run each "
            "query as a job of its own (e.g. chosen by an argument after --), or write both "
            "sinks from one foreachBatch"
        )
        self.first, self.second = first, second


def _described(writer: Any) -> str:
    """A query as :class:`SecondQuery` names it: its name, its sink and where it writes, as
    the job wrote them."""
    sink = getattr(writer, "_harness_format", None) or "parquet"
    name = getattr(writer, "_harness_name", None)
    where = (getattr(writer, "_harness_kafka", None) or {}).get("topic")
    target = f", topic {where!r}" if where else ""
    path = getattr(writer, "_harness_given_path", None)
    target = target or (f", path {path!r}" if path else "")
    return f"{'query ' + repr(name) if name else 'the query'} ({sink} sink{target})"


def _text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


@dataclass
class _State:
    run: JobRun
    session: SparkSession
    on_started: Callable[[], None] | None
    patches: list[tuple[Any, str, Any]] = field(default_factory=list)
    queries: int = 0
    first_query: str | None = None
    """The job's first query, as :class:`SecondQuery` names it."""
    refused: SecondQuery | None = None
    """A second query's refusal, raised again after the run even if the job caught it."""
    timed_out: bool = False
    saved: dict[str, str | None] = field(default_factory=dict)
    """The session's settings before the job changed them, put back after the run."""

    def patch(self, owner: Any, name: str, make: Callable[[Any], Any]) -> None:
        original = owner.__dict__[name]
        self.patches.append((owner, name, original))
        setattr(owner, name, make(original))

    def original(self, owner: Any, name: str) -> Any:
        for patched_owner, patched_name, original in self.patches:
            if patched_owner is owner and patched_name == name:
                return original
        return owner.__dict__[name]

    def redirect(self, path: Any) -> Any:
        return redirect(self.run.root, path)

    def pinned(self, log: str) -> DLSN:
        """Where ``startingOffsets`` ``latest`` starts ``log`` when Spark asks (only when the
        query has no offsets in its checkpoint): in the schedule's first run, the log's start
        (the job was deployed before its producers); in a later run (a restarted job without
        a checkpoint, or whose first run logged no batch) the log's end now, as Spark's Kafka
        source resolves it at that start: what arrived while the job was down is skipped."""
        if self.run.first:
            return DLSN.INITIAL
        return latest_offsets(self.run.uri, [log])[log]

    def gate(self) -> Gate:
        return Gate.load(self.run.gate) or Gate(directory=self.run.gate)


def _session_patches(state: _State) -> None:
    def get_or_create(original: Any) -> Any:
        def getOrCreate(builder: Any) -> SparkSession:
            for key, value in dict(getattr(builder, "_options", {})).items():
                if key in ("spark.master", "spark.app.name"):
                    continue
                with contextlib.suppress(Exception):  # static or core: not for a running JVM
                    state.session.conf.set(key, _text(value))
            return state.session

        return getOrCreate

    def conf_set(original: Any) -> Any:
        def set(conf: Any, key: str, value: Any) -> None:
            if key == "spark.sql.streaming.checkpointLocation":
                value = state.redirect(value)
            if key not in state.saved:
                state.saved[key] = conf.get(key, None)
            original(conf, key, value)

        return set

    state.patch(SparkSession.Builder, "getOrCreate", get_or_create)
    state.patch(SparkSession, "stop", lambda original: lambda session: None)
    state.patch(RuntimeConfig, "set", conf_set)
    state.patch(sqlite3, "connect", lambda original: _sqlite_connect(state, original))


def _sqlite_connect(state: _State, original: Any) -> Any:
    def connect(database: Any, *args: Any, **kwargs: Any) -> Any:
        named = isinstance(database, (str, os.PathLike)) and os.fspath(database) != ":memory:"
        if named and not os.fspath(database).startswith("file:"):
            database = state.redirect(database)
            Path(database).parent.mkdir(parents=True, exist_ok=True)
        return original(database, *args, **kwargs)

    return connect


def _reader_patches(state: _State) -> None:
    def fmt(original: Any) -> Any:
        def format(reader: Any, source: str) -> Any:
            if source.lower() == "kafka":
                reader._harness_kafka = {}
                return original(reader, KAFKA_SOURCE_NAME)
            return original(reader, source)

        return format

    def opt(original: Any) -> Any:
        def option(reader: Any, key: str, value: Any) -> Any:
            collected = getattr(reader, "_harness_kafka", None)
            if collected is not None:
                collected[key] = _text(value)
                return reader
            return original(reader, key, value)

        return option

    def load(original: Any) -> Any:
        def load(
            reader: Any, path: Any = None, format: Any = None, schema: Any = None, **options: Any
        ) -> Any:
            if format is not None:
                reader.format(format)
            for key, value in options.items():
                reader.option(key, value)
            collected = getattr(reader, "_harness_kafka", None)
            if collected is None:
                return original(reader, path, schema=schema)
            run = state.run
            translated = kafka_source_options(
                collected, uri=run.uri, partitions=run.inputs, pinned=state.pinned
            )
            if run.max_offsets is not None:
                translated.setdefault("maxRecordsPerBatch", str(run.max_offsets))
            translated["harness.gate"] = run.gate
            set_option = state.original(DataStreamReader, "option")
            for key, value in translated.items():
                set_option(reader, key, value)
            return original(reader, schema=schema)

        return load

    state.patch(DataStreamReader, "format", fmt)
    state.patch(DataStreamReader, "option", opt)
    state.patch(DataStreamReader, "options", _options)
    state.patch(DataStreamReader, "load", load)


def _options(original: Any) -> Any:
    def options(self: Any, **given: Any) -> Any:
        for key, value in given.items():
            self.option(key, value)
        return self

    return options


def _writer_patches(state: _State) -> None:
    def fmt(original: Any) -> Any:
        def format(writer: Any, source: str) -> Any:
            writer._harness_format = source.lower()
            if source.lower() == "console":
                return state.original(DataStreamWriter, "foreachBatch")(
                    writer, _console_capture(state)
                )
            if source.lower() == "kafka":
                writer._harness_kafka = {}
                return original(writer, KAFKA_SOURCE_NAME)
            return original(writer, source)

        return format

    def opt(original: Any) -> Any:
        def option(writer: Any, key: str, value: Any) -> Any:
            lowered = key.lower()
            if lowered == "path":
                writer._harness_given_path = _text(value)
            if lowered in ("checkpointlocation", "path"):
                value = state.redirect(_text(value))
                setattr(writer, f"_harness_{lowered}", value)
            collected = getattr(writer, "_harness_kafka", None)
            if collected is not None and lowered != "checkpointlocation":
                collected[key] = _text(value)
            return original(writer, key, value)

        return option

    def for_each_batch(original: Any) -> Any:
        def foreachBatch(writer: Any, func: Callable[[Any, int], None]) -> Any:
            writer._harness_format = "foreachbatch"

            def write_then_report(frame: Any, batch_id: int) -> None:
                func(frame, batch_id)
                state.gate().after_write(None)

            return original(writer, write_then_report)

        return foreachBatch

    state.patch(DataStreamWriter, "format", fmt)
    state.patch(DataStreamWriter, "option", opt)
    state.patch(DataStreamWriter, "options", _options)
    state.patch(DataStreamWriter, "foreachBatch", for_each_batch)

    def query_name(original: Any) -> Any:
        def queryName(writer: Any, queryName: str) -> Any:
            writer._harness_name = queryName
            return original(writer, queryName)

        return queryName

    state.patch(DataStreamWriter, "queryName", query_name)
    state.patch(DataStreamWriter, "trigger", lambda original: lambda writer, **kw: writer)
    state.patch(DataStreamWriter, "start", lambda original: _start(state, original))
    state.patch(DataStreamWriter, "toTable", lambda original: _to_table)


CONSOLE_FILE: Final = "console.jsonl"
"""Where the console sink's rows go, one JSON object per line (``batch`` and the columns),
in the schedule's directory: what the job would have printed, for ``--sink console``."""


def _console_capture(state: _State) -> Callable[[Any, int], None]:
    """The console sink as a ``foreachBatch`` function: each batch's rows appended to
    :data:`CONSOLE_FILE` instead of printed, then the after-write crash point."""

    def capture(frame: Any, batch_id: int) -> None:
        rows = [r.asDict(recursive=True) for r in frame.collect()]
        path = Path(state.run.root) / CONSOLE_FILE
        with path.open("a", encoding="utf-8") as out:
            for row in rows:
                out.write(json.dumps({"batch": batch_id, **row}, default=str) + "\n")
        state.gate().after_write(len(rows))

    return capture


def _to_table(
    writer: Any,
    tableName: str,
    format: Any = None,
    outputMode: Any = None,
    partitionBy: Any = None,
    queryName: Any = None,
    **options: Any,
) -> Any:
    """``writeStream.toTable(name)`` as the file sink a managed table is (Parquet unless
    ``format`` says otherwise, with its ``_spark_metadata`` log) at the table's warehouse
    path in the schedule's directory (:func:`table_path`): the session's warehouse and
    catalog are shared by every schedule, so the table itself is not registered in them."""
    if getattr(writer, "_harness_format", None) is None and format is None:
        format = "parquet"
    return writer.start(
        path=table_path(tableName),
        format=format,
        outputMode=outputMode,
        partitionBy=partitionBy,
        queryName=queryName,
        **options,
    )


def _start(state: _State, original: Any) -> Any:
    def start(
        writer: Any,
        path: Any = None,
        format: Any = None,
        outputMode: Any = None,
        partitionBy: Any = None,
        queryName: Any = None,
        **options: Any,
    ) -> Any:
        if format is not None:
            writer.format(format)
        for key, value in options.items():
            writer.option(key, value)
        if path is not None:
            writer.option("path", path)
        if outputMode is not None:
            writer.outputMode(outputMode)
        if partitionBy is not None:
            writer.partitionBy(partitionBy)
        if queryName is not None:
            writer.queryName(queryName)
        _prepare(state, writer)
        state.original(DataStreamWriter, "trigger")(writer, availableNow=True)
        with start_gate(gate_path()):
            query = original(writer)
            _await_sources(query)
        if state.on_started is not None:
            state.on_started()
        return query

    return start


def _prepare(state: _State, writer: Any) -> None:
    """One query per run: record what it writes where, adapt the crash point to its sink,
    hand the Kafka sink the log. A second query is refused (:class:`SecondQuery`)."""
    state.queries += 1
    if state.queries > 1:
        assert state.first_query is not None
        state.refused = SecondQuery(state.first_query, _described(writer))
        raise state.refused
    state.first_query = _described(writer)
    sink = getattr(writer, "_harness_format", None) or "parquet"
    set_option = state.original(DataStreamWriter, "option")
    if sink == "kafka":
        kafka_sink_options(getattr(writer, "_harness_kafka", {}), outputs=state.run.outputs)
        set_option(writer, "harness.uri", state.run.uri)
        set_option(writer, "harness.gate", state.run.gate)
    gate = state.gate()
    uncommit = False
    if sink not in _NO_HOOK_SINKS and gate.point == CrashPoint.AFTER_WRITE.value:
        # no hook between such a sink's write and the checkpoint's commit: in process, the
        # run stops after the batch and the harness takes back its commit entry; a SIGKILL
        # lands after the commit
        if gate.kill:
            gate = Gate(**{**asdict(gate), "point": CrashPoint.AFTER_COMMIT.value})
        else:
            gate = Gate(**{**asdict(gate), "point": None, "stop_after": gate.batch + 1})
            uncommit = True
        gate.save()
    frame = getattr(writer, "_df", None)
    record = {
        "sink": sink,
        "path": getattr(writer, "_harness_path", None),
        "checkpoint": getattr(writer, "_harness_checkpointlocation", None),
        "schema": frame.schema.json() if frame is not None else None,
        "uncommit": uncommit,
        "batch": gate.batch,
    }
    (Path(state.run.gate) / QUERY_FILE).write_text(json.dumps(record), encoding="utf-8")


_PATH_METHODS: Final = {
    DataFrameWriter: ("save", "parquet", "json", "csv", "orc", "text"),
    DataFrameReader: ("load", "parquet", "json", "csv", "orc", "text"),
}


def _batch_patches(state: _State) -> None:
    def with_paths(original: Any) -> Any:
        def call(self: Any, *args: Any, **kwargs: Any) -> Any:
            args = tuple(state.redirect(a) if i == 0 else a for i, a in enumerate(args))
            for key in ("path", "paths"):
                if key in kwargs:
                    kwargs[key] = state.redirect(kwargs[key])
            return original(self, *args, **kwargs)

        return call

    for owner, names in _PATH_METHODS.items():
        for name in names:
            state.patch(owner, name, with_paths)

    def fmt(original: Any) -> Any:
        def format(writer: Any, source: str) -> Any:
            if source.lower() != "kafka":
                return original(writer, source)
            option = state.original(DataFrameWriter, "option")
            option(writer, "harness.uri", state.run.uri)
            return original(writer, KAFKA_SOURCE_NAME).mode("append")

        return format

    def opt(original: Any) -> Any:
        def option(writer: Any, key: str, value: Any) -> Any:
            if key.lower() == "path":
                value = state.redirect(_text(value))
            return original(writer, key, value)

        return option

    state.patch(DataFrameWriter, "format", fmt)
    state.patch(DataFrameWriter, "option", opt)


@contextlib.contextmanager
def interposed(
    run: JobRun, session: SparkSession, on_started: Callable[[], None] | None = None
) -> Iterator[_State]:
    """Interpose the PySpark API for one query run of a job on ``session`` (module docstring);
    a watchdog stops the session's queries after ``run.timeout_s`` (``timed_out`` on the
    state it yields, with ``queries``, the number of queries the job started)."""
    register_kafka(session)
    state = _State(run=run, session=session, on_started=on_started)
    cwd = Path(run.root) / "cwd"
    cwd.mkdir(parents=True, exist_ok=True)
    previous = os.getcwd()

    def expire() -> None:
        state.timed_out = True
        _stop_all(session)

    watchdog = threading.Timer(run.timeout_s, expire)
    watchdog.daemon = True
    try:
        _session_patches(state)
        _reader_patches(state)
        _writer_patches(state)
        _batch_patches(state)
        for key, value in _SETTINGS.items():
            session.conf.set(key, value)
        os.chdir(cwd)
        watchdog.start()
        yield state
    finally:
        watchdog.cancel()
        os.chdir(previous)
        for owner, name, original in reversed(state.patches):
            setattr(owner, name, original)
        for key, saved in state.saved.items():
            with contextlib.suppress(Exception):  # a JVM that died cannot be configured
                if saved is None:
                    session.conf.unset(key)
                else:
                    session.conf.set(key, saved)


def _stop_all(session: SparkSession) -> None:
    for query in session.streams.active:
        with contextlib.suppress(Exception):
            query.stop()


def run_app(target: str, argv: list[str]) -> None:
    """Execute the job's code once, as a fresh process would: a script as ``__main__`` with
    ``sys.argv``, or the module's source then its function. ``sys.exit(0)`` is a normal end."""
    import sys
    import types

    from pyspark import cloudpickle

    from harness.kafka.app import _locate

    where = _locate(target)
    module = types.ModuleType(where.module)
    module.__file__ = where.file
    saved_argv, saved_module = sys.argv, sys.modules.get(where.module)
    sys.argv = [where.file, *argv]
    if where.module != "__main__":
        sys.modules[where.module] = module
        cloudpickle.register_pickle_by_value(module)  # type: ignore[no-untyped-call]  # its functions reach Spark's workers
    try:
        code = compile(Path(where.file).read_bytes(), where.file, "exec")
        exec(code, module.__dict__)
        if where.attribute is not None:
            function: Any = module
            for part in where.attribute.split("."):
                function = getattr(function, part)
            function()
    except SystemExit as exc:
        if exc.code not in (None, 0):
            raise RuntimeError(f"the job exited with status {exc.code!r}") from None
    finally:
        sys.argv = saved_argv
        if where.module != "__main__":
            with contextlib.suppress(ValueError, KeyError):
                cloudpickle.unregister_pickle_by_value(module)  # type: ignore[no-untyped-call]
            if saved_module is None:
                sys.modules.pop(where.module, None)
            else:
                sys.modules[where.module] = saved_module
