"""Write a failure's reports (text, JSON, HTML) to a directory."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Final

from harness.check.verdict import Verdict
from harness.errors import ConfigError
from harness.faults.schedule import Schedule
from harness.history.events import History
from harness.report.html import render_html
from harness.report.json_report import render_json
from harness.report.text import render_text

if TYPE_CHECKING:
    from harness.runner import Failure

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
    *,
    failure: Failure | None = None,
    verdict: Verdict | None = None,
    history: History | None = None,
    schedule: Schedule | None = None,
    seed: int | None = None,
    replay_command: str | None = None,
    title: str | None = None,
    processor: str | None = None,
    backend: str | None = None,
    formats: Iterable[str] = FORMATS,
    name: str = "report",
    include_events: bool = False,
) -> dict[str, Path]:
    """Write ``<name>.txt``, ``<name>.json`` and ``<name>.html`` (those in ``formats``) to
    ``directory`` (created if missing) and return ``{format: path}`` in ``formats`` order.

    Pass either ``failure`` (what :func:`harness.explore` found: its verdict, history,
    schedule, seed, replay command, processor and backend are used, and explicit arguments
    override them) or at least ``verdict``. ``include_events`` embeds every event in the JSON
    report (the HTML page always carries them).
    """
    if failure is not None:
        from harness.runner import Failure

        if not isinstance(failure, Failure):
            raise ConfigError(f"failure must be a harness.Failure, got {failure!r:.80}")
        verdict = failure.verdict if verdict is None else verdict
        history = failure.history if history is None else history
        schedule = failure.schedule if schedule is None else schedule
        seed = failure.seed if seed is None else seed
        replay_command = failure.replay_command if replay_command is None else replay_command
        processor = failure.processor if processor is None else processor
        backend = failure.backend if backend is None else backend
    if verdict is None:
        raise ConfigError("write_report needs failure=... or verdict=... (and usually history)")
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
    # render everything before writing anything: a bad argument leaves no partial set behind
    texts: dict[str, str] = {}
    for fmt in wanted:
        if fmt == "txt":
            texts[fmt] = render_text(
                verdict,
                history,
                schedule=schedule,
                seed=seed,
                replay_command=replay_command,
                title=title,
                processor=processor,
                backend=backend,
            )
        elif fmt == "json":
            texts[fmt] = render_json(
                verdict,
                history,
                schedule=schedule,
                seed=seed,
                replay_command=replay_command,
                title=title,
                processor=processor,
                backend=backend,
                include_events=include_events,
            )
        else:
            texts[fmt] = render_html(
                history,
                verdict,
                schedule=schedule,
                seed=seed,
                replay_command=replay_command,
                title=title,
                processor=processor,
                backend=backend,
            )
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
