"""The price of integrity (issue 26.4): history checksums and the LevelDB seal's digests.

Run ``python bench/bench_integrity.py [--events N] [--offsets N] [--repeat R]``. Every figure
is measured with and without the checksum in the same run, on the same data, in R
back-to-back pairs (alternating which goes first); it prints the best rate of each and the
median of the R pairs' ratios with/without (1.00 = free; the steadier figure on a busy
machine). It prints figures and never asserts on them: timings depend on the machine.

* **History files** (:mod:`harness.history.integrity`): a history of N events (default
  200,000) written as JSONL and as Parquet, with the checksum (``write_history``) and
  without it (the writers' internal baseline); read back from the same checksummed file with
  ``checksum="verify"`` (the default) and ``checksum="ignore"``. Figures in events per second.
* **LevelDB offset store** (:mod:`harness._leveldb`): N offsets put (default 50,000, all in
  the write-ahead log, about 2.9 MB of it) then the store closed, which seals it with the
  SHA-256 of the write-ahead log, the manifest and CURRENT; and the store opened (the seal
  checked: the files hashed again) and every offset read. The baseline is the same code with
  the hashing replaced by a constant: a seal of sizes only, as before the digests. Puts
  themselves do no extra work; the digests cost at close and open only. Figures in offsets
  per second, the close or open included.
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
from pathlib import Path
from typing import Any

import harness._leveldb as leveldb_module
from harness.history import (
    Event,
    EventKind,
    History,
    HistoryMeta,
    SinkKind,
    SinkSpec,
    read_history,
    write_history,
)
from harness.history import io as history_io
from harness.log.dlsn import DLSN
from harness.offsets import LevelDBOffsetStore

Figure = tuple[str, list[float], list[float]]
"""A label, the rates with the checksum and without it, pair by pair."""


def _rate(run: Callable[[], object], n: int) -> float:
    gc.collect()
    gc.disable()
    try:
        start = time.perf_counter()
        run()
        return n / (time.perf_counter() - start)
    finally:
        gc.enable()


def _pairs(
    label: str, on: Callable[[], object], off: Callable[[], object], n: int, repeat: int
) -> Figure:
    """``repeat`` back-to-back runs of ``on`` and ``off``, alternating which goes first."""
    with_rates, without_rates = [], []
    for rep in range(repeat):
        if rep % 2:
            without_rates.append(_rate(off, n))
            with_rates.append(_rate(on, n))
        else:
            with_rates.append(_rate(on, n))
            without_rates.append(_rate(off, n))
    return label, with_rates, without_rates


def _history(events: int) -> History:
    """A history of ``events`` events shaped like a simulated run's (appends, reads, emits)."""
    meta = HistoryMeta(
        partitions=("in-0", "in-1"),
        sinks={"out": SinkSpec(SinkKind.LOG, ordered=True)},
        run_id="bench",
    )
    rows = []
    for i in range(events):
        record = f"in-{i % 2}/{i // 3}"
        if i % 3 == 0:
            rows.append(
                Event(i, EventKind.APPEND, partition=f"in-{i % 2}", offset=i // 6,
                      record_id=record, key=f"k{i % 97}", value=i)
            )  # fmt: skip
        elif i % 3 == 1:
            rows.append(
                Event(i, EventKind.READ, process=1, partition=f"in-{i % 2}", offset=i // 6,
                      record_id=record, dlsn="AQAAAAAAAAABAAAAAAAAAAAAAAAAAAAAAA==")
            )  # fmt: skip
        else:
            rows.append(
                Event(i, EventKind.EMIT, process=1, sink="out", output_id=i, record_id=record,
                      part=0, parts=1)
            )  # fmt: skip
    return History(meta=meta, events=tuple(rows))


def _history_rows(events: int, repeat: int, workdir: Path) -> list[Figure]:
    history = _history(events)
    rows = []
    for suffix, baseline in (
        (".jsonl", history_io._write_jsonl),
        (".parquet", history_io._write_parquet),
    ):
        path = workdir / f"history{suffix}"
        plain = workdir / f"plain{suffix}"
        rows.append(
            _pairs(
                f"{suffix[1:]} write",
                lambda: write_history(history, path),  # noqa: B023
                lambda: baseline(history, plain, checksum=False),  # noqa: B023
                events,
                repeat,
            )
        )
        rows.append(
            _pairs(
                f"{suffix[1:]} read",
                lambda: read_history(path, checksum="verify"),  # noqa: B023
                lambda: read_history(path, checksum="ignore"),  # noqa: B023
                events,
                repeat,
            )
        )
    return rows


def _offset_rows(offsets: int, repeat: int, workdir: Path) -> list[Figure]:
    digest = leveldb_module._digest

    def sizes_only(path: Path) -> str:
        return "0" * 64

    def hashing(hashed: bool, run: Callable[[Path], None], path: Path) -> Callable[[], None]:
        def timed() -> None:
            leveldb_module._digest = digest if hashed else sizes_only  # type: ignore[assignment]
            try:
                run(path)
            finally:
                leveldb_module._digest = digest

        return timed

    def write(path: Path) -> None:
        shutil.rmtree(path, ignore_errors=True)
        with LevelDBOffsetStore(path) as store:
            for i in range(offsets):
                store.put(f"reader-{i}", DLSN(1, i, 0))

    def read(path: Path) -> None:
        # open the sealed store written last, from a copy (opening rewrites the directory:
        # LevelDB moves the write-ahead log into a table); the copy is outside the timing
        with LevelDBOffsetStore(path.with_name(path.name + "-read")) as store:
            for i in range(offsets):
                store.get(f"reader-{i}")

    rows = [
        _pairs(
            "offsets put + close",
            hashing(True, write, workdir / "on"),
            hashing(False, write, workdir / "off"),
            offsets,
            repeat,
        )
    ]
    with_rates, without_rates = [], []
    for rep in range(repeat):
        for hashed in (rep % 2 == 0, rep % 2 == 1):
            path = workdir / ("on" if hashed else "off")
            copy = path.with_name(path.name + "-read")
            shutil.rmtree(copy, ignore_errors=True)
            shutil.copytree(path, copy)
            rate = _rate(hashing(hashed, read, path), offsets)
            (with_rates if hashed else without_rates).append(rate)
    rows.append(("offsets open + get", with_rates, without_rates))
    return rows


def _print(title: str, rows: list[Figure], unit: str) -> None:
    print(f"\n{title}")
    print(
        f"{'':24} {'with: best ' + unit:>22} {'without: best':>14} {'with/without':>13} "
        f"{'median of pairs':>16}"
    )
    for label, on, off in rows:
        ratios = statistics.median(a / b for a, b in zip(on, off, strict=True))
        print(
            f"{label:24} {max(on):22,.0f} {max(off):14,.0f} {max(on) / max(off):13.2f} "
            f"{ratios:16.2f}"
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--events", type=int, default=200_000, help="history events (200000)")
    parser.add_argument("--offsets", type=int, default=50_000, help="offsets put (50000)")
    parser.add_argument("--repeat", type=int, default=7, help="pairs per figure (7)")
    args = parser.parse_args(argv)
    for name in ("events", "offsets", "repeat"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1, got {getattr(args, name)}")
    pyarrow: Any = __import__("pyarrow")
    print(
        f"integrity benchmark: Python {sys.version.split()[0]}, pyarrow {pyarrow.__version__}; "
        f"{args.events} events, {args.offsets} offsets, {args.repeat} pairs"
    )
    with tempfile.TemporaryDirectory(prefix="bench-integrity-") as tmp:
        workdir = Path(tmp)
        history_rows = _history_rows(args.events, args.repeat, workdir)
        offset_rows = _offset_rows(args.offsets, args.repeat, workdir)
    _print("History files: with the checksum against without", history_rows, "events/s")
    _print("LevelDB offset store: the seal's digests against a seal of sizes", offset_rows, "ops/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
