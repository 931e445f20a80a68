"""How long work tells a watcher how far it got, without knowing who watches.

The engine calls :func:`notify` with a :class:`Tick` after each schedule it runs; the command
line and the pytest plugin install a watcher with :func:`watching` around the call and draw
live progress from the ticks. Without a watcher :func:`notify` does nothing. Standard library
only: the engine imports this, the renderers live in ``harness.report.live``.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Final

__all__ = ["Stage", "Tick", "notify", "watching"]


class Stage(enum.Enum):
    """What an exploration is doing."""

    SEARCH = "search"
    """Drawing and running schedules."""
    SHRINK = "shrink"
    """A schedule failed: Hypothesis shrinks it, then the harness simplifies it."""


@dataclass(frozen=True, slots=True)
class Tick:
    """One schedule run."""

    stage: Stage
    schedules: int
    """Schedules run so far in this exploration (every search of it), shrinking included."""
    failures: int
    """Problems found so far: the distinct failures of earlier searches, and this search's
    own once one of its runs failed (its shrinking runs are not counted again)."""
    budget: int
    """The schedules this exploration may run: the earlier searches' and this search's
    ``max_examples`` (the shrink phase has no known end)."""


_WATCHER: Final[ContextVar[Callable[[Tick], None] | None]] = ContextVar(
    "harness_progress_watcher", default=None
)


def notify(tick: Tick) -> None:
    """Tell the current watcher, if any."""
    watcher = _WATCHER.get()
    if watcher is not None:
        watcher(tick)


@contextmanager
def watching(watcher: Callable[[Tick], None] | None) -> Iterator[None]:
    """Send the ticks of the work done inside the block to ``watcher`` (None: to nobody)."""
    token = _WATCHER.set(watcher)
    try:
        yield
    finally:
        _WATCHER.reset(token)
