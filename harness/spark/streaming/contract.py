"""Contract checks for a PySpark Python streaming data source: run them on your own source too.

Spark's exactly-once promise for a streaming source rests on a contract the source must keep:
offsets are JSON that Spark can store and compare, they advance when data arrives and stand
still when none does, ``read`` over the same offsets replays the same rows, consecutive
ranges neither overlap nor leave gaps, rows have the declared schema, and the source hears
about completed batches through ``commit``. Each check in :data:`CONTRACT_CHECKS` tests one
promise; :func:`run_contract` runs them and raises :class:`ContractFailure` naming every
check that failed::

    from harness.spark.streaming.contract import run_contract

    run_contract(MySource, {"path": "/data/in"}, add_data=append_three_records, spark=spark)

``add_data`` must make new records visible to the source each time it is called (checks call
it as they need more data; the source may already hold data). All checks but
``commit-called`` call the reader's methods directly in this process, exactly as Spark's source
runner and workers call them (a fresh reader per check, partitions and readers pickled the way
Spark ships them). ``commit-called`` runs two real streaming queries on ``spark`` from one
checkpoint, with data added in between; for it the source class must be importable by
Spark's Python processes (or registered with ``pyspark.cloudpickle.register_pickle_by_value``).

With pytest, one test per check::

    @pytest.mark.parametrize("check", CONTRACT_CHECKS, ids=lambda check: check.name)
    def test_my_source(check, spark, tmp_path):
        check(ContractSubject(MySource, options, add_data=add, spark=spark, workdir=tmp_path))

This module imports pyspark only when a check runs.
"""

from __future__ import annotations

import importlib
import inspect
import json
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, final

from harness.errors import BrokenPromise, ConfigError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
    from pyspark.sql.types import StructType

__all__ = [
    "CONTRACT_CHECKS",
    "ContractCheck",
    "ContractFailure",
    "ContractSubject",
    "run_contract",
]


class ContractFailure(BrokenPromise):
    """A data source broke a promise of the contract; ``checks`` names the failed check(s)."""


class _Differ(Exception):
    """Raised inside a check: the source did something other than what it promises."""


@final
@dataclass(frozen=True, slots=True)
class ContractSubject:
    """A data source under test: its class, its options, how to add data, where to work.

    ``workdir`` is a fresh directory per check (checkpoints of ``commit-called`` go there).
    """

    source: type[DataSource]
    options: Mapping[str, str]
    add_data: Callable[[], None]
    spark: SparkSession
    workdir: Path


@final
@dataclass(frozen=True, slots=True)
class ContractCheck:
    """One named promise of the contract; call it with a :class:`ContractSubject`."""

    name: str
    promise: str
    function: Callable[[ContractSubject], None] = field(repr=False)

    def __call__(self, subject: ContractSubject) -> None:
        """Run the check; raises :class:`ContractFailure` when the source breaks the promise."""
        try:
            self.function(subject)
        except _Differ as exc:
            raise ContractFailure(
                f"{subject.source.__name__} breaks {self.name!r} ({self.promise}): {exc}",
                checks=(self.name,),
            ) from None
        except Exception as exc:  # the source raised where Spark expects an answer
            raise ContractFailure(
                f"{subject.source.__name__} breaks {self.name!r} ({self.promise}): it raised "
                f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
                checks=(self.name,),
            ) from exc


# -- talking to a source the way Spark does --------------------------------------------------


def _schema(subject: ContractSubject) -> StructType:
    from pyspark.sql.datasource import CaseInsensitiveDict
    from pyspark.sql.types import StructType

    declared = subject.source(CaseInsensitiveDict(subject.options)).schema()
    if isinstance(declared, StructType):
        return declared
    if not isinstance(declared, str):
        raise _Differ(f"schema() returned {declared!r}, neither a StructType nor a DDL string")
    try:
        parsed = StructType.fromDDL(declared)
    except Exception as exc:
        raise _Differ(f"schema() returned {declared!r}, which Spark cannot parse: {exc}") from None
    if not isinstance(parsed, StructType):
        raise _Differ(f"schema() returned {declared!r}, which is not a struct (row) type")
    return parsed


def _reader(subject: ContractSubject) -> DataSourceStreamReader:
    from pyspark.sql.datasource import CaseInsensitiveDict
    from pyspark.sql.datasource_internal import _streamReader

    schema = _schema(subject)
    return _streamReader(subject.source(CaseInsensitiveDict(subject.options)), schema)


def _as_spark_does(offset: object, what: str) -> dict[str, Any]:
    """The offset after Spark's round trip (``json.dumps`` in the runner, ``json.loads`` back)."""
    if not isinstance(offset, dict):
        raise _Differ(f"{what} returned {offset!r}, not a dict")
    try:
        text = json.dumps(offset)
    except (TypeError, ValueError) as exc:
        raise _Differ(f"{what} returned {offset!r:.200}, which is not JSON data: {exc}") from None
    back = json.loads(text)
    if back != offset:
        raise _Differ(f"{what} returned {offset!r:.200}, which JSON turns into {back!r:.200}")
    assert isinstance(back, dict)
    return back


def _latest(reader: DataSourceStreamReader, start: dict[str, Any]) -> dict[str, Any]:
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    method = reader.latestOffset
    if len(inspect.signature(method).parameters) == 0:  # the pre-4.2 signature
        offset = method()  # type: ignore[call-arg]
    else:
        offset = method(start, ReadAllAvailable())
    return _as_spark_does(offset, "latestOffset()")


def _shipped(value: Any) -> Any:
    """``value`` after the pickling Spark applies to readers and partitions."""
    pickler: Any = importlib.import_module("pyspark.cloudpickle")
    return pickler.loads(pickler.dumps(value))


def _partitions(
    reader: DataSourceStreamReader, start: dict[str, Any], end: dict[str, Any]
) -> list[InputPartition]:
    from pyspark.sql.datasource import InputPartition

    parts = list(reader.partitions(start, end))
    for part in parts:
        if not isinstance(part, InputPartition):
            raise _Differ(f"partitions() returned {part!r}, which is not an InputPartition")
    return parts


def _rows_of(items: Iterable[Any]) -> list[tuple[Any, ...]]:
    rows: list[tuple[Any, ...]] = []
    for item in items:
        if hasattr(item, "to_pylist") and hasattr(item, "schema"):  # a pyarrow RecordBatch
            names = item.schema.names
            rows.extend(tuple(row[n] for n in names) for row in item.to_pylist())
        elif isinstance(item, tuple | list):
            rows.append(tuple(item))
        else:
            raise _Differ(f"read() yielded {item!r:.200}, neither a tuple, a Row nor a RecordBatch")
    return [tuple(bytes(v) if isinstance(v, bytearray) else v for v in row) for row in rows]


def _read(
    reader: DataSourceStreamReader, start: dict[str, Any], end: dict[str, Any]
) -> list[tuple[Any, ...]]:
    rows: list[tuple[Any, ...]] = []
    for part in _partitions(reader, start, end):
        rows.extend(_rows_of(reader.read(_shipped(part))))
    return rows


def _advanced(subject: ContractSubject, reader: DataSourceStreamReader) -> tuple[Any, Any]:
    """``(start, end)``: the current end, then the end after ``add_data()``."""
    start = _as_spark_does(reader.initialOffset(), "initialOffset()")
    start = _latest(reader, start)
    subject.add_data()
    end = _latest(reader, start)
    if json.dumps(end) == json.dumps(start):
        raise _Differ(
            f"after add_data(), latestOffset({start!r:.200}) returned the same offset, so this "
            "check has no new range to work on (the source does not see new data; Spark would "
            "never process it)"
        )
    return start, end


def _show_rows(rows: Sequence[tuple[Any, ...]], limit: int = 3) -> str:
    shown = ", ".join(repr(r)[:120] for r in rows[:limit])
    return f"[{shown}{', ...' if len(rows) > limit else ''}] ({len(rows)} rows)"


# -- the checks ---------------------------------------------------------------------------------


def _check_schema(subject: ContractSubject) -> None:
    schema = _schema(subject)
    if not schema.fields:
        raise _Differ("schema() declares no columns")


def _check_json_offsets(subject: ContractSubject) -> None:
    reader = _reader(subject)
    start = _as_spark_does(reader.initialOffset(), "initialOffset()")
    subject.add_data()
    _latest(reader, start)


def _check_stable(subject: ContractSubject) -> None:
    reader = _reader(subject)
    start = _as_spark_does(reader.initialOffset(), "initialOffset()")
    subject.add_data()
    end = _latest(reader, start)
    again = _latest(reader, end)
    if json.dumps(again) != json.dumps(end):
        raise _Differ(
            f"with no new data, latestOffset({end!r:.200}) returned {again!r:.200}: Spark "
            "compares offsets as JSON text and would plan a batch that reads nothing, forever"
        )
    if _partitions(reader, end, end):
        raise _Differ(f"partitions(end, end) for {end!r:.200} is not empty")


def _check_advance(subject: ContractSubject) -> None:
    reader = _reader(subject)
    start, end = _advanced(subject, reader)
    if not _read(reader, start, end):
        raise _Differ(
            f"after add_data(), the range {start!r:.120} -> {end!r:.120} reads no rows: the "
            "offsets moved but the new data is not in the range"
        )


def _check_partitions(subject: ContractSubject) -> None:
    reader = _reader(subject)
    start, end = _advanced(subject, reader)
    for part in _partitions(reader, start, end):
        try:
            _shipped(part)
        except Exception as exc:
            raise _Differ(
                f"partition {part!r:.200} cannot be pickled for a worker: {exc}"
            ) from None
    try:
        _shipped(reader)
    except Exception as exc:
        raise _Differ(f"the reader cannot be pickled for a worker: {exc}") from None


def _check_replay(subject: ContractSubject) -> None:
    reader = _reader(subject)
    start, end = _advanced(subject, reader)
    first = _read(reader, start, end)
    again = _read(_shipped(reader), start, end)
    fresh = _read(_reader(subject), start, end)
    for name, other in (("a second read", again), ("a new reader's read", fresh)):
        if other != first:
            raise _Differ(
                f"range {start!r:.120} -> {end!r:.120} read {_show_rows(first)} but "
                f"{name} gave {_show_rows(other)}: a batch replayed after a crash would differ"
            )


def _check_compose(subject: ContractSubject) -> None:
    reader = _reader(subject)
    first, middle = _advanced(subject, reader)
    subject.add_data()
    last = _latest(reader, middle)
    whole = Counter(_read(reader, first, last))
    halves = Counter(_read(reader, first, middle)) + Counter(_read(reader, middle, last))
    if whole != halves:
        extra = list((halves - whole).elements())
        missing = list((whole - halves).elements())
        raise _Differ(
            f"two consecutive ranges {first!r:.80} -> {middle!r:.80} -> {last!r:.80} read "
            f"{_show_rows(extra)} more and {_show_rows(missing)} fewer than the range they "
            "make up: consecutive batches would overlap or leave a gap"
        )


_PYTHON_TYPES: Final[Mapping[str, tuple[type, ...]]] = {
    "StringType": (str,),
    "VarcharType": (str,),
    "CharType": (str,),
    "BinaryType": (bytes, bytearray),
    "BooleanType": (bool,),
    "ByteType": (int,),
    "ShortType": (int,),
    "IntegerType": (int,),
    "LongType": (int,),
    "FloatType": (float, int),
    "DoubleType": (float, int),
}
_INT_RANGES: Final[Mapping[str, int]] = {
    "ByteType": 8,
    "ShortType": 16,
    "IntegerType": 32,
    "LongType": 64,
}


def _check_rows_schema(subject: ContractSubject) -> None:
    schema = _schema(subject)
    reader = _reader(subject)
    start, end = _advanced(subject, reader)
    names = [f.name for f in schema.fields]
    for row in _read(reader, start, end):
        if len(row) != len(names):
            raise _Differ(
                f"row {row!r:.200} has {len(row)} values; the schema declares {len(names)} "
                f"columns {names}"
            )
        for value, spec in zip(row, schema.fields, strict=True):
            kind = type(spec.dataType).__name__
            if value is None:
                if not spec.nullable:
                    raise _Differ(f"row {row!r:.200} has null in non-nullable column {spec.name!r}")
                continue
            allowed = _PYTHON_TYPES.get(kind)
            if allowed is None:
                continue  # nested and temporal types: Spark's own conversion judges them
            if (isinstance(value, bool) and bool not in allowed) or not isinstance(value, allowed):
                raise _Differ(
                    f"row {row!r:.200} has {value!r:.80} ({type(value).__name__}) in column "
                    f"{spec.name!r} of type {spec.dataType.simpleString()}"
                )
            bits = _INT_RANGES.get(kind)
            if bits is not None and not -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
                raise _Differ(
                    f"row {row!r:.200} has {value} in column {spec.name!r}, outside "
                    f"{spec.dataType.simpleString()}"
                )


def _check_commit(subject: ContractSubject) -> None:
    from pyspark.sql import DataFrame

    spark = subject.spark
    commits = subject.workdir / "commits.jsonl"
    name = f"harness_contract_{uuid.uuid4().hex[:12]}"
    spark.dataSource.register(_recording(subject.source, name, str(commits)))
    schema = _schema(subject)
    seen: list[tuple[Any, ...]] = []

    def collect(batch: DataFrame, batch_id: int) -> None:
        seen.extend(_rows_of(tuple(row) for row in batch.collect()))

    ends: list[Any] = []
    checkpoint = subject.workdir / "checkpoint"
    for round_ in range(2):
        if round_:
            subject.add_data()
        frame = spark.readStream.format(name).options(**dict(subject.options)).load()
        if frame.schema != schema:
            raise _Differ(f"the query's schema is {frame.schema} but schema() declares {schema}")
        query = (
            frame.writeStream.foreachBatch(collect)
            .option("checkpointLocation", str(checkpoint))
            .start()
        )
        try:
            query.processAllAvailable()
        except Exception as exc:
            raise _Differ(f"the streaming query failed: {str(exc).splitlines()[0]}") from None
        finally:
            query.stop()
        for progress in query.recentProgress:
            if progress["numInputRows"] or "addBatch" in progress["durationMs"]:
                end = progress["sources"][0]["endOffset"]
                ends.append(json.loads(end) if isinstance(end, str) else end)
    if len(ends) < 2:
        raise _Differ(
            f"two query runs with add_data() between them ran {len(ends)} batch(es); the "
            "check needs two (does latestOffset see new data?)"
        )
    called = []
    if commits.exists():
        called = [json.loads(line) for line in commits.read_text().splitlines() if line]
    missing = [end for end in ends[:-1] if end not in called]
    if missing:
        raise _Differ(
            f"Spark completed batches ending at {missing!r:.300} but the source's commit() never "
            f"received them (it received {called!r:.300})"
        )
    reader = _reader(subject)
    start = _as_spark_does(reader.initialOffset(), "initialOffset()")
    direct = Counter(_read(reader, start, ends[-1]))
    if Counter(seen) != direct:
        raise _Differ(
            f"the query saw {_show_rows(seen)}, but reading the same offsets directly gives "
            f"{_show_rows(list(direct.elements()))}"
        )


def _recording(source: type[DataSource], name: str, path: str) -> type[DataSource]:
    """``source`` under another short name, with a reader that records ``commit`` calls."""

    def short_name(cls: type) -> str:
        return name

    def stream_reader(self: DataSource, schema: StructType) -> DataSourceStreamReader:
        from pyspark.sql.datasource_internal import _streamReader

        return _recording_reader(_streamReader(source(self.options), schema), path)

    namespace = {"name": classmethod(short_name), "streamReader": stream_reader}
    return type(f"Recording{source.__name__}", (source,), namespace)


def _recording_reader_class() -> type:
    from pyspark.sql.datasource import DataSourceStreamReader

    class RecordingReader(DataSourceStreamReader):
        """Delegates to the source's reader; appends each ``commit(end)`` to a file."""

        def __init__(self, inner: DataSourceStreamReader, path: str) -> None:
            self.inner = inner
            self.path = path

        def initialOffset(self) -> dict[str, Any]:
            return self.inner.initialOffset()

        def latestOffset(self, start: dict[str, Any], limit: Any) -> dict[str, Any]:
            method = self.inner.latestOffset
            if len(inspect.signature(method).parameters) == 0:
                return method()  # type: ignore[call-arg]
            return method(start, limit)

        def getDefaultReadLimit(self) -> Any:
            return self.inner.getDefaultReadLimit()

        def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Any:
            return self.inner.partitions(start, end)

        def read(self, partition: Any) -> Any:
            return self.inner.read(partition)

        def commit(self, end: dict[str, Any]) -> None:
            with open(self.path, "a", encoding="utf-8") as out:
                out.write(json.dumps(end) + "\n")
            self.inner.commit(end)

        def stop(self) -> None:
            self.inner.stop()

    return RecordingReader


def _recording_reader(inner: DataSourceStreamReader, path: str) -> DataSourceStreamReader:
    reader: DataSourceStreamReader = _recording_reader_class()(inner, path)
    return reader


def _check(name: str, promise: str, function: Callable[[ContractSubject], None]) -> ContractCheck:
    return ContractCheck(name=name, promise=promise, function=function)


CONTRACT_CHECKS: Final[tuple[ContractCheck, ...]] = (
    _check(
        "schema",
        "schema() is a StructType or a DDL string Spark parses, with at least one column",
        _check_schema,
    ),
    _check(
        "offsets-are-json",
        "initialOffset() and latestOffset() return dicts that a JSON round trip leaves unchanged",
        _check_json_offsets,
    ),
    _check(
        "offsets-stable",
        "with no new data, latestOffset(end) returns end itself, and partitions(end, end) is empty",
        _check_stable,
    ),
    _check(
        "offsets-advance",
        "after data is added, latestOffset moves past the previous end and the new range has "
        "the new rows",
        _check_advance,
    ),
    _check(
        "partitions-picklable",
        "partitions(start, end) are InputPartitions that, with the reader, survive pickling",
        _check_partitions,
    ),
    _check(
        "read-replays",
        "reading the same range again, with the same or a new reader, gives the same rows in "
        "the same order",
        _check_replay,
    ),
    _check(
        "ranges-compose",
        "the rows of [a, c) are those of [a, b) plus those of [b, c): consecutive batches "
        "neither overlap nor leave gaps",
        _check_compose,
    ),
    _check(
        "rows-match-schema",
        "every row has one value per declared column, of the column's type (null only where "
        "nullable)",
        _check_rows_schema,
    ),
    _check(
        "commit-called",
        "in real queries Spark calls commit(end) with the end of every batch before the last, "
        "and the queries see the declared schema and the rows direct reads give",
        _check_commit,
    ),
)
"""Every check, in the order :func:`run_contract` runs them."""


def run_contract(
    source: type[DataSource],
    options: Mapping[str, str],
    *,
    add_data: Callable[[], None],
    spark: SparkSession,
    workdir: str | Path,
    checks: Sequence[ContractCheck] = CONTRACT_CHECKS,
) -> None:
    """Run ``checks`` on ``source`` (each in its own subdirectory of ``workdir``); raise one
    :class:`ContractFailure` naming every failed check, or return None when all pass."""
    from pyspark.sql.datasource import DataSource

    if not (isinstance(source, type) and issubclass(source, DataSource)):
        raise ConfigError(
            f"source must be a pyspark.sql.datasource.DataSource subclass, got {source!r}"
        )
    if not callable(add_data):
        raise ConfigError(f"add_data must be a function without arguments, got {add_data!r}")
    root = Path(workdir)
    failures: list[ContractFailure] = []
    for check in checks:
        directory = root / check.name
        directory.mkdir(parents=True, exist_ok=True)
        subject = ContractSubject(
            source=source, options=dict(options), add_data=add_data, spark=spark, workdir=directory
        )
        try:
            check(subject)
        except ContractFailure as exc:
            failures.append(exc)
    if failures:
        names = tuple(name for failure in failures for name in failure.checks)
        lines = "\n".join(f"- {failure}" for failure in failures)
        raise ContractFailure(
            f"{source.__name__} fails {len(failures)} of {len(checks)} contract checks:\n{lines}",
            checks=names,
        )
