"""The search finds bugs without being told which fault: the systematic phase, its coverage,
and the pitfalls catalogue explored with ``explore()``'s default arguments.

Each pitfall is caught by ``explore(processor, guarantee=..., topology=...)`` with default
faults and budget (the systematic phase finds it within its first schedules, so the search
stops early), with one of its expected anomaly kinds; its fixed twin passes the same failing
schedule and a search of its own (the whole default budget for each twin is the ``slow``
test).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import CounterexampleFound, Fault, Produce, Status, Topology, explore, run_once
from harness.catalogue.pitfalls import BIG_BATCH, PITFALLS
from harness.catalogue.toys import TOYS
from harness.errors import ConfigError
from harness.search.coverage import Coverage
from harness.search.systematic import (
    BURST_SAMPLE,
    VOLUME,
    coverage,
    plan,
    probe,
    shapes,
    workloads,
)

BUGS = sorted(name for name, s in PITFALLS.items() if not s.correct)
TWINS = sorted(name for name, s in PITFALLS.items() if s.correct)


def test_there_are_at_least_ten_pitfalls_each_with_a_correct_twin() -> None:
    assert len(BUGS) >= 10
    for name in BUGS:
        bug = PITFALLS[name]
        assert bug.twin in TWINS and bug.story and bug.expected, name
        assert PITFALLS[bug.twin].topology == bug.topology


@pytest.mark.parametrize("name", BUGS)
def test_default_explore_finds_the_pitfall_and_its_twin_passes_that_schedule(
    name: str, tmp_path: Path
) -> None:
    bug = PITFALLS[name]
    with pytest.raises(CounterexampleFound) as caught:
        explore(
            bug.processor, guarantee=bug.guarantee, topology=bug.topology, failures_dir=tmp_path
        )
    failure = caught.value.failure
    assert failure.verdict.status is Status.INVALID
    assert {a.kind for a in failure.verdict.anomalies} & bug.expected, failure.verdict.summary()
    assert failure.coverage.systematic == failure.first_failure_example  # found systematically
    assert bug.twin is not None
    twin = PITFALLS[bug.twin]
    _, verdict = run_once(twin.processor, failure.schedule, twin.guarantee, topology=twin.topology)
    assert verdict.status is Status.VALID, verdict.summary()


@pytest.mark.slow
@pytest.mark.parametrize("name", TWINS)
def test_a_fixed_twin_passes_the_systematic_phase_it_heads(name: str) -> None:
    twin = PITFALLS[name]
    result = explore(
        twin.processor,
        guarantee=twin.guarantee,
        topology=twin.topology,
        max_examples=40,
        failures_dir=None,
    )
    assert result.examples == 40
    assert result.coverage.systematic == 30 and result.coverage.drawn == 10


@pytest.mark.slow
@pytest.mark.parametrize("name", TWINS)
def test_a_fixed_twin_passes_the_default_budget(name: str) -> None:
    twin = PITFALLS[name]
    result = explore(
        twin.processor, guarantee=twin.guarantee, topology=twin.topology, failures_dir=None
    )
    run, planned = result.coverage.single_faults
    assert run == planned and result.coverage.pairs[0] == result.coverage.pairs[1]


def test_the_plan_is_deterministic_and_has_no_duplicate_schedules() -> None:
    toy = TOYS["timer_commits_processed"]
    first = plan(toy.processor, toy.topology)
    again = plan(toy.processor, toy.topology)
    assert first == again
    schedules = [p.schedule for p in first.schedules]
    assert len(schedules) == len(set(schedules))
    kinds = {p.faults for p in first.schedules}
    assert (Fault.TICK,) in kinds and (Fault.TICK, Fault.CRASH) in kinds
    # no choice is ever made by this processor: a reorder would be a no-op, so none is planned
    assert not any(Fault.REORDER in p.faults for p in first.schedules)


def test_the_singles_take_turns_so_a_short_budget_tries_every_kind_and_workload() -> None:
    """Crashes take every other place, in turn over the workloads and shapes; the other
    kinds take the places between, in turn: a budget that stops part-way (dev: 225 planned
    schedules) has tried each kind and each workload, not one kind's every point first."""
    for name in ("entity_rows_on_completion", "merged_batch_last_partition"):
        bug = PITFALLS[name]
        found = plan(bug.processor, bug.topology)
        assert found == plan(bug.processor, bug.topology)  # same processor, same order
        singles = [p for p in found.schedules if not p.pair]
        kinds = {p.faults[0] for p in singles}
        # the first is the crash after the whole volume; then crash, another kind, ...
        assert {p.faults[0] for p in singles[: 1 + 2 * len(kinds)]} == kinds, name
        crashes = [p for p in singles if p.faults == (Fault.CRASH,)]
        used = {p.point.workload for p in crashes}
        assert {p.point.workload for p in crashes[: 1 + len(used)]} == used, name


def test_a_stale_row_after_a_reorder_is_found_within_the_dev_budget() -> None:
    """The entity table's bug needs the third completion first (a reorder's second pick) at
    the first choice. A second pick at the point of a first one counted as a repeat, and the
    reorders came after every crash, machine crash and takeover: planned schedule 264, past
    the dev budget's 225, and the drawn phase missed it on every seed."""
    bug = PITFALLS["entity_rows_on_completion"]
    with pytest.raises(CounterexampleFound) as caught:
        explore(
            bug.processor,
            guarantee=bug.guarantee,
            topology=bug.topology,
            profile="dev",
            failures_dir=None,
        )
    failure = caught.value.failure
    assert failure.first_failure_example <= failure.coverage.systematic  # found systematically
    assert {a.kind for a in failure.verdict.anomalies} & bug.expected
    assert bug.twin is not None
    twin = PITFALLS[bug.twin]
    _, verdict = run_once(twin.processor, failure.schedule, twin.guarantee, topology=twin.topology)
    assert verdict.status is Status.VALID, verdict.summary()


def test_a_probe_names_the_calls_a_processor_makes() -> None:
    toy = TOYS["process_then_commit"]
    (one_partition, *_) = workloads(toy.topology)
    found = probe(toy.processor, toy.topology, one_partition)
    assert found.labels[:5] == ("offset-get", "read", "emit", "flush", "offset-put")
    assert found.labels.count("read") == 4  # three records, then it waits for a fourth
    assert not found.timers and not found.choices


def test_the_volume_workload_adds_only_the_points_of_paths_small_workloads_miss() -> None:
    small = len(workloads(Topology())) + len(shapes(Topology()))
    plain = TOYS["process_then_commit"]
    found = plan(plain.processor, plain.topology)
    at_volume = [p for p in found.points if p.workload == small]
    # one loop: nothing new but the end, and the crashes sampled inside the burst
    assert [p.label for p in at_volume if p.label == "idle"] == ["idle"]
    assert len(at_volume) <= 1 + BURST_SAMPLE
    assert found.schedules[0].point == at_volume[0]
    assert found.schedules[0].faults == (Fault.CRASH,)
    batched = PITFALLS["full_batch_flush_first"]
    found = plan(batched.processor, batched.topology)
    novel = [p for p in found.schedules[:3] if p.point.workload == small]
    assert len(novel) == 3  # the volume's novel paths come first
    at_volume = [p for p in found.points if p.workload == small]
    assert len(at_volume) > 1 + BURST_SAMPLE
    big = sum(s.count for s in found.schedules[0].schedule.steps if isinstance(s, Produce))
    assert big == VOLUME


def test_a_bug_on_a_full_batch_path_is_found_with_a_burst_as_big_as_a_batch() -> None:
    bug = PITFALLS["full_batch_offset_first"]
    with pytest.raises(CounterexampleFound) as caught:
        explore(bug.processor, guarantee=bug.guarantee, topology=bug.topology, failures_dir=None)
    steps = caught.value.failure.schedule.steps
    assert sum(s.count for s in steps if isinstance(s, Produce)) >= BIG_BATCH
    assert caught.value.failure.first_failure_example <= 10


def test_faults_narrow_the_plan() -> None:
    toy = TOYS["process_then_commit"]
    only_crashes = plan(toy.processor, toy.topology, ["crash"])
    assert {p.faults for p in only_crashes.schedules} == {
        (Fault.CRASH,),
        (Fault.CRASH, Fault.CRASH),
    }
    with pytest.raises(ConfigError, match="unknown fault 'meteor'"):
        plan(toy.processor, toy.topology, ["meteor"])


def test_coverage_counts_what_ran() -> None:
    toy = TOYS["process_then_commit"]
    found = plan(toy.processor, toy.topology)
    half = coverage(found, 10, drawn=5)
    assert half.systematic == 10 and half.drawn == 5 and half.schedules == 15
    assert half.single_faults[0] + half.pairs[0] == 10
    full = coverage(found, len(found.schedules))
    assert full.single_faults[0] == full.single_faults[1]
    assert full.pairs[0] == full.pairs[1] and full.points_hit == full.points
    assert full.summary().startswith(f"{full.points}/{full.points} fault points, ")
    assert full.to_json()["singles"]["crash"]["injected"] > 0
    assert Coverage(drawn=7).summary() == "7 schedules drawn (systematic phase off)"


def test_a_passing_exploration_reports_its_coverage_and_the_phase_can_be_turned_off() -> None:
    toy = TOYS["process_then_commit"]
    result = explore(toy.processor, guarantee=toy.guarantee, max_examples=40, failures_dir=None)
    assert result.coverage.systematic == 30 and result.coverage.drawn == 10
    assert "30 systematic, 10 drawn" in result.summary()
    off = explore(
        toy.processor, guarantee=toy.guarantee, max_examples=40, systematic=False, failures_dir=None
    )
    assert off.coverage == Coverage(drawn=40)
    with pytest.raises(ConfigError, match="systematic must be True or False"):
        explore(toy.processor, guarantee=toy.guarantee, systematic="yes")  # type: ignore[arg-type]


def test_a_bug_that_needs_a_tick_then_a_crash_is_found_without_naming_faults() -> None:
    toy = TOYS["timer_commits_read"]
    with pytest.raises(CounterexampleFound) as caught:
        explore(toy.processor, guarantee=toy.guarantee, max_examples=300, failures_dir=None)
    failure = caught.value.failure
    assert failure.first_failure_example <= failure.coverage.systematic
    assert "coverage: " in str(caught.value)


@pytest.mark.parametrize("variant", ["store-before-produce", "store-before-side-effect"])
def test_a_kafka_client_bug_that_needs_a_tick_then_a_crash_is_found_by_the_systematic_phase(
    variant: str,
) -> None:
    # the client doubles' calls are fault points named by the call (kafka.poll,
    # kafka.store_offsets, kafka.produce...), so the plan tries a tick and a crash at each
    # new one before repeating one: within the dev budget's systematic share
    from harness.catalogue.seeds import SCENARIOS

    scenario = next(s for s in SCENARIOS.values() for v in s.variants if v.name == variant)
    bug = scenario.variant(variant)
    with pytest.raises(CounterexampleFound) as caught:
        explore(
            bug.processor,
            guarantee=bug.guarantee,
            topology=bug.topology,
            faults=bug.scope,
            max_examples=300,
            failures_dir=None,
        )
    failure = caught.value.failure
    assert {a.kind for a in failure.verdict.anomalies} & bug.expected
    assert failure.first_failure_example <= failure.coverage.systematic
    fixed = next(v for v in scenario.variants if v.correct)
    _, verdict = run_once(
        fixed.processor, failure.schedule, fixed.guarantee, topology=fixed.topology
    )
    assert verdict.status is Status.VALID, verdict.summary()
