"""Command line: ``python -m harness`` (also installed as ``stream-harness``).

Commands: ``demo`` (the default), ``run`` (scenarios or your own processor), ``list``,
``replay``, ``check`` (a stored history, locally or with Spark), ``check-spark``,
``generate`` (a history of any size) and ``report``, one module each in this package (the
table is ``_parser.COMMANDS``). Exit codes:
0 VALID (or every scenario cell as expected), 1 INVALID (or some cell not as expected),
2 UNKNOWN or a usage error. A user mistake is answered with one line on stderr, never a
traceback.
"""

from harness.cli._common import EXIT_INVALID, EXIT_OK, EXIT_UNKNOWN
from harness.cli._parser import main

__all__ = ["EXIT_INVALID", "EXIT_OK", "EXIT_UNKNOWN", "main"]
