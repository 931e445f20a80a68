"""harness.faults.simplify: the domain-aware last pass over a shrunk schedule."""

from __future__ import annotations

from harness.faults.schedule import Crash, Produce, Run, Schedule
from harness.faults.simplify import simplify


def _crash_after_the_last_effect(schedule: Schedule) -> bool:
    """A consumer taking three calls per record, crashed in the window its last record opens
    (between the effect and the commit): only when the run's calls line up with the records
    produced does the crash fall in that window."""
    match schedule.steps:
        case (Produce(count=count), Run(calls=calls), Crash()):
            return calls == 3 * count
    return False


def test_fewer_records_and_the_calls_they_took_are_lowered_together() -> None:
    # Lowering the count alone or the calls alone misaligns the crash: the report showed
    # Produce(count=53), Run(calls=160), Crash for a duplicate one record shows
    failing = Schedule((Produce(0, 53), Run(159), Crash()))
    assert _crash_after_the_last_effect(failing)
    simplest = simplify(failing, _crash_after_the_last_effect)
    assert simplest.steps == (Produce(0, 1), Run(3), Crash())


def test_a_schedule_that_cannot_be_lowered_stays_as_it_is() -> None:
    failing = Schedule((Produce(0, 1), Run(3), Crash()))
    assert simplify(failing, _crash_after_the_last_effect) == failing
