"""Parsing JSON that comes from outside (files, arguments, stored bytes) into typed errors.

``json.loads`` can fail in five ways: bytes that are not UTF-8, text that is not JSON, an
integer of more than 4,300 digits (``ValueError``), nesting deeper than the interpreter's
recursion limit (``RecursionError``), and a lone surrogate escape that later breaks printing.
:func:`parse_json` turns the first four into the error class the caller names, with one
message shape, so every reader of outside JSON fails the same typed way.

The interpreter's own nesting limit differs between versions (Python 3.13 parses 5,000 levels
that 3.12 refuses), so :func:`parse_json` also refuses more than :data:`MAX_DEPTH` levels
itself: the same input gets the same error on every supported Python, and nothing the harness
reads from outside nests deeper than a handful of levels.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from harness.errors import ConfigError, HarnessError

__all__ = ["MAX_DEPTH", "parse_json"]

MAX_DEPTH = 100
"""The deepest nesting of arrays and objects :func:`parse_json` accepts."""


def parse_json(
    text: str | bytes, *, what: str, fix: str, error: type[HarnessError] = ConfigError
) -> object:
    """``json.loads(text)``, or ``error("<what> is not JSON (<why>); <fix>")``."""
    try:
        value = json.loads(text)
        if not _nests_deeper(value, MAX_DEPTH):
            return value
        why = f"arrays or objects nest too deeply: more than {MAX_DEPTH} levels"
    except UnicodeDecodeError as exc:
        why = f"not UTF-8: {exc.reason} at byte {exc.start}"
    except json.JSONDecodeError as exc:
        why = f"{exc.msg} at line {exc.lineno} column {exc.colno}"
    except RecursionError:
        why = "arrays or objects nest too deeply"
    except ValueError as exc:  # e.g. an integer of more than 4,300 digits
        why = str(exc).split(";")[0]
    raise error(f"{what} is not JSON ({why}); {fix}") from None


def _nests_deeper(value: object, limit: int) -> bool:
    """Whether arrays and objects in ``value`` nest more than ``limit`` levels (no recursion)."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Iterable[object] = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False
