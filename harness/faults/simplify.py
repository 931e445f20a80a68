"""A last, domain-aware pass over a shrunk schedule.

Hypothesis shrinks the choices that drew a schedule: it deletes steps and lowers numbers, but
it cannot merge ``Run(1), Run(1)`` into ``Run(2)`` or move the producer's step before the runs
that waited for it. :func:`simplify` does that, greedily, and keeps a change only while the
schedule still fails the same way, so the failure report shows the story in its fewest steps.
Every accepted change makes the schedule strictly smaller in a well-founded order (fewer
steps, then smaller numbers, then producer steps earlier), so it always terminates.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Any, cast

from harness.faults.schedule import STEP_TYPES, Produce, Run, RunZombie, Schedule, Step

__all__ = ["simplify"]

_RANK = {cls: i for i, cls in enumerate([Produce, Run, *[c for c in STEP_TYPES.values()]])}


def _numbers(step: Step) -> int:
    return sum(
        getattr(step, f.name)
        for f in dataclasses.fields(step)
        if type(getattr(step, f.name)) is int
    )


def _key(steps: tuple[Step, ...]) -> tuple[int, int, tuple[int, ...]]:
    return (len(steps), sum(map(_numbers, steps)), tuple(_RANK[type(s)] for s in steps))


def _merged(a: Step, b: Step) -> Step | None:
    if isinstance(a, Run) and isinstance(b, Run):
        return Run(a.calls + b.calls)
    if isinstance(a, RunZombie) and isinstance(b, RunZombie):
        return RunZombie(a.calls + b.calls)
    if (
        isinstance(a, Produce)
        and isinstance(b, Produce)
        and (a.partition, a.ack) == (b.partition, b.ack)
    ):
        return Produce(a.partition, a.count + b.count, a.ack)
    return None


def _candidates(steps: tuple[Step, ...]) -> Iterator[tuple[Step, ...]]:
    n = len(steps)
    for i in reversed(range(n)):
        yield steps[:i] + steps[i + 1 :]
    for i in range(n - 1):
        merged = _merged(steps[i], steps[i + 1])
        if merged is not None:
            yield (*steps[:i], merged, *steps[i + 2 :])
    for i in range(1, n):
        if _RANK[type(steps[i])] < _RANK[type(steps[i - 1])]:
            yield (*steps[: i - 1], steps[i], steps[i - 1], *steps[i + 1 :])
    yield from _fewer_records(steps)
    for i, step in enumerate(steps):
        for f in dataclasses.fields(step):
            value = getattr(step, f.name)
            if type(value) is int and value > 0:
                lowest = 1 if f.name in ("calls", "count", "upto") else 0
                for smaller in sorted({lowest, value // 2, value - 1}):
                    if lowest <= smaller < value:
                        changed: Step = dataclasses.replace(cast(Any, step), **{f.name: smaller})
                        yield (*steps[:i], changed, *steps[i + 1 :])


def _fewer_records(steps: tuple[Step, ...]) -> Iterator[tuple[Step, ...]]:
    """Fewer records produced, and the first ``Run`` after them shortened by the calls the
    records taken out would have taken (its calls per record on average): lowering either
    alone moves a crash out of the window it fell in (a duplicate of one record showed as 53
    records and 160 calls)."""
    for i, step in enumerate(steps):
        if not isinstance(step, Produce) or step.count < 2:
            continue
        j = next((j for j in range(i + 1, len(steps)) if isinstance(steps[j], Run)), None)
        if j is None:
            continue
        run = cast(Run, steps[j])
        per = run.calls // step.count
        for count in sorted({1, step.count // 2}):
            calls = run.calls - (step.count - count) * per
            if per > 0 and count < step.count and calls >= 1:
                fewer = dataclasses.replace(step, count=count)
                yield (*steps[:i], fewer, *steps[i + 1 : j], Run(calls), *steps[j + 1 :])


def simplify(
    schedule: Schedule, fails: Callable[[Schedule], bool], *, budget: int = 400
) -> Schedule:
    """The smallest schedule reachable from ``schedule`` by deleting, merging, reordering
    and lowering steps while ``fails`` stays true, within ``budget`` evaluations."""
    best = schedule.steps
    tries = 0
    improved = True
    while improved and tries < budget:
        improved = False
        for candidate in _candidates(best):
            if _key(candidate) >= _key(best):
                continue
            tries += 1
            if fails(Schedule(candidate, drain=schedule.drain)):
                best = candidate
                improved = True
                break
            if tries >= budget:
                break
    return Schedule(best, drain=schedule.drain)
