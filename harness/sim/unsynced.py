"""What a machine crash takes with it: the unsynced offset-store writes of that machine, only.

Every processor instance runs on a machine. The first instance runs on machine 1; an instance
started after a crash, an error or a ``Restart`` comes back on the machine of the instance it
replaces (a supervisor restarts it there); ``Takeover`` starts the new owner on a new machine
while the zombie keeps running on its old one. The offset store is shared by all of them, as
Kafka's committed offsets, a database or a shared volume are. A write made without sync is
in the writing machine's volatile memory until it is flushed, so a crash of *that* machine
may lose it (LevelDB replays its log up to the first write that did not reach the disk: a
suffix of the machine's unsynced writes is lost). A crash of one machine never takes back a
write another machine made: that write was never in the crashed machine's memory.

What another machine can see has left the writer's memory: as with a network file system's
close-to-open consistency, a write is flushed to the shared store before another client can
read it. So when an instance reads a key whose latest write is another machine's unsynced
one, that write, and every earlier write of that machine, becomes durable. This keeps the
model coherent: no surviving instance ever holds, or builds a write on, a value a crash takes
back (a crash that did would be the store breaking its word, which no processor can survive).

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

    __slots__ = ("_base", "_latest", "_writes")

    def __init__(self) -> None:
        self._base: dict[Key, Value] = {}
        """Per key, its value before every write still in the journal."""
        self._writes: list[_Write] = []
        self._latest: dict[Key, _Write] = {}
        """Per key, the last write in the journal that touched it."""

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
        write = _Write(machine, dict(values))
        self._writes.append(write)
        for key in values:
            self._latest[key] = write

    def read(self, machine: int, key: Key) -> None:
        """An instance on ``machine`` reads ``key``: if another machine's unsynced write put
        its value there, that write and that machine's earlier ones become durable."""
        write = self._latest.get(key)
        if write is None or write.durable or write.machine == machine:
            return
        for earlier in self._writes:
            if earlier.machine == write.machine:
                earlier.durable = True
            if earlier is write:
                break
        self._compact()

    def crash(self, machine: int, keep: int) -> int:
        """Machine ``machine`` crashes: its first ``keep`` unsynced writes become durable,
        the rest are lost (their keys now hold what :meth:`image` says). Returns how many
        writes were lost."""
        mine = [w for w in self._writes if w.machine == machine and not w.durable]
        for write in mine[:keep]:
            write.durable = True
        lost = {id(write) for write in mine[keep:]}
        self._writes = [w for w in self._writes if id(w) not in lost]
        self._latest = {key: w for w in self._writes for key in w.values}
        self._compact()
        return len(lost)

    def _compact(self) -> None:
        """Fold the durable head of the journal into the base."""
        while self._writes and self._writes[0].durable:
            write = self._writes.pop(0)
            self._base.update(write.values)
            for key in write.values:
                if self._latest.get(key) is write:
                    del self._latest[key]

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
