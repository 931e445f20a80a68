"""Reports: a verdict (and the history behind it) rendered for people and for programs.

Checkers return data; these functions only render it. :func:`gather` resolves, once, what a
report says about the thing reported (a :class:`Reported` run such as
``CounterexampleFound.failure``, a :class:`Checked` verdict, or a bare ``Verdict``) into
:class:`ReportFacts`; every renderer takes those facts (or gathers them itself from a run or
a verdict): :func:`render_text` is the terminal report, :func:`report_json` /
:func:`render_json` the versioned machine-readable one (its schema is
:data:`REPORT_SCHEMA`, also shipped as ``report.schema.json``), :func:`render_html` a
self-contained page with a timeline of the run, and :func:`write_report` writes all three.
``docs/reports.md`` describes each format. Importing this package loads neither hypothesis,
plyvel, pyarrow nor pyspark, and nothing of the engine (:mod:`harness.engine`).
"""

from harness.report._facts import ReportFacts, gather
from harness.report.html import render_html
from harness.report.json_report import render_json, report_json
from harness.report.schema import REPORT_SCHEMA, REPORT_VERSION
from harness.report.subject import Checked, ProcessorError, Reported, SourceLine
from harness.report.text import render_text
from harness.report.write import FORMATS, write_report

__all__ = [
    "FORMATS",
    "REPORT_SCHEMA",
    "REPORT_VERSION",
    "Checked",
    "ProcessorError",
    "ReportFacts",
    "Reported",
    "SourceLine",
    "gather",
    "render_html",
    "render_json",
    "render_text",
    "report_json",
    "write_report",
]
