"""The Spark checker: history Parquet in, one :class:`~harness.check.verdict.Verdict` per run out.

It applies the rules of :mod:`harness.check.local` (and :func:`harness.check.validate`) to
histories too large for memory, and returns the same verdicts: the same status, the same
anomalies with the same exact counts and the same witnesses (chosen by the same order), the
same reasons and the same stats. A source may hold many runs (see
:mod:`harness.spark.source`); each gets its own verdict, as if checked alone, and
:attr:`SparkCheck.status` is the worst of them.

The work is split into few passes over the data (:mod:`harness.spark.check.queries`); only counts
and a handful of rows per anomaly ever reach the driver. pyspark is imported when a check
runs, never when this module is imported.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, final

from harness.check import wording
from harness.check.policy import Finding, assemble, empty_stats, unknown, witness
from harness.check.validate import MAX_PROBLEMS
from harness.check.verdict import (
    MAX_WITNESSES,
    AnomalyKind,
    Guarantee,
    Status,
    Verdict,
    Witness,
    guarantee_of,
)
from harness.errors import HarnessError
from harness.history.events import EndDetail, SinkKind
from harness.history.integrity import ChecksumPolicy
from harness.spark.check._failure import failure, from_spark
from harness.spark.check._format import lexicographic, problem_message
from harness.spark.check._occurrence import COLUMNS, Occurrence
from harness.spark.check._verify import verified
from harness.spark.session import require_pyspark
from harness.spark.source import RunSource, discover_runs

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from harness.spark.check.queries import Fused, QueryContext, Summary

__all__ = ["LOCAL_RUN_LIMIT", "Analysis", "SparkCheck", "analyze_parquet", "check_parquet"]

LOCAL_RUN_LIMIT: Final = 1_000_000
"""A run with an upstream's resends (``resent`` appends), a producer's retries (``retried``),
``indeterminate`` sends, reads where their record was not appended, two records acknowledged
at one offset, an append at or below an acknowledged offset (a ``nonmonotonic-send`` when it
is in the log), or an entity table sink (``SinkKind.ENTITY``) of at most this many events is
judged on the driver by the local checker's own rules: the Spark passes do not implement
those rules yet, and a larger such run is UNKNOWN, with a reason that says to run the local
checker."""

_PLACE_CODES: Final = frozenset({"misplaced", "not_above"})
"""The Spark validator's problems that the local rules judge as anomalies instead (a read off
its record's places; an append at or below the highest offset acknowledged before it, which
the local rules name ``inconsistent-offsets`` or ``nonmonotonic-send``, or accept)."""

_OCCURRENCE_SCHEMA: Final = ", ".join(f"{name} {kind}" for name, kind in COLUMNS)


@final
@dataclass(frozen=True, slots=True)
class SparkCheck:
    """The verdict of every run of a history source under one guarantee.

    ``verdicts`` maps run id to verdict, sorted by run id; :attr:`status` is the worst
    (INVALID > UNKNOWN > VALID), VALID only when every run is.
    """

    guarantee: Guarantee
    verdicts: Mapping[str, Verdict]
    jobs: int = field(default=0, compare=False)
    """How many Spark jobs the check ran (0 when read back from JSON)."""

    @property
    def status(self) -> Status:
        """The worst status of all runs."""
        return Status.worst(verdict.status for verdict in self.verdicts.values())

    @property
    def ok(self) -> bool:
        """True only when every run is VALID."""
        return self.status is Status.VALID

    def to_json(self) -> dict[str, Any]:
        """``{"status", "guarantee", "runs": {run_id: Verdict.to_json()}}``."""
        return {
            "status": self.status.value,
            "guarantee": self.guarantee.value,
            "runs": {run_id: verdict.to_json() for run_id, verdict in self.verdicts.items()},
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SparkCheck:
        return cls(
            guarantee=Guarantee(data["guarantee"]),
            verdicts={
                run_id: Verdict.from_json(verdict) for run_id, verdict in data["runs"].items()
            },
        )

    def summary(self) -> str:
        """The worst status, then each run's :meth:`Verdict.summary` under its run id."""
        lines = [
            f"{self.status.value.upper()} under {self.guarantee.value} "
            f"({len(self.verdicts)} run{'s' if len(self.verdicts) != 1 else ''})"
        ]
        for run_id, verdict in self.verdicts.items():
            lines.append(f"run {run_id}: {verdict.summary()}")
        return "\n".join(lines)


@final
@dataclass(frozen=True, slots=True)
class Analysis:
    """Everything the Spark checker found in a source, for any guarantee
    (:meth:`verdicts`); the queries do not depend on the guarantee."""

    runs: tuple[str, ...]
    _verdicts: Mapping[Guarantee, Mapping[str, Verdict]] = field(repr=False)
    jobs: int = field(default=0, compare=False)
    """How many Spark jobs the queries ran (``--explain`` prints it)."""

    def verdicts(self, guarantee: Guarantee | str) -> SparkCheck:
        """The :class:`SparkCheck` under ``guarantee`` (or its string)."""
        guarantee = guarantee_of(guarantee)
        return SparkCheck(guarantee=guarantee, verdicts=self._verdicts[guarantee], jobs=self.jobs)


def check_parquet(
    path: str | os.PathLike[str],
    guarantee: Guarantee | str,
    *,
    spark: SparkSession | None = None,
    checksum: ChecksumPolicy = "verify",
) -> SparkCheck:
    """Check every run stored at ``path`` against ``guarantee`` with Spark.

    ``spark`` defaults to :func:`harness.spark.session.spark_session` (local mode, or the
    master ``spark-submit`` gave). ``checksum`` is :func:`harness.history.read_history`'s:
    each file's checksum, where it has one, is verified, its rows by the driver while Spark
    checks (``"require"`` refuses a file without one, ``"ignore"`` verifies nothing). Raises
    :class:`ConfigError` for a bad guarantee or ``checksum`` or a path with no history,
    :class:`~harness.errors.CorruptData` for a file that is not a history or does not match
    its checksum, :class:`~harness.errors.MissingDependency` without pyspark or pyarrow and
    :class:`~harness.spark.java.JavaUnavailable` without Java 17+, and
    :class:`~harness.spark.check.SparkCheckFailed` when Spark cannot read or plan the check
    (:class:`~harness.spark.check.UnreadableHistory`, also a ``CorruptData``, for a damaged
    file; another for an executor lost or Java out of memory): never a verdict. A malformed
    history is not an error: its verdict is UNKNOWN with the validator's reasons.
    """
    guarantee = guarantee_of(guarantee)  # "exactly-once" too, as every door takes it
    return analyze_parquet(path, spark=spark, checksum=checksum).verdicts(guarantee)


def analyze_parquet(
    path: str | os.PathLike[str],
    *,
    spark: SparkSession | None = None,
    checksum: ChecksumPolicy = "verify",
) -> Analysis:
    """Run the Spark checker's queries once and keep the verdicts under both guarantees.

    Same arguments and errors as :func:`check_parquet`.
    """
    runs = discover_runs(path, checksum=checksum)
    require_pyspark()
    with verified(runs):  # the rows' checksums, beside the check: damage is never a verdict
        return _analyzed(path, runs, spark)


def _analyzed(
    path: str | os.PathLike[str], runs: tuple[RunSource, ...], spark: SparkSession | None
) -> Analysis:
    """:func:`analyze_parquet`'s queries over ``runs``."""
    if spark is None:
        from harness.spark.session import spark_session

        spark = spark_session()
    from harness.spark.check import queries as _queries

    try:
        shuffle = int(spark.conf.get("spark.sql.shuffle.partitions") or 4)
        with _counted_jobs(spark) as jobs:
            context = _queries.load(spark, runs, max(1, shuffle))
            try:
                verdicts = _Checker(context, runs).run()
            finally:
                with contextlib.suppress(Exception):  # the JVM may be gone: the cause wins
                    context.release()
    except Exception as exc:
        if isinstance(exc, HarnessError) or not from_spark(exc):
            raise
        raise failure(exc, os.fspath(path)) from None
    return Analysis(
        jobs=len(jobs),
        runs=tuple(run.run_id for run in runs),
        _verdicts=MappingProxyType(
            {
                guarantee: MappingProxyType(
                    {runs[number].run_id: verdict for number, verdict in sorted(by_run.items())}
                )
                for guarantee, by_run in verdicts.items()
            }
        ),
    )


@contextlib.contextmanager
def _counted_jobs(spark: SparkSession) -> Iterator[list[int]]:
    """Run the block's Spark jobs in a job group of their own; the yielded list holds their
    ids afterwards (the caller's job group is restored)."""
    context = spark.sparkContext
    key = "spark.jobGroup.id"
    previous = context.getLocalProperty(key)
    group = f"harness-check-{uuid.uuid4().hex}"
    context.setJobGroup(group, "harness Spark checker")
    jobs: list[int] = []
    try:
        yield jobs
    finally:
        jobs.extend(context.statusTracker().getJobIdsForGroup(group))
        context.setLocalProperty(key, previous)  # type: ignore[arg-type]


@dataclass(slots=True)
class _Run:
    """What the driver knows about one run while the passes go on."""

    number: int
    source: RunSource
    summary: Summary | None = None
    reasons: list[str] = field(default_factory=list)
    invalid: bool = False
    stats: dict[str, int] = field(default_factory=dict)
    unexpected_records: int = 0
    order_places: frozenset[int | None] | None = None
    """Where phase two judges the order rules: the partitions phase one's order certificate
    left open (``None`` among them: the undeclared ones) when the run-wide conditions hold
    (one reader, no rollback, no record read twice), so that every other partition is
    covered; ``None``: the whole run (also before phase one's end)."""
    sink_ok: bool = False
    """Phase one's certificate of the ordered log sink holds (or the run has none): no
    ``nonmonotonic`` (phase two skips it)."""
    tables_ok: bool = False
    """Phase one found every key of the aggregated table sinks right (or none to judge)."""
    local: dict[Guarantee, Verdict] | None = None
    """The verdicts of a run judged by the local checker's rules (see :data:`LOCAL_RUN_LIMIT`)."""

    @property
    def ordered_ok(self) -> bool:
        """Phase one's order certificate holds for the whole run (no partition left open):
        no order rule fires (phase two skips them)."""
        return self.order_places is not None and not self.order_places

    @property
    def entity_sinks(self) -> list[str]:
        """The run's entity table sinks (last write wins per key), which the Spark passes do
        not judge: the local checker's rules judge the run on the driver."""
        return sorted(
            name for name, spec in self.source.meta.sinks.items() if spec.kind is SinkKind.ENTITY
        )

    @property
    def has_log_sink(self) -> bool:
        return any(spec.kind is SinkKind.LOG for spec in self.source.meta.sinks.values())

    @property
    def aggregated(self) -> bool:
        """Whether the run has a table sink with an aggregate (count-mismatch applies)."""
        return any(
            spec.kind is SinkKind.TABLE and spec.aggregate is not None
            for spec in self.source.meta.sinks.values()
        )

    @property
    def ordered_sinks(self) -> list[str]:
        return sorted(
            name
            for name, spec in self.source.meta.sinks.items()
            if spec.kind is SinkKind.LOG and spec.ordered
        )

    @property
    def settled(self) -> bool:
        summary = self.summary
        return (
            summary is not None
            and summary.drains > 0
            and summary.end_detail == EndDetail.COMPLETE.value
        )


class _Checker:
    def __init__(self, context: QueryContext, runs: tuple[RunSource, ...]) -> None:
        self.context = context
        self.runs = [_Run(number, source) for number, source in enumerate(runs)]

    def run(self) -> dict[Guarantee, dict[int, Verdict]]:
        from harness.spark.check import queries as q

        fused = q.fused(self.context)
        for state in self.runs:
            state.summary = fused.summaries.get(state.number)
            if state.summary is None:
                state.invalid = True
                state.reasons = [wording.EMPTY_HISTORY]
            elif _summary_fails(state.summary):
                state.invalid = True
        self._judge_locally()
        live = [s.number for s in self.runs if not s.invalid and s.local is None]
        groups: dict[int, dict[tuple[AnomalyKind, str], tuple[int, list[Witness]]]] = {}
        if live:
            facts = fused.facts
            totals = {n: fused.totals[n] for n in live}
            if any(row["unknown"] for row in totals.values()):
                facts = q.exact_below(self.context, live, facts)
                totals = q.record_totals(facts)
            self._record_stats(totals, live)
            live = [s.number for s in self.runs if not s.invalid]
            suspects = self._suspects(q, fused, facts, live) if live else []
            if suspects:
                groups = self._occurrences(q, fused, facts, suspects)
        invalid = [s.number for s in self.runs if s.invalid and not s.reasons and s.local is None]
        if invalid:
            self._judge_places_locally(self._explain(q, invalid))
        return {
            guarantee: {
                state.number: state.local[guarantee]
                if state.local is not None
                else self._verdict(state, guarantee, groups.get(state.number, {}))
                for state in self.runs
            }
            for guarantee in Guarantee
        }

    def _judge_locally(self) -> None:
        """Runs with an upstream's resends (``resent`` appends), a producer's retries
        (``retried``), ``indeterminate`` sends or an entity table sink, which the Spark
        passes do not implement, and at most :data:`LOCAL_RUN_LIMIT` events: their events
        are collected to the driver and judged by :func:`harness.check.local.check` itself.
        A larger such run is UNKNOWN (a larger one with resends only, through the
        validator's ``resent`` problem)."""
        for state in self.runs:
            summary = state.summary
            if summary is None or not (summary.resent or summary.local_only or state.entity_sinks):
                continue
            if state.source.rows > LOCAL_RUN_LIMIT:
                if summary.local_only:
                    reason = wording.local_only_not_judged(LOCAL_RUN_LIMIT)
                    state.local = {g: unknown(g, [reason], summary.events) for g in Guarantee}
                elif state.entity_sinks and not summary.resent:
                    reason = wording.entity_not_judged(state.entity_sinks, LOCAL_RUN_LIMIT)
                    state.local = {g: unknown(g, [reason], summary.events) for g in Guarantee}
                continue
            state.local = self._local_verdicts(state)

    def _local_verdicts(self, state: _Run) -> dict[Guarantee, Verdict]:
        """The local checker's verdicts of run ``state``, its events collected in order."""
        from pyspark.sql import functions as F

        from harness.check.local import check
        from harness.history.events import EVENT_FIELDS, Event, EventKind, History

        kinds = {kind.value: kind for kind in EventKind}
        columns = [name for name in EVENT_FIELDS if name != "dlsn"]
        assert self.context.raw is not None
        rows = (
            self.context.raw.where(F.col("run") == state.number)
            .orderBy("pos")
            .select(*columns)
            .toLocalIterator()
        )
        events = tuple(
            Event(**{**row.asDict(), "kind": kinds.get(row["kind"], row["kind"])}) for row in rows
        )
        history = History(meta=state.source.meta, events=events)
        return {guarantee: check(history, guarantee) for guarantee in Guarantee}

    def _judge_places_locally(self, codes: Mapping[int, set[str]]) -> None:
        """Runs the Spark validator refused for a read at a place where its record was not
        appended, or an append at or below an offset already acknowledged: the local checker
        names those (``log-duplicate``, ``inconsistent-offsets``, ``nonmonotonic-send``), or
        accepts them (a send that failed below), so a run of at most
        :data:`LOCAL_RUN_LIMIT` events is judged by it on the driver, a larger one is
        UNKNOWN with a reason that says to."""
        for number, found in codes.items():
            # a run with resends too large for the driver keeps the resends' own reason
            if found & _PLACE_CODES and "resent" not in found:
                self._route_locally(self.runs[number])

    def _route_locally(self, state: _Run) -> None:
        """Judge ``state`` by the local rules on the driver (at most
        :data:`LOCAL_RUN_LIMIT` events; larger: UNKNOWN, saying to check it locally)."""
        if state.source.rows > LOCAL_RUN_LIMIT:
            events = 0 if state.summary is None else state.summary.events
            reason = wording.local_only_not_judged(LOCAL_RUN_LIMIT)
            state.local = {g: unknown(g, [reason], events) for g in Guarantee}
        else:
            state.local = self._local_verdicts(state)

    # ------------------------------------------------------------------ validation

    def _record_stats(self, rows: Mapping[int, Any], live: Sequence[int]) -> None:
        """Fill the stats of the runs in ``live`` from their record totals (``rows``, see
        :class:`~harness.spark.check.queries.Fused`) and mark the runs whose records break
        validation."""
        for number in live:
            state = self.runs[number]
            summary = state.summary
            assert summary is not None
            row = rows.get(number)
            if row is not None and row["bad"]:
                state.invalid = True
                continue
            if row is None:
                state.stats = empty_stats(summary.events)
                state.stats.update(appended=summary.appends, observed_outputs=summary.log_observes)
                continue
            log = state.has_log_sink
            state.unexpected_records = int(row["unexpected"] or 0)
            state.stats = {
                "events": summary.events,
                "appended": summary.appends,
                "acknowledged": int(row["acknowledged"] or 0),
                "observed_outputs": summary.log_observes,
                "expected_effects": int(row["expected_effects"] or 0) if log else 0,
                "duplicates": int(row["duplicates"] or 0) if log else 0,
                "lost": int(row["lost"] or 0) if log and state.settled else 0,
            }

    def _explain(self, q: Any, numbers: Sequence[int]) -> dict[int, set[str]]:
        """The validator's reasons for runs known to fail it; returns each run's problem
        codes."""
        rows = q.problems(self.context, numbers)
        summaries = {n: self.runs[n].summary for n in numbers}
        many_ends = [n for n, s in summaries.items() if s is not None and s.ends > 1]
        many_drains = [n for n, s in summaries.items() if s is not None and s.drains > 1]
        ends = q.positions(self.context, many_ends, q.END) if many_ends else {}
        drains = q.positions(self.context, many_drains, q.DRAIN) if many_drains else {}
        for number in numbers:
            state = self.runs[number]
            summary = state.summary
            assert summary is not None
            meta = state.source.meta
            messages = [
                problem_message(row, meta.partitions, list(meta.sinks))
                for row in rows.get(number, [])
            ]
            last = summary.events - 1
            if summary.ends == 0:
                messages.append(wording.NO_END)
            elif summary.ends > 1:
                messages.append(wording.many_ends(ends[number]))
            elif summary.end_pos is not None and summary.end_pos != last:
                messages.append(wording.end_not_last(summary.end_pos, last))
            if summary.drains > 1:
                messages.append(wording.many_drains(drains[number]))
            if len(messages) >= MAX_PROBLEMS:
                messages = messages[:MAX_PROBLEMS]
                messages.append(wording.stopped_after(MAX_PROBLEMS))
            if not messages:  # the passes disagree with the replay: never call it valid
                messages = [
                    "internal error: the Spark checker found this run malformed but "
                    "could not say why; check it with the local checker"
                ]
            state.reasons = messages
        return {number: {str(row["code"]) for row in rows.get(number, [])} for number in numbers}

    # ------------------------------------------------------------------ phase one

    def _suspects(self, q: Any, fused: Fused, facts: DataFrame, live: list[int]) -> list[int]:
        """Phase one's end: the runs of ``live`` where the record totals, the certificates
        (:mod:`~harness.spark.check.queries._certify`: the order rules', the ordered sink's)
        or the table counts, all from the fused pass's one action, found something, or
        cannot tell; phase two judges only those, and only by the rules phase one did not
        clear (:attr:`_Run.ordered_ok`, :attr:`_Run.sink_ok`, :attr:`_Run.tables_ok`). The
        others have no anomaly: their verdicts are the totals' alone."""
        del q, facts
        for number in live:
            state = self.runs[number]
            summary = _summary_of(state)
            totals = fused.totals[number]
            # the certificate is per partition, given these conditions on the whole run
            runwide = not summary.rollbacks and summary.one_reader and not totals["multi_read"]
            state.order_places = frozenset(totals["order_open"]) if runwide else None
            state.sink_ok = not state.ordered_sinks or (
                len(state.ordered_sinks) == 1
                and not _crowded(fused, number)
                and not totals["sink_open"]
            )
            under, over = int(totals["under"] or 0), int(totals["over"] or 0)
            # phase one counts a key's inputs from its appends: exact only when every
            # non-poison record appended was acknowledged (else phase two counts them)
            sure = not (state.aggregated and totals["unacked_inputs"])
            state.tables_ok = sure and not (over or (under and state.settled))
        return [
            n
            for n in live
            if not (self._quiet(n) and self.runs[n].ordered_ok and self.runs[n].sink_ok)
        ]

    def _quiet(self, number: int) -> bool:
        """Whether the totals and the table counts of run ``number`` show no anomaly."""
        state = self.runs[number]
        summary = _summary_of(state)
        return (
            not state.stats.get("lost")
            and not state.stats.get("duplicates")
            and not state.unexpected_records
            and not summary.aborts
            and not summary.null_observes
            and state.tables_ok
        )

    def _keyed(self, q: Any, fused: Fused, facts: DataFrame, runs: list[int]) -> DataFrame:
        """The acknowledged inputs of each key of ``runs`` (``run, key, n, total``): a scan
        of the appends, joined with the records never acknowledged only in runs that have
        such records."""
        slow = [n for n in runs if fused.totals[n]["unacked_inputs"]]
        fast = [n for n in runs if n not in slow]
        frames = (
            [q.inputs_per_key(self.context, facts, fast, all_acknowledged=True)] if fast else []
        )
        if slow:
            frames.append(q.inputs_per_key(self.context, facts, slow))
        keyed: DataFrame = q.union_all(frames)
        return keyed

    # ------------------------------------------------------------------ anomalies

    def _occurrences(
        self, q: Any, fused: Fused, facts: DataFrame, live: list[int]
    ) -> dict[int, dict[tuple[AnomalyKind, str], tuple[int, list[Witness]]]]:
        """Per run in ``live``: the anomalies found, by (kind, class), with their exact
        counts and witnesses; runs that turn out to break the validator's append rule are
        marked invalid instead."""
        # the order rules only where phase one's certificate left them open
        unsure = {n: self.runs[n].order_places for n in live if not self.runs[n].ordered_ok}
        for number in q.offset_violations(self.context, facts, unsure) if unsure else ():
            self.runs[number].invalid = True
        # an offset taken again by a second record while the first was read there: two
        # records at one offset, which only the local rules name (inconsistent-offsets)
        shared = {n: places for n, places in unsure.items() if not self.runs[n].invalid}
        for number in q.shared_places(facts, shared) if shared else ():
            self._route_locally(self.runs[number])
        valid = [n for n in live if not self.runs[n].invalid and self.runs[n].local is None]
        if not valid:
            return {}
        frames = self._record_frames(q, fused, facts, valid)
        ordering = [n for n in valid if not self.runs[n].ordered_ok]
        if ordering:
            frames.extend(_orders(self._partition_pass(q, fused, facts, ordering)))
        frames.extend(self._other_frames(q, fused, facts, valid))
        if not frames:
            return {}
        return self._collected(q, frames, valid, facts)

    def _partition_pass(self, q: Any, fused: Fused, facts: DataFrame, runs: list[int]) -> DataFrame:
        """The partition pass's occurrences (skip, offset-ahead, offset-regression), lazily
        (they are ranked with the other kinds'). Runs whose records are each read at most
        once take their reads from the fused pass's cache, and only from the partitions
        phase one left open (:attr:`_Run.order_places`); the others from all their events.
        A skip is kept only where its range holds an acknowledged record (``owed_skips``)."""
        fast = {n: self.runs[n].order_places for n in runs if not fused.totals[n]["multi_read"]}
        slow = [n for n in runs if fused.totals[n]["multi_read"]]
        sources = [fused.ladder(fast)] if fast else []
        if slow:
            sources.append(q.partition_rows(self.context, slow))
        summaries = [_summary_of(self.runs[n]) for n in runs]
        found: DataFrame = q.partitions(
            self.context,
            q.union_all(q.conform(source, q.PARTITION_ROWS) for source in sources),
            one_reader=all(summary.one_reader for summary in summaries),
            truncates=any(summary.truncates for summary in summaries),
        )
        # cached: the skips' ends, their partitions and the other tags all read it
        owed: DataFrame = q.owed_skips(self.context.cache(found), facts, runs)
        return owed

    def _record_frames(
        self, q: Any, fused: Fused, facts: DataFrame, valid: list[int]
    ) -> list[DataFrame]:
        """Occurrence frames of the kinds the record totals found: unexpected, duplicate,
        lost (and offset-ahead past a lost record)."""
        doubled = [n for n in valid if self.runs[n].stats.get("duplicates")]
        unacked = [n for n in valid if self.runs[n].unexpected_records]
        frames = _effects(q, self.context, facts, self.runs, (unacked, doubled))
        lossy = [
            n
            for n in valid
            if self.runs[n].has_log_sink and self.runs[n].settled and self.runs[n].stats.get("lost")
        ]
        if lossy:
            frames.append(_past(q.past_lost(facts, fused.control, lossy)))
            frames.append(_lost(facts, lossy))
        return frames

    def _other_frames(
        self, q: Any, fused: Fused, facts: DataFrame, valid: list[int]
    ) -> list[DataFrame]:
        """Occurrence frames of ordered sinks, table sinks, aborted transactions and outputs
        without a record, for the runs that have them."""
        ordering = [n for n in valid if not self.runs[n].sink_ok]
        frames = self._nonmonotonic(q, fused, facts, ordering)
        with_tables = [n for n in valid if self.runs[n].aggregated and not self.runs[n].tables_ok]
        if with_tables:
            # runs with appended records never acknowledged leave those out of their keys
            keyed = self._keyed(q, fused, facts, with_tables)
            wrong = q.count_mismatches(self.context, facts, fused.tables, with_tables, keyed)
            if wrong is not None:
                frames.append(_mismatches(wrong))
        aborting = [n for n in valid if _summary_of(self.runs[n]).aborts]
        if aborting:
            frames.append(_aborted(q.aborted_reads(self.context, aborting)))
        nulls = [n for n in valid if _summary_of(self.runs[n]).null_observes]
        if nulls:
            frames.append(_null_unexpected(q.null_observes(self.context, nulls)))
        return frames

    def _nonmonotonic(
        self, q: Any, fused: Fused, facts: DataFrame, valid: list[int]
    ) -> list[DataFrame]:
        from pyspark.sql import functions as F

        ordered = {n: self.runs[n].ordered_sinks for n in valid if self.runs[n].ordered_sinks}
        frames = []
        # one ordered sink: if no record shows two parts in it, the facts suffice
        simple = [n for n, sinks in ordered.items() if len(sinks) == 1 and not _crowded(fused, n)]
        if simple:
            names = self.context.small(
                [(n, ordered[n][0]) for n in simple], "run int, sink_name string"
            )
            # only the partitions phase one's certificate of the sink left open
            opened = {n: fused.totals[n]["sink_open"] for n in simple}
            pairs = q.nonmonotonic_from_facts(self.context, facts, opened).join(
                F.broadcast(names), "run"
            )
            frames.append(_pairs(pairs.drop("sink").withColumnRenamed("sink_name", "sink")))
        general = [n for n in ordered if n not in simple]
        if general:
            frames.append(_pairs(q.nonmonotonic(self.context, general)))
        return frames

    def _collected(
        self, q: Any, frames: list[DataFrame], valid: list[int], facts: DataFrame
    ) -> dict[int, dict[tuple[AnomalyKind, str], tuple[int, list[Witness]]]]:
        """The first witnesses and the total weight of every (run, kind, variant, class).

        Spark ranks by events and records; rows tied with the last one kept are kept too,
        so the driver, which also knows the sentences, picks the same first witnesses as the
        local checker (:func:`harness.check.policy.best`)."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        occurrences = q.union_all(q.conform(f, _columns()) for f in frames)
        occurrences = occurrences.where(F.col("run").isin(*valid))
        group = Window.partitionBy("run", "kind", "sub", "cls")
        order = group.orderBy(F.col("ev").asc_nulls_first(), F.col("rk").asc_nulls_first())
        firsts = (
            occurrences.select(
                "*",
                F.rank().over(order).alias("rn"),
                F.sum("weight").over(group).alias("total"),
            )
            .where(F.col("rn") <= MAX_WITNESSES)
            .collect()
        )
        totals = {(r["run"], r["kind"], r["sub"], r["cls"]): int(r["total"]) for r in firsts}
        return self._build_groups(q, totals, [Occurrence.from_row(r) for r in firsts], facts)

    def _verdict(
        self,
        state: _Run,
        guarantee: Guarantee,
        groups: Mapping[tuple[AnomalyKind, str], tuple[int, list[Witness]]],
    ) -> Verdict:
        summary = state.summary
        if state.invalid:
            return unknown(guarantee, state.reasons, summary.events if summary else 0)
        assert summary is not None
        findings = [
            Finding(kind, count, tuple(witnesses), side == "over")
            for (kind, side), (count, witnesses) in groups.items()
        ]
        return assemble(
            guarantee,
            findings,
            end_detail=summary.end_detail,
            drained=summary.drains > 0,
            stats=state.stats,
        )

    def _build_groups(
        self,
        q: Any,
        totals: Mapping[tuple[int, str, str, str], int],
        firsts: Sequence[Occurrence],
        facts: DataFrame,
    ) -> dict[int, dict[tuple[AnomalyKind, str], tuple[int, list[Witness]]]]:
        """Per run and (kind, class): the exact count and the candidate witnesses."""
        result: dict[int, dict[tuple[AnomalyKind, str], tuple[int, list[Witness]]]] = {}
        by_key: dict[tuple[int, str, str, str], list[Occurrence]] = {}
        for row in firsts:
            by_key.setdefault((row.run, row.kind, row.sub, row.cls), []).append(row)
        # details only the data can give: skipped and claimed records, keys' records, parts
        needs_range = sorted(
            {
                (row.run, row.pno)
                for (_, kind, sub, _), rows in by_key.items()
                if kind == "offset-ahead" and sub == "a"
                for row in rows
            }
        )
        unsorted = q.unsorted_partitions(facts, self.context, needs_range)
        ranges: list[tuple[int, int, int | None, int, int]] = []
        skipped: list[tuple[int, int, int | None, int, int]] = []
        exact: list[tuple[int, int, int | None, int, int]] = []
        keys: list[tuple[int, str]] = []
        big: list[tuple[int, str]] = []
        for (run, kind, sub, _), rows in by_key.items():
            for i, row in enumerate(rows):
                ident = len(ranges) + len(skipped) + len(exact)
                if kind == "skip" or (kind == "offset-ahead" and sub == "a"):
                    assert row.offset is not None
                    item = (ident, run, row.pno, _range_low(row), row.offset)
                    if kind == "skip":  # the acknowledged records: a set, in any order
                        skipped.append(item)
                    else:
                        (exact if (run, row.pno) in unsorted else ranges).append(item)
                    rows[i] = dataclasses.replace(row, range_id=ident)
                elif kind == "count-mismatch" and row.key is not None:
                    keys.append((run, row.key))
                elif kind == "lost" and row.big and row.rid is not None:
                    big.append((run, row.rid))
        between = q.records_between(facts, self.context, ranges)
        between.update(q.records_between(facts, self.context, skipped, acknowledged=True))
        if exact:
            lists = q.append_offsets(
                facts, self.context, sorted({(run, pno) for _, run, pno, _, _ in exact})
            )
            for ident, run, pno, low, high in exact:
                between[ident] = _bisected(lists.get((run, pno), []), low, high)
        key_ids = q.key_records(self.context, facts, sorted(set(keys)))
        seen = q.observed_parts(self.context, sorted({r for r, _ in big}), big) if big else {}
        kinds = {kind.value: kind for kind in AnomalyKind}
        for (run, kind_name, sub, cls), count in totals.items():
            state = self.runs[run]
            kind = kinds[kind_name]
            if not _assessed(state, kind, cls if kind is AnomalyKind.COUNT_MISMATCH else sub):
                continue
            meta = state.source.meta
            names = _partition_names(meta.partitions)
            made = [
                w
                for row in by_key.get((run, kind_name, sub, cls), [])
                for w in _witnesses(kind, sub, row, names, between, key_ids, seen, run)
            ]
            group = (kind, cls if kind is AnomalyKind.COUNT_MISMATCH else "")
            previous = result.setdefault(run, {}).get(group, (0, []))
            result[run][group] = (previous[0] + count, previous[1] + made)
        return result


def _range_low(row: Occurrence) -> int:
    """Where the skipped (or claimed) range of a skip (or offset-ahead) occurrence starts."""
    assert row.low is not None or row.kind != "skip"
    if row.kind == "skip":
        assert row.start is not None
        return row.start
    return 0 if row.low is None else row.low + 1


def _crowded(fused: Fused, run: int) -> bool:
    """Whether some record of ``run`` shows more than one part in an ordered sink."""
    return bool(fused.totals[run]["crowded"])


def _summary_of(state: _Run) -> Summary:
    assert state.summary is not None
    return state.summary


def _summary_fails(summary: Summary) -> bool:
    return (
        summary.bad > 0
        or summary.ends != 1
        or summary.end_pos != summary.events - 1
        or summary.drains > 1
    )


def _assessed(state: _Run, kind: AnomalyKind, sub: str) -> bool:
    """Whether the local checker looks for ``kind`` in this run at all."""
    if (
        kind
        in (
            AnomalyKind.LOST,
            AnomalyKind.DUPLICATE,
            AnomalyKind.UNEXPECTED,
            AnomalyKind.ABORTED_READ,
        )
        and not state.has_log_sink
    ):
        return False
    if kind is AnomalyKind.LOST or (kind is AnomalyKind.OFFSET_AHEAD and sub == "b"):
        return state.has_log_sink and state.settled
    if kind is AnomalyKind.COUNT_MISMATCH and sub == "under":
        return state.settled
    return True


def _partition_names(partitions: Iterable[str]) -> dict[int, str]:
    numbers: dict[str, int] = {}
    for name in partitions:
        numbers.setdefault(name, len(numbers))
    return {number: name for name, number in numbers.items()}


def _bisected(appends: Sequence[tuple[int, str]], low: int, high: int) -> tuple[list[str], int]:
    """The local checker's ``records_between`` over one partition's appends, exactly (its
    binary search over offsets in append order, sorted or not)."""
    from bisect import bisect_left

    offsets = [offset for offset, _ in appends]
    start = bisect_left(offsets, low)
    stop = bisect_left(offsets, high)
    names = [name for _, name in appends]
    return names[start : min(stop, start + 5)], max(0, stop - start)


def _witnesses(
    kind: AnomalyKind,
    sub: str,
    row: Occurrence,
    names: Mapping[int, str],
    between: Mapping[int, tuple[list[str], int]],
    key_ids: Mapping[tuple[int, str], list[str]],
    seen: Mapping[tuple[int, str], set[int]],
    run: int,
) -> list[Witness]:
    o: Any = row  # the fields a kind uses are set: its frame fills them
    if kind is AnomalyKind.LOST:
        return _lost_parts(o, seen.get((run, o.rid)) if o.big else None)
    if kind is AnomalyKind.DUPLICATE:
        return [witness((o.rid,), o.ev, wording.duplicate(o.rid, o.part, o.outputs))]
    if kind is AnomalyKind.UNEXPECTED:
        return [_unexpected(o)]
    if kind is AnomalyKind.ABORTED_READ:
        detail = wording.aborted_read(o.output_id, o.sink, o.emit_pos, o.txn, o.abort_pos)
        return [witness(() if o.rid is None else (o.rid,), o.ev, detail)]
    if kind is AnomalyKind.COUNT_MISMATCH:
        detail = wording.count_mismatch(o.sink, o.key, o.expected, o.observed)
        return [witness(key_ids.get((run, o.key), []), o.ev, detail)]
    if kind is AnomalyKind.NONMONOTONIC:
        detail = wording.nonmonotonic(
            o.sink, o.rid, o.offset, names[o.pno], o.before_record, o.before_offset
        )
        return [witness((o.before_record, o.rid), o.ev, detail)]
    partition = names[o.pno]
    if kind is AnomalyKind.SKIP:
        if o.how == 2:
            since = wording.since_read(o.low, o.before)
        else:
            since = wording.since_fetch(None if o.how == 0 else o.low, o.before)
        records, skipped = between[o.range_id]
        detail = wording.skip(o.process, o.offset, partition, since, _range_low(o), skipped)
        return [witness(records, o.ev, detail)]
    if kind is AnomalyKind.OFFSET_AHEAD and sub == "a":
        detail = wording.ahead_of_reads(o.process, o.offset, partition, o.low, o.before)
        return [witness(between[o.range_id][0], o.ev, detail)]
    if kind is AnomalyKind.OFFSET_AHEAD:
        detail = wording.past_lost(o.process, o.offset, partition, o.rid, o.record_offset)
        return [witness((o.rid,), o.ev, detail)]
    if kind is AnomalyKind.NONMONOTONIC_POLL:
        detail = wording.nonmonotonic_poll(o.process, o.offset, partition, o.low, o.before)
        return [witness((), o.ev, detail)]
    assert kind is AnomalyKind.OFFSET_REGRESSION
    detail = wording.regression(o.process, o.offset, partition, o.low, o.before)
    return [witness((), o.ev, detail)]


def _lost_parts(o: Any, observed: set[int] | None) -> list[Witness]:
    """The first missing parts of a lost record, in the local checker's order (the parts'
    decimal strings), from its bit mask (or its ``observed`` parts when it has many)."""
    result = []
    for part in lexicographic(o.parts):
        if observed is not None:
            shown = part in observed
        else:
            shown = part < 62 and bool((o.mask or 0) >> part & 1)
        if not shown:
            result.append(witness((o.rid,), o.ev, wording.lost(o.rid, part, o.ack)))
            if len(result) == MAX_WITNESSES:
                break
    return result


def _unexpected(o: Any) -> Witness:
    """An output its record's rules do not allow (see :attr:`Occurrence.how`)."""
    if o.rid is None:
        return witness((), o.ev, wording.unexpected_no_record(o.output_id, o.sink))
    if o.how == 0:
        detail = wording.unexpected_not_appended(o.output_id, o.sink, o.rid)
    elif o.how == 1:
        detail = wording.unexpected_unacknowledged(o.output_id, o.sink, o.rid, o.app_pos)
    elif o.how == 2:
        detail = wording.unexpected_poison(o.output_id, o.sink, o.rid, o.app_pos)
    else:
        detail = wording.unexpected_part(o.output_id, o.sink, o.rid, o.part, o.parts)
    return witness((o.rid,), o.ev, detail)


# ------------------------------------------------------------- occurrence frames (Spark)


def _head(
    name: str, *, sub: Any = "", cls: Any = "", weight: Any = 1, kind: Any = None
) -> list[Any]:
    """The columns that identify an occurrence (:class:`Occurrence`'s first ones)."""
    from pyspark.sql import functions as F

    def literal(value: Any) -> Any:
        return F.lit(value) if isinstance(value, (str, int)) else value

    return [
        F.col("run"),
        (F.lit(name) if kind is None else kind).alias("kind"),
        literal(sub).alias("sub"),
        literal(cls).alias("cls"),
        literal(weight).cast("long").alias("weight"),
    ]


def _columns() -> list[tuple[str, Any]]:
    from pyspark.sql import types as T

    schema = T._parse_datatype_string(_OCCURRENCE_SCHEMA)
    assert isinstance(schema, T.StructType)
    return [(f.name, f.dataType) for f in schema.fields]


def _lost(facts: DataFrame, lossy: Sequence[int]) -> DataFrame:
    from pyspark.sql import functions as F

    from harness.spark.check.queries import sorted_events

    missing = F.col("parts") - F.coalesce(F.col("below"), F.lit(0))
    rows = facts.where(
        F.col("run").isin(*lossy)
        & (F.col("ack_n") > 0)
        & ~F.coalesce(F.col("poison"), F.lit(False))
        & (missing > 0)
    )
    return rows.select(
        *_head("lost", weight=missing),
        sorted_events(F.col("ack_first"), F.col("read_last"), F.col("emit_last")).alias("ev"),
        F.array(F.col("record_id")).alias("rk"),
        F.col("record_id").alias("rid"),
        F.col("ack_first").alias("ack"),
        "parts",
        F.col("omask").alias("mask"),
        (F.col("parts") > 62).cast("long").alias("big"),
    )


def _effects(
    q: Any,
    context: QueryContext,
    facts: DataFrame,
    runs: Sequence[_Run],
    which: tuple[Sequence[int], Sequence[int]],
) -> list[DataFrame]:
    """unexpected (outputs their record's rules do not allow) and duplicate occurrences, of
    the runs ``which`` names (those with unexpected outputs, those with copies)."""
    unacked, doubled = which
    from pyspark.sql import functions as F

    frames = []
    if unacked:
        records = sum(runs[n].unexpected_records for n in unacked)
        rows = q.observe_rows(context, facts, unacked, kind="unexpected", records=records)
        frames.append(
            rows.select(
                *_head("unexpected"),
                q.sorted_events(F.col("pos"), F.col("app_pos")).alias("ev"),
                F.array(F.col("record_id")).alias("rk"),
                F.col("record_id").alias("rid"),
                "pos",
                "output_id",
                "app_pos",
                F.when(F.col("app_pos").isNull(), 0)
                .when(F.col("ack_n") == 0, 1)
                .when(F.col("poison"), 2)
                .otherwise(3)
                .cast("long")
                .alias("how"),
                "part",
                "parts",
                "sink",
            )
        )
    if doubled:
        # each duplicated record has a copy beyond the first of some part: at most as many
        # records as copies, and at most twice as many observe rows
        extra = sum(runs[n].stats.get("duplicates", 0) for n in doubled)
        copies = q.observe_rows(context, facts, doubled, kind="duplicate", records=extra)
        frames.append(_duplicates(q.duplicate_effects(context, copies, 2 * extra)))
    return frames


def _pairs(pairs: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    return pairs.select(
        *_head("nonmonotonic"),
        F.array(F.col("prev_pos"), F.col("pos")).alias("ev"),
        F.array(F.col("prev_rid"), F.col("record_id")).alias("rk"),
        F.col("record_id").alias("rid"),
        F.col("prev_rid").alias("before_record"),
        "sink",
        F.col("off").alias("offset"),
        F.col("prev_off").alias("before_offset"),
        F.col("pno").cast("long").alias("pno"),
    )


def _duplicates(effects: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    positions = F.transform(F.col("copies"), lambda c: c["pos"])
    emits = F.coalesce(F.col("emits"), F.array().cast("array<long>"))
    return effects.select(
        *_head("duplicate", weight=F.size("copies") - 1),
        F.array_sort(F.array_distinct(F.concat(positions, emits))).alias("ev"),
        F.array(F.col("record_id")).alias("rk"),
        F.col("record_id").alias("rid"),
        "part",
        F.transform(F.col("copies"), lambda c: c["output_id"]).alias("outputs"),
    )


def _orders(parts: DataFrame) -> list[DataFrame]:
    """skip, offset-ahead, offset-regression and nonmonotonic-poll occurrences from the
    partition pass, as one frame (the pass is computed once, whatever the tags it finds)."""
    from pyspark.sql import functions as F

    tag = F.col("tag")
    pair = F.array(F.col("before"), F.col("pos"))
    read = F.when(F.col("before").isNull(), F.array(F.col("pos"))).otherwise(pair)
    kind = (
        F.when(tag == "S", "skip")
        .when(tag == "A", "offset-ahead")
        .when(tag == "B", "nonmonotonic-poll")
        .otherwise("offset-regression")
    )
    return [
        parts.select(
            *_head("", sub=F.when(tag == "A", "a").otherwise(""), kind=kind),
            F.when(tag == "A", read).otherwise(pair).alias("ev"),
            F.when(tag.isin("G", "B"), F.array().cast("array<string>")).alias("rk"),
            F.col("how").cast("long").alias("how"),
            F.col("off").alias("offset"),
            "process",
            "low",
            "start",
            "before",
            F.col("pno").cast("long").alias("pno"),
        )
    ]


def _past(past: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    return past.select(
        *_head("offset-ahead", sub="b"),
        F.array(F.col("pos")).alias("ev"),
        F.array(F.col("record_id")).alias("rk"),
        F.col("record_id").alias("rid"),
        F.col("before").alias("offset"),
        "process",
        F.col("off").alias("record_offset"),
        F.col("pno").cast("long").alias("pno"),
    )


def _mismatches(wrong: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    return wrong.select(
        *_head("count-mismatch", cls=F.when(F.col("over"), "over").otherwise("under")),
        F.when(F.col("observed").isNull(), F.array().cast("array<long>"))
        .otherwise(F.array(F.col("pos")))
        .alias("ev"),
        F.when(F.col("min_rid").isNull(), F.array().cast("array<string>"))
        .otherwise(F.array(F.col("min_rid")))
        .alias("rk"),
        "sink",
        "key",
        "expected",
        "observed",
    )


def _aborted(rows: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    from harness.spark.check.queries import sorted_events

    return rows.select(
        *_head("aborted-read"),
        sorted_events(F.col("pos"), F.col("emit_pos"), F.col("abort_pos")).alias("ev"),
        F.when(F.col("record_id").isNull(), F.array().cast("array<string>"))
        .otherwise(F.array(F.col("record_id")))
        .alias("rk"),
        F.col("record_id").alias("rid"),
        "output_id",
        "emit_pos",
        "txn",
        "abort_pos",
        "sink",
    )


def _null_unexpected(rows: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    return rows.select(
        *_head("unexpected"),
        F.array(F.col("pos")).alias("ev"),
        F.array().cast("array<string>").alias("rk"),
        "output_id",
        "sink",
    )
