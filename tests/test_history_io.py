"""History files: JSONL and Parquet round trips, determinism, and every refusal of bad input."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

import harness.history.io as history_io
from harness.errors import ConfigError, CorruptData, HarnessError, MissingDependency
from harness.history import (
    EVENT_FIELDS,
    PARQUET_METADATA_KEY,
    SCHEMA_VERSION,
    Aggregate,
    Event,
    EventKind,
    History,
    HistoryMeta,
    SinkKind,
    SinkSpec,
    dumps_jsonl,
    history_arrow_schema,
    loads_jsonl,
    read_history,
    read_jsonl,
    read_parquet,
    write_history,
    write_jsonl,
    write_parquet,
)

# ----------------------------------------------------------------------------- strategies

INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
TRICKY = [
    "<script>alert('x')</script>",
    "line\nbreak",
    "cr\r\nlf",
    "\u2028\u2029\x85\x1c",
    "nul\x00byte",
    'quote" and \\ backslash',
    "héllo wörld",
    "😀 astral",
    "",
]
TEXT = st.one_of(st.text(max_size=20), st.sampled_from(TRICKY))
OPT_INT = st.none() | INT64
OPT_TEXT = st.none() | TEXT

EVENTS = st.builds(
    Event,
    index=INT64,
    kind=st.sampled_from(list(EventKind)),
    process=OPT_INT,
    partition=OPT_TEXT,
    offset=OPT_INT,
    record_id=OPT_TEXT,
    part=OPT_INT,
    parts=OPT_INT,
    key=OPT_TEXT,
    value=OPT_INT,
    sink=OPT_TEXT,
    output_id=OPT_INT,
    txn=OPT_INT,
    dlsn=OPT_TEXT,
    detail=OPT_TEXT,
)

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | INT64 | st.floats(allow_nan=False, allow_infinity=False) | TEXT,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(TEXT, children, max_size=3),
    max_leaves=8,
)

SINKS = st.builds(
    SinkSpec,
    kind=st.sampled_from(list(SinkKind)),
    ordered=st.booleans(),
    aggregate=st.none() | st.sampled_from(list(Aggregate)),
)

METAS = st.builds(
    HistoryMeta,
    partitions=st.lists(TEXT, max_size=4).map(tuple),
    sinks=st.dictionaries(TEXT, SINKS, max_size=3),
    run_id=TEXT,
    extra=st.dictionaries(TEXT, JSON_VALUES, max_size=4),
)

HISTORIES = st.builds(History, meta=METAS, events=st.lists(EVENTS, max_size=25).map(tuple))


def small_history() -> History:
    meta = HistoryMeta(
        partitions=("in-0", "in-1"),
        sinks={
            "out": SinkSpec(SinkKind.LOG, ordered=True),
            "counts": SinkSpec(SinkKind.TABLE, aggregate=Aggregate.COUNT),
        },
        run_id="seed-42",
        extra={"processor": "demo", "schedule": [{"crash": 3}]},
    )
    k = EventKind
    events = (
        Event(0, k.APPEND, partition="in-0", offset=0, record_id="r0", key="a", value=1),
        Event(1, k.ACK, partition="in-0", offset=0, record_id="r0"),
        Event(2, k.START, process=1),
        Event(3, k.READ, process=1, partition="in-0", offset=0, record_id="r0", dlsn="1/0/0"),
        Event(4, k.EMIT, process=1, sink="out", output_id=0, record_id="r0", part=0, parts=1),
        Event(5, k.CRASH, process=1, detail="process"),
        Event(6, k.DRAIN),
        Event(7, k.OBSERVE, sink="out", output_id=0, record_id="r0", part=0),
        Event(8, k.END, detail="complete"),
    )
    return History(meta=meta, events=events)


def header_line(**overrides: Any) -> str:
    """A hand-written header line: schema version 1, the last without a checksum line."""
    header = small_history().meta.to_json() | {"version": 1}
    header.update(overrides)
    return json.dumps({"history": header})


def event_line(**overrides: Any) -> str:
    row = Event(0, EventKind.START, process=1).to_row()
    row.update(overrides)
    return json.dumps(row)


def jsonl_error(tmp_path: Path, text: str | bytes) -> str:
    """The CorruptData message read_jsonl gives for a file holding ``text``."""
    path = tmp_path / "bad.jsonl"
    if isinstance(text, str):
        path.write_text(text, encoding="utf-8", newline="")
    else:
        path.write_bytes(text)
    with pytest.raises(CorruptData) as info:
        read_jsonl(path)
    message = str(info.value)
    assert str(path) in message
    return message


def write_table(path: Path, table: pa.Table, *, header: bytes | None = None) -> None:
    if header is not None:
        table = table.replace_schema_metadata({PARQUET_METADATA_KEY: header})
    pq.write_table(table, path)


def small_table() -> pa.Table:
    rows = [event.to_row() for event in small_history().events]
    return pa.Table.from_pylist(rows, schema=history_arrow_schema())


def small_header() -> bytes:
    return json.dumps(small_history().meta.to_json()).encode()


def parquet_error(path: Path) -> str:
    with pytest.raises(CorruptData) as info:
        read_parquet(path)
    message = str(info.value)
    assert str(path) in message
    return message


# ---------------------------------------------------------------------------- round trips


@given(HISTORIES)
def test_jsonl_text_round_trip(history: History) -> None:
    text = dumps_jsonl(history)
    assert loads_jsonl(text) == history
    lines = text.split("\n")
    assert lines[-1] == ""
    assert len(lines) == len(history) + 3
    for line in lines[1:-2]:
        assert list(json.loads(line)) == list(EVENT_FIELDS)
    assert list(json.loads(lines[-2])) == ["checksum"]


@given(HISTORIES)
def test_jsonl_file_round_trip(history: History) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "h.jsonl"
        write_jsonl(history, path)
        assert read_jsonl(path) == history
        assert path.read_bytes() == dumps_jsonl(history).encode("utf-8")


@given(HISTORIES)
def test_parquet_round_trip(history: History) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "h.parquet"
        write_parquet(history, path)
        assert read_parquet(path) == history


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet", ".JSONL"])
def test_write_and_read_history_dispatch_on_suffix(tmp_path: Path, suffix: str) -> None:
    history = small_history()
    path = tmp_path / f"run{suffix}"
    write_history(history, path)
    assert read_history(str(path)) == history
    if suffix == ".parquet":
        assert path.read_bytes()[:4] == b"PAR1"
    else:
        assert path.read_text(encoding="utf-8").startswith('{"history":{"version":4,')


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_an_empty_history_round_trips(tmp_path: Path, suffix: str) -> None:
    history = History(meta=HistoryMeta(partitions=(), sinks={}), events=())
    path = tmp_path / f"empty{suffix}"
    write_history(history, path)
    assert read_history(path) == history


def test_parquet_row_groups_and_batches_are_split_and_read_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(history_io, "_ROW_GROUP_ROWS", 7)
    monkeypatch.setattr(history_io, "_BATCH_ROWS", 3)
    events = tuple(
        Event(i, EventKind.APPEND, partition="p", offset=i, record_id=f"r{i}", key="k", value=i)
        for i in range(20)
    )
    history = History(meta=small_history().meta, events=events)
    path = tmp_path / "h.parquet"
    write_parquet(history, path)
    metadata = pq.ParquetFile(path).metadata
    assert [metadata.row_group(i).num_rows for i in range(metadata.num_row_groups)] == [7, 7, 6]
    assert read_parquet(path) == history


def test_the_parquet_file_has_the_documented_schema_and_header(tmp_path: Path) -> None:
    path = tmp_path / "h.parquet"
    write_parquet(small_history(), path)
    schema = pq.read_schema(path)
    assert schema.names == list(EVENT_FIELDS)
    assert schema.remove_metadata().equals(history_arrow_schema())
    header = json.loads(schema.metadata[PARQUET_METADATA_KEY])
    assert header == small_history().meta.to_json()
    assert "run_id" not in schema.names
    column = pq.ParquetFile(path).metadata.row_group(0).column(0)
    assert column.compression == "ZSTD"
    assert column.statistics is not None


def test_history_arrow_schema() -> None:
    schema = history_arrow_schema()
    assert schema.names == list(EVENT_FIELDS)
    ints = {"index", "process", "offset", "part", "parts", "value", "output_id", "txn"}
    for field in schema:
        assert field.type == (pa.int64() if field.name in ints else pa.string())
        assert field.nullable == (field.name not in ("index", "kind"))
    assert not schema.metadata


def test_the_documented_example_is_a_canonical_history() -> None:
    doc = (Path(__file__).resolve().parent.parent / "docs" / "history.md").read_text("utf-8")
    example = doc.split("```jsonl\n", 1)[1].split("```", 1)[0]
    history = loads_jsonl(example, source="docs/history.md")
    assert dumps_jsonl(history) == example
    assert history.meta.version == SCHEMA_VERSION
    assert history.events[-1].kind is EventKind.END


def test_a_missing_optional_key_in_jsonl_reads_as_null() -> None:
    text = header_line() + "\n" + json.dumps({"index": 0, "kind": "drain"}) + "\n"
    assert loads_jsonl(text).events == (Event(0, EventKind.DRAIN),)


def test_crlf_line_endings_are_accepted() -> None:
    history = small_history()
    assert loads_jsonl(dumps_jsonl(history).replace("\n", "\r\n")) == history


def test_a_last_line_without_newline_is_accepted_when_complete() -> None:
    history = small_history()
    assert loads_jsonl(dumps_jsonl(history).rstrip("\n")) == history


def test_parquet_written_by_other_tools_is_read(tmp_path: Path) -> None:
    """Column order, narrower ints, large strings and dictionaries are all fine (e.g. Spark)."""
    table = small_table()
    columns = {name: table.column(name) for name in reversed(EVENT_FIELDS)}
    columns["process"] = columns["process"].cast(pa.int32())
    columns["key"] = columns["key"].cast(pa.large_string())
    columns["kind"] = columns["kind"].dictionary_encode()
    path = tmp_path / "other.parquet"
    write_table(path, pa.table(columns), header=small_header())
    assert read_parquet(path) == small_history()


# ---------------------------------------------------------------------------- determinism


@given(HISTORIES)
def test_repeated_writes_are_byte_identical(history: History) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        for suffix in (".jsonl", ".parquet"):
            first, second = Path(tmp) / f"a{suffix}", Path(tmp) / f"b{suffix}"
            write_history(history, first)
            write_history(history, second)
            assert first.read_bytes() == second.read_bytes()


def test_equal_histories_built_differently_give_identical_files(tmp_path: Path) -> None:
    one = small_history()
    meta = one.meta
    other = History(
        meta=HistoryMeta(
            partitions=meta.partitions,
            sinks=dict(reversed(list(meta.sinks.items()))),
            run_id=meta.run_id,
            extra=dict(reversed(list(meta.extra.items()))),
        ),
        events=tuple(Event(**e.to_row() | {"kind": e.kind}) for e in one.events),
    )
    assert other == one
    for suffix in (".jsonl", ".parquet"):
        write_history(one, tmp_path / f"one{suffix}")
        write_history(other, tmp_path / f"other{suffix}")
        assert (tmp_path / f"one{suffix}").read_bytes() == (
            tmp_path / f"other{suffix}"
        ).read_bytes()


def test_a_parquet_file_written_in_another_process_is_byte_identical(tmp_path: Path) -> None:
    here, there = tmp_path / "here.parquet", tmp_path / "there.parquet"
    write_parquet(small_history(), here)
    write_jsonl(small_history(), tmp_path / "h.jsonl")
    code = (
        "import sys; from harness.history import read_jsonl, write_parquet; "
        "write_parquet(read_jsonl(sys.argv[1]), sys.argv[2])"
    )
    root = Path(__file__).resolve().parent.parent
    subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "h.jsonl"), str(there)], check=True, cwd=root
    )
    assert here.read_bytes() == there.read_bytes()


# ------------------------------------------------------------------------ corrupt JSONL


def test_an_empty_jsonl_file_has_no_header(tmp_path: Path) -> None:
    message = jsonl_error(tmp_path, "")
    assert "missing header" in message
    assert "empty" in message


def test_a_truncated_jsonl_file_is_named_as_such(tmp_path: Path) -> None:
    text = dumps_jsonl(small_history())
    cut = text[: text.index("\n", text.index("\n") + 1) + 30]  # inside line 3
    message = jsonl_error(tmp_path, cut)
    assert "line 3" in message
    assert "bad JSON" in message
    assert "truncated" in message


def test_a_bad_json_line_names_its_line(tmp_path: Path) -> None:
    lines = dumps_jsonl(small_history()).split("\n")
    lines[4] = lines[4].replace(":", "=", 1)
    message = jsonl_error(tmp_path, "\n".join(lines))
    assert "line 5" in message
    assert "bad JSON" in message
    assert "truncated" not in message


def test_an_event_before_any_header_is_a_missing_header(tmp_path: Path) -> None:
    message = jsonl_error(tmp_path, event_line() + "\n")
    assert "line 1" in message
    assert "missing header" in message
    assert "got an event" in message


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"index": True}, "field 'index' must be an integer or null, got boolean True"),
        ({"offset": "5"}, "field 'offset' must be an integer or null, got string '5'"),
        ({"value": 1.0}, "field 'value' must be an integer or null, got number 1.0"),
        ({"offset": 2**63}, "field 'offset' = 9223372036854775808 is outside the int64 range"),
        ({"partition": 3}, "field 'partition' must be a string or null, got integer 3"),
        ({"detail": ["x"]}, "field 'detail' must be a string or null, got array"),
        ({"key": {"a": 1}}, "field 'key' must be a string or null, got object"),
        ({"index": None}, "field 'index' must not be null"),
        ({"kind": None}, "field 'kind' must not be null"),
        ({"kind": 3}, "field 'kind' must be a string, got integer 3"),
        ({"kind": "explode"}, "unknown kind 'explode'; the kinds are append, ack,"),
        ({"colour": "red"}, "unknown key(s) ['colour']"),
        ({"record_id": "\ud800"}, "field 'record_id' holds a lone UTF-16 surrogate"),
    ],
)
def test_wrong_event_values_are_refused(
    tmp_path: Path, overrides: dict[str, Any], expected: str
) -> None:
    message = jsonl_error(tmp_path, header_line() + "\n" + event_line(**overrides) + "\n")
    assert "line 2" in message
    assert expected in message


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("[1, 2]", "expected an event (a JSON object), got array"),
        ('{"index": 0, "index": 1, "kind": "drain"}', "duplicate key 'index'"),
        ('{"index": 0, "kind": "drain", "value": NaN}', "NaN is not valid JSON"),
        ("   ", "blank line"),
        (header_line(), "a second header"),
        ('{"index": 0, "kind": "drain", "value": 1' + "0" * 5000 + "}", "bad JSON"),
    ],
)
def test_malformed_event_lines_are_refused(tmp_path: Path, line: str, expected: str) -> None:
    message = jsonl_error(tmp_path, header_line() + "\n" + line + "\n")
    assert "line 2" in message
    assert expected in message


def test_invalid_utf8_is_refused(tmp_path: Path) -> None:
    data = header_line().encode() + b"\n" + event_line(detail="X").encode().replace(b"X", b"\xff")
    message = jsonl_error(tmp_path, data + b"\n")
    assert "line 2" in message
    assert "not valid UTF-8" in message


def test_a_newer_schema_version_asks_for_an_upgrade(tmp_path: Path) -> None:
    newer = SCHEMA_VERSION + 1
    message = jsonl_error(tmp_path, header_line(version=newer, shiny="new") + "\n")
    assert "line 1" in message
    assert f"schema version {newer}" in message
    assert f"reads (version {SCHEMA_VERSION})" in message
    assert "upgrade stream-harness" in message


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"version": 0}, "schema version 0 does not exist"),
        ({"version": "1"}, "'version' must be an integer, got string '1'"),
        ({"version": True}, "'version' must be an integer, got boolean True"),
        ({"partitions": "in-0"}, "'partitions' must be an array of strings"),
        ({"partitions": [1]}, "'partitions' must be an array of strings"),
        ({"run_id": 7}, "'run_id' must be a string, got integer 7"),
        ({"extra": []}, "'extra' must be a JSON object"),
        ({"sinks": []}, "'sinks' must be a JSON object"),
        ({"sinks": {"s": {"kind": "queue"}}}, "sink 's': 'kind' must be one of log, table"),
        ({"sinks": {"s": {"kind": "log", "ordered": 1}}}, "'ordered' must be a boolean"),
        ({"sinks": {"s": {"kind": "table", "aggregate": "max"}}}, "'aggregate' must be null"),
        ({"sinks": {"s": {"kind": "log", "x": 1}}}, "sink 's': unknown key(s) ['x']"),
        ({"colour": "red"}, "unknown key(s) ['colour']"),
    ],
)
def test_wrong_headers_are_refused(
    tmp_path: Path, overrides: dict[str, Any], expected: str
) -> None:
    message = jsonl_error(tmp_path, header_line(**overrides) + "\n")
    assert "line 1: header" in message
    assert expected in message


def test_a_header_without_required_keys_is_refused(tmp_path: Path) -> None:
    message = jsonl_error(tmp_path, '{"history": {"version": 1, "sinks": {}}}\n')
    assert "missing key 'partitions'" in message
    message = jsonl_error(tmp_path, '{"history": "v1"}\n')
    assert "the header must be a JSON object" in message
    message = jsonl_error(tmp_path, header_line()[:-1] + ', "more": 1}\n')
    assert "unknown key(s) ['more'] in the header line" in message


def test_loads_jsonl_names_its_source() -> None:
    with pytest.raises(CorruptData, match=r"^memory: line 1: missing header"):
        loads_jsonl(event_line() + "\n", source="memory")


# ---------------------------------------------------------------------- corrupt Parquet


def test_a_file_that_is_not_parquet_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "h.parquet"
    path.write_text(dumps_jsonl(small_history()), encoding="utf-8")
    assert "not a Parquet file" in parquet_error(path)


def test_a_truncated_parquet_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "h.parquet"
    write_parquet(small_history(), path)
    path.write_bytes(path.read_bytes()[:-100])
    assert "not a Parquet file" in parquet_error(path)


def test_parquet_without_the_header_metadata_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "h.parquet"
    write_table(path, small_table())
    message = parquet_error(path)
    assert "missing header" in message
    assert "'harness.history'" in message


def test_parquet_with_a_newer_version_asks_for_an_upgrade(tmp_path: Path) -> None:
    path = tmp_path / "h.parquet"
    header = small_history().meta.to_json() | {"version": SCHEMA_VERSION + 1}
    write_table(path, small_table(), header=json.dumps(header).encode())
    message = parquet_error(path)
    assert f"schema version {SCHEMA_VERSION + 1}" in message
    assert "upgrade stream-harness" in message


def test_parquet_with_bad_header_json_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "h.parquet"
    write_table(path, small_table(), header=b'{"version": 1,')
    message = parquet_error(path)
    assert "harness.history metadata" in message
    assert "bad JSON" in message


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda t: t.drop_columns(["dlsn"]), "missing column(s) ['dlsn']"),
        (lambda t: t.append_column("run_id", pa.array(["r"] * len(t))), "unknown column(s)"),
        (
            lambda t: t.set_column(3, "partition", t.column("partition").cast(pa.binary())),
            "column 'partition' has type binary, expected a string type",
        ),
        (
            lambda t: t.set_column(4, "offset", t.column("offset").cast(pa.float64())),
            "column 'offset' has type double, expected an integer type",
        ),
    ],
)
def test_parquet_with_wrong_columns_is_refused(tmp_path: Path, change: Any, expected: str) -> None:
    path = tmp_path / "h.parquet"
    write_table(path, change(small_table()), header=small_header())
    assert expected in parquet_error(path)


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        ({"kind": "explode"}, "row 1 (0-based): unknown kind 'explode'"),
        ({"index": None}, "field 'index' must not be null"),
        ({"offset": 2**63}, "outside the int64 range"),
    ],
)
def test_parquet_with_wrong_values_is_refused(
    tmp_path: Path, row: dict[str, Any], expected: str
) -> None:
    rows = [event.to_row() for event in small_history().events[:2]]
    rows[1] |= row
    types = {name: history_arrow_schema().field(name).type for name in EVENT_FIELDS}
    types["offset"] = pa.uint64()
    table = pa.table({name: pa.array([r[name] for r in rows], types[name]) for name in types})
    path = tmp_path / "h.parquet"
    write_table(path, table, header=small_header())
    message = parquet_error(path)
    assert "row 1" in message
    assert expected in message


# ---------------------------------------------------------------------- writers refuse


@pytest.mark.parametrize(
    ("history", "expected"),
    [
        (
            History(small_history().meta, (Event(0, EventKind.START, process=True),)),
            "event at position 0: field 'process' must be an integer or null, got boolean",
        ),
        (
            History(small_history().meta, (Event(0, EventKind.START, offset=-(2**63) - 1),)),
            "outside the int64 range",
        ),
        (
            History(small_history().meta, (Event(0, EventKind.END, detail="\udc80"),)),
            "lone UTF-16 surrogate",
        ),
        (
            History(small_history().meta, (Event(None, EventKind.DRAIN),)),  # type: ignore[arg-type]
            "field 'index' must not be null",
        ),
        (
            History(HistoryMeta(partitions=(), sinks={}, version=1), ()),
            "writes schema version 4 only",
        ),
        (
            History(HistoryMeta(partitions=(), sinks={}, extra={"x": object()}), ()),
            "not JSON data",
        ),
        (
            History(HistoryMeta(partitions=(), sinks={}, extra={"x": float("nan")}), ()),
            "not JSON data",
        ),
        (
            History(HistoryMeta(partitions=(1,), sinks={}), ()),  # type: ignore[arg-type]
            "'partitions' must be an array of strings",
        ),
    ],
)
@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_writers_refuse_what_could_not_be_read_back(
    tmp_path: Path, history: History, expected: str, suffix: str
) -> None:
    path = tmp_path / f"h{suffix}"
    path.write_bytes(b"previous")
    with pytest.raises(ConfigError) as info:
        write_history(history, path)
    assert expected in str(info.value)
    assert path.read_bytes() == b"previous"
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]


def test_a_failed_parquet_write_leaves_the_old_file_and_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "h.parquet"
    write_parquet(small_history(), path)
    before = path.read_bytes()

    def explode(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(history_io, "_tables", explode)
    with pytest.raises(RuntimeError, match="disk on fire"):
        write_parquet(History(small_history().meta, ()), path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["h.parquet"]


# ---------------------------------------------------------------- dispatch, dependencies


@pytest.mark.parametrize("name", ["h.json", "h.csv", "h", "h.parquet.gz"])
def test_unknown_suffixes_are_a_config_error(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    with pytest.raises(ConfigError) as info:
        write_history(small_history(), path)
    assert str(path) in str(info.value)
    assert ".jsonl, .parquet" in str(info.value)
    assert not path.exists()
    with pytest.raises(ConfigError, match=r"\.jsonl, \.parquet"):
        read_history(path)


def test_a_missing_file_is_an_os_error(tmp_path: Path) -> None:
    for name in ("gone.jsonl", "gone.parquet"):
        with pytest.raises(FileNotFoundError):
            read_history(tmp_path / name)


def test_without_pyarrow_parquet_raises_missing_dependency(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    calls = [
        lambda: write_parquet(small_history(), tmp_path / "h.parquet"),
        lambda: read_parquet(tmp_path / "h.parquet"),
        history_arrow_schema,
    ]
    for call in calls:
        with pytest.raises(MissingDependency) as info:
            call()
        assert isinstance(info.value, HarnessError)
        assert "pyarrow" in str(info.value)
        assert "pip install 'stream-harness[parquet]'" in str(info.value)
    assert not (tmp_path / "h.parquet").exists()
    write_jsonl(small_history(), tmp_path / "h.jsonl")  # JSONL needs nothing extra


def test_importing_harness_history_does_not_import_pyarrow() -> None:
    code = (
        "import sys, harness, harness.history, harness.history.io; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'pyarrow'))"
    )
    root = Path(__file__).resolve().parent.parent
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root
    )
    assert result.stdout.strip() == "[]"
