"""Command line: ``python -m harness`` (also installed as ``stream-harness``).

Commands: ``demo`` (the default), ``run`` (scenarios or your own processor), ``list``,
``replay``, ``check`` (a stored history, locally or with Spark), ``check-spark`` and
``report``. Exit codes: 0 VALID (or every scenario cell as expected), 1 INVALID (or some cell
not as expected), 2 UNKNOWN or a usage error. A user mistake is answered with one line on
stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from harness.errors import ConfigError, HarnessError

if TYPE_CHECKING:
    from harness.catalogue.matrix import VariantResult
    from harness.catalogue.subject import Scenario
    from harness.check import Verdict
    from harness.sim.world import Backend

__all__ = ["main"]

EXIT_OK: Final = 0
EXIT_INVALID: Final = 1
EXIT_UNKNOWN: Final = 2
"""Also the exit code of a usage error."""


def _exit_code(verdict: Verdict) -> int:
    from harness.check import Status

    return {Status.VALID: EXIT_OK, Status.INVALID: EXIT_INVALID}.get(verdict.status, EXIT_UNKNOWN)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m harness",
        description="Correctness harness for at-least-once and exactly-once stream processing.",
        epilog="Exit codes: 0 VALID, 1 INVALID, 2 UNKNOWN or usage error.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    demo = commands.add_parser(
        "demo",
        help="run the DistributedLog offsets tutorial on LevelDB (the default command)",
        description="Write, read, crash, truncate and resume a reader from stored offsets.",
    )
    demo.add_argument(
        "--dir",
        type=Path,
        default=None,
        help="keep the LevelDB files in this directory (default: a temporary one, removed)",
    )
    demo.add_argument("--records", type=int, default=1000, help="records to write (1000)")

    run = commands.add_parser(
        "run",
        help="run scenarios (the mutation matrix) or your own processor under drawn schedules",
        description=(
            "With --all or SCENARIO[:VARIANT] names: explore every variant and print the "
            "matrix (exit 1 if a buggy variant is not caught or a correct one fails). With "
            "MODULE:FUNCTION and --guarantee: explore your processor (exit 0 VALID, 1 INVALID, "
            "2 UNKNOWN)."
        ),
    )
    run.add_argument(
        "targets",
        nargs="*",
        metavar="TARGET",
        help="a scenario name, SCENARIO:VARIANT, or your processor as MODULE:FUNCTION",
    )
    run.add_argument("--all", action="store_true", help="every scenario and variant")
    run.add_argument(
        "--profile",
        default=None,
        help="search budget: dev, ci or nightly (default: $HARNESS_PROFILE, else ci)",
    )
    run.add_argument("--seed", type=int, default=None, help="the search seed")
    run.add_argument("--examples", type=int, default=None, help="schedules per search")
    run.add_argument(
        "--seeds", type=int, default=None, help="searches per buggy variant (the profile's)"
    )
    run.add_argument(
        "--backend",
        choices=("memory", "leveldb", "both"),
        default="memory",
        help="where logs and offsets live (default memory; leveldb is real plyvel on disk)",
    )
    run.add_argument(
        "--guarantee",
        choices=("at-least-once", "exactly-once"),
        default=None,
        help="the guarantee your processor claims (required for MODULE:FUNCTION)",
    )
    run.add_argument(
        "--topology",
        default=None,
        help="your processor's topology as JSON, e.g. '{\"partitions\": 2}' (default: 1 "
        "partition, 3 keys, one log sink 'out')",
    )
    run.add_argument("--faults", default=None, help="comma-separated faults (default: all)")
    run.add_argument("--json", action="store_true", help="print JSON instead of a table")
    run.add_argument(
        "--markdown", type=Path, default=None, help="also write the matrix as a Markdown table"
    )
    run.add_argument(
        "--failures-dir",
        default=".harness/failures",
        help="where failing schedules are saved for replay (default .harness/failures)",
    )

    commands.add_parser(
        "check-spark",
        add_help=False,
        help="check history Parquet with Spark, locally or on a cluster (--help for options)",
    )
    listing = commands.add_parser("list", help="list the scenarios and their variants")
    listing.add_argument("--json", action="store_true", help="print JSON")

    replay = commands.add_parser(
        "replay",
        help="run a saved failing schedule again and print its verdict",
        description=(
            "Replay a schedule saved by a failing exploration (.harness/failures/*.json), "
            "without Hypothesis. Exit code: 0 VALID, 1 INVALID, 2 UNKNOWN or usage error."
        ),
    )
    replay.add_argument(
        "file", help="the replay file printed by the failure (or the replay JSON itself)"
    )
    replay.add_argument(
        "--history", type=Path, default=None, help="also write the history (.jsonl or .parquet)"
    )
    replay.add_argument("--json", action="store_true", help="print the verdict as JSON")

    report = commands.add_parser(
        "report",
        help="render a failing run as text, JSON and a self-contained HTML timeline",
        description=(
            "Render a replay file (the schedule is run again) or a stored history (checked "
            "against --guarantee) as a report: text to stdout, and with --out DIR also "
            "report.txt, report.json and report.html (docs/reports.md). Exit code: the "
            "verdict's (0 VALID, 1 INVALID, 2 UNKNOWN)."
        ),
    )
    report.add_argument("source", help="a replay file (.json) or a history (.jsonl/.parquet)")
    report.add_argument(
        "--guarantee",
        choices=("at-least-once", "exactly-once"),
        default=None,
        help="the guarantee to check a history against (a replay file names its own)",
    )
    report.add_argument("--out", type=Path, default=None, help="write the report files here")
    report.add_argument(
        "--format",
        action="append",
        choices=("txt", "json", "html"),
        default=None,
        help="which files to write with --out (repeatable; default all three)",
    )

    check = commands.add_parser(
        "check",
        help="check a stored history (.jsonl or .parquet) against a guarantee",
        description="Check a history file; --spark runs the Spark checker instead.",
    )
    check.add_argument("history", type=Path, help="the history file (.jsonl or .parquet)")
    check.add_argument(
        "--guarantee",
        choices=("at-least-once", "exactly-once"),
        required=True,
        help="the guarantee to check",
    )
    check.add_argument("--json", action="store_true", help="print the verdict as JSON")
    check.add_argument("--out", type=Path, default=None, help="also write the verdict JSON here")
    check.add_argument(
        "--spark",
        action="store_true",
        help="check with Spark (same verdict; see `check-spark` for cluster options)",
    )
    return parser


def _parse_faults(text: str | None) -> list[str] | None:
    if text is None:
        return None
    return [part.strip() for part in text.split(",") if part.strip()]


def _scenarios(args: argparse.Namespace) -> list[Scenario] | None:
    """The scenarios to run, or None when the targets name a user processor."""
    scenarios = _load_scenarios()
    if args.all:
        if args.targets:
            raise ConfigError("give either --all or target names, not both")
        return list(scenarios.values())
    if not args.targets:
        raise ConfigError(
            "nothing to run: give --all, scenario names (see `python -m harness list`) or "
            "your processor as MODULE:FUNCTION with --guarantee"
        )
    chosen: list[Scenario] = []
    for target in args.targets:
        name, _, variant = target.partition(":")
        if name not in scenarios:
            if ":" in target and len(args.targets) == 1:
                return None  # MODULE:FUNCTION
            raise ConfigError(
                f"unknown scenario {name!r}; the scenarios are {', '.join(scenarios)} "
                "(or give your processor as MODULE:FUNCTION with --guarantee)"
            )
        scenario = scenarios[name]
        if variant:
            scenario = dataclasses.replace(scenario, variants=(scenario.variant(variant),))
        chosen.append(scenario)
    return chosen


def _load_scenarios() -> dict[str, Scenario]:
    try:
        from harness.catalogue.seeds import SCENARIOS
    except ImportError as exc:  # pragma: no cover - an install without the scenarios package
        raise ConfigError(f"the scenarios package cannot be imported ({exc})") from None
    return dict(SCENARIOS)


def _run(args: argparse.Namespace) -> int:
    from harness.catalogue.matrix import render_table, run_matrix
    from harness.search.profiles import profile

    budget = profile(args.profile)
    if args.examples is not None:
        if args.examples < 1:
            raise ConfigError(f"--examples must be >= 1, got {args.examples}")
        budget = dataclasses.replace(budget, max_examples=args.examples)
    scenarios = _scenarios(args)
    if scenarios is None:
        return _run_processor(args, budget.max_examples, budget.max_steps)
    backends: tuple[Any, ...] = ("memory", "leveldb") if args.backend == "both" else (args.backend,)

    def progress(result: VariantResult, done: int, total: int) -> None:
        mark = "ok " if result.ok else "NOT AS EXPECTED"
        line = (
            f"[{done}/{total}] {result.scenario} {result.variant} ({result.backend}): {mark} "
            f"{result.seconds:.1f} s"
        )
        print(line, file=sys.stderr, flush=True)

    print(
        f"profile {budget.name}: {budget.max_examples} schedules of up to {budget.max_steps} "
        f"steps per search, {args.seeds or budget.detect_seeds} search(es) per variant",
        file=sys.stderr,
    )
    results = run_matrix(
        scenarios,
        backends=backends,
        budget=budget,
        seeds=args.seeds,
        failures_dir=args.failures_dir,
        progress=progress,
    )
    if args.markdown is not None:
        args.markdown.write_text(render_table(results, markdown=True) + "\n", encoding="utf-8")
    if args.json:
        print(json.dumps([r.to_json() for r in results], indent=2))
    else:
        print(render_table(results))
        bad = [r for r in results if not r.ok]
        caught = sum(1 for r in results if not r.correct and r.ok)
        buggy = sum(1 for r in results if not r.correct)
        passed = sum(1 for r in results if r.correct and r.ok)
        correct = sum(1 for r in results if r.correct)
        summary = f"\n{caught}/{buggy} buggy variants caught, {passed}/{correct} correct passed"
        if bad:
            names = ", ".join(f"{r.scenario}:{r.variant} ({r.backend})" for r in bad)
            summary += f"; NOT AS EXPECTED: {names}"
        print(summary)
    return EXIT_OK if all(r.ok for r in results) else EXIT_INVALID


def _run_processor(args: argparse.Namespace, max_examples: int, max_steps: int) -> int:
    from harness.runner import CounterexampleFound, explore, load_processor
    from harness.sim.topology import Topology

    if len(args.targets) != 1:
        raise ConfigError("give exactly one processor as MODULE:FUNCTION")
    if args.guarantee is None:
        raise ConfigError(
            f"--guarantee is required to run your processor {args.targets[0]!r}: "
            "at-least-once or exactly-once"
        )
    if str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))  # run from a project: its modules are importable
    processor = load_processor(args.targets[0])
    topology = Topology()
    if args.topology is not None:
        try:
            data = json.loads(args.topology)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"--topology is not JSON ({exc.msg}): {args.topology!r}") from None
        defaults = Topology().to_json()
        defaults["sinks"] = data.get("sinks", defaults["sinks"])
        topology = Topology.from_json({**defaults, **data})
    backend: Backend = "leveldb" if args.backend == "leveldb" else "memory"
    try:
        result = explore(
            processor,
            guarantee=args.guarantee,
            topology=topology,
            backend=backend,
            max_examples=max_examples,
            max_steps=max_steps,
            faults=_parse_faults(args.faults),
            seed=args.seed,
            failures_dir=args.failures_dir,
        )
    except CounterexampleFound as exc:
        if args.json:
            print(json.dumps(_failure_json(exc), indent=2))
        else:
            print(str(exc))
        return _exit_code(exc.failure.verdict)
    message = result.summary()
    if args.json:
        coverage = result.coverage.to_json()
        print(json.dumps({"status": "valid", "summary": message, "coverage": coverage}))
    else:
        print(message)
    return EXIT_OK


def _failure_json(exc: Any) -> dict[str, Any]:
    failure = exc.failure
    return {
        "processor": failure.processor,
        "guarantee": failure.guarantee.value,
        "backend": failure.backend,
        "verdict": failure.verdict.to_json(),
        "schedule": failure.schedule.to_json(),
        "seed": failure.seed,
        "replay": failure.replay_command,
        "coverage": failure.coverage.to_json(),
    }


def _list(args: argparse.Namespace) -> int:
    scenarios = _load_scenarios()
    if args.json:
        data = [
            {
                "scenario": s.name,
                "title": s.title,
                "seed": s.seed,
                "guarantee": s.guarantee.value,
                "variants": [
                    {
                        "variant": v.name,
                        "correct": v.correct,
                        "expected": sorted(k.value for k in v.expected),
                        "story": v.story,
                    }
                    for v in s.variants
                ],
            }
            for s in scenarios.values()
        ]
        print(json.dumps(data, indent=2))
        return EXIT_OK
    for s in scenarios.values():
        print(f"{s.name}  ({s.guarantee.value}; seed {s.seed})")
        print(f"  {s.title}")
        for v in s.variants:
            expected = (
                "correct" if v.correct else "bug: " + ", ".join(sorted(k.value for k in v.expected))
            )
            print(f"    {v.name:28s} {expected}")
    return EXIT_OK


def _replay(args: argparse.Namespace) -> int:
    from harness.runner import Replay, replay

    spec = Replay.load(args.file)
    history, verdict = replay(spec)
    if args.history is not None:
        from harness.history.io import write_history

        write_history(history, args.history)
    if args.json:
        print(json.dumps(verdict.to_json(), indent=2))
        return _exit_code(verdict)
    print(
        f"{spec.guarantee.value} for {spec.processor} ({spec.backend} backend): "
        f"{verdict.status.name}"
    )
    print(verdict.summary())
    print(f"schedule ({len(spec.schedule)} steps):")
    print(spec.schedule.describe())
    return _exit_code(verdict)


def _check(args: argparse.Namespace) -> int:
    if args.spark:
        return _spark_command(
            [str(args.history), "--guarantee", args.guarantee]
            + (["--out", str(args.out)] if args.out else [])
        )
    from harness.check import Guarantee, check
    from harness.history.io import read_history

    try:
        history = read_history(args.history)
    except OSError as exc:
        raise ConfigError(f"cannot read history {str(args.history)!r}: {exc.strerror}") from None
    verdict = check(history, Guarantee(args.guarantee))
    text = json.dumps(verdict.to_json(), indent=2)
    if args.out is not None:
        args.out.write_text(text + "\n", encoding="utf-8")
    if args.json:
        print(text)
    else:
        print(f"{args.guarantee} for {args.history}: {verdict.status.name}")
        print(verdict.summary())
    return _exit_code(verdict)


def _report(args: argparse.Namespace) -> int:
    from harness.report import render_text, write_report

    source = str(args.source)
    if source.endswith((".jsonl", ".parquet")):
        from harness.check import Guarantee, check
        from harness.history.io import read_history

        if args.guarantee is None:
            raise ConfigError(f"--guarantee is required to report on history {source!r}")
        try:
            history = read_history(source)
        except OSError as exc:
            raise ConfigError(f"cannot read history {source!r}: {exc.strerror}") from None
        verdict = check(history, Guarantee(args.guarantee))
        details: dict[str, Any] = {"title": source}
    else:
        from harness.runner import Replay, replay

        spec = Replay.load(source)
        history, verdict = replay(spec)
        details = {
            "schedule": spec.schedule,
            "seed": spec.seed,
            "replay_command": f"python -m harness replay {source}",
            "processor": spec.processor,
            "backend": spec.backend,
        }
    print(render_text(verdict, history, **details))
    if args.out is not None:
        written = write_report(
            args.out,
            verdict=verdict,
            history=history,
            formats=args.format or ("txt", "json", "html"),
            **details,
        )
        for path in written.values():
            print(f"wrote {path}", file=sys.stderr)
    return _exit_code(verdict)


def _spark_command(argv: Sequence[str]) -> int:
    try:
        command: Any = importlib.import_module("harness.spark.command")
    except ImportError as exc:
        raise ConfigError(f"the Spark checker is not available ({exc})") from None
    parser = argparse.ArgumentParser(
        prog="python -m harness check-spark",
        description="Check history Parquet files with the Spark checker (same verdict as "
        "`check`). Exit code: 0 VALID, 1 INVALID, 2 UNKNOWN or usage error.",
    )
    command.add_arguments(parser)
    return int(command.run(parser.parse_args(list(argv))))


def _demo(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    records = getattr(args, "records", 1000)
    if records < 1:
        parser.error(f"--records must be >= 1, got {records}")
    from harness.demo import run_demo

    result = run_demo(
        getattr(args, "dir", None),
        records=records,
        records_per_segment=max(1, records // 4),
        commit_every=max(1, min(100, records // 4)),
        crash_after=max(1, (records * 13) // 20),
    )
    return EXIT_OK if result.ok else EXIT_INVALID


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (0 ok, 1 check failed, 2 unknown/usage)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["check-spark"]:
        try:
            return _spark_command(argv[1:])
        except HarnessError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_UNKNOWN
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2)
        return int(exc.code or 0)
    handlers = {
        "run": _run,
        "list": _list,
        "replay": _replay,
        "check": _check,
        "report": _report,
    }
    try:
        handler = handlers.get(args.command)
        if handler is not None:
            return handler(args)
        return _demo(args, parser)
    except HarnessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_UNKNOWN
