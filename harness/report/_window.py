"""Which events a report draws: all of a small history; of a large one, the neighbourhood of
each witness event and the crash/restart skeleton, within a fixed budget.

A history can hold millions of events, a page a few thousand marks. Past :data:`FULL_EVENTS`
events, :func:`window` keeps the :data:`RADIUS` events either side of every event a witness
points at, and the *skeleton* (every start, crash, error, zombie, rollback, truncate, drain
and end; evenly sampled down to :data:`MAX_SKELETON` when there are more), never more than
:data:`MAX_SHOWN` events in all. It reads the history once; the result says what was left
out, so a report can say so.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from operator import attrgetter
from typing import Final, final

from harness.history.events import EventKind, History

__all__ = [
    "FULL_EVENTS",
    "MAX_SHOWN",
    "MAX_SKELETON",
    "OVERVIEW_BINS",
    "RADIUS",
    "SKELETON_KINDS",
    "Window",
    "window",
]

FULL_EVENTS: Final = 1500
"""Histories up to this many events are drawn whole."""
RADIUS: Final = 12
"""Events kept on each side of a witness event in a larger history."""
MAX_SKELETON: Final = 400
"""The most skeleton events kept (evenly sampled, those near a witness first)."""
MAX_SHOWN: Final = 2500
"""The most events a report draws, whatever the history's size."""
OVERVIEW_BINS: Final = 1000
"""Columns of the overview strip that stands for the whole run."""

_K = EventKind
SKELETON_KINDS: Final = frozenset(
    {_K.START, _K.CRASH, _K.ERROR, _K.ZOMBIE, _K.ROLLBACK, _K.TRUNCATE, _K.DRAIN, _K.END}
)
"""The events that give a run its shape: instances starting and dying, the drain, the end."""
_FAULT_KINDS: Final = frozenset({_K.CRASH, _K.ERROR, _K.ZOMBIE, _K.ROLLBACK, _K.TRUNCATE})


@final
@dataclass(frozen=True, slots=True)
class Window:
    """The events a report draws, and what it left out."""

    total: int
    """Events in the history."""
    shown: tuple[int, ...]
    """Indices of the events drawn, ascending."""
    capped: bool
    """Whether some events are left out (the history has more than :data:`FULL_EVENTS`)."""
    skeleton: int
    """Skeleton events in the history."""
    skeleton_shown: int
    """Skeleton events among :attr:`shown`."""
    radius: int
    """Events kept on each side of a witness event (smaller than :data:`RADIUS` when the
    witnesses alone would exceed the budget)."""
    fault_bins: frozenset[int] = frozenset()
    """Overview columns (of :data:`OVERVIEW_BINS`) holding a crash, error, zombie, rollback
    or truncate; empty for a history drawn whole."""
    start_bins: frozenset[int] = frozenset()
    """Overview columns holding an instance start."""

    def segments(self) -> list[tuple[int, int]]:
        """The shown indices as runs of consecutive events: ``[(first, last), ...]``."""
        runs: list[tuple[int, int]] = []
        for index in self.shown:
            if runs and runs[-1][1] == index - 1:
                runs[-1] = (runs[-1][0], index)
            else:
                runs.append((index, index))
        return runs


def _near(pointed: Iterable[int], radius: int, total: int) -> set[int]:
    found: set[int] = set()
    for index in pointed:
        found.update(range(max(0, index - radius), min(total, index + radius + 1)))
    return found


def _sample(indices: list[int], keep: int, must: set[int]) -> list[int]:
    if len(indices) <= keep:
        return indices
    chosen = [i for i in indices if i in must][:keep]
    room = keep - len(chosen)
    if room > 0:
        step = len(indices) / room
        chosen.extend(indices[int(k * step)] for k in range(room))
    return sorted(set(chosen))


def window(
    history: History,
    pointed: Iterable[int],
    *,
    full: int = FULL_EVENTS,
    radius: int = RADIUS,
    max_shown: int = MAX_SHOWN,
    max_skeleton: int = MAX_SKELETON,
) -> Window:
    """The events to draw of ``history``, whose witnesses point at ``pointed``."""
    events = history.events
    total = len(events)
    if total <= full:
        skeleton = sum(1 for e in events if e.kind in SKELETON_KINDS)
        return Window(total, tuple(range(total)), False, skeleton, skeleton, radius)
    witnesses = sorted({i for i in pointed if 0 <= i < total})
    # by identity of the kind: a history may hold millions of events (events[i].index == i)
    skeleton_ids = {id(kind) for kind in SKELETON_KINDS}
    kinds = map(id, map(attrgetter("kind"), events))
    lifecycle = [i for i, kind in enumerate(kinds) if kind in skeleton_ids]
    faults = {i * OVERVIEW_BINS // total for i in lifecycle if events[i].kind in _FAULT_KINDS}
    starts = {i * OVERVIEW_BINS // total for i in lifecycle if events[i].kind is _K.START}
    while radius > 0 and len(witnesses) * (2 * radius + 1) > max_shown // 2:
        radius //= 2
    near = _near(witnesses, radius, total)
    ends = {i for i in lifecycle if events[i].kind in (_K.DRAIN, _K.END)}
    kept_skeleton = _sample(
        lifecycle, min(max_skeleton, max(max_shown - len(near), 0)), near | ends
    )
    shown = sorted(near.union(kept_skeleton))[:max_shown]
    kept = sum(1 for i in shown if events[i].kind in SKELETON_KINDS)
    return Window(
        total,
        tuple(shown),
        True,
        len(lifecycle),
        kept,
        radius,
        frozenset(faults),
        frozenset(starts),
    )
