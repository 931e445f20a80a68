"""The reference log's API and every error it documents, on both backends."""

from __future__ import annotations

from pathlib import Path

import plyvel
import pytest

from harness.errors import (
    AlreadyClosed,
    AlreadyTruncatedTransaction,
    ConfigError,
    CorruptData,
    EndOfStream,
    HarnessError,
    LogEmpty,
    LogNotFound,
    LogRecordTooLong,
    OwnershipAcquireFailed,
    TransactionIdOutOfOrder,
    UnsupportedURI,
    WriteException,
)
from harness.log import (
    DLSN,
    MAX_PAYLOAD_SIZE,
    MAX_TXID,
    LogConfig,
    LogManager,
    LogRecord,
    Namespace,
    Truncation,
    TxidCheck,
    leveldb_uri,
    open_namespace,
)


def write_committed(log: LogManager, txids: range, *, payload: bytes = b"") -> None:
    with log.open_writer() as writer:
        for txid in txids:
            writer.write(LogRecord(txid, payload or f"r{txid}".encode()))
        writer.commit()


def txids(log: LogManager, start: DLSN | int = DLSN.INITIAL) -> list[int]:
    with log.open_reader(start) as reader:
        return [record.txid for record in reader]


# -- namespaces -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        ("orders", "is not a namespace URI"),
        ("distributedlog-bk://zk/ns", "BookKeeper backend, which the harness does not run"),
        ("kafka://broker", "unsupported namespace URI scheme 'kafka'"),
        ("distributedlog-memory://", "non-empty NAME"),
        ("distributedlog-leveldb://relative/path", "three slashes, then an absolute"),
    ],
)
def test_bad_namespace_uris_say_what_is_supported(uri: str, message: str) -> None:
    with pytest.raises(UnsupportedURI, match=message) as info:
        open_namespace(uri)
    assert uri in str(info.value)


def test_create_is_idempotent_and_logs_are_listed_sorted(namespace: Namespace) -> None:
    assert namespace.get_logs() == []
    for name in ("b", "a", "b"):
        namespace.create_log(name)
    assert namespace.get_logs() == ["a", "b"]
    assert namespace.log_exists("a") and not namespace.log_exists("c")


def test_open_log_does_not_create_until_a_writer_opens(namespace: Namespace) -> None:
    log = namespace.open_log("lazy")
    assert not namespace.log_exists("lazy")
    reader = log.open_reader()
    with pytest.raises(LogNotFound, match="log 'lazy' does not exist"):
        reader.read_next()
    log.open_writer().close()
    assert namespace.log_exists("lazy")


def test_writer_does_not_create_when_told_not_to(namespace: Namespace) -> None:
    log = namespace.open_log("strict", create_stream_if_not_exists=False)
    with pytest.raises(LogNotFound, match="create_stream_if_not_exists is off"):
        log.open_writer()


def test_per_log_overrides_are_validated(namespace: Namespace) -> None:
    assert namespace.open_log("a", segment_max_records=2).config.segment_max_records == 2
    assert namespace.config.segment_max_records == 4
    with pytest.raises(ConfigError, match=r"unknown log configuration key\(s\) 'retention'"):
        namespace.open_log("a", retention=3)
    with pytest.raises(ConfigError, match="segment_max_records must be an int >= 1, got 0"):
        namespace.open_log("a", segment_max_records=0)
    with pytest.raises(ConfigError, match="txid_check must be one of 'every-record'"):
        namespace.open_log("a", txid_check="sometimes")


def test_closed_namespace_refuses_everything(namespace_uri: str) -> None:
    namespace = open_namespace(namespace_uri)
    log = namespace.open_log("a")
    namespace.close()
    for call in (namespace.get_logs, lambda: namespace.create_log("a"), log.open_writer):
        with pytest.raises(AlreadyClosed, match="is closed; open it again"):
            call()


def test_delete_fails_while_a_writer_holds_the_log(namespace: Namespace) -> None:
    log = namespace.open_log("held")
    writer = log.open_writer()
    with pytest.raises(OwnershipAcquireFailed, match="'held'"):
        namespace.delete_log("held")
    writer.close()
    namespace.delete_log("held")
    assert not namespace.log_exists("held")
    with pytest.raises(LogNotFound, match="'held' does not exist"):
        namespace.delete_log("held")


def test_a_deleted_log_starts_empty_when_recreated(namespace: Namespace) -> None:
    log = namespace.open_log("again")
    write_committed(log, range(3))
    namespace.delete_log("again")
    with pytest.raises(LogNotFound):
        log.get_last_log_record()
    write_committed(log, range(10, 12))
    assert txids(log) == [10, 11]


def test_memory_namespaces_are_shared_by_name(backend: str, namespace_uri: str) -> None:
    with open_namespace(namespace_uri) as first:
        write_committed(first.open_log("shared"), range(3))
    with open_namespace(namespace_uri) as second:
        assert txids(second.open_log("shared")) == [0, 1, 2]


# -- writing ----------------------------------------------------------------------------


def test_only_commit_makes_records_visible(namespace: Namespace) -> None:
    log = namespace.open_log("a")
    writer = log.open_writer()
    reader = log.open_reader()
    writer.write(LogRecord(1, b"one"))
    writer.write_bulk([LogRecord(2, b"two"), LogRecord(3, b"three")])
    assert reader.read_next() is None
    writer.flush()
    assert reader.read_next() is None
    with pytest.raises(LogEmpty, match="has no committed records"):
        log.get_last_log_record()
    writer.commit()
    assert [r.payload for r in reader.read_bulk(10)] == [b"one", b"two", b"three"]
    assert log.get_last_txid() == 3
    writer.close()


def test_a_second_writer_is_refused_until_the_first_closes(namespace: Namespace) -> None:
    log = namespace.open_log("single")
    first = log.open_writer()
    with pytest.raises(OwnershipAcquireFailed, match="log 'single' already has a writer"):
        log.open_writer()
    with pytest.raises(OwnershipAcquireFailed):
        namespace.open_log("single").open_writer()
    first.close()
    log.open_writer().close()


def test_txids_must_not_decrease_and_the_error_names_both(namespace: Namespace) -> None:
    with namespace.open_log("a").open_writer() as writer:
        writer.write(LogRecord(5, b""))
        writer.write(LogRecord(5, b""))  # equal is fine
        with pytest.raises(TransactionIdOutOfOrder, match=r"txid 4 .* after txid 5") as info:
            writer.write(LogRecord(4, b""))
        assert (info.value.txid, info.value.last_txid) == (4, 5)
        writer.write(LogRecord(6, b""))  # not sticky


@pytest.mark.parametrize("txid", [-1, MAX_TXID])
def test_negative_and_reserved_txids_are_always_rejected(namespace: Namespace, txid: int) -> None:
    log = namespace.open_log("a", max_id_sanity_check=False)
    with log.open_writer() as writer, pytest.raises(TransactionIdOutOfOrder, match=f"txid {txid}"):
        writer.write(LogRecord(txid, b""))


def test_sanity_check_off_accepts_decreasing_txids(namespace: Namespace) -> None:
    log = namespace.open_log("a", max_id_sanity_check=False)
    write_committed(log, range(5, 0, -1))
    assert txids(log) == [5, 4, 3, 2, 1]


def test_segment_start_mode_checks_only_the_first_txid_of_a_segment(namespace: Namespace) -> None:
    log = namespace.open_log("a", txid_check=TxidCheck.SEGMENT_START, segment_max_records=2)
    with log.open_writer() as writer:
        writer.write(LogRecord(10, b""))
        writer.write(LogRecord(3, b""))  # inside the segment: accepted, as the real code does
        with pytest.raises(TransactionIdOutOfOrder, match=r"txid 4 .* after txid 10"):
            writer.write(LogRecord(4, b""))  # would start segment 2
        writer.write(LogRecord(11, b""))
    assert txids(log) == [10, 3, 11]


def test_payload_size_limit(namespace: Namespace) -> None:
    log = namespace.open_log("big", segment_max_bytes=2**40)
    with log.open_writer() as writer:
        writer.write(LogRecord(1, bytes(MAX_PAYLOAD_SIZE)))
        with pytest.raises(LogRecordTooLong, match="1040365-byte payload; the limit is 1040364"):
            writer.write(LogRecord(2, bytes(MAX_PAYLOAD_SIZE + 1)))
        writer.write(LogRecord(3, b"small"))  # not sticky
    assert txids(log) == [1, 3]


def test_bad_record_arguments_are_typed_errors() -> None:
    with pytest.raises(ConfigError, match="payload must be bytes, got str: 'text'"):
        LogRecord(1, "text")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"txid must be an int, got 1\.5"):
        LogRecord(1.5, b"")  # type: ignore[arg-type]


def test_write_bulk_reports_how_far_it_got(namespace: Namespace) -> None:
    log = namespace.open_log("a")
    with log.open_writer() as writer:
        records = [LogRecord(1, b""), LogRecord(2, b""), LogRecord(0, b""), LogRecord(3, b"")]
        with pytest.raises(TransactionIdOutOfOrder, match=r"records 0..1 were buffered; record 2"):
            writer.write_bulk(records)
    assert txids(log) == [1, 2]


def test_an_empty_commit_takes_an_entry_for_its_control_record(namespace: Namespace) -> None:
    log = namespace.open_log("a")
    with log.open_writer() as writer:
        writer.write(LogRecord(1, b""))
        writer.commit()
        writer.commit()
        writer.write(LogRecord(2, b""))
        writer.commit()
    with log.open_reader() as reader:
        assert [r.dlsn for r in reader] == [DLSN(1, 0, 0), DLSN(1, 2, 0)]


def test_entries_follow_the_output_buffer_size(namespace: Namespace) -> None:
    log = namespace.open_log("a", output_buffer_size=0, segment_max_records=100)
    write_committed(log, range(3))
    with log.open_reader() as reader:
        assert [r.dlsn for r in reader] == [DLSN(1, 0, 0), DLSN(1, 1, 0), DLSN(1, 2, 0)]


def test_segments_roll_by_records_and_sequence_ids_span_them(namespace: Namespace) -> None:
    log = namespace.open_log("a", segment_max_records=3)
    write_committed(log, range(8))
    with log.open_reader() as reader:
        records = list(reader)
    assert [r.dlsn.segment for r in records] == [1, 1, 1, 2, 2, 2, 3, 3]
    assert [r.sequence_id for r in records] == list(range(8))
    assert [s.completed for s in log.segments()] == [True, True, True]


def test_segments_roll_by_bytes(namespace: Namespace) -> None:
    log = namespace.open_log("a", segment_max_bytes=10, segment_max_records=1000)
    write_committed(log, range(4), payload=b"0123456789")
    assert [s.record_count for s in log.segments()] == [1, 1, 1, 1]


def test_abort_loses_uncommitted_records_and_a_new_writer_continues(namespace: Namespace) -> None:
    log = namespace.open_log("a")
    writer = log.open_writer()
    writer.write_bulk([LogRecord(1, b""), LogRecord(2, b"")])
    writer.commit()
    writer.write(LogRecord(3, b"lost"))
    writer.flush()
    writer.abort()
    with log.open_writer() as recovered:
        recovered.write(LogRecord(4, b""))
    with log.open_reader() as reader:
        records = list(reader)
    assert [(r.txid, r.sequence_id) for r in records] == [(1, 0), (2, 1), (4, 2)]
    assert records[-1].dlsn == DLSN(2, 0, 0)  # recovery completed segment 1


def test_close_commits_what_is_buffered(namespace: Namespace) -> None:
    log = namespace.open_log("a")
    writer = log.open_writer()
    writer.write(LogRecord(1, b""))
    writer.close()
    assert txids(log) == [1]
    with pytest.raises(AlreadyClosed, match="the writer of log 'a' is closed"):
        writer.write(LogRecord(2, b""))


def test_a_with_block_commits_when_it_ends_and_aborts_when_it_raises(
    namespace: Namespace,
) -> None:
    log = namespace.open_log("a")
    with log.open_writer() as writer:
        writer.write(LogRecord(1, b""))
    with pytest.raises(KeyError), log.open_writer() as failing:
        failing.write(LogRecord(2, b"lost"))
        raise KeyError("the processor failed")
    assert txids(log) == [1]
    with pytest.raises(AlreadyClosed, match="the writer of log 'a' is closed"):
        failing.write(LogRecord(3, b""))
    with log.open_writer() as recovered:
        recovered.write(LogRecord(3, b""))
    assert txids(log) == [1, 3]


class FailingAppends:
    """Wraps a log storage so that appends fail: a broken disk or a lost bookie."""

    def __init__(self, inner: object) -> None:
        self._inner = inner

    def append_entry(self, *args: object) -> None:
        raise OSError("disk is gone")

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)


def test_storage_errors_are_sticky(namespace: Namespace) -> None:
    log = namespace.open_log("a")
    writer = log.open_writer()
    writer._storage = FailingAppends(writer._storage)  # type: ignore[assignment]
    writer.write(LogRecord(1, b""))
    with pytest.raises(WriteException, match=r"writing log 'a' failed \(OSError: disk is gone\)"):
        writer.commit()
    with pytest.raises(WriteException, match="has been closed due to error"):
        writer.write(LogRecord(2, b""))
    writer.abort()
    write_committed(log, range(5, 6))
    assert txids(log) == [5]


def test_end_of_stream_seals_the_log(namespace: Namespace) -> None:
    log = namespace.open_log("a")
    writer = log.open_writer()
    writer.write(LogRecord(1, b""))
    writer.mark_end_of_stream()
    writer.mark_end_of_stream()  # again: a no-op
    assert log.is_end_of_stream_marked()
    assert log.get_last_txid() == 1
    with pytest.raises(EndOfStream, match=r"sealed by mark_end_of_stream\(\).*txid 2"):
        writer.write(LogRecord(2, b""))
    writer.close()
    with log.open_writer() as again, pytest.raises(EndOfStream):
        again.write(LogRecord(3, b""))
    reader = log.open_reader()
    assert reader.read_next() is not None
    for _ in range(2):  # sticky
        with pytest.raises(EndOfStream, match="reached the end-of-stream marker"):
            reader.read_next()


# -- reading -----------------------------------------------------------------------------


def test_reader_by_dlsn_returns_records_at_or_after_it(namespace: Namespace) -> None:
    log = namespace.open_log("a", segment_max_records=100)
    write_committed(log, range(5))  # one entry, slots 0..4
    assert txids(log, DLSN(1, 0, 2)) == [2, 3, 4]
    assert txids(log, DLSN(1, 0, 5)) == []
    assert txids(log, DLSN.NON_INCLUSIVE_LOWER_BOUND) == [0, 1, 2, 3, 4]


def test_reader_by_txid_starts_at_the_first_txid_not_less(namespace: Namespace) -> None:
    log = namespace.open_log("a")
    with log.open_writer() as writer:
        writer.write_bulk(LogRecord(t, b"") for t in (1, 3, 3, 7, 9))
    assert txids(log, 3) == [3, 3, 7, 9]
    assert txids(log, 4) == [7, 9]
    assert txids(log, 0) == [1, 3, 3, 7, 9]
    tail = log.open_reader(20)
    assert tail.read_next() is None
    write_committed(log, range(15, 23))
    assert [r.txid for r in tail] == [20, 21, 22]


def test_readers_tail_a_growing_log(namespace: Namespace) -> None:
    log = namespace.open_log("a")
    writer = log.open_writer()
    reader = log.open_reader()
    seen = []
    for batch in range(4):
        writer.write_bulk(LogRecord(batch * 10 + i, b"") for i in range(3))
        writer.commit()
        seen += [r.txid for r in reader.read_bulk(100, non_blocking=True)]
    assert seen == [0, 1, 2, 10, 11, 12, 20, 21, 22, 30, 31, 32]
    assert reader.position == DLSN(3, 1, 2)  # segments of 4: 22 | 30 31 32 in entry 1
    writer.close()


def test_read_bulk_count_is_validated(namespace: Namespace) -> None:
    with pytest.raises(ConfigError, match="read_bulk count must be an int >= 1, got 0"):
        namespace.open_log("a").open_reader().read_bulk(0)


def test_open_reader_position_is_validated(namespace: Namespace) -> None:
    with pytest.raises(ConfigError, match=r"a DLSN or a txid .*got str: '1'"):
        namespace.open_log("a").open_reader("1")  # type: ignore[arg-type]


def test_closed_reader_raises(namespace: Namespace) -> None:
    reader = namespace.open_log("a").open_reader()
    reader.close()
    with pytest.raises(AlreadyClosed, match="reader of log 'a' is closed"):
        reader.read_next()


def test_first_and_last_records(namespace: Namespace) -> None:
    log = namespace.open_log("a")
    with pytest.raises(LogNotFound):
        log.get_last_dlsn()
    namespace.create_log("a")
    with pytest.raises(LogEmpty):
        log.get_first_log_record()
    write_committed(log, range(1, 10))
    assert log.get_first_log_record().txid == 1
    last = log.get_last_log_record()
    assert (last.txid, last.sequence_id, last.dlsn) == (9, 8, log.get_last_dlsn())


# -- truncation ---------------------------------------------------------------------------


def segments_state(log: LogManager) -> list[tuple[int, str]]:
    return [(s.segment, s.truncation.value) for s in log.segments()]


def test_truncate_follows_distributedlog_rules(namespace: Namespace) -> None:
    log = namespace.open_log("a", segment_max_records=3)
    writer = log.open_writer()
    writer.write_bulk(LogRecord(t, b"") for t in range(8))  # segments 1,2 complete; 3 in progress
    writer.commit()
    assert [s.completed for s in log.segments()] == [True, True, False]
    assert writer.truncate(DLSN.INVALID) is False
    assert writer.truncate(DLSN(2, 0, 1)) is True
    assert segments_state(log) == [(1, "truncated"), (2, "partially-truncated"), (3, "active")]
    assert txids(log) == [4, 5, 6, 7]  # the head is skipped, the start moved up
    assert txids(log, DLSN(1, 0, 1)) == [4, 5, 6, 7]
    writer.truncate(DLSN(2, 0, 0))  # lower: never un-truncates
    assert log.segments()[1].min_active_dlsn == DLSN(2, 0, 1)
    writer.truncate(DLSN(3, 0, 1))  # inside the in-progress segment: hides nothing there
    assert segments_state(log) == [(1, "truncated"), (2, "truncated"), (3, "active")]
    assert txids(log) == [6, 7]
    writer.close()


def test_open_readers_are_not_cut_off_by_truncation(namespace: Namespace) -> None:
    log = namespace.open_log("a", segment_max_records=2)
    writer = log.open_writer()
    writer.write_bulk(LogRecord(t, b"") for t in range(7))
    writer.commit()
    lagging = log.open_reader()
    assert lagging.read_next() is not None  # txid 0, positioned in segment 1
    writer.truncate(DLSN(3, 0, 0))
    # Txid 1 was already in the reader's read-ahead; segments 1 and 2 were then purged under
    # it, so it skips forward silently, as DistributedLog does: 2 and 3 are lost to this
    # reader (which is the checker's job to notice).
    assert [r.txid for r in lagging] == [1, 4, 5, 6]
    writer.close()


def test_positioning_inside_a_truncated_segment_after_live_data_fails(
    namespace: Namespace,
) -> None:
    import dataclasses

    log = namespace.open_log("a", segment_max_records=2)
    write_committed(log, range(6))
    # A hole: segment 2 truncated while segment 1 is not. DistributedLog's readers refuse it.
    writer = log.open_writer()
    storage = writer._storage
    metadata = storage.metadata
    hole = dataclasses.replace(metadata.segments[1], truncation=Truncation.TRUNCATED)
    segments = (metadata.segments[0], hole, *metadata.segments[2:])
    storage.commit(dataclasses.replace(metadata, segments=segments), changed=[2], sync=True)
    with pytest.raises(AlreadyTruncatedTransaction, match=r"in truncated segment 2") as info:
        log.open_reader(DLSN(2, 0, 0)).read_next()
    assert "DLSN{logSegmentSequenceNo=3, entryId=0, slotId=0}" in str(info.value)
    writer.close()


# -- LevelDB specifics -----------------------------------------------------------------------


def test_leveldb_log_survives_reopening_the_namespace(tmp_path: Path) -> None:
    uri = leveldb_uri(tmp_path / "ns")
    with open_namespace(uri, config=LogConfig(segment_max_records=2)) as namespace:
        write_committed(namespace.open_log("a"), range(5))
    with open_namespace(uri) as namespace:
        log = namespace.open_log("a")
        assert txids(log) == [0, 1, 2, 3, 4]
        assert [s.record_count for s in log.segments()] == [2, 2, 1]


def test_leveldb_corrupt_entry_names_the_key(tmp_path: Path) -> None:
    uri = leveldb_uri(tmp_path / "ns")
    with open_namespace(uri) as namespace:
        write_committed(namespace.open_log("a"), range(3))
    db = plyvel.DB(str(tmp_path / "ns" / "logs" / "a" / "db"))
    key = b"e" + (1).to_bytes(8, "big") + (0).to_bytes(8, "big")
    assert db.get(key) is not None
    db.put(key, b"\x00\x01garbage")
    db.close()
    with open_namespace(uri) as namespace, namespace.open_log("a").open_reader() as reader:
        with pytest.raises(CorruptData, match=r"segment 1, entry 0\).*truncated record header"):
            reader.read_next()
        with pytest.raises(CorruptData):  # sticky
            reader.read_next()


def test_leveldb_corrupt_metadata_is_reported(tmp_path: Path) -> None:
    uri = leveldb_uri(tmp_path / "ns")
    with open_namespace(uri) as namespace:
        write_committed(namespace.open_log("a"), range(3))
    db = plyvel.DB(str(tmp_path / "ns" / "logs" / "a" / "db"))
    db.put(b"m", b"{not json")
    db.close()
    with open_namespace(uri) as namespace, pytest.raises(CorruptData, match="not JSON"):
        namespace.open_log("a").get_last_txid()


def test_a_file_where_the_namespace_directory_should_be(tmp_path: Path) -> None:
    target = tmp_path / "file"
    target.write_text("x")
    with pytest.raises(ConfigError, match="exists and is not a directory"):
        open_namespace(leveldb_uri(target))


def test_every_log_error_is_a_harness_error() -> None:
    import harness.errors as errors

    for name in errors.__all__:
        assert issubclass(getattr(errors, name), HarnessError), name


def test_write_bulk_rejecting_its_first_record_says_none_was_buffered(
    namespace: Namespace,
) -> None:
    with (
        namespace.open_log("a").open_writer() as writer,
        pytest.raises(TransactionIdOutOfOrder, match=r"no record was buffered; record 0"),
    ):
        writer.write_bulk([LogRecord(-1, b"")])
