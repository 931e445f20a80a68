"""The JSON schemas (draft 2020-12): the report's (version 1) and the commands' output envelope.

``report.schema.json`` and ``output.schema.json`` next to this module are the same schemas as
files, for tools outside Python; tests keep each equal to its value here. ``docs/reports.md``
explains every key.
"""

from __future__ import annotations

from typing import Any, Final

from harness.check.verdict import AnomalyKind, Guarantee, Status
from harness.faults.schedule import STEP_TYPES
from harness.faults.streams import STREAM_STEP_TYPES
from harness.history.events import EVENT_FIELDS, EventKind

__all__ = ["OUTPUT_FIELDS", "OUTPUT_SCHEMA", "OUTPUT_VERSION", "REPORT_SCHEMA", "REPORT_VERSION"]

REPORT_VERSION: Final = 1
"""The value of the ``harness_report`` key; it changes whenever a key changes meaning."""

_INT_FIELDS: Final = frozenset({"offset", "process", "part", "parts", "value", "output_id", "txn"})


def _nullable(kind: str) -> dict[str, Any]:
    return {"type": [kind, "null"]}


def _strings() -> dict[str, Any]:
    return {"type": "array", "items": {"type": "string"}}


def _event() -> dict[str, Any]:
    properties: dict[str, Any] = {
        "index": {"type": "integer", "minimum": 0},
        "kind": {"enum": [kind.value for kind in EventKind]},
    }
    for name in EVENT_FIELDS[2:]:
        properties[name] = _nullable("integer" if name in _INT_FIELDS else "string")
    return {
        "type": "object",
        "required": list(EVENT_FIELDS),
        "properties": properties,
        "additionalProperties": False,
    }


_OPS: Final = sorted(set(STEP_TYPES) | set(STREAM_STEP_TYPES))
"""Every schedule step's ``op``: the simulator's, and an unchanged Spark job's."""

REPORT_SCHEMA: Final[dict[str, Any]] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "harness_report-1.schema.json",
    "title": "stream-harness report",
    "description": (
        "One checked run of a stream processor: the verdict with its anomalies and witnesses, "
        "how the run was produced and a summary of its history (docs/reports.md)."
    ),
    "type": "object",
    "required": [
        "harness_report",
        "title",
        "processor",
        "guarantee",
        "backend",
        "run_id",
        "seed",
        "replay_command",
        "coverage",
        "verdict",
        "schedule",
        "history",
    ],
    "additionalProperties": False,
    "properties": {
        "harness_report": {"const": REPORT_VERSION},
        "title": {"type": "string"},
        "processor": _nullable("string"),
        "guarantee": {"enum": [g.value for g in Guarantee]},
        "backend": _nullable("string"),
        "run_id": _nullable("string"),
        "seed": _nullable("integer"),
        "replay_command": _nullable("string"),
        "coverage": _nullable("string"),
        "verdict": {"$ref": "#/$defs/verdict"},
        "schedule": {"oneOf": [{"type": "null"}, {"$ref": "#/$defs/schedule"}]},
        "history": {"oneOf": [{"type": "null"}, {"$ref": "#/$defs/history"}]},
    },
    "$defs": {
        "witness": {
            "type": "object",
            "required": ["record_ids", "events", "detail"],
            "additionalProperties": False,
            "properties": {
                "record_ids": _strings(),
                "events": {"type": "array", "items": {"type": "integer", "minimum": 0}},
                "detail": {"type": "string"},
            },
        },
        "anomaly": {
            "type": "object",
            "required": ["kind", "count", "witnesses"],
            "additionalProperties": False,
            "properties": {
                "kind": {"enum": [kind.value for kind in AnomalyKind]},
                "count": {"type": "integer", "minimum": 1},
                "witnesses": {"type": "array", "items": {"$ref": "#/$defs/witness"}},
            },
        },
        "verdict": {
            "type": "object",
            "required": ["status", "guarantee", "anomalies", "tolerated", "reasons", "stats"],
            "additionalProperties": False,
            "properties": {
                "status": {"enum": [status.value for status in Status]},
                "guarantee": {"enum": [g.value for g in Guarantee]},
                "anomalies": {"type": "array", "items": {"$ref": "#/$defs/anomaly"}},
                "tolerated": {"type": "array", "items": {"$ref": "#/$defs/anomaly"}},
                "reasons": _strings(),
                "stats": {"type": "object", "additionalProperties": {"type": "integer"}},
            },
        },
        "schedule": {
            "type": "object",
            "required": ["version", "drain", "steps"],
            "additionalProperties": False,
            "properties": {
                "version": {"type": "integer"},
                "drain": {"type": "boolean"},
                "steps": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["op"],
                        "properties": {"op": {"enum": _OPS}},
                    },
                },
            },
        },
        "event": _event(),
        "history": {
            "type": "object",
            "required": ["meta", "stats", "witness_events", "events"],
            "additionalProperties": False,
            "properties": {
                "meta": {
                    "type": "object",
                    "required": ["version", "run_id", "partitions", "sinks", "extra"],
                    "properties": {
                        "version": {"type": "integer"},
                        "run_id": {"type": "string"},
                        "partitions": _strings(),
                        "sinks": {"type": "object"},
                        "extra": {"type": "object"},
                    },
                },
                "stats": {
                    "type": "object",
                    "required": [
                        "events",
                        "processes",
                        "partitions",
                        "sinks",
                        "kinds",
                        "drain_index",
                        "end",
                    ],
                    "additionalProperties": False,
                    "properties": {
                        "events": {"type": "integer", "minimum": 0},
                        "processes": {"type": "array", "items": {"type": "integer"}},
                        "partitions": _strings(),
                        "sinks": _strings(),
                        "kinds": {
                            "type": "object",
                            "required": [kind.value for kind in EventKind],
                            "additionalProperties": {"type": "integer", "minimum": 0},
                        },
                        "drain_index": _nullable("integer"),
                        "end": _nullable("string"),
                    },
                },
                "witness_events": {"type": "array", "items": {"$ref": "#/$defs/event"}},
                "events": {
                    "oneOf": [
                        {"type": "null"},
                        {"type": "array", "items": {"$ref": "#/$defs/event"}},
                    ]
                },
            },
        },
    },
}
"""The JSON Schema every :func:`harness.report.report_json` value satisfies."""


# -- the envelope of every command's --json output ------------------------------------------

OUTPUT_VERSION: Final = 1
"""The value of the ``harness_output`` key of every ``--json`` output."""

OUTPUT_FIELDS: Final[dict[str, tuple[str, ...]]] = {
    "run": (
        "guarantee",
        "processor",
        "backend",
        "seed",
        "examples",
        "verdict",
        "schedule",
        "replay_command",
        "coverage",
    ),
    "matrix": ("cells", "totals"),
    "replay": ("guarantee", "processor", "backend", "seed", "verdict", "schedule"),
    "check": ("guarantee", "source", "verdict"),
    "check-spark": ("guarantee", "runs"),
    "list": ("scenarios", "streams"),
    "kafka": (
        "guarantee",
        "processor",
        "lineage",
        "effects",
        "seed",
        "examples",
        "verdict",
        "schedule",
        "replay_command",
        "coverage",
        "problems",
    ),
    "generate": ("path", "events", "records", "planted", "expected"),
    "error": ("for_command", "error_type", "usage", "suggestions"),
    "spark-job": (
        "guarantee",
        "processor",
        "backend",
        "seed",
        "examples",
        "verdict",
        "schedule",
        "replay_command",
        "coverage",
        "problems",
        "stream_schedule",
        "tried",
    ),
}
"""Each command's keys after the common ones (``harness_output``, ``command``, ``status``,
``summary``); every one is present in its output, ``null`` when it does not apply."""

_OUTPUT_PROPERTIES: Final[dict[str, Any]] = {
    "harness_output": {"const": OUTPUT_VERSION},
    "command": {"enum": list(OUTPUT_FIELDS)},
    "status": {"enum": [status.value for status in Status]},
    "summary": {"type": "string"},
    "guarantee": {"enum": [g.value for g in Guarantee]},
    "processor": {"type": "string"},
    "backend": {"type": "string"},
    "seed": _nullable("integer"),
    "examples": {"type": "integer", "minimum": 0},
    "verdict": {"oneOf": [{"type": "null"}, {"$ref": "#/$defs/verdict"}]},
    "schedule": {"oneOf": [{"type": "null"}, {"$ref": "#/$defs/schedule"}]},
    "replay_command": _nullable("string"),
    "coverage": {
        "type": "object",
        "description": "what the search exercised (harness.search.coverage.Coverage)",
        "required": ["points", "points_hit", "singles", "pairs", "systematic", "drawn", "summary"],
    },
    "source": {"type": "string"},
    "stream_schedule": {
        "type": ["object", "null"],
        "description": "a Structured Streaming job's failing schedule, as `schedule` "
        "(kept from the first spark-job output; docs/streaming.md)",
    },
    "tried": {
        "type": "string",
        "description": "what a spark-job search ran and fired: `coverage`'s summary (kept from "
        "the first spark-job output)",
    },
    "lineage": {"type": "string", "description": "how output messages are attributed"},
    "effects": {
        "type": "array",
        "description": "the effects outside Kafka that are checked",
        "items": {"type": "string"},
    },
    "problems": {
        "type": "array",
        "description": "every distinct problem found, the first one first",
        "items": {
            "type": "object",
            "required": ["verdict", "schedule", "replay_file", "replay_command"],
            "properties": {
                "verdict": {"$ref": "#/$defs/verdict"},
                "schedule": {"$ref": "#/$defs/schedule"},
                "replay_file": _nullable("string"),
                "replay_command": {"type": "string"},
                "hints": {
                    "type": "array",
                    "description": "what the run noticed that the verdict alone does not say",
                    "items": {"type": "string"},
                },
            },
        },
    },
    "runs": {"type": "object", "additionalProperties": {"$ref": "#/$defs/verdict"}},
    "path": {"type": "string", "description": "the file written"},
    "events": {"type": "integer", "minimum": 0},
    "records": {"type": "integer", "minimum": 0},
    "planted": {
        "type": "object",
        "description": "anomaly kind -> the record ids (or 'key kN') planted",
        "additionalProperties": _strings(),
    },
    "expected": {
        "type": "object",
        "description": "guarantee -> what every checker must find in the file",
        "additionalProperties": {
            "type": "object",
            "required": ["status", "anomalies", "tolerated"],
            "properties": {
                "status": {"enum": [status.value for status in Status]},
                "anomalies": {"type": "object", "additionalProperties": {"type": "integer"}},
                "tolerated": {"type": "object", "additionalProperties": {"type": "integer"}},
            },
        },
    },
    "for_command": {
        "type": ["string", "null"],
        "description": "the command the refused command line named (null: none)",
    },
    "error_type": {"type": "string", "description": "the error's class, e.g. UsageError"},
    "usage": {
        "type": ["string", "null"],
        "description": "the command's usage text, for an error in its arguments",
    },
    "suggestions": {
        "type": "array",
        "description": "what was probably meant (a flag, a command, a choice)",
        "items": {"type": "string"},
    },
    "cells": {
        "type": "array",
        "items": {
            "type": "object",
            "required": ["scenario", "variant", "backend", "correct", "ok"],
            "properties": {
                "scenario": {"type": "string"},
                "variant": {"type": "string"},
                "backend": {"type": "string"},
                "correct": {"type": "boolean"},
                "ok": {"type": "boolean"},
            },
        },
    },
    "totals": {
        "type": "object",
        "required": ["caught", "buggy", "passed", "correct"],
        "additionalProperties": {"type": "integer", "minimum": 0},
    },
    "scenarios": {
        "type": "array",
        "items": {"type": "object", "required": ["scenario", "guarantee", "variants"]},
    },
    "streams": {
        "description": "the built-in Structured Streaming variants, each searched with "
        "`python -m harness spark-job TARGET` (docs/streaming.md)",
        "type": "array",
        "items": {
            "type": "object",
            "required": ["target", "guarantee", "expected", "story"],
            "properties": {
                "target": {"type": "string"},
                "guarantee": {"type": "string"},
                "expected": {"type": "object", "additionalProperties": _strings()},
                "story": {"type": "string"},
            },
        },
    },
}

OUTPUT_SCHEMA: Final[dict[str, Any]] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "harness_output-1.schema.json",
    "title": "stream-harness command output",
    "description": (
        "What every `python -m harness COMMAND --json` prints: the envelope's version, the "
        "command, its status (valid, invalid or unknown: exit code 0, 1 or 2), a one-line "
        "summary, then the command's own keys (docs/reports.md)."
    ),
    "type": "object",
    "required": ["harness_output", "command", "status", "summary"],
    "additionalProperties": False,
    "properties": _OUTPUT_PROPERTIES,
    "oneOf": [
        {"properties": {"command": {"const": command}}, "required": list(keys)}
        for command, keys in OUTPUT_FIELDS.items()
    ],
    "$defs": REPORT_SCHEMA["$defs"],
}
"""The JSON Schema of every command's ``--json`` output (``output.schema.json``)."""
