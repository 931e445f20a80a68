"""The systematic phase's workload shapes: a backlog produced while the processor is down,
uneven, idle and interleaved partitions, and crashes sampled inside the volume burst; each
kept only where it reaches a context the small workloads did not."""

from __future__ import annotations

import harness
from harness.catalogue.pitfalls import PITFALLS
from harness.catalogue.toys import TOYS
from harness.faults import Crash, Produce
from harness.search.systematic import BURST_SAMPLE, VOLUME, plan, shapes, workloads
from harness.sim.topology import Topology


def first_failure(name: str) -> int | None:
    """The index of the first planned schedule the pitfall fails, running the plan alone."""
    subject = PITFALLS[name]
    for index, planned in enumerate(plan(subject.processor, subject.topology).schedules):
        _, verdict = harness.run_once(
            subject.processor, planned.schedule, subject.guarantee, topology=subject.topology
        )
        if not verdict.ok:
            return index
    return None


def test_the_shapes_of_one_and_of_two_partitions() -> None:
    (backlog,) = shapes(Topology())
    assert backlog[0] == (Produce(0, 2),)
    assert isinstance(backlog[1][0], Crash) and backlog[1][1].count >= Topology().keys + 1
    two = shapes(Topology(partitions=2))
    assert ((Produce(0, 3), Produce(1, 2)),) in two  # uneven
    assert ((Produce(1, 2),),) in two  # the first partition idle
    assert tuple((Produce(i % 2, 1),) for i in range(4)) in two  # interleaved


def test_a_backlog_waiting_at_a_restart_is_planned_and_finds_a_bulk_catch_up() -> None:
    """The catch-up path needs five records waiting at a restart: the small workloads never
    leave that many, so before the shapes only the drawn phase found it (seconds later)."""
    assert first_failure("catch_up_latest_per_key") is not None
    assert first_failure("catch_up_every_record") is None


def test_uneven_and_interleaved_partitions_find_a_batch_that_mixes_them() -> None:
    """With two records on each partition in turn, every batch of two holds one partition;
    only uneven or interleaved arrivals mix them."""
    assert first_failure("merged_batch_last_partition") is not None
    assert first_failure("merged_batch_every_partition") is None


def test_shapes_keep_only_points_that_reach_something_new() -> None:
    """A plain forwarder's backlog and partition shapes reach no new context but their
    recovery: each shape adds a handful of points, not one per call."""
    toy = TOYS["process_then_commit"]
    found = plan(toy.processor, toy.topology)
    small = len(workloads(toy.topology))
    shape_points = [
        p for p in found.points if small <= p.workload < small + len(shapes(toy.topology))
    ]
    assert 0 < len(shape_points) <= 12, shape_points


def test_crashes_are_sampled_inside_the_volume_burst() -> None:
    toy = TOYS["process_then_commit"]
    found = plan(toy.processor, toy.topology)
    volume_number = max(p.point.workload for p in found.schedules)
    inside = {
        p.point.call
        for p in found.schedules
        if p.point.workload == volume_number
        and p.faults == (harness.Fault.CRASH,)
        and p.point.label != "idle"
    }
    # the novel contexts are at the start of the burst; the sample spreads over all of it
    assert len(inside) >= BURST_SAMPLE
    assert max(inside) > VOLUME  # past the first half of the calls (several per record)


def test_coverage_says_why_narrowed_faults_planned_nothing() -> None:
    """faults=["tick", "reorder"] for a processor with no timer and no choice: the line says
    so, instead of "0/61 fault points" as if nothing had been looked at."""
    toy = TOYS["process_then_commit"]
    result = harness.explore(
        toy.processor,
        guarantee=toy.guarantee,
        faults=["tick", "reorder"],
        failures_dir=None,
        max_examples=10,
    )
    line = result.coverage.summary()
    assert "none where a fault searched for applies" in line, line
    assert "tick: the processor registered no timer" in line
    assert "reorder: the processor never chose" in line
    assert not line.startswith("0/")
    assert set(result.coverage.to_json()["unplanned"]) == {"tick", "reorder"}
    # with every fault, faults that apply somewhere keep the usual line
    full = harness.explore(
        toy.processor, guarantee=toy.guarantee, failures_dir=None, max_examples=10
    )
    assert full.coverage.summary().split(" ")[0].count("/") == 1
    assert "tick" in full.coverage.to_json()["unplanned"]
