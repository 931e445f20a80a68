"""``python -m harness list``: the shipped scenarios and their variants."""

from __future__ import annotations

import argparse
import json
from typing import Final

from harness.cli._common import EXIT_OK, load_scenarios

__all__ = ["DESCRIPTION", "add_arguments", "main"]

DESCRIPTION: Final = "List the scenarios, the guarantee each claims and its variants."


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
