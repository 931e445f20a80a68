"""Spark checker throughput at scale, against DuckDB as the single-machine baseline.

    python bench/bench_spark.py [--records 20000000] [--partitions 8] [--keys 1000]
                                [--master local[2]] [--driver-memory 8g]
                                [--shuffle-partitions 8] [--dir /tmp/harness-bench]
                                [--rounds 3] [--skip-duckdb] [--keep]

Issue 5. Steps:

1. **Generate** (skipped when the file of the same parameters exists in ``--dir``): a
   history of ``--records`` events (``--records // 5`` input records, each appended,
   acknowledged, read, emitted and observed, plus one commit per partition per block),
   with a handful of planted losses and duplicates (3 of each), by
   :func:`harness.spark.check.generate.generate_history`, which knows the exact answer.
2. **Spark**: :func:`harness.spark.check_parquet` under exactly-once on ``--master``
   (default ``local[2]``), after an untimed warm-up check of a 200,000-event history (JVM
   start and JIT are not counted). Prints events checked per second and the peak resident
   memory of the driver JVM (``VmHWM`` of its process: in local mode the driver is also the
   executor) and of the Python driver.
3. **DuckDB** (a bench-only dependency: ``pip install duckdb``), same machine, same file, 2
   threads, ``--duckdb-memory`` (8GB) with spilling to ``--dir``, after Spark has stopped:
   the same rules in SQL (validation, lost, duplicate, unexpected, aborted-read,
   count-mismatch, nonmonotonic, skip, offset-ahead, offset-regression, the first witnesses
   of each). Prints its rate and Spark's rate as a fraction of it.

Issue 27: step 2 also checks a VALID history of the same size (``--skip-valid`` leaves it
out) and times, for each file, the least work any per-record check does (every group of a
``groupBy("record_id").count()`` written to the no-op sink) beside the check, in
``--rounds`` rounds (default 3) of one count and one check. The first round is the JVM's
first check at that size: what a one-shot ``check`` pays, JIT compilation included (the
200k-event warm-up does not warm the JIT for a file 20 times its size: docs/spark.md). The
issue's ratios are warm ones, the medians of the other rounds: a VALID history within 3x
its count, the planted one within 4x, and at most 5 Spark jobs for the VALID one (printed,
not asserted). Every round's verdict is compared with the generator's answer.

Both checkers' anomaly counts are compared with the generator's exact answer; a mismatch is
printed as an error (exit code 1). Also printed: the number of Spark jobs of the check, the
time of a bare Spark scan of the same file and the load average (the machine is shared:
compare ratios from one run, not absolute times across runs). Targets (issue 15; printed,
not asserted): >= 2x DuckDB's rate and within 4x a bare scan for 20M events; 100M events
(``--records 100000000``, ~3 GB of Parquet, check ``df -h`` first) within 15 minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.check import Guarantee
from harness.spark.check.generate import EVENTS_PER_RECORD, Plan, generate_history

RATIO_TARGET = 2.0
"""Issue 15: the Spark checker at least twice DuckDB's rate on the same rules."""
SCAN_TARGET = 4.0
"""Issue 15: the Spark checker within 4x the time of a bare Spark scan of the same file."""
OLD_RATE = 0.05e6
"""Events per second of the Spark checker before the fused pass (issue 15): 20M events in
400.4 s, recorded in docs/spark.md (a recorded figure, not measured in the same run: that
checker no longer exists; override it with ``--old-rate``)."""
OLD_TARGET = 20.0
"""Issue 15: the Spark checker at least 20x the rate of the checker before the fused pass."""
PLAN = Plan(lost=3, duplicated=3)
VALID_TARGET = 3.0
"""Issue 27: a VALID history within 3x the time of a per-record count of the same file."""
PLANTED_TARGET = 4.0
"""Issue 27: a history with a few planted anomalies within 4x its per-record count."""
VALID_JOBS = 5
"""Issue 27: at most this many Spark jobs for a VALID history."""


@dataclass(frozen=True)
class Target:
    """A generated history and its exact answer (anomaly kind -> count)."""

    path: str
    run_id: str
    events: int
    expected: dict[str, int]


def _generate(args: argparse.Namespace, folder: Path, plan: Plan = PLAN) -> Target:
    records = max(1, args.records // EVENTS_PER_RECORD)
    tag = "" if plan == PLAN else "-valid" if plan == Plan() else f"-{abs(hash(plan))}"
    path = folder / f"history-{records}-{args.partitions}-{args.keys}{tag}.parquet"
    answer = Path(f"{path}.json")
    if path.exists() and answer.exists():
        saved = json.loads(answer.read_text(encoding="utf-8"))
        print(f"reusing {path} ({saved['events']:,} events)")
        return Target(str(path), "generated", saved["events"], saved["expected"])
    start = time.perf_counter()
    generated = generate_history(
        path, records=records, partitions=args.partitions, keys=args.keys, plan=plan
    )
    expected = {kind.value: count for kind, count in generated.occurrences.items()}
    answer.write_text(json.dumps({"events": generated.events, "expected": expected}))
    print(
        f"generated {generated.events:,} events ({records:,} input records) in "
        f"{time.perf_counter() - start:.1f} s: {path} ({path.stat().st_size / 2**20:,.0f} MiB)"
    )
    return Target(str(path), generated.run_id, generated.events, expected)


def _peak_rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def _counts(verdict_json: dict[str, Any]) -> dict[str, int]:
    return {a["kind"]: a["count"] for a in verdict_json["anomalies"] + verdict_json["tolerated"]}


def _scan(spark: Any, path: str) -> float:
    """Seconds for a bare Spark scan of every column of ``path`` (a hash of each row folded,
    so nothing is pruned or answered from the footers)."""
    from pyspark.sql import functions as F

    frame = spark.read.parquet(path)
    start = time.perf_counter()
    frame.select(F.bit_xor(F.xxhash64(*frame.columns))).collect()
    return time.perf_counter() - start


def _grouped(spark: Any, path: str) -> float:
    """Seconds for the least work any per-record check does: one shuffle of the events by
    record id, counted (a floor for the checker, which also checks what it groups)."""
    from pyspark.sql import functions as F

    frame = spark.read.parquet(path).where(F.col("record_id").isNotNull())
    start = time.perf_counter()
    # every group written to the no-op sink: summing the counts instead lets the optimizer
    # drop the grouping (it becomes a bare count of the rows)
    frame.groupBy("record_id").count().write.format("noop").mode("overwrite").save()
    return time.perf_counter() - start


def _seconds(values: list[float]) -> str:
    return ", ".join(f"{value:.1f}" for value in values) + " s"


def _spark(
    args: argparse.Namespace, generated: Target, valid: Target | None, folder: Path
) -> tuple[float, float]:
    """The checker's rate, and its time over a bare scan's; with ``valid``, the same
    history without anomalies too, each against its own per-record count (issue 27)."""
    from harness.spark import check_parquet, spark_session

    spark = spark_session(
        args.master,
        shuffle_partitions=args.shuffle_partitions,
        driver_memory=args.driver_memory,
    )
    jvm_pid = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())  # type: ignore[union-attr]
    warm = folder / "warmup.parquet"
    generate_history(warm, records=40_000, plan=PLAN)
    start = time.perf_counter()
    check_parquet(warm, Guarantee.EXACTLY_ONCE, spark=spark)
    print(f"spark warm-up (200k events, untimed): {time.perf_counter() - start:.1f} s")
    verdicts = []
    for target, limit in [(valid, VALID_TARGET), (generated, PLANTED_TARGET)]:
        if target is None:
            continue
        # rounds of (count, check): the first is the JVM's first at this size (what a
        # one-shot `check` pays, JIT included), the others are warm (the measure)
        checks: list[float] = []
        floors: list[float] = []
        for _ in range(args.rounds):
            floors.append(_grouped(spark, target.path))
            start = time.perf_counter()
            result = check_parquet(target.path, Guarantee.EXACTLY_ONCE, spark=spark)
            checks.append(time.perf_counter() - start)
            verdict = result.to_json()["runs"][target.run_id]
            _compare("spark", _counts(verdict), target)
        elapsed = statistics.median(checks[1:]) if len(checks) > 1 else checks[0]
        floor = statistics.median(floors[1:]) if len(floors) > 1 else floors[0]
        rate = target.events / elapsed
        verdicts.append((target, verdict, elapsed, rate))
        name = "VALID" if target is valid else "planted"
        print(
            f"spark {args.master}, {name} history: {target.events:,} events; status "
            f"{verdict['status']}; {result.jobs} Spark jobs"
            + (
                f" (target <= {VALID_JOBS}: {'met' if result.jobs <= VALID_JOBS else 'NOT met'})"
                if target is valid
                else ""
            )
            + f"; anomalies {_counts(verdict)}"
        )
        print(
            f"  first round (the JVM's first check at this size, JIT included): check "
            f"{checks[0]:.1f} s, per-record count {floors[0]:.1f} s, checker / count "
            f"{checks[0] / floors[0]:.1f}"
        )
        if len(checks) > 1:
            print(
                f"  warm rounds ({len(checks) - 1}; checks {_seconds(checks[1:])}, counts "
                f"{_seconds(floors[1:])}): median check {elapsed:.1f} s = "
                f"{rate / 1e6:.2f} M events/s, median count {floor:.1f} s, checker / count "
                f"{elapsed / floor:.1f} (target <= {limit}: "
                f"{'met' if elapsed / floor <= limit else 'NOT met'})"
            )
    target, verdict, elapsed, rate = verdicts[-1]
    print(
        f"  peak driver JVM RSS {_peak_rss_kib(jvm_pid) / 2**20:.2f} GiB "
        f"(heap limit {args.driver_memory}); Python driver peak RSS "
        f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GiB"
    )
    scan = _scan(spark, generated.path)
    print(
        f"  bare Spark scan of the planted file: {scan:.1f} s = "
        f"{generated.events / scan / 1e6:.2f} M events/s; checker / scan time "
        f"{elapsed / scan:.1f} (issue 15's target <= {SCAN_TARGET}: "
        f"{'met' if elapsed / scan <= SCAN_TARGET else 'NOT met'})"
    )
    from harness.spark import stop_spark_session

    stop_spark_session()  # give its memory back before DuckDB runs in this process
    return rate, elapsed / scan


def _compare(name: str, counts: dict[str, int], generated: Target) -> None:
    expected = generated.expected
    if counts != expected:
        print(f"ERROR: {name} found {counts}, the generator planted {expected}")
        global FAILED
        FAILED = True
    else:
        print(f"  {name} anomaly counts match the planted ones: {counts}")


FAILED = False

DUCKDB_SQL = """
CREATE TEMP VIEW ev AS
SELECT e.file_row_number AS pos, e.*, p.pno, s.sk
FROM read_parquet($path, file_row_number = true) e
LEFT JOIN parts p USING (partition) LEFT JOIN sinks s USING (sink);

CREATE TEMP TABLE summary AS
SELECT count(*) AS n,
  count(*) FILTER (WHERE index IS DISTINCT FROM pos
    OR kind NOT IN ('append','ack','truncate','start','crash','rollback','zombie','error',
      'fetch','read','emit','put','commit','txn-begin','txn-commit','txn-abort','drain',
      'observe','end')
    OR (kind IN ('append','ack','truncate','rollback','fetch','read','commit')
      AND partition IS NULL)
    OR (kind IN ('append','ack','truncate','read','commit') AND "offset" IS NULL)
    OR (kind IN ('append','ack','read') AND record_id IS NULL)
    OR (kind IN ('append','put') AND (key IS NULL OR value IS NULL))
    OR (kind IN ('start','crash','zombie','error','fetch','read','emit','put','commit',
      'txn-begin','txn-commit','txn-abort') AND process IS NULL)
    OR (kind = 'emit' AND (sink IS NULL OR output_id IS NULL OR part IS NULL OR parts IS NULL))
    OR (kind IN ('put','observe') AND sink IS NULL)
    OR (kind IN ('txn-begin','txn-commit','txn-abort') AND txn IS NULL)
    OR (kind IN ('crash','error','end') AND detail IS NULL)
    OR "offset" < 0 OR part < 0 OR parts < 1 OR part >= parts
    OR (partition IS NOT NULL AND pno IS NULL)
    OR (kind IN ('emit','put','observe') AND sk IS NULL)
    OR (kind = 'put' AND sk & 2 = 0)
    OR (kind = 'observe' AND sk & 1 <> 0 AND (output_id IS NULL OR part IS NULL))
    OR (kind = 'observe' AND sk & 2 <> 0
      AND (output_id IS NOT NULL OR key IS NULL OR value IS NULL))
  ) AS bad,
  count(*) FILTER (WHERE kind = 'end') AS ends,
  max(pos) FILTER (WHERE kind = 'end') AS end_pos,
  arg_max(detail, pos) FILTER (WHERE kind = 'end') AS end_detail,
  count(*) FILTER (WHERE kind = 'drain') AS drains
FROM ev;

CREATE TEMP TABLE rec AS
SELECT record_id,
  count(*) FILTER (WHERE kind = 'append') AS n_app,
  min(pos) FILTER (WHERE kind = 'append') AS app_pos,
  max(pno) FILTER (WHERE kind = 'append') AS app_pno,
  max("offset") FILTER (WHERE kind = 'append') AS app_off,
  max(key) FILTER (WHERE kind = 'append') AS key,
  max(value) FILTER (WHERE kind = 'append') AS app_value,
  coalesce(bool_or(detail = 'poison') FILTER (WHERE kind = 'append'), false) AS poison,
  count(*) FILTER (WHERE kind = 'ack') AS ack_n,
  min(pos) FILTER (WHERE kind = 'ack') AS ack_first,
  min(pos) FILTER (WHERE kind IN ('ack','read')) AS ar_pos,
  min(pno) FILTER (WHERE kind IN ('ack','read')) AS ar_pno_lo,
  max(pno) FILTER (WHERE kind IN ('ack','read')) AS ar_pno_hi,
  min("offset") FILTER (WHERE kind IN ('ack','read')) AS ar_off_lo,
  max("offset") FILTER (WHERE kind IN ('ack','read')) AS ar_off_hi,
  max(pos) FILTER (WHERE kind = 'read') AS read_last,
  max(pos) FILTER (WHERE kind = 'emit') AS emit_last,
  greatest(1, coalesce(max(parts) FILTER (WHERE kind = 'emit'), 1)) AS parts
FROM ev
WHERE record_id IS NOT NULL AND kind IN ('append','ack','read','emit')
GROUP BY record_id;

CREATE TEMP TABLE obs AS
SELECT pos, record_id, part, output_id, sink, sk FROM ev WHERE kind = 'observe' AND sk & 1 <> 0;

CREATE TEMP TABLE eff AS
SELECT record_id, part, count(*) AS copies
FROM obs WHERE record_id IS NOT NULL GROUP BY record_id, part;

CREATE TEMP TABLE parted AS
SELECT r.*, coalesce(e.below, 0) AS below
FROM rec r LEFT JOIN (
  SELECT e.record_id, count(*) FILTER (WHERE e.part < r.parts) AS below
  FROM eff e JOIN rec r USING (record_id) GROUP BY e.record_id
) e USING (record_id);

CREATE TEMP TABLE certificate AS
SELECT count(*) AS bad_records FROM parted
WHERE n_app > 1 OR (n_app = 0 AND ar_pos IS NOT NULL)
  OR (n_app = 1 AND ar_pos IS NOT NULL AND (ar_pos < app_pos OR ar_pno_lo <> app_pno
      OR ar_pno_hi <> app_pno OR ar_off_lo <> app_off OR ar_off_hi <> app_off));

CREATE TEMP TABLE prow AS
SELECT app_pno AS pno, app_pos AS pos, 'append' AS kind, app_off AS off, NULL::BIGINT AS process,
  false AS redelivered FROM rec WHERE n_app >= 1
UNION ALL
SELECT app_pno, ack_first, 'ack', app_off, NULL, false FROM rec WHERE n_app >= 1 AND ack_n > 0
UNION ALL
SELECT pno, pos, kind, "offset", process, coalesce(detail = 'redelivered', false) FROM ev
WHERE kind IN ('read','fetch','truncate','commit','rollback') AND pno IS NOT NULL;

CREATE TEMP TABLE lcheck AS
SELECT count(*) FILTER (WHERE kind = 'append' AND acked >= off) AS violations FROM (
  SELECT kind, off, max(CASE WHEN kind = 'ack' THEN off END) OVER (PARTITION BY pno ORDER BY pos
    ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS acked
  FROM prow WHERE kind IN ('append', 'ack'));

CREATE TEMP TABLE commits AS
SELECT *,
  kind = 'commit' AND ((best IS NULL AND off > 0) OR off - 1 > best.o) AS ahead,
  kind = 'commit' AND stored.o IS NOT NULL AND off < stored.o AS regression,
  kind = 'commit' AND (committed IS NULL OR off > committed) AS step
FROM (
  SELECT *,
    max(CASE WHEN kind = 'read' THEN struct_pack(o := off, p := -pos) END) OVER w AS best,
    max(CASE WHEN kind IN ('commit', 'rollback') THEN struct_pack(p := pos, o := off) END)
      OVER w AS stored,
    max(CASE WHEN kind = 'commit' THEN off END) OVER w AS committed
  FROM prow WHERE kind IN ('read', 'commit', 'rollback')
  WINDOW w AS (PARTITION BY pno ORDER BY pos ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
) WHERE kind = 'commit';

CREATE TEMP TABLE truncated AS
SELECT pos, truncated FROM (
  SELECT kind, pos, max(CASE WHEN kind = 'truncate' THEN struct_pack(p := pos, o := off) END)
    OVER (PARTITION BY pno ORDER BY pos ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
    AS truncated
  FROM prow WHERE kind IN ('read', 'truncate')
) WHERE kind = 'read' AND truncated IS NOT NULL;

CREATE TEMP TABLE skips AS
SELECT r.pos FROM (
  SELECT *,
    max(CASE WHEN kind = 'read' THEN struct_pack(p := pos, o := off) END) OVER own AS prev,
    max(CASE WHEN kind = 'fetch' THEN struct_pack(p := pos, o := off) END) OVER own AS fetched
  FROM prow WHERE kind = 'fetch' OR (kind = 'read' AND NOT redelivered)
  WINDOW own AS (PARTITION BY pno, process ORDER BY pos
    ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
) r LEFT JOIN truncated t USING (pos)
WHERE r.kind = 'read' AND CASE
  WHEN fetched IS NOT NULL AND (prev IS NULL OR fetched.p > prev.p) THEN
    CASE WHEN fetched.o IS NULL THEN off > coalesce(t.truncated.o, 0) ELSE off > fetched.o END
  WHEN prev IS NOT NULL THEN off - 1 > prev.o ELSE false END;
"""

DUCKDB_COUNTS = """
WITH lost_records AS (
  SELECT record_id, app_pno AS pno, app_off AS off, parts - below AS missing,
    list_sort(list_distinct(list_filter([ack_first, read_last, emit_last],
      lambda x: x IS NOT NULL))) AS ev
  FROM parted WHERE ack_n > 0 AND NOT poison AND parts > below AND $settled
), steps AS (
  SELECT pno, off, pos FROM commits WHERE step
), past AS (
  SELECT l.record_id, min(s.pos) AS commit_pos FROM lost_records l JOIN steps s
  ON s.pno = l.pno AND s.off > l.off GROUP BY l.record_id
), firsts AS (
  SELECT o.sink, r.app_pno AS pno, r.app_off AS off, min(o.pos) AS pos, o.record_id
  FROM obs o JOIN rec r USING (record_id) JOIN ordered USING (sink)
  WHERE r.n_app >= 1 GROUP BY o.sink, o.record_id, o.part, r.app_pno, r.app_off
), pairs AS (
  SELECT * FROM (SELECT *, lag(off) OVER (PARTITION BY sink, pno ORDER BY pos) AS prev_off,
    lag(pos) OVER (PARTITION BY sink, pno ORDER BY pos) AS prev_pos FROM firsts)
  WHERE off < prev_off
), expected AS (
  SELECT a.sink, r.key,
    CASE WHEN a.agg = 'count' THEN count(*) ELSE sum(r.app_value) END AS expected
  FROM rec r, aggregated a WHERE r.ack_n > 0 AND r.n_app >= 1 AND NOT r.poison
  GROUP BY a.sink, a.agg, r.key
), observed AS (
  SELECT sink, key, arg_max(value, pos) AS observed, max(pos) AS pos FROM ev
  WHERE kind = 'observe' AND sink IN (SELECT sink FROM aggregated) GROUP BY sink, key
), mismatched AS (
  SELECT coalesce(e.sink, o.sink) AS sink, coalesce(e.key, o.key) AS key,
    coalesce(e.expected, 0) AS expected, coalesce(o.observed, 0) AS observed, o.pos
  FROM expected e FULL OUTER JOIN observed o ON e.sink = o.sink AND e.key = o.key
  WHERE coalesce(o.observed, 0) <> coalesce(e.expected, 0)
    AND (coalesce(o.observed, 0) > coalesce(e.expected, 0) OR $settled)
), unexpected AS (
  SELECT o.pos FROM obs o LEFT JOIN rec r USING (record_id)
  WHERE o.record_id IS NULL OR coalesce(r.ack_n, 0) = 0
), aborted AS (
  SELECT o.pos FROM obs o JOIN (
    SELECT e.output_id FROM ev e
    JOIN (SELECT txn FROM ev WHERE kind = 'txn-abort') a USING (txn)
    WHERE e.kind = 'emit' GROUP BY e.output_id) x USING (output_id)
), duplicated AS (
  SELECT e.record_id, e.part, e.copies, list(o.pos ORDER BY o.pos) AS positions
  FROM eff e JOIN rec r USING (record_id) JOIN obs o ON o.record_id = e.record_id
    AND o.part = e.part
  WHERE r.ack_n > 0 AND e.copies > 1 GROUP BY e.record_id, e.part, e.copies
)
SELECT 'lost' AS kind, sum(missing)::BIGINT AS n,
  (SELECT list(ev) FROM (SELECT ev FROM lost_records ORDER BY ev, record_id LIMIT 5)) AS first
FROM lost_records
UNION ALL SELECT 'duplicate', sum(copies - 1)::BIGINT,
  (SELECT list(positions) FROM (SELECT positions FROM duplicated ORDER BY positions LIMIT 5))
FROM duplicated
UNION ALL SELECT 'unexpected', count(*),
  (SELECT list([pos]) FROM (SELECT pos FROM unexpected ORDER BY pos LIMIT 5)) FROM unexpected
UNION ALL SELECT 'aborted-read', count(*), NULL FROM aborted
UNION ALL SELECT 'count-mismatch', count(*),
  (SELECT list([pos]) FROM (SELECT pos FROM mismatched ORDER BY pos NULLS FIRST LIMIT 5))
FROM mismatched
UNION ALL SELECT 'nonmonotonic', count(*),
  (SELECT list([prev_pos, pos]) FROM (SELECT prev_pos, pos FROM pairs ORDER BY 1, 2 LIMIT 5))
FROM pairs
UNION ALL SELECT 'skip', count(*),
  (SELECT list([pos]) FROM (SELECT pos FROM skips ORDER BY pos LIMIT 5)) FROM skips
UNION ALL SELECT 'offset-ahead',
  (SELECT count(*) FROM commits WHERE ahead) + (SELECT count(*) FROM past),
  (SELECT list([pos]) FROM (SELECT pos FROM commits WHERE ahead ORDER BY pos LIMIT 5))
FROM (SELECT 1)
UNION ALL SELECT 'offset-regression', count(*) FILTER (WHERE regression),
  (SELECT list([pos]) FROM (SELECT pos FROM commits WHERE regression ORDER BY pos LIMIT 5))
FROM commits
UNION ALL SELECT 'validation',
  (SELECT bad FROM summary) + (SELECT bad_records FROM certificate)
  + (SELECT violations FROM lcheck), NULL
"""


def _duckdb(args: argparse.Namespace, generated: Target, folder: Path) -> float:
    try:
        import duckdb
    except ImportError:
        print("duckdb is not installed (pip install duckdb): no baseline")
        return 0.0
    from harness.spark.source import discover_runs

    meta = discover_runs(generated.path)[0].meta
    con = duckdb.connect(
        config={
            "threads": 2,
            "memory_limit": args.duckdb_memory,
            "temp_directory": str(folder / "duckdb-tmp"),
        }
    )
    start = time.perf_counter()
    con.execute("CREATE TEMP TABLE parts (partition VARCHAR, pno INTEGER)")
    con.executemany(
        "INSERT INTO parts VALUES (?, ?)", [(p, i) for i, p in enumerate(meta.partitions)]
    )
    con.execute("CREATE TEMP TABLE sinks (sink VARCHAR, sk INTEGER)")
    codes = []
    for name, spec in meta.sinks.items():
        code = (1 if spec.kind.value == "log" else 2) | (4 if spec.ordered else 0)
        codes.append((name, code))
    con.executemany("INSERT INTO sinks VALUES (?, ?)", codes)
    con.execute("CREATE TEMP TABLE ordered AS SELECT sink FROM sinks WHERE sk & 5 = 5")
    con.execute(
        "CREATE TEMP TABLE aggregated AS SELECT * FROM (VALUES "
        + ", ".join(
            f"('{name}', '{spec.aggregate.value}')"
            for name, spec in meta.sinks.items()
            if spec.aggregate is not None
        )
        + ") t(sink, agg)"
    )
    for statement in DUCKDB_SQL.split(";"):
        if statement.strip():
            con.execute(statement.replace("$path", f"'{generated.path}'"))
    summary = con.execute("SELECT ends, drains, end_detail FROM summary").fetchone()
    assert summary is not None
    settled = "true" if summary[1] > 0 and summary[2] == "complete" else "false"
    rows = con.execute(DUCKDB_COUNTS.replace("$settled", settled)).fetchall()
    elapsed = time.perf_counter() - start
    counts = {kind: int(n) for kind, n, _ in rows if n and kind != "validation"}
    problems = next(int(n) for kind, n, _ in rows if kind == "validation")
    rate = generated.events / elapsed
    print(
        f"duckdb (2 threads): {generated.events:,} events in {elapsed:.1f} s = "
        f"{rate / 1e6:.2f} M events/s; validation problems {problems}"
    )
    _compare("duckdb", counts, generated)
    con.close()
    return rate


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=20_000_000, help="history events")
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--driver-memory", default="8g")
    parser.add_argument("--shuffle-partitions", type=int, default=8)
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "harness-bench")
    parser.add_argument("--skip-duckdb", action="store_true")
    parser.add_argument("--duckdb-memory", default="8GB", help="DuckDB memory_limit")
    parser.add_argument("--skip-spark", action="store_true")
    parser.add_argument("--keep", action="store_true", help="keep the generated files")
    parser.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="rounds of (count, check) per file: the first, then warm ones (median)",
    )
    parser.add_argument(
        "--skip-valid", action="store_true", help="no VALID history (the planted one only)"
    )
    parser.add_argument(
        "--old-rate", type=float, default=OLD_RATE, help="the old checker's events/s (recorded)"
    )
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, got {args.rounds}")
    args.dir.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(args.dir).free
    print(f"{args.dir}: {free / 2**30:.0f} GiB free; cpu count {os.cpu_count()}")
    print("load average at start (1, 5, 15 min): {:.1f} {:.1f} {:.1f}".format(*os.getloadavg()))
    generated = _generate(args, args.dir)
    valid = None if args.skip_valid else _generate(args, args.dir, Plan())
    spark_rate = 0.0 if args.skip_spark else _spark(args, generated, valid, args.dir)[0]
    duck_rate = 0.0 if args.skip_duckdb else _duckdb(args, generated, args.dir)
    print("load average at end (1, 5, 15 min): {:.1f} {:.1f} {:.1f}".format(*os.getloadavg()))
    if spark_rate:
        old = spark_rate / args.old_rate
        print(
            f"spark rate / the old checker's recorded rate ({args.old_rate / 1e6:.2f} M "
            f"events/s, not measured in this run): {old:.1f} (target >= {OLD_TARGET}: "
            f"{'met' if old >= OLD_TARGET else 'NOT met'})"
        )
    if spark_rate and duck_rate:
        ratio = spark_rate / duck_rate
        print(
            f"spark / duckdb rate: {ratio:.2f} (target >= {RATIO_TARGET}: "
            f"{'met' if ratio >= RATIO_TARGET else 'NOT met'})"
        )
    if not args.keep:
        for target in (generated, valid):
            if target is not None:
                Path(target.path).unlink(missing_ok=True)
                Path(target.path + ".json").unlink(missing_ok=True)
    (args.dir / "warmup.parquet").unlink(missing_ok=True)
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
