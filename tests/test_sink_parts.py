"""What the checker wants of a record written to two log sinks: its effect in *some* log
sink, unless its emits declare ``parts``; then every declared part, wherever it is written.

The held-out practice's ``audit_after_offset`` (``bench/heldout``) writes each record to an
``out`` and an ``audit`` log and flushes the audit after storing the offset: a crash between
the two loses the audit row. Without ``parts`` the checker does not call that loss an anomaly
(the record's effect is in ``out``); declaring ``part=0`` in ``out`` and ``part=1`` in
``audit`` with ``parts=2`` says that both are wanted, and the same crash is ``lost``.
"""

from __future__ import annotations

import pytest

from harness import (
    Context,
    CounterexampleFound,
    Crash,
    Produce,
    Run,
    Schedule,
    Status,
    Topology,
    explore,
    log_sink,
    run_once,
)

P = "in-0"
AUDITED = Topology(sinks={"out": log_sink(), "audit": log_sink()})


def _audited(ctx: Context, *, audit_first: bool, parts: int) -> None:
    out, audit = ctx.output("out"), ctx.output("audit")
    for record in ctx.read(P, ctx.offsets.get(P)):
        out.emit(record, part=0, parts=parts)
        audit.emit(record, part=parts - 1, parts=parts)
        out.commit()
        if audit_first:
            audit.commit()
            ctx.offsets.put(P, record.next)
        else:
            ctx.offsets.put(P, record.next)
            audit.commit()


def audit_after_offset_undeclared(ctx: Context) -> None:
    """Both rows emitted as the record's one effect (part 0 of 1), audit flushed late."""
    _audited(ctx, audit_first=False, parts=1)


def audit_after_offset(ctx: Context) -> None:
    """Bug: two declared parts, the audit's flushed after the offset."""
    _audited(ctx, audit_first=False, parts=2)


def audit_before_offset(ctx: Context) -> None:
    """Correct: two declared parts, both flushed before the offset."""
    _audited(ctx, audit_first=True, parts=2)


# one record; the crash comes after the offset put, before the audit's flush
CRASH_BEFORE_AUDIT = Schedule((Produce(0, 1), Run(6), Crash()))


def test_without_parts_a_second_sink_losing_the_row_is_not_an_anomaly() -> None:
    history, verdict = run_once(
        audit_after_offset_undeclared, CRASH_BEFORE_AUDIT, "at-least-once", topology=AUDITED
    )
    assert verdict.status is Status.VALID, verdict.summary()
    labels = [e.kind.value for e in history.events]
    assert "crash" in labels  # the crash did happen, after the offset put


def test_declared_parts_make_the_audit_row_wanted_and_its_loss_found() -> None:
    _, verdict = run_once(audit_after_offset, CRASH_BEFORE_AUDIT, "at-least-once", topology=AUDITED)
    assert verdict.status is Status.INVALID
    assert "lost" in {a.kind.value for a in verdict.anomalies}
    with pytest.raises(CounterexampleFound):
        explore(
            audit_after_offset,
            guarantee="at-least-once",
            topology=AUDITED,
            max_examples=100,
            failures_dir=None,
        )


def test_declared_parts_both_flushed_before_the_offset_hold() -> None:
    _, verdict = run_once(
        audit_before_offset, CRASH_BEFORE_AUDIT, "at-least-once", topology=AUDITED
    )
    assert verdict.status is Status.VALID, verdict.summary()
    explore(
        audit_before_offset,
        guarantee="at-least-once",
        topology=AUDITED,
        max_examples=100,
        failures_dir=None,
    )
