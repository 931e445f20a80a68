"""Live progress and colour for terminals, and nothing of either anywhere else.

:class:`LiveProgress` draws a progress line on a terminal's stderr with rich: what is being
done, schedules run (of the search budget), the stage (search or shrink), failures found,
elapsed time and an ETA. It is off, and its :meth:`LiveProgress.log` lines are plain text,
when the stream is not a terminal, when ``CI`` is set (CI logs keep plain lines), when the
caller prints JSON, and with ``TERM=dumb``. :func:`emit` prints text to stdout with the
verdicts and anomaly kinds coloured on a terminal, plain elsewhere and when ``NO_COLOR`` is
set (https://no-color.org). rich is imported only when a terminal is there to draw on.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Final, TextIO

from harness._closing import Closing
from harness._progress import Amount, Stage, Tick, watching
from harness.check.verdict import AnomalyKind

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["LiveProgress", "colour_wanted", "emit", "progress_wanted", "searching"]

_REFRESH_SECONDS: Final = 0.1
"""At most this often the line is redrawn (and at every change of what is being done)."""

_STYLES: Final = {
    "harness.invalid": "bold red",
    "harness.valid": "bold green",
    "harness.unknown": "bold yellow",
    "harness.anomaly": "magenta",
}


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def progress_wanted(stream: TextIO, *, json_output: bool = False) -> bool:
    """Draw live progress on ``stream``: a terminal, not in CI, not under ``--json``."""
    if json_output or os.environ.get("CI") or os.environ.get("TERM") == "dumb":
        return False
    return _isatty(stream)


def colour_wanted(stream: TextIO) -> bool:
    """Colour text written to ``stream``: a terminal, and ``NO_COLOR`` unset or empty."""
    return _isatty(stream) and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"


_LINE_PARTS: Final = 30
"""The width of the live line without its description and count: the spinner, the bar (8),
the two clocks (5 each) with "ETA", the spaces between the columns, one to spare."""


def _console(stream: TextIO, *, colour: bool) -> Console:
    from rich.console import Console
    from rich.highlighter import RegexHighlighter
    from rich.theme import Theme

    kinds = "|".join(sorted((k.value for k in AnomalyKind), key=len, reverse=True))

    class VerdictHighlighter(RegexHighlighter):
        base_style = "harness."
        highlights = [  # noqa: RUF012 (rich's class attribute)
            r"(?P<invalid>\bINVALID\b|does NOT hold|NOT AS EXPECTED)",
            r"(?P<unknown>\bUNKNOWN\b|could not be shown)",
            r"(?<![-\w])(?P<valid>VALID\b|HELD\b|held\b)",
            rf"(?<![-\w])(?P<anomaly>(?:{kinds}))(?= x\d)",
        ]

    return Console(
        file=stream,
        theme=Theme(_STYLES),
        highlighter=VerdictHighlighter(),
        no_color=not colour,
        force_terminal=colour or None,
        markup=False,
        emoji=False,
        soft_wrap=True,
    )


def emit(text: str, stream: TextIO | None = None) -> None:
    """Print ``text`` (and a newline) to ``stream`` (stdout), coloured where wanted."""
    stream = sys.stdout if stream is None else stream
    if not colour_wanted(stream):
        print(text, file=stream)
        return
    _console(stream, colour=True).print(text)


class LiveProgress(Closing):
    """One live progress line on a terminal, for a block of work (a context manager).

    ``total`` is how many units the work has (cells of a matrix, schedules of a search), or
    None for work of unknown length (a spinner and the elapsed time). :meth:`tick` takes the
    engine's ticks (install it with ``harness._progress.watching``), :meth:`step` sets what is
    being done and how far the units got, :meth:`log` prints a line above the progress line.
    """

    def __init__(
        self,
        description: str,
        total: int | None,
        *,
        stream: TextIO | None = None,
        json_output: bool = False,
        units: str = "schedules",
    ) -> None:
        self._stream = sys.stderr if stream is None else stream
        self._enabled = progress_wanted(self._stream, json_output=json_output)
        self._description = description
        self._total = total
        self._units = units
        self._detail = ""
        self._stage = ""  # a search's stage (search, shrink), from its ticks
        self._completed = 0
        self._drawn = 0.0
        self._progress: Any = None
        self._task: Any = None

    @property
    def enabled(self) -> bool:
        """Whether a live line is drawn (else :meth:`log` prints plain lines)."""
        return self._enabled

    def __enter__(self) -> LiveProgress:
        if self._enabled:
            self._start()
        return self

    def close(self) -> None:
        """Take the progress line down (the block's end does it); closing again does nothing."""
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def _start(self) -> None:
        from rich.progress import (
            BarColumn,
            Progress,
            SpinnerColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )
        from rich.text import Text

        class _Elapsed(TimeElapsedColumn):
            """The elapsed time as ``mm:ss`` (``h:mm:ss`` from an hour), as the ETA's
            compact form: rich's own ``0:00:01`` leaves no room for the ETA at 80 columns."""

            def render(self, task: Any) -> Text:
                seconds = int(task.finished_time if task.finished else task.elapsed or 0)
                hours, rest = divmod(seconds, 3600)
                shown = (
                    f"{hours}:{rest // 60:02d}:{rest % 60:02d}"
                    if hours
                    else f"{rest // 60:02d}:{rest % 60:02d}"
                )
                return Text(shown, style="progress.elapsed")

        console = _console(self._stream, colour=colour_wanted(self._stream))
        self._progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}", markup=False),
            BarColumn(bar_width=8),
            TextColumn("{task.fields[count]}", markup=False),
            _Elapsed(),
            TextColumn("ETA", markup=False),
            TimeRemainingColumn(compact=True),
            console=console,
            auto_refresh=False,
            transient=True,
            redirect_stdout=False,
            redirect_stderr=False,
        )
        self._task = self._progress.add_task(self._fitted(), total=self._total, count=self._count())
        self._progress.start()

    def _fitted(self) -> str:
        """The description, cut with an ellipsis so that the line fits its terminal: else
        rich cuts the clocks (``0:…``), the one part of the line that is read at a glance."""
        width = self._progress.console.width if self._progress is not None else 80
        room = max(width - len(self._count()) - _LINE_PARTS, 12)
        text = self._description
        return text if len(text) <= room else text[: room - 1] + "…"

    def _count(self) -> str:
        """``429/1000 schedules, 1 failing`` (``shrink 12 schedules, ...`` while a failure
        shrinks): the stage, the units, the detail, one
        text (one column: an 80-column terminal keeps the clocks whole)."""
        if self._total is None:
            done = f"{self._completed} {self._units}" if self._completed else ""
        else:
            done = f"{self._completed}/{self._total} {self._units}"
        stage = f"{self._stage} " if self._stage and done else self._stage
        return f"{stage}{done}{', ' if self._detail and (stage or done) else ''}{self._detail}"

    def _draw(self, *, now: bool = False) -> None:
        if self._progress is None:
            return
        self._progress.update(
            self._task,
            description=self._fitted(),
            total=self._total,
            completed=self._completed,
            count=self._count(),
        )
        clock = time.monotonic()
        if now or clock - self._drawn >= _REFRESH_SECONDS:
            self._drawn = clock
            self._progress.refresh()

    def step(
        self,
        description: str | None = None,
        *,
        completed: int | None = None,
        detail: str | None = None,
        now: bool = False,
    ) -> None:
        """Say what is being done now, how many units are done, and a short detail (drawn at
        once with ``now``, as when the description changes, else at most every 0.1 s)."""
        changed = now or (description is not None and description != self._description)
        if description is not None:
            self._description = description
        if completed is not None:
            self._completed = completed
        if detail is not None:
            self._detail = detail
        self._draw(now=changed)

    def tick(self, tick: Tick) -> None:
        """An exploration's tick: the schedules, the stage and the failures so far."""
        failing = f"{tick.failures} failing"
        if self._units == "schedules":  # the search itself is the work
            if tick.stage is Stage.SHRINK:
                self._total = None  # shrinking has no known end
            # only a shrink is named: the search is what the line shows by default, and
            # an 80-column terminal has no room to spare
            self._stage = "" if tick.stage is Stage.SEARCH else tick.stage.value
            self.step(completed=tick.schedules, detail=failing)
        else:  # a matrix cell: its search shows as the detail
            self.step(detail=f"{tick.stage.value} {tick.schedules} schedules, {failing}")

    def amount(self, amount: Amount) -> None:
        """A long step's amount (install it with ``harness._progress.metering``): the
        line counts that step's units."""
        self._total, self._units = amount.total, amount.units
        self.step(completed=amount.done, detail=amount.what)

    def log(self, line: str) -> None:
        """A line of its own: above the live line on a terminal, else plain to the stream."""
        if self._progress is not None:
            self._progress.console.print(line)
        else:
            print(line, file=self._stream, flush=True)


@contextlib.contextmanager
def searching(name: str, budget: int, *, json_output: bool) -> Iterator[None]:
    """The progress line every door's search draws while the block runs (``explore NAME``:
    schedules of ``budget``, the stage, problems found; a terminal's stderr only, never under
    ``--json``), fed by the engine's ticks: the ``run``, ``spark-job`` and ``kafka`` doors."""
    live = LiveProgress(f"explore {name}", budget, json_output=json_output)
    with live, watching(live.tick):
        yield
