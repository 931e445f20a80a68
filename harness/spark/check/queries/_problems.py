"""The validator's reasons for runs known to fail it: its per-event rules in its order, and
its per-record and per-partition state replayed with window functions (internal)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from harness.history.events import (
    INT_FIELDS,
    RESENT,
)
from harness.spark.check.queries._load import (
    _COLUMNS,
    _INT,
    _LONG,
    _SEQ,
    _STR,
    ACK,
    APPEND,
    PROBLEM_FLAGS,
    READ,
    QueryContext,
    conform,
    union_all,
    with_flags,
)

# ----------------------------------------------------------------------------- problems


def problems(context: QueryContext, runs: Sequence[int]) -> dict[int, list[dict[str, Any]]]:
    """For each run that fails validation: its first 20 event problems in the validator's
    order (by event, then by rule), as rows of ``pos, code`` and the event's fields, plus
    ``earlier_*`` (the append that placed the record) and ``acked_*`` (the acknowledged
    offset an append is not above); like the validator, these name events by their
    ``index`` field, and the event itself by its position."""
    assert context.raw is not None
    ev = with_flags(context.raw.where(F.col("run").isin(*runs)).drop("bad"))
    entries = [
        F.when(
            F.col(f"f_{name}"),
            F.struct(F.lit(_SEQ[name]).alias("seq"), F.lit(name).alias("code")),
        )
        for name in PROBLEM_FLAGS
    ]
    local = ev.select(
        *[name for name in ev.columns if not name.startswith("f_")],
        F.filter(F.array(*entries), lambda x: x.isNotNull()).alias("found"),
    )
    cached = context.keep(local)
    per_event = cached.select("*", F.explode("found").alias("problem")).select(
        "*", F.col("problem.seq").alias("seq"), F.col("problem.code").alias("code")
    )
    stateful = _stateful(cached.where(F.col("stateful")))
    columns = [
        ("run", _INT),
        ("pos", _LONG),
        ("seq", _INT),
        ("code", _STR),
        *[
            (name, _LONG if name in INT_FIELDS or name == "index" else _STR)
            for name in _COLUMNS
            if name != "dlsn"
        ],
        ("earlier_pos", _LONG),
        ("earlier_partition", _STR),
        ("earlier_offset", _LONG),
        ("acked_offset", _LONG),
        ("acked_pos", _LONG),
    ]
    found = union_all([conform(per_event, columns), conform(stateful, columns)])
    order = Window.partitionBy("run").orderBy("pos", "seq")
    rows = (
        found.select("*", F.row_number().over(order).alias("rn")).where(F.col("rn") <= 20).collect()
    )
    result: dict[int, list[dict[str, Any]]] = {run: [] for run in runs}
    for row in sorted(rows, key=lambda r: (r["run"], r["rn"])):
        result[row["run"]].append(row.asDict())
    return result


def _stateful(candidates: DataFrame, rounds: int = 2) -> DataFrame:
    """The validator's append/ack/read rules over events that pass the per-event rules.

    The validator keeps, per record, the first append it accepted, and per partition the
    highest offset acknowledged so far (by an ack of an accepted append at the same place).
    Both depend on each other in event order; this computes them with window functions by
    first counting every ack that matches an earlier append at its place, then (``rounds -
    1`` more times) only the acks that match the append accepted before them. That is the
    validator's answer whenever no record id is appended twice at different places (and
    in nearly all cases when one is)."""
    current = _matching(candidates)
    for round_number in range(rounds):
        current = _round(current, last=round_number + 1 == rounds)
    return _coded(current)


def _matching(candidates: DataFrame) -> DataFrame:
    """The candidates' fields, and ``counts``: the event is an ack that matches an earlier
    append at its place (the first round's guess of the acks that count)."""
    kc = F.col("kc")
    pos = F.col("pos")
    base = candidates.select(
        "run",
        "pos",
        "kc",
        "index",
        "kind",
        "process",
        "partition",
        "pno",
        "offset",
        "record_id",
        "part",
        "parts",
        "key",
        "value",
        "sink",
        "output_id",
        "txn",
        "detail",
    )
    same_place = Window.partitionBy("run", "record_id", "pno", "offset").orderBy("pos")
    matching = base.select(
        "*",
        (
            (kc == ACK)
            & F.min(F.when(kc == APPEND, pos))
            .over(same_place.rowsBetween(Window.unboundedPreceding, -1))
            .isNotNull()
        ).alias("counts"),
    )
    return matching


def _round(current: DataFrame, *, last: bool) -> DataFrame:
    """One round: per partition the highest offset acknowledged before each event by an ack
    that counts (``acked``), per record the first append accepted (``accepted``), and
    (unless ``last``) the acks that count in the next round."""
    kc = F.col("kc")
    pos = F.col("pos")
    per_partition = (
        Window.partitionBy("run", "pno").orderBy("pos").rowsBetween(Window.unboundedPreceding, -1)
    )
    per_record = Window.partitionBy("run", "record_id")
    step = current.select(
        *[c for c in current.columns if c not in ("acked", "accepted")],
        F.max(
            F.when(
                F.col("counts"),
                F.struct(F.col("offset").alias("o"), (-pos).alias("p"), F.col("index").alias("i")),
            )
        )
        .over(per_partition)
        .alias("acked"),
    )
    accepts = (kc == APPEND) & (F.col("acked").isNull() | (F.col("offset") > F.col("acked.o")))
    step = step.select(
        "*",
        F.min(
            F.when(
                accepts,
                F.struct(
                    pos.alias("p"),
                    F.col("pno").alias("n"),
                    F.col("offset").alias("o"),
                    F.col("partition").alias("name"),
                    F.col("index").alias("i"),
                ),
            )
        )
        .over(per_record)
        .alias("accepted"),
    )
    if not last:
        step = step.withColumn(
            "counts",
            (kc == ACK)
            & F.col("accepted").isNotNull()
            & (F.col("accepted.p") < pos)
            & (F.col("accepted.n") == F.col("pno"))
            & (F.col("accepted.o") == F.col("offset")),
        )
    return step


def _coded(current: DataFrame) -> DataFrame:
    """The events the append/ack/read rules refuse, with the validator's problem code and
    the facts its message names."""
    kc = F.col("kc")
    pos = F.col("pos")
    accepted = F.col("accepted")
    earlier = accepted.isNotNull() & (F.col("accepted.p") < pos)
    code = (
        # an upstream's resend is the local checker's alone, for now: the run is UNKNOWN here
        F.when((kc == APPEND) & (F.col("detail") == RESENT), "resent")
        .when((kc == APPEND) & earlier, "duplicate")
        .when(
            (kc == APPEND) & F.col("acked").isNotNull() & (F.col("offset") <= F.col("acked.o")),
            "not_above",
        )
        .when(kc.isin(ACK, READ) & ~F.coalesce(earlier, F.lit(False)), "not_appended")
        .when(
            kc.isin(ACK, READ)
            & ((F.col("accepted.n") != F.col("pno")) | (F.col("accepted.o") != F.col("offset"))),
            "misplaced",
        )
    )
    return current.select(
        "*",
        code.alias("code"),
        F.lit(50).alias("seq"),
        F.col("accepted.i").alias("earlier_pos"),
        F.col("accepted.name").alias("earlier_partition"),
        F.col("accepted.o").alias("earlier_offset"),
        F.col("acked.o").alias("acked_offset"),
        F.col("acked.i").alias("acked_pos"),
    ).where(F.col("code").isNotNull())
