"""What the input records look like to the application: templates, samples, strategies.

The harness names input records ``r<n>`` and gives each a key ``k<m>`` and a small integer
value; an *encoder* turns those into the message's key and value bytes. The record id always
travels in the ``harness-record-id`` header too, so attributing outputs never depends on the
payload's shape. Besides :func:`~harness.kafka.json_values` (the default,
``{"id": "r7", "key": "k1", "value": 3}``) and :func:`~harness.kafka.text_values`:

* :func:`template` — the value (and key) from a text template with placeholders ``{id}``
  (``r7``), ``{n}`` (``7``), ``{key}`` (``k1``) and ``{value}`` (``3``); other braces are
  kept as they are, so a JSON template needs no escaping:
  ``template('{"order_id": {n}, "customer": "{key}", "amount": {value}}')``;
* :func:`sample_file` — record ``n`` gets line ``n mod L`` of a JSON-lines file of ``L`` real
  messages (placeholders in them are filled in too);
* :func:`from_strategy` — record ``n`` gets example ``n mod count`` of a Hypothesis strategy,
  drawn once, deterministically, when the encoder is made (bytes as they are, a string as
  UTF-8, anything else as JSON).

Each is a :class:`Payloads`: an encoder that can be written to a replay file and read back.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from harness._shown import shown
from harness.errors import ConfigError

__all__ = ["Payloads", "from_strategy", "sample_file", "template"]

PLACEHOLDERS: Final = ("{id}", "{n}", "{key}", "{value}")
DEFAULT_EXAMPLES: Final = 64


def _fill(text: str, record_id: str, key: str, value: int) -> str:
    if "{" not in text:
        return text
    number = record_id[1:] if record_id[1:].isdigit() else record_id
    for name, filled in (("{id}", record_id), ("{n}", number), ("{key}", key)):
        text = text.replace(name, filled)
    return text.replace("{value}", str(value))


@dataclass(frozen=True, slots=True)
class Payloads:
    """An input encoder: ``value`` and ``key`` templates (None: no value / the key as the
    harness names it), or ``samples`` (values cycled by record number, templates filled in)."""

    value: str | None = None
    key: str | None = "{key}"
    samples: tuple[str, ...] = ()
    origin: str = "template"
    """Where the values came from, for reports (``template``, a file, a strategy)."""

    def __call__(self, record_id: str, key: str, value: int) -> tuple[bytes | None, bytes | None]:
        raw_key = None if self.key is None else _fill(self.key, record_id, key, value).encode()
        if self.samples:
            number = int(record_id[1:]) if record_id[1:].isdigit() else 0
            text: str | None = self.samples[number % len(self.samples)]
        else:
            text = self.value
        raw_value = None if text is None else _fill(text, record_id, key, value).encode()
        return raw_key, raw_value

    def describe(self) -> str:
        if self.samples:
            return f"{len(self.samples)} values from {self.origin}"
        return f"template {self.value!r:.80} (key {self.key!r})"

    def to_json(self) -> dict[str, Any]:
        return {
            "value": self.value,
            "key": self.key,
            "samples": list(self.samples),
            "origin": self.origin,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Payloads:
        try:
            return cls(
                data.get("value"),
                data.get("key"),
                tuple(data.get("samples") or ()),
                str(data.get("origin", "template")),
            )
        except TypeError as exc:
            raise ConfigError(f"bad payloads {shown(dict(data))}: {exc}") from None


def template(value: str | None, key: str | None = "{key}") -> Payloads:
    """Values (and keys) from templates (see the module docstring)."""
    for name, text in (("value", value), ("key", key)):
        if text is not None and not isinstance(text, str):
            raise ConfigError(f"a {name} template must be a string, got {shown(text)}")
    return Payloads(value, key)


def sample_file(path: str | os.PathLike[str], key: str | None = "{key}") -> Payloads:
    """Values from a JSON-lines file of sample messages, one per line (blank lines skipped)."""
    where = Path(path)
    try:
        text = where.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ConfigError(f"cannot read sample file {shown(str(path))}: {exc}") from None
    samples = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line:
            continue
        try:
            json.loads(_fill(line, "r0", "k0", 0))
        except ValueError as exc:
            raise ConfigError(
                f"sample file {shown(str(path))} line {number} is not JSON ({exc}): "
                f"{shown(line)}; give one JSON message per line"
            ) from None
        samples.append(line)
    if not samples:
        raise ConfigError(f"sample file {shown(str(path))} has no message; give JSON lines")
    return Payloads(None, key, tuple(samples), f"file {where.name}")


def _encoded(example: object) -> str:
    if isinstance(example, bytes):
        return example.decode("utf-8", "surrogateescape")
    if isinstance(example, str):
        return example
    try:
        return json.dumps(example, sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError):
        raise ConfigError(
            f"a payload strategy drew {shown(example)}, which is neither bytes, a string nor "
            "JSON-able; map it to one of those"
        ) from None


def from_strategy(
    strategy: Any, *, count: int = DEFAULT_EXAMPLES, key: str | None = "{key}"
) -> Payloads:
    """Values drawn once from a Hypothesis ``strategy`` (``count`` of them, the same on every
    call: derandomized), cycled by record number."""
    import hypothesis
    from hypothesis import HealthCheck, Phase
    from hypothesis.strategies import SearchStrategy

    if not isinstance(strategy, SearchStrategy):
        raise ConfigError(f"from_strategy needs a Hypothesis strategy, got {shown(strategy)}")
    if type(count) is not int or not 1 <= count <= 10_000:
        raise ConfigError(f"from_strategy count must be an int in [1, 10000], got {count!r}")
    drawn: list[str] = []

    @hypothesis.settings(
        max_examples=count,
        derandomize=True,
        database=None,
        deadline=None,
        phases=(Phase.generate,),
        suppress_health_check=list(HealthCheck),
    )
    @hypothesis.given(strategy)
    def draw(example: object) -> None:
        if len(drawn) < count:
            drawn.append(_encoded(example))

    draw()
    if not drawn:
        raise ConfigError(f"strategy {shown(strategy)} drew no example")
    return Payloads(None, key, tuple(drawn), f"strategy {shown(repr(strategy))}")
