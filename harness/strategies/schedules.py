"""Hypothesis strategies that draw schedules, and shrink them towards short, fault-free ones.

Each step is drawn as one alternative of a ``one_of``; Hypothesis shrinks by deleting steps
and moving towards earlier alternatives and smaller numbers, so the common, harmless steps
(``Run``, ``Produce``) come first and every fault's parameters shrink towards its mildest
form (a process crash, not a machine crash; ``keep=0``; one call).
"""

from __future__ import annotations

from collections.abc import Iterable

from hypothesis import strategies as st

from harness.errors import ConfigError
from harness.faults.kinds import Fault, fault_set
from harness.faults.schedule import (
    Crash,
    Duplicate,
    LoseAck,
    Produce,
    Reorder,
    Resend,
    Restart,
    Run,
    RunZombie,
    Schedule,
    Step,
    Takeover,
    Tick,
    Truncate,
)
from harness.sim.topology import Topology

__all__ = ["schedules", "steps"]


def steps(
    topology: Topology | None = None,
    faults: Iterable[Fault | str] | None = None,
    *,
    max_calls: int = 10,
    max_records: int = 4,
) -> st.SearchStrategy[Step]:
    """One schedule step, drawn among ``Run``, ``Produce`` and the enabled ``faults``."""
    topology = topology or Topology()
    enabled = fault_set(faults)
    partition = st.integers(0, topology.partitions - 1)
    run = st.builds(Run, calls=st.integers(1, max_calls))
    produce = st.builds(
        Produce,
        partition=partition,
        count=st.integers(1, max_records),
        ack=st.just(True)
        if Fault.PRODUCER_CRASH not in enabled
        else st.booleans().map(lambda crashed: not crashed),
    )
    # One alternative per kind of step, drawn alike (Hypothesis flattens nested one_ofs and
    # draws distinct branches uniformly): the fewer faults are enabled, the more often each
    # one comes, which is what finds a bug fast when ``faults`` names the ones it needs.
    options: list[st.SearchStrategy[Step]] = [run, produce]
    if Fault.CRASH in enabled or Fault.MACHINE_CRASH in enabled:
        machine = st.booleans() if Fault.MACHINE_CRASH in enabled else st.just(False)
        if Fault.CRASH not in enabled:
            machine = st.just(True)
        options.append(st.builds(Crash, machine=machine, keep=st.integers(0, 3)))
    if Fault.RESTART in enabled:
        options.append(st.just(Restart()))
    if Fault.DUPLICATE in enabled:
        options.append(st.just(Duplicate()))
    if Fault.LOSE_ACK in enabled:
        options.append(st.just(LoseAck()))
    if Fault.REORDER in enabled:
        options.append(st.builds(Reorder, pick=st.integers(1, 3)))
    if Fault.TICK in enabled:
        options.append(st.just(Tick()))
    if Fault.ZOMBIE in enabled:
        options.append(st.just(Takeover()))
        options.append(st.builds(RunZombie, calls=st.integers(1, max_calls)))
    if Fault.TRUNCATE in enabled:
        options.append(st.builds(Truncate, partition=partition, upto=st.integers(1, 12)))
    if Fault.RESEND in enabled and topology.upstream_resends:
        # only an at-least-once upstream resends: elsewhere the step would do nothing
        options.append(st.builds(Resend, partition=partition, count=st.integers(1, max_records)))
    return st.one_of(options)


def schedules(
    topology: Topology | None = None,
    faults: Iterable[Fault | str] | None = None,
    *,
    min_steps: int = 0,
    max_steps: int = 30,
    max_calls: int = 10,
    max_records: int = 4,
) -> st.SearchStrategy[Schedule]:
    """Schedules of ``min_steps..max_steps`` steps (then a drain) for ``topology``."""
    if type(min_steps) is not int or type(max_steps) is not int or not 0 <= min_steps <= max_steps:
        raise ConfigError(
            f"need 0 <= min_steps <= max_steps, got min_steps={min_steps!r}, "
            f"max_steps={max_steps!r}"
        )
    step = steps(topology, faults, max_calls=max_calls, max_records=max_records)
    return st.lists(step, min_size=min_steps, max_size=max_steps).map(
        lambda drawn: Schedule(tuple(drawn))
    )
