"""Offset commits per second: LevelDBOffsetStore against raw plyvel, in the same run.

Run ``python bench/bench_offsets.py [--n N] [--n-sync N] [--repeat R]``. For each operation it
prints the rate of our store, the rate of raw plyvel doing the same LevelDB writes (same key
and value bytes), and ours/raw: best against best, and the median of the ratios of R
back-to-back pairs (the steadier figure on a busy machine). The target is
ours/raw >= 0.8 for ``put`` with sync off. It prints figures and never asserts on them: timings
depend on the machine.

Operations:

* ``put``: ``store.put(reader_id, dlsn)`` vs ``db.put(key, dlsn_bytes)``;
* ``commit``: ``store.commit({reader_id: dlsn}, {key: value})`` vs a raw
  ``db.write_batch()`` with the same two puts;

each with ``sync=False`` (survives a process crash) and ``sync=True`` (fsync per write, survives
a machine crash; slow, so it runs fewer operations: by default as many as take about a quarter
of a second, measured first).

A second table prices LevelDB's integrity checks (``harness._leveldb``: paranoid checks,
verified checksums, checked scans, the clean-close seal): the same store opened with
``checks=True`` (the default) against ``checks=False``, in the same run, for ``put``, ``get`` of
an offset that sits in a table, ``readers()`` over 1,000 readers, and open + close.
"""

from __future__ import annotations

import argparse
import gc
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import plyvel

from harness.log.dlsn import DLSN
from harness.offsets import LevelDBOffsetStore
from harness.offsets.leveldb import STATE_KEY_PREFIX

READER_ID = "reader-1"
STATE_KEY = "counts"
STATE_VALUE = b"\x00\x00\x00\x00\x00\x00\x01\x00" * 4
SYNC_TARGET_SECONDS = 0.25
SYNC_MAX_N = 5000


@dataclass(frozen=True, slots=True)
class Row:
    """The figures of one operation: ops/s of each repetition, ours and raw."""

    label: str
    n: int
    ours: tuple[float, ...]
    raw: tuple[float, ...]


def _timed(run: Callable[[], None], n: int) -> float:
    gc.collect()
    gc.disable()
    try:
        start = time.perf_counter()
        run()
        elapsed = time.perf_counter() - start
    finally:
        gc.enable()
    return n / elapsed


def _put_runs(
    store: LevelDBOffsetStore, db: Any, dlsns: Sequence[DLSN], sync: bool
) -> tuple[Callable[[], None], Callable[[], None]]:
    values = [dlsn.serialize_bytes() for dlsn in dlsns]
    key = READER_ID.encode("utf-8")

    def ours() -> None:
        put = store.put
        for dlsn in dlsns:
            put(READER_ID, dlsn)

    if sync:

        def raw() -> None:
            put = db.put
            for value in values:
                put(key, value, sync=True)

    else:

        def raw() -> None:
            put = db.put
            for value in values:
                put(key, value)

    return ours, raw


def _commit_runs(
    store: LevelDBOffsetStore, db: Any, dlsns: Sequence[DLSN], sync: bool
) -> tuple[Callable[[], None], Callable[[], None]]:
    values = [dlsn.serialize_bytes() for dlsn in dlsns]
    key = READER_ID.encode("utf-8")
    state_key = STATE_KEY_PREFIX + STATE_KEY.encode("utf-8")

    def ours() -> None:
        commit = store.commit
        state = {STATE_KEY: STATE_VALUE}
        for dlsn in dlsns:
            commit({READER_ID: dlsn}, state)

    def raw() -> None:
        write_batch = db.write_batch
        for value in values:
            batch = write_batch(sync=sync)
            batch.put(key, value)
            batch.put(state_key, STATE_VALUE)
            batch.write()

    return ours, raw


def _measure(
    label: str,
    make_runs: Callable[
        [LevelDBOffsetStore, Any, Sequence[DLSN], bool],
        tuple[Callable[[], None], Callable[[], None]],
    ],
    n: int,
    sync: bool,
    repeat: int,
    workdir: Path,
) -> Row:
    dlsns = [DLSN(1, i, 0) for i in range(n)]
    warm_up = dlsns[: min(n, 1000)]
    ours: list[float] = []
    raw: list[float] = []
    for rep in range(repeat):
        # Fresh databases each time, so both sides start from the same LevelDB state
        # (empty memtable, no pending compaction); the order alternates so that drift in
        # the machine and background compactions hit both sides alike.
        repdir = workdir / f"{label.split(',')[0].split()[0]}-{int(sync)}-{rep}"
        store = LevelDBOffsetStore(repdir / "ours", sync=sync)
        db = plyvel.DB(str(repdir / "raw"), create_if_missing=True)
        try:
            for run in make_runs(store, db, warm_up, sync):
                run()
            ours_run, raw_run = make_runs(store, db, dlsns, sync)
            if rep % 2 == 0:
                ours.append(_timed(ours_run, n))
                raw.append(_timed(raw_run, n))
            else:
                raw.append(_timed(raw_run, n))
                ours.append(_timed(ours_run, n))
        finally:
            store.close()
            db.close()
        shutil.rmtree(repdir)
    return Row(label, n, tuple(ours), tuple(raw))


def _calibrate_sync_n(workdir: Path) -> int:
    db = plyvel.DB(str(workdir / "calibrate"), create_if_missing=True)
    try:
        probe = 50
        start = time.perf_counter()
        for i in range(probe):
            db.put(b"calibrate", i.to_bytes(8, "big"), sync=True)
        per_op = (time.perf_counter() - start) / probe
    finally:
        db.close()
    return max(20, min(SYNC_MAX_N, int(SYNC_TARGET_SECONDS / per_op)))


CHECKED_READERS = 1000


def _checked_stores(directory: Path) -> tuple[LevelDBOffsetStore, LevelDBOffsetStore]:
    """Two stores with the same 1,000 offsets, in tables: checks on, checks off."""
    stores = []
    for checks in (True, False):
        path = directory / f"checks-{checks}"
        with LevelDBOffsetStore(path, checks=checks) as store:
            for i in range(CHECKED_READERS):
                store.put(f"reader-{i}", DLSN(1, i, 0))
        stores.append(LevelDBOffsetStore(path, checks=checks))  # the reopen compacts the log
    return stores[0], stores[1]


def _checks_op(op: str, store: LevelDBOffsetStore, n: int, checks: bool) -> Callable[[], None]:
    ids = [f"reader-{i % CHECKED_READERS}" for i in range(n)]
    dlsn = DLSN(2, 0, 0)
    path = store.path

    def run() -> None:
        if op == "put":
            for reader in ids:
                store.put(reader, dlsn)
        elif op == "get":
            for reader in ids:
                store.get(reader)
        elif op == "readers":
            for _ in range(n):
                store.readers()
        else:
            store.close()
            for _ in range(n):
                LevelDBOffsetStore(path, checks=checks).close()

    return run


def _measure_checks(op: str, label: str, n: int, repeat: int, workdir: Path) -> Row:
    on: list[float] = []
    off: list[float] = []
    for rep in range(repeat):
        repdir = workdir / f"checks-{op}-{rep}"
        checked, unchecked = _checked_stores(repdir)
        try:
            runs = [
                (on, _checks_op(op, checked, n, True)),
                (off, _checks_op(op, unchecked, n, False)),
            ]
            for rates, run in runs if rep % 2 == 0 else runs[::-1]:
                rates.append(_timed(run, n))
        finally:
            checked.close()
            unchecked.close()
        shutil.rmtree(repdir)
    return Row(label, n, tuple(on), tuple(off))


def _print(
    rows: Sequence[Row], repeat: int, ours: str = "ours", raw: str = "raw", target: str = ""
) -> None:
    print(
        f"{'operation':<36} {'n':>6} {ours + ' ops/s':>11} {raw + ' ops/s':>11} "
        f"{ours + '/' + raw:>9} {'paired ' + ours + '/' + raw:>16}"
    )
    for row in rows:
        best_ours, best_raw = max(row.ours), max(row.raw)
        paired = statistics.median([o / r for o, r in zip(row.ours, row.raw, strict=True)])
        print(
            f"{row.label:<36} {row.n:>6} {best_ours:>11,.0f} {best_raw:>11,.0f} "
            f"{best_ours / best_raw:>9.2f} {paired:>16.2f}"
        )
    print(
        f"ops/s and {ours}/{raw}: best of {repeat} runs each; paired: median over the "
        f"{repeat} back-to-back ({ours}, {raw}) pairs, the figure least moved by other load."
        + (f"\n{target}" if target else "")
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--n", type=int, default=50_000, help="operations per run with sync off (50000)"
    )
    parser.add_argument(
        "--n-sync",
        type=int,
        default=None,
        help=f"operations per run with sync on (default: about {SYNC_TARGET_SECONDS} s worth, "
        f"at most {SYNC_MAX_N})",
    )
    parser.add_argument("--repeat", type=int, default=11, help="repetitions per figure (11)")
    args = parser.parse_args(argv)
    for name in ("n", "n_sync", "repeat"):
        value = getattr(args, name)
        if value is not None and value < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1, got {value}")

    with tempfile.TemporaryDirectory(prefix="bench-offsets-") as tmp:
        workdir = Path(tmp)
        n_sync = args.n_sync if args.n_sync is not None else _calibrate_sync_n(workdir)
        print(
            f"offset store benchmark: Python {sys.version.split()[0]}, plyvel "
            f"{plyvel.__version__}, LevelDB {plyvel.__leveldb_version__}; "
            f"n={args.n} with sync off, n={n_sync} with sync on"
        )
        plan = (
            ("put, sync off", _put_runs, args.n, False),
            ("put, sync on", _put_runs, n_sync, True),
            ("commit 1 offset + 1 state, sync off", _commit_runs, args.n, False),
            ("commit 1 offset + 1 state, sync on", _commit_runs, n_sync, True),
        )
        rows = [
            _measure(label, runs, n, sync, args.repeat, workdir) for label, runs, n, sync in plan
        ]
        checks_plan = (
            ("put", "put, sync off", args.n),
            ("get", "get (offset in a table)", args.n),
            ("readers", f"readers() of {CHECKED_READERS}", max(1, args.n // 500)),
            ("open", "open + close", max(1, args.n // 500)),
        )
        checks_rows = [
            _measure_checks(op, label, n, args.repeat, workdir) for op, label, n in checks_plan
        ]
    _print(rows, args.repeat, target="Target: put with sync off at ours/raw >= 0.8.")
    print("\nLevelDB integrity checks: the store with checks=True (on) against checks=False (off)")
    _print(checks_rows, args.repeat, ours="on", raw="off")
    return 0


if __name__ == "__main__":
    sys.exit(main())
