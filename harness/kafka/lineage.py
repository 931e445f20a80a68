"""Lineage: which input records an output message came from.

The checker judges effects keyed by input record id, so every message the application
produces to a checked topic must be *attributed* to the input record(s) it derives from. A
user-supplied function does it (e.g. decode the output value and read an id field); the
default works for pass-through and one-to-one transforms:

1. a ``harness-record-id`` header (input messages carry one; an application that copies the
   input's headers keeps it), else
2. the input record ids found in the output's value, then its key: the ids of the input
   values (``r<N>`` tokens, as in ``{"id": "r7", ...}``) searched in the bytes as they are,
   case-insensitively (an upper-cased copy still names ``R7``), and in their base64 decoding.

An output naming several ids is one effect of each (a batch). An output naming none is
*unattributable* and is reported as ``unexpected``: never ignored.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Final

from harness.effects._ids import ids_in

__all__ = [
    "RECORD_ID_HEADER",
    "Effect",
    "Lineage",
    "Produced",
    "attribute",
    "default_lineage",
    "describe_lineage",
]

RECORD_ID_HEADER: Final = "harness-record-id"


@dataclass(frozen=True, slots=True)
class Produced:
    """A message the application produced, as a lineage function sees it."""

    topic: str
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


@dataclass(frozen=True, slots=True)
class Effect:
    """One effect of an output: input ``record_id``, ``part`` of ``parts`` outputs it has."""

    record_id: str
    part: int = 0
    parts: int = 1


Lineage = Callable[[Produced], "str | Effect | Iterable[str | Effect] | None"]
"""A user lineage function: the record id(s) (or :class:`Effect`\\ s) behind an output;
``None`` or nothing when it cannot tell (the output is then ``unexpected``)."""


def default_lineage(produced: Produced) -> tuple[str, ...]:
    """The record ids behind ``produced`` by the default rules (module docstring)."""
    for name, raw in produced.headers:
        if name == RECORD_ID_HEADER and raw:
            return (raw.decode("utf-8", "replace"),)
    for data in (produced.value, produced.key):
        if data:
            ids = ids_in(data)
            if ids:
                return tuple(dict.fromkeys(ids))
    return ()


def attribute(lineage: Lineage | None, produced: Produced) -> tuple[Effect, ...]:
    """The effects of ``produced`` under ``lineage`` (None: the default rules)."""
    if lineage is None:
        return tuple(Effect(rid) for rid in default_lineage(produced))
    result = lineage(produced)
    if result is None:
        return ()
    items: Iterable[object] = (result,) if isinstance(result, (str, Effect)) else result
    effects = []
    for item in items:
        if isinstance(item, str):
            effects.append(Effect(item))
        elif isinstance(item, Effect):
            effects.append(item)
        else:
            from harness.errors import ConfigError

            raise ConfigError(
                f"the lineage function returned {item!r:.80} for an output to "
                f"{produced.topic!r}; return a record id (str), an Effect, a list of them, "
                "or None"
            )
    return tuple(effects)


def describe_lineage(lineage: Lineage | None) -> str:
    """How outputs are attributed, for reports."""
    if lineage is None:
        return (
            "default (a harness-record-id header, else input record ids found in the output "
            "value or key, as is or base64-decoded)"
        )
    name = getattr(lineage, "__qualname__", None) or repr(lineage)
    return f"user function {getattr(lineage, '__module__', '?')}:{name}"
