"""Every anomaly kind docs/engine.md documents is reachable in a simulated run (issue 18.6).

The docs once said that the simulator records no transactions and that ``aborted-read``
cannot occur in simulated runs; both were false. This test reads the anomaly table of
docs/engine.md and, for every kind in it, runs a processor under a schedule that must produce
that kind, so the documentation and the simulator cannot drift apart again: a kind documented
without a witness here, or a witness that stops producing its kind, fails.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.catalogue.pitfalls import ENTITIES, entity_rows_on_completion
from harness.catalogue.toys import (
    COUNTS,
    ORDERED,
    async_unordered_emitter,
    commit_before_processing,
    marker_in_output,
    no_dedup_transformer,
    off_by_one_resume,
    rewind_on_restart,
    unfenced_counter,
)
from harness.check import AnomalyKind, Guarantee, check
from harness.check.verdict import LOG_KINDS
from harness.faults import Crash, Duplicate, Produce, Reorder, Run, Schedule, Takeover
from harness.faults.schedule import RunZombie, Step
from harness.sim import Context, Processor, Topology, simulate

P = "in-0"
DOCS = Path(__file__).resolve().parents[1] / "docs" / "engine.md"


def leaks_its_transaction(ctx: Context) -> None:
    """Bug: flushes the output producer while a transaction is open (as a consumer that
    reads uncommitted data would see it), so a crash that aborts the transaction leaves its
    output visible."""
    out = ctx.output("out")
    for record in ctx.read(P, ctx.offsets.get(P)):
        txn = ctx.transaction(fenced=False)
        txn.emit("out", record)
        out.commit()
        txn.commit({P: record.next})


@dataclass(frozen=True, slots=True)
class Witness:
    processor: Processor
    guarantee: Guarantee
    steps: tuple[Step, ...]
    topology: Topology = Topology()  # noqa: RUF009 (frozen, so one shared default is safe)


ALO, EO = Guarantee.AT_LEAST_ONCE, Guarantee.EXACTLY_ONCE
WITNESSES: dict[str, Witness] = {
    "lost": Witness(commit_before_processing, ALO, (Produce(count=1), Run(3), Crash())),
    "duplicate": Witness(no_dedup_transformer, EO, (Produce(count=2), Duplicate(), Run(10))),
    "unexpected": Witness(marker_in_output, ALO, (Produce(count=2),)),
    "aborted-read": Witness(leaks_its_transaction, EO, (Produce(count=1), Run(5), Crash())),
    "count-mismatch": Witness(
        unfenced_counter,
        EO,
        (Produce(count=2), Run(2), Takeover(), Run(10), RunZombie(10)),
        COUNTS,
    ),
    "nonmonotonic": Witness(
        async_unordered_emitter, ALO, (Produce(count=3), Reorder(pick=1), Run(10)), ORDERED
    ),
    # the crash comes before the second record is read: the restart jumps a record nobody
    # read (one read before the crash is behind the reading frontier: lost, not skip)
    "skip": Witness(off_by_one_resume, ALO, (Produce(count=3), Run(5), Crash(), Run(10))),
    "offset-ahead": Witness(commit_before_processing, ALO, (Produce(count=1), Run(3), Crash())),
    "offset-regression": Witness(rewind_on_restart, EO, (Produce(count=2), Run(10), Crash())),
    "stale": Witness(
        entity_rows_on_completion,
        ALO,
        (Produce(count=3), Run(2), Reorder(pick=2), Run(20)),
        ENTITIES,
    ),
}
"""One processor and schedule per documented kind (the checker may report others too)."""


def documented_kinds() -> list[str]:
    """The anomaly kinds of the tables under "The checker: anomalies and verdicts", but the
    log's own (``LOG_KINDS``: no processor causes them, the reference log and the Kafka
    doubles keep that contract; tests/test_jepsen_histories.py shows each)."""
    text = DOCS.read_text(encoding="utf-8")
    section = text.split("## The checker: anomalies and verdicts", 1)[1].split("\n## ", 1)[0]
    kinds = re.findall(r"^\| `([a-z-]+)` \|", section, flags=re.MULTILINE)
    return [kind for kind in kinds if AnomalyKind(kind) not in LOG_KINDS]


def test_the_docs_list_the_logs_own_kinds_too() -> None:
    text = DOCS.read_text(encoding="utf-8")
    section = text.split("## The checker: anomalies and verdicts", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"^\| `([a-z-]+)` \|", section, flags=re.MULTILINE))
    assert listed == {kind.value for kind in AnomalyKind}


def test_the_docs_table_lists_the_kinds_this_test_knows() -> None:
    assert sorted(documented_kinds()) == sorted(WITNESSES)


@pytest.mark.parametrize("kind", documented_kinds())
def test_every_documented_anomaly_is_reachable(kind: str) -> None:
    witness = WITNESSES[kind]
    history = simulate(witness.processor, Schedule(witness.steps), topology=witness.topology)
    verdict = check(history, witness.guarantee)
    found = {a.kind.value for a in (*verdict.anomalies, *verdict.tolerated)}
    assert kind in found, verdict.summary()
