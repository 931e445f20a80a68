"""How long work tells a watcher how far it got, without knowing who watches.

The engine calls :func:`notify` with a :class:`Tick` after each schedule it runs; the command
line and the pytest plugin install a watcher with :func:`watching` around the call and draw
live progress from the ticks. Long steps that are no search (reading or writing a history of
millions of events) call :func:`advance` with an :class:`Amount`, which goes to the meter
installed with :func:`metering`. Without a watcher (or meter) both do nothing. Standard
library only: the engine imports this, the renderers live in ``harness.report.live``.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Final, TypeVar

__all__ = ["Amount", "Stage", "Tick", "advance", "metering", "notify", "watching"]


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


def watching(watcher: Callable[[Tick], None] | None) -> AbstractContextManager[None]:
    """Send the ticks of the work done inside the block to ``watcher`` (None: to nobody)."""
    return _installed(_WATCHER, watcher)


@dataclass(frozen=True, slots=True)
class Amount:
    """How far a long step that is no search got: ``done`` of ``total`` ``units``."""

    what: str
    """What is being done: ``reading the history``, ``writing the history``."""
    done: int
    total: int | None
    """None: not known in advance."""
    units: str = "events"


_T = TypeVar("_T")

_METER: Final[ContextVar[Callable[[Amount], None] | None]] = ContextVar(
    "harness_progress_meter", default=None
)


def advance(what: str, done: int, total: int | None, units: str = "events") -> None:
    """Tell the current meter, if any, how far ``what`` got (call it every few thousand
    units: the meter draws, it does not throttle)."""
    meter = _METER.get()
    if meter is not None:
        meter(Amount(what, done, total, units))


def metering(meter: Callable[[Amount], None] | None) -> AbstractContextManager[None]:
    """Send the amounts of the steps done inside the block to ``meter`` (None: to nobody)."""
    return _installed(_METER, meter)


@contextmanager
def _installed(variable: ContextVar[_T], value: _T) -> Iterator[None]:
    """``variable`` set to ``value`` inside the block."""
    token = variable.set(value)
    try:
        yield
    finally:
        variable.reset(token)
