"""What a machine crash takes with it: the unsynced offset-store writes of that machine, only.

Every processor instance runs on a machine. The first instance runs on machine 1; an instance
started after a crash, an error or a ``Restart`` comes back on the machine of the instance it
replaces (a supervisor restarts it there); ``Takeover`` starts the new owner on a new machine
while the zombie keeps running on its old one. The offset store is shared by all of them, as
Kafka's committed offsets, a database or a shared volume are: a write is visible to every
instance as soon as it returns. A write made without sync is durable only once that machine
has flushed it, so a crash of *that* machine may lose it (LevelDB replays its log up to the
first write that did not reach the disk: a suffix of the machine's unsynced writes is lost).
A crash of one machine never takes back a write another machine made: that write was never
in the crashed machine's memory.

:class:`UnsyncedWrites` is the journal behind this: every unsynced write with its machine,
and for every key the value it had before the first journaled write. After a crash of machine
``m`` keeping its first ``keep`` unsynced writes, each key the lost writes touched takes the
value of the last surviving write to it (of any machine), else its value before them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal, final

from harness.log.dlsn import DLSN

__all__ = ["Key", "UnsyncedWrites", "Value"]

Key = tuple[Literal["offset", "state"], str]
"""An offset-store key: ``("offset", partition)`` or ``("state", raw state key)``."""
Value = DLSN | bytes | None
"""What a key holds: a DLSN for an offset, bytes for state, None for nothing."""


@dataclass(slots=True)
class _Write:
    machine: int
    values: dict[Key, Value]
    durable: bool = False


@final
class UnsyncedWrites:
    """The journal of unsynced offset-store writes, by machine (see the module docstring)."""

    __slots__ = ("_base", "_writes")

    def __init__(self) -> None:
        self._base: dict[Key, Value] = {}
        """Per key, its value before every write still in the journal."""
        self._writes: list[_Write] = []

    def __len__(self) -> int:
        """How many writes a machine crash could still lose."""
        return sum(1 for write in self._writes if not write.durable)

    def image(self) -> dict[Key, Value]:
        """Every key ever written through the journal, with the value it holds now."""
        return {key: self._value(key, durable_only=False) for key in sorted(self._base)}

    def record(
        self, machine: int, values: Mapping[Key, Value], current: Callable[[Key], Value]
    ) -> None:
        """Journal one atomic write by ``machine``; call it *before* the write, so that
        ``current(key)`` still returns the value the write replaces."""
        for key in values:
            if key not in self._base:
                self._base[key] = current(key)
        self._writes.append(_Write(machine, dict(values)))

    def crash(self, machine: int, keep: int) -> int:
        """Machine ``machine`` crashes: its first ``keep`` unsynced writes become durable,
        the rest are lost (their keys now hold what :meth:`image` says). Returns how many
        writes were lost."""
        mine = [w for w in self._writes if w.machine == machine and not w.durable]
        for write in mine[:keep]:
            write.durable = True
        lost = {id(write) for write in mine[keep:]}
        self._writes = [w for w in self._writes if id(w) not in lost]
        while self._writes and self._writes[0].durable:  # fold the durable head into the base
            self._base.update(self._writes.pop(0).values)
        return len(lost)

    def durable_value(self, key: Key, current: Value) -> Value:
        """What ``key`` would hold if every machine lost every unsynced write now
        (``current``: its value in the store, for a key the journal never saw)."""
        if key not in self._base:
            return current
        return self._value(key, durable_only=True)

    def _value(self, key: Key, *, durable_only: bool) -> Value:
        for write in reversed(self._writes):
            if key in write.values and (write.durable or not durable_only):
                return write.values[key]
        return self._base[key]
