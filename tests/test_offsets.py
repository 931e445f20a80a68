"""Offset stores: the conformance suite on both stores, broken stores it must catch, routing."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

import pytest

from harness.errors import AlreadyClosed, ConfigError, HarnessError, UnsupportedURI
from harness.log.dlsn import DLSN
from harness.offsets import (
    CONFORMANCE_CHECKS,
    ConformanceCheck,
    ConformanceFailure,
    LevelDBOffsetStore,
    MemoryOffsetStorage,
    MemoryOffsetStore,
    OffsetStore,
    forget_memory_offset_storages,
    open_offset_store,
    run_conformance,
)
from harness.offsets.base import (
    NO_STATE,
    validate_commit,
    validate_commit_mappings,
    validate_dlsn,
    validate_reader_id,
)
from harness.offsets.conformance import OpenStore

CHECK_NAMES = [check.name for check in CONFORMANCE_CHECKS]


# --------------------------------------------------------------------------------------------
# The suite on both stores, with sync off and on, written as the docstring's pytest recipe.


@pytest.mark.parametrize("sync", [False, True], ids=["sync-off", "sync-on"])
@pytest.mark.parametrize("check", CONFORMANCE_CHECKS, ids=lambda check: check.name)
def test_leveldb_store_conforms(check: ConformanceCheck, sync: bool, tmp_path: Path) -> None:
    check(lambda: LevelDBOffsetStore(tmp_path / "offsets", sync=sync))


@pytest.mark.parametrize("sync", [False, True], ids=["sync-off", "sync-on"])
@pytest.mark.parametrize("check", CONFORMANCE_CHECKS, ids=lambda check: check.name)
def test_memory_store_conforms(check: ConformanceCheck, sync: bool) -> None:
    storage = MemoryOffsetStorage()
    check(lambda: MemoryOffsetStore(sync=sync, storage=storage))


def test_run_conformance_passes_both_stores_from_plain_python(tmp_path: Path) -> None:
    counter = iter(range(1000))

    def leveldb_opener() -> OpenStore:
        path = tmp_path / f"store-{next(counter)}"
        return lambda: LevelDBOffsetStore(path)

    def memory_opener() -> OpenStore:
        storage = MemoryOffsetStorage()
        return lambda: MemoryOffsetStore(storage=storage)

    for make_opener in (leveldb_opener, memory_opener):
        results = run_conformance(make_opener)
        assert [result.check for result in results] == CHECK_NAMES
        assert all(result.passed and result.failure is None for result in results)


def test_check_names_are_unique_identifiers() -> None:
    assert len(set(CHECK_NAMES)) == len(CHECK_NAMES) == 13
    assert all(name.isidentifier() for name in CHECK_NAMES)
    assert all(check.promise for check in CONFORMANCE_CHECKS)


# --------------------------------------------------------------------------------------------
# Broken stores. Each wraps a correct MemoryOffsetStore and breaks one promise; the suite must
# fail exactly the checks listed for it. Every check catches at least one of them.


class Wrapper:
    """A correct store, by delegation; the mutants below override one thing each."""

    def __init__(self, storage: MemoryOffsetStorage) -> None:
        self.inner = MemoryOffsetStore(storage=storage)

    @property
    def sync(self) -> bool:
        return self.inner.sync

    def get(self, reader_id: str) -> DLSN | None:
        return self.inner.get(reader_id)

    def put(self, reader_id: str, dlsn: DLSN) -> None:
        self.inner.put(reader_id, dlsn)

    def get_state(self, key: str) -> bytes | None:
        return self.inner.get_state(key)

    def commit(
        self, offsets: Mapping[str, DLSN], state: Mapping[str, bytes | None] = NO_STATE
    ) -> None:
        self.inner.commit(offsets, state)

    def readers(self) -> list[str]:
        return self.inner.readers()

    def close(self) -> None:
        self.inner.close()

    def __enter__(self) -> Wrapper:
        self.inner.__enter__()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class SyncIsAnInt(Wrapper):
    @property
    def sync(self) -> bool:
        return 0  # type: ignore[return-value]


class MissingIsInitial(Wrapper):
    """Defaults a missing reader to DLSN.INITIAL, as the tutorial's caller does."""

    def get(self, reader_id: str) -> DLSN | None:
        found = self.inner.get(reader_id)
        return DLSN.INITIAL if found is None else found


class Keeps32Bits(Wrapper):
    """Stores each DLSN field as a wrapped signed 32-bit int."""

    def put(self, reader_id: str, dlsn: DLSN) -> None:
        validate_dlsn(dlsn, reader_id)

        def wrap(value: int) -> int:
            return (value + 2**31) % 2**32 - 2**31

        self.inner.put(reader_id, DLSN(wrap(dlsn.segment), wrap(dlsn.entry), wrap(dlsn.slot)))


class KeepsMax(Wrapper):
    """Never lets an offset go backwards: keeps the largest DLSN ever written."""

    def _max(self, reader_id: str, dlsn: DLSN) -> DLSN:
        old = self.inner.get(reader_id)
        return dlsn if old is None else max(old, dlsn)

    def put(self, reader_id: str, dlsn: DLSN) -> None:
        self.inner.put(reader_id, self._max(reader_id, dlsn))

    def commit(
        self, offsets: Mapping[str, DLSN], state: Mapping[str, bytes | None] = NO_STATE
    ) -> None:
        validate_commit(offsets, state)
        self.inner.commit({r: self._max(r, d) for r, d in offsets.items()}, state)


class TruncatesReaderIds(Wrapper):
    """Keys offsets by the first 8 characters of the reader id."""

    def put(self, reader_id: str, dlsn: DLSN) -> None:
        validate_reader_id(reader_id)
        self.inner.put(reader_id[:8], dlsn)

    def get(self, reader_id: str) -> DLSN | None:
        validate_reader_id(reader_id)
        return self.inner.get(reader_id[:8])


class CommitsFirstOffsetOnly(Wrapper):
    def commit(
        self, offsets: Mapping[str, DLSN], state: Mapping[str, bytes | None] = NO_STATE
    ) -> None:
        validate_commit(offsets, state)
        self.inner.commit(dict(list(offsets.items())[:1]), state)


class NonAtomicCommit(Wrapper):
    """Writes each entry as it checks it, so a bad entry leaves the earlier ones written."""

    def commit(
        self, offsets: Mapping[str, DLSN], state: Mapping[str, bytes | None] = NO_STATE
    ) -> None:
        validate_commit_mappings(offsets, state)
        for reader_id, dlsn in offsets.items():
            self.inner.put(reader_id, dlsn)
        for key, value in state.items():
            self.inner.commit({}, {key: value})


class IgnoresStateDeletes(Wrapper):
    def commit(
        self, offsets: Mapping[str, DLSN], state: Mapping[str, bytes | None] = NO_STATE
    ) -> None:
        validate_commit(offsets, state)
        self.inner.commit(offsets, {k: v for k, v in state.items() if v is not None})


class OneKeySpace:
    """Offsets and state in one dict: reader 'x' and state key 'x' are the same entry."""

    def __init__(self, data: dict[str, DLSN | bytes]) -> None:
        self.data = data
        self.sync = False
        self.closed = False

    def _check(self, name: object) -> None:
        if self.closed:
            raise AlreadyClosed("closed")
        validate_reader_id(name)

    def get(self, reader_id: str) -> DLSN | None:
        self._check(reader_id)
        value = self.data.get(reader_id)
        return value if isinstance(value, DLSN) else None

    def put(self, reader_id: str, dlsn: DLSN) -> None:
        self.commit({reader_id: dlsn})

    def get_state(self, key: str) -> bytes | None:
        self._check(key)
        value = self.data.get(key)
        return value if isinstance(value, bytes) else None

    def commit(
        self, offsets: Mapping[str, DLSN], state: Mapping[str, bytes | None] = NO_STATE
    ) -> None:
        if self.closed:
            raise AlreadyClosed("closed")
        validate_commit(offsets, state)
        self.data.update(offsets)
        for key, value in state.items():
            if value is None:
                self.data.pop(key, None)
            else:
                self.data[key] = value

    def readers(self) -> list[str]:
        if self.closed:
            raise AlreadyClosed("closed")
        return sorted(key for key, value in self.data.items() if isinstance(value, DLSN))

    def close(self) -> None:
        self.closed = True

    def __enter__(self) -> OneKeySpace:
        if self.closed:
            raise AlreadyClosed("closed")
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class ReadersCaseInsensitive(Wrapper):
    def readers(self) -> list[str]:
        return sorted(self.inner.readers(), key=str.lower)


class CloseDoesNothing(Wrapper):
    def close(self) -> None:
        pass


class ValueErrorForEmptyIds(Wrapper):
    """Raises a plain ValueError, not ConfigError, for an empty reader id."""

    def put(self, reader_id: str, dlsn: DLSN) -> None:
        if reader_id == "":
            raise ValueError("empty")
        self.inner.put(reader_id, dlsn)


def _wrapped(cls: Callable[[MemoryOffsetStorage], Any]) -> Callable[[], OpenStore]:
    def make_opener() -> OpenStore:
        storage = MemoryOffsetStorage()
        return lambda: cls(storage)

    return make_opener


def _forgetful() -> OpenStore:
    return lambda: MemoryOffsetStore(storage=MemoryOffsetStorage())


def _one_key_space() -> OpenStore:
    data: dict[str, DLSN | bytes] = {}
    return lambda: OneKeySpace(data)


# (make_opener, the checks that must fail; the first one is the check the mutant is aimed at)
MUTANTS: dict[str, tuple[Callable[[], OpenStore], list[str]]] = {
    "sync-is-an-int": (_wrapped(SyncIsAnInt), ["satisfies_protocol"]),
    "missing-is-initial": (
        _wrapped(MissingIsInitial),
        ["missing_is_none", "commit_all_or_nothing", "key_spaces_separate"],
    ),
    "keeps-32-bits": (_wrapped(Keeps32Bits), ["round_trip"]),
    "keeps-max": (_wrapped(KeepsMax), ["last_write_wins"]),
    "truncates-reader-ids": (_wrapped(TruncatesReaderIds), ["readers_independent"]),
    "commits-first-offset-only": (_wrapped(CommitsFirstOffsetOnly), ["commit_applies_all"]),
    "non-atomic-commit": (_wrapped(NonAtomicCommit), ["commit_all_or_nothing"]),
    "ignores-state-deletes": (
        _wrapped(IgnoresStateDeletes),
        ["state_put_and_delete", "persists_across_reopen"],
    ),
    "one-key-space": (_one_key_space, ["key_spaces_separate"]),
    "forgetful": (
        _forgetful,
        [
            "persists_across_reopen",
            "last_write_wins",
            "commit_applies_all",
            "commit_all_or_nothing",
            "state_put_and_delete",
            "readers_sorted",
            "use_after_close",
        ],
    ),
    "readers-case-insensitive": (_wrapped(ReadersCaseInsensitive), ["readers_sorted"]),
    "close-does-nothing": (_wrapped(CloseDoesNothing), ["use_after_close"]),
    "value-error-for-empty-ids": (_wrapped(ValueErrorForEmptyIds), ["bad_arguments"]),
}


@pytest.mark.parametrize("mutant", list(MUTANTS))
def test_the_suite_catches_a_broken_store_with_the_right_checks(mutant: str) -> None:
    make_opener, expected = MUTANTS[mutant]
    results = run_conformance(make_opener, raise_on_failure=False)
    failed = {result.check for result in results if not result.passed}
    assert failed == set(expected)
    for result in results:
        if result.failure is not None:
            assert result.failure.checks == (result.check,)
            assert f"conformance check {result.check!r} failed: " in str(result.failure)


def test_every_check_is_the_target_of_a_broken_store() -> None:
    targets = [expected[0] for _, expected in MUTANTS.values()]
    assert sorted(targets) == sorted(CHECK_NAMES)


def test_a_failure_names_the_check_and_what_differed() -> None:
    storage = MemoryOffsetStorage()
    check = next(check for check in CONFORMANCE_CHECKS if check.name == "last_write_wins")
    with pytest.raises(ConformanceFailure) as info:
        check(lambda: KeepsMax(storage))
    assert str(info.value) == (
        "offset store conformance check 'last_write_wins' failed: after put('r', "
        "DLSN(5, 10, 2)), put('r', DLSN(5, 3, 0)), get('r') returned "
        "DLSN(segment=5, entry=10, slot=2), expected DLSN(segment=5, entry=3, slot=0): "
        "the store keeps the last write, not the largest DLSN (promise: get() returns the "
        "last DLSN written, even when it is smaller than an earlier one)"
    )
    assert info.value.checks == ("last_write_wins",)
    assert isinstance(info.value, AssertionError)
    assert isinstance(info.value, HarnessError)


def test_run_conformance_raises_one_failure_listing_every_failed_check() -> None:
    make_opener, _ = MUTANTS["ignores-state-deletes"]
    with pytest.raises(ConformanceFailure) as info:
        run_conformance(make_opener)
    lines = str(info.value).splitlines()
    assert lines[0] == "offset store conformance: 2 of 13 checks failed:"
    assert lines[1].startswith(
        "- offset store conformance check 'state_put_and_delete' failed: after "
        "commit(state={'k': None}), get_state('k') returned b'v2', expected None"
    )
    assert lines[2].startswith(
        "- offset store conformance check 'persists_across_reopen' failed: after a second "
        "reopen, get_state('k') returned b'v', expected None"
    )
    assert info.value.checks == ("state_put_and_delete", "persists_across_reopen")


def test_an_unexpected_exception_from_the_store_is_reported_with_the_check() -> None:
    class RaisesKeyError(Wrapper):
        def get(self, reader_id: str) -> DLSN | None:
            found = self.inner.get(reader_id)
            if found is None:
                raise KeyError(reader_id)
            return found

    check = next(check for check in CONFORMANCE_CHECKS if check.name == "missing_is_none")
    storage = MemoryOffsetStorage()
    with pytest.raises(ConformanceFailure) as info:
        check(lambda: RaisesKeyError(storage))
    assert str(info.value).startswith(
        "offset store conformance check 'missing_is_none' failed: the store raised "
        "KeyError: 'never-written' (promise: "
    )
    assert isinstance(info.value.__cause__, KeyError)


def test_an_opener_returning_something_else_fails_satisfies_protocol() -> None:
    check = CONFORMANCE_CHECKS[0]
    with pytest.raises(ConformanceFailure, match=r"open_store\(\) returned dict: \{\}, which"):
        check(lambda: {})  # type: ignore[arg-type,return-value]


def test_run_conformance_rejects_bad_arguments() -> None:
    with pytest.raises(
        ConfigError, match=r"got str: 'memory://x'; pass a function that makes a fresh location"
    ):
        run_conformance("memory://x")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"checks must hold ConformanceCheck objects, got str"):
        run_conformance(_forgetful, checks=["round_trip"])  # type: ignore[list-item]
    with pytest.raises(ConfigError, match=r"needs a function that opens the store, got int: 3"):
        CONFORMANCE_CHECKS[0](3)  # type: ignore[arg-type]


def test_run_conformance_runs_a_chosen_subset() -> None:
    subset = [check for check in CONFORMANCE_CHECKS if check.name.startswith("commit")]
    results = run_conformance(_wrapped(NonAtomicCommit), checks=subset, raise_on_failure=False)
    assert [(r.check, r.passed) for r in results] == [
        ("commit_applies_all", True),
        ("commit_all_or_nothing", False),
    ]


# --------------------------------------------------------------------------------------------
# Both stores reject bad arguments with the same messages.


@pytest.fixture(params=["memory", "leveldb"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[OffsetStore]:
    opened: OffsetStore
    if request.param == "memory":
        opened = MemoryOffsetStore()
    else:
        opened = LevelDBOffsetStore(tmp_path / "offsets")
    with opened:
        yield opened


BAD_CALLS: list[tuple[str, Callable[[Any], object], str]] = [
    (
        "empty-reader",
        lambda s: s.put("", DLSN.INITIAL),
        "reader id must not be empty, got ''; pass text such as 'reader-1'",
    ),
    (
        "nul-reader",
        lambda s: s.get("a\x00b"),
        "reader id must not contain NUL ('\\x00'), got 'a\\x00b'; remove or replace the NUL "
        "character (it separates the store's key spaces)",
    ),
    (
        "bytes-reader",
        lambda s: s.put(b"r", DLSN.INITIAL),
        "reader id must be a str, got bytes: b'r'; pass text such as 'reader-1'",
    ),
    (
        "surrogate-reader",
        lambda s: s.put("r\ud800", DLSN.INITIAL),
        "reader id must encode to UTF-8, got 'r\\ud800' (surrogates not allowed at index 1); "
        "remove the lone surrogate characters",
    ),
    (
        "tuple-dlsn",
        lambda s: s.put("r", (1, 0, 0)),
        "the offset of reader 'r' must be a DLSN, got tuple: (1, 0, 0); build one with "
        "DLSN(segment, entry, slot) or DLSN.deserialize_bytes(...)",
    ),
    (
        "str-state-value",
        lambda s: s.commit({"r": DLSN.INITIAL}, {"k": "text"}),
        "the value of state key 'k' must be bytes (or None to delete the key), got str: 'text'; "
        "encode it first, e.g. text.encode('utf-8') or bytes(buffer)",
    ),
    (
        "empty-state-key",
        lambda s: s.get_state(""),
        "state key must not be empty, got ''; pass text such as 'counts'",
    ),
    (
        "list-offsets",
        lambda s: s.commit([("r", DLSN.INITIAL)]),
        "commit() offsets must be a mapping of reader id to DLSN, got list: "
        "[('r', DLSN(segment=1, entry=0, slot=0))]; pass a dict such as "
        "{'reader-1': DLSN(1, 0, 0)}",
    ),
    (
        "list-state",
        lambda s: s.commit({}, [("k", b"v")]),
        "commit() state must be a mapping of key to bytes or None, got list: [('k', b'v')]; "
        "pass a dict such as {'counts': b'...'}",
    ),
]


@pytest.mark.parametrize(
    ("call", "message"),
    [(call, message) for _, call, message in BAD_CALLS],
    ids=[name for name, _, _ in BAD_CALLS],
)
def test_bad_arguments_raise_config_error_with_the_value_and_the_fix(
    store: OffsetStore, call: Callable[[Any], object], message: str
) -> None:
    with pytest.raises(ConfigError) as info:
        call(store)
    assert str(info.value) == message


def test_sync_must_be_a_bool(tmp_path: Path) -> None:
    message = (
        "sync must be True or False, got str: 'yes'; pass sync=True to fsync every write "
        "(survives a machine crash) or sync=False (survives a process crash only)"
    )
    with pytest.raises(ConfigError) as info:
        MemoryOffsetStore(sync="yes")  # type: ignore[arg-type]
    assert str(info.value) == message
    with pytest.raises(ConfigError) as info:
        LevelDBOffsetStore(tmp_path / "offsets", sync="yes")  # type: ignore[arg-type]
    assert str(info.value) == message
    assert not (tmp_path / "offsets").exists()


def test_after_close_the_error_says_what_to_do(store: OffsetStore) -> None:
    store.close()
    with pytest.raises(
        AlreadyClosed, match=r"^put\(\) on a closed offset store \(.*\); open a new"
    ):
        store.put("r", DLSN.INITIAL)


def test_both_stores_satisfy_the_protocol_at_runtime(store: OffsetStore) -> None:
    assert isinstance(store, OffsetStore)
    assert store.sync is False


# --------------------------------------------------------------------------------------------
# open_offset_store


@pytest.fixture
def memory_name() -> Iterator[str]:
    name = f"test-{uuid.uuid4().hex}"
    yield name
    forget_memory_offset_storages(name)


def test_memory_locations_share_data_by_name(memory_name: str) -> None:
    with open_offset_store(f"memory://{memory_name}", sync=True) as first:
        assert isinstance(first, MemoryOffsetStore)
        assert first.sync is True
        assert first.storage is MemoryOffsetStorage.named(memory_name)
        first.put("r", DLSN(4, 0, 0))
    with open_offset_store(f"memory://{memory_name}") as again:
        assert again.get("r") == DLSN(4, 0, 0)
        assert again.sync is False
    with open_offset_store(f"memory://{memory_name}-other") as other:
        assert other.get("r") is None
    forget_memory_offset_storages(f"{memory_name}-other")


def test_forgetting_a_memory_storage_starts_it_empty(memory_name: str) -> None:
    with open_offset_store(f"memory://{memory_name}") as store:
        store.put("r", DLSN.INITIAL)
    forget_memory_offset_storages(memory_name)
    with open_offset_store(f"memory://{memory_name}") as store:
        assert store.get("r") is None


@pytest.mark.parametrize("as_str", [False, True], ids=["path", "str"])
def test_other_locations_are_leveldb_directories(tmp_path: Path, as_str: bool) -> None:
    location = str(tmp_path / "offsets") if as_str else tmp_path / "offsets"
    with open_offset_store(location, sync=True) as store:
        assert isinstance(store, LevelDBOffsetStore)
        assert store.path == tmp_path / "offsets"
        assert store.sync is True
        store.put("r", DLSN(2, 0, 0))
    with open_offset_store(location) as store:
        assert store.get("r") == DLSN(2, 0, 0)


FORMS = (
    "use 'memory://NAME' (an in-memory store shared by name within the process) or a LevelDB "
    "directory path such as 'offsets' or pathlib.Path('offsets')"
)


@pytest.mark.parametrize(
    ("location", "message"),
    [
        (
            "s3://bucket/offsets",
            f"offset store location 's3://bucket/offsets' has the unsupported scheme 's3'; {FORMS}",
        ),
        (
            "file:///tmp/offsets",
            f"offset store location 'file:///tmp/offsets' has the unsupported scheme 'file'; "
            f"{FORMS}",
        ),
        (
            "memory://",
            "offset store location 'memory://' has no name after 'memory://'; use e.g. "
            "'memory://offsets'",
        ),
        (42, f"offset store location must be a str or os.PathLike, got int: 42; {FORMS}"),
    ],
)
def test_unsupported_locations_name_the_value_and_the_supported_forms(
    location: Any, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UnsupportedURI) as info:
        open_offset_store(location)
    assert isinstance(info.value, ConfigError)
    assert str(info.value) == message
    assert list(tmp_path.iterdir()) == []
