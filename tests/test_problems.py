"""What counts as another problem after a first counterexample
(:mod:`harness.search.problems`): other anomaly kinds, or another root fault, never a known
problem found again with an incidental fault kept by shrinking."""

from __future__ import annotations

import pytest

import harness
from harness import Crash, Duplicate, Produce, Run, Schedule, Takeover
from harness import _progress as harness_progress
from harness.check import AnomalyKind, Guarantee, check
from harness.check.verdict import Anomaly, Status, Verdict, Witness
from harness.faults.kinds import Fault
from harness.faults.schedule import LoseAck, Step, Tick
from harness.search.problems import Problems, face_of, fault_of

ALO = Guarantee.AT_LEAST_ONCE


def store_then_process(ctx):  # type: ignore[no-untyped-def]
    """README's bug: the offset is stored before the output is durable."""
    out = ctx.output("out")
    for record in ctx.read("in-0", ctx.offsets.get("in-0")):
        ctx.offsets.put("in-0", record.next)
        out.emit(record)
        out.commit()


def _verdict(schedule: Schedule) -> Verdict:
    return check(harness.simulate(store_then_process, schedule), ALO)


CRASHED = Schedule([Produce(count=1), Run(calls=3), Crash()])
DUPLICATED = Schedule([Produce(count=3), Run(calls=1), Duplicate(), Run(calls=14), Takeover()])


def test_a_known_problem_found_again_with_an_extra_fault_is_not_new() -> None:
    first, again = _verdict(CRASHED), _verdict(DUPLICATED)
    assert first.status is again.status is Status.INVALID
    problems = Problems()
    problems.add(CRASHED, first)
    runs: list[Schedule] = []

    def run(schedule: Schedule) -> Verdict:
        runs.append(schedule)
        return _verdict(schedule)

    # without the duplicate the calls shift and the run passes: that alone would call it new
    without = Schedule([s for s in DUPLICATED.steps if not isinstance(s, Duplicate)])
    assert _verdict(without).status is Status.VALID
    assert not problems.is_new(DUPLICATED, again, run)
    assert runs == []  # it holds the known problem's root fault (a takeover ends a process)


def test_a_failure_that_needs_no_fault_then_one_that_needs_a_crash_are_two_problems() -> None:
    problems = Problems()
    problems.add(Schedule([Produce(count=1), Run(calls=1)]), _verdict(CRASHED))  # as if faultless
    # the crash is outside the first problem's root faults (none): taken out, the run passes
    assert problems.is_new(CRASHED, _verdict(CRASHED), _verdict)


@pytest.mark.parametrize("max_problems", [1, 5])
def test_the_readme_bug_is_one_problem_however_many_are_looked_for(max_problems: int) -> None:
    with pytest.raises(harness.CounterexampleFound) as found:
        harness.explore(
            store_then_process,
            guarantee=ALO,
            failures_dir=None,
            max_problems=max_problems,
            max_examples=400,
            seed=1640618239,
        )
    assert len(found.value.failures) == 1, found.value


# -- a fault that stands for a call ---------------------------------------------------------


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


def test_progress_counts_on_across_the_searches_for_further_problems() -> None:
    """A search for further problems continues the exploration's progress: its schedules
    count on from the earlier searches' and the problems found stay found (it went back to
    ``search 1/N ... 0 failing``)."""
    from harness._progress import watching

    ticks: list[harness_progress.Tick] = []
    with watching(ticks.append), pytest.raises(harness.CounterexampleFound) as found:
        harness.explore(
            store_then_process,
            guarantee=ALO,
            failures_dir=None,
            max_problems=5,
            max_examples=400,
            seed=1640618239,
        )
    assert len(found.value.failures) == 1  # one problem, then a whole search that found none
    schedules = [tick.schedules for tick in ticks]
    assert schedules == sorted(schedules) and schedules[-1] > 400
    assert [tick.failures for tick in ticks][-1] == 1
    first = next(i for i, tick in enumerate(ticks) if tick.failures)
    assert all(tick.failures == 1 for tick in ticks[first:])
    assert ticks[-1].budget > ticks[0].budget == 400


# -- faces of one bug, and the order problems are reported in ------------------------------


def _lost(*witnessed: tuple[int, ...], more: tuple[AnomalyKind, ...] = ()) -> Verdict:
    witnesses = tuple(
        Witness((f"r{i}",), events, f"record 'r{i}' lost") for i, events in enumerate(witnessed)
    )
    anomalies = [Anomaly(AnomalyKind.LOST, len(witnesses), witnesses)]
    anomalies += [Anomaly(kind, 1, (Witness(("r0",), (9,), "x"),)) for kind in more]
    return Verdict(Status.INVALID, ALO, tuple(anomalies))


def test_a_loss_with_its_skip_and_offset_ahead_is_a_face_of_the_same_loss() -> None:
    never_read = _lost((2,))
    with_consequences = _lost((2,), more=(AnomalyKind.SKIP, AnomalyKind.OFFSET_AHEAD))
    read_then_dropped = _lost((3, 4))
    assert face_of(never_read) == face_of(with_consequences) == (
        Status.INVALID, "lost", "never read",
    )  # fmt: skip
    assert face_of(read_then_dropped) == (Status.INVALID, "lost", "read")
    problems = Problems()
    nothing = Schedule([Produce(count=1)])
    problems.add(nothing, never_read)
    # no fault either: the same problem, though its anomaly kinds differ
    assert not problems.is_new(
        Schedule([Produce(count=1), Run(calls=2), Produce(count=1)]), with_consequences, _never
    )
    # a loss of records that were read, needing a crash: another problem
    crashed = Schedule([Run(calls=3), Produce(count=1), Run(calls=1), Crash()])
    assert problems.is_new(crashed, read_then_dropped, lambda s: Verdict(Status.VALID, ALO))


def _never(schedule: Schedule) -> Verdict:
    raise AssertionError("no run is needed to tell")


def test_problems_of_a_new_face_are_listed_first() -> None:
    problems = Problems()
    problems.add(Schedule([Produce(count=1)]), _lost((2,)))
    problems.add(Schedule([Run(calls=2), Produce(count=1), Crash()]), _lost((3,)))
    problems.add(Schedule([Run(calls=3), Produce(count=1), Crash()]), _lost((3, 4)))
    assert problems.order(["backlog", "reset after a crash", "commit first"]) == [
        "backlog", "commit first", "reset after a crash",
    ]  # fmt: skip


def test_two_independent_bugs_are_the_first_two_problems_and_later_coverage_is_honest() -> None:
    """tests/kafka_apps/effects/two_bugs.py: the default auto.offset.reset=latest skips what
    was written before it first started, and it commits each order before printing it."""
    from pathlib import Path

    from harness.effects import stdout_lines
    from harness.kafka import KafkaApp
    from harness.kafka.payloads import template

    app = KafkaApp(
        str(Path(__file__).parent / "kafka_apps" / "effects" / "two_bugs.py"),
        inputs=["orders"],
        encode=template('{"order_id": {n}}'),
        effects=[stdout_lines(pattern=r"handled (\d+)")],
    )
    with pytest.raises(harness.CounterexampleFound) as found:
        harness.explore(
            app, guarantee=ALO, topology=app.topology, failures_dir=None, max_problems=5,
            max_examples=300, seed=1,
        )  # fmt: skip
    failures = found.value.failures
    faces = [face_of(f.verdict) for f in failures]
    assert faces[0] == (Status.INVALID, "lost", "never read")
    assert faces[1] == (Status.INVALID, "lost", "read"), [f.report() for f in failures]
    assert Fault.CRASH in {fault_of(step) for step in failures[1].schedule.steps}
    for later in failures[1:]:
        coverage = later.coverage
        assert coverage.reused > 0 and coverage.points_hit > 0
        assert "after the earlier searches'" in coverage.summary()
