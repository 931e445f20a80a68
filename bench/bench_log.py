"""LevelDB log append throughput against raw plyvel write batches of the same bytes.

    python bench/bench_log.py [--records 200000] [--commit-every 1000] [--payload 100]

Our side: ``LogWriter.write`` of ``--payload``-byte records with ``commit()`` every
``--commit-every`` records, on the LevelDB backend (durable_commit on, so each commit
is an fsynced write, as the default config does). The baseline, measured in the same
run: raw plyvel, one write batch per ``--commit-every`` records putting each record's
bytes (a 20-byte header and the payload) under its own key, synced like our commit.
Prints records/s for both and the ratio (target >= 0.5). Figures, not assertions.

Then the price of LevelDB's integrity checks (``harness._leveldb``: paranoid checks, verified
checksums, checked scans, the clean-close seal), in the same run: the same appends, a reader
reading every record back (after a reopen, so that they come from LevelDB's tables), and
opening + closing the log, with ``open_namespace(..., checks=True)`` (the default) against
``checks=False``.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import struct
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import plyvel

from harness.log import DLSN, LogConfig, LogRecord, leveldb_uri, open_namespace


def ours(
    directory: Path,
    records: int,
    commit_every: int,
    payload: bytes,
    sync: bool,
    checks: bool = True,
) -> float:
    config = LogConfig(durable_commit=sync, segment_max_records=100_000)
    with open_namespace(leveldb_uri(directory), config=config, checks=checks) as namespace:
        log = namespace.open_log("bench")
        start = time.perf_counter()
        with log.open_writer() as writer:
            write, commit = writer.write, writer.commit
            for txid in range(records):
                write(LogRecord(txid, payload))
                if txid % commit_every == commit_every - 1:
                    commit()
            commit()
        elapsed = time.perf_counter() - start
    return records / elapsed


def reads(directory: Path, records: int, payload: bytes, checks: bool) -> float:
    """Records/s of a reader from the start, after the appends and a reopen."""
    ours(directory, records, 1000, payload, False, checks)
    with open_namespace(leveldb_uri(directory), checks=checks) as namespace:
        start = time.perf_counter()
        with namespace.open_log("bench").open_reader(DLSN.INITIAL) as reader:
            count = sum(1 for _ in reader)
        elapsed = time.perf_counter() - start
    assert count == records
    return records / elapsed


def opens(directory: Path, times: int, checks: bool) -> float:
    """Open + close of a one-record log per second (the seal is written and checked)."""
    ours(directory, 1, 1, b"x", False, checks)
    with open_namespace(leveldb_uri(directory), checks=checks) as namespace:
        log = namespace.open_log("bench")
        start = time.perf_counter()
        for _ in range(times):
            log.get_last_txid()  # opens the LevelDB database, reads, closes it
        elapsed = time.perf_counter() - start
    return times / elapsed


def raw(directory: Path, records: int, commit_every: int, payload: bytes, sync: bool) -> float:
    header = struct.Struct(">qqi")
    db = plyvel.DB(str(directory), create_if_missing=True)
    start = time.perf_counter()
    for first in range(0, records, commit_every):
        with db.write_batch(sync=sync) as batch:
            for txid in range(first, min(records, first + commit_every)):
                batch.put(struct.pack(">Q", txid), header.pack(0, txid, len(payload)) + payload)
    elapsed = time.perf_counter() - start
    db.close()
    return records / elapsed


def best_of(repeats: int, run: Callable[[Path], float]) -> tuple[float, float]:
    rates = []
    for _ in range(repeats):
        directory = Path(tempfile.mkdtemp(prefix="bench-log-"))
        try:
            rates.append(run(directory / "db"))
        finally:
            shutil.rmtree(directory, ignore_errors=True)
    return max(rates), statistics.median(rates)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--commit-every", type=int, default=1000)
    parser.add_argument("--payload", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    payload = bytes(range(256))[: args.payload] * (args.payload // 256 + 1)
    payload = payload[: args.payload]
    print(
        f"LevelDB log append: {args.records} records of {args.payload} B, commit every "
        f"{args.commit_every}, best (median) of {args.repeats}, python {sys.version.split()[0]}"
    )
    for sync in (True, False):
        label = "synced commits" if sync else "unsynced commits"
        mine = best_of(
            args.repeats,
            lambda d: ours(d, args.records, args.commit_every, payload, sync),  # noqa: B023
        )
        base = best_of(
            args.repeats,
            lambda d: raw(d, args.records, args.commit_every, payload, sync),  # noqa: B023
        )
        print(f"  {label:17} harness log  {mine[0]:>12,.0f} rec/s  (median {mine[1]:,.0f})")
        print(f"  {label:17} raw plyvel   {base[0]:>12,.0f} rec/s  (median {base[1]:,.0f})")
        print(f"  {label:17} ratio        {mine[0] / base[0]:>12.2f}   (target >= 0.5)")
    print("LevelDB integrity checks: checks=True (on) against checks=False (off)")
    rows: list[tuple[str, str, Callable[[Path, bool], float]]] = [
        (
            "append",
            "rec/s",
            lambda d, c: ours(d, args.records, args.commit_every, payload, True, c),
        ),
        ("read", "rec/s", lambda d, c: reads(d, args.records, payload, c)),
        ("open+close", "op/s", lambda d, c: opens(d, 200, c)),
    ]
    for label, unit, run in rows:
        on = best_of(args.repeats, lambda d: run(d, True))  # noqa: B023
        off = best_of(args.repeats, lambda d: run(d, False))  # noqa: B023
        print(
            f"  {label:11} on {on[0]:>12,.0f} {unit}  off {off[0]:>12,.0f} {unit}  "
            f"on/off {on[0] / off[0]:.2f}  (medians {on[1]:,.0f} / {off[1]:,.0f})"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
