"""Both offset stores against a dict model, over random put/commit/reopen sequences."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.errors import ConfigError
from harness.log.dlsn import DLSN
from harness.offsets import LevelDBOffsetStore, MemoryOffsetStorage, MemoryOffsetStore, OffsetStore

# Reader ids and state keys overlap on purpose: the two key spaces must stay apart.
READERS = ["a", "b", "é", "读者", "state", "\x01"]
KEYS = ["k", "a", "state"]
INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
DLSNS = st.builds(DLSN, st.integers(-2, 2) | INT64, st.integers(-2, 2), st.integers(-1, 1))


@dataclass(frozen=True, slots=True)
class Put:
    reader_id: str
    dlsn: DLSN


@dataclass(frozen=True, slots=True)
class Commit:
    offsets: dict[str, DLSN]
    state: dict[str, bytes | None]


@dataclass(frozen=True, slots=True)
class BadCommit:
    """A commit with one invalid entry among valid ones: must change nothing."""

    offsets: dict[Any, Any]
    state: dict[Any, Any]


@dataclass(frozen=True, slots=True)
class Reopen:
    pass


Op = Put | Commit | BadCommit | Reopen

BAD_ENTRIES = st.sampled_from(
    [
        ("offsets", "", DLSN.INITIAL),
        ("offsets", "nul\x00", DLSN.INITIAL),
        ("offsets", "a", (1, 0, 0)),
        ("state", "k", "text"),
        ("state", "", b"v"),
    ]
)


@st.composite
def bad_commits(draw: st.DrawFn) -> BadCommit:
    offsets: dict[Any, Any] = draw(st.dictionaries(st.sampled_from(READERS), DLSNS, max_size=3))
    state: dict[Any, Any] = draw(
        st.dictionaries(st.sampled_from(KEYS), st.none() | st.binary(max_size=4), max_size=2)
    )
    where, key, value = draw(BAD_ENTRIES)
    (offsets if where == "offsets" else state)[key] = value  # last, after the valid ones
    return BadCommit(offsets, state)


OPS: st.SearchStrategy[Op] = st.one_of(
    st.builds(Put, st.sampled_from(READERS), DLSNS),
    st.builds(
        Commit,
        st.dictionaries(st.sampled_from(READERS), DLSNS, max_size=3),
        st.dictionaries(st.sampled_from(KEYS), st.none() | st.binary(max_size=4), max_size=2),
    ),
    bad_commits(),
    st.just(Reopen()),
)


@contextmanager
def memory_opener() -> Iterator[Callable[[], OffsetStore]]:
    storage = MemoryOffsetStorage()
    yield lambda: MemoryOffsetStore(storage=storage)


@contextmanager
def leveldb_opener() -> Iterator[Callable[[], OffsetStore]]:
    with tempfile.TemporaryDirectory() as tmp:
        yield lambda: LevelDBOffsetStore(Path(tmp) / "offsets")


OPENERS = {"memory": memory_opener, "leveldb": leveldb_opener}


def assert_matches(
    store: OffsetStore, offsets: dict[str, DLSN], state: dict[str, bytes], when: str
) -> None:
    assert {r: store.get(r) for r in READERS} == {r: offsets.get(r) for r in READERS}, when
    assert {k: store.get_state(k) for k in KEYS} == {k: state.get(k) for k in KEYS}, when
    assert store.readers() == sorted(offsets), when


@pytest.mark.parametrize("kind", list(OPENERS))
@given(ops=st.lists(OPS, max_size=15))
@settings(deadline=None)
def test_a_store_behaves_like_a_dict_across_reopens(kind: str, ops: list[Op]) -> None:
    offsets: dict[str, DLSN] = {}
    state: dict[str, bytes] = {}
    with OPENERS[kind]() as open_store:
        store = open_store()
        try:
            for step, op in enumerate(ops):
                if isinstance(op, Put):
                    store.put(op.reader_id, op.dlsn)
                    offsets[op.reader_id] = op.dlsn
                elif isinstance(op, Commit):
                    store.commit(op.offsets, op.state)
                    offsets.update(op.offsets)
                    for key, value in op.state.items():
                        if value is None:
                            state.pop(key, None)
                        else:
                            state[key] = value
                elif isinstance(op, BadCommit):
                    with pytest.raises(ConfigError):
                        store.commit(op.offsets, op.state)
                else:
                    store.close()
                    store = open_store()
                assert_matches(store, offsets, state, f"after step {step}: {op}")
        finally:
            store.close()
        with open_store() as reopened:
            assert_matches(reopened, offsets, state, "after the final reopen")
