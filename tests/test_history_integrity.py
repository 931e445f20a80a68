"""Damaged history files: a typed error naming the file, or exactly the history written.

Issue 26.4: before checksums, 44 of 400 one-bit flips in a JSONL history and 31 of 400 in a
Parquet one read back as a silently different history. Each format is damaged at evenly
spaced bits (and cut at evenly spaced bytes); every read must give :class:`CorruptData`
naming the file, or exactly the history written. With ``checksum="ignore"`` the same sweep
finds different histories: the baseline the checksums are measured against. The sweeps
marked ``slow`` flip ten times as many bits.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from harness.errors import ConfigError, CorruptData
from harness.history import (
    CHECKSUM_KEY,
    PARQUET_METADATA_KEY,
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
    write_history,
)
from harness.history import io as history_io
from harness.history.integrity import ChecksumPolicy

FORMATS = (".jsonl", ".parquet")


def a_history(events: int = 60) -> History:
    """A history using every column: ints large and small, non-ASCII text, nulls."""
    meta = HistoryMeta(
        partitions=("in-0", "in-1"),
        sinks={
            "out": SinkSpec(SinkKind.LOG, ordered=True),
            "counts": SinkSpec(SinkKind.TABLE, aggregate=Aggregate.SUM),
        },
        run_id="seed-26",
        extra={"processor": "integrity", "note": "grüße"},
    )
    rows = []
    for i in range(events):
        partition = f"in-{i % 2}"
        if i % 3 == 0:
            rows.append(
                Event(i, EventKind.APPEND, partition=partition, offset=i // 2,
                      record_id=f"r{i}", key=f"k{i % 5}é", value=i * 1_000_003)
            )  # fmt: skip
        elif i % 3 == 1:
            rows.append(
                Event(i, EventKind.READ, process=1 + i % 4, partition=partition, offset=i // 2,
                      record_id=f"r{i - 1}", dlsn="AQAAAAAAAAABAAAAAAAAAAAAAAAAAAAAAA==")
            )  # fmt: skip
        else:
            rows.append(
                Event(i, EventKind.EMIT, process=1 + i % 4, sink="out", output_id=2**40 + i,
                      record_id=f"r{i - 2}", part=0, parts=1, txn=-i)
            )  # fmt: skip
    rows.append(Event(events, EventKind.END, detail="complete"))
    return History(meta=meta, events=tuple(rows))


def damages(data: bytes, flips: int, cuts: int) -> Iterator[tuple[str, bytes]]:
    bits = len(data) * 8
    for bit in sorted({bits * i // flips for i in range(flips)}):
        damaged = bytearray(data)
        damaged[bit // 8] ^= 1 << (bit % 8)
        yield f"flip bit {bit}", bytes(damaged)
    for cut in sorted({len(data) * i // cuts for i in range(cuts)}):
        yield f"cut to {cut} bytes", data[:cut]


def sweep(
    tmp_path: Path, suffix: str, *, flips: int, cuts: int, checksum: ChecksumPolicy = "verify"
) -> dict[str, list[str]]:
    """Write :func:`a_history`, damage it every way; the damages, by outcome."""
    history = a_history()
    pristine = tmp_path / f"pristine{suffix}"
    write_history(history, pristine)
    assert read_history(pristine) == history
    damaged_path = tmp_path / f"damaged{suffix}"
    outcomes: dict[str, list[str]] = {"exact": [], "typed": []}
    for label, damaged in damages(pristine.read_bytes(), flips, cuts):
        damaged_path.write_bytes(damaged)
        try:
            got = read_history(damaged_path, checksum=checksum)
        except CorruptData as exc:
            result = "typed" if str(damaged_path) in str(exc) else f"unnamed: {exc}"
        except Exception as exc:
            result = f"untyped: {type(exc).__name__}: {exc}"
        else:
            result = "exact" if got == history else "different"
        outcomes.setdefault(result, []).append(label)
    return outcomes


def assert_typed_or_exact(outcomes: dict[str, list[str]]) -> None:
    wrong = {
        result: cases for result, cases in outcomes.items() if result not in ("exact", "typed")
    }
    assert not wrong, wrong
    assert outcomes["typed"], outcomes


@pytest.mark.parametrize("suffix", FORMATS)
def test_a_damaged_history_file_raises_or_reads_exactly_as_written(
    suffix: str, tmp_path: Path
) -> None:
    assert_typed_or_exact(sweep(tmp_path, suffix, flips=400, cuts=40))


@pytest.mark.slow
@pytest.mark.parametrize("suffix", FORMATS)
def test_the_full_sweep_of_a_history_file(suffix: str, tmp_path: Path) -> None:
    assert_typed_or_exact(sweep(tmp_path, suffix, flips=4000, cuts=400))


@pytest.mark.parametrize("suffix", FORMATS)
def test_without_the_checksum_the_same_sweep_reads_different_histories(
    suffix: str, tmp_path: Path
) -> None:
    # The baseline: what the checksum prevents (issue 26 counted 44 and 31 of 400).
    outcomes = sweep(tmp_path, suffix, flips=400, cuts=40, checksum="ignore")
    assert outcomes.get("different"), outcomes


# -- JSONL ----------------------------------------------------------------------------------


def test_a_jsonl_history_ends_with_the_sha256_of_its_other_lines() -> None:
    text = dumps_jsonl(a_history())
    *lines, trailer = text.splitlines(keepends=True)
    digest = hashlib.sha256("".join(lines).encode()).hexdigest()
    assert trailer == f'{{"checksum":{{"sha256":"{digest}"}}}}\n'


def test_a_jsonl_history_cut_at_a_line_boundary_is_reported_as_cut(tmp_path: Path) -> None:
    # Version 1 read such a file as a shorter history.
    lines = dumps_jsonl(a_history()).splitlines(keepends=True)
    with pytest.raises(CorruptData, match=r"no checksum line after its 11 lines.*cut short"):
        loads_jsonl("".join(lines[:11]), source="cut.jsonl")


def test_a_changed_jsonl_line_names_the_file_and_what_to_do() -> None:
    text = dumps_jsonl(a_history()).replace('"value":3000009', '"value":3000008')
    with pytest.raises(CorruptData) as raised:
        loads_jsonl(text, source="run.jsonl")
    message = str(raised.value)
    assert message.startswith("run.jsonl: its lines hash to SHA-256 ")
    assert "the file is damaged; restore it" in message and "checksum='ignore'" in message
    assert "\n" not in message
    # read on purpose, then written again: a new checksum
    edited = loads_jsonl(text, checksum="ignore")
    assert edited.events[3].value == 3000008
    assert loads_jsonl(dumps_jsonl(edited)) == edited


def test_nothing_may_follow_the_checksum_line() -> None:
    text = dumps_jsonl(a_history())
    extra = json.dumps(a_history().events[0].to_row(), separators=(",", ":"))
    with pytest.raises(CorruptData, match="a line after the checksum line"):
        loads_jsonl(text + extra + "\n")


def test_a_malformed_checksum_line_is_damage() -> None:
    *lines, _ = dumps_jsonl(a_history()).splitlines(keepends=True)
    for trailer in ('{"checksum":{"sha256":1}}\n', '{"checksum":{"md5":"x"}}\n'):
        with pytest.raises(CorruptData, match="checksum line is not"):
            loads_jsonl("".join(lines) + trailer)
    with pytest.raises(CorruptData, match="a checksum line holds other keys"):
        loads_jsonl("".join(lines) + '{"checksum":{"sha256":"0"},"index":1}\n')


def test_crlf_line_endings_keep_the_checksum_valid() -> None:
    history = a_history()
    assert loads_jsonl(dumps_jsonl(history).replace("\n", "\r\n"), checksum="require") == history


def version_1(text: str) -> str:
    """``text`` as schema version 1 wrote it: no checksum line."""
    lines = text.splitlines(keepends=True)[:-1]
    lines[0] = lines[0].replace('{"history":{"version":4,', '{"history":{"version":1,', 1)
    return "".join(lines)


def test_a_version_1_jsonl_history_reads_unverified_unless_a_checksum_is_required() -> None:
    history = a_history()
    old = version_1(dumps_jsonl(history))
    assert loads_jsonl(old) == history  # migrated: the current version in memory
    with pytest.raises(CorruptData, match=r"old.jsonl: the history carries no checksum"):
        loads_jsonl(old, source="old.jsonl", checksum="require")
    assert loads_jsonl(dumps_jsonl(loads_jsonl(old)), checksum="require") == history


def test_an_unknown_checksum_policy_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    write_history(a_history(), path)
    with pytest.raises(ConfigError, match="checksum must be one of 'verify', 'require'"):
        read_history(path, checksum="sometimes")  # type: ignore[arg-type]


# -- Parquet --------------------------------------------------------------------------------


def checksum_of(path: Path) -> dict[str, Any]:
    stored = pq.ParquetFile(path).metadata.metadata
    loaded: dict[str, Any] = json.loads(stored[CHECKSUM_KEY])
    return loaded


def test_the_parquet_checksum_is_metadata_only(tmp_path: Path) -> None:
    path = tmp_path / "run.parquet"
    write_history(a_history(), path)
    checksum = checksum_of(path)
    assert checksum["algorithm"] == "sha256-columns"
    header = pq.read_schema(path).metadata[PARQUET_METADATA_KEY]
    assert checksum["header"] == hashlib.sha256(header).hexdigest()
    assert len(checksum["row_groups"]) == 1
    # the columns are those of a file without the checksum: readers such as Spark see no change
    plain = tmp_path / "plain.parquet"
    history_io._write_parquet(a_history(), plain, checksum=False)
    assert pq.read_table(path).equals(pq.read_table(plain))
    assert CHECKSUM_KEY not in (pq.ParquetFile(plain).metadata.metadata or {})


def test_the_row_group_digests_do_not_depend_on_batch_sizes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(history_io, "_ROW_GROUP_ROWS", 16)
    monkeypatch.setattr(history_io, "_BATCH_ROWS", 5)  # the writer's batches
    path = tmp_path / "run.parquet"
    write_history(a_history(), path)
    assert len(checksum_of(path)["row_groups"]) == 4
    monkeypatch.setattr(history_io, "_BATCH_ROWS", 3)  # the reader's
    assert read_history(path, checksum="require") == a_history()


def test_a_damaged_parquet_row_group_is_named(tmp_path: Path) -> None:
    path = tmp_path / "run.parquet"
    write_history(a_history(), path)
    checksum = checksum_of(path)
    checksum["row_groups"] = ["0" * 64]
    table = pq.read_table(path)
    metadata = dict(pq.ParquetFile(path).metadata.metadata)
    metadata[CHECKSUM_KEY] = json.dumps(checksum).encode()
    header = table.schema.metadata[PARQUET_METADATA_KEY]
    # in the schema's metadata, which pyarrow writes to the file's key-value metadata (its
    # ParquetWriter.add_key_value_metadata, the writer's own way, is pyarrow 16+)
    keys = {PARQUET_METADATA_KEY: header, CHECKSUM_KEY: metadata[CHECKSUM_KEY]}
    pq.write_table(table.replace_schema_metadata(keys), path)
    with pytest.raises(CorruptData, match=r"row group 0 \(from row 0\) does not match"):
        read_history(path)


def decoding_damages(pristine: Path, probe: Path) -> Iterator[bytes]:
    """The one-bit flips of :func:`damages` (400 of them) of the Parquet file ``pristine``
    (:func:`a_history`) that still decode, as another history: what only the checksum
    catches (each is written to ``probe`` to be read)."""
    for _, damaged in damages(pristine.read_bytes(), 400, 0):
        probe.write_bytes(damaged)
        try:
            decoded = read_history(probe, checksum="ignore")
        except CorruptData:
            continue
        if decoded != a_history():
            yield damaged


def test_a_damaged_parquet_history_is_not_converted_into_a_verified_jsonl_one(
    tmp_path: Path,
) -> None:
    """``parquet_to_jsonl`` writes a JSONL file with a checksum of its own: every flip that
    decodes as another history is refused (naming the row group) and leaves no file, where
    without the Parquet checksum the damage would come out verified."""
    pristine = tmp_path / "pristine.parquet"
    write_history(a_history(), pristine)
    damaged_path, target = tmp_path / "damaged.parquet", tmp_path / "converted.jsonl"
    refused = 0
    for damaged in decoding_damages(pristine, damaged_path):
        damaged_path.write_bytes(damaged)
        with pytest.raises(CorruptData, match="does not match its checksum"):
            history_io.parquet_to_jsonl(damaged_path, target)
        assert not target.exists()
        refused += 1
    assert refused >= 10, refused
    history_io.parquet_to_jsonl(pristine, target)
    assert read_history(target, checksum="require") == a_history()


def test_the_spark_checkers_verification_of_the_rows_fails_closed(tmp_path: Path) -> None:
    """The Spark checker verifies the rows on the driver beside its Spark jobs
    (:func:`harness.spark.check._verify.verified`, which needs pyarrow, not pyspark): a
    mismatch replaces what the check returned or raised, a file it cannot read is an error
    too, and with nothing found the check's own outcome stands."""
    from harness.spark.check._verify import verified
    from harness.spark.source import discover_runs

    pristine = tmp_path / "run.parquet"
    write_history(a_history(), pristine)
    runs = discover_runs(pristine)
    assert runs[0].files[0].digests is not None
    with verified(runs):  # sound: nothing raised
        pass
    with pytest.raises(ZeroDivisionError), verified(runs):
        raise ZeroDivisionError  # the check's own error stands when the rows are sound
    damaged_path = tmp_path / "damaged.parquet"
    damaged_path.write_bytes(next(decoding_damages(pristine, damaged_path)))
    damaged_runs = discover_runs(damaged_path)
    mismatch = r"row group 0 \(from row 0\) does not match its checksum"
    with pytest.raises(CorruptData, match=mismatch), verified(damaged_runs):
        pass  # the check "returned": its verdict is not given
    with pytest.raises(CorruptData, match=mismatch), verified(damaged_runs):
        raise RuntimeError("Spark failed too")  # the damage is named instead
    damaged_path.unlink()  # gone since it was listed
    gone = "cannot read its rows after row 0 to verify them"
    with pytest.raises(CorruptData, match=gone), verified(damaged_runs):
        pass


def test_parquet_from_another_tool_reads_unverified_unless_a_checksum_is_required(
    tmp_path: Path,
) -> None:
    history = a_history()
    table = pa.Table.from_pylist(
        [event.to_row() for event in history.events], schema=history_arrow_schema()
    )
    header = json.dumps(history.meta.to_json() | {"version": 1}).encode()
    path = tmp_path / "spark.parquet"
    pq.write_table(table.replace_schema_metadata({PARQUET_METADATA_KEY: header}), path)
    assert read_history(path) == history
    with pytest.raises(CorruptData, match="the history carries no checksum"):
        read_history(path, checksum="require")


def test_a_parquet_header_changed_without_its_checksum_is_damage(tmp_path: Path) -> None:
    history = a_history()
    path = tmp_path / "run.parquet"
    write_history(history, path)
    table = pq.read_table(path)
    checksum = pq.ParquetFile(path).metadata.metadata[CHECKSUM_KEY]
    header = json.dumps(history.meta.to_json() | {"run_id": "seed-62"}).encode()
    keys = {PARQUET_METADATA_KEY: header, CHECKSUM_KEY: checksum}
    pq.write_table(table.replace_schema_metadata(keys), path)
    with pytest.raises(CorruptData, match="its header does not match its checksum"):
        read_history(path)


@pytest.mark.parametrize("older", [2, 3])
def test_an_older_jsonl_history_with_its_checksum_reads_verified_as_the_current_one(
    older: int,
) -> None:
    """Schema versions 3 (issue 31: indeterminate sends, retries, seeks) and 4 (rebalance
    events) only added forms; a version-2 or version-3 file, checksummed as its version
    wrote it, reads as it is, verified, into the current version."""
    from harness.history import SCHEMA_VERSION, dumps_jsonl, loads_jsonl
    from harness.history.integrity import JsonlDigest, jsonl_trailer

    current = dumps_jsonl(a_history(8))
    lines = current.splitlines(keepends=True)[:-1]
    lines[0] = lines[0].replace('{"history":{"version":4,', f'{{"history":{{"version":{older},', 1)
    assert f'"version":{older},' in lines[0]
    digest = JsonlDigest()
    for line in lines:
        digest.add(line.encode())
    old = "".join(lines) + jsonl_trailer(digest)
    history = loads_jsonl(old, checksum="require")
    assert history.meta.version == SCHEMA_VERSION == 4
    assert history.events == a_history(8).events
