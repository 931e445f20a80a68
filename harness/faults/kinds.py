"""The fault vocabulary by kind: what a search may inject, named once for every front door.

A :class:`Fault` names a kind of fault the schedule can inject (a step kind, or a flag of
one: a producer crash is ``Produce(ack=False)``, a machine crash is ``Crash(machine=True)``).
Strategies, the systematic phase, the pytest marker, the CLI's ``--faults`` and the catalogue
all speak it; :func:`fault_set` turns a user's list (members or their string values) into a
frozen set, with an error naming the unknown value.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import Final

from harness._shown import shown
from harness._usage import did_you_mean
from harness.errors import ConfigError

__all__ = ["ALL_FAULTS", "Fault", "fault_set"]


class Fault(str, enum.Enum):
    """A kind of fault a search may inject (``Run`` and ``Produce`` are always drawn)."""

    CRASH = "crash"
    MACHINE_CRASH = "machine-crash"
    RESTART = "restart"
    PRODUCER_CRASH = "producer-crash"
    DUPLICATE = "duplicate"
    LOSE_ACK = "lose-ack"
    REORDER = "reorder"
    TICK = "tick"
    ZOMBIE = "zombie"
    TRUNCATE = "truncate"
    RESEND = "resend"
    """An at-least-once upstream appends records again under their ids (``Resend``); only a
    topology with ``upstream_resends=True`` has such an upstream."""


ALL_FAULTS: Final[frozenset[Fault]] = frozenset(Fault)


def fault_set(faults: Iterable[Fault | str] | None) -> frozenset[Fault]:
    """``faults`` as a frozen set of :class:`Fault` (None: every fault)."""
    if faults is None:
        return ALL_FAULTS
    if isinstance(faults, str):
        faults = [faults]
    chosen = set()
    for fault in faults:
        try:
            chosen.add(Fault(fault))
        except ValueError:
            names = sorted(f.value for f in Fault)
            raise ConfigError(
                f"unknown fault {shown(fault)}{did_you_mean(str(fault), names)}; choose from "
                f"{names}"
            ) from None
    return frozenset(chosen)
