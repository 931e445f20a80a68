"""The README's first command: the DistributedLog offsets tutorial, end to end, on LevelDB.

A writer appends records across several segments; a reader processes them and stores
its position in a LevelDB offset store every ``commit_every`` records (the tutorial's
periodic commit); the reader then stops without storing its latest position (as a
crash would), retention truncates the log up to the stored position, and a new
reader resumes from the stored offset. Everything written is processed at least
once, and the records processed since the last stored offset are processed twice:
that is at-least-once delivery, shown with real files.
"""

from __future__ import annotations

import shutil
import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from harness.log import DLSN, LogConfig, LogRecord, leveldb_uri, open_namespace
from harness.offsets import LevelDBOffsetStore

__all__ = ["DemoResult", "run_demo"]


@dataclass(frozen=True)
class DemoResult:
    """What the demo observed; ``ok`` is True when nothing was lost."""

    written: int
    processed: int
    redelivered: int
    lost: int
    segments: int
    truncated_segments: int
    resumed_from: DLSN

    @property
    def ok(self) -> bool:
        return self.lost == 0 and self.processed >= self.written


def run_demo(
    directory: Path | None = None,
    *,
    records: int = 1000,
    records_per_segment: int = 250,
    commit_every: int = 100,
    crash_after: int = 650,
    say: Callable[[str], None] = print,
) -> DemoResult:
    """Run the tutorial in ``directory`` (a fresh temporary one, removed after, if None)."""
    owned = directory is None
    root = Path(tempfile.mkdtemp(prefix="harness-demo-")) if directory is None else directory
    try:
        return _run(root, records, records_per_segment, commit_every, crash_after, say)
    finally:
        if owned:
            shutil.rmtree(root, ignore_errors=True)


def _run(
    root: Path,
    records: int,
    records_per_segment: int,
    commit_every: int,
    crash_after: int,
    say: Callable[[str], None],
) -> DemoResult:
    uri = leveldb_uri(root / "namespace")
    say(f"namespace   {uri}")
    config = LogConfig(segment_max_records=records_per_segment)
    with open_namespace(uri, config=config) as namespace:
        namespace.create_log("demo-stream")
        log = namespace.open_log("demo-stream")
        with log.open_writer() as writer:
            for txid in range(1, records + 1):
                writer.write(LogRecord(txid, f"event-{txid}".encode()))
                if txid % commit_every == 0:
                    writer.commit()
            writer.commit()
            segments = len(log.segments())
            say(f"wrote       {records} records in {segments} segments, last {log.get_last_dlsn()}")

            processed: Counter[int] = Counter()
            offsets_path = root / "offsets"
            with LevelDBOffsetStore(offsets_path, sync=True) as offsets:
                start = offsets.get("reader-1") or DLSN.INITIAL
                with log.open_reader(start) as reader:
                    for count, record in enumerate(reader, start=1):
                        processed[record.txid] += 1
                        if count % commit_every == 0:
                            offsets.put("reader-1", record.dlsn)
                        if count == crash_after:
                            break
                stored = offsets.get("reader-1")
            assert stored is not None
            say(
                f"reader-1    processed {crash_after}, stored offset every {commit_every}: "
                f"{stored.serialize()} = {stored}"
            )
            say(f"crash       reader-1 stops before storing its last {crash_after % commit_every}")

            writer.truncate(stored)
            truncated = sum(1 for s in log.segments() if s.truncation.value == "truncated")
            say(f"truncate    at the stored offset: {truncated} segment(s) fully truncated")

        # A restarted reader: a new offset store handle and a new reader, from stored state only.
        with LevelDBOffsetStore(offsets_path, sync=True) as offsets:
            resumed_from = offsets.get("reader-1")
            assert resumed_from is not None
            with log.open_reader(resumed_from) as reader:
                for record in reader:
                    processed[record.txid] += 1
                    offsets.put("reader-1", record.dlsn)
    redelivered = sum(n - 1 for n in processed.values() if n > 1)
    lost = sum(1 for txid in range(1, records + 1) if txid not in processed)
    say(f"resume      from {resumed_from}: the stored record and the ones after it are redelivered")
    result = DemoResult(
        written=records,
        processed=sum(processed.values()),
        redelivered=redelivered,
        lost=lost,
        segments=segments,
        truncated_segments=truncated,
        resumed_from=resumed_from,
    )
    verdict = "HELD" if result.ok else "BROKEN"
    say(
        f"at-least-once {verdict}: {records - lost} of {records} records processed, "
        f"{lost} lost, {redelivered} redelivered (allowed under at-least-once)"
    )
    return result
