"""Kafka client doubles: schedules/s of an unchanged confluent_kafka consumer and of an
unchanged aiokafka consumer against the same consumer written against ``ctx``.

    python bench/bench_kafka.py [--examples 400] [--repeat 3]

Issues 14 and 29. The processors consume ``orders``, write each record to ``receipts``, deliver it
and then commit the record's offset (at-least-once): the Kafka one is
``scenarios/kafka_apps/manual_commit.py:correct`` (``poll``, ``produce``, ``flush``,
``commit(asynchronous=False)``), run by :class:`harness.kafka.KafkaApp` with the client
doubles (fresh module per instance, every client call a fault point); the aiokafka one is
``bench/kafka_bench_apps.py:aiokafka_consumer`` (``async for``, ``send_and_wait``,
``commit()`` under ``asyncio.run``: a fresh event loop per instance); the baseline is the
same loop on ``ctx`` (``read``, ``emit``, ``commit``, ``offsets.put``). Hypothesis draws
``--examples`` schedules once (every fault but duplicate, seed 0); each processor then runs
every schedule and checks its history with ``run_once``, ``--repeat`` rounds (each round
runs every processor in turn), best time kept.
Prints schedules/s for each, in wall time and in CPU time (the process's own), and the ratio
of each client consumer to ``ctx`` in both (target >= 0.5 for both), and the mean history
length of each (the client consumers make one more call per
record, so their histories differ a little).
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
from harness.faults.kinds import ALL_FAULTS, Fault
from harness.kafka import KafkaApp
from harness.sim import Context
from harness.strategies.schedules import schedules

ROOT = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent
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


def once(
    processor: object, drawn: list[Schedule], topology: Topology
) -> tuple[float, float, float]:
    """Wall seconds and CPU seconds (this process's) to run and check every drawn schedule,
    and the mean history length."""
    events: list[int] = []
    started, cpu = time.perf_counter(), time.process_time()
    for schedule in drawn:
        history, _ = run_once(processor, schedule, "at-least-once", topology=topology)  # type: ignore[arg-type]
        events.append(len(history.events))
    return time.perf_counter() - started, time.process_time() - cpu, statistics.mean(events)


def rates(
    processors: dict[str, object], drawn: list[Schedule], topology: Topology, repeat: int
) -> dict[str, tuple[float, float, float]]:
    """``{name: (schedules/s of wall time, of CPU time, mean events)}``, the best of
    ``repeat`` rounds; each round runs every processor in turn, so a load change on a shared
    machine hits them alike. CPU time is what the process itself spent: on a machine loaded
    by others it moves far less than wall time."""
    best = dict.fromkeys(processors, float("inf"))
    best_cpu = dict.fromkeys(processors, float("inf"))
    events = dict.fromkeys(processors, 0.0)
    for _ in range(repeat):
        for name, processor in processors.items():
            seconds, cpu, events[name] = once(processor, drawn, topology)
            best[name] = min(best[name], seconds)
            best_cpu[name] = min(best_cpu[name], cpu)
    return {
        name: (len(drawn) / best[name], len(drawn) / best_cpu[name], events[name])
        for name in processors
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=400)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    app = KafkaApp(
        "scenarios.kafka_apps.manual_commit:correct", inputs=["orders"], outputs=["receipts"]
    )
    aio = KafkaApp(
        f"{HERE / 'kafka_bench_apps.py'}:aiokafka_consumer",
        inputs=["orders"],
        outputs=["receipts"],
    )
    topology = Topology(sinks={"receipts": log_sink()}, offset_sync=True, names=(P,))
    assert topology == app.topology == aio.topology
    drawn = draw(args.examples, topology)
    for processor in (ctx_consumer, app, aio):  # warm up: imports, compiled module
        run_once(processor, drawn[0], "at-least-once", topology=topology)
    measured = rates(
        {"ctx": ctx_consumer, "confluent_kafka": app, "aiokafka": aio}, drawn, topology, args.repeat
    )
    base, base_cpu, base_events = measured.pop("ctx")
    print(f"schedules drawn: {len(drawn)} (every fault but duplicate, seed 0)")
    print(
        f"{'ctx consumer:':26} {base:8.1f} schedules/s wall, {base_cpu:8.1f} CPU  "
        f"({base_events:.1f} events per history)"
    )
    for name, (speed, cpu, events) in measured.items():
        ratio, cpu_ratio = speed / base, cpu / base_cpu
        verdict = "met" if min(ratio, cpu_ratio) >= TARGET else "NOT met"
        print(
            f"{name + ' consumer:':26} {speed:8.1f} schedules/s wall, {cpu:8.1f} CPU  "
            f"({events:.1f} events per history); ratio to ctx {ratio:.2f} wall, "
            f"{cpu_ratio:.2f} CPU (target >= {TARGET}: {verdict})"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
