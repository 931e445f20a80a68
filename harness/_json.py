"""Parsing JSON that comes from outside (files, arguments, stored bytes) into typed errors.

``json.loads`` can fail in five ways: bytes that are not UTF-8, text that is not JSON, an
integer of more than 4,300 digits (``ValueError``), nesting deeper than the interpreter's
recursion limit (``RecursionError``), and a lone surrogate escape that later breaks printing.
:func:`parse_json` turns the first four into the error class the caller names, with one
message shape, so every reader of outside JSON fails the same typed way.
"""

from __future__ import annotations

import json

from harness.errors import ConfigError, HarnessError

__all__ = ["parse_json"]


def parse_json(
    text: str | bytes, *, what: str, fix: str, error: type[HarnessError] = ConfigError
) -> object:
    """``json.loads(text)``, or ``error("<what> is not JSON (<why>); <fix>")``."""
    try:
        return json.loads(text)
    except UnicodeDecodeError as exc:
        why = f"not UTF-8: {exc.reason} at byte {exc.start}"
    except json.JSONDecodeError as exc:
        why = f"{exc.msg} at line {exc.lineno} column {exc.colno}"
    except RecursionError:
        why = "arrays or objects nest too deeply"
    except ValueError as exc:  # e.g. an integer of more than 4,300 digits
        why = str(exc).split(";")[0]
    raise error(f"{what} is not JSON ({why}); {fix}") from None
