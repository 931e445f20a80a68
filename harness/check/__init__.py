"""Checkers: a history and a delivery guarantee in, a verdict with named anomalies out.

:func:`check` is the local checker (pure Python, in memory); :func:`validate` says why a
history cannot be checked; the verdict values (:class:`Verdict`, :class:`Anomaly`,
:class:`Witness` and their enums) are what every checker returns and every report renders.
"""

from harness.check.local import check
from harness.check.validate import MAX_PROBLEMS, validate
from harness.check.verdict import (
    EXIT_CODES,
    MAX_WITNESSES,
    Anomaly,
    AnomalyKind,
    Guarantee,
    Status,
    Verdict,
    Witness,
    exit_code,
    guarantee_of,
)

__all__ = [
    "EXIT_CODES",
    "MAX_PROBLEMS",
    "MAX_WITNESSES",
    "Anomaly",
    "AnomalyKind",
    "Guarantee",
    "Status",
    "Verdict",
    "Witness",
    "check",
    "exit_code",
    "guarantee_of",
    "validate",
]
