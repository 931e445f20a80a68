"""Hints for a Kafka application's failure: what the run noticed that the verdict alone does
not say, and what to change in the command (or the ``KafkaApp``) rather than in the code.

* A regex subscription that matched no topic: the application read nothing, so every record
  is ``lost``; the hint names the pattern and the topics the cluster has.
* A processor error indexing a field the default input payload does not have (a ``KeyError``
  such as ``'order_id'``, a ``TypeError`` indexing a string or a number, JSON that is text):
  the input records still have the harness's default shape; the hint names
  ``--value-template`` (``encode=template(...)`` in the API) with a template holding that field.

:func:`hints` returns ``hint: ...`` lines; the command line, the pytest fixture and
:meth:`KafkaApp.hints <harness.kafka.KafkaApp.hints>` show them after the verdict.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Iterable, Sequence
from typing import Final, Protocol

from harness.kafka._broker import Encoder, json_values, text_values

__all__ = ["payload_hint", "render"]

_DEFAULT_FIELDS: Final = ("id", "key", "value")
_INDEXING: Final = ("subscriptable", "indices must be", "not iterable")
"""Words of the ``TypeError`` of indexing a value that has no such field (a string, an int)."""


class _Error(Protocol):
    @property
    def error(self) -> str: ...


def _missing_field(error: str, encode: Encoder) -> str | None:
    """The field a processor error looked for in a default-shaped input ('' when unknown),
    or None when the error is not about the payload's shape."""
    kind, _, message = error.partition(": ")
    kind = kind.rpartition(".")[2]
    if kind == "KeyError" and encode is json_values:
        try:
            field = ast.literal_eval(message)
        except (ValueError, SyntaxError):
            return ""
        if field in _DEFAULT_FIELDS:
            return None
        return field if isinstance(field, str) else ""
    if kind == "TypeError" and any(word in message for word in _INDEXING):
        return ""
    if kind == "JSONDecodeError" and encode is text_values:
        return ""
    return None


def payload_hint(errors: Iterable[_Error], encode: Encoder) -> str | None:
    """The ``--value-template`` hint, when a processor error indexes a field that the
    default payload (``encode``: :func:`~harness.kafka.json_values` or
    :func:`~harness.kafka.text_values`) does not have; None otherwise."""
    if encode is not json_values and encode is not text_values:
        return None  # the user gave the payload's shape already
    for error in errors:
        field = _missing_field(error.error, encode)
        if field is None:
            continue
        shape = (
            '{"id": "r<n>", "key": "k<n>", "value": <int>}'
            if encode is json_values
            else "'r<n> k<n> <int>' (--value-format text)"
        )
        did = f"looked up {field!r} in" if field else "failed on the shape of"
        body = json.dumps({field or "order_id": "{n}"}).replace('"{n}"', "{n}")
        return (
            f"the application {did} an input value, which has the harness's default shape "
            f"{shape}; give the shape your code reads with "
            f"--value-template '{body}' ({{id}} {{n}} {{key}} {{value}} are filled in; in the API "
            "and the pytest fixture: encode=harness.kafka.payloads.template(...)), or --sample "
            "FILE of real messages (docs/kafka.md, Payloads)"
        )
    return None


def render(notes: Iterable[str], errors: Sequence[_Error], encode: Encoder) -> list[str]:
    """The ``hint: ...`` lines for a failure: the run's notes, then the payload hint."""
    lines = [f"hint: {note}" for note in sorted(notes)]
    payload = payload_hint(errors, encode)
    if payload is not None:
        lines.append(f"hint: {payload}")
    return lines
