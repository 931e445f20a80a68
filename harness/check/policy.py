"""The policy and the verdict assembly every checker shares.

A checker's job ends at *findings*: per anomaly kind (and, for ``count-mismatch``, per side:
a table value above or below the expected one) the exact number of occurrences and some
candidate witnesses. What follows is decided here, once, for the local and the Spark
checker alike:

* which kinds break which guarantee (:func:`breaks`; ``duplicate``, ``offset-regression``,
  ``log-duplicate``, ``nonmonotonic-poll`` and count-mismatch *above* the expected value are
  tolerated under at-least-once, every other finding breaks both guarantees, a
  ``nonmonotonic-send`` too: the log reordering a producer's sends gives no record twice);
* which witnesses are shown (:func:`best`: the first :data:`MAX_WITNESSES` in
  :attr:`Witness.sort_key` order) and how a witness is normalized (:func:`witness`);
* the verdict (:func:`assemble`, :func:`unknown`) and its stats (:data:`STAT_NAMES`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, final

from harness.check.verdict import (
    MAX_WITNESSES,
    Anomaly,
    AnomalyKind,
    Guarantee,
    Status,
    Verdict,
    Witness,
)
from harness.check.wording import NO_DRAIN_REASON
from harness.history.events import EndDetail

__all__ = [
    "STAT_NAMES",
    "TOLERATED_UNDER_AT_LEAST_ONCE",
    "Finding",
    "Side",
    "assemble",
    "best",
    "breaks",
    "empty_stats",
    "unknown",
    "witness",
]

TOLERATED_UNDER_AT_LEAST_ONCE: Final = frozenset(
    {
        AnomalyKind.DUPLICATE,
        AnomalyKind.OFFSET_REGRESSION,
        AnomalyKind.LOG_DUPLICATE,
        AnomalyKind.NONMONOTONIC_POLL,
    }
)
"""Kinds that break exactly-once only (plus count-mismatch above the expected value): an
effect twice, a stored offset moved back, a record twice in the log, a reader that re-read:
each may give a record more than once, which at-least-once allows."""

STAT_NAMES: Final = (
    "events",
    "appended",
    "acknowledged",
    "observed_outputs",
    "expected_effects",
    "duplicates",
    "lost",
)
"""The stats of every verdict (see :mod:`harness.check.local`)."""


Side = bool
"""For count-mismatch: True when the observed value is above the expected one."""


def breaks(kind: AnomalyKind, guarantee: Guarantee, *, over: Side = False) -> bool:
    """Whether an occurrence of ``kind`` breaks ``guarantee`` (``over``: count-mismatch with
    an observed value above the expected one)."""
    if guarantee is Guarantee.EXACTLY_ONCE:
        return True
    if kind is AnomalyKind.COUNT_MISMATCH:
        return not over
    return kind not in TOLERATED_UNDER_AT_LEAST_ONCE


def witness(records: Iterable[str], events: Iterable[int | None], detail: str) -> Witness:
    """A witness with its events deduplicated, sorted and without nulls."""
    return Witness(
        record_ids=tuple(records),
        events=tuple(sorted({event for event in events if event is not None})),
        detail=detail,
    )


def best(witnesses: Iterable[Witness]) -> tuple[Witness, ...]:
    """The first :data:`MAX_WITNESSES` of ``witnesses`` in :attr:`Witness.sort_key` order."""
    return tuple(sorted(witnesses, key=lambda w: w.sort_key)[:MAX_WITNESSES])


@final
@dataclass(frozen=True, slots=True)
class Finding:
    """What a checker found of one kind (and side): the exact ``count`` and candidate
    witnesses (any number; at least the first :data:`MAX_WITNESSES` by sort key)."""

    kind: AnomalyKind
    count: int
    witnesses: tuple[Witness, ...]
    over: Side = False


def _merged(kind: AnomalyKind, findings: Sequence[Finding]) -> Anomaly | None:
    count = sum(f.count for f in findings)
    if not count:
        return None
    return Anomaly(kind, count, best(w for f in findings for w in f.witnesses))


def empty_stats(events: int) -> dict[str, int]:
    """The stats of a history that could not be checked: only ``events`` is non-zero."""
    return {name: events if name == "events" else 0 for name in STAT_NAMES}


def unknown(guarantee: Guarantee, reasons: Sequence[str], events: int) -> Verdict:
    """The verdict of a history that fails validation: UNKNOWN, its ``reasons``."""
    return Verdict(
        status=Status.UNKNOWN,
        guarantee=guarantee,
        reasons=tuple(reasons),
        stats=empty_stats(events),
    )


def assemble(
    guarantee: Guarantee,
    findings: Iterable[Finding],
    *,
    end_detail: str | None,
    drained: bool,
    stats: Mapping[str, int],
) -> Verdict:
    """The verdict of a valid history: INVALID when a finding breaks ``guarantee``;
    otherwise UNKNOWN when the run is not complete (the reason is the ``end`` detail) or has
    no drain; otherwise VALID. Anomalies in :class:`AnomalyKind` order; a kind's findings
    on the same side of the policy are merged into one anomaly."""
    by_kind: dict[AnomalyKind, list[Finding]] = {}
    for finding in findings:
        by_kind.setdefault(finding.kind, []).append(finding)
    failing: list[Anomaly] = []
    tolerated: list[Anomaly] = []
    for kind in AnomalyKind:
        found = by_kind.get(kind, [])
        broken = _merged(kind, [f for f in found if breaks(kind, guarantee, over=f.over)])
        allowed = _merged(kind, [f for f in found if not breaks(kind, guarantee, over=f.over)])
        if broken is not None:
            failing.append(broken)
        if allowed is not None:
            tolerated.append(allowed)
    reasons: list[str] = []
    if not failing:
        if end_detail != EndDetail.COMPLETE.value:
            reasons.append(str(end_detail))
        if not drained:
            reasons.append(NO_DRAIN_REASON)
    status = Status.INVALID if failing else Status.UNKNOWN if reasons else Status.VALID
    return Verdict(
        status=status,
        guarantee=guarantee,
        anomalies=tuple(failing),
        tolerated=tuple(tolerated),
        reasons=tuple(reasons),
        stats=stats,
    )
