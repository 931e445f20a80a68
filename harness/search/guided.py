"""The drawn phase's guidance: how Hypothesis is steered once the systematic phase is done.

With :attr:`Guidance.TARGET` (the default) every drawn schedule reports to
``hypothesis.target()`` its *novelty*: how many (fault, fault point) pairs it reached that no
earlier schedule of the same search reached, where a pair is a fault the history shows (a
process or machine crash, a takeover, a truncation, a duplicate delivery) and the kind of the
processor's last call into the world before it (``read``, ``emit``, ``commit``, ``put``,
``txn-commit``..., ``start`` when it had made none since it started). Hypothesis's target
phase then spends part of the budget mutating the schedules that reached new pairs.
:attr:`Guidance.NONE` is the unguided search, kept as the benchmark's baseline.

Measured with ``bench/bench_detection.py --before --guidance none target`` (the drawn phase
alone, every buggy subject of the catalogue, default faults, dev budget), targeting finds
more bugs in more seeds; swarm selection of fault subsets (each schedule drawing from a
random half of the fault kinds) was measured too and lost on the bugs that need two kinds
(a crash and a reorder), so it is not offered. ``docs/engine.md`` has the figures.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Final

from harness._shown import shown
from harness.errors import ConfigError
from harness.history.events import AppendDetail, EventKind, History, ReadDetail

__all__ = [
    "DEFAULT_GUIDANCE",
    "Guidance",
    "Novelty",
    "current",
    "fault_points",
    "using",
]


class Guidance(str, enum.Enum):
    """How the drawn phase is steered."""

    NONE = "none"
    """Hypothesis's own generation, unguided."""
    TARGET = "target"
    """``hypothesis.target()`` on the novelty of the (fault, fault point) pairs reached."""


DEFAULT_GUIDANCE: Final = Guidance.TARGET
_CHOSEN: ContextVar[Guidance] = ContextVar("guidance", default=DEFAULT_GUIDANCE)


def current() -> Guidance:
    """The guidance ``explore`` uses here: :data:`DEFAULT_GUIDANCE` unless :func:`using`."""
    return _CHOSEN.get()


@contextmanager
def using(guidance: Guidance | str) -> Iterator[Guidance]:
    """Explore with ``guidance`` inside the block (the benchmark's comparison)."""
    try:
        chosen = Guidance(guidance)
    except ValueError:
        raise ConfigError(
            f"unknown guidance {shown(guidance)}; choose one of "
            f"{', '.join(g.value for g in Guidance)}"
        ) from None
    token = _CHOSEN.set(chosen)
    try:
        yield _CHOSEN.get()
    finally:
        _CHOSEN.reset(token)


_FAULT_EVENTS: Final = frozenset({EventKind.CRASH, EventKind.ZOMBIE, EventKind.TRUNCATE})
_NOT_CALLS: Final = frozenset({EventKind.APPEND, EventKind.ACK, EventKind.START, EventKind.FETCH})
"""Events that are not a call of the processor's (the producer's, a restart's). A machine
crash's ``rollback`` counts as the point the next fault follows, as it did when measured."""


def fault_points(history: History) -> frozenset[tuple[str, str]]:
    """The (fault, point) pairs a run reached before its drain: each crash (``process`` or
    ``machine``), takeover (``zombie``), truncation, duplicate delivery and upstream
    resend, with the kind
    of the event of the processor's last call before it (``start`` if none since a crash
    or takeover; ``rollback`` after a machine crash's lost writes)."""
    found = set()
    last = "start"
    for event in history.events:
        kind = event.kind
        if kind is EventKind.DRAIN:
            break
        if kind in _FAULT_EVENTS:
            fault = event.detail if kind is EventKind.CRASH and event.detail else kind.value
            found.add((fault, last))
            last = "start"
        elif kind is EventKind.READ and event.detail == ReadDetail.REDELIVERED.value:
            found.add(("duplicate", last))
            last = kind.value
        elif kind is EventKind.APPEND and event.detail == AppendDetail.RESENT.value:
            found.add(("resend", last))
        elif kind not in _NOT_CALLS:
            last = kind.value
    return frozenset(found)


class Novelty:
    """The (fault, point) pairs one search has reached so far."""

    def __init__(self) -> None:
        self.seen: set[tuple[str, str]] = set()

    def score(self, history: History) -> int:
        """How many pairs ``history`` reached that no earlier one did (and remember them)."""
        reached = fault_points(history)
        new = len(reached - self.seen)
        self.seen |= reached
        return new
