"""What an exploration returns: a passing :class:`Exploration`, or a :class:`Failure` raised
inside :class:`CounterexampleFound` (every distinct problem found, the first one first).

A failure's :meth:`Failure.report` is the text a user reads: the verdict, the processor's own
errors, the shrunk schedule as steps and JSON, the coverage, the seed and the replay command.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from harness._shown import counted
from harness.check import Guarantee, Status, Verdict
from harness.errors import HarnessError
from harness.faults.schedule import Schedule
from harness.faults.streams import StreamSchedule
from harness.history.events import History
from harness.report.subject import ProcessorError
from harness.search.coverage import Coverage
from harness.settings import flag_name
from harness.sim.world import Backend

__all__ = ["COMMAND_LINE_REPEAT", "PYTHON_REPEAT", "CounterexampleFound", "Exploration", "Failure"]

PYTHON_REPEAT: Final = "explore(..., seed={seed})"
"""How a report spells the seed that repeats its search, by default (the Python API's
words); a door with its own (``--seed {seed}``, ``--harness-seed {seed}``) passes them."""
COMMAND_LINE_REPEAT: Final = flag_name("seed") + " {seed}"
"""The command line's words for it (``--seed {seed}``): the run, kafka and spark-job doors."""


@dataclass(frozen=True, slots=True)
class Failure:
    """What a failing exploration found, shrunk."""

    processor: str
    guarantee: Guarantee
    backend: Backend | str
    """Where the runs happened: a simulator backend, or ``spark`` for a streaming job."""
    verdict: Verdict
    schedule: Schedule | StreamSchedule
    """The shrunk schedule, of the searched system's type (:mod:`harness.engine.system`)."""
    history: History
    seed: int
    examples: int
    """Schedules simulated in all (search and shrinking)."""
    first_failure_example: int
    """Which drawn schedule failed first (1-based)."""
    first_failure_seconds: float
    replay_file: Path | None
    replay_command: str
    coverage: Coverage = field(default_factory=Coverage)
    """What the search had exercised when it failed."""
    processor_errors: tuple[ProcessorError, ...] = ()
    """Exceptions the processor raised in this run, with its own frames of their tracebacks."""
    replay_note: str | None = None
    """Why the replay file is not in the failures directory, and where it is instead."""

    def report(self, repeat: str = PYTHON_REPEAT) -> str:
        """The text shown when an exploration fails; ``repeat`` is how the door that shows it
        spells its seed, with ``{seed}`` in it (``--seed {seed}`` on the command line)."""
        held = "does NOT hold" if self.verdict.status is Status.INVALID else "could not be shown"
        lines = [
            f"{self.guarantee.value} {held} for {self.processor} ({self.backend} backend): "
            f"{self.verdict.status.name}",
            *(line for error in self.processor_errors for line in error.lines()),
            self.verdict.summary(),
            f"shrunk schedule ({counted(len(self.schedule), 'step')}; first failure at "
            f"schedule {self.first_failure_example} after {self.first_failure_seconds:.2f} s, "
            f"{counted(self.examples, 'schedule')} run in all):",
            self.schedule.describe(self.history.meta.extra.get("stops")),
            f"schedule JSON: {self.schedule.dumps()}",
            f"coverage: {self.coverage.summary()}",
            f"seed: {self.seed}  ({repeat.format(seed=self.seed)} repeats this search)",
            f"replay: {self.replay_command}",
            *([f"report: {self.report_command}"] if self.report_command else []),
            *([f"replay file: {self.replay_note}"] if self.replay_note else []),
        ]
        return "\n".join(lines)

    @property
    def report_command(self) -> str | None:
        """The command that renders this failure's replay file as text, JSON and HTML (next
        to the file), as every door prints it; None without a file."""
        if self.replay_file is None:
            return None
        file = Path(self.replay_file)
        out = file.with_name(file.stem + "-report")
        return shlex.join(["python", "-m", "harness", "report", str(file), "--out", str(out)])

    def problem_json(self, hints: Iterable[str] = ()) -> dict[str, Any]:
        """This failure as one item of a door's ``--json`` ``problems`` (``output.schema.json``):
        its verdict, schedule, replay file and command, and what the door noticed (``hints``)."""
        return {
            "verdict": self.verdict.to_json(),
            "schedule": self.schedule.to_json(),
            "replay_file": None if self.replay_file is None else str(self.replay_file),
            "replay_command": self.replay_command,
            "hints": list(hints),
        }


class CounterexampleFound(HarnessError, AssertionError):
    """``explore`` found a schedule under which the guarantee does not hold (or cannot be
    judged); ``failure`` has the details and ``str()`` is the report. ``failures`` is every
    distinct problem found (``failure`` first; more with ``max_problems``)."""

    def __init__(self, failure: Failure, others: Iterable[Failure] = ()) -> None:
        self.failure = failure
        self.failures = (failure, *others)
        super().__init__(self.report())

    def report(self, repeat: str = PYTHON_REPEAT) -> str:
        """Every problem's report (:meth:`Failure.report`), numbered when there are several;
        ``str()`` of this exception spells the seed as the Python API does."""
        if len(self.failures) == 1:
            return self.failure.report(repeat)
        count = len(self.failures)
        parts = [
            f"problem {number} of {count}:\n{one.report(repeat)}"
            for number, one in enumerate(self.failures, 1)
        ]
        return f"{count} distinct problems found\n\n" + "\n\n".join(parts)


CounterexampleFound.__module__ = "harness"
"""Named by its public home in tracebacks (pytest's ``E harness.CounterexampleFound: ...``)
and pickles: ``harness.CounterexampleFound`` is this class."""


@dataclass(frozen=True, slots=True)
class Exploration:
    """A passing exploration: how many schedules were run, from which seed, and the fault
    coverage they achieved."""

    processor: str
    guarantee: Guarantee
    examples: int
    seed: int
    coverage: Coverage = field(default_factory=Coverage)

    def summary(self) -> str:
        """``at-least-once held for m:p: 53/53 fault points, ..., 300 schedules (...)``."""
        return (
            f"{self.guarantee.value} held for {self.processor}: {self.coverage.summary()}, "
            f"seed {self.seed}"
        )
