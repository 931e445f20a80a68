"""What an unchanged job's sinks hold after the drain, as rows (dicts of columns).

:func:`sink_rows` reads one :class:`~harness.spark.streaming.job.JobSink` at the schedule's
copy of its location: a Kafka topic's messages (``key``, ``value``, ``topic``), a Spark file
sink through its ``_spark_metadata`` log (as every reader of a file sink must: files of
batches that died before the sink's commit are in the directory too), a SQLite table's rows,
or the non-empty lines of files. Rows come in a stable order so that the same schedule gives
the same history. Imports pyspark only for file sinks.
"""

from __future__ import annotations

import glob
import json
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.errors import ConfigError
from harness.spark.streaming._interpose_paths import redirect, table_path
from harness.spark.streaming._kafkalog import read_topic

__all__ = ["sink_rows"]


def sink_rows(
    sink: Any,
    root: str,
    uri: str,
    queries: Sequence[Mapping[str, Any]],
    session: Callable[[], Any],
) -> list[dict[str, Any]]:
    """The rows ``sink`` holds (module docstring); ``queries`` are the runs' query records
    (their sink's format and schema), ``session()`` a Spark session for file sinks."""
    if sink.kind == "kafka":
        return [
            {"key": key, "value": value, "topic": sink.location}
            for key, value in read_topic(uri, sink.location)
        ]
    if sink.kind == "console":
        path = Path(root) / "console.jsonl"
        return _json_lines(path) if path.exists() else []
    if sink.kind == "table":  # toTable's file sink (harness.spark.streaming._interpose)
        return _file_sink_rows(redirect(root, table_path(sink.location)), queries, session)
    where = redirect(root, sink.location)
    if sink.kind == "sqlite":
        return _sqlite_rows(where, sink.table)
    if sink.kind == "lines":
        return _lines(where)
    return _file_sink_rows(where, queries, session)


def _sqlite_rows(path: str, table: str) -> list[dict[str, Any]]:
    if not Path(path).exists():
        return []
    # read-only, through a URI: the job's redirected connect() is not in place any more
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        connection.row_factory = sqlite3.Row
        tables = {r[0] for r in connection.execute("SELECT name FROM sqlite_master")}
        if table not in tables:
            return []
        rows = [dict(r) for r in connection.execute(f'SELECT * FROM "{table}"')]
    finally:
        connection.close()
    return _sorted(rows)


def _json_lines(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


def _lines(pattern: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for name in sorted(glob.glob(pattern, recursive=True)):
        with open(name, encoding="utf-8", errors="replace") as lines:
            found.extend({"line": line.rstrip("\n")} for line in lines if line.strip())
    return found


def _file_sink_rows(
    path: str, queries: Sequence[Mapping[str, Any]], session: Callable[[], Any]
) -> list[dict[str, Any]]:
    """A streaming file sink's rows through its metadata log (with the stream's schema), or,
    for a directory written by batch writes (``df.write...parquet(path)`` in a
    ``foreachBatch``), every data file in it, in the format their names say."""
    used = [q for q in queries if q.get("path") == path]
    spark = session()
    if not used:
        return _batch_written_rows(spark, Path(path))
    if not (Path(path) / "_spark_metadata").is_dir():
        return []
    from pyspark.sql.types import StructType

    reader = spark.read.format(used[-1]["sink"])
    if used[-1].get("schema"):
        reader = reader.schema(StructType.fromJson(json.loads(used[-1]["schema"])))
    return _sorted([r.asDict(recursive=True) for r in reader.load(path).collect()])


_FORMATS = {".parquet": "parquet", ".json": "json", ".csv": "csv", ".orc": "orc", ".txt": "text"}


def _batch_written_rows(spark: Any, directory: Path) -> list[dict[str, Any]]:
    if not directory.exists():
        return []
    data = [
        p
        for p in directory.rglob("*")
        if p.is_file() and not p.name.startswith(("_", ".")) and p.suffix in _FORMATS
    ]
    formats = {_FORMATS[p.suffix] for p in data}
    if len(formats) > 1:
        raise ConfigError(
            f"the files under {str(directory)!r} are of several formats {sorted(formats)}; "
            "name a directory that holds one"
        )
    if not data:
        return []
    frame = (
        spark.read.format(formats.pop()).option("recursiveFileLookup", "true").load(str(directory))
    )
    return _sorted([r.asDict(recursive=True) for r in frame.collect()])


def _sorted(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda r: json.dumps(r, sort_keys=True, default=str))
