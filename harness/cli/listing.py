"""``python -m harness list``: the shipped scenarios and their variants, then the built-in
Structured Streaming variants (searched through ``spark-job``, not by ``run``: a Spark
schedule costs seconds, a scenario's milliseconds)."""

from __future__ import annotations

import argparse
from typing import Final

from harness.catalogue.streams import STREAM_SUBJECTS
from harness.cli._common import EXIT_OK, load_scenarios, print_output

__all__ = ["DESCRIPTION", "add_arguments", "main"]

DESCRIPTION: Final = (
    "List the scenarios, the guarantee each claims and its variants, then the built-in "
    "Structured Streaming variants that `spark-job variant:NAME` searches."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare ``list``'s options."""
    parser.add_argument("--json", action="store_true", help="print JSON")


def main(args: argparse.Namespace) -> int:
    """Print the scenarios; always 0."""
    scenarios = load_scenarios()
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
        variants = sum(len(s.variants) for s in scenarios.values())
        summary = (
            f"{len(data)} scenarios, {variants} variants, {len(STREAM_SUBJECTS)} streaming variants"
        )
        streams = [
            {
                "target": subject.target,
                "guarantee": subject.guarantee.value,
                "expected": {
                    guarantee.value: sorted(kind.value for kind in kinds)
                    for guarantee, kinds in subject.fails.items()
                },
                "story": subject.story,
            }
            for subject in STREAM_SUBJECTS
        ]
        print_output("list", "valid", summary, scenarios=data, streams=streams)
        return EXIT_OK
    for s in scenarios.values():
        print(f"{s.name}  ({s.guarantee.value}; seed {s.seed})")
        print(f"  {s.title}")
        for v in s.variants:
            expected = (
                "correct" if v.correct else "bug: " + ", ".join(sorted(k.value for k in v.expected))
            )
            print(f"    {v.name:28s} {expected}")
    print("\nStructured Streaming variants  (python -m harness spark-job TARGET; needs Spark)")
    for subject in STREAM_SUBJECTS:
        stronger = "; ".join(
            f"under {guarantee.value}: {', '.join(sorted(kind.value for kind in kinds))}"
            for guarantee, kinds in subject.fails.items()
        )
        print(f"  {subject.target:34s} holds {subject.guarantee.value}")
        if stronger:
            print(f"    {'':32s} bug {stronger}")
    return EXIT_OK
