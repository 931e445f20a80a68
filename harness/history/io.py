"""Histories on disk: JSONL and Parquet, both byte-for-byte deterministic.

Both formats hold the same flat rows (:data:`~harness.history.events.EVENT_FIELDS`) and the
same header (:meth:`~harness.history.events.HistoryMeta.to_json`); ``docs/history.md``
documents the layouts and the versioning policy.

* **JSONL**: the first line is ``{"history": <header>}``, then one JSON object per event with
  every key of ``EVENT_FIELDS`` in that order (nulls included), then the checksum line.
  Compact separators, UTF-8, ``"\\n"`` line endings, so equal histories give identical files.
* **Parquet**: one row per event with the fixed schema of :func:`history_arrow_schema`; the
  header JSON lives in the schema's key-value metadata under :data:`PARQUET_METADATA_KEY`,
  the checksum under :data:`CHECKSUM_KEY`. pyarrow is imported only when a Parquet function
  is called.

Every file carries a checksum its reader verifies (:mod:`harness.history.integrity`), so a
damaged file is :class:`~harness.errors.CorruptData`, never a different history; files
without one (schema version 1, other tools' Parquet) are read unverified unless a reader is
given ``checksum="require"``.

Readers trust nothing: the header, every line or column and every value is type-checked before
an :class:`~harness.history.events.Event` is built, and anything wrong raises
:class:`~harness.errors.CorruptData` naming the file, the line (or row) and the problem. They
do not check what the history means (indices in order, offsets consistent): that is the
validator's job. Writers refuse, with :class:`~harness.errors.ConfigError`, a history they could
not read back, and replace the target file atomically, so a failed write never leaves half a
history behind.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import json
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any, Final, NoReturn, TypeAlias

from harness._progress import advance
from harness._shown import one_line, shown
from harness.errors import ConfigError, CorruptData, MissingDependency
from harness.history.events import (
    EVENT_FIELDS,
    INT_FIELDS,
    SCHEMA_VERSION,
    Aggregate,
    Event,
    EventKind,
    History,
    HistoryMeta,
    Isolation,
    SinkKind,
    SinkSpec,
)
from harness.history.integrity import (
    CHECKSUM_KEY,
    TRAILER_KEY,
    ChecksumPolicy,
    JsonlDigest,
    check_jsonl_trailer,
    checked_policy,
    damaged,
    jsonl_trailer,
    parquet_checksum,
    read_parquet_checksum,
    row_group_digest,
    unreadable,
    unverified,
)

__all__ = [
    "CHECKSUM_KEY",
    "PARQUET_METADATA_KEY",
    "SUFFIXES",
    "dumps_jsonl",
    "history_arrow_schema",
    "loads_jsonl",
    "parquet_to_jsonl",
    "read_history",
    "read_jsonl",
    "read_parquet",
    "write_history",
    "write_jsonl",
    "write_parquet",
]

_Path: TypeAlias = "str | os.PathLike[str]"

PARQUET_METADATA_KEY: Final = b"harness.history"
"""Key of the header JSON in the schema metadata of a history Parquet file."""

SUFFIXES: Final = (".jsonl", ".parquet")
"""File suffixes that :func:`write_history` and :func:`read_history` understand."""

_INT_FIELDS: Final = frozenset({"index", *INT_FIELDS})
_NOT_NULL: Final = frozenset({"index", "kind"})
_FIELD_SET: Final = frozenset(EVENT_FIELDS)
_INT64_MIN: Final = -(2**63)
_INT64_MAX: Final = 2**63 - 1
_KINDS: Final = {kind.value: kind for kind in EventKind}
_KIND_NAMES: Final = ", ".join(kind.value for kind in EventKind)
_SURROGATE: Final = re.compile("[\ud800-\udfff]")
_HEADER_KEYS: Final = ("version", "run_id", "partitions", "sinks", "extra")
_SINK_KEYS: Final = ("kind", "ordered", "aggregate", "upsert", "isolation")
_UPGRADE_HINT: Final = "pip install --upgrade stream-harness"
_PARQUET_INSTALL: Final = "pip install 'stream-harness[parquet]'"
_ROW_GROUP_ROWS: Final = 1_000_000
_BATCH_ROWS: Final = 65_536
_SEPARATORS: Final = (",", ":")
_READING: Final = "reading the history"
"""What the progress meter is told while a history is read."""


# ------------------------------------------------------------------------------- dispatch


def write_history(history: History, path: _Path) -> None:
    """Write ``history`` to ``path`` in the format its suffix names (``.jsonl``, ``.parquet``).

    Any other suffix raises :class:`ConfigError` before anything is written.
    """
    if _format(path) == ".jsonl":
        write_jsonl(history, path)
    else:
        write_parquet(history, path)


def read_history(path: _Path, *, checksum: ChecksumPolicy = "verify") -> History:
    """Read the history at ``path`` in the format its suffix names (``.jsonl``, ``.parquet``).

    Raises :class:`ConfigError` for any other suffix, :class:`CorruptData` for a file that is
    not a valid history or whose checksum does not match what it holds, and ``OSError`` (e.g.
    ``FileNotFoundError``) if it cannot be opened. ``checksum`` is what to do with checksums
    (:data:`~harness.history.integrity.ChecksumPolicy`): ``"verify"`` (the default) checks
    the checksum every file this harness writes carries and reads a file without one
    (version 1, or Parquet another tool wrote) unverified; ``"require"`` refuses such a file
    too; ``"ignore"`` checks nothing, to read a damaged or hand-edited file on purpose.
    """
    if _format(path) == ".jsonl":
        return read_jsonl(path, checksum=checksum)
    return read_parquet(path, checksum=checksum)


def _format(path: _Path) -> str:
    text = os.fspath(path)
    if isinstance(text, str) and ("\0" in text or any("\ud800" <= c <= "\udfff" for c in text)):
        raise ConfigError(
            f"history path {shown(text)} holds a NUL or a lone surrogate, which no file name "
            "can; give another path"
        )
    suffix = Path(path).suffix.lower()
    if suffix not in SUFFIXES:
        raise ConfigError(
            f"cannot tell the history format of {shown(text)} from its suffix "
            f"{shown(suffix or '(none)')}: use one of {', '.join(SUFFIXES)}"
        )
    return suffix


# ---------------------------------------------------------------------------------- JSONL


def dumps_jsonl(history: History) -> str:
    """The JSONL text of ``history``: exactly the bytes :func:`write_jsonl` writes, decoded.

    Raises :class:`ConfigError` if the history could not be read back (see :func:`write_jsonl`).
    """
    return b"".join(_jsonl_bytes(history)).decode("utf-8")


def write_jsonl(history: History, path: _Path) -> None:
    """Write ``history`` as JSONL (UTF-8, ``"\\n"`` line endings), replacing ``path`` atomically.

    The last line is the checksum of the others (:mod:`harness.history.integrity`). Equal
    histories give byte-identical files. Raises :class:`ConfigError`, before writing
    anything, if a value could not be read back: a field of the wrong type, an integer outside
    int64, a string with a lone surrogate, a header that is not JSON data, or a header whose
    ``version`` is not :data:`SCHEMA_VERSION`.
    """
    _write_jsonl(history, path, checksum=True)


def _write_jsonl(history: History, path: _Path, *, checksum: bool) -> None:
    """:func:`write_jsonl`; without ``checksum``, no checksum line (the benchmark's baseline
    only: such a version-2 file does not read back)."""
    lines = _jsonl_bytes(history, checksum=checksum)  # validates before the file is touched
    with _atomic_target(path) as tmp, open(tmp, "wb") as out:
        out.writelines(lines)


def loads_jsonl(
    text: str, source: str = "<string>", *, checksum: ChecksumPolicy = "verify"
) -> History:
    """Parse JSONL text as :func:`read_jsonl` does; ``source`` names it in error messages."""
    return _parse_jsonl(_text_lines(text), source, checked_policy(checksum))


def read_jsonl(path: _Path, *, checksum: ChecksumPolicy = "verify") -> History:
    """Read a JSONL history written by :func:`write_jsonl` (or by hand, to the same schema).

    A key missing from an event line reads as null; an unknown key, a value of the wrong type,
    an unknown kind, bad JSON or UTF-8, a missing header, a header with a newer schema
    version, or (from version 2 on) a checksum line that is missing or does not match the
    lines before it raise :class:`CorruptData` naming the file and the line. ``checksum`` as
    in :func:`read_history`. ``OSError`` (e.g. ``FileNotFoundError``) passes through.
    """
    policy = checked_policy(checksum)
    with open(path, "rb") as stream:
        return _parse_jsonl(_binary_lines(stream), os.fspath(path), policy)


def _jsonl_bytes(history: History, *, checksum: bool = True) -> Iterator[bytes]:
    """Check ``history`` now, then return its lines (UTF-8, each ending in a newline) lazily,
    the checksum line last."""
    header = _checked_header(history)
    _check_events(history.events)
    return _jsonl_lines(header, history.events, checksum=checksum)


def _jsonl_lines(header: str, events: Iterable[Event], *, checksum: bool) -> Iterator[bytes]:
    """The lines of a JSONL history of checked ``header`` text and ``events``."""
    digest = JsonlDigest()
    line = f'{{"history":{header}}}\n'.encode()
    digest.add(line)
    yield line
    for event in events:
        row = json.dumps(event.to_row(), separators=_SEPARATORS, ensure_ascii=False)
        line = (row + "\n").encode()
        if checksum:
            digest.add(line)
        yield line
    if checksum:
        yield jsonl_trailer(digest).encode()


def parquet_to_jsonl(source: _Path, target: _Path) -> int:
    """Write the Parquet history ``source`` as the JSONL history ``target`` (replaced
    atomically), a row group at a time: memory stays bounded whatever the size, and the
    file is the one :func:`write_jsonl` writes for the same history. Returns the number of
    events. Errors as :func:`read_parquet`'s: a file with a checksum is verified row group
    by row group as it is converted (the JSONL file gets a checksum of its own, so damage
    must not get that far), and nothing is left at ``target`` when it does not match."""
    name = os.fspath(source)
    pa, pq = _pyarrow()
    pc = importlib.import_module("pyarrow.compute")
    with open(source, "rb") as stream:
        try:
            parquet = pq.ParquetFile(stream)
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise unreadable(name, f"not a Parquet file ({one_line(exc)})") from exc
        meta, expected = _parquet_head(pa, parquet, name, "verify")
        header = _checked_header(History(meta=_current(meta), events=()))
        total = parquet.metadata.num_rows
        written = [0]

        def events() -> Iterator[Event]:
            for batches in _verified_row_groups(pa, pc, parquet, expected, name):
                for batch in batches:
                    chunk: list[Event] = []
                    _add_events(chunk, [batch], name)
                    _check_events(chunk)
                    yield from chunk
                    written[0] += len(chunk)
                    advance("writing JSONL", written[0], total)

        with _atomic_target(target) as tmp, open(tmp, "wb") as out:
            out.writelines(_jsonl_lines(header, events(), checksum=True))
    return written[0]


def _text_lines(text: str) -> Iterator[str]:
    # Split on "\n" only: str.splitlines would also split inside strings at U+2028, U+0085...
    start = 0
    while start < len(text):
        end = text.find("\n", start)
        if end < 0:
            yield text[start:]
            return
        yield text[start : end + 1]
        start = end + 1


def _binary_lines(stream: IO[bytes]) -> Iterator[bytes]:
    yield from stream  # binary files split on b"\n" only


def _parse_jsonl(lines: Iterable[str | bytes], source: str, checksum: ChecksumPolicy) -> History:
    meta: HistoryMeta | None = None
    events: list[Event] = []
    digest = JsonlDigest() if checksum != "ignore" else None
    trailer = 0  # the line number of the checksum line
    for lineno, raw in enumerate(lines, 1):
        where = f"{source}: line {lineno}"
        if trailer:
            raise CorruptData(f"{where}: a line after the checksum line {trailer}, the last one")
        line = _decode_line(raw, where)
        terminated = line.endswith("\n")
        line = line.rstrip("\r\n")
        if not line.strip():
            raise CorruptData(f"{where}: blank line (a history has one JSON object per line)")
        obj = _parse_json(line, where, truncated=not terminated)
        if meta is not None and meta.version >= 2 and isinstance(obj, dict) and TRAILER_KEY in obj:
            if len(obj) != 1:
                raise damaged(where, "a checksum line holds other keys")
            if digest is not None:
                check_jsonl_trailer(obj[TRAILER_KEY], digest, where, source)
            trailer = lineno
            continue
        if digest is not None:
            digest.add(raw if isinstance(raw, bytes) else raw.encode("utf-8", "surrogatepass"))
        if meta is None:
            meta = _header_from_line(obj, where)
            continue
        if not isinstance(obj, dict):
            raise CorruptData(f"{where}: expected an event (a JSON object), got {_describe(obj)}")
        if "history" in obj:
            raise CorruptData(f"{where}: a second header; only line 1 may hold the header")
        events.append(_event_from_row(obj, where))
        if lineno % _BATCH_ROWS == 0:
            advance(_READING, len(events), None)
    if meta is None:
        raise CorruptData(
            f"{source}: missing header: the file is empty, expected a first line "
            '{"history": {...}}'
        )
    if meta.version >= 2 and not trailer and checksum != "ignore":
        raise damaged(
            source,
            f"no checksum line after its {len(events) + 1} lines (a version-{meta.version} "
            "history ends with one): it was cut short",
        )
    if meta.version < 2 and checksum == "require":
        raise unverified(source)
    return History(meta=_current(meta), events=tuple(events))


def _current(meta: HistoryMeta) -> HistoryMeta:
    """``meta`` of an older schema version, as the current one (the events are the same)."""
    if meta.version == SCHEMA_VERSION:
        return meta
    return dataclasses.replace(meta, version=SCHEMA_VERSION)


def _decode_line(raw: str | bytes, where: str) -> str:
    if isinstance(raw, str):
        return raw
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CorruptData(f"{where}: not valid UTF-8 ({exc.reason} at byte {exc.start})") from exc


def _header_from_line(obj: object, where: str) -> HistoryMeta:
    if not isinstance(obj, dict) or "history" not in obj:
        got = (
            "an event"
            if isinstance(obj, dict) and ("kind" in obj or "index" in obj)
            else _describe(obj)
        )
        raise CorruptData(
            f'{where}: missing header: the first line must be {{"history": {{...}}}}, got {got}'
        )
    meta = _meta_from_json(obj["history"], f"{where}: header")  # the version first
    extra_keys = sorted(set(obj) - {"history"})
    if extra_keys:
        raise CorruptData(f"{where}: unknown key(s) {extra_keys} in the header line")
    return meta


# -------------------------------------------------------------------------------- Parquet


def history_arrow_schema() -> Any:
    """The fixed ``pyarrow.Schema`` of history Parquet files, without the header metadata.

    One column per :data:`EVENT_FIELDS` entry, in that order: ``int64`` for ``index``,
    ``process``, ``offset``, ``part``, ``parts``, ``value``, ``output_id`` and ``txn``,
    ``string`` for the others; only ``index`` and ``kind`` are non-nullable. Raises
    :class:`MissingDependency` if pyarrow is not installed.
    """
    pa, _ = _pyarrow()
    return pa.schema(
        [
            pa.field(
                name,
                pa.int64() if name in _INT_FIELDS else pa.string(),
                nullable=name not in _NOT_NULL,
            )
            for name in EVENT_FIELDS
        ]
    )


PARQUET_WRITER_OPTIONS: Final[dict[str, Any]] = {
    "version": "2.6",
    "data_page_version": "1.0",
    "compression": "zstd",
    "compression_level": 3,
    "use_dictionary": True,
    "write_statistics": True,
    "store_schema": True,
    "write_page_index": False,
    "write_page_checksum": False,
}
"""The ``pyarrow.parquet.ParquetWriter`` options of every history file (shared with the
Spark generator of large histories)."""


def write_parquet(history: History, path: _Path) -> None:
    """Write ``history`` as Parquet, replacing ``path`` atomically.

    The schema is :func:`history_arrow_schema` with the header JSON under
    :data:`PARQUET_METADATA_KEY` in its metadata, and the checksum under :data:`CHECKSUM_KEY`
    in the file's key-value metadata (:mod:`harness.history.integrity`); zstd compression,
    statistics on, one row group per million rows. Equal histories give byte-identical files
    (for one pyarrow version: the file names the writing library in ``created_by``). Raises
    :class:`ConfigError` as :func:`write_jsonl` does, and :class:`MissingDependency` if
    pyarrow is not installed.
    """
    _write_parquet(history, path, checksum=True)


def _write_parquet(history: History, path: _Path, *, checksum: bool) -> None:
    """:func:`write_parquet`; without ``checksum``, no checksum (the benchmark's baseline)."""
    header = _checked_header(history).encode("utf-8")
    _check_events(history.events)
    pa, pq = _pyarrow()
    pc = importlib.import_module("pyarrow.compute")
    schema = history_arrow_schema().with_metadata({PARQUET_METADATA_KEY: header})
    tables: Iterable[Any] = _tables(pa, schema, history.events)
    late = checksum and hasattr(pq.ParquetWriter, "add_key_value_metadata")
    if checksum and not late:  # pyarrow < 16: the checksum must be in the schema's metadata
        tables = list(tables)  # each table is one row group
        checksum_json = parquet_checksum(
            header, [row_group_digest(pa, pc, table.to_batches()) for table in tables]
        )
        schema = schema.with_metadata({PARQUET_METADATA_KEY: header, CHECKSUM_KEY: checksum_json})
        tables = [table.replace_schema_metadata(schema.metadata) for table in tables]
    digests: list[str] = []  # pyarrow 16+: the row groups' digests, as they are written
    with _atomic_target(path) as tmp:
        writer = pq.ParquetWriter(os.fspath(tmp), schema, **PARQUET_WRITER_OPTIONS)
        try:
            for table in tables:
                if late:  # each table is one row group
                    digests.append(row_group_digest(pa, pc, table.to_batches()))
                writer.write_table(table, row_group_size=_ROW_GROUP_ROWS)
            if late:
                writer.add_key_value_metadata({CHECKSUM_KEY: parquet_checksum(header, digests)})
        finally:
            writer.close()


def read_parquet(path: _Path, *, checksum: ChecksumPolicy = "verify") -> History:
    """Read a Parquet history written by :func:`write_parquet` (or by Spark, to its schema).

    Columns must be exactly :data:`EVENT_FIELDS` (in any order), integer columns of an integer
    type and the others of a string type; the header must be in the schema metadata under
    :data:`PARQUET_METADATA_KEY`. Anything else, an unknown kind, a null ``index`` or
    ``kind``, a header with a newer schema version, or a checksum (under
    :data:`CHECKSUM_KEY`) that does not match the header or the decoded rows raises
    :class:`CorruptData` naming the file (and the 0-based row or the row group). ``checksum``
    as in :func:`read_history`: a file without one is read unverified unless it is
    ``"require"``. ``OSError`` passes through; :class:`MissingDependency` if pyarrow is not
    installed.
    """
    source = os.fspath(path)
    policy = checked_policy(checksum)
    pa, pq = _pyarrow()
    pc = importlib.import_module("pyarrow.compute")
    with open(path, "rb") as stream:
        try:
            parquet = pq.ParquetFile(stream)
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise unreadable(source, f"not a Parquet file ({one_line(exc)})") from exc
        meta, expected = _parquet_head(pa, parquet, source, policy)
        events: list[Event] = []
        try:
            for batches in _verified_row_groups(pa, pc, parquet, expected, source):
                _add_events(events, batches, source, parquet.metadata.num_rows)
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise unreadable(
                source,
                f"cannot decode the Parquet data after row {len(events)} ({one_line(exc)})",
            ) from exc
    return History(meta=_current(meta), events=tuple(events))


def _parquet_head(
    pa: Any, parquet: Any, source: str, policy: ChecksumPolicy
) -> tuple[HistoryMeta, list[str] | None]:
    """The header of the open history Parquet file ``parquet`` (``pyarrow.parquet.ParquetFile``;
    of the file's own schema version) once its columns are checked, and the row-group digests
    its checksum expects: ``None`` when nothing is to be verified (``policy`` is ``"ignore"``,
    or the file carries no checksum, which ``"require"`` refuses). A header that does not
    match the checksum is damage (:class:`CorruptData`), as in :func:`read_parquet`."""
    meta, header = _parquet_header(parquet.schema_arrow, source)
    _check_parquet_columns(pa, parquet.schema_arrow, source)
    if policy == "ignore":
        return meta, None
    stored = parquet.metadata.metadata or {}
    expected = read_parquet_checksum(stored, header, parquet.num_row_groups, source)
    if expected is None and policy == "require":
        raise unverified(source)
    return meta, expected


def _verified_row_groups(
    pa: Any, pc: Any, parquet: Any, expected: Sequence[str] | None, source: str
) -> Iterator[list[Any]]:
    """The record batches of each row group of the open history Parquet file ``parquet``, in
    order, each group checked against its digest in ``expected`` before it is yielded (``None``:
    unchecked): a mismatch is damage naming the group and its first row. Decoding errors
    (``pyarrow.ArrowException``, ``OSError``) pass through."""
    first = 0
    for group in range(parquet.num_row_groups):
        batches = list(
            parquet.iter_batches(
                batch_size=_BATCH_ROWS,
                row_groups=[group],
                columns=list(EVENT_FIELDS),
                use_threads=False,
            )
        )
        if expected is not None and row_group_digest(pa, pc, batches) != expected[group]:
            raise damaged(
                source, f"row group {group} (from row {first}) does not match its checksum"
            )
        yield batches
        first += sum(batch.num_rows for batch in batches)


def _add_events(
    events: list[Event], batches: Iterable[Any], source: str, total: int | None = None
) -> None:
    """Append the events of the rows of ``batches`` (record batches of a history file of
    ``total`` rows), telling the progress meter after each batch."""
    for batch in batches:
        columns = [batch.column(name).to_pylist() for name in EVENT_FIELDS]
        for values in zip(*columns, strict=True):
            where = f"{source}: row {len(events)} (0-based)"
            events.append(_event_from_row(dict(zip(EVENT_FIELDS, values, strict=True)), where))
        advance(_READING, len(events), total)


def _pyarrow(
    needed_by: str = "Parquet histories need", install: str = _PARQUET_INSTALL
) -> tuple[Any, Any]:
    """``pyarrow`` and ``pyarrow.parquet``; :class:`MissingDependency` names ``needed_by``
    and the pip command ``install`` when they cannot be imported."""
    try:
        pa = importlib.import_module("pyarrow")
        pq = importlib.import_module("pyarrow.parquet")
    except ImportError as exc:
        raise MissingDependency(
            f"{needed_by} the package pyarrow, which cannot be imported ({exc}); "
            f"install it with: {install}"
        ) from exc
    return pa, pq


def _tables(pa: Any, schema: Any, events: Sequence[Event]) -> Iterator[Any]:
    """One Arrow table per row group, built from record batches of ``_BATCH_ROWS`` rows."""
    for group_start in range(0, len(events), _ROW_GROUP_ROWS):
        group_end = min(group_start + _ROW_GROUP_ROWS, len(events))
        batches = []
        for start in range(group_start, group_end, _BATCH_ROWS):
            chunk = events[start : min(start + _BATCH_ROWS, group_end)]
            arrays = [
                pa.array(
                    [e.kind.value for e in chunk]
                    if name == "kind"
                    else [getattr(e, name) for e in chunk],
                    type=schema.field(name).type,
                )
                for name in EVENT_FIELDS
            ]
            batches.append(pa.RecordBatch.from_arrays(arrays, schema=schema))
        yield pa.Table.from_batches(batches, schema=schema)


def _parquet_header(arrow_schema: Any, source: str) -> tuple[HistoryMeta, bytes]:
    """The header of a history Parquet file (of the file's schema version), and its bytes."""
    metadata = arrow_schema.metadata or {}
    raw = metadata.get(PARQUET_METADATA_KEY)
    if raw is None:
        raise CorruptData(
            f"{source}: missing header: the Parquet schema metadata has no "
            f"{PARQUET_METADATA_KEY.decode()!r} key (was the file written by write_parquet?)"
        )
    where = f"{source}: header ({PARQUET_METADATA_KEY.decode()} metadata)"
    text = _decode_line(bytes(raw), where)
    return _meta_from_json(_parse_json(text, where, truncated=False), where), bytes(raw)


def _check_parquet_columns(pa: Any, arrow_schema: Any, source: str) -> None:
    names = list(arrow_schema.names)
    duplicates = sorted({name for name in names if names.count(name) > 1})
    unknown = [name for name in names if name not in _FIELD_SET]
    missing = [name for name in EVENT_FIELDS if name not in names]
    if duplicates or unknown or missing:
        problems = [
            f"{label} column(s) {cols}"
            for label, cols in (
                ("duplicate", duplicates),
                ("unknown", unknown),
                ("missing", missing),
            )
            if cols
        ]
        raise CorruptData(
            f"{source}: {'; '.join(problems)}; a history has the columns {', '.join(EVENT_FIELDS)}"
        )
    for name in EVENT_FIELDS:
        arrow_type = arrow_schema.field(name).type
        value_type = arrow_type.value_type if pa.types.is_dictionary(arrow_type) else arrow_type
        if name in _INT_FIELDS:
            ok = pa.types.is_integer(value_type)
        else:
            ok = pa.types.is_string(value_type) or pa.types.is_large_string(value_type)
        if not ok:
            expected = "an integer type (int64)" if name in _INT_FIELDS else "a string type"
            raise CorruptData(
                f"{source}: column {name!r} has type {arrow_type}, expected {expected}"
            )


# ------------------------------------------------------------------------ reading helpers


class _BadJSON(ValueError):
    pass


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _BadJSON(f"duplicate key {key!r}")
            seen.add(key)
    return result


def _reject_constant(name: str) -> NoReturn:
    raise _BadJSON(f"{name} is not valid JSON")


def _parse_json(text: str, where: str, *, truncated: bool) -> object:
    try:
        return json.loads(
            text, object_pairs_hook=_no_duplicate_keys, parse_constant=_reject_constant
        )
    except _BadJSON as exc:
        raise CorruptData(f"{where}: bad JSON: {exc}") from exc
    except json.JSONDecodeError as exc:
        hint = "; the file looks truncated (its last line has no newline)" if truncated else ""
        raise CorruptData(f"{where}: bad JSON: {exc.msg} (column {exc.colno}){hint}") from exc
    except (ValueError, RecursionError) as exc:  # e.g. an integer with too many digits
        raise CorruptData(f"{where}: bad JSON: {exc}") from exc


def _describe(value: object) -> str:
    kind = {
        bool: "boolean",
        int: "integer",
        float: "number",
        str: "string",
        list: "array",
        dict: "object",
        type(None): "null",
    }.get(type(value), type(value).__name__)
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{kind} {text}"


def _is_int64(value: object) -> bool:
    return type(value) is int and _INT64_MIN <= value <= _INT64_MAX


def _is_text(value: object) -> bool:
    return type(value) is str and (value.isascii() or _SURROGATE.search(value) is None)


def _field_problem(name: str, value: object) -> str | None:
    """Why ``value`` cannot be field ``name`` of an event, or ``None`` if it can."""
    if value is None:
        return f"field {name!r} must not be null" if name in _NOT_NULL else None
    if name in _INT_FIELDS:
        if _is_int64(value):
            return None
        if type(value) is int:
            return f"field {name!r} = {value} is outside the int64 range"
        return f"field {name!r} must be an integer or null, got {_describe(value)}"
    if _is_text(value):
        return None
    if type(value) is str:
        return f"field {name!r} holds a lone UTF-16 surrogate, which is not Unicode text"
    return f"field {name!r} must be a string or null, got {_describe(value)}"


def _event_from_row(row: dict[str, Any], where: str) -> Event:
    """An :class:`Event` from a row whose values are not trusted (a missing key reads as null)."""
    if len(row) > len(EVENT_FIELDS) or not _FIELD_SET.issuperset(row):
        unknown = sorted(set(row) - _FIELD_SET)
        raise CorruptData(
            f"{where}: unknown key(s) {unknown}; an event has the keys {', '.join(EVENT_FIELDS)}"
        )
    kind_name = row.get("kind")
    if kind_name is None:
        raise CorruptData(f"{where}: field 'kind' must not be null")
    if type(kind_name) is not str:
        raise CorruptData(f"{where}: field 'kind' must be a string, got {_describe(kind_name)}")
    kind = _KINDS.get(kind_name)
    if kind is None:
        raise CorruptData(f"{where}: unknown kind {kind_name!r}; the kinds are {_KIND_NAMES}")
    values: dict[str, Any] = {}
    for name in EVENT_FIELDS:
        if name == "kind":
            continue
        value = row.get(name)
        problem = _field_problem(name, value)
        if problem is not None:
            raise CorruptData(f"{where}: {problem}")
        values[name] = value
    return Event(kind=kind, **values)


def _check_json_text(value: object, where: str) -> None:
    """Reject lone surrogates anywhere in JSON data (they cannot be written back as UTF-8)."""
    if isinstance(value, str):
        if not _is_text(value):
            raise CorruptData(f"{where}: a string holds a lone UTF-16 surrogate")
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_json_text(key, where)
            _check_json_text(item, where)
    elif isinstance(value, list):
        for item in value:
            _check_json_text(item, where)


def _meta_from_json(obj: object, where: str) -> HistoryMeta:
    """A :class:`HistoryMeta` from untrusted header JSON; the version is checked first."""
    if not isinstance(obj, dict):
        raise CorruptData(f"{where}: the header must be a JSON object, got {_describe(obj)}")
    version = obj.get("version")
    if type(version) is not int:
        got = "nothing" if "version" not in obj else _describe(version)
        raise CorruptData(f"{where}: 'version' must be an integer, got {got}")
    if version > SCHEMA_VERSION:
        raise CorruptData(
            f"{where}: the history has schema version {version}, newer than this harness "
            f"reads (version {SCHEMA_VERSION}); upgrade stream-harness to read it "
            f"({_UPGRADE_HINT})"
        )
    if version < 1:
        raise CorruptData(
            f"{where}: schema version {version} does not exist (versions start at 1; this "
            f"harness reads version {SCHEMA_VERSION})"
        )
    unknown = sorted(set(obj) - set(_HEADER_KEYS))
    if unknown:
        raise CorruptData(
            f"{where}: unknown key(s) {unknown}; a version {version} header has the keys "
            f"{', '.join(_HEADER_KEYS)}"
        )
    for required in ("partitions", "sinks"):
        if required not in obj:
            raise CorruptData(f"{where}: missing key {required!r}")
    partitions = obj["partitions"]
    if not isinstance(partitions, list) or not all(_is_text(p) for p in partitions):
        raise CorruptData(
            f"{where}: 'partitions' must be an array of strings, got {_describe(partitions)}"
        )
    run_id = obj.get("run_id", "run")
    if not _is_text(run_id):
        raise CorruptData(f"{where}: 'run_id' must be a string, got {_describe(run_id)}")
    extra = obj.get("extra", {})
    if not isinstance(extra, dict):
        raise CorruptData(f"{where}: 'extra' must be a JSON object, got {_describe(extra)}")
    _check_json_text(extra, f"{where}: 'extra'")
    sinks_obj = obj["sinks"]
    if not isinstance(sinks_obj, dict):
        raise CorruptData(f"{where}: 'sinks' must be a JSON object, got {_describe(sinks_obj)}")
    sinks: dict[str, SinkSpec] = {}
    for name, spec in sinks_obj.items():
        if not _is_text(name):
            raise CorruptData(f"{where}: a sink name holds a lone UTF-16 surrogate")
        sinks[name] = _sink_from_json(spec, f"{where}: sink {name!r}")
    return HistoryMeta(
        partitions=tuple(partitions),
        sinks=sinks,
        run_id=run_id,
        version=version,
        extra=extra,
    )


def _sink_from_json(obj: object, where: str) -> SinkSpec:
    if not isinstance(obj, dict):
        raise CorruptData(f"{where}: must be a JSON object, got {_describe(obj)}")
    unknown = sorted(set(obj) - set(_SINK_KEYS))
    if unknown:
        raise CorruptData(
            f"{where}: unknown key(s) {unknown}; a sink has the keys {', '.join(_SINK_KEYS)}"
        )
    kinds = [kind.value for kind in SinkKind]
    if obj.get("kind") not in kinds:
        raise CorruptData(
            f"{where}: 'kind' must be one of {', '.join(kinds)}, got {_describe(obj.get('kind'))}"
        )
    ordered = obj.get("ordered", False)
    if type(ordered) is not bool:
        raise CorruptData(f"{where}: 'ordered' must be a boolean, got {_describe(ordered)}")
    aggregates = [aggregate.value for aggregate in Aggregate]
    aggregate = obj.get("aggregate")
    if aggregate is not None and aggregate not in aggregates:
        raise CorruptData(
            f"{where}: 'aggregate' must be null or one of {', '.join(aggregates)}, "
            f"got {_describe(aggregate)}"
        )
    upsert = obj.get("upsert", False)
    if type(upsert) is not bool or (upsert and obj["kind"] != SinkKind.LOG.value):
        raise CorruptData(
            f"{where}: 'upsert' must be a boolean, true only for a log sink, got "
            f"{_describe(upsert)}"
        )
    levels = [level.value for level in Isolation]
    isolation = obj.get("isolation", Isolation.READ_COMMITTED.value)
    if isolation not in levels or (
        isolation != Isolation.READ_COMMITTED.value and obj["kind"] != SinkKind.LOG.value
    ):
        raise CorruptData(
            f"{where}: 'isolation' must be one of {', '.join(levels)} (read_uncommitted only "
            f"for a log sink), got {_describe(isolation)}"
        )
    return SinkSpec(
        kind=SinkKind(obj["kind"]),
        ordered=ordered,
        aggregate=None if aggregate is None else Aggregate(aggregate),
        upsert=upsert,
        isolation=Isolation(isolation),
    )


# ------------------------------------------------------------------------ writing helpers


def _checked_header(history: History) -> str:
    """The header JSON of ``history`` (canonical key order), or :class:`ConfigError`."""
    if type(history) is not History or type(history.meta) is not HistoryMeta:
        raise ConfigError(f"cannot write {history!r}: expected a History with a HistoryMeta")
    meta = history.meta
    if meta.version != SCHEMA_VERSION:
        raise ConfigError(
            f"cannot write a history with header version {meta.version!r}: this harness "
            f"writes schema version {SCHEMA_VERSION} only"
        )
    try:
        header = meta.to_json()
        header["extra"] = json.loads(json.dumps(header["extra"], sort_keys=True, allow_nan=False))
        text = json.dumps(header, separators=_SEPARATORS, ensure_ascii=False, allow_nan=False)
    except (AttributeError, TypeError, ValueError) as exc:
        raise ConfigError(f"cannot write the history header: it is not JSON data ({exc})") from exc
    try:
        _meta_from_json(json.loads(text), "header")
    except CorruptData as exc:
        raise ConfigError(f"cannot write the history: {exc}") from exc
    return text


def _check_events(events: Sequence[Event]) -> None:
    for position, event in enumerate(events):
        if type(event) is not Event or not isinstance(event.kind, EventKind):
            raise ConfigError(
                f"cannot write event at position {position}: expected an Event with an "
                f"EventKind, got {event!r}"
            )
        for name in EVENT_FIELDS:
            if name == "kind":
                continue
            problem = _field_problem(name, getattr(event, name))
            if problem is not None:
                raise ConfigError(f"cannot write event at position {position}: {problem}")


@contextlib.contextmanager
def _atomic_target(path: _Path) -> Iterator[Path]:
    """A sibling temporary path to write; it replaces ``path`` only if the block succeeds."""
    target = Path(path)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        yield tmp
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
