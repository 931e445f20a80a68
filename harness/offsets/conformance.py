"""The conformance suite every offset store passes: run it against your own store too.

Each check in :data:`CONFORMANCE_CHECKS` is a :class:`ConformanceCheck`, called with
``open_store``: a function without arguments that opens the store at **one fixed location**
(fresh, empty, for that check) and may be called again to reopen it after ``close()``.
A check closes every store it opens. It returns ``None`` when the store keeps the promise,
or raises :class:`ConformanceFailure` (an ``AssertionError``) naming the check and what differed.

From plain Python, :func:`run_conformance` runs them all, each at a fresh location::

    import tempfile
    from pathlib import Path
    from harness.offsets.conformance import run_conformance

    def make_opener():
        path = Path(tempfile.mkdtemp()) / "offsets"
        return lambda: MyStore(path)

    run_conformance(make_opener)  # raises ConformanceFailure listing every failed check

With pytest, one test per check (``tmp_path`` is fresh for each)::

    import pytest
    from harness.offsets.conformance import CONFORMANCE_CHECKS, ConformanceCheck

    @pytest.mark.parametrize("check", CONFORMANCE_CHECKS, ids=lambda check: check.name)
    def test_my_store_conforms(check: ConformanceCheck, tmp_path) -> None:
        check(lambda: MyStore(tmp_path / "offsets"))

The suite checks behaviour a caller can see through :class:`~harness.offsets.base.OffsetStore`
across close and reopen. It cannot crash the machine: what ``sync`` promises about crashes is
the store's own business to test (the memory store's crash model is tested in the harness).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any, Final, final

from harness.errors import AlreadyClosed, BrokenPromise, ConfigError
from harness.log.dlsn import DLSN
from harness.offsets.base import OffsetStore

__all__ = [
    "CONFORMANCE_CHECKS",
    "ConformanceCheck",
    "ConformanceFailure",
    "ConformanceResult",
    "OpenStore",
    "run_conformance",
]

OpenStore = Callable[[], OffsetStore]
"""Opens (or reopens) the store under test at one fixed location."""


class ConformanceFailure(BrokenPromise):
    """An offset store broke a promise of the conformance suite (``checks``: which)."""


class _Differ(Exception):
    """Raised inside a check: the store did something other than what it promises."""


@final
@dataclass(frozen=True, slots=True)
class ConformanceCheck:
    """One named promise of the suite; call it with an ``open_store`` function."""

    name: str
    promise: str
    function: Callable[[OpenStore], None]

    def __call__(self, open_store: OpenStore) -> None:
        """Run the check; raise :class:`ConformanceFailure` if the store breaks the promise."""
        if not callable(open_store):
            raise ConfigError(
                f"conformance check {self.name!r} needs a function that opens the store, got "
                f"{type(open_store).__name__}: {open_store!r}; pass e.g. "
                "lambda: LevelDBOffsetStore(path)"
            )
        try:
            self.function(open_store)
        except Exception as exc:
            differs = isinstance(exc, _Differ)  # else the store raised: chained as the cause
            what = str(exc) if differs else f"the store raised {type(exc).__name__}: {exc}"
            raise ConformanceFailure(
                f"offset store conformance check {self.name!r} failed: {what} "
                f"(promise: {self.promise})",
                checks=(self.name,),
            ) from (None if differs else exc)


@final
@dataclass(frozen=True, slots=True)
class ConformanceResult:
    """The outcome of one check in :func:`run_conformance`."""

    check: str
    failure: ConformanceFailure | None

    @property
    def passed(self) -> bool:
        """Whether the store kept the check's promise."""
        return self.failure is None


# --------------------------------------------------------------------------------------------
# Helpers shared by the checks.

_INT64_MAX: Final = 2**63 - 1
_INT64_MIN: Final = -(2**63)

EDGE_DLSNS: Final = (
    DLSN.INITIAL,
    DLSN.NON_INCLUSIVE_LOWER_BOUND,
    DLSN.INVALID,
    DLSN(0, 0, 0),
    DLSN(_INT64_MAX, _INT64_MAX, _INT64_MAX),
    DLSN(_INT64_MIN, _INT64_MIN, _INT64_MIN),
    DLSN(1, 2**32, -1),
    DLSN(2**31, 255, 256),
)
"""DLSNs at the edges of the 25-byte form: constants, int64 limits, 32-bit boundaries."""

UNUSUAL_READER_IDS: Final = (
    "r",
    "é",
    "读者-1",
    "🙂",
    "with space",
    "state",
    "\x01",
    "a/b:c?d=e",
    "x" * 1000,
)
"""Reader ids a store must keep apart and return unchanged."""


def _open(open_store: OpenStore) -> OffsetStore:
    store = open_store()
    if not isinstance(store, OffsetStore):
        raise _Differ(
            f"open_store() returned {type(store).__name__}: {store!r}, which lacks methods of "
            "the OffsetStore protocol (sync, get, put, get_state, commit, readers, close, "
            "__enter__, __exit__)"
        )
    return store


def _expect(actual: object, expected: object, what: str, why: str = "") -> None:
    if type(actual) is not type(expected) or actual != expected:
        reason = f": {why}" if why else ""
        raise _Differ(f"{what} returned {actual!r}, expected {expected!r}{reason}")


def _expect_raises(
    error: type[BaseException], call: Callable[[], object], what: str, why: str = ""
) -> BaseException:
    reason = f": {why}" if why else ""
    try:
        result = call()
    except error as exc:
        return exc
    except Exception as exc:
        raise _Differ(
            f"{what} raised {type(exc).__name__}: {exc}; expected {error.__name__}{reason}"
        ) from exc
    raise _Differ(f"{what} returned {result!r}; expected it to raise {error.__name__}{reason}")


def _expect_contents(
    store: OffsetStore,
    offsets: Mapping[str, DLSN | None],
    state: Mapping[str, bytes | None],
    when: str,
    why: str = "",
) -> None:
    for reader_id, dlsn in offsets.items():
        _expect(store.get(reader_id), dlsn, f"{when}, get({reader_id!r})", why)
    for key, value in state.items():
        _expect(store.get_state(key), value, f"{when}, get_state({key!r})", why)


# --------------------------------------------------------------------------------------------
# The checks. Each one opens a fresh location and closes every store it opens.


def _satisfies_protocol(open_store: OpenStore) -> None:
    store = _open(open_store)
    try:
        _expect(type(store.sync), bool, "type(store.sync)", "sync is a bool fixed at opening")
        entered = store.__enter__()
        if entered is not store:
            raise _Differ(f"store.__enter__() returned {entered!r}, expected the store itself")
        store.put("r", DLSN.INITIAL)
        store.commit({}, {"k": b"v"})
        _expect(type(store.get("r")), DLSN, "type(get('r'))")
        _expect(type(store.get_state("k")), bytes, "type(get_state('k'))")
        _expect(type(store.readers()), list, "type(readers())")
        store.commit({})
    finally:
        store.close()


def _missing_is_none(open_store: OpenStore) -> None:
    with _open(open_store) as store:
        _expect(store.get("never-written"), None, "on an empty store, get('never-written')")
        _expect(store.get_state("never-written"), None, "on an empty store, get_state(...)")
        _expect(store.readers(), [], "on an empty store, readers()")
        store.put("other", DLSN.INITIAL)
        store.commit({}, {"other": b"v"})
        _expect(
            store.get("never-written"),
            None,
            "after put('other', ...), get('never-written')",
            "a reader without an offset has none; the caller picks its starting point",
        )
        _expect(store.get_state("never-written"), None, "get_state('never-written')")


def _round_trip(open_store: OpenStore) -> None:
    with _open(open_store) as store:
        for i, dlsn in enumerate(EDGE_DLSNS):
            store.put(f"reader-{i}", dlsn)
            _expect(store.get(f"reader-{i}"), dlsn, f"after put('reader-{i}', {dlsn!r}), get")
        for i, reader_id in enumerate(UNUSUAL_READER_IDS):
            store.put(reader_id, DLSN(7, i, 0))
        for i, reader_id in enumerate(UNUSUAL_READER_IDS):
            _expect(store.get(reader_id), DLSN(7, i, 0), f"get({reader_id!r})")
        for i, dlsn in enumerate(EDGE_DLSNS):
            _expect(store.get(f"reader-{i}"), dlsn, f"get('reader-{i}')")


def _last_write_wins(open_store: OpenStore) -> None:
    why = "the store keeps the last write, not the largest DLSN"
    with _open(open_store) as store:
        store.put("r", DLSN(5, 10, 2))
        store.put("r", DLSN(5, 3, 0))
        what = "after put('r', DLSN(5, 10, 2)), put('r', DLSN(5, 3, 0)), get('r')"
        _expect(store.get("r"), DLSN(5, 3, 0), what, why)
        store.commit({"r": DLSN(9, 0, 0)})
        store.commit({"r": DLSN.INITIAL})
        what = "after commit({'r': DLSN(9, 0, 0)}), commit({'r': DLSN.INITIAL}), get('r')"
        _expect(store.get("r"), DLSN.INITIAL, what, why)
        store.put("r", DLSN(2, 0, 0))
        store.put("r", DLSN(2, 0, 0))
        store.put("r", DLSN(1, 0, -1))
    with _open(open_store) as store:
        _expect(store.get("r"), DLSN(1, 0, -1), "after reopening, get('r')", why)


def _readers_independent(open_store: OpenStore) -> None:
    ids = [f"reader-{i:03d}" for i in range(50)]
    with _open(open_store) as store:
        for i, reader_id in enumerate(ids):
            store.put(reader_id, DLSN(i + 1, i, 0))
        store.put("reader-010", DLSN(99, 99, 99))
        expected = {reader_id: DLSN(i + 1, i, 0) for i, reader_id in enumerate(ids)}
        expected["reader-010"] = DLSN(99, 99, 99)
        _expect_contents(store, expected, {}, "after 50 puts and an overwrite of reader-010")


def _commit_applies_all(open_store: OpenStore) -> None:
    offsets = {"a": DLSN(1, 2, 3), "b": DLSN(4, 5, 6), "c": DLSN.INITIAL}
    state = {"k1": b"v1", "k2": b""}
    with _open(open_store) as store:
        store.commit(offsets, state)
        _expect_contents(store, offsets, state, "after commit(offsets, state)")
        store.commit({"d": DLSN(8, 8, 8)})
        store.commit({}, {"k3": b"v3"})
        _expect_contents(
            store, {**offsets, "d": DLSN(8, 8, 8)}, {**state, "k3": b"v3"}, "after two commits"
        )
    with _open(open_store) as store:
        _expect_contents(
            store, {**offsets, "d": DLSN(8, 8, 8)}, {**state, "k3": b"v3"}, "after reopening"
        )


_BAD_COMMITS: Final[tuple[tuple[dict[Any, Any], dict[Any, Any]], ...]] = (
    ({"a": DLSN(2, 0, 0), "b": DLSN(2, 0, 0), "z": "not a DLSN"}, {}),
    ({"a": DLSN(2, 0, 0), "b": DLSN(2, 0, 0)}, {"k": b"new", "j": "text, not bytes"}),
    ({"a": DLSN(2, 0, 0)}, {"k": b"new", "": b"empty key"}),
    ({"a": DLSN(2, 0, 0), "b": DLSN(2, 0, 0), "": DLSN(2, 0, 0)}, {"k": b"new"}),
    ({"a": DLSN(2, 0, 0), "b\x00": DLSN(2, 0, 0)}, {"k": b"new"}),
)


def _commit_all_or_nothing(open_store: OpenStore) -> None:
    offsets_before: dict[str, DLSN | None] = {"a": DLSN.INITIAL, "b": None}
    state_before: dict[str, bytes | None] = {"k": b"old", "j": None}
    why = "a commit with a bad entry is rejected as a whole, before anything is written"
    with _open(open_store) as store:
        store.put("a", DLSN.INITIAL)
        store.commit({}, {"k": b"old"})
        for offsets, state in _BAD_COMMITS:
            call = f"commit({offsets!r}, {state!r})"
            _expect_raises(Exception, partial(store.commit, offsets, state), call, why)
            what = f"after the rejected {call}"
            _expect_contents(store, offsets_before, state_before, what)
            _expect(store.readers(), ["a"], f"{what}, readers()")
    with _open(open_store) as store:
        what = "after the rejected commits and reopening"
        _expect_contents(store, offsets_before, state_before, what)
        _expect(store.readers(), ["a"], f"{what}, readers()")


def _state_put_and_delete(open_store: OpenStore) -> None:
    binary = bytes(range(256)) * 64
    with _open(open_store) as store:
        store.commit({}, {"k": b"v1"})
        _expect(store.get_state("k"), b"v1", "after commit(state={'k': b'v1'}), get_state('k')")
        store.commit({}, {"k": b"v2", "bin": binary, "empty": b""})
        _expect(store.get_state("k"), b"v2", "after overwriting 'k', get_state('k')")
        _expect(store.get_state("bin"), binary, "get_state('bin') of 16 KiB with NULs")
        _expect(
            store.get_state("empty"), b"", "get_state('empty')", "b'' is a value, not a deletion"
        )
        store.commit({}, {"k": None, "never-set": None})
        _expect(store.get_state("k"), None, "after commit(state={'k': None}), get_state('k')")
        _expect(store.get_state("never-set"), None, "after deleting a missing key, get_state")
    with _open(open_store) as store:
        _expect_contents(
            store, {}, {"k": None, "bin": binary, "empty": b""}, "after reopening the store"
        )


def _key_spaces_separate(open_store: OpenStore) -> None:
    why = "offsets and state entries live in separate key spaces"
    with _open(open_store) as store:
        store.put("x", DLSN(3, 3, 3))
        store.commit({}, {"x": b"state of x", "y": b"state of y", "state": b"s"})
        _expect_contents(store, {"x": DLSN(3, 3, 3), "y": None, "state": None}, {}, why)
        _expect(store.get_state("x"), b"state of x", "get_state('x')", why)
        _expect(store.readers(), ["x"], "readers() with state keys 'x', 'y', 'state'", why)
        store.commit({}, {"x": None})
        _expect(store.get("x"), DLSN(3, 3, 3), "after deleting state 'x', get('x')", why)
        store.commit({"y": DLSN(4, 4, 4)})
        _expect(store.get_state("y"), b"state of y", "after put of reader 'y', get_state('y')")


def _persists_across_reopen(open_store: OpenStore) -> None:
    why = "a closed store's writes are there when it is opened again"
    with _open(open_store) as store:
        store.put("a", DLSN(1, 1, 1))
        store.commit({"b": DLSN(2, 2, 2)}, {"k": b"v"})
    with _open(open_store) as store:
        _expect_contents(store, {"a": DLSN(1, 1, 1), "b": DLSN(2, 2, 2)}, {"k": b"v"}, why)
        _expect(store.readers(), ["a", "b"], "after reopening, readers()", why)
        store.put("a", DLSN(3, 3, 3))
        store.commit({}, {"k": None})
    with _open(open_store) as store:
        _expect_contents(store, {"a": DLSN(3, 3, 3)}, {"k": None}, "after a second reopen", why)


def _readers_sorted(open_store: OpenStore) -> None:
    ids = ["zeta", "Alpha", "alpha", "é", "读者", "b", "a-1", "a", "🙂", "\x01", "~"]
    with _open(open_store) as store:
        for i, reader_id in enumerate(ids):
            store.put(reader_id, DLSN(1, i, 0))
        store.put("b", DLSN(2, 0, 0))
        store.commit({}, {"only-state": b"v"})
        _expect(store.readers(), sorted(ids), "readers()", "sorted ids of readers with offsets")
    with _open(open_store) as store:
        _expect(store.readers(), sorted(ids), "after reopening, readers()")


def _use_after_close(open_store: OpenStore) -> None:
    store = _open(open_store)
    try:
        store.put("r", DLSN.INITIAL)
    finally:
        store.close()
    calls: tuple[tuple[str, Callable[[], object]], ...] = (
        ("get('r')", lambda: store.get("r")),
        ("put('r', DLSN.INITIAL)", lambda: store.put("r", DLSN.INITIAL)),
        ("get_state('k')", lambda: store.get_state("k")),
        ("commit({'r': DLSN.INITIAL})", lambda: store.commit({"r": DLSN.INITIAL})),
        ("readers()", store.readers),
        ("__enter__()", store.__enter__),
    )
    for what, call in calls:
        _expect_raises(AlreadyClosed, call, f"after close(), {what}")
    store.close()  # a second close() does nothing
    with _open(open_store) as store:
        store.put("s", DLSN(2, 0, 0))
    _expect_raises(AlreadyClosed, lambda: store.get("s"), "after leaving `with store:`, get('s')")
    with _open(open_store) as store:
        _expect_contents(store, {"r": DLSN.INITIAL, "s": DLSN(2, 0, 0)}, {}, "after reopening")


def _bad_arguments(open_store: OpenStore) -> None:
    d = DLSN.INITIAL
    with _open(open_store) as store:
        s: Any = store  # the calls below break the signature on purpose
        calls: tuple[tuple[str, Callable[[], object]], ...] = (
            ("put('', DLSN)", lambda: s.put("", d)),
            ("put('a\\x00b', DLSN)", lambda: s.put("a\x00b", d)),
            ("put(b'r', DLSN)", lambda: s.put(b"r", d)),
            ("put(None, DLSN)", lambda: s.put(None, d)),
            ("put(1, DLSN)", lambda: s.put(1, d)),
            ("put('\\ud800', DLSN) (lone surrogate)", lambda: s.put("\ud800", d)),
            ("put('r', (1, 0, 0))", lambda: s.put("r", (1, 0, 0))),
            ("put('r', DLSN.INITIAL.serialize())", lambda: s.put("r", d.serialize())),
            ("put('r', DLSN.INITIAL.serialize_bytes())", lambda: s.put("r", d.serialize_bytes())),
            ("put('r', None)", lambda: s.put("r", None)),
            ("get('')", lambda: s.get("")),
            ("get(b'r')", lambda: s.get(b"r")),
            ("get('a\\x00')", lambda: s.get("a\x00")),
            ("get_state('')", lambda: s.get_state("")),
            ("get_state(b'k')", lambda: s.get_state(b"k")),
            ("get_state('k\\x00')", lambda: s.get_state("k\x00")),
            ("commit([('r', DLSN)])", lambda: s.commit([("r", d)])),
            ("commit({'r': DLSN}, [('k', b'v')])", lambda: s.commit({"r": d}, [("k", b"v")])),
            ("commit({'r': DLSN}, {'k': 'text'})", lambda: s.commit({"r": d}, {"k": "text"})),
            ("commit({}, {'k': bytearray(b'v')})", lambda: s.commit({}, {"k": bytearray(b"v")})),
            ("commit({}, {'k': 1})", lambda: s.commit({}, {"k": 1})),
            ("commit({'': DLSN})", lambda: s.commit({"": d})),
            ("commit({1: DLSN})", lambda: s.commit({1: d})),
            ("commit({'r': 'AQ...'})", lambda: s.commit({"r": d.serialize()})),
            ("commit({}, {'': b'v'})", lambda: s.commit({}, {"": b"v"})),
            ("commit({}, {b'k': b'v'})", lambda: s.commit({}, {b"k": b"v"})),
        )
        for what, call in calls:
            _expect_raises(ConfigError, call, what, "bad arguments raise ConfigError")
        store.put("r", DLSN(5, 0, 0))
        _expect(store.get("r"), DLSN(5, 0, 0), "after the rejected calls, get('r')")


def _check(name: str, promise: str, function: Callable[[OpenStore], None]) -> ConformanceCheck:
    return ConformanceCheck(name=name, promise=promise, function=function)


CONFORMANCE_CHECKS: Final[tuple[ConformanceCheck, ...]] = (
    _check(
        "satisfies_protocol",
        "the store is an OffsetStore: sync is a bool, get gives a DLSN, readers a list, "
        "get_state bytes, and `with store` gives the store",
        _satisfies_protocol,
    ),
    _check(
        "missing_is_none",
        "get() of a reader without an offset and get_state() of a missing key return None",
        _missing_is_none,
    ),
    _check(
        "round_trip",
        "get() returns exactly the DLSN put, int64 edge values and unusual reader ids included",
        _round_trip,
    ),
    _check(
        "last_write_wins",
        "get() returns the last DLSN written, even when it is smaller than an earlier one",
        _last_write_wins,
    ),
    _check(
        "readers_independent",
        "each reader's offset is its own: writing one reader never changes another",
        _readers_independent,
    ),
    _check(
        "commit_applies_all",
        "commit() applies every offset and state entry it is given",
        _commit_applies_all,
    ),
    _check(
        "commit_all_or_nothing",
        "a commit() with one bad entry raises before writing anything, even after reopening",
        _commit_all_or_nothing,
    ),
    _check(
        "state_put_and_delete",
        "commit() stores state bytes as given (b'' included) and a None value deletes the key",
        _state_put_and_delete,
    ),
    _check(
        "key_spaces_separate",
        "reader 'x' and state key 'x' are unrelated; readers() lists offsets only",
        _key_spaces_separate,
    ),
    _check(
        "persists_across_reopen",
        "offsets and state written before close() are there after reopening",
        _persists_across_reopen,
    ),
    _check(
        "readers_sorted",
        "readers() lists each reader with an offset once, in sorted() order",
        _readers_sorted,
    ),
    _check(
        "use_after_close",
        "after close() every call raises AlreadyClosed, a second close() does nothing, and "
        "`with` closes the store",
        _use_after_close,
    ),
    _check(
        "bad_arguments",
        "bad reader ids, state keys, DLSNs, values and mappings raise ConfigError",
        _bad_arguments,
    ),
)
"""Every check of the suite, in the order :func:`run_conformance` runs them."""


def run_conformance(
    make_opener: Callable[[], OpenStore],
    *,
    checks: Iterable[ConformanceCheck] = CONFORMANCE_CHECKS,
    raise_on_failure: bool = True,
) -> list[ConformanceResult]:
    """Run ``checks`` (all by default), each on the opener returned by a new ``make_opener()``.

    ``make_opener`` must give a fresh, empty location on every call. Every check runs, even
    after a failure. With ``raise_on_failure`` (the default), any failure raises one
    :class:`ConformanceFailure` whose message lists each failed check and what differed;
    otherwise the results are returned for the caller to report.
    """
    if not callable(make_opener):
        raise ConfigError(
            f"run_conformance needs a function that returns a new opener for a fresh location, "
            f"got {type(make_opener).__name__}: {make_opener!r}; pass a function that makes a "
            "fresh location on each call and returns an opener for it, e.g. "
            "lambda: partial(LevelDBOffsetStore, Path(tempfile.mkdtemp()) / 'offsets')"
        )
    if not isinstance(raise_on_failure, bool):
        raise ConfigError(f"raise_on_failure must be True or False, got {raise_on_failure!r}")
    results = []
    for check in checks:
        if not isinstance(check, ConformanceCheck):
            raise ConfigError(
                f"checks must hold ConformanceCheck objects, got {type(check).__name__}: "
                f"{check!r}; pass a subset of CONFORMANCE_CHECKS"
            )
        try:
            check(make_opener())
        except ConformanceFailure as failure:
            results.append(ConformanceResult(check.name, failure))
        else:
            results.append(ConformanceResult(check.name, None))
    failed = [result for result in results if result.failure is not None]
    if failed and raise_on_failure:
        lines = "\n".join(f"- {result.failure}" for result in failed)
        raise ConformanceFailure(
            f"offset store conformance: {len(failed)} of {len(results)} checks failed:\n{lines}",
            checks=tuple(result.check for result in failed),
        )
    return results
