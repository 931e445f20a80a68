"""Reports that scale: size of the HTML (and text) report of a large history, the time to
render it in Python, and the time headless Chromium takes to load and draw it.

The history is an at-least-once run written out directly (the simulator would take hours
to record ten million events): records appended, acknowledged, read, emitted and their
offsets committed, an instance crash and restart every ``--crash-every`` records, and one
record lost (its offset committed before its output, then a crash) in the middle. The
checker judges it (INVALID: ``lost`` and ``offset-ahead``), and the report is rendered.

Baseline, measured in the same run: the same renderer with the cap lifted
(``FULL_EVENTS`` set past the history's size, i.e. the uncapped page every event used to
get), on a history of ``--baseline-events`` events (default 100,000; the uncapped page of
10 million events is several gigabytes and does not render at all).

    PYTHONPATH=$PWD python bench/bench_report.py --events 10000000

Prints one line per measurement; timings are wall-clock and noisy on a loaded machine. The
Chromium figures include the browser's start-up, measured alone on a blank page first.
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from unittest import mock

from harness.check import Guarantee, check
from harness.history.events import Event, EventKind, History, HistoryMeta, SinkKind, SinkSpec
from harness.report import gather, render_html, render_text
from harness.report import html as html_module
from harness.report._window import window

CHROMIUM = Path("/usr/bin/chromium")
_K = EventKind
P = "in-0"


def big_history(events: int, *, crash_every: int = 5000) -> History:
    """An at-least-once run of about ``events`` events losing one record in its middle."""
    records = max(events // 6, 2)
    lost = records // 2
    out: list[Event] = []
    add = out.append
    process = 1
    add(Event(0, _K.START, process=process))
    add(Event(1, _K.FETCH, process=process, partition=P))
    output = 0
    for offset in range(records):
        rid, key = f"r{offset}", f"k{offset % 7}"
        n = len(out)
        add(Event(n, _K.APPEND, partition=P, offset=offset, record_id=rid, key=key, value=1))
        add(Event(n + 1, _K.ACK, partition=P, offset=offset, record_id=rid))
        add(Event(n + 2, _K.READ, process=process, partition=P, offset=offset, record_id=rid))
        if offset == lost:  # the bug: the offset is stored before the output is written
            add(Event(n + 3, _K.COMMIT, process=process, partition=P, offset=offset + 1))
            add(Event(n + 4, _K.CRASH, process=process, detail="process"))
        else:
            add(
                Event(
                    n + 3,
                    _K.EMIT,
                    process=process,
                    record_id=rid,
                    part=0,
                    parts=1,
                    key=key,
                    value=1,
                    sink="out",
                    output_id=output,
                )
            )
            output += 1
            add(Event(n + 4, _K.COMMIT, process=process, partition=P, offset=offset + 1))
            if offset % crash_every == crash_every - 1:
                add(Event(n + 5, _K.CRASH, process=process, detail="process"))
            else:
                continue
        process += 1
        add(Event(len(out), _K.START, process=process))
        add(Event(len(out), _K.FETCH, process=process, partition=P, offset=offset + 1))
    add(Event(len(out), _K.DRAIN))
    for offset in range(records):
        if offset != lost:
            number = offset if offset < lost else offset - 1
            add(
                Event(
                    len(out),
                    _K.OBSERVE,
                    record_id=f"r{offset}",
                    part=0,
                    parts=1,
                    key=f"k{offset % 7}",
                    value=1,
                    sink="out",
                    output_id=number,
                )
            )
    add(Event(len(out), _K.END, detail="complete"))
    meta = HistoryMeta(
        partitions=(P,),
        sinks={"out": SinkSpec(SinkKind.LOG)},
        run_id=f"bench-{events}",
        extra={"processor": "bench:big_history", "backend": "memory"},
    )
    return History(meta, tuple(out))


def chromium_seconds(page: Path) -> float | None:
    """Seconds headless Chromium takes to load, lay out and run ``page`` (None: no Chromium)."""
    if not CHROMIUM.exists():
        return None
    with tempfile.TemporaryDirectory() as profile:
        started = time.perf_counter()
        result = subprocess.run(
            [
                str(CHROMIUM),
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                f"--user-data-dir={profile}",
                "--virtual-time-budget=60000",
                "--dump-dom",
                page.as_uri(),
            ],
            capture_output=True,
            timeout=600,
            check=False,
        )
        seconds = time.perf_counter() - started
    if result.returncode != 0 or b'data-ready="true"' not in result.stdout:
        return float("nan")
    return seconds


def measure(history: History, directory: Path, name: str) -> dict[str, object]:
    verdict_started = time.perf_counter()
    verdict = check(history, Guarantee.AT_LEAST_ONCE)
    checked = time.perf_counter() - verdict_started
    started = time.perf_counter()
    facts = gather(verdict, history)
    page = render_html(facts)
    rendered = time.perf_counter() - started
    text = render_text(facts)
    path = directory / f"{name}.html"
    path.write_text(page, encoding="utf-8")
    return {
        "events": len(history.events),
        "status": verdict.status.value,
        "check_s": round(checked, 2),
        "html_bytes": len(page.encode()),
        "text_bytes": len(text.encode()),
        "render_s": round(rendered, 2),
        "chromium_s": chromium_seconds(path),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--baseline-events", type=int, default=100_000)
    args = parser.parse_args()
    directory = Path(tempfile.mkdtemp(prefix="bench-report-"))
    try:
        small = big_history(args.baseline_events)
        uncapped = functools.partial(window, full=sys.maxsize)
        with mock.patch.object(html_module, "window", uncapped):
            baseline = measure(small, directory, "baseline")
        blank = directory / "blank.html"
        blank.write_text('<!DOCTYPE html><html data-ready="true"><body>x</body></html>\n')
        print(f"Chromium on a blank page (its start-up): {chromium_seconds(blank)} s", flush=True)
        print(f"baseline (uncapped) {baseline}", flush=True)
        capped_small = measure(small, directory, "capped-small")
        print(f"capped              {capped_small}", flush=True)
        built = time.perf_counter()
        large = big_history(args.events)
        print(f"built {len(large.events):,} events in {time.perf_counter() - built:.1f} s")
        capped = measure(large, directory, "capped-large")
        print(f"capped              {capped}", flush=True)
        ratio = int(str(baseline["html_bytes"])) / int(str(capped_small["html_bytes"]))
        print(
            f"size ratio uncapped/capped at {args.baseline_events:,} events: {ratio:.1f}x; "
            f"capped page of {capped['events']:,} events: {capped['html_bytes']:,} bytes, "
            f"Chromium {capped['chromium_s']} s"
        )
    finally:
        if not os.environ.get("KEEP_BENCH"):
            shutil.rmtree(directory, ignore_errors=True)
        else:
            print(f"pages kept in {directory}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
