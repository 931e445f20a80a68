"""The HTML report in a real browser: headless Chromium loads it from a file, runs its script,
shows the anomaly, runs none of the payloads, and takes a screenshot that is not blank.

Needs Debian's ``chromium`` package (``apt-get install chromium chromium-driver``). Without it
the tests skip, except in CI (``CI`` set), where they fail: CI installs it. Set
``HARNESS_SCREENSHOT_DIR`` to keep the screenshot (e.g. as a CI artifact).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import re
import shutil
import struct
import subprocess
import zlib
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from harness import CounterexampleFound, explore
from harness.catalogue.toys import TOYS
from harness.check import Guarantee, Verdict, check
from harness.engine import Failure
from harness.history.events import History
from harness.report import gather, render_html

CHROMIUM = Path("/usr/bin/chromium")
WIDTH, HEIGHT = 1400, 900

# Each payload would change the page if it ran: set the title, add an element, or both.
EVIL_ID = 'r0</script><script>document.title="pwned"</script>'
EVIL_KEY = '<b id="pwned-key">x</b><script>document.title="pwned-key"</script>'
EVIL_PARTITION = 'in-0<img src=x onerror="document.title=&quot;pwned-img&quot;">'
EVIL_TITLE = "report <script>document.title='pwned-title'</script>"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def chromium() -> Path:
    if not CHROMIUM.exists():
        message = f"{CHROMIUM} is missing: apt-get install -y chromium chromium-driver"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return CHROMIUM


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, History, Verdict]:
    """A real failing run (a crash loses record r0) with script payloads in its record id,
    keys, partition and title, rendered to a file."""
    toy = TOYS["commit_before_processing"]
    with pytest.raises(CounterexampleFound) as found:
        explore(toy.processor, guarantee=toy.guarantee, faults=toy.needs, failures_dir=None)
    failure: Failure = found.value.failure
    events = []
    for event in failure.history.events:
        changes: dict[str, Any] = {}
        if event.record_id == "r0":
            changes["record_id"] = EVIL_ID
        if event.key is not None:
            changes["key"] = EVIL_KEY
        if event.partition is not None:
            changes["partition"] = EVIL_PARTITION
        events.append(dataclasses.replace(event, **changes))
    meta = dataclasses.replace(failure.history.meta, partitions=(EVIL_PARTITION,))
    history = History(meta, tuple(events))
    verdict = check(history, failure.guarantee)
    assert {a.kind.value for a in verdict.anomalies} == {"lost", "offset-ahead"}
    path = tmp_path_factory.mktemp("report") / "report.html"
    html = render_html(
        gather(
            verdict,
            history,
            schedule=failure.schedule,
            title=EVIL_TITLE,
            replay_command=failure.replay_command,
            seed=failure.seed,
        )
    )
    path.write_text(html, encoding="utf-8")
    return path, history, verdict


def _chromium(chromium: Path, profile: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    command = [
        str(chromium),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
        *args,
    ]
    result = subprocess.run(command, capture_output=True, timeout=180, check=False)
    assert result.returncode == 0, result.stderr.decode(errors="replace")[-2000:]
    return result


def test_the_page_loads_runs_its_script_shows_the_anomaly_and_runs_no_payload(
    chromium: Path, page: tuple[Path, History, Verdict], tmp_path: Path
) -> None:
    path, _, verdict = page
    dom = _chromium(chromium, tmp_path / "profile", "--dump-dom", path.as_uri()).stdout.decode()
    # the page's own script ran to its end (it parsed the embedded JSON with the payloads)
    assert re.search(r'<html[^>]*\bdata-ready="true"', dom), dom[:500]
    # no payload ran: the title is the escaped text, no element or image was injected
    head = dom[: dom.index("</head>")]
    (title,) = re.findall(r"<title>(.*?)</title>", head, flags=re.DOTALL)
    assert title == ("INVALID: report &lt;script&gt;document.title='pwned-title'&lt;/script&gt;")
    # (the serialized DOM escapes "<" in text and attribute values: a match is an element)
    assert not re.search(r"<img\b|<b id=", dom)
    # the anomaly panel and the highlighted marks are there
    assert '<section id="anomalies" class="panel">' in dom
    anomalous = re.findall(r'<g class="mark k-(\w+)[^"]*\banomalous\b[^"]*" id="ev-(\d+)"', dom)
    witness_events = sorted({i for a in verdict.anomalies for w in a.witnesses for i in w.events})
    assert sorted(int(index) for _, index in anomalous) == witness_events == [2, 4, 5]
    # the script selected the first witness event and showed it, payload as text
    detail = dom[dom.index('id="event-detail-body"') :]
    assert detail.index("witness of: lost") < detail.index("</section>")
    assert 'r0&lt;/script&gt;&lt;script&gt;document.title="pwned"&lt;/script&gt;' in detail


def _png_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """Width, height and the unfiltered rows of an 8-bit RGB or RGBA, non-interlaced PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, header = 8, b"", None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
    assert header is not None
    width, height, depth, color, _, _, interlace = header
    assert depth == 8 and color in (2, 6) and interlace == 0, header
    bpp = 3 if color == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows: list[bytes] = []
    prev = bytes(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        if kind == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 255
        elif kind == 2:
            line = bytearray((a + b) & 255 for a, b in zip(line, prev, strict=True))
        elif kind == 3:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 255
        elif kind == 4:
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b = prev[i]
                c = prev[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else b if pb <= pc else c
                line[i] = (line[i] + pred) & 255
        else:
            assert kind == 0, f"bad filter {kind}"
        rows.append(bytes(line))
        prev = rows[-1]
    return width, height, [row if bpp == 3 else _rgb(row) for row in rows]


def _rgb(row: bytes) -> bytes:
    return bytes(b for i, b in enumerate(row) if i % 4 != 3)


def test_the_screenshot_shows_a_red_failure(
    chromium: Path, page: tuple[Path, History, Verdict], tmp_path: Path
) -> None:
    path, _, _ = page
    shot = tmp_path / "shot.png"
    _chromium(
        chromium,
        tmp_path / "profile",
        f"--screenshot={shot}",
        f"--window-size={WIDTH},{HEIGHT}",
        path.as_uri(),
    )
    data = shot.read_bytes()
    keep = os.environ.get("HARNESS_SCREENSHOT_DIR")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(keep) / "report-timeline.png")
    assert len(data) > 20_000
    width, height, rows = _png_pixels(data)
    assert (width, height) == (WIDTH, HEIGHT)
    colours: Counter[bytes] = Counter()
    red = 0
    for row in rows[::3]:
        for x in range(0, len(row), 9):
            r, g, b = row[x], row[x + 1], row[x + 2]
            colours[bytes((r, g, b))] += 1
            red += r > 180 and g < 90 and b < 90
    sampled = sum(colours.values())
    # not blank: many colours, none covering nearly everything
    assert len(colours) > 50
    assert colours.most_common(1)[0][1] < 0.9 * sampled
    # the failure is obvious: a good share of strong red (badge, panel, witness marks)
    assert red > 0.005 * sampled


def test_a_large_history_renders_capped_in_the_browser(chromium: Path, tmp_path: Path) -> None:
    """The benchmark's history generator (bench/bench_report.py), at 200,000 events: the page
    stays small, loads, runs its script and draws the witnesses and the overview. (The
    benchmark measures the time and size at 10 million events; a test never times.)"""
    spec = importlib.util.spec_from_file_location(
        "bench_report", Path(__file__).resolve().parent.parent / "bench/bench_report.py"
    )
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    history = bench.big_history(200_000, crash_every=50)
    verdict = check(history, Guarantee.AT_LEAST_ONCE)
    path = tmp_path / "large.html"
    path.write_text(render_html(gather(verdict, history)), encoding="utf-8")
    assert path.stat().st_size < 5_000_000
    dom = _chromium(chromium, tmp_path / "profile", "--dump-dom", path.as_uri()).stdout.decode()
    assert re.search(r'<html[^>]*\bdata-ready="true"', dom), dom[:500]
    assert 'id="overview"' in dom and 'id="capped"' in dom
    anomalous = re.findall(r'<g class="mark k-(\w+)[^"]*\banomalous\b[^"]*" id="ev-(\d+)"', dom)
    witness_events = sorted({i for a in verdict.anomalies for w in a.witnesses for i in w.events})
    assert sorted(int(index) for _, index in anomalous) == witness_events
    # the script found the drawn events' rows and showed the first witness event
    detail = dom[dom.index('id="event-detail-body"') :]
    assert detail.index("witness of: lost") < detail.index("</section>")
