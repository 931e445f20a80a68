"""The LevelDB log across real OS processes: durability under SIGKILL and the writer lock.

The child processes run this very file (``python tests/test_log_processes.py MODE ...``),
so the child's code is linted and shares :func:`payload` with the checks. Parent and child
synchronise only through the child's stdout (one line per event, flushed) and its stdin;
nothing sleeps. A watchdog kills a child that stops talking, so a hang fails the test
instead of blocking the run.

Child protocol (``write`` mode), one line per event:

* ``unacked I``: record I (txid I, payload ``payload(I)``) was written (buffered);
* ``flushed N``: ``flush()`` returned with N records written (transmitted, not committed);
* ``commit-begin N``: ``commit()`` is about to be called with N records written;
* ``ack N DLSN``: ``commit()`` returned, N records are committed, the last at DLSN, and
  the offset store holds DLSN (it was put, synced, before this line);
* ``parked``: (``parked`` variant) it wrote and flushed records past its last commit and
  now waits to be killed.
"""

from __future__ import annotations

import itertools
import os
import random
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Final

import pytest

from harness.errors import OwnershipAcquireFailed, StoreLocked, TransactionIdOutOfOrder
from harness.log import DLSN, LogRecord, LogRecordWithDLSN, leveldb_uri, open_namespace
from harness.offsets import LevelDBOffsetStore

LOG: Final = "events/child"
READER_ID: Final = "child-reader"
CHILD_TIMEOUT: Final = 30.0  # seconds before the watchdog kills a silent child
MAX_RECORDS: Final = 1_000_000  # the free-running child never gets there: it is killed


def payload(index: int) -> bytes:
    """The payload of record ``index`` (txid ``index``), different lengths included."""
    return f"payload-{index:06d}|".encode() * (1 + index % 4)


# -- the child -----------------------------------------------------------------------------


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _child_write(root: str, seed: int, offsets: str, variant: str, park_after: int) -> int:
    """Write records, committing every k (k drawn per batch), until killed.

    ``variant`` "free" runs on (the pipe's back-pressure is its only brake); "parked"
    stops after ``park_after`` commits with written-but-uncommitted (some flushed)
    records and waits to be killed.
    """
    rng = random.Random(seed)
    ns = open_namespace(leveldb_uri(root))
    manager = ns.open_log(LOG, segment_max_records=rng.choice([3, 7, 50]), output_buffer_size=64)
    writer = manager.open_writer()
    store = LevelDBOffsetStore(offsets, sync=True)
    written = commits = 0
    while written < MAX_RECORDS:
        batch = rng.randint(1, 8)
        for _ in range(batch):
            writer.write(LogRecord(written, payload(written)))
            _say(f"unacked {written}")
            written += 1
            if rng.random() < 0.2:
                writer.flush()
                _say(f"flushed {written}")
        if variant == "parked" and commits == park_after:
            writer.flush()
            _say(f"flushed {written}")
            writer.write(LogRecord(written, payload(written)))  # buffered only
            _say(f"unacked {written}")
            _say("parked")
            sys.stdin.readline()
            return 1  # killed before this, normally
        _say(f"commit-begin {written}")
        writer.commit()
        last = manager.get_last_dlsn()
        store.put(READER_ID, last)
        commits += 1
        _say(f"ack {written} {last.serialize()}")
    return 1


def _child_hold(root: str) -> int:
    """Open the writer, commit one record, say "ready", hold the writer until stdin closes."""
    ns = open_namespace(leveldb_uri(root))
    writer = ns.open_log(LOG).open_writer()
    writer.write(LogRecord(7, b"from the child"))
    writer.commit()
    _say("ready")
    sys.stdin.read()  # until the parent closes our stdin
    writer.close()
    ns.close()
    _say("closed")
    return 0


def _child_main(argv: list[str]) -> int:
    mode, root, *rest = argv
    if mode == "write":
        seed, offsets, variant, park_after = rest
        return _child_write(root, int(seed), offsets, variant, int(park_after))
    if mode == "hold":
        return _child_hold(root)
    raise SystemExit(f"unknown child mode {mode!r}")


# -- the parent's side ---------------------------------------------------------------------


@dataclass
class Child:
    process: subprocess.Popen[str]
    lines: list[str] = field(default_factory=list)

    @property
    def stdout(self) -> IO[str]:
        assert self.process.stdout is not None
        return self.process.stdout

    def read_line(self) -> str:
        line = self.stdout.readline()
        if not line:
            self.process.wait()
            assert self.process.stderr is not None
            raise AssertionError(
                f"child exited (status {self.process.returncode}) before saying what was "
                f"expected; its stderr:\n{self.process.stderr.read()}"
            )
        self.lines.append(line.rstrip("\n"))
        return self.lines[-1]

    def read_until(self, wanted: str, count: int = 1) -> None:
        """Read lines until ``count`` of them start with ``wanted``."""
        seen = 0
        while seen < count:
            if self.read_line().split(" ", 1)[0] == wanted:
                seen += 1

    def kill(self) -> None:
        """SIGKILL the child, reap it and collect what it printed before dying."""
        os.kill(self.process.pid, signal.SIGKILL)
        assert self.process.wait() == -signal.SIGKILL
        self.lines.extend(self.stdout.read().splitlines())


@contextmanager
def child(*args: str) -> Iterator[Child]:
    """A child running this file; always killed (if still running) and reaped."""
    process = subprocess.Popen(
        [sys.executable, __file__, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    watchdog = threading.Timer(CHILD_TIMEOUT, process.kill)
    watchdog.start()
    try:
        with process:
            try:
                yield Child(process)
            finally:
                if process.poll() is None:
                    process.kill()
                process.wait()
    finally:
        watchdog.cancel()


def read_all(root: Path) -> list[LogRecordWithDLSN]:
    with (
        open_namespace(leveldb_uri(root)) as ns,
        ns.open_log(LOG).open_reader(DLSN.INITIAL) as reader,
    ):
        return list(reader)


@dataclass
class Transcript:
    """What the child said, parsed."""

    written: int = 0
    flushed: list[int] = field(default_factory=list)
    begins: list[int] = field(default_factory=list)
    acks: list[tuple[int, DLSN]] = field(default_factory=list)

    @classmethod
    def parse(cls, lines: list[str]) -> Transcript:
        transcript = cls()
        for line in lines:
            kind, _, rest = line.partition(" ")
            if kind == "unacked":
                assert int(rest) == transcript.written, f"records out of order: {line!r}"
                transcript.written += 1
            elif kind == "flushed":
                transcript.flushed.append(int(rest))
            elif kind == "commit-begin":
                transcript.begins.append(int(rest))
            elif kind == "ack":
                count, dlsn = rest.split(" ")
                assert int(count) == transcript.begins[-1], f"ack without its begin: {line!r}"
                transcript.acks.append((int(count), DLSN.deserialize(dlsn)))
            else:
                assert kind == "parked", f"unexpected child output {line!r}"
        return transcript

    @property
    def acked(self) -> int:
        return self.acks[-1][0] if self.acks else 0


# -- tests -----------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    ("variant", "seed"),
    # Seeds whose kill points differ: after a buffered write (1), a flush (7), the start of
    # a commit (4, 9, 14: depending on timing the commit lands or not; both are checked).
    [
        *(("free", seed) for seed in (1, 4, 7, 9, 14)),
        *(("parked", seed) for seed in (2, 2024)),
    ],
)
def test_committed_records_survive_sigkill(tmp_path: Path, variant: str, seed: int) -> None:
    rng = random.Random(seed)
    acks_before_kill = rng.randint(1, 25)
    # Then a few more lines, so the kill lands anywhere: after a buffered write, a flush,
    # or the start of a commit that may or may not land.
    lines_after = rng.randint(0, 12)
    root, offsets = tmp_path / "ns", tmp_path / "offsets"
    with child(
        "write", str(root), str(seed), str(offsets), variant, str(acks_before_kill)
    ) as running:
        if variant == "parked":
            running.read_until("parked")
        else:
            running.read_until("ack", acks_before_kill)
            for _ in range(lines_after):
                running.read_line()
        running.kill()
    said = Transcript.parse(running.lines)
    if variant == "parked":
        assert len(said.acks) == acks_before_kill
    else:
        assert len(said.acks) >= acks_before_kill

    visible = read_all(root)
    count = len(visible)
    # Exactly a prefix of what the child wrote, in order, with the exact payloads.
    assert [(r.txid, r.payload, r.sequence_id) for r in visible] == [
        (i, payload(i), i) for i in range(count)
    ]
    assert all(a.dlsn < b.dlsn for a, b in itertools.pairwise(visible))
    # Everything acknowledged is there, at the DLSN the child was told; nothing after the
    # last commit the child started is (a commit that began may or may not have landed).
    assert said.acked <= count <= said.written
    assert count in {said.acked, *said.begins[-1:]}, (count, said.acked, said.begins[-1:])
    for acked, dlsn in said.acks:
        assert visible[acked - 1].dlsn == dlsn
    if variant == "parked":
        # Killed with flushed and buffered records past the last commit: all lost.
        assert count == said.acked < said.written
        assert said.flushed[-1] > count

    # The offset stored with each commit is at least the last acknowledged one, and its
    # record exists (the offset is put after the commit, so never ahead of the log).
    with LevelDBOffsetStore(offsets, sync=True) as store:
        offset = store.get(READER_ID)
    if said.acks:
        assert offset is not None and offset >= said.acks[-1][1]
    if offset is not None:
        assert offset in {r.dlsn for r in visible}

    # A new writer recovers the log and appends after the last committed record: the
    # lost records' txids were never committed, so txid `count` is accepted again.
    with open_namespace(leveldb_uri(root)) as ns:
        manager = ns.open_log(LOG)
        segments_before = manager.segments()
        writer = manager.open_writer()
        try:
            assert all(s.completed for s in manager.segments())
            if count >= 2:
                with pytest.raises(TransactionIdOutOfOrder) as info:
                    writer.write(LogRecord(count - 2, b"decreasing"))
                assert (info.value.txid, info.value.last_txid) == (count - 2, count - 1)
            writer.write(LogRecord(count, b"after recovery"))
            writer.commit()
        finally:
            writer.close()
        last = manager.get_last_log_record()
        assert (last.txid, last.payload, last.sequence_id) == (count, b"after recovery", count)
        assert last.dlsn == DLSN(segments_before[-1].segment + 1, 0, 0)
        if offset is not None:
            with manager.open_reader(offset) as reader:
                first = reader.read_next()
            assert first is not None and first.dlsn == offset
    assert [(r.txid, r.payload) for r in read_all(root)] == [
        *((i, payload(i)) for i in range(count)),
        (count, b"after recovery"),
    ]


@pytest.mark.slow
def test_one_writer_per_log_across_processes(tmp_path: Path) -> None:
    root = tmp_path / "ns"
    with child("hold", str(root)) as holder:
        assert holder.read_line() == "ready"
        with open_namespace(leveldb_uri(root)) as ns:
            manager = ns.open_log(LOG)
            with pytest.raises(OwnershipAcquireFailed) as info:
                manager.open_writer()
            assert type(info.value) is OwnershipAcquireFailed
            assert repr(LOG) in str(info.value)
            assert "another process" in str(info.value)
            # The LevelDB backend serves a log to one process at a time: readers too.
            with (
                manager.open_reader(DLSN.INITIAL) as reader,
                pytest.raises(StoreLocked) as locked,
            ):
                reader.read_next()
            assert repr(LOG) in str(locked.value)
            assert holder.process.stdin is not None
            holder.process.stdin.close()
            assert holder.read_line() == "closed"
            assert holder.process.wait() == 0
            writer = manager.open_writer()
            try:
                writer.write(LogRecord(8, b"from the parent"))
                writer.commit()
            finally:
                writer.close()
            with manager.open_reader(DLSN.INITIAL) as reader:
                assert [(r.txid, r.payload) for r in reader] == [
                    (7, b"from the child"),
                    (8, b"from the parent"),
                ]


@pytest.mark.slow
def test_delete_log_while_another_process_writes(tmp_path: Path) -> None:
    root = tmp_path / "ns"
    with child("hold", str(root)) as holder:
        assert holder.read_line() == "ready"
        with open_namespace(leveldb_uri(root)) as ns:
            # The log's database is locked by the child: delete_log is refused as a held
            # writer refuses it.
            with pytest.raises(OwnershipAcquireFailed) as info:
                ns.delete_log(LOG)
            assert type(info.value) is OwnershipAcquireFailed
            assert "cannot delete log" in str(info.value)
            assert repr(LOG) in str(info.value)
            assert "another process" in str(info.value)
            assert ns.log_exists(LOG)
            assert holder.process.stdin is not None
            holder.process.stdin.close()
            assert holder.read_line() == "closed"
            assert holder.process.wait() == 0
            # Nothing was damaged, and once the writer is gone the log can be deleted.
            with ns.open_log(LOG).open_reader(DLSN.INITIAL) as reader:
                assert [(r.txid, r.payload) for r in reader] == [(7, b"from the child")]
            ns.delete_log(LOG)
            assert not ns.log_exists(LOG)
            assert ns.get_logs() == []


if __name__ == "__main__":
    sys.exit(_child_main(sys.argv[1:]))
