"""Chosen input payloads: ``Topology(payloads=...)`` gives input record ``n`` the key and value
``payloads[n % len(payloads)]`` instead of the generated ones, for bugs that only some keys
or values show. Shown to change what a run records, to round-trip, to be refused when
malformed, and to catch a processor that only it can catch while its fixed twin passes.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from harness import (
    CounterexampleFound,
    Guarantee,
    Produce,
    Run,
    Schedule,
    Status,
    Topology,
    explore,
    run_once,
    table_sink,
)
from harness.catalogue.pitfalls import PITFALLS, ZEROES
from harness.catalogue.toys import process_then_commit
from harness.check import AnomalyKind
from harness.errors import ConfigError
from harness.history.events import EventKind

ALO, EO = Guarantee.AT_LEAST_ONCE, Guarantee.EXACTLY_ONCE
CHOSEN = Topology(payloads=(("", 0), ("é/ü", -7), ("k", 2**40)))


def test_records_take_the_chosen_payloads_in_turn() -> None:
    schedule = Schedule((Produce(0, 4), Run(30)))
    history, verdict = run_once(process_then_commit, schedule, ALO, topology=CHOSEN)
    appends = [(e.record_id, e.key, e.value) for e in history.events if e.kind is EventKind.APPEND]
    assert appends == [("r0", "", 0), ("r1", "é/ü", -7), ("r2", "k", 2**40), ("r3", "", 0)]
    emits = [(e.key, e.value) for e in history.events if e.kind is EventKind.EMIT]
    assert emits == [(key, value) for _, key, value in appends]  # the processor saw them
    assert verdict.status is Status.VALID, verdict.summary()


def test_chosen_values_are_what_an_aggregate_is_checked_against() -> None:
    sums = Topology(sinks={"sums": table_sink("sum")}, payloads=(("a", 0), ("a", 5), ("b", -2)))

    def sum_values(ctx: Any) -> None:
        table = ctx.table("sums")
        for record in ctx.read("in-0", ctx.offsets.get("in-0")):
            table.put(record.key, (table.get(record.key) or 0) + record.value + 1)  # off by one
            ctx.offsets.put("in-0", record.next)

    _, verdict = run_once(sum_values, Schedule((Produce(0, 3), Run(30))), EO, topology=sums)
    assert {a.kind for a in verdict.anomalies} == {AnomalyKind.COUNT_MISMATCH}
    assert "expected 5" in str(verdict.anomalies[0].witnesses[0].detail)


def test_payloads_round_trip_and_are_written_only_when_chosen() -> None:
    assert Topology.from_json(CHOSEN.to_json()) == CHOSEN
    assert CHOSEN.to_json()["payloads"] == [["", 0], ["é/ü", -7], ["k", 2**40]]
    assert "payloads" not in Topology().to_json()
    assert Topology(payloads=[["a", 1]]).payloads == (("a", 1),)  # lists, as JSON gives them


@pytest.mark.parametrize(
    ("payloads", "message"),
    [
        ("ab", "payloads must be a sequence of (key, value) pairs, got 'ab'"),
        ({"a": 1}, "payloads must be a sequence of (key, value) pairs"),
        ([("a", 1), ("b",)], "payloads[1] must be a (key, value) pair"),
        ([("a", True)], "payloads[0] must be a (key, value) pair"),
        ([(1, 1)], "payloads[0] must be a (key, value) pair"),
        ([("a", 1.5)], "payloads[0] must be a (key, value) pair"),
        ([("a", 2**63)], "payloads[0] must be a (key, value) pair"),
        ([("x" * 201, 1)], "payloads[0] must be a (key, value) pair of a str of at most 200"),
        ([("a", 1)] * 10_001, "lists 10001 pairs, more than 10000"),
    ],
)
def test_malformed_payloads_are_refused_with_what_is_wrong(payloads: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        Topology(payloads=payloads)
    with pytest.raises(ConfigError):
        Topology.from_json({"partitions": 1, "keys": 3, "sinks": {}, "payloads": payloads})


def test_a_zero_taken_for_an_unreadable_payload_needs_chosen_payloads_to_show() -> None:
    bug, twin = PITFALLS["skip_falsy_values"], PITFALLS["skip_poison_records"]
    assert bug.topology == twin.topology == ZEROES
    with pytest.raises(CounterexampleFound) as caught:
        explore(bug.processor, guarantee=ALO, topology=ZEROES, failures_dir=None)
    assert AnomalyKind.LOST in {a.kind for a in caught.value.failure.verdict.anomalies}
    generated = Topology(poison_every=ZEROES.poison_every)  # values 1 to 5: never a zero
    held = explore(bug.processor, guarantee=ALO, topology=generated, failures_dir=None)
    assert held.examples == 1000
