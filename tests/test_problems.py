"""harness.search.problems: when a later failure is another problem, not a known one."""

from __future__ import annotations

from harness.check import AnomalyKind, Status
from harness.check.verdict import Anomaly, Guarantee, Verdict, Witness
from harness.faults.schedule import Crash, LoseAck, Produce, Run, Schedule, Step, Tick
from harness.search.problems import Problems


def _duplicate() -> Verdict:
    witness = Witness(("r0",), (1, 2), "record 'r0' part 0 was observed 2 times")
    anomaly = Anomaly(AnomalyKind.DUPLICATE, 1, (witness,))
    return Verdict(Status.INVALID, Guarantee.EXACTLY_ONCE, (anomaly,))


def _relay(schedule: Schedule) -> Verdict:
    """A relay that sends a record on its fourth call and commits on its fifth: a crash
    between them duplicates the record. A ``Tick`` fires the sender, as a call would; a
    lost acknowledgement duplicates the batch whenever it comes."""
    calls, sent = 0, False
    for step in schedule.steps:
        if isinstance(step, LoseAck):
            return _duplicate()
        if isinstance(step, (Run, Tick)):
            calls += step.calls if isinstance(step, Run) else 1
            sent = sent or calls >= 4
        if isinstance(step, Crash) and sent and calls < 5:
            return _duplicate()
    return Verdict(Status.VALID, Guarantee.EXACTLY_ONCE)


def _known(*steps: Step) -> Problems:
    problems = Problems()
    schedule = Schedule(steps)
    problems.add(schedule, _relay(schedule))
    return problems


def test_a_tick_that_stands_for_the_call_it_saved_is_not_another_root_fault() -> None:
    # the crash's duplicate found again with a Tick where the send's call was: the same
    # problem (the command printed it as "problem 3 of 3", needing crash and tick)
    problems = _known(Produce(), Run(4), Crash())
    again = Schedule((Produce(), Run(3), Tick(), Crash()))
    assert _relay(again).status is Status.INVALID
    assert not problems.is_new(again, _relay(again), _relay)


def test_a_fault_the_failure_needs_is_another_root_fault() -> None:
    problems = _known(Produce(), Run(4), Crash())
    resent = Schedule((Produce(), Run(2), LoseAck(), Run(5)))
    assert problems.is_new(resent, _relay(resent), _relay)
