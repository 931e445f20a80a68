"""How a front door shows an error: one line on stderr and, under ``--json``, JSON on stdout.

Every door (the CLI's commands, ``kafka``, ``spark-job``) ends a refused command line or a
:class:`~harness.errors.HarnessError` here: a usage error (:class:`harness._usage.UsageError`)
prints the command's usage, then one ``error:`` line naming the bad value and what was
probably meant; under ``--json`` stdout gets the ``error`` envelope (``OUTPUT_SCHEMA``), so
that ``> out.json`` always holds JSON. The exit code is 2.
"""

from __future__ import annotations

import sys
from typing import Final

from harness._shown import one_line, type_name
from harness._usage import UsageError
from harness.check.verdict import Status
from harness.report.json_report import render_output

__all__ = ["EXIT_ERROR", "render_error", "show_error"]

EXIT_ERROR: Final = 2
"""The exit code of a usage error (the same as UNKNOWN's)."""
_ERROR_CHARS: Final = 5000
"""The longest an ``error:`` line gets (each value in it is shortened already)."""


def render_error(exc: Exception, command: str | None) -> str:
    """The ``error`` envelope for ``exc``, raised by ``command`` (None: no command named)."""
    usage = exc.usage.strip() if isinstance(exc, UsageError) else None
    return render_output(
        "error",
        Status.UNKNOWN,
        one_line(exc, _ERROR_CHARS),
        for_command=command,
        error_type=type_name(exc),
        usage=usage,
        suggestions=list(exc.suggestions) if isinstance(exc, UsageError) else [],
    )


def show_error(exc: Exception, *, command: str | None, json_output: bool) -> int:
    """Print ``exc`` as the door's error (see the module); returns :data:`EXIT_ERROR`."""
    if isinstance(exc, UsageError):
        sys.stderr.write(exc.usage)
        print(f"{exc.prog}: error: {one_line(exc, _ERROR_CHARS)}", file=sys.stderr)
    else:
        print(f"error: {one_line(exc, _ERROR_CHARS)}", file=sys.stderr)
    if json_output:
        print(render_error(exc, command))
    return EXIT_ERROR
