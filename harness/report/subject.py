"""What a report is about: the small protocol a reported run satisfies, and the values the
engine fills in that no checker sees (the processor's own exceptions).

Reports sit below the engine: they never import :mod:`harness.engine`. The engine's
``Failure`` satisfies :class:`Reported` as it is; :class:`Checked` is the same thing for a
verdict checked by hand (a stored history, a replay).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol, final

from harness.check.verdict import Verdict
from harness.history.events import History

__all__ = ["Checked", "ProcessorError", "Reported", "ReportedSchedule", "SourceLine"]

_REASON: Final = 200
"""The longest an error message is quoted in a verdict's one-line reason."""


@final
@dataclass(frozen=True, slots=True)
class SourceLine:
    """One frame of a traceback: where the processor's code was when it raised."""

    file: str
    line: int
    function: str
    code: str | None = None

    def describe(self) -> str:
        """``File "proc.py", line 12, in handle``, as Python prints it."""
        return f'File "{self.file}", line {self.line}, in {self.function}'


@final
@dataclass(frozen=True, slots=True)
class ProcessorError:
    """An exception the user's processor raised during a run (not a simulated crash).

    ``error`` is ``Type: message`` (the detail of the history's ``error`` event); ``frames``
    are the processor's own frames, outermost first (the harness's frames are left out);
    ``events`` are the indices of the ``error`` events it caused.
    """

    error: str
    frames: tuple[SourceLine, ...]
    events: tuple[int, ...] = ()

    def where(self) -> str:
        """``proc.py:12 in handle`` (the innermost frame), or ``""`` without frames."""
        if not self.frames:
            return ""
        last = self.frames[-1]
        return f"{last.file}:{last.line} in {last.function}"

    def reason(self) -> str:
        """One line for a verdict's reasons: ``processor error: ValueError: x (at f.py:3 in g)``."""
        where = self.where()
        error = self.error if len(self.error) <= _REASON else self.error[: _REASON - 3] + "..."
        return f"processor error: {error}" + (f" (at {where})" if where else "")

    def lines(self) -> list[str]:
        """The traceback as Python prints it, headed ``processor error`` and the events."""
        times = len(self.events)
        at = ", ".join(f"#{i}" for i in self.events[:5]) + (" ..." if times > 5 else "")
        head = f"processor error (raised {times} time{'s' if times != 1 else ''}"
        head += f": events {at})" if times else ")"
        out = [head + ":", "  Traceback (the processor's frames, most recent call last):"]
        for frame in self.frames:
            out.append(f"    {frame.describe()}")
            if frame.code:
                out.append(f"      {frame.code}")
        out.append(f"  {self.error}")
        return out


class ReportedSchedule(Protocol):
    """What a report shows of a run's schedule: a simulator ``Schedule`` or a Structured
    Streaming ``StreamSchedule`` (an unchanged Spark job's) are both one."""

    def __len__(self) -> int: ...

    def describe(self, stops: Mapping[Any, str] | None = None) -> str: ...

    def dumps(self) -> str: ...

    def to_json(self) -> dict[str, Any]: ...


class Reported(Protocol):
    """The thing a report is about: a checked run. ``harness.Failure`` is one, and so is an
    unchanged Spark job's counterexample (``harness.spark.streaming.jobsearch.JobFailure``)."""

    @property
    def verdict(self) -> Verdict: ...

    @property
    def history(self) -> History | None: ...

    @property
    def schedule(self) -> ReportedSchedule | None: ...

    @property
    def seed(self) -> int | None: ...

    @property
    def replay_command(self) -> str | None: ...

    @property
    def processor(self) -> str | None: ...

    @property
    def backend(self) -> str | None: ...


@final
@dataclass(frozen=True, slots=True)
class Checked:
    """A verdict and what is known about its run: a :class:`Reported` built by hand."""

    verdict: Verdict
    history: History | None = None
    schedule: ReportedSchedule | None = None
    seed: int | None = None
    replay_command: str | None = None
    processor: str | None = None
    backend: str | None = None
    processor_errors: tuple[ProcessorError, ...] = ()
