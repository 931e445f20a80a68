"""The systematic phase: every single fault at every fault point of small workloads, then a
bounded set of pairs; deterministic, no seed.

The small-scope idea behind bounded crash testing (CrashMonkey/B3, ALICE): most bugs show on
a few records with one or two faults placed exactly. :func:`probe` runs the processor without
faults on each small workload (a few records on one partition, a burst arriving while it runs,
two partitions when the topology has them, and enough records to fill a log segment for
retention) and records every fault point it reaches: each call into the world (read, emit,
flush, offset put/commit, table put, transaction step, claim, asynchronous completion), with
which ones made a nondeterministic choice, consulted a write acknowledgement or could see a
redelivery. It also probes a *volume* workload (:data:`VOLUME` records at once) and keeps
only its points whose context (the calls before and at them) no small workload reached: the
paths only volume takes (a full batch's flush, an every-n-th record's branch), plus the idle
point after it all, and crashes sampled evenly inside its burst. It probes the *shapes* real
traffic has (:func:`shapes`: a backlog produced while the processor is down, uneven, idle
and interleaved partitions) and keeps only their points that reach a context nothing else
did, with crashes and reorders there. :func:`plan` turns the probes into schedules:

* **singles**: one fault of each applicable kind before each point (the volume workload's
  new paths come first; a crash, a machine
  crash, a duplicate delivery, a lost acknowledgement, a reorder, a timer tick, a takeover
  followed by the new owner or by the zombie, a retention truncation, an upstream resend
  when the topology's upstream resends, a producer crash);
* **pairs**: a crash during recovery from a crash, a reorder or a tick followed by a crash,
  a truncation followed by a crash, an upstream resend before or after a crash (when the
  topology's upstream resends), a takeover whose zombie resumes after the new owner made
  some calls.

Equivalent schedules are planned once: a fault that only takes effect at the next call of
some kind (a duplicate at the next read, a lost acknowledgement at the next sink write, a
reorder at the next choice) is placed once per such call, and a fault that cannot apply (a
tick with no timer, a reorder with no choice) is not planned. Singles and pairs alternate,
each in order of novelty (a fault in a context already tried comes after every new one).
Among the singles of one novelty, crashes take every other place, the workloads and shapes
taking turns, and the other kinds take the places between, taking turns; pairs take turns
over their families. So a budget that stops part-way (the dev profile's) has tried every
fault kind, every workload and every pair family at their newest points, not one kind's
every point before the next kind's first.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import groupby, zip_longest
from types import FrameType, MappingProxyType
from typing import Final

import greenlet

from harness.faults.kinds import Fault, fault_set
from harness.faults.schedule import (
    Crash,
    Duplicate,
    LoseAck,
    Produce,
    Reorder,
    Resend,
    Run,
    RunZombie,
    Schedule,
    Step,
    Takeover,
    Tick,
    Truncate,
)
from harness.search.coverage import Coverage
from harness.sim.budget import TIME_RAN_OUT, RunBudget, run_budget
from harness.sim.simulator import Instance, Processor, Simulator
from harness.sim.topology import Topology
from harness.sim.world import Backend

__all__ = [
    "BACKLOG_MAX",
    "BURST_SAMPLE",
    "SHAPE_FAULTS",
    "VOLUME",
    "FaultPoint",
    "Plan",
    "Planned",
    "Probe",
    "coverage",
    "plan",
    "probe",
    "shapes",
    "volume",
    "workloads",
]

PROBE_CALLS: Final = 150
"""Calls a burst of a fault-free probe may make; a processor that never waits for input
has its fault points counted up to here."""
VOLUME: Final = 240
"""Records of the volume workload: enough to fill the batches, windows and every-n-th paths
(of up to about a hundred records) that the small workloads never reach."""
VOLUME_CALLS: Final = 20 * VOLUME
"""Calls the volume workload's probe may make."""
REST: Final = 100
"""Calls granted after an injected fault, before the drain (armed faults do not reach it)."""
PAIR_WINDOW: Final = 6
"""How many points after the first fault a pair's second fault is placed at."""
_MODULES: Final = frozenset({"harness.sim.context", "harness.sim.transaction"})
_LABELS: Final = {
    "Source.__next__": "read",
    "Source.poll": "poll",
    "Offsets.get": "offset-get",
    "Offsets.put": "offset-put",
    "Offsets.commit": "offset-commit",
    "Offsets.get_state": "state-get",
    "Table.get": "table-get",
    "Table.put": "table-put",
    "OutputLog.emit": "emit",
    "OutputLog.commit": "flush",
    "OutputLog.last": "output-last",
    "Context.claim": "claim",
    "Context._map_async": "async",
}
_READS: Final = frozenset({"read", "poll"})


@dataclass(frozen=True, slots=True)
class FaultPoint:
    """A place to inject a fault: before call ``call`` (0-based) of workload ``workload``,
    a call of kind ``label`` (``read``, ``emit``, ``flush``, ``offset-put``...)."""

    workload: int
    call: int
    label: str


@dataclass(frozen=True, slots=True)
class Probe:
    """What a fault-free run of one workload reached."""

    bursts: tuple[tuple[Step, ...], ...]
    """The workload: bursts of input, each produced once the previous one is processed (a
    burst of a shape may start with a crash: its input then arrives while nothing runs)."""
    calls: tuple[int, ...]
    """Calls made while processing each burst."""
    labels: tuple[str, ...]
    """The kind of each call, in order (all bursts)."""
    choices: frozenset[int]
    """Calls that made a nondeterministic choice among several options."""
    acks: frozenset[int]
    """Calls that wrote to a sink and waited for its acknowledgement."""
    timers: bool
    """Whether the processor registered periodic work."""
    ran_out: str | None = None
    """How its first run that ran out of time ended (a processor that hangs fault-free):
    its later runs got :data:`~harness.sim.budget.SHRINK_SECONDS` at most."""


@dataclass(frozen=True, slots=True)
class Planned:
    """One systematic schedule and the fault(s) it injects at which point."""

    schedule: Schedule
    faults: tuple[Fault, ...]
    point: FaultPoint
    context: tuple[str, ...] = ()
    """The calls around the fault(s), by kind: schedules with a context seen before come
    after every schedule with a new one."""

    @property
    def pair(self) -> bool:
        return len(self.faults) > 1


@dataclass(frozen=True, slots=True)
class Plan:
    """The systematic phase's schedules, singles first, and the points they cover."""

    points: tuple[FaultPoint, ...]
    schedules: tuple[Planned, ...]
    ran_out: str | None = None
    """How the first probe that ran out of time ended, if one did (the processor hangs
    without faults): the later probes got a second at most, and so should the search."""
    unplanned: tuple[tuple[Fault, str], ...] = ()
    """The enabled faults no schedule injects, each with why none could apply."""


class _Probing(Simulator):
    """A simulator that records, for the active instance's calls, what each call was."""

    def __init__(
        self,
        processor: Processor,
        topology: Topology,
        backend: Backend,
        budget: RunBudget | None = None,
    ) -> None:
        super().__init__(processor, topology, backend=backend, budget=budget)
        self.labels: list[str] = []
        self.choices: set[int] = set()
        self.acks: set[int] = set()
        self.timers = False

    def enter(self, inst: Instance, point: str) -> None:
        super().enter(inst, point)
        if inst is self.active and greenlet.getcurrent() is inst.greenlet:
            self.labels.append(_label(sys._getframe(1), point))
            self.timers = self.timers or bool(inst.timers)

    def choose(self, inst: Instance, options: int) -> int:
        if options > 1 and self.labels:
            self.choices.add(len(self.labels) - 1)
        return super().choose(inst, options)

    def take_lost_ack(self, inst: Instance) -> bool:
        if self.labels:
            self.acks.add(len(self.labels) - 1)
        return super().take_lost_ack(inst)


def _label(frame: FrameType | None, point: str) -> str:
    """The harness API method the processor called: the outermost simulator frame (else the
    point's own name, such as a Kafka client double's ``kafka.poll``)."""
    outer = None
    while frame is not None and frame.f_globals.get("__name__") in _MODULES:
        outer = frame
        frame = frame.f_back
    if outer is None:
        return point or "call"
    owner = outer.f_locals.get("self")
    name = f"{type(owner).__name__}.{outer.f_code.co_name}"
    return _LABELS.get(name, name.lower().replace("_", ""))


def workloads(topology: Topology) -> tuple[tuple[tuple[Produce, ...], ...], ...]:
    """The small workloads the systematic phase probes: three records on one partition;
    one record, then two more once it is processed; two records on each of two partitions
    (when the topology has them); and one more record than a log segment holds, so that
    retention has a whole segment to truncate."""
    found: list[tuple[tuple[Produce, ...], ...]] = [
        ((Produce(0, 3),),),
        ((Produce(0, 1),), (Produce(0, 2),)),
    ]
    if topology.partitions > 1:
        found.append(((Produce(0, 2), Produce(1, 2)),))
    found.append(((Produce(0, topology.segment_records + 1),),))
    return tuple(found)


BACKLOG_MAX: Final = 6
"""At most this many records wait for a restart in the backlog shape."""
SHAPE_FAULTS: Final = frozenset({Fault.CRASH, Fault.MACHINE_CRASH, Fault.REORDER})
"""The faults planned at a shape's points: what a shape adds is the state a crash leaves
(a backlog, an uneven batch) and the choices among partitions; the faults that act at the
next call of some kind are planned at the small workloads' points."""
BURST_SAMPLE: Final = 8
"""Crashes placed evenly across the volume workload's burst, whatever its contexts."""


def shapes(topology: Topology) -> tuple[tuple[tuple[Step, ...], ...], ...]:
    """The workload shapes real traffic has and the small workloads lack, probed after them
    and kept only where they reach a context the small workloads did not:

    * a **backlog produced while the processor is down**: two records processed, a crash,
      then more records than a log segment holds plus one, and than the topology has keys
      (so a key repeats in it), at most :data:`BACKLOG_MAX`, produced before the restart,
      which finds them all waiting;
    * with two partitions or more, **uneven and idle partitions** (three records on one and
      two on the other; two on the second while the first stays idle) and an
      **interleaving** (one record at a time, alternately on each partition).
    """
    backlog = min(max(topology.keys + 1, topology.segment_records + 2), BACKLOG_MAX)
    found: list[tuple[tuple[Step, ...], ...]] = [
        ((Produce(0, 2),), (Crash(), Produce(0, backlog))),
    ]
    if topology.partitions > 1:
        found.append(((Produce(0, 3), Produce(1, 2)),))
        found.append(((Produce(1, 2),),))
        found.append(tuple((Produce(i % 2, 1),) for i in range(4)))
    return tuple(found)


def volume(topology: Topology) -> tuple[tuple[Produce, ...], ...]:
    """The volume workload: :data:`VOLUME` records at once, over up to two partitions."""
    used = min(topology.partitions, 2)
    return (tuple(Produce(partition, VOLUME // used) for partition in range(used)),)


def probe(
    processor: Processor,
    topology: Topology,
    bursts: tuple[tuple[Step, ...], ...],
    *,
    backend: Backend = "memory",
    budget: RunBudget | None = None,
    calls_per_burst: int = PROBE_CALLS,
) -> Probe:
    """Run ``processor`` on ``bursts`` without faults and record the points it reaches (up
    to ``calls_per_burst`` calls a burst); ``budget`` bounds each probing run as it bounds
    the search's (a processor that hangs hangs its probe too, and must not hang the
    search)."""
    calls: list[int] = []
    steps: list[Step] = []
    ran_out: str | None = None
    for burst in bursts:
        steps += [*burst, Run(calls_per_burst)]
        sim = _Probing(processor, topology, backend, budget)
        try:
            sim.run(Schedule(tuple(steps), drain=False))
        finally:
            sim.close()
        calls.append(len(sim.labels) - sum(calls))
        if ran_out is None and sim.halted is not None and TIME_RAN_OUT in sim.halted:
            ran_out = sim.halted  # it hangs: the next bursts get a second, not the budget
            budget = run_budget(budget).for_shrinking(ran_out)
    return Probe(
        bursts=bursts,
        calls=tuple(calls),
        labels=tuple(sim.labels),
        choices=frozenset(sim.choices),
        acks=frozenset(sim.acks),
        timers=sim.timers,
        ran_out=ran_out,
    )


def plan(
    processor: Processor,
    topology: Topology,
    faults: Iterable[Fault | str] | None = None,
    *,
    backend: Backend = "memory",
    budget: RunBudget | None = None,
) -> Plan:
    """Probe every workload (each run within ``budget``), then plan every single fault at
    every point and the pairs."""
    enabled = fault_set(faults)
    probes: list[Probe] = []
    ran_out: str | None = None
    for workload in workloads(topology):
        probes.append(probe(processor, topology, workload, backend=backend, budget=budget))
        if ran_out is None and probes[-1].ran_out is not None:
            ran_out = probes[-1].ran_out  # it hangs: one probe spent the budget, not each
            budget = run_budget(budget).for_shrinking(ran_out)
    points: list[FaultPoint] = []
    singles: list[Planned] = []
    families: list[list[Planned]] = []
    for number, found in enumerate(probes):
        here = [
            FaultPoint(number, call, found.labels[call] if call < len(found.labels) else "idle")
            for call in range(len(found.labels) + 1)
        ]
        points += here
        singles += _singles(found, here, enabled, topology)
        families += _pairs(found, here, enabled, topology, first=number == 0)
    pairs = [p for row in zip_longest(*families) for p in row if p is not None]
    big = probe(
        processor,
        topology,
        volume(topology),
        backend=backend,
        budget=budget,
        calls_per_burst=VOLUME_CALLS,
    )
    if ran_out is None and big.ran_out is not None:
        ran_out = big.ran_out  # the shapes' probes get a second, not the budget
        budget = run_budget(budget).for_shrinking(ran_out)
    known = {_around(probes[point.workload], point.call) for point in points}
    steady = {(False, context) for context in known}
    for shape in shapes(topology):
        found = probe(processor, topology, shape, backend=backend, budget=budget)
        if ran_out is None and found.ran_out is not None:
            ran_out = found.ran_out
            budget = run_budget(budget).for_shrinking(ran_out)
        here = _shape_points(found, len(probes), steady)
        probes.append(found)
        points += here
        singles += _singles(found, here, enabled & SHAPE_FAULTS, topology)
    volume_points = _volume_points(big, len(probes), known)
    points += volume_points
    at_volume = _singles(big, volume_points, enabled, topology)
    # the volume's own paths, and a crash after it all, first; its other idle faults in turn
    first = [p for p in at_volume if p.point.label != "idle" or p.faults == (Fault.CRASH,)]
    singles += [p for p in at_volume if p not in first]
    sampled = _burst_sample(big, len(probes), volume_points, enabled, topology)
    points += sorted({p.point for p in sampled}, key=lambda point: point.call)
    singles += sampled
    ordered = sorted(singles, key=lambda p: _ORDER.index(p.faults[0]))
    schedules = tuple(_unique([*first, *_novel_first([*ordered, *pairs])]))
    used = {fault for p in schedules for fault in p.faults}
    unplanned = tuple(
        (fault, _why_unplanned(fault, [*probes, big], topology))
        for fault in _ORDER
        if fault in enabled and fault not in used
    )
    return Plan(tuple(points), schedules, ran_out, unplanned)


def _why_unplanned(fault: Fault, probes: Sequence[Probe], topology: Topology) -> str:
    """Why no systematic schedule injects ``fault``: what the fault needs that no probe of
    the processor showed (or the topology rules out)."""
    if not any(found.labels for found in probes):
        return "the processor made no call into the world on any workload"
    reasons = {
        Fault.MACHINE_CRASH: "offset-store writes are synced (offset_sync=True): a machine "
        "crash loses nothing a process crash does not",
        Fault.DUPLICATE: "the processor read no record, so none can be delivered again",
        Fault.LOSE_ACK: "no call waited for a write acknowledgement (out.commit(), "
        "Table.put/add, offsets.commit with increments=)",
        Fault.REORDER: "the processor never chose among several ready options (map_async, "
        "read_all over several ready partitions, ctx.choose)",
        Fault.TICK: "the processor registered no timer (ctx.on_timer)",
        Fault.TRUNCATE: "no workload fills more than one log segment "
        f"(Topology.segment_records={topology.segment_records}), so retention has no "
        "whole segment to remove",
        Fault.RESEND: "the topology's upstream does not resend (Topology(upstream_resends="
        "True) models one that does)",
        Fault.RESTART: "every planned crash is followed by a restart already; a restart "
        "with nothing crashed does nothing, so only the drawn phase draws it",
    }
    return reasons.get(fault, "no fault point of the processor's could take it")


def _recovering(found: Probe) -> list[bool]:
    """For each call of ``found`` (and the idle point after them), whether it was made after
    a restart that found input waiting (a burst that starts with a crash)."""
    flags: list[bool] = []
    for burst, calls in zip(found.bursts, found.calls, strict=True):
        flags += [bool(burst) and isinstance(burst[0], Crash)] * calls
    return [*flags, bool(flags) and flags[-1]]


def _shape_points(
    found: Probe, number: int, seen: set[tuple[bool, tuple[str, str]]]
) -> list[FaultPoint]:
    """The points of a shape (workload ``number``) that reach something new: the first of
    each context (the calls before and at it, and whether it is a recovery from a backlog)
    that no earlier workload or shape reached, and the idle point after it all. ``seen``
    grows with what this shape reached."""
    recovering = _recovering(found)
    calls = []
    for call in range(len(found.labels)):
        key = (recovering[call], _around(found, call))
        if key not in seen:
            seen.add(key)
            calls.append(call)
    calls.append(len(found.labels))
    return [
        FaultPoint(number, call, found.labels[call] if call < len(found.labels) else "idle")
        for call in calls
    ]


def _burst_sample(
    big: Probe,
    number: int,
    chosen: Sequence[FaultPoint],
    enabled: frozenset[Fault],
    topology: Topology,
) -> list[Planned]:
    """Crashes at :data:`BURST_SAMPLE` points spread evenly inside the volume workload's
    burst (workload ``number``), besides its novel points ``chosen``: the state a long
    burst leaves half-way (an open batch, a window, a lagging checkpoint) whatever calls
    lead there."""
    if Fault.CRASH not in enabled or not big.labels:
        return []
    taken = {point.call for point in chosen}
    step = max(1, len(big.labels) // (BURST_SAMPLE + 1))
    calls = sorted({c for c in range(step, len(big.labels), step)} - taken)[:BURST_SAMPLE]
    here = [FaultPoint(number, call, big.labels[call]) for call in calls]
    return _singles(big, here, frozenset({Fault.CRASH}), topology)


def _volume_points(big: Probe, number: int, known: set[tuple[str, str]]) -> list[FaultPoint]:
    """The points of the volume workload (number ``number``) whose context (the calls before
    and at it) no small workload reached, the first of each, and the idle point after it all
    (a fault there, and the drain, judge the whole volume): the paths only volume takes,
    such as a full batch's, and nothing the small workloads cover already."""
    first: dict[tuple[str, str], int] = {}
    for call in range(len(big.labels)):
        context = _around(big, call)
        if context not in known:
            first.setdefault(context, call)
    calls = sorted({*first.values(), len(big.labels)})
    return [
        FaultPoint(number, call, big.labels[call] if call < len(big.labels) else "idle")
        for call in calls
    ]


def _novel_first(planned: Iterable[Planned]) -> list[Planned]:
    """Singles and pairs alternately, each in order of novelty: a schedule whose faults met
    the same context (the calls around them, in the same workload, with the same reorder
    pick) before comes after every schedule with a new one; among the singles of one
    novelty, the fault kinds and the workloads take turns (:func:`_in_turn`).
    Measured on the catalogue (``bench/bench_detection.py``), this finds the bugs that need a
    pair without delaying the ones a single fault shows."""
    planned = list(planned)
    singles = _in_turn(_by_novelty([p for p in planned if not p.pair], picks=True))
    pairs = [p for _, p in _by_novelty([p for p in planned if p.pair], picks=False)]
    return [p for row in zip_longest(singles, pairs) for p in row if p is not None]


def _by_novelty(planned: Sequence[Planned], *, picks: bool) -> list[tuple[int, Planned]]:
    """(rank, schedule) in order of rank, stable: a schedule's rank is how many before it
    injected the same fault(s) in the same context of the same workload (and, with
    ``picks``, the same reorder picks: another pick is another order of completion, not a
    repeat)."""
    seen: dict[tuple[object, ...], int] = {}
    ranked = []
    for index, p in enumerate(planned):
        key: tuple[object, ...] = (p.faults, p.context, p.point.workload)
        if picks:
            key += (tuple(s.pick for s in p.schedule.steps if isinstance(s, Reorder)),)
        rank = seen.get(key, 0)
        seen[key] = rank + 1
        ranked.append((rank, index, p))
    return [(rank, p) for rank, _, p in sorted(ranked, key=lambda r: r[:2])]


def _in_turn(ranked: Sequence[tuple[int, Planned]]) -> list[Planned]:
    """The singles of each rank so that every fault kind and every workload gets early
    points, wherever the budget stops: crashes (the fault most bugs need) take every other
    place, the workloads taking turns (the small ones, the shapes, the volume burst's
    sample); the other kinds take the places between, taking turns in :data:`_ORDER`
    (each kind's own schedules in their planned order). Before, each kind came after the
    whole of the previous one, and a dev budget could end before the reorders began."""
    found: list[Planned] = []
    for _, group in groupby(ranked, key=lambda r: r[0]):
        same = [p for _, p in group]
        crashes = _turns([p for p in same if p.faults[0] is Fault.CRASH], _workload)
        others = _turns([p for p in same if p.faults[0] is not Fault.CRASH], _kind)
        found += [p for row in zip_longest(crashes, others) for p in row if p is not None]
    return found


def _workload(planned: Planned) -> object:
    return planned.point.workload


def _kind(planned: Planned) -> object:
    return planned.faults[0]


def _turns(planned: Sequence[Planned], key: Callable[[Planned], object]) -> list[Planned]:
    """``planned`` round-robin over its groups by ``key``, the groups in order of their
    first schedule, each group's schedules in order."""
    groups: dict[object, list[Planned]] = {}
    for p in planned:
        groups.setdefault(key(p), []).append(p)
    return [p for row in zip_longest(*groups.values()) for p in row if p is not None]


_ORDER: Final = (
    Fault.CRASH,
    Fault.DUPLICATE,
    Fault.LOSE_ACK,
    Fault.REORDER,
    Fault.TICK,
    Fault.ZOMBIE,
    Fault.MACHINE_CRASH,
    Fault.TRUNCATE,
    Fault.RESEND,
    Fault.PRODUCER_CRASH,
    Fault.RESTART,
)


def _unique(planned: Iterable[Planned]) -> Iterator[Planned]:
    seen: set[Schedule] = set()
    for p in planned:
        if p.schedule not in seen:
            seen.add(p.schedule)
            yield p


def _schedule(found: Probe, call: int, inject: Sequence[Step]) -> Schedule:
    """The workload run up to ``call``, then ``inject``, then the rest of the workload."""
    steps: list[Step] = []
    done = 0
    for i, (burst, calls) in enumerate(zip(found.bursts, found.calls, strict=True)):
        last = i == len(found.bursts) - 1
        if call < done + calls or last:
            steps += burst
            if call > done:
                steps.append(Run(call - done))
            steps += [*inject, Run(REST)]
            for later in found.bursts[i + 1 :]:
                steps += [*later, Run(REST)]
            return Schedule(tuple(steps))
        steps += [*burst, Run(calls)]
        done += calls
    raise AssertionError("a workload has at least one burst")  # pragma: no cover


def _next(calls: frozenset[int], start: int) -> int | None:
    after = [c for c in calls if c >= start]
    return min(after) if after else None


def _sizes(found: Probe) -> dict[int, int]:
    """How many records the workload produces into each partition it uses."""
    sizes: dict[int, int] = {}
    for burst in found.bursts:
        for produce in burst:
            if isinstance(produce, Produce):
                sizes[produce.partition] = sizes.get(produce.partition, 0) + produce.count
    return dict(sorted(sizes.items()))


def _truncates(found: Probe, topology: Topology) -> list[Step]:
    """Truncations that can remove a whole segment of some partition of the workload."""
    return [
        Truncate(partition, 10 * size)
        for partition, size in _sizes(found).items()
        if size > topology.segment_records
    ]


def _resends(found: Probe, topology: Topology) -> list[Step]:
    """The upstream's resends, when it has them: of every record produced so far into each
    partition the workload uses (the workload's size bounds it)."""
    if not topology.upstream_resends:
        return []
    return [Resend(partition, size) for partition, size in _sizes(found).items()]


def _single_steps(
    found: Probe, point: FaultPoint, enabled: frozenset[Fault], topology: Topology
) -> Iterator[tuple[Fault, Sequence[Step], int]]:
    """(fault, the steps injecting it, the call it takes effect at) for each applicable fault."""
    call = point.call
    reads = frozenset(i for i, label in enumerate(found.labels) if label in _READS)
    yield Fault.CRASH, (Crash(),), call
    if not topology.offset_sync:
        yield Fault.MACHINE_CRASH, (Crash(machine=True),), call
    effect = _next(reads, call)
    if effect is not None:
        yield Fault.DUPLICATE, (Duplicate(),), effect
    effect = _next(found.acks, call)
    if effect is not None:
        yield Fault.LOSE_ACK, (LoseAck(),), effect
    effect = _next(found.choices, call)
    if effect is not None:
        for pick in (1, 2):
            yield Fault.REORDER, (Reorder(pick),), effect * 10 + pick
    if found.timers:
        yield Fault.TICK, (Tick(),), call
    yield Fault.ZOMBIE, (Takeover(),), call
    yield Fault.ZOMBIE, (Takeover(), RunZombie(REST)), -call - 1
    for truncate in _truncates(found, topology):
        yield Fault.TRUNCATE, (truncate,), call
    for resend in _resends(found, topology):
        yield Fault.RESEND, (resend,), call
    if call == 0:
        yield Fault.PRODUCER_CRASH, (Produce(0, 1, ack=False),), call


def _singles(
    found: Probe, here: Sequence[FaultPoint], enabled: frozenset[Fault], topology: Topology
) -> list[Planned]:
    planned = []
    effects: set[tuple[Fault, int, Sequence[Step]]] = set()
    for point in here:
        for fault, inject, effect in _single_steps(found, point, enabled, topology):
            if fault not in enabled or (fault, effect, tuple(inject)) in effects:
                continue  # equivalent to one planned already: it takes effect at the same call
            effects.add((fault, effect, tuple(inject)))
            context = (*_around(found, point.call), type(inject[-1]).__name__)
            planned.append(Planned(_schedule(found, point.call, inject), (fault,), point, context))
    return planned


_Pair = tuple[tuple[Fault, ...], tuple[Step, ...], FaultPoint]


def _pairs(
    found: Probe,
    here: Sequence[FaultPoint],
    enabled: frozenset[Fault],
    topology: Topology,
    *,
    first: bool,
) -> list[list[Planned]]:
    """The pair families: each a list of schedules with two faults. Pairs are bounded to
    the first workload (three records), except a truncation and a crash, which need the
    workload that fills a segment."""
    window = range(1, PAIR_WINDOW + 1)
    crash: list[_Pair] = []
    tick: list[_Pair] = []
    reorder: list[_Pair] = []
    truncate: list[_Pair] = []
    resend: list[_Pair] = []
    zombie: list[_Pair] = []
    for point in here:
        at = point.call
        if Fault.CRASH not in enabled:
            break
        if Fault.TRUNCATE in enabled:
            truncate += [
                ((Fault.TRUNCATE, Fault.CRASH), (step, Crash()), point)
                for step in _truncates(found, topology)
            ]
        if not first:
            continue
        if Fault.RESEND in enabled:
            for step in _resends(found, topology):
                resend.append(((Fault.CRASH, Fault.RESEND), (Crash(), step), point))
                resend.append(((Fault.RESEND, Fault.CRASH), (step, Crash()), point))
        crash += [((Fault.CRASH, Fault.CRASH), (Crash(), Run(j), Crash()), point) for j in window]
        if found.timers and Fault.TICK in enabled:
            tick.append(((Fault.TICK, Fault.CRASH), (Tick(), Crash()), point))
            tick += [((Fault.TICK, Fault.CRASH), (Tick(), Run(j), Crash()), point) for j in window]
        choice = _next(found.choices, at)
        if choice is not None and Fault.REORDER in enabled and choice == at:
            reorder += [
                ((Fault.REORDER, Fault.CRASH), (Reorder(pick), Run(j), Crash()), point)
                for j in window
                for pick in (1, 2)
            ]
    if Fault.ZOMBIE in enabled and first:
        zombie = [
            ((Fault.ZOMBIE, Fault.ZOMBIE), (Takeover(), Run(j), RunZombie(REST)), point)
            for point in here
            for j in window
        ]
    return [
        [
            Planned(
                _schedule(found, point.call, steps),
                faults,
                point,
                (*_around(found, point.call), *_around(found, point.call + _calls(steps))),
            )
            for faults, steps, point in family
        ]
        for family in (crash, reorder, tick, truncate, resend, zombie)
        if family
    ]


def _calls(steps: Sequence[Step]) -> int:
    return sum(step.calls for step in steps if isinstance(step, Run))


def _around(found: Probe, call: int) -> tuple[str, str]:
    """The kinds of the call before and the call at ``call`` ("start"/"idle" at the ends)."""
    labels = ("start", *found.labels, "idle")
    last = len(labels) - 1
    return labels[min(call, last)], labels[min(call + 1, last)]


def coverage(found: Plan, ran: int, drawn: int = 0, reused: int = 0) -> Coverage:
    """The coverage of running the first ``ran`` schedules of ``found``, then ``drawn``;
    ``reused``: how many of those ``ran`` the earlier searches (for other problems) ran."""
    done = found.schedules[:ran]
    singles: dict[Fault, tuple[int, int]] = {}
    for index, planned in enumerate(found.schedules):
        if not planned.pair:
            run, total = singles.get(planned.faults[0], (0, 0))
            singles[planned.faults[0]] = (run + (index < ran), total + 1)
    pairs = sum(1 for p in found.schedules if p.pair)
    return Coverage(
        points=len(found.points),
        points_hit=len({p.point for p in done if not p.pair}),
        singles=MappingProxyType(singles),
        pairs=(sum(1 for p in done if p.pair), pairs),
        systematic=len(done) - reused,
        drawn=drawn,
        reused=reused,
        unplanned=MappingProxyType(dict(found.unplanned)),
    )
