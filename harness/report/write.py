"""Write a run's reports (text, JSON, HTML) to a directory: all rendered first, then written."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Final

from harness.check.verdict import Verdict
from harness.errors import ConfigError
from harness.report._facts import ReportFacts, as_facts
from harness.report.html import render_html
from harness.report.json_report import render_json
from harness.report.subject import Reported
from harness.report.text import render_text

__all__ = ["FORMATS", "write_report"]

FORMATS: Final = ("txt", "json", "html")
"""The report formats, as file suffixes: ``render_text``, ``render_json``, ``render_html``."""


def _write(path: Path, data: bytes) -> None:
    # a half-written report must never look like a whole one
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def write_report(
    directory: str | os.PathLike[str],
    facts: ReportFacts | Reported | Verdict,
    *,
    formats: Iterable[str] = FORMATS,
    name: str = "report",
    include_events: bool = False,
) -> dict[str, Path]:
    """Write ``<name>.txt``, ``<name>.json`` and ``<name>.html`` (those in ``formats``) to
    ``directory`` (created if missing) and return ``{format: path}`` in ``formats`` order.

    ``facts`` is what :func:`~harness.report.gather` returns; a checked run (such as
    ``CounterexampleFound.failure``) or a bare verdict is gathered first.
    ``include_events`` embeds every event in the JSON report. Everything is rendered before
    anything is written, so a bad argument leaves no partial set behind.
    """
    facts = as_facts(facts)
    if isinstance(formats, str):
        formats = (formats,)
    wanted = list(dict.fromkeys(formats))
    unknown = [f for f in wanted if f not in FORMATS]
    if unknown or not wanted:
        raise ConfigError(
            f"formats must be a non-empty selection of {list(FORMATS)}, got {list(formats)!r}"
        )
    if not isinstance(name, str) or not name or "/" in name or name.startswith("."):
        raise ConfigError(f"name must be a plain file name stem such as 'report', got {name!r}")
    renderers: dict[str, Callable[[], str]] = {
        "txt": lambda: render_text(facts),
        "json": lambda: render_json(facts, include_events=include_events),
        "html": lambda: render_html(facts),
    }
    texts = {fmt: renderers[fmt]() for fmt in wanted}
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    # encoded before anything is written (a lone surrogate from a processor's message is
    # escaped), so that no format can fail after another was written
    encoded = {fmt: text.encode("utf-8", "backslashreplace") for fmt, text in texts.items()}
    for fmt, data in encoded.items():
        path = out / f"{name}.{fmt}"
        _write(path, data)
        paths[fmt] = path
    return paths
