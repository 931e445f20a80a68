"""Spark's Kafka source and sink for an unchanged job, served by the reference log.

A job's ``spark.readStream.format("kafka")`` and ``writeStream.format("kafka")`` (and
``df.write.format("kafka")`` inside ``foreachBatch``) are mapped, for the run only, to
:class:`HarnessKafkaDataSource` (short name ``harness-kafka``) by
:mod:`harness.spark.streaming._interpose`: a Python data source cannot take Spark's own
short name ``kafka`` (``DATA_SOURCE_ALREADY_EXISTS``).

Topic partition ``p`` of topic ``t`` is the log ``kafka.t.p`` of a LevelDB namespace; a
message's Kafka offset is its sequence id in the log, its timestamp its txid in milliseconds
(``CreateTime``, ``timestampType`` 0), its key and value a frame in the record's payload
(:func:`encode_message`). The source reads through the dlog source's machinery
(:class:`~harness.spark.streaming.datasource.DLogStreamReader`: deterministic batches,
DLSN offsets per log in the checkpoint) and yields Spark's Kafka schema
(:data:`KAFKA_SCHEMA_DDL`); the sink appends each task's rows to the topic's log as the task
runs (partition 0), as Spark's Kafka producer does: a batch run again after a crash writes
its rows again (Spark's Kafka sink is at-least-once). Both carry the job's crash points
(:mod:`harness.spark.streaming._faultgate`, option ``harness.gate``). The options the job
gave are validated on the driver by :func:`kafka_source_options` before the source sees
them. This module imports pyspark.
"""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from pyspark.sql.datasource import (
    DataSource,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import ReadLimit
from pyspark.sql.types import BinaryType, StringType, StructType

from harness.errors import ConfigError
from harness.log.dlsn import DLSN
from harness.log.namespace import open_namespace
from harness.log.record import LogRecord
from harness.spark.streaming._faultgate import Gate
from harness.spark.streaming._kafkalog import (
    _topic_partition,
    decode_message,
    encode_message,
    kafka_log,
)
from harness.spark.streaming.datasource import (
    DLogPartition,
    DLogStreamReader,
    SourceOptions,
    _retrying,
    decode_offsets,
    encode_offsets,
    latest_offsets,
    read_arrow,
)

__all__ = [
    "KAFKA_SCHEMA_DDL",
    "KAFKA_SOURCE_NAME",
    "KNOWN_SINK_OPTIONS",
    "KNOWN_SOURCE_OPTIONS",
    "HarnessKafkaDataSource",
    "kafka_sink_options",
    "kafka_source_options",
    "register_kafka",
]

KAFKA_SOURCE_NAME: Final = "harness-kafka"
KAFKA_SCHEMA_DDL: Final = (
    "key binary, value binary, topic string, partition int, offset bigint, "
    "timestamp timestamp, timestampType int"
)
KNOWN_SOURCE_OPTIONS: Final = (
    "subscribe",
    "subscribePattern",
    "assign",
    "startingOffsets",
    "maxOffsetsPerTrigger",
    "failOnDataLoss",
    "kafka.*",
)
"""The Kafka source options a job may give (case-insensitive); any other is refused.
``kafka.*`` (the client's settings, ``kafka.bootstrap.servers`` required as Spark requires
it) and ``failOnDataLoss`` are accepted and have no effect: the reference log loses nothing."""
INITIAL_OFFSETS_FILE: Final = "harness-kafka-initial-offsets.json"
"""Where the source keeps its initial offsets in the job's checkpoint directory."""
KNOWN_SINK_OPTIONS: Final = ("topic", "checkpointLocation", "kafka.*")


# -- the job's options ------------------------------------------------------------------------


def _refuse_unknown(options: Mapping[str, str], known: Sequence[str], what: str) -> None:
    lowered = {k.lower() for k in known if not k.endswith("*")}
    unknown = sorted(
        k for k in options if k.lower() not in lowered and not k.lower().startswith("kafka.")
    )
    if unknown:
        raise ConfigError(
            f"unknown Kafka {what} option(s) {unknown} for the harness's Kafka {what}; the "
            f"known options are {', '.join(known)} (see docs/streaming.md)"
        )


def _topics(options: Mapping[str, str], partitions: Mapping[str, int]) -> list[str]:
    """The logs the source reads, from ``subscribe``, ``subscribePattern`` or ``assign``."""
    given = [k for k in ("subscribe", "subscribepattern", "assign") if k in options]
    if len(given) != 1:
        raise ConfigError(
            "the Kafka source needs exactly one of the options subscribe, subscribePattern "
            f"and assign, got {given or 'none'}"
        )
    how, text = given[0], options[given[0]]
    if how == "assign":
        try:
            assigned = json.loads(text)
            pairs = [(str(t), int(p)) for t, ps in assigned.items() for p in ps]
        except (ValueError, AttributeError, TypeError):
            raise ConfigError(
                f'option assign must be JSON such as {{"topicA":[0,1]}}, got {text!r:.80}'
            ) from None
    else:
        if how == "subscribe":
            names = [t.strip() for t in text.split(",") if t.strip()]
        else:
            try:
                pattern = re.compile(text)
            except re.error as exc:
                raise ConfigError(f"option subscribePattern {text!r:.80}: {exc}") from None
            names = sorted(t for t in partitions if pattern.fullmatch(t))
        pairs = [(t, p) for t in names for p in range(partitions.get(t, 0))]
    unknown = sorted({t for t, p in pairs if p >= partitions.get(t, 0)})
    if unknown or not pairs:
        raise ConfigError(
            f"the Kafka source reads topic(s) {unknown or text!r} that are not input topics "
            f"of this run (inputs: {sorted(partitions)}); name them with --input"
        )
    return [kafka_log(t, p) for t, p in pairs]


def _position(uri: str, log: str, offset: int) -> DLSN:
    """The DLSN of the record at Kafka offset ``offset`` (sequence id) of ``log``; the log's
    end when it has fewer records."""
    with open_namespace(uri) as namespace, namespace.open_log(log) as manager:
        reader = manager.open_reader(DLSN.INITIAL)
        try:
            for _ in range(offset):
                if reader.read_next(non_blocking=True) is None:
                    break
            record = reader.read_next(non_blocking=True)
        finally:
            reader.close()
    if record is None:
        return latest_offsets(uri, [log])[log]
    return record.dlsn


def _starting(text: str | None, uri: str, logs: Sequence[str], pinned: Any) -> dict[str, Any]:
    """``startingOffsets`` as DLSN offsets per log. ``latest`` is the end of each log when the
    job was first deployed (``pinned()``: before any input of the schedule, as a job running
    before its producers start), then kept, as Spark's Kafka source keeps it in the
    checkpoint; JSON maps topic -> partition -> offset (-2 earliest, -1 latest)."""
    value = (text or "latest").strip()
    if value.lower() == "earliest":
        return encode_offsets(dict.fromkeys(logs, DLSN.INITIAL))
    if value.lower() == "latest":
        return encode_offsets({log: pinned(log) for log in logs})
    try:
        given = json.loads(value)
        wanted = {
            kafka_log(str(t), int(p)): int(o) for t, ps in given.items() for p, o in ps.items()
        }
    except (ValueError, AttributeError, TypeError):
        raise ConfigError(
            "option startingOffsets must be earliest, latest or JSON such as "
            f'{{"topicA":{{"0":23,"1":-2}}}}, got {value!r:.80}'
        ) from None
    missing = sorted(set(logs) - set(wanted))
    if missing:
        raise ConfigError(f"startingOffsets gives no offset for {missing} (Spark requires all)")
    starts: dict[str, DLSN] = {}
    for log in logs:
        offset = wanted[log]
        starts[log] = (
            DLSN.INITIAL
            if offset == -2
            else pinned(log)
            if offset == -1
            else _position(uri, log, offset)
        )
    return encode_offsets(starts)


def kafka_source_options(
    options: Mapping[str, str], *, uri: str, partitions: Mapping[str, int], pinned: Any
) -> dict[str, str]:
    """The harness-kafka source's options for a job's Kafka source options; bad or unknown
    ones raise :class:`ConfigError` naming them and the known ones."""
    lowered = {str(k).lower(): str(v) for k, v in options.items()}
    _refuse_unknown(options, KNOWN_SOURCE_OPTIONS, "source")
    if "kafka.bootstrap.servers" not in lowered:
        raise ConfigError(
            "the Kafka source needs option kafka.bootstrap.servers (Spark requires it; its "
            "value is not used under the harness)"
        )
    logs = _topics(lowered, partitions)
    result = {
        "uri": uri,
        "logs": ",".join(logs),
        "startingOffsets": json.dumps(
            _starting(lowered.get("startingoffsets"), uri, logs, pinned), sort_keys=True
        ),
    }
    limit = lowered.get("maxoffsetspertrigger")
    if limit is not None:
        if not limit.strip().isdigit() or int(limit) < 1:
            raise ConfigError(f"option maxOffsetsPerTrigger must be an integer >= 1, got {limit!r}")
        result["maxRecordsPerBatch"] = str(int(limit))
    return result


def kafka_sink_options(options: Mapping[str, str], *, outputs: Sequence[str]) -> None:
    """Refuse a Kafka sink option the harness does not know, or a topic not declared."""
    _refuse_unknown(options, KNOWN_SINK_OPTIONS, "sink")
    topic = {str(k).lower(): str(v) for k, v in options.items()}.get("topic")
    if topic is not None and topic not in outputs:
        raise ConfigError(
            f"the Kafka sink writes topic {topic!r}, which is not an output topic of this run "
            f"(outputs: {list(outputs)}); name it with --output"
        )


# -- the data source ------------------------------------------------------------------------


def _gate_dir(options: Mapping[str, str]) -> str | None:
    return {str(k).lower(): v for k, v in options.items()}.get("harness.gate")


def _plain(options: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in options.items() if not str(k).lower().startswith("harness.")}


class _KafkaStreamReader(DLogStreamReader):
    """The dlog stream reader with Kafka's rows, the job's starting offsets, crash points."""

    def __init__(self, settings: SourceOptions, gate: str | None) -> None:
        super().__init__(settings)
        self._gate = gate
        self._planned: list[str] = []

    def gate(self) -> Gate | None:
        return Gate.load(self._gate)

    def initialOffset(self) -> dict[str, Any]:
        """The job's ``startingOffsets`` (resolved on the driver at ``load()``), kept in the
        job's checkpoint the first time, as Spark's Kafka source keeps its initial offsets:
        a restart from the checkpoint starts its first batch where the first run did."""
        given = self._starting()
        checkpoint = _checkpoint_of(self._gate)
        if checkpoint is None:
            return given
        path = Path(checkpoint) / INITIAL_OFFSETS_FILE
        if path.exists():
            kept: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
            return kept
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(given, sort_keys=True), encoding="utf-8")
        return given

    def _starting(self) -> dict[str, Any]:
        return encode_offsets(
            {
                log: (self.settings.starting or {}).get(log, DLSN.INITIAL)
                for log in self.settings.logs
            }
        )

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        gate = self.gate()
        if gate is not None and self._planned:
            gate.after_commit(len(self._planned) - 1)
        if (
            gate is not None
            and gate.stop_after is not None
            and len(self._planned) >= gate.stop_after
        ):
            return start
        return super().latestOffset(start, limit)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        parts = super().partitions(start, end)
        gate = self.gate()
        if not parts or gate is None:
            return parts
        key = json.dumps([start, end], sort_keys=True)
        if key not in self._planned:
            self._planned.append(key)
        batch = self._planned.index(key)
        target = self._target if self._target is not None else self._latest()
        last = decode_offsets(end) == {log: target[log] for log in decode_offsets(end)}
        if gate.stop_after is not None and batch + 1 >= gate.stop_after:
            last = True
        gate.note_planned(batch, last=last)
        gate.before_write(batch)
        for part in parts:
            if isinstance(part, DLogPartition):
                part.batch = batch
        return parts

    def read(self, partition: InputPartition) -> Iterator[Any]:
        pa: Any = importlib.import_module("pyarrow")

        assert isinstance(partition, DLogPartition)
        gate = self.gate()
        if gate is not None and partition.batch is not None:
            gate.note_reading(partition.batch)
        topic, number = _topic_partition(partition.log)
        for batch in read_arrow(
            self.settings.uri,
            partition.log,
            DLSN.from_json(partition.start),
            DLSN.from_json(partition.end),
            lock_wait_s=self.settings.lock_wait_s,
        ):
            yield _kafka_rows(pa, batch, topic, number)
        if gate is not None:
            gate.task_done("read", partition.batch)


def _checkpoint_of(gate: str | None) -> str | None:
    """The job's own checkpoint directory for this run (None: Spark's temporary one)."""
    if gate is None:
        return None
    path = Path(gate) / "query.json"
    if not path.exists():
        return None
    checkpoint = json.loads(path.read_text(encoding="utf-8")).get("checkpoint")
    return str(checkpoint) if checkpoint else None


def _kafka_rows(pa: Any, batch: Any, topic: str, partition: int) -> Any:
    frames = [decode_message(p) for p in batch.column(4).to_pylist()]
    count = len(frames)
    stamps = [t * 1000 for t in batch.column(1).to_pylist()]
    return pa.RecordBatch.from_arrays(
        [
            pa.array([k for k, _ in frames], pa.binary()),
            pa.array([v for _, v in frames], pa.binary()),
            pa.array([topic] * count, pa.string()),
            pa.array([partition] * count, pa.int32()),
            batch.column(3),
            pa.array(stamps, pa.timestamp("us", tz="UTC")),
            pa.array([0] * count, pa.int32()),
        ],
        names=["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"],
    )


@dataclass
class _Written(WriterCommitMessage):
    rows: int


def _bytes(value: Any) -> bytes | None:
    if value is None:
        return None
    return value.encode("utf-8") if isinstance(value, str) else bytes(value)


def write_topic_rows(uri: str, topic: str | None, rows: Iterator[Any]) -> _Written:
    """Append rows (``value``, optional ``key`` and ``topic``) to their topics' logs."""
    grouped: dict[str, list[bytes]] = {}
    count = 0
    for row in rows:
        fields = row.asDict()
        name = fields.get("topic") or topic
        if not name:
            raise ConfigError("a Kafka sink row has no topic: give option topic or a topic column")
        grouped.setdefault(str(name), []).append(
            encode_message(_bytes(fields.get("key")), _bytes(fields.get("value")))
        )
        count += 1
    for name, payloads in grouped.items():
        _append(uri, kafka_log(name, 0), payloads)
    return _Written(rows=count)


def _append(uri: str, log: str, payloads: Sequence[bytes]) -> None:
    def write() -> None:
        with open_namespace(uri) as namespace:
            if not namespace.log_exists(log):
                namespace.create_log(log)
            with namespace.open_log(log) as manager, manager.open_writer() as writer:
                for payload in payloads:
                    writer.write(LogRecord(0, payload))
                writer.commit()

    _retrying(write, 30.0)


def _check_sink_schema(schema: StructType, topic: str | None) -> None:
    names = {f.name: f.dataType for f in schema.fields}
    if "value" not in names or not isinstance(names["value"], (StringType, BinaryType)):
        raise ConfigError(
            "the Kafka sink needs a value column of type string or binary (Spark's rule), "
            f"got columns {sorted(names)}"
        )
    if topic is None and "topic" not in names:
        raise ConfigError("the Kafka sink needs option topic or a topic column (Spark's rule)")


class _KafkaStreamWriter(DataSourceStreamWriter):
    def __init__(self, uri: str, topic: str | None, gate: str | None) -> None:
        self.uri, self.topic, self.gate = uri, topic, gate

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        written = write_topic_rows(self.uri, self.topic, iterator)
        gate = Gate.load(self.gate)
        if gate is not None:  # the rows stay appended if it fails, as Spark's producer's do
            gate.task_done("write", None)
        return written

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        gate = Gate.load(self.gate)
        if gate is not None:
            gate.after_write(sum(m.rows for m in messages if isinstance(m, _Written)))

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Spark's Kafka sink takes nothing back: what the tasks wrote stays."""


class _KafkaBatchWriter(DataSourceWriter):
    def __init__(self, uri: str, topic: str | None) -> None:
        self.uri, self.topic = uri, topic

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        return write_topic_rows(self.uri, self.topic, iterator)


class HarnessKafkaDataSource(DataSource):
    """Spark's Kafka source and sink over the reference log (module docstring)."""

    @classmethod
    def name(cls) -> str:
        return KAFKA_SOURCE_NAME

    def schema(self) -> str:
        return KAFKA_SCHEMA_DDL

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return _KafkaStreamReader(
            SourceOptions.parse(_plain(self.options)), _gate_dir(self.options)
        )

    def _sink(self, schema: StructType) -> tuple[str, str | None]:
        lowered = {str(k).lower(): str(v) for k, v in self.options.items()}
        topic = lowered.get("topic")
        _check_sink_schema(schema, topic)
        return lowered["harness.uri"], topic

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        uri, topic = self._sink(schema)
        return _KafkaStreamWriter(uri, topic, _gate_dir(self.options))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        uri, topic = self._sink(schema)
        return _KafkaBatchWriter(uri, topic)


def register_kafka(spark: Any) -> None:
    """Register :class:`HarnessKafkaDataSource` with ``spark`` unless it has it already.

    Register it with the process's first session before making others: a session made
    by ``newSession()`` inherits the registrations, but Spark 4.x finds a Python data
    source's *stream writer* only when the first session has it (DATA_SOURCE_NOT_FOUND
    otherwise, measured with pyspark 4.3)."""
    try:
        spark.dataSource.register(HarnessKafkaDataSource)
    except Exception as exc:  # pyspark's AnalysisException, imported lazily by pyspark
        if "DATA_SOURCE_ALREADY_EXISTS" not in str(exc):
            raise
