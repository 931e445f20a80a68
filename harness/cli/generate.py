"""``python -m harness generate OUT``: write a history of any size, anomalies planted on request.

Wraps :func:`harness.spark.check.generate.generate_history` (pyarrow only; no Spark, no JVM):
a simple correct processor's history of ``--records`` input records, written a block at a
time so that memory stays bounded, with ``--plant KIND=N`` anomalies at known places. ``OUT``
ending in ``.parquet`` is written directly; ``.jsonl`` is written through a Parquet file
beside it, converted a batch at a time (:func:`harness.history.io.parquet_to_jsonl`). It
prints what every checker must find in the file, per guarantee; ``check OUT --guarantee G``
and ``report OUT --guarantee G`` then read it. Exit code 0 (2 for a usage error).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Final

from harness._shown import shown
from harness._usage import did_you_mean
from harness.cli._common import EXIT_OK, GUARANTEES, print_output
from harness.errors import ConfigError

__all__ = ["DESCRIPTION", "PLANTABLE", "add_arguments", "main"]

DESCRIPTION: Final = (
    "Write a history of any size (.parquet or .jsonl) of a correct processor, with "
    "anomalies planted at known places (--plant KIND=N), and print what a checker must find."
)

PLANTABLE: Final = {
    "lost": "lost",
    "duplicate": "duplicated",
    "unexpected": "unexpected",
    "aborted-read": "aborted",
    "count-mismatch": "miscounted",
    "nonmonotonic": "reordered",
    "skip": "skipped",
    "offset-ahead": "ahead",
    "offset-regression": "regressed",
}
"""``--plant`` kinds (anomaly kinds) and the ``Plan`` field each sets."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare ``generate``'s output and options."""
    parser.add_argument("out", type=Path, help="the history file to write: .parquet or .jsonl")
    parser.add_argument(
        "--records", type=int, default=1000, help="input records (default 1000; ~5 events each)"
    )
    parser.add_argument("--partitions", type=int, default=4, help="input partitions (default 4)")
    parser.add_argument("--keys", type=int, default=16, help="distinct record keys (default 16)")
    parser.add_argument(
        "--block",
        type=int,
        default=None,
        help="records per partition between two offset commits (default: up to 1024)",
    )
    parser.add_argument(
        "--plant",
        action="append",
        default=[],
        metavar="KIND=N",
        help=f"plant N anomalies of KIND (repeatable): {', '.join(PLANTABLE)}",
    )
    parser.add_argument(
        "--unordered", action="store_true", help="the output log sink is not ordered"
    )
    parser.add_argument("--run-id", default=None, help="the history's run id (default: generated)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")


def _plan(specs: list[str]) -> Any:
    from harness.spark.check.generate import Plan

    counts: dict[str, int] = {}
    for spec in specs:
        kind, eq, number = spec.partition("=")
        if kind not in PLANTABLE:
            raise ConfigError(
                f"--plant {shown(spec)}: unknown kind {shown(kind)}"
                f"{did_you_mean(kind, PLANTABLE)}; the kinds are {', '.join(PLANTABLE)}"
            )
        if not eq or not number.isdigit():
            raise ConfigError(f"--plant {shown(spec)} must be KIND=N with N a count, e.g. lost=2")
        counts[PLANTABLE[kind]] = counts.get(PLANTABLE[kind], 0) + int(number)
    return Plan(**counts)


def _generate(args: argparse.Namespace, plan: Any, target: Path) -> Any:
    """Write the history to ``target`` (through a Parquet file for JSONL)."""
    from harness.history.io import parquet_to_jsonl
    from harness.spark.check.generate import generate_history

    options: dict[str, Any] = {
        "records": args.records,
        "partitions": args.partitions,
        "keys": args.keys,
        "plan": plan,
        "ordered": not args.unordered,
        "block": args.block,
        "run_id": args.run_id or "generated",
    }
    if target.suffix == ".parquet":
        return generate_history(target, **options)  # (it makes missing directories)
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, parquet = tempfile.mkstemp(
        prefix=f".{target.name}.", suffix=".parquet", dir=target.parent
    )
    os.close(handle)
    try:
        generated = generate_history(parquet, **options)
        parquet_to_jsonl(parquet, target)
    finally:
        os.unlink(parquet)
    return generated


def _expected(generated: Any) -> dict[str, Any]:
    from harness.check import Guarantee

    found = {}
    for guarantee in GUARANTEES:
        status, failing, tolerated = generated.expected(Guarantee(guarantee))
        found[guarantee] = {"status": status.value, "anomalies": failing, "tolerated": tolerated}
    return found


def main(args: argparse.Namespace) -> int:
    """Write the history and print what a checker must find; 0 when written."""
    from harness._output import writable
    from harness._progress import metering
    from harness.report.live import LiveProgress, emit

    if args.out.suffix not in (".parquet", ".jsonl"):
        hint = did_you_mean(args.out.suffix, [".parquet", ".jsonl"])
        raise ConfigError(f"generate writes .parquet or .jsonl, got {shown(str(args.out))}{hint}")
    plan = _plan(args.plant)
    writable(args.out, "OUT")  # before the work: one line, no half-written file
    live = LiveProgress(f"generate {args.out.name}", None, json_output=args.json, units="events")
    try:
        with live, metering(live.amount):
            generated = _generate(args, plan, args.out)
    except OSError as exc:  # a full disk, a directory that cannot be written
        raise ConfigError(
            f"cannot write {shown(str(args.out))}: {exc.strerror or type(exc).__name__}"
        ) from None
    expected = _expected(generated)
    summary = (
        f"wrote {generated.events:,} events ({generated.records:,} records, "
        f"{generated.partitions} partitions) to {args.out}"
    )
    planted = {kind.value: list(ids) for kind, ids in generated.planted.items()}
    if args.json:
        print_output(
            "generate",
            "valid",
            summary,
            path=str(args.out),
            events=generated.events,
            records=generated.records,
            planted=planted,
            expected=expected,
        )
        return EXIT_OK
    emit(summary)
    for kind, ids in planted.items():
        more = f", ... ({len(ids)} in all)" if len(ids) > 5 else ""
        emit(f"  planted {kind}: {', '.join(ids[:5])}{more}")
    for guarantee, answer in expected.items():
        counts = ", ".join(f"{k} x{n}" for k, n in answer["anomalies"].items()) or "no anomaly"
        tolerated = ", ".join(f"{k} x{n}" for k, n in answer["tolerated"].items())
        emit(
            f"  {guarantee}: {answer['status'].upper()} ({counts}"
            + (f"; tolerated {tolerated}" if tolerated else "")
            + ")"
        )
    print(f"check it: python -m harness check {args.out} --guarantee exactly-once", file=sys.stderr)
    return EXIT_OK
