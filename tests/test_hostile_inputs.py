"""Bad input, as a hostile user would write it: a typed one-line error, never a traceback.

One reproducer per input that once escaped as RecursionError, ValueError, TypeError,
AttributeError, AssertionError, SyntaxError, OSError or UnicodeEncodeError (issue 18, item 5),
then Hypothesis fuzzing of every parser of outside JSON: only HarnessError may come out.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import plyvel
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness._shown import describe_exception, shown
from harness.check import Guarantee
from harness.cli import main
from harness.engine import CounterexampleFound, Replay, explore, run_once
from harness.errors import ConfigError, CorruptData, HarnessError, InvalidStreamName
from harness.faults import Produce, Run, Schedule
from harness.log import LogRecord, leveldb_uri, open_namespace
from harness.log.dlsn import DLSN
from harness.log.storage.base import LogMetadata
from harness.offsets import open_offset_store
from harness.report import gather, write_report
from harness.sim.topology import Topology

DEEP = "[" * 100_000 + "]" * 100_000
HUGE_INT = "9" * 5_000


def one_error_line(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """Run the CLI; it must exit 2 (usage error) with exactly one ``error:`` line."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    return err


# -- schedules, topologies, replay files -----------------------------------------------------


@pytest.mark.parametrize(
    ("text", "why"),
    [
        (DEEP, "arrays or objects nest too deeply"),
        ('{"steps": ' + "[" * 5000 + "]" * 5000 + "}", "nest too deeply"),
        # deeper than MAX_DEPTH, yet shallow enough for every interpreter's own parser
        ('{"steps": ' + "[" * 150 + "]" * 150 + "}", "more than 100 levels"),
        ('{"steps": [{"op": "run", "calls": ' + HUGE_INT + "}]}", "Exceeds the limit"),
        (b"\xff", "not UTF-8"),
    ],
)
def test_schedule_loads_of_unreadable_json_is_a_config_error(text: str | bytes, why: str) -> None:
    with pytest.raises(ConfigError, match=f"schedule is not JSON .*{why}"):
        Schedule.loads(text)


def test_a_huge_bad_value_is_cut_in_the_message() -> None:
    value = "x" * 100_000_000
    with pytest.raises(ConfigError) as info:
        Schedule.from_json({"steps": [{"op": "run", "calls": value}]})
    message = str(info.value)
    assert len(message) < 400
    assert message.endswith("... (100,000,000 characters)")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([1], "a topology is a JSON object such as"),
        ("x", "got str 'x'"),
        ({"partitions": 1, "keys": 1, "sinks": [1]}, "topology 'sinks' must be an object"),
        ({"partitions": 1, "keys": 1, "sinks": {"out": 1}}, "topology sink 'out' must be"),
        ({"partitions": 1, "keys": 1, "sinks": {"out": {"kind": "pipe"}}}, "'pipe'"),
        ({"partitions": 10**5000, "keys": 1, "sinks": {"out": {"kind": "log"}}}, "digits"),
        ({"keys": 1, "sinks": {"out": {"kind": "log"}}}, "the topology has no 'partitions' key"),
    ],
    ids=["list", "str", "sinks-list", "sink-int", "sink-kind", "huge-int", "missing"],
)
def test_topology_from_json_of_a_bad_value_is_a_config_error(data: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Topology.from_json(data)


def test_run_with_a_non_object_topology_is_one_error_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    target = "harness.catalogue.toys:process_then_commit"
    for topology in ("[1]", '"x"', "{", DEEP):
        err = one_error_line(
            capsys, ["run", target, "--guarantee", "at-least-once", "--topology", topology]
        )
        assert "topology" in err


def replay_json(**changes: object) -> dict[str, Any]:
    spec = Replay(
        "harness.catalogue.toys:process_then_commit",
        Guarantee.AT_LEAST_ONCE,
        Topology(),
        "memory",
        Schedule((Produce(0, 1), Run(2))),
    ).to_json()
    spec.update(changes)
    return spec


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (DEEP, "replay file .* is not JSON .*nest too deeply"),
        ('{"harness_replay": ' + HUGE_INT + "}", "Exceeds the limit"),
        (json.dumps(replay_json(topology=[1])), "a topology is a JSON object"),
        (json.dumps(replay_json(schedule=[1])), "a schedule is a JSON object"),
        (json.dumps(replay_json(seed="7")), "seed must be an integer or null"),
        (json.dumps(replay_json(guarantee=[1])), "guarantee must be one of"),
        (json.dumps(replay_json(processor_file=[1])), "processor_file must be a path or null"),
    ],
)
def test_replay_of_a_bad_file_is_one_error_line(
    content: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "replay.json"
    path.write_text(content)
    err = one_error_line(capsys, ["replay", str(path)])
    assert re.search(message, err), err


@pytest.mark.parametrize(
    ("name", "source", "message"),
    [
        ("broken.py", "def f(:\n", "SyntaxError: invalid syntax"),
        ("raising.py", "raise RuntimeError('at import')\n", "RuntimeError: at import"),
        ("processor.txt", "def f(ctx): pass\n", "is no .py file"),
    ],
)
def test_replay_of_an_unloadable_processor_file_is_one_error_line(
    name: str, source: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    processor_file = tmp_path / name
    processor_file.write_text(source)
    spec = replay_json(processor="no_such_module_anywhere:f", processor_file=str(processor_file))
    path = tmp_path / "replay.json"
    path.write_text(json.dumps(spec))
    assert message in one_error_line(capsys, ["replay", str(path)])
    assert not [m for m in sys.modules if m.startswith("_harness_replayed_")]


# -- stored log metadata -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value"),
    [("max_txid", "x"), ("commits", -1), ("committed", [1]), ("end_of_stream", 0)],
)
def test_stored_log_metadata_of_the_wrong_type_is_corrupt_data(
    field: str, value: object, tmp_path: Path
) -> None:
    root = tmp_path / "ns"
    with (
        open_namespace(leveldb_uri(root)) as namespace,
        namespace.open_log("log").open_writer() as writer,
    ):
        writer.write(LogRecord(1, b"a"))
        writer.commit()
    database = root / "logs" / "log" / "db"
    db = plyvel.DB(str(database))
    metadata = json.loads(db.get(b"m"))
    metadata[field] = value
    db.put(b"m", json.dumps(metadata).encode())
    db.close()
    with open_namespace(leveldb_uri(root)) as namespace:
        log = namespace.open_log("log")
        with pytest.raises(CorruptData, match=f"field '{field}'|'committed'"):
            log.open_writer()
        with pytest.raises(CorruptData, match=re.escape(str(database.parent))):
            log.open_reader(DLSN.INITIAL).read_next()


# -- paths and names ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "message"),
    [("a\0b", "contains NUL"), ("x" * 5000, "File name too long")],
)
def test_a_namespace_path_the_file_system_refuses_is_a_config_error(
    path: str, message: str, tmp_path: Path
) -> None:
    with pytest.raises(ConfigError, match=message):
        open_namespace(f"distributedlog-leveldb://{tmp_path}/{path}")


@pytest.mark.parametrize(
    ("location", "message"),
    [
        ("", "not a usable directory path"),
        ("offsets\0x", "not a usable directory path"),
        ("x" * 5000, "File name too long"),
    ],
)
def test_an_offset_store_path_the_file_system_refuses_is_a_config_error(
    location: str, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=message):
        open_offset_store(location)
    assert os.listdir(tmp_path) == []  # nothing created in the working directory


@pytest.mark.parametrize("backend", ["memory", "leveldb"])
def test_log_names_are_limited_by_the_leveldb_directory_name_on_both_backends(
    backend: str, tmp_path: Path
) -> None:
    uri = (
        leveldb_uri(tmp_path) if backend == "leveldb" else f"distributedlog-memory://{id(tmp_path)}"
    )
    with open_namespace(uri) as namespace:
        with pytest.raises(InvalidStreamName, match="258 bytes once percent-encoded"):
            namespace.create_log("é" * 43)
        longest = "é" * 42 + "abc"  # 252 + 3 = 255 bytes once encoded
        with namespace.open_log(longest).open_writer() as writer:
            writer.write(LogRecord(1, b"fits"))
            writer.commit()
        with namespace.open_log(longest).open_reader(DLSN.INITIAL) as reader:
            assert [record.payload for record in reader] == [b"fits"]


# -- what processors raise ---------------------------------------------------------------------


class UnprintableError(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text")


def raises_a_surrogate(ctx: object) -> None:
    raise ValueError("bad \udc80 byte")


def raises_unprintable(ctx: object) -> None:
    raise UnprintableError


def test_describe_exception_never_raises_and_escapes_surrogates() -> None:
    assert describe_exception(ValueError("bad \udc80")) == "ValueError: bad \\udc80"
    assert describe_exception(UnprintableError()) == (
        "UnprintableError: <its __str__ raised RuntimeError>"
    )
    assert len(describe_exception(ValueError("x" * 10**6))) < 1100


def test_a_processor_message_with_a_lone_surrogate_gives_a_whole_report(tmp_path: Path) -> None:
    history, verdict = run_once(
        raises_a_surrogate, Schedule((Produce(0, 1), Run(2))), "at-least-once"
    )
    assert "ValueError: bad \\udc80 byte" in verdict.summary()
    written = write_report(tmp_path, gather(verdict, history))
    assert sorted(written) == ["html", "json", "txt"]
    for path in written.values():
        path.read_bytes().decode("utf-8")  # valid UTF-8 throughout


def test_an_exception_whose_str_raises_does_not_escape_explore() -> None:
    with pytest.raises(CounterexampleFound, match="<its __str__ raised RuntimeError>"):
        explore(raises_unprintable, guarantee="at-least-once", max_examples=2, failures_dir=None)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("x" * 300, "'" + "x" * 199 + "... (300 characters)"),
        (10**5000, "<an int of about 5,000 digits>"),
        ("\udc80", "'\\udc80'"),
    ],
    ids=["long-str", "huge-int", "surrogate"],
)
def test_shown_cuts_and_never_raises(value: object, expected: str) -> None:
    assert shown(value) == expected


def test_shown_of_deep_nesting_and_broken_repr() -> None:
    deep: list[object] = []
    for _ in range(100_000):
        deep = [deep]
    assert shown(deep) == "[[[[[...]]]]]"

    class Broken:
        def __repr__(self) -> str:
            raise RuntimeError

    assert shown(Broken()).startswith("<")


# -- fuzzing: only HarnessError comes out ------------------------------------------------------

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    # built by map: older Hypothesis writes a strategy's bounds with repr(), which Python
    # refuses for an int of more than 4,300 digits
    | st.integers(min_value=0, max_value=10**6).map(lambda n: 10**4400 + n)
    | st.floats(allow_nan=True)
    | st.text(max_size=20)
    | st.sampled_from(["run", "produce", "log", "table", "count", "at-least-once", "memory"])
)
JSON = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                ["op", "steps", "calls", "version", "drain", "partitions", "keys", "sinks", "kind"]
            )
            | st.text(max_size=8),
            inner,
            max_size=5,
        )
    ),
    max_leaves=20,
)


def only_harness_errors(parse: Callable[[object], object], value: object) -> None:
    with contextlib.suppress(HarnessError):
        parse(value)


def dumps(value: object) -> str:
    """JSON text of ``value``; an int JSON cannot write out is written as its digits."""
    try:
        return json.dumps(value)
    except ValueError:  # an int of more than 4,300 digits: the text a hostile file holds
        return HUGE_INT


@settings(max_examples=300, deadline=None)
@given(JSON)
def test_fuzz_schedule_from_json(value: object) -> None:
    only_harness_errors(Schedule.from_json, value)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200) | st.text(max_size=200) | JSON.map(dumps))
def test_fuzz_schedule_loads(text: str | bytes) -> None:
    only_harness_errors(Schedule.loads, text)  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None)
@given(JSON)
def test_fuzz_topology_from_json(value: object) -> None:
    only_harness_errors(Topology.from_json, value)


@settings(max_examples=300, deadline=None)
@given(JSON, st.dictionaries(st.sampled_from(sorted(replay_json())), JSON, max_size=4))
def test_fuzz_replay_from_json(value: object, changes: dict[str, object]) -> None:
    only_harness_errors(Replay.from_json, value)
    only_harness_errors(Replay.from_json, {**replay_json(), **changes})


@settings(max_examples=300, deadline=None)
@given(
    st.binary(max_size=100) | JSON.map(lambda v: dumps(v).encode()),
    st.lists(st.tuples(st.binary(max_size=10), JSON.map(lambda v: dumps(v).encode()))),
)
def test_fuzz_stored_log_metadata(log: bytes, segments: list[tuple[bytes, bytes]]) -> None:
    def decode(_: object) -> object:
        return LogMetadata.decode(log, segments, where="fuzz")

    only_harness_errors(decode, None)


VALID_LOG = {"format": 1, "committed": [1, 0], "max_txid": 1, "end_of_stream": False, "commits": 1}
VALID_SEGMENT = {
    "segment": 1,
    "start_sequence_id": 1,
    "record_count": 1,
    "payload_bytes": 1,
    "first_txid": 1,
    "last_txid": 1,
    "last_entry": 0,
    "last_dlsn": {"segment": 1, "entry": 0, "slot": 0},
    "completed": False,
    "truncation": "active",
    "min_active_dlsn": None,
}


def test_the_valid_metadata_the_fuzzer_mutates_decodes() -> None:
    key = b"s" + (1).to_bytes(8, "big")
    metadata = LogMetadata.decode(
        json.dumps(VALID_LOG).encode(), [(key, json.dumps(VALID_SEGMENT).encode())], where="x"
    )
    assert metadata.committed == (1, 0) and metadata.segments[0].last_dlsn == DLSN(1, 0, 0)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted(VALID_LOG)), st.sampled_from(sorted(VALID_SEGMENT)), JSON, JSON)
def test_fuzz_one_field_of_stored_log_metadata(
    log_field: str, segment_field: str, log_value: object, segment_value: object
) -> None:
    key = b"s" + (1).to_bytes(8, "big")
    for log, segment in (
        ({**VALID_LOG, log_field: log_value}, VALID_SEGMENT),
        (VALID_LOG, {**VALID_SEGMENT, segment_field: segment_value}),
    ):
        stored = [(key, dumps(segment).encode())]
        only_harness_errors(
            lambda _: LogMetadata.decode(dumps(log).encode(), stored, where="x"),  # noqa: B023
            None,
        )


def test_report_and_replay_of_a_surrogate_message_write_every_file_and_print(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = replay_json(processor=f"{__name__}:raises_a_surrogate")
    path = tmp_path / "replay.json"
    path.write_text(json.dumps(spec))
    out = tmp_path / "report"
    assert main(["report", str(path), "--out", str(out)]) == 2  # UNKNOWN: the processor died
    assert "ValueError: bad \\udc80 byte" in capsys.readouterr().out
    assert sorted(p.name for p in out.iterdir()) == ["report.html", "report.json", "report.txt"]
    # a strict UTF-8 stdout, as a pipe or a CI log has, takes the replay's output whole
    result = subprocess.run(
        [sys.executable, "-m", "harness", "replay", str(path)],
        capture_output=True,
        env={
            **os.environ,
            "PYTHONIOENCODING": "utf-8:strict",
            "PYTHONPATH": os.pathsep.join(sys.path),
        },
        check=False,
    )
    assert result.returncode == 2, result.stderr
    assert b"ValueError: bad \\udc80 byte" in result.stdout
    assert b"Traceback" not in result.stderr
