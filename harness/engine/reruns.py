"""A failing schedule run again: flaky processors and processor errors, explained.

The simulator is deterministic, so the same processor, topology, backend and schedule must
give the same history, event for event. A processor that reads the wall clock, draws from
``random`` or iterates a set of objects breaks that promise, and then a failure cannot be
trusted: its verdict may read VALID the next time, and its replay file passes and fails in
turns. :func:`rerun` runs the schedule again (:data:`RERUNS` times), compares each history
with the first one and, at the first event that differs, says so:
``flaky: the same schedule gave different histories at event N``. A flaky result is never
VALID (as Hypothesis raises ``Flaky`` rather than pass such a test).

The same runs capture the exceptions the user's processor raised (the ``error`` events of the
history), with the processor's own frames of their tracebacks, so a report can show the
user's file and line first and call it a processor error instead of a bare
``last error: ValueError: ...``.
"""

from __future__ import annotations

import functools
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Final, final

from harness._shown import describe_exception
from harness.check import Status, Verdict, check
from harness.faults.schedule import Schedule
from harness.history.events import Event, EventKind, History
from harness.report._facts import clip, event_line
from harness.report.subject import ProcessorError, SourceLine
from harness.sim.budget import TIME_RAN_OUT, RunBudget
from harness.sim.context import Context
from harness.sim.simulator import Processor, processor_path, simulate
from harness.sim.topology import Topology
from harness.sim.world import Backend

__all__ = ["RERUNS", "Divergence", "Rerun", "explain", "first_divergence", "rerun"]

RERUNS: Final = 5
"""How many times a failing schedule is run again to tell a deterministic processor from a
flaky one: the histories of a deterministic one always agree, and a single coin flip that
changes the history is caught with probability 31/32 (the schedules are shrunk and small,
so the runs cost little)."""

_HARNESS_DIR: Final = str(Path(__file__).resolve().parent)
_LINE: Final = 60
"""The longest a one-line event is quoted in a flakiness reason."""


@final
@dataclass(frozen=True, slots=True)
class Divergence:
    """Where two runs of the same schedule first gave different histories."""

    event: int
    """The index of the first event that differs (or that only one history has)."""
    first: str
    """That event in the first run, as one line (``(the history ended)`` if it had none)."""
    again: str
    """That event in the run that differed."""
    run: int
    """Which rerun differed (1-based)."""

    def reason(self) -> str:
        """``flaky: the same schedule gave different histories at event N (...)``."""
        return (
            f"flaky: the same schedule gave different histories at event {self.event} "
            f"(first run: {self.first}; run {self.run + 1}: {self.again}); the processor is "
            "nondeterministic (random, wall-clock time, set or dict order of objects, "
            "threads?): its verdict cannot be trusted"
        )


@final
@dataclass(frozen=True, slots=True)
class Rerun:
    """What running a schedule again showed, and the verdict explained by it."""

    history: History
    """The history to report: the one given, or a failing rerun's when the one given passed."""
    verdict: Verdict
    divergence: Divergence | None
    processor_errors: tuple[ProcessorError, ...]

    @property
    def flaky(self) -> bool:
        """Whether the runs disagreed (the verdict then says so among its reasons)."""
        return any(reason.startswith("flaky: ") for reason in self.verdict.reasons)


def _line(events: tuple[Event, ...], index: int) -> str:
    if index >= len(events):
        return "(the history ended)"
    return clip(event_line(events[index]), _LINE)


def _ran_out(history: History) -> bool:
    """Whether the run stopped because its wall-clock time ran out."""
    end = history.events[-1] if history.events else None
    return end is not None and end.kind is EventKind.END and TIME_RAN_OUT in (end.detail or "")


def first_divergence(first: History, again: History) -> int | None:
    """The index of the first event where the two histories differ; None if they agree."""
    a, b = first.events, again.events
    for index, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return index
    return None if len(a) == len(b) else min(len(a), len(b))


def _frames(tb: TracebackType | None) -> tuple[SourceLine, ...]:
    summary = traceback.extract_tb(tb)
    frames = [
        SourceLine(f.filename, f.lineno or 0, f.name, f.line or None)
        for f in summary
        if not str(Path(f.filename).resolve()).startswith(_HARNESS_DIR)
        and "greenlet" not in Path(f.filename).parts
    ]
    if summary and (not frames or frames[-1].file != summary[-1].filename):
        last = summary[-1]  # raised inside the harness: show the call that raised too
        frames.append(SourceLine(last.filename, last.lineno or 0, last.name, last.line or None))
    return tuple(frames)


_Captured = list[tuple[str, tuple[SourceLine, ...]]]


def _capturing(processor: Processor, captured: _Captured) -> Processor:
    """``processor`` unchanged, except that what it raises (in its body or in its timer
    callbacks) is noted in ``captured`` before the simulator sees it. It has the same
    ``module:name``, so the run id and the history are those of ``processor``."""

    def noting(call: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(call)
        def noted(*args: Any, **kwargs: Any) -> Any:
            try:
                return call(*args, **kwargs)
            except Exception as exc:  # noted as the history notes it, even if its __str__ raises
                captured.append((describe_exception(exc), _frames(exc.__traceback__)))
                raise

        return noted

    def run(ctx: Context) -> Any:
        on_timer = ctx.on_timer
        # the instance's timers are its code too: note what they raise
        setattr(ctx, "on_timer", lambda callback: on_timer(noting(callback)))  # noqa: B010
        return noting(processor)(ctx)

    module, _, name = processor_path(processor).partition(":")
    run.__module__, run.__qualname__ = module, name
    run.harness_name = processor_path(processor)  # type: ignore[attr-defined]
    run.harness_name = processor_path(processor)  # type: ignore[attr-defined]
    return run


def _errors(history: History, captured: _Captured) -> tuple[ProcessorError, ...]:
    by_error: dict[str, list[int]] = {}
    for event in history.events:
        if event.kind is EventKind.ERROR and event.detail is not None:
            by_error.setdefault(event.detail, []).append(event.index)
    frames = dict(reversed(captured))  # the first traceback of each error
    return tuple(
        ProcessorError(error, frames.get(error, ()), tuple(indices))
        for error, indices in by_error.items()
    )


def explain(
    verdict: Verdict, errors: tuple[ProcessorError, ...], flaky: str | None = None
) -> Verdict:
    """``verdict`` with the processor's errors, then ``flaky`` (a reason), first among its
    reasons.

    A flaky verdict is never VALID (UNKNOWN unless the history shows anomalies, which stay:
    they did happen). Processor errors only explain a verdict that already failed; a VALID
    one (the processor raised, was restarted and recovered) is left as it is.
    """
    reasons = [e.reason() for e in errors] if verdict.status is not Status.VALID else []
    if flaky is not None:
        reasons.append(flaky)
    if not reasons:
        return verdict
    status = Status.INVALID if verdict.anomalies else Status.UNKNOWN
    return Verdict(
        status,
        verdict.guarantee,
        verdict.anomalies,
        verdict.tolerated,
        (*reasons, *(r for r in verdict.reasons if r not in reasons)),
        verdict.stats,
    )


_SLOW: Final = (
    "slow: the same schedule ran out of time during the search but finished when run again "
    "(the histories of {runs} more runs agreed with the finished one); the run budget is too "
    "tight for this processor, or it hangs only sometimes: raise the run's seconds "
    "(--run-seconds, RunBudget) and run again; its verdict cannot be trusted"
)
_PASSED_AGAIN: Final = (
    "flaky: the same schedule failed during the search but passed when run again (the "
    "histories of {runs} more runs agreed with the passing one); the processor is "
    "nondeterministic: its verdict cannot be trusted"
)


def rerun(
    processor: Processor,
    schedule: Schedule,
    history: History,
    verdict: Verdict,
    *,
    topology: Topology | None = None,
    backend: Backend = "memory",
    budget: RunBudget | None = None,
    runs: int = RERUNS,
    failed: bool = False,
    timed_out: bool = False,
) -> Rerun:
    """Run ``schedule`` ``runs`` more times and compare each history with ``history`` (the
    one ``verdict`` was given for); return the verdict explained (:func:`explain`), where the
    runs first diverged, and the processor's errors with their tracebacks.

    ``failed=True`` says that an earlier run of the same schedule failed (the search saw it):
    a VALID ``verdict`` is then flaky by itself, up to ``4 * runs`` runs look for a failing
    history to report instead, and without one the reason says that the schedule passed
    when run again (``timed_out=True``: that earlier run ran out of time, so the reason
    blames the budget, not nondeterminism).

    A run stopped by the wall-clock budget stops wherever the clock caught it: histories
    that differ because one of them ran out of time say nothing about the processor, and
    are not called flaky.
    """
    captured: _Captured = []
    divergence = None
    chosen = (history, verdict)
    passed = verdict.status is Status.VALID
    for run in range(1, (4 * runs if failed and passed else runs) + 1):
        again = simulate(
            _capturing(processor, captured),
            schedule,
            topology=topology,
            backend=backend,
            budget=budget,
        )
        index = first_divergence(history, again)
        if index is None:
            continue
        if divergence is None and not (_ran_out(history) or _ran_out(again)):
            first, other = _line(history.events, index), _line(again.events, index)
            divergence = Divergence(index, first, other, run)
        if chosen[1].status is Status.VALID:
            chosen = (again, check(again, verdict.guarantee))
        if chosen[1].status is not Status.VALID:
            break
    flaky = divergence.reason() if divergence is not None else None
    if flaky is None and failed and passed and chosen[1].status is Status.VALID:
        flaky = (_SLOW if timed_out else _PASSED_AGAIN).format(runs=4 * runs)
    errors = _errors(chosen[0], captured)
    return Rerun(chosen[0], explain(chosen[1], errors, flaky), divergence, errors)
