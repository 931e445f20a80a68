"""Every Spark query of the checker, by idea (internal; importing it imports pyspark).

The rules are those of :mod:`harness.check.local` and :mod:`harness.check.validate`; the
queries compute, for every run at once, the facts a verdict needs, in few passes over the
data, and return only small results to the driver (``docs/spark.md``, "How it works"):

* :mod:`._load`: the events of every run, annotated (codes, per-event validator flags);
* :mod:`._records`: the fused pass: per-run summary and totals, the facts of every record;
* :mod:`._certify`: phase one's certificate that no order rule fires;
* :mod:`._anomalies`: partitions, ordered sinks, tables, transactions, outputs;
* :mod:`._details`: the witness details only the data can give;
* :mod:`._problems`: the validator's reasons for malformed runs.
"""

from __future__ import annotations

from harness.spark.check.queries._anomalies import (
    PARTITION_ROWS,
    aborted_reads,
    count_mismatches,
    duplicate_effects,
    inputs_per_key,
    nonmonotonic,
    nonmonotonic_from_facts,
    null_observes,
    observe_rows,
    offset_violations,
    owed_skips,
    partition_rows,
    partitions,
    past_lost,
    shared_places,
    unsorted_partitions,
)
from harness.spark.check.queries._certify import open_partition, pair_rows, partition_inputs
from harness.spark.check.queries._details import (
    append_offsets,
    key_records,
    observed_parts,
    positions,
    records_between,
)
from harness.spark.check.queries._load import (
    ACK,
    APPEND,
    CHECKED_FIELDS,
    COMMIT,
    DRAIN,
    EMIT,
    END,
    FETCH,
    KIND_CODES,
    OBSERVE,
    PROBLEM_FLAGS,
    PUT,
    READ,
    ROLLBACK,
    SINK_COUNT,
    SINK_LOG,
    SINK_ORDERED,
    SINK_SUM,
    SINK_TABLE,
    TRUNCATE,
    TXN_ABORT,
    QueryContext,
    conform,
    load,
    sorted_events,
    union_all,
    with_flags,
)
from harness.spark.check.queries._problems import (
    problems,
)
from harness.spark.check.queries._records import (
    FACT_COLUMNS,
    Fused,
    Summary,
    exact_below,
    fused,
    record_totals,
)

__all__ = [
    "ACK",
    "APPEND",
    "CHECKED_FIELDS",
    "COMMIT",
    "QueryContext",
    "DRAIN",
    "EMIT",
    "END",
    "FETCH",
    "KIND_CODES",
    "OBSERVE",
    "PROBLEM_FLAGS",
    "PUT",
    "READ",
    "ROLLBACK",
    "SINK_COUNT",
    "SINK_LOG",
    "SINK_ORDERED",
    "SINK_SUM",
    "SINK_TABLE",
    "Summary",
    "FACT_COLUMNS",
    "Fused",
    "PARTITION_ROWS",
    "fused",
    "partition_rows",
    "TRUNCATE",
    "TXN_ABORT",
    "conform",
    "sorted_events",
    "union_all",
    "aborted_reads",
    "open_partition",
    "pair_rows",
    "partition_inputs",
    "append_offsets",
    "count_mismatches",
    "duplicate_effects",
    "exact_below",
    "key_records",
    "inputs_per_key",
    "load",
    "nonmonotonic",
    "nonmonotonic_from_facts",
    "null_observes",
    "observe_rows",
    "observed_parts",
    "offset_violations",
    "owed_skips",
    "partitions",
    "past_lost",
    "positions",
    "problems",
    "record_totals",
    "records_between",
    "shared_places",
    "unsorted_partitions",
    "with_flags",
]
