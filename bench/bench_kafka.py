"""Kafka client doubles: schedules/s of an unchanged confluent_kafka consumer against the
same consumer written against ``ctx``.

    python bench/bench_kafka.py [--examples 400] [--repeat 3]

Issue 14. Both processors consume ``orders``, write each record to ``receipts``, deliver it
and then commit the record's offset (at-least-once): the Kafka one is
``scenarios/kafka_apps/manual_commit.py:correct`` (``poll``, ``produce``, ``flush``,
``commit(asynchronous=False)``), run by :class:`harness.kafka.KafkaApp` with the client
doubles (fresh module per instance, every client call a fault point); the baseline is the
same loop on ``ctx`` (``read``, ``emit``, ``commit``, ``offsets.put``). Hypothesis draws
``--examples`` schedules once (every fault but duplicate, seed 0); each processor then runs
every schedule and checks its history with ``run_once``, ``--repeat`` times, best time kept.
Prints schedules/s for both and the ratio (target >= 0.5), and the mean history length of
each (the Kafka consumer makes one more call per record, so its histories differ a little).
Timings are noisy on a loaded machine; the ratio is measured in one run. Never asserts.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import hypothesis
from hypothesis import HealthCheck, Phase, given

from harness import Schedule, Topology, log_sink, run_once
from harness.kafka import KafkaApp
from harness.sim import Context
from harness.strategies.schedules import ALL_FAULTS, Fault, schedules

ROOT = Path(__file__).resolve().parent.parent
TARGET = 0.5
P = "orders[0]"  # the Kafka door names input partitions by topic


def ctx_consumer(ctx: Context) -> None:
    """The baseline: the Kafka consumer's loop, written against ctx."""
    out = ctx.output("receipts")
    for record in ctx.read(P, ctx.offsets.get(P)):
        out.emit(record)
        out.commit()
        ctx.offsets.put(P, record.next)


def draw(examples: int, topology: Topology) -> list[Schedule]:
    drawn: list[Schedule] = []
    faults = ALL_FAULTS - {Fault.DUPLICATE}

    @hypothesis.settings(
        max_examples=examples,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @hypothesis.seed(0)
    @given(schedules(topology, faults))
    def collect(schedule: Schedule) -> None:
        drawn.append(schedule)

    collect()
    return drawn


def rate(
    processor: object, drawn: list[Schedule], topology: Topology, repeat: int
) -> tuple[float, float]:
    best = float("inf")
    events: list[int] = []
    for _ in range(repeat):
        events = []
        started = time.perf_counter()
        for schedule in drawn:
            history, _ = run_once(processor, schedule, "at-least-once", topology=topology)  # type: ignore[arg-type]
            events.append(len(history.events))
        best = min(best, time.perf_counter() - started)
    return len(drawn) / best, statistics.mean(events)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=400)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    app = KafkaApp(
        "scenarios.kafka_apps.manual_commit:correct", inputs=["orders"], outputs=["receipts"]
    )
    topology = Topology(sinks={"receipts": log_sink()}, offset_sync=True, names=(P,))
    assert topology == app.topology
    drawn = draw(args.examples, topology)
    for processor in (ctx_consumer, app):  # warm up: imports, compiled module
        run_once(processor, drawn[0], "at-least-once", topology=topology)  # type: ignore[arg-type]
    base, base_events = rate(ctx_consumer, drawn, topology, args.repeat)
    kafka, kafka_events = rate(app, drawn, topology, args.repeat)
    print(f"schedules drawn: {len(drawn)} (every fault but duplicate, seed 0)")
    print(f"ctx consumer:   {base:8.1f} schedules/s  ({base_events:.1f} events per history)")
    print(f"kafka consumer: {kafka:8.1f} schedules/s  ({kafka_events:.1f} events per history)")
    ratio = kafka / base
    verdict = "met" if ratio >= TARGET else "NOT met"
    print(f"ratio kafka/ctx: {ratio:.2f} (target >= {TARGET}: {verdict})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
