"""What a processor expects of the world: input partitions, keys, sinks, store settings."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any, Final

from harness._shown import shown
from harness.errors import ConfigError
from harness.history.events import Aggregate, Isolation, SinkKind, SinkSpec
from harness.log.names import validate_log_name

__all__ = ["Topology", "log_sink", "table_sink"]


def log_sink(
    *,
    ordered: bool = False,
    upsert: bool = False,
    isolation: Isolation | str = Isolation.READ_COMMITTED,
) -> SinkSpec:
    """An output log; ``ordered=True`` also checks per-partition order of first outputs.

    ``upsert=True`` keeps one output per output key, the last written (a keyed table of rows,
    a compacted topic): what a reader finds after the drain, and so what the checker judges,
    is the surviving outputs, so rewriting a row is harmless and two records writing one key
    leave one of them ``lost``. Every output needs a key; an upsert sink has no order.

    ``isolation`` is how the sink's downstream reader reads transactional outputs:
    ``"read_committed"`` sees a transaction's outputs once it commits; ``"read_uncommitted"``
    (Kafka consumers' default) sees them as soon as they are written, so the outputs of a
    transaction that then aborts are seen (``aborted-read``).
    """
    levels = [level.value for level in Isolation]
    if isolation not in levels:
        raise ConfigError(
            f"log_sink isolation must be one of {', '.join(levels)}, got {shown(isolation)}"
        )
    for name, flag in (("ordered", ordered), ("upsert", upsert)):
        if type(flag) is not bool:
            raise ConfigError(f"log_sink {name} must be True or False, got {flag!r}")
    if ordered and upsert:
        raise ConfigError(
            "log_sink(ordered=True, upsert=True): an upsert sink keeps one row per key and "
            "has no order to check; drop one of them"
        )
    return SinkSpec(SinkKind.LOG, ordered=ordered, upsert=upsert, isolation=Isolation(isolation))


def entity_sink() -> SinkSpec:
    """An entity table: rows upserted by an entity key, last write wins.

    Written like an output log (``ctx.output(name).emit(record, key=..., value=...)``; a
    ``Delivery`` lends its own key, the entity's), each row carrying the input record it came
    from. After the drain the checker reads the final row of each key and wants the one of
    the key's **last acknowledged input record**, in its partition's order: an older one is
    ``stale`` (a replay or a reorder overwrote newer data), a missing one ``lost``, a row
    under a key that is not its record's ``unexpected``. Rewriting a row with the same data
    is harmless, as in any upsert; what breaks exactly-once or at-least-once here is a
    final state that is not the latest.
    """
    return SinkSpec(SinkKind.ENTITY)


def table_sink(aggregate: Aggregate | str | None = None) -> SinkSpec:
    """A key-value table; with ``aggregate`` ("count"/"sum") its final values are checked."""
    return SinkSpec(SinkKind.TABLE, aggregate=None if aggregate is None else Aggregate(aggregate))


_OUTPUT_KINDS: Final = frozenset({SinkKind.LOG, SinkKind.ENTITY})
MAX_PAYLOADS: Final = 10_000
"""How many chosen payloads a topology may list."""
_MAX_KEY: Final = 200
_INT64: Final = (-(2**63), 2**63 - 1)


def _payloads(payloads: object) -> tuple[tuple[str, int], ...]:
    """``payloads`` as a tuple of ``(key, value)`` pairs, or :class:`ConfigError` naming the
    first bad one (pairs may be lists, as JSON gives them)."""
    example = "e.g. payloads=(('k0', 1), ('k1', 0))"
    if isinstance(payloads, str | bytes | Mapping) or not isinstance(payloads, Sequence):
        raise ConfigError(
            f"Topology payloads must be a sequence of (key, value) pairs, got "
            f"{shown(payloads)}; {example}"
        )
    if len(payloads) > MAX_PAYLOADS:
        raise ConfigError(
            f"Topology payloads lists {len(payloads)} pairs, more than {MAX_PAYLOADS}; "
            "payloads repeat, so list one cycle of them"
        )
    pairs = []
    for number, pair in enumerate(payloads):
        if (
            isinstance(pair, str | bytes)
            or not isinstance(pair, Sequence)
            or len(pair) != 2
            or type(pair[0]) is not str
            or len(pair[0]) > _MAX_KEY
            or type(pair[1]) is not int
            or not _INT64[0] <= pair[1] <= _INT64[1]
        ):
            raise ConfigError(
                f"Topology payloads[{number}] must be a (key, value) pair of a str of at most "
                f"{_MAX_KEY} characters and a 64-bit int, got {shown(pair)}; {example}"
            )
        pairs.append((pair[0], pair[1]))
    return tuple(pairs)


def _default_sinks() -> Mapping[str, SinkSpec]:
    return MappingProxyType({"out": log_sink()})


def _names(names: object, partitions: object) -> tuple[str, ...]:
    """``names`` checked: none, or one distinct log name per partition, not ``out-...``."""
    if names == () or names is None:
        return ()
    if (
        not isinstance(names, (tuple, list))
        or len(names) != partitions
        or len(set(names)) != len(names)
        or not all(isinstance(n, str) and not n.startswith("out-") for n in names)
    ):
        raise ConfigError(
            f"Topology names must be {partitions!r} distinct partition names (not 'out-...'), "
            f"got {shown(names)}"
        )
    for name in names:
        validate_log_name(name)
    return tuple(names)


@dataclass(frozen=True, slots=True)
class Topology:
    """The world a processor runs in.

    ``partitions`` input logs named ``in-0``, ``in-1``, ...; input record ``n`` has key
    ``k{n % keys}``; ``sinks`` maps sink names to their specs (log sinks become output logs,
    table sinks live in the offset store's state, so they can commit atomically with offsets);
    ``offset_sync`` says whether offset-store writes are fsynced (then a machine crash loses
    nothing); ``segment_records`` is the input logs' segment size (small, so that retention
    has whole segments to truncate); ``poison_every`` = n > 0 makes every n-th produced record
    undeserializable (``Delivery.poison``: it must be skipped, and no output is expected);
    ``upstream_resends=True`` says the input's producer is at-least-once: after a lost
    acknowledgement it appends records again under the same record ids (the ``Resend``
    fault), and each record id must still have its effects once (exactly-once) or at least
    once, so the processor must deduplicate by ``Delivery.record_id``, not by position;
    ``payloads`` chooses the input: record ``n`` gets key and value
    ``payloads[n % len(payloads)]`` (pairs such as ``("k1", 0)``) instead of the generated
    ones, for bugs that only some keys or values show (a zero, an empty key);
    ``transactional_input=True`` says the input's producer is transactional, as a Kafka
    topic's can be: each ``Produce`` step is one upstream transaction whose commit marker
    takes the offset after its records, and a producer crash (``Produce(ack=False)``)
    leaves its records in the partition, aborted, followed by an abort marker; so the
    offsets in the history (and those the Kafka doubles show) have gaps, as Kafka's do.
    """

    partitions: int = 1
    keys: int = 3
    sinks: Mapping[str, SinkSpec] = field(default_factory=_default_sinks)
    offset_sync: bool = False
    segment_records: int = 4
    poison_every: int = 0
    upstream_resends: bool = False
    payloads: tuple[tuple[str, int], ...] = ()
    names: tuple[str, ...] = ()
    """The input partitions' names (default ``in-0``, ``in-1``, ...): a door whose system
    names its inputs (Kafka's ``orders[0]``) has the history and every report speak them."""
    transactional_input: bool = False

    def __post_init__(self) -> None:
        for name in ("partitions", "keys", "segment_records"):
            value = getattr(self, name)
            if type(value) is not int or not 1 <= value <= 10_000:
                raise ConfigError(
                    f"Topology {name} must be an int in [1, 10000], got {shown(value)}"
                )
        if type(self.poison_every) is not int or not 0 <= self.poison_every <= 10_000:
            raise ConfigError(
                "Topology poison_every must be an int in [0, 10000], got "
                f"{shown(self.poison_every)}"
            )
        for name in ("offset_sync", "upstream_resends", "transactional_input"):
            if type(getattr(self, name)) is not bool:
                raise ConfigError(
                    f"Topology {name} must be True or False, got {shown(getattr(self, name))}"
                )
        object.__setattr__(self, "payloads", _payloads(self.payloads))
        object.__setattr__(self, "names", _names(self.names, self.partitions))
        if not isinstance(self.sinks, Mapping) or not self.sinks:
            raise ConfigError(
                f"Topology sinks must be a non-empty mapping of name -> SinkSpec, got "
                f"{self.sinks!r}; e.g. {{'out': log_sink()}}"
            )
        for name, spec in self.sinks.items():
            if not isinstance(spec, SinkSpec):
                raise ConfigError(
                    f"sink {name!r} must be a SinkSpec (log_sink() or table_sink()), got {spec!r}"
                )
            if spec.upsert is not False and (
                spec.upsert is not True or spec.kind is not SinkKind.LOG or spec.ordered
            ):
                raise ConfigError(
                    f"sink {name!r}: upsert=True applies to an unordered log sink only "
                    f"(log_sink(upsert=True)), got {spec!r}"
                )
            if spec.isolation is not Isolation.READ_COMMITTED and (
                spec.isolation is not Isolation.READ_UNCOMMITTED or spec.kind is not SinkKind.LOG
            ):
                raise ConfigError(
                    f"sink {name!r}: isolation {shown(spec.isolation)} applies to a log sink "
                    f"only (log_sink(isolation='read_uncommitted')), got {spec!r}"
                )
            validate_log_name(f"out-{name}")
            if ":" in name:
                raise ConfigError(f"sink name {name!r} must not contain ':'")
        object.__setattr__(self, "sinks", MappingProxyType(dict(self.sinks)))

    @property
    def partition_names(self) -> tuple[str, ...]:
        return self.names or tuple(f"in-{i}" for i in range(self.partitions))

    def log_sinks(self) -> list[str]:
        """The sinks written through output logs: log sinks and entity tables."""
        return sorted(n for n, s in self.sinks.items() if s.kind in _OUTPUT_KINDS)

    def table_sinks(self) -> list[str]:
        return sorted(n for n, s in self.sinks.items() if s.kind is SinkKind.TABLE)

    def to_json(self) -> dict[str, Any]:
        """The topology as JSON; ``upstream_resends``, ``payloads``, ``names`` and
        ``transactional_input`` only when set, so
        that a topology without them has the form (and the run ids) it had before they
        existed."""
        data: dict[str, Any] = {
            "partitions": self.partitions,
            "keys": self.keys,
            "sinks": {n: s.to_json() for n, s in sorted(self.sinks.items())},
            "offset_sync": self.offset_sync,
            "segment_records": self.segment_records,
            "poison_every": self.poison_every,
        }
        if self.upstream_resends:
            data["upstream_resends"] = True
        if self.payloads:
            data["payloads"] = [list(pair) for pair in self.payloads]
        if self.names:
            data["names"] = list(self.names)
        if self.transactional_input:
            data["transactional_input"] = True
        return data

    @classmethod
    def from_json(cls, data: object, *, partial: bool = False) -> Topology:
        """Inverse of :meth:`to_json`; anything else raises :class:`ConfigError` naming it.

        With ``partial``, missing fields take the defaults of ``Topology()`` (for a topology
        typed on the command line, such as ``{"partitions": 2}``).
        """
        if partial and isinstance(data, Mapping):
            data = {**Topology().to_json(), **data}
        if not isinstance(data, Mapping):
            raise ConfigError(
                f"a topology is a JSON object such as {{'partitions': 2, 'keys': 3, 'sinks': "
                f"{{'out': {{'kind': 'log'}}}}}}, got {type(data).__name__} {shown(data)}"
            )
        known = [f.name for f in fields(cls)]
        unknown = sorted(str(key) for key in set(data) - set(known))
        if unknown:
            raise ConfigError(
                f"unknown topology key {shown(unknown[0])}; the keys are {', '.join(known)}"
            )
        missing = [key for key in ("partitions", "keys", "sinks") if key not in data]
        if missing:
            raise ConfigError(
                f"the topology has no {missing[0]!r} key; the keys are {', '.join(known)}"
            )
        sinks = data.get("sinks")
        if not isinstance(sinks, Mapping):
            raise ConfigError(
                f"topology 'sinks' must be an object of name -> sink such as {{'out': "
                f"{{'kind': 'log'}}}}, got {shown(sinks)}"
            )
        for name, spec in sinks.items():
            if (
                not isinstance(spec, Mapping)
                or not set(spec) <= {"kind", "ordered", "aggregate", "upsert", "isolation"}
                or type(spec.get("ordered", False)) is not bool
                or type(spec.get("upsert", False)) is not bool
            ):
                raise ConfigError(
                    f"topology sink {shown(name)} must be an object such as {{'kind': 'log', "
                    f"'ordered': false}} or {{'kind': 'table', 'aggregate': 'count'}}, got "
                    f"{shown(spec)}"
                )
        try:
            return cls(
                partitions=data["partitions"],
                keys=data["keys"],
                sinks={n: SinkSpec.from_json(s) for n, s in sinks.items()},
                offset_sync=data.get("offset_sync", False),
                segment_records=data.get("segment_records", 4),
                poison_every=data.get("poison_every", 0),
                upstream_resends=data.get("upstream_resends", False),
                payloads=data.get("payloads", ()),
                names=tuple(data.get("names", ())),
                transactional_input=data.get("transactional_input", False),
            )
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, ConfigError):
                raise
            detail = (
                f"no field {shown(exc.args[0])}"
                if isinstance(exc, KeyError)
                else f"{type(exc).__name__}: {shown(str(exc))}"
            )
            raise ConfigError(f"bad topology {shown(data)}: {detail}") from None
