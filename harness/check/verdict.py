"""What a checker returns: a verdict, its anomalies and their witnesses, as plain values.

Every checker (local or Spark) speaks this one vocabulary, and reports only render it. All
values are frozen and convert to and from plain JSON dicts (``to_json`` / ``from_json``) with a
stable key order, enums written as their string values, so that two checkers' verdicts for the
same history compare equal as values and as JSON text.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final, final

from harness.errors import ConfigError

__all__ = [
    "EXIT_CODES",
    "LOG_KINDS",
    "MAX_WITNESSES",
    "Anomaly",
    "AnomalyKind",
    "Guarantee",
    "Status",
    "Verdict",
    "Witness",
    "exit_code",
    "guarantee_of",
]

MAX_WITNESSES: Final = 5
"""The most witnesses an :class:`Anomaly` carries; its ``count`` is always the exact total."""


class Guarantee(str, enum.Enum):
    """The delivery guarantee a history is checked against."""

    AT_LEAST_ONCE = "at-least-once"
    """Nothing acknowledged is lost; an effect may be applied more than once."""
    EXACTLY_ONCE = "exactly-once"
    """Nothing acknowledged is lost and no effect is applied more than once."""


def guarantee_of(value: object, where: str = "guarantee") -> Guarantee:
    """``value`` (a :class:`Guarantee` or its string, ``"exactly-once"``) as a
    :class:`Guarantee`; anything else is a :class:`~harness.settings.BadSetting` naming it,
    ``where`` it came from and the choices. Every door and checker parses guarantees here."""
    from harness.settings import GUARANTEES, BadSetting

    if isinstance(value, Guarantee):
        return value
    if isinstance(value, str) and value in GUARANTEES:
        return Guarantee(value)
    raise BadSetting(
        "guarantee", value, where, "unknown guarantee", f"choose one of {', '.join(GUARANTEES)}"
    )


class Status(str, enum.Enum):
    """The three-way outcome of a check. A history that cannot be checked is never VALID."""

    VALID = "valid"
    INVALID = "invalid"
    UNKNOWN = "unknown"

    @property
    def rank(self) -> int:
        """Badness: VALID (0) < UNKNOWN (1) < INVALID (2)."""
        return _STATUS_RANK[self]

    def merge(self, other: Status) -> Status:
        """The worse of ``self`` and ``other`` (INVALID > UNKNOWN > VALID)."""
        return self if self.rank >= other.rank else other

    @classmethod
    def worst(cls, statuses: Iterable[Status]) -> Status:
        """The worst of ``statuses``; VALID when there are none."""
        result = cls.VALID
        for status in statuses:
            result = result.merge(status)
        return result


_STATUS_RANK: Final[Mapping[Status, int]] = {
    Status.VALID: 0,
    Status.UNKNOWN: 1,
    Status.INVALID: 2,
}

EXIT_CODES: Final[Mapping[Status, int]] = MappingProxyType(
    {Status.VALID: 0, Status.INVALID: 1, Status.UNKNOWN: 2}
)
"""The one exit-code map of every door: 0 VALID, 1 INVALID, 2 UNKNOWN (and a usage error)."""


def exit_code(status: Status | str) -> int:
    """The exit code for ``status`` (a :class:`Status` or its value): :data:`EXIT_CODES`."""
    try:
        return EXIT_CODES[Status(status)]
    except ValueError:
        return EXIT_CODES[Status.UNKNOWN]  # fail closed: no unknown status passes


class AnomalyKind(str, enum.Enum):
    """The named ways a history can break a delivery guarantee (Jepsen's names where they apply)."""

    LOST = "lost"
    """An acknowledged input record's effect is not visible after the drain."""
    DUPLICATE = "duplicate"
    """An effect is visible more than once."""
    UNEXPECTED = "unexpected"
    """An output with no acknowledged input record behind it."""
    ABORTED_READ = "aborted-read"
    """An output written in an aborted transaction is visible."""
    COUNT_MISMATCH = "count-mismatch"
    """A table's per-key aggregate differs from the one the acknowledged input implies."""
    NONMONOTONIC = "nonmonotonic"
    """An ordered sink shows a partition's outputs out of the partition's order."""
    SKIP = "skip"
    """A reader jumped over records of a partition."""
    OFFSET_AHEAD = "offset-ahead"
    """A committed offset claims records are done that were not (read, or visible)."""
    OFFSET_REGRESSION = "offset-regression"
    """A committed offset went below the one stored before it."""
    STALE = "stale"
    """An entity table's final row of a key came from an earlier input than the key's last
    acknowledged one: a stale overwrite (a replay, or a reorder, written over newer data)."""
    INCONSISTENT_OFFSETS = "inconsistent-offsets"
    """Two records at one offset of a partition: acknowledged there, or read there."""
    LOG_DUPLICATE = "log-duplicate"
    """One record at two offsets of the log that no upstream resend explains: a producer's
    retry wrote it twice (a ``retried`` append), or a reader found it where it was never
    appended."""
    NONMONOTONIC_POLL = "nonmonotonic-poll"
    """A reader went back: a process read a partition at an offset at or below its previous
    read there, with no fetch or seek in between (it re-read without being told to)."""
    NONMONOTONIC_SEND = "nonmonotonic-send"
    """The log put a producer's sends out of order: a send to a partition, made after the
    same producer's earlier send there was acknowledged, landed at a lower offset."""


LOG_KINDS: Final = frozenset(
    {
        AnomalyKind.INCONSISTENT_OFFSETS,
        AnomalyKind.LOG_DUPLICATE,
        AnomalyKind.NONMONOTONIC_POLL,
        AnomalyKind.NONMONOTONIC_SEND,
    }
)
"""Kinds that say the log or its client broke their contract, not the processor: found in
recorded histories (a real broker's, a hand-written one), never caused by a processor under
the simulator, whose reference log and Kafka doubles keep that contract."""


def _check_str_tuple(name: str, value: object) -> None:
    if not isinstance(value, tuple) or not all(isinstance(item, str) for item in value):
        raise ConfigError(f"{name} must be a tuple of str, got {value!r}")


def _check_int_tuple(name: str, value: object) -> None:
    if not isinstance(value, tuple) or not all(
        isinstance(item, int) and not isinstance(item, bool) for item in value
    ):
        raise ConfigError(f"{name} must be a tuple of int, got {value!r}")


@final
@dataclass(frozen=True, slots=True)
class Witness:
    """One occurrence of an anomaly, small enough to read.

    ``record_ids``: the input records involved (in the order ``detail`` names them);
    ``events``: indices of the history events that show it, ascending; ``detail``: one
    sentence saying what those events show.
    """

    record_ids: tuple[str, ...]
    events: tuple[int, ...]
    detail: str

    def __post_init__(self) -> None:
        _check_str_tuple("Witness.record_ids", self.record_ids)
        _check_int_tuple("Witness.events", self.events)
        if any(a >= b for a, b in zip(self.events, self.events[1:], strict=False)):
            raise ConfigError(f"Witness.events must be strictly ascending, got {self.events!r}")
        if not isinstance(self.detail, str):
            raise ConfigError(f"Witness.detail must be a str, got {self.detail!r}")

    @property
    def sort_key(self) -> tuple[tuple[int, ...], tuple[str, ...], str]:
        """The order witnesses are chosen in: earliest events first, then smallest record ids."""
        return (self.events, self.record_ids, self.detail)

    def to_json(self) -> dict[str, Any]:
        return {
            "record_ids": list(self.record_ids),
            "events": list(self.events),
            "detail": self.detail,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Witness:
        return cls(
            record_ids=tuple(data["record_ids"]),
            events=tuple(data["events"]),
            detail=data["detail"],
        )

    def summary(self) -> str:
        """One line: records, events, detail."""
        records = ", ".join(self.record_ids) if self.record_ids else "-"
        events = ", ".join(str(index) for index in self.events) if self.events else "-"
        return f"records [{records}] events [{events}]: {self.detail}"


@final
@dataclass(frozen=True, slots=True)
class Anomaly:
    """All occurrences of one kind of anomaly in a history.

    ``count`` is the exact number of occurrences (what one occurrence is depends on the kind;
    see :mod:`harness.check.local`); ``witnesses`` are at most :data:`MAX_WITNESSES` of them,
    the first ones in :attr:`Witness.sort_key` order, so the same history always gives the
    same witnesses.
    """

    kind: AnomalyKind
    count: int
    witnesses: tuple[Witness, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.kind, AnomalyKind):
            raise ConfigError(f"Anomaly.kind must be an AnomalyKind, got {self.kind!r}")
        if isinstance(self.count, bool) or not isinstance(self.count, int) or self.count < 1:
            raise ConfigError(f"Anomaly.count must be a positive int, got {self.count!r}")
        if not isinstance(self.witnesses, tuple) or not all(
            isinstance(witness, Witness) for witness in self.witnesses
        ):
            raise ConfigError(
                f"Anomaly.witnesses must be a tuple of Witness, got {self.witnesses!r}"
            )
        if not 1 <= len(self.witnesses) <= min(self.count, MAX_WITNESSES):
            raise ConfigError(
                f"Anomaly {self.kind.value!r} with count {self.count} must carry between 1 and "
                f"{min(self.count, MAX_WITNESSES)} witnesses, got {len(self.witnesses)}"
            )

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind.value,
            "count": self.count,
            "witnesses": [witness.to_json() for witness in self.witnesses],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Anomaly:
        return cls(
            kind=AnomalyKind(data["kind"]),
            count=data["count"],
            witnesses=tuple(Witness.from_json(witness) for witness in data["witnesses"]),
        )

    def summary(self) -> str:
        """One line: kind, count and the first witness (``lost x3 (showing 1 of 3): ...``)."""
        of = f" (showing 1 of {self.count})" if self.count > 1 else ""
        return f"{self.kind.value} x{self.count}{of}: {self.witnesses[0].summary()}"


def _frozen_stats(stats: Mapping[str, int]) -> Mapping[str, int]:
    if not isinstance(stats, Mapping):
        raise ConfigError(f"Verdict.stats must be a mapping of str to int, got {stats!r}")
    for name, value in stats.items():
        if not isinstance(name, str) or isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(
                f"Verdict.stats must map str to int, got {name!r}: {value!r} in {stats!r}"
            )
    return MappingProxyType({name: stats[name] for name in sorted(stats)})


@final
@dataclass(frozen=True, slots=True)
class Verdict:
    """The answer of a checker for one history and one guarantee.

    Promises (checked on construction):

    * ``status`` is INVALID exactly when ``anomalies`` (the ones that break ``guarantee``) is
      non-empty; UNKNOWN exactly when there are no such anomalies and ``reasons`` (why the
      history could not be judged) is non-empty; VALID otherwise.
    * ``tolerated`` holds anomalies that ``guarantee`` allows (duplicates under at-least-once);
      they never change the status.
    * Anomalies appear in :class:`AnomalyKind` declaration order; ``stats`` (counts such as
      ``acknowledged``, ``observed_outputs``, ``duplicates``, ``lost``) is sorted by name.
    """

    status: Status
    guarantee: Guarantee
    anomalies: tuple[Anomaly, ...] = ()
    tolerated: tuple[Anomaly, ...] = ()
    reasons: tuple[str, ...] = ()
    stats: Mapping[str, int] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        if not isinstance(self.status, Status):
            raise ConfigError(f"Verdict.status must be a Status, got {self.status!r}")
        if not isinstance(self.guarantee, Guarantee):
            raise ConfigError(f"Verdict.guarantee must be a Guarantee, got {self.guarantee!r}")
        for name in ("anomalies", "tolerated"):
            value = getattr(self, name)
            if not isinstance(value, tuple) or not all(isinstance(a, Anomaly) for a in value):
                raise ConfigError(f"Verdict.{name} must be a tuple of Anomaly, got {value!r}")
        _check_str_tuple("Verdict.reasons", self.reasons)
        if self.anomalies:
            expected = Status.INVALID
        elif self.reasons:
            expected = Status.UNKNOWN
        else:
            expected = Status.VALID
        if self.status is not expected:
            raise ConfigError(
                f"Verdict.status {self.status.value!r} contradicts its contents "
                f"({len(self.anomalies)} anomalies, {len(self.reasons)} reasons): "
                f"it must be {expected.value!r}"
            )
        object.__setattr__(self, "stats", _frozen_stats(self.stats))

    @property
    def ok(self) -> bool:
        """True only for VALID: an UNKNOWN history never passes."""
        return self.status is Status.VALID

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status.value,
            "guarantee": self.guarantee.value,
            "anomalies": [anomaly.to_json() for anomaly in self.anomalies],
            "tolerated": [anomaly.to_json() for anomaly in self.tolerated],
            "reasons": list(self.reasons),
            "stats": dict(self.stats),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Verdict:
        return cls(
            status=Status(data["status"]),
            guarantee=Guarantee(data["guarantee"]),
            anomalies=tuple(Anomaly.from_json(a) for a in data.get("anomalies", ())),
            tolerated=tuple(Anomaly.from_json(a) for a in data.get("tolerated", ())),
            reasons=tuple(data.get("reasons", ())),
            stats=dict(data.get("stats") or {}),
        )

    def summary(self) -> str:
        """A few lines: the status, then one line per anomaly (tolerated ones marked), then
        one line per reason (``unknown because: ...`` when it is why the verdict is UNKNOWN;
        beside an INVALID verdict's anomalies a reason speaks for itself: ``processor error:
        ...``, ``flaky: ...``)."""
        lines = [f"{self.status.value.upper()} under {self.guarantee.value}"]
        lines.extend(f"  {anomaly.summary()}" for anomaly in self.anomalies)
        lines.extend(f"  tolerated {anomaly.summary()}" for anomaly in self.tolerated)
        because = "unknown because: " if self.status is Status.UNKNOWN else ""
        lines.extend(f"  {because}{reason}" for reason in self.reasons)
        return "\n".join(lines)
