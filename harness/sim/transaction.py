"""Transactions: Kafka's read-process-write, where outputs, state and input offsets commit
together (``Context.transaction``).

A transaction buffers its emits in the output logs' writers (a sink whose reader reads
uncommitted data sees each emit at once, and keeps it if the transaction aborts) and its
table puts in memory;
``commit`` makes all of them and the input offsets durable in one step (no fault point between
them), so a crash either keeps all of a transaction or none of it. What a crash interrupts is
recorded as ``txn-abort``: its buffered outputs go with the dead writer, as a transaction
coordinator aborts an open transaction of a dead producer. With ``fenced=True`` the transaction
is tied to the instance's producer epoch (:meth:`Context.claim`): once a newer instance claims,
this one's commit raises :class:`Fenced` and aborts, which is what stops a zombie.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, final

from harness.errors import ConfigError, Fenced
from harness.history.events import EventKind, Isolation
from harness.log.dlsn import DLSN

if TYPE_CHECKING:
    from harness.sim.context import Context, OutputLog
    from harness.sim.records import Delivery

__all__ = ["Transaction"]


@final
class Transaction:
    """One open transaction of one instance; use :meth:`Context.transaction` to begin it."""

    def __init__(self, ctx: Context, *, fenced: bool) -> None:
        inst = ctx._inst
        if inst.txn is not None:
            raise ConfigError(
                f"instance {inst.number} already has transaction {inst.txn} open; commit or "
                "abort it before beginning another"
            )
        world = ctx._sim.world
        if fenced and world.owner_epoch == 0:
            raise ConfigError(
                "a fenced transaction needs a producer epoch: call ctx.claim() first (Kafka's "
                "initTransactions), or use ctx.transaction(fenced=False)"
            )
        ctx._enter("transaction")
        self._ctx = ctx
        self.fenced = fenced
        self.id = world.next_txn
        world.next_txn += 1
        self._outputs: dict[str, OutputLog] = {}
        self._tables: dict[str, dict[str, int]] = {}
        self.open = True
        inst.txn = self.id
        world.record(EventKind.TXN_BEGIN, process=inst.number, txn=self.id)

    def _check_open(self) -> None:
        if not self.open:
            raise ConfigError(f"transaction {self.id} is already committed or aborted")

    def emit(
        self,
        sink: str,
        source: Delivery | str | None,
        *,
        key: str | None = None,
        value: int | None = None,
        part: int = 0,
        parts: int = 1,
    ) -> int:
        """Write one output to log sink ``sink`` as part of this transaction (see
        :meth:`OutputLog.emit`); a ``read_committed`` reader of the sink sees it only when
        the transaction commits, a ``read_uncommitted`` one at once (it reaches the log now,
        and stays there if the transaction aborts)."""
        self._check_open()
        ctx = self._ctx
        out = ctx.output(sink)
        ctx._enter("transaction.emit")
        self._outputs[sink] = out
        output_id = out._emit(source, key, value, part, parts, self.id)
        if ctx._sim.world.topology.sinks[sink].isolation is Isolation.READ_UNCOMMITTED:
            out._flush(retry=False)
        return output_id

    def get(self, table: str, key: str) -> int | None:
        """``key`` of table sink ``table`` as this transaction sees it (its own puts first)."""
        self._check_open()
        pending = self._tables.get(table, {})
        if key in pending:
            return pending[key]
        return self._ctx.table(table).get(key)

    def put(self, table: str, key: str, value: int) -> None:
        """Set ``key`` of table sink ``table`` when the transaction commits."""
        self._check_open()
        ctx = self._ctx
        ctx._check_table(table)
        if type(value) is not int or type(key) is not str:
            raise ConfigError(f"table {table!r} entries must be str -> int, got {key!r}: {value!r}")
        ctx._enter("transaction.put")
        self._tables.setdefault(table, {})[key] = value

    def commit(
        self,
        offsets: Mapping[str, DLSN] | None = None,
        *,
        state: Mapping[str, bytes | None] | None = None,
    ) -> None:
        """Commit the outputs, the table puts, ``offsets`` and ``state`` atomically."""
        self._check_open()
        ctx = self._ctx
        ctx._enter("transaction.commit")
        inst, world = ctx._inst, ctx._sim.world
        if self.fenced and world.owner_epoch != inst.number:
            self.abort()
            raise Fenced(
                f"transaction {self.id} of instance {inst.number} is fenced: instance "
                f"{world.owner_epoch} claimed the producer epoch after it"
            )
        try:
            for out in self._outputs.values():
                out._flush(retry=False)
        except Fenced:
            self.abort()
            raise
        ctx.offsets._write(offsets, self._tables, state, False)
        self.open = False
        inst.txn = None
        world.record(EventKind.TXN_COMMIT, process=inst.number, txn=self.id)

    def abort(self) -> None:
        """Drop everything this transaction wrote (its outputs never become visible)."""
        if not self.open:
            return
        ctx = self._ctx
        inst = ctx._inst
        for out in self._outputs.values():
            out._discard()
        self.open = False
        inst.txn = None
        ctx._sim.world.record(EventKind.TXN_ABORT, process=inst.number, txn=self.id)
