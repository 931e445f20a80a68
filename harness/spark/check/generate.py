"""Large histories with anomalies planted at known places, and the exact answer they must get.

:func:`generate_history` writes a Parquet history of a simple, correct processor (one
instance that reads every partition in order, emits one output per record and commits
after each block of records), then breaks it at chosen places: a record whose output never
shows (``lost``), an output shown twice (``duplicate``), an output of a record that was never
appended (``unexpected``), a table value one off (``count-mismatch``), two outputs of a
partition shown in swapped order (``nonmonotonic``), a read that is left out (``skip``), a
commit beyond what was read (``offset-ahead``), one below the stored offset
(``offset-regression``) and a reader that goes back to read part of a block again
(``nonmonotonic-poll``). The anomalies of the log itself (``inconsistent-offsets``,
``log-duplicate``) are not planted here: a run with them is judged on the driver by the
local rules, which the drawn histories of :mod:`harness.strategies.histories` exercise.
It returns a :class:`GeneratedHistory` that knows the exact counts
every checker must report (:meth:`GeneratedHistory.expected`), so a test or a benchmark can
check any size of history without a second checker.

The file is written in blocks through ``pyarrow.parquet.ParquetWriter`` with the columns,
types and header metadata of :func:`harness.history.io.write_parquet`, so small ones read
back with :func:`harness.history.io.read_history`; memory stays bounded by one block whatever
the record count. pyarrow is imported when a function is called, never at import time.

Layout (``P`` partitions ``p0`` ... ``p{P-1}``, record ``i`` in partition ``p{i % P}`` at
offset ``i // P`` with id ``"p{i % P}/{i // P}"``, key ``"k{i % K}"`` and value 1):
``start`` of process 1, a ``fetch`` per partition (no stored offset); then per block of
records their ``append`` events, their ``ack`` events, their ``read`` events, their ``emit``
events (output id ``i`` to the log sink ``out``) and one ``commit`` per partition; then
``drain``, one ``observe`` per output in record order, the table sink ``counts`` (count
aggregate) observed per key, and ``end`` with detail ``complete``.
"""

from __future__ import annotations

import importlib
import json
import os
import urllib.parse
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final, final

from harness._progress import advance
from harness.check.policy import breaks
from harness.check.verdict import AnomalyKind, Guarantee, Status
from harness.errors import ConfigError
from harness.history.events import EVENT_FIELDS, SCHEMA_VERSION
from harness.history.io import (
    PARQUET_METADATA_KEY,
    PARQUET_WRITER_OPTIONS,
    _pyarrow,
    history_arrow_schema,
)

__all__ = ["EVENTS_PER_RECORD", "GeneratedHistory", "Plan", "generate_history"]

EVENTS_PER_RECORD: Final = 5
"""Events each input record contributes (append, ack, read, emit, observe), besides the
per-block commits and the few fixed events."""


@final
@dataclass(frozen=True, slots=True)
class Plan:
    """How many anomalies of each kind to plant (each one is one occurrence).

    ``miscounted`` keys get a table value one above the truth (even-numbered ones, tolerated
    under at-least-once) or one below it (odd-numbered ones). ``reordered`` needs an ordered
    sink. Every planted anomaly gets its own block of records, so they never interact.
    """

    lost: int = 0
    duplicated: int = 0
    unexpected: int = 0
    miscounted: int = 0
    reordered: int = 0
    skipped: int = 0
    ahead: int = 0
    regressed: int = 0
    aborted: int = 0
    """Records whose (only) output was emitted in a transaction that aborted."""
    rewound: int = 0
    """Records the reader reads again, with the rest of their partition's block, right
    after reading the block, with no fetch or seek between (a ``nonmonotonic-poll``)."""

    def __post_init__(self) -> None:
        for name in self.__slots__:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(f"Plan.{name} must be an int >= 0, got {value!r}")

    @property
    def in_blocks(self) -> int:
        """Anomalies that need a block of their own (all but unexpected and miscounted)."""
        return (
            self.lost
            + self.duplicated
            + self.reordered
            + self.skipped
            + self.ahead
            + self.regressed
            + self.aborted
            + self.rewound
        )


@final
@dataclass(frozen=True, slots=True)
class GeneratedHistory:
    """A history written by :func:`generate_history` and the answer it must get.

    ``occurrences``: the exact count of every anomaly kind it holds (kinds with none are
    absent); ``planted``: the record ids (or ``"key k3"`` for table keys) planted per kind;
    ``stats``: the exact :attr:`~harness.check.verdict.Verdict.stats` of its verdict.
    """

    path: str
    run_id: str
    events: int
    records: int
    partitions: int
    keys: int
    occurrences: Mapping[AnomalyKind, int]
    planted: Mapping[AnomalyKind, tuple[str, ...]]
    stats: Mapping[str, int]
    overcounted: int = 0
    """How many of the count-mismatch occurrences are over-counts (tolerated under
    at-least-once)."""

    def expected(self, guarantee: Guarantee) -> tuple[Status, dict[str, int], dict[str, int]]:
        """``(status, failing, tolerated)``: the status and the anomaly counts by kind value
        (``{"lost": 2, ...}``) that a checker must return under ``guarantee``."""
        failing: dict[str, int] = {}
        tolerated: dict[str, int] = {}
        for kind in AnomalyKind:
            count = self.occurrences.get(kind, 0)
            over = self.overcounted if kind is AnomalyKind.COUNT_MISMATCH else 0
            for side, n in ((True, over), (False, count - over)):
                if n:
                    found = failing if breaks(kind, guarantee, over=side) else tolerated
                    found[kind.value] = found.get(kind.value, 0) + n
        return (Status.INVALID if failing else Status.VALID), failing, tolerated


@dataclass(slots=True)
class _Placement:
    """Which record (or key) carries which planted anomaly."""

    by_block: dict[int, tuple[AnomalyKind, int]] = field(default_factory=dict)
    """block number -> (kind, record index) for the anomalies placed in a block."""
    records: dict[AnomalyKind, list[int]] = field(default_factory=dict)


def generate_history(
    path: str | os.PathLike[str],
    *,
    records: int,
    partitions: int = 4,
    keys: int = 16,
    plan: Plan | None = None,
    ordered: bool = True,
    block: int | None = None,
    run_id: str | None = None,
    row_group_size: int = 1_000_000,
) -> GeneratedHistory:
    """Write a history of ``records`` input records to the Parquet file ``path`` (replaced if
    it exists; missing parent directories are made) with the anomalies of ``plan`` planted,
    and return what a checker must find.

    ``block`` is the number of records per partition between two commits (default: 1024,
    fewer for small histories); every planted anomaly needs a block of its own and the first
    and last blocks stay clean, so ``records`` must be at least ``partitions * block *
    (plan.in_blocks + 2)``. ``run_id`` defaults to ``<id>`` when the file sits in a
    ``run_id=<id>`` directory (the layout the checker reads), else ``"generated"``. Raises
    :class:`ConfigError` for a bad argument and
    :class:`MissingDependency` without pyarrow.
    """
    plan = Plan() if plan is None else plan
    if run_id is None:
        run_id = _run_id_of(path)
    block, blocks = _checked_blocks(plan, records, partitions, keys, ordered, block, row_group_size)
    pa, pq = _pyarrow("generating histories needs")
    names = [f"p{j}" for j in range(partitions)]
    header = _header(run_id, names, ordered=ordered, block=block, keys=keys, records=records)
    schema = history_arrow_schema().with_metadata(
        {PARQUET_METADATA_KEY: json.dumps(header, separators=(",", ":")).encode()}
    )
    layout = _Layout(
        pa=pa,
        pc=importlib.import_module("pyarrow.compute"),
        out=_Writer(pa, schema),
        records=records,
        partitions=partitions,
        keys=keys,
        block=block,
        plan=plan,
        placement=_place(plan, blocks=blocks, block=block, partitions=partitions),
        names=names,
    )
    target = os.fspath(path)
    _write_replacing(pq, target, schema, _tables(layout), row_group_size=row_group_size)
    return _answer(
        target,
        run_id,
        layout.out.next_index,
        records,
        partitions,
        keys,
        plan,
        layout.placement,
    )


def _run_id_of(path: str | os.PathLike[str]) -> str:
    """``<id>`` when ``path`` sits in a ``run_id=<id>`` directory, else ``"generated"``."""
    folder = os.path.basename(os.path.dirname(os.path.abspath(os.fspath(path))))
    run_id = urllib.parse.unquote(folder.partition("=")[2]) if folder.startswith("run_id=") else ""
    return run_id or "generated"


def _checked_blocks(
    plan: Plan,
    records: int,
    partitions: int,
    keys: int,
    ordered: bool,
    block: int | None,
    row_group_size: int,
) -> tuple[int, int]:
    """``(block, blocks)``: the records per partition between two commits and the number of
    blocks, once every argument of :func:`generate_history` is checked (:class:`ConfigError`
    names the first bad one)."""
    if not isinstance(plan, Plan):
        raise ConfigError(f"plan must be a Plan, got {plan!r}")
    for name, value, low in (
        ("records", records, 1),
        ("partitions", partitions, 1),
        ("keys", keys, 1),
        ("row_group_size", row_group_size, 1),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ConfigError(f"{name} must be an int >= {low}, got {value!r}")
    if block is None:
        block = max(4, min(1024, records // (partitions * (plan.in_blocks + 2))))
    if isinstance(block, bool) or not isinstance(block, int) or block < 4:
        raise ConfigError(f"block must be an int >= 4 (records per partition), got {block!r}")
    if plan.reordered and not ordered:
        raise ConfigError(
            f"plan.reordered = {plan.reordered} needs an ordered sink: pass ordered=True"
        )
    if plan.miscounted > keys or (plan.miscounted > 1 and records < keys):
        raise ConfigError(
            f"plan.miscounted = {plan.miscounted} needs at least that many keys (keys={keys}) "
            f"and at least one record per key (records={records})"
        )
    per_block = partitions * block
    blocks = -(-records // per_block)
    if blocks < plan.in_blocks + 2 or records < per_block * (plan.in_blocks + 2):
        raise ConfigError(
            f"records = {records} is too few for {plan.in_blocks} planted anomalies with "
            f"blocks of {block} records per partition over {partitions} partitions: need "
            f"at least {per_block * (plan.in_blocks + 2)} (or a smaller block)"
        )
    return block, blocks


def _header(
    run_id: str, names: list[str], *, ordered: bool, block: int, keys: int, records: int
) -> dict[str, Any]:
    """The history header (stored in the Parquet metadata) of a generated history."""
    return {
        "version": SCHEMA_VERSION,
        "run_id": run_id,
        "partitions": names,
        "sinks": {
            "counts": {"kind": "table", "ordered": False, "aggregate": "count"},
            "out": {"kind": "log", "ordered": ordered, "aggregate": None},
        },
        "extra": {
            "block": block,
            "generator": "harness.spark.check.generate",
            "keys": keys,
            "records": records,
        },
    }


def _write_replacing(
    pq: Any, target: str, schema: Any, tables: Iterator[Any], *, row_group_size: int
) -> None:
    """Write ``tables`` to a temporary file beside ``target`` (making missing parent
    directories), then put it in ``target``'s place; nothing is left behind on an error."""
    os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
    tmp = os.path.join(os.path.dirname(target) or ".", f".{os.path.basename(target)}.tmp")
    writer = pq.ParquetWriter(tmp, schema, **PARQUET_WRITER_OPTIONS)
    rows = 0
    try:
        for table in tables:
            writer.write_table(table, row_group_size=row_group_size)
            rows += table.num_rows
            advance("writing the history", rows, None)  # a meter (harness._progress) sees it
    except BaseException:
        writer.close()
        os.unlink(tmp)
        raise
    writer.close()
    os.replace(tmp, target)


def _place(plan: Plan, *, blocks: int, block: int, partitions: int) -> _Placement:
    """Spread the block-bound anomalies evenly over the inner blocks: the record in the middle
    of each chosen block, in a partition that rotates from one anomaly to the next."""
    placement = _Placement()
    kinds = (
        [AnomalyKind.LOST] * plan.lost
        + [AnomalyKind.DUPLICATE] * plan.duplicated
        + [AnomalyKind.NONMONOTONIC] * plan.reordered
        + [AnomalyKind.SKIP] * plan.skipped
        + [AnomalyKind.OFFSET_AHEAD] * plan.ahead
        + [AnomalyKind.OFFSET_REGRESSION] * plan.regressed
        + [AnomalyKind.ABORTED_READ] * plan.aborted
        + [AnomalyKind.NONMONOTONIC_POLL] * plan.rewound
    )
    inner = blocks - 2
    for slot, kind in enumerate(kinds):
        number = 1 + (slot * inner) // max(1, len(kinds))
        record = number * partitions * block + (block // 2 - 1) * partitions + slot % partitions
        placement.by_block[number] = (kind, record)
        placement.records.setdefault(kind, []).append(record)
    return placement


class _Writer:
    """Builds Arrow tables of history rows and numbers them."""

    def __init__(self, pa: Any, schema: Any) -> None:
        self.pa = pa
        self.schema = schema
        self.next_index = 0

    def table(self, length: int, columns: Mapping[str, Any]) -> Any:
        """A table of ``length`` rows: ``columns`` maps a field to an Arrow array, a scalar
        (repeated) or is absent (null); ``index`` is assigned here."""
        pa = self.pa
        arrays = []
        for name in EVENT_FIELDS:
            arrow_type = self.schema.field(name).type
            if name == "index":
                arrays.append(
                    pa.array(range(self.next_index, self.next_index + length), pa.int64())
                )
                continue
            value = columns.get(name)
            if isinstance(value, (pa.Array, pa.ChunkedArray)):
                arrays.append(value.cast(arrow_type))
            else:
                arrays.append(pa.repeat(pa.scalar(value, arrow_type), length))
        self.next_index += length
        return pa.Table.from_arrays(arrays, schema=self.schema)


def _remainder(pc: Any, values: Any, divisor: int) -> Any:
    """``values % divisor`` for non-negative integers (``pc.remainder`` needs pyarrow 16)."""
    return pc.subtract(values, pc.multiply(pc.divide(values, divisor), divisor))


@dataclass(frozen=True, slots=True)
class _Layout:
    """What the tables of one generated history are built from."""

    pa: Any
    pc: Any
    out: _Writer
    records: int
    partitions: int
    keys: int
    block: int
    plan: Plan
    placement: _Placement
    names: list[str]

    @property
    def name_array(self) -> Any:
        """The partition names as an Arrow array."""
        return self.pa.array(self.names, self.pa.string())

    def ids(self, start: int, stop: int) -> tuple[Any, Any, Any, Any, Any]:
        """record index, partition name, offset, record id and key of records start..stop."""
        pa, pc, partitions = self.pa, self.pc, self.partitions
        index = pa.array(range(start, stop), pa.int64())
        partition_no = (
            _remainder(pc, index, partitions) if partitions > 1 else pc.multiply(index, 0)
        )
        offset = pc.divide(index, partitions) if partitions > 1 else index
        partition = pc.take(self.name_array, partition_no)
        record_id = pc.binary_join_element_wise(partition, pc.cast(offset, pa.string()), "/")
        key_no = _remainder(pc, index, self.keys) if self.keys > 1 else pc.multiply(index, 0)
        key = pc.binary_join_element_wise("k", pc.cast(key_no, pa.string()), "")
        return index, partition, offset, record_id, key

    def spans(self) -> Iterator[tuple[int, int]]:
        """``(start, stop)`` of the records of each block, in order."""
        per_block = self.partitions * self.block
        for start in range(0, self.records, per_block):
            yield start, min(self.records, start + per_block)


def _tables(layout: _Layout) -> Iterator[Any]:
    """The history's events as Arrow tables, in order (see the module docstring)."""
    out = layout.out
    yield out.table(1, {"kind": "start", "process": 1})
    yield out.table(
        layout.partitions, {"kind": "fetch", "process": 1, "partition": layout.name_array}
    )
    for number, (start, stop) in enumerate(layout.spans()):
        yield from _block(layout, number, start, stop)
    yield out.table(1, {"kind": "drain"})
    yield from _observed_outputs(layout)
    yield _observed_counts(layout)
    yield out.table(1, {"kind": "end", "detail": "complete"})


def _block(layout: _Layout, number: int, start: int, stop: int) -> Iterator[Any]:
    """One block's appends, acks, reads, emits and commits, with its planted anomaly."""
    pa, pc, out = layout.pa, layout.pc, layout.out
    count = stop - start
    index, partition, offset, record_id, key = layout.ids(start, stop)
    common = {"partition": partition, "offset": offset, "record_id": record_id}
    yield out.table(count, {"kind": "append", **common, "key": key, "value": 1})
    yield out.table(count, {"kind": "ack", **common})
    planted = layout.placement.by_block.get(number)
    reads = {"kind": "read", "process": 1, **common}
    if planted is not None and planted[0] is AnomalyKind.SKIP:
        keep = pc.not_equal(index, planted[1])
        reads = {
            name: pc.filter(value, keep) if name in common else value
            for name, value in reads.items()
        }
        yield out.table(count - 1, reads)
    else:
        yield out.table(count, reads)
    if planted is not None and planted[0] is AnomalyKind.NONMONOTONIC_POLL:
        # the reader goes back to the planted record and reads its partition's block again
        again = pc.and_(
            pc.greater_equal(index, planted[1]),
            pc.equal(_remainder(pc, index, layout.partitions), planted[1] % layout.partitions)
            if layout.partitions > 1
            else pc.greater_equal(index, planted[1]),
        )
        reads = {
            name: pc.filter(value, again) if name in common else value
            for name, value in reads.items()
        }
        yield out.table(pc.sum(again.cast(pa.int64())).as_py(), reads)
    aborted = planted is not None and planted[0] is AnomalyKind.ABORTED_READ
    if aborted:  # the planted record's output is emitted in a transaction that aborts
        yield out.table(1, {"kind": "txn-begin", "process": 1, "txn": number})
    emits = {
        "kind": "emit",
        "process": 1,
        "sink": "out",
        "output_id": index,
        "record_id": record_id,
        "part": 0,
        "parts": 1,
    }
    if aborted:
        assert planted is not None
        emits["txn"] = pc.if_else(
            pc.equal(index, planted[1]),
            pa.scalar(number, pa.int64()),
            pa.scalar(None, pa.int64()),
        )
    yield out.table(count, emits)
    if aborted:
        yield out.table(1, {"kind": "txn-abort", "process": 1, "txn": number})
    yield from _commits(layout, planted, start, stop)


def _commits(
    layout: _Layout, planted: tuple[AnomalyKind, int] | None, start: int, stop: int
) -> Iterator[Any]:
    """A block's commits (the next offset of each partition after it), then the bad commit
    of a planted offset-ahead or offset-regression."""
    pa, out, names, partitions = layout.pa, layout.out, layout.names, layout.partitions
    commits = [(j, -(-(stop - j) // partitions)) for j in range(partitions) if start + j < stop]
    yield out.table(
        len(commits),
        {
            "kind": "commit",
            "process": 1,
            "partition": pa.array([names[j] for j, _ in commits], pa.string()),
            "offset": pa.array([c for _, c in commits], pa.int64()),
        },
    )
    if planted is not None and planted[0] in (
        AnomalyKind.OFFSET_AHEAD,
        AnomalyKind.OFFSET_REGRESSION,
    ):
        j = planted[1] % partitions
        committed = dict(commits)[j]
        bad = committed + 2 if planted[0] is AnomalyKind.OFFSET_AHEAD else committed - 1
        yield out.table(1, {"kind": "commit", "process": 1, "partition": names[j], "offset": bad})


def _observed_outputs(layout: _Layout) -> Iterator[Any]:
    """The log sink's observations: every output in record order but the lost ones, with
    the planted swaps, then the planted duplicates and the outputs of no record."""
    pa, pc, out, partitions = layout.pa, layout.pc, layout.out, layout.partitions
    lost = set(layout.placement.records.get(AnomalyKind.LOST, ()))
    swapped = set(layout.placement.records.get(AnomalyKind.NONMONOTONIC, ()))
    for start, stop in layout.spans():
        order = list(range(start, stop))
        for first in swapped:
            if start <= first < stop:
                at = first - start
                order[at], order[at + partitions] = order[at + partitions], order[at]
        order = [i for i in order if i not in lost]
        index = pa.array(order, pa.int64())
        offset = pc.divide(index, partitions)
        partition = pc.take(layout.name_array, _remainder(pc, index, partitions))
        record_id = pc.binary_join_element_wise(partition, pc.cast(offset, pa.string()), "/")
        yield _observed(out, len(order), index, record_id)
    for i in layout.placement.records.get(AnomalyKind.DUPLICATE, ()):
        yield _observed(out, 1, i, f"p{i % partitions}/{i // partitions}")
    for j in range(layout.plan.unexpected):
        yield _observed(out, 1, layout.records + j, f"ghost/{j}")


def _observed(out: _Writer, length: int, output_id: Any, record_id: Any) -> Any:
    """``length`` observations of outputs of the log sink ``out``."""
    return out.table(
        length,
        {
            "kind": "observe",
            "sink": "out",
            "output_id": output_id,
            "record_id": record_id,
            "part": 0,
        },
    )


def _observed_counts(layout: _Layout) -> Any:
    """The table sink's observation: each present key's count, planted ones off by one."""
    pa, records, keys = layout.pa, layout.records, layout.keys
    truth = [records // keys + (1 if k < records % keys else 0) for k in range(keys)]
    for position, k in enumerate(_miscounted_keys(layout.plan, keys)):
        truth[k] += 1 if position % 2 == 0 else -1
    present = [k for k in range(keys) if k < records]
    return layout.out.table(
        len(present),
        {
            "kind": "observe",
            "sink": "counts",
            "key": pa.array([f"k{k}" for k in present], pa.string()),
            "value": pa.array([truth[k] for k in present], pa.int64()),
        },
    )


def _miscounted_keys(plan: Plan, keys: int) -> list[int]:
    return [(n * keys) // max(1, plan.miscounted) for n in range(plan.miscounted)]


def _answer(
    path: str,
    run_id: str,
    events: int,
    records: int,
    partitions: int,
    keys: int,
    plan: Plan,
    placement: _Placement,
) -> GeneratedHistory:
    def record_id(i: int) -> str:
        return f"p{i % partitions}/{i // partitions}"

    planted: dict[AnomalyKind, tuple[str, ...]] = {
        kind: tuple(record_id(i) for i in indices) for kind, indices in placement.records.items()
    }
    if plan.unexpected:
        planted[AnomalyKind.UNEXPECTED] = tuple(f"ghost/{j}" for j in range(plan.unexpected))
    if plan.miscounted:
        planted[AnomalyKind.COUNT_MISMATCH] = tuple(
            f"key k{k}" for k in _miscounted_keys(plan, keys)
        )
    occurrences = {
        AnomalyKind.LOST: plan.lost,
        AnomalyKind.DUPLICATE: plan.duplicated,
        AnomalyKind.UNEXPECTED: plan.unexpected,
        AnomalyKind.ABORTED_READ: plan.aborted,
        AnomalyKind.COUNT_MISMATCH: plan.miscounted,
        AnomalyKind.NONMONOTONIC: plan.reordered,
        AnomalyKind.SKIP: plan.skipped,
        # a lost record's partition is committed past it: each loss is also an offset-ahead
        AnomalyKind.OFFSET_AHEAD: plan.ahead + plan.lost,
        AnomalyKind.OFFSET_REGRESSION: plan.regressed,
        AnomalyKind.NONMONOTONIC_POLL: plan.rewound,
    }
    return GeneratedHistory(
        path=path,
        run_id=run_id,
        events=events,
        records=records,
        partitions=partitions,
        keys=keys,
        occurrences=MappingProxyType({k: v for k, v in occurrences.items() if v}),
        planted=MappingProxyType(planted),
        stats=MappingProxyType(
            {
                "acknowledged": records,
                "appended": records,
                "duplicates": plan.duplicated,
                "events": events,
                "expected_effects": records,
                "lost": plan.lost,
                "observed_outputs": records - plan.lost + plan.duplicated + plan.unexpected,
            }
        ),
        overcounted=(plan.miscounted + 1) // 2,
    )
