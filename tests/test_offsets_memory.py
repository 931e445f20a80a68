"""MemoryOffsetStorage: what a process crash and a machine crash leave behind."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.errors import AlreadyClosed, ConfigError
from harness.log.dlsn import DLSN
from harness.offsets import MemoryOffsetStorage, MemoryOffsetStore


def contents(storage: MemoryOffsetStorage) -> tuple[dict[str, DLSN | None], dict[str, bytes]]:
    """What a restarted processor finds: offsets of every reader, and the state keys asked."""
    with MemoryOffsetStore(storage=storage) as store:
        offsets = {reader_id: store.get(reader_id) for reader_id in store.readers()}
        state = {key: value for key in ("k", "j") if (value := store.get_state(key)) is not None}
    return offsets, state


def test_a_process_crash_loses_nothing_that_was_written() -> None:
    storage = MemoryOffsetStorage()
    crashed = MemoryOffsetStore(storage=storage)  # never closed: the process died
    crashed.put("a", DLSN(1, 0, 0))
    crashed.commit({"b": DLSN(2, 0, 0)}, {"k": b"v"})
    assert contents(storage) == ({"a": DLSN(1, 0, 0), "b": DLSN(2, 0, 0)}, {"k": b"v"})
    assert storage.unsynced_count == 2


def test_a_machine_crash_keeps_a_prefix_of_the_unsynced_batches() -> None:
    storage = MemoryOffsetStorage()
    store = MemoryOffsetStore(storage=storage)
    store.put("a", DLSN(1, 0, 0))
    store.put("a", DLSN(1, 0, 1))
    store.commit({"b": DLSN(2, 0, 0), "c": DLSN(3, 0, 0)}, {"k": b"v"})
    store.put("a", DLSN(1, 0, 2))
    assert storage.unsynced_count == 4
    storage.lose_unsynced(keep=3)
    assert storage.unsynced_count == 0
    assert contents(storage) == (
        {"a": DLSN(1, 0, 1), "b": DLSN(2, 0, 0), "c": DLSN(3, 0, 0)},
        {"k": b"v"},
    )


def test_a_commit_is_lost_whole_or_kept_whole() -> None:
    storage = MemoryOffsetStorage()
    store = MemoryOffsetStore(storage=storage)
    store.commit({"a": DLSN(1, 0, 0), "b": DLSN(2, 0, 0)}, {"k": b"v", "j": b"w"})
    assert storage.unsynced_count == 1
    storage.lose_unsynced()
    assert contents(storage) == ({}, {})


def test_a_synced_write_makes_itself_and_every_earlier_write_durable() -> None:
    storage = MemoryOffsetStorage()
    unsynced = MemoryOffsetStore(storage=storage)
    synced = MemoryOffsetStore(storage=storage, sync=True)
    unsynced.put("a", DLSN(1, 0, 0))
    unsynced.commit({}, {"k": b"v"})
    synced.put("b", DLSN(2, 0, 0))
    assert storage.unsynced_count == 0
    unsynced.put("c", DLSN(3, 0, 0))
    unsynced.commit({}, {"k": None})
    assert storage.unsynced_count == 2
    storage.lose_unsynced(keep=0)
    assert contents(storage) == ({"a": DLSN(1, 0, 0), "b": DLSN(2, 0, 0)}, {"k": b"v"})


def test_kept_batches_are_durable_after_the_crash() -> None:
    storage = MemoryOffsetStorage()
    store = MemoryOffsetStore(storage=storage)
    store.put("a", DLSN(1, 0, 0))
    storage.lose_unsynced(keep=1)
    storage.lose_unsynced(keep=0)  # a second crash cannot take back what the first kept
    assert contents(storage) == ({"a": DLSN(1, 0, 0)}, {})


def test_an_empty_commit_is_not_a_batch() -> None:
    storage = MemoryOffsetStorage()
    MemoryOffsetStore(storage=storage).commit({}, {})
    assert storage.unsynced_count == 0


@pytest.mark.parametrize("keep", [-1, 3, True, 1.0, "1"])
def test_keep_must_be_an_int_within_the_unsynced_batches(keep: object) -> None:
    storage = MemoryOffsetStorage()
    store = MemoryOffsetStore(storage=storage)
    store.put("a", DLSN.INITIAL)
    store.put("b", DLSN.INITIAL)
    with pytest.raises(ConfigError) as info:
        storage.lose_unsynced(keep)  # type: ignore[arg-type]
    assert str(info.value) == (
        f"lose_unsynced(keep={keep!r}): keep must be an int from 0 to the 2 unsynced "
        "batch(es); choose it from range(unsynced_count + 1)"
    )
    assert storage.unsynced_count == 2  # nothing happened


def test_named_storages_are_one_per_name() -> None:
    first = MemoryOffsetStorage.named("test-offsets-memory-named")
    assert MemoryOffsetStorage.named("test-offsets-memory-named") is first
    assert first.name == "test-offsets-memory-named"
    with pytest.raises(ConfigError, match="needs a non-empty str name, got ''"):
        MemoryOffsetStorage.named("")


def test_storage_must_be_a_memory_offset_storage() -> None:
    with pytest.raises(ConfigError) as info:
        MemoryOffsetStore(storage={})  # type: ignore[arg-type]
    assert str(info.value) == (
        "storage must be a MemoryOffsetStorage, got dict: {}; pass MemoryOffsetStorage() or "
        "MemoryOffsetStorage.named('NAME')"
    )


def test_repr_shows_the_storage_and_closed() -> None:
    storage = MemoryOffsetStorage("demo")
    store = MemoryOffsetStore(storage=storage, sync=True)
    store.put("a", DLSN.INITIAL)
    store.close()
    assert repr(store) == (
        "MemoryOffsetStore(sync=True, storage=MemoryOffsetStorage(name='demo', readers=1, "
        "state_keys=0, unsynced=0), closed)"
    )
    with pytest.raises(AlreadyClosed) as info:
        store.get("a")
    assert str(info.value) == (
        "get() on a closed offset store (MemoryOffsetStorage(name='demo', readers=1, "
        "state_keys=0, unsynced=0)); open a new MemoryOffsetStore(storage=...) on the same "
        "storage instead"
    )


# --------------------------------------------------------------------------------------------
# The crash model against a list of batches: after any writes, a machine crash that keeps
# `keep` unsynced batches leaves exactly the synced prefix plus those `keep` batches.

READERS = st.sampled_from(["a", "b", "c"])
KEYS = st.sampled_from(["k", "j"])
SMALL_DLSNS = st.builds(DLSN, st.integers(0, 3), st.integers(0, 3), st.integers(-1, 1))


@dataclass(frozen=True, slots=True)
class Write:
    offsets: dict[str, DLSN]
    state: dict[str, bytes | None]
    sync: bool


WRITES = st.builds(
    Write,
    st.dictionaries(READERS, SMALL_DLSNS, max_size=3),
    st.dictionaries(KEYS, st.none() | st.binary(max_size=3), max_size=2),
    st.booleans(),
).filter(lambda write: bool(write.offsets or write.state))


def apply(writes: list[Write]) -> tuple[dict[str, DLSN | None], dict[str, bytes]]:
    offsets: dict[str, DLSN | None] = {}
    state: dict[str, bytes] = {}
    for write in writes:
        offsets.update(write.offsets)
        for key, value in write.state.items():
            if value is None:
                state.pop(key, None)
            else:
                state[key] = value
    return offsets, state


@given(writes=st.lists(WRITES, max_size=12), data=st.data())
def test_a_machine_crash_leaves_the_synced_prefix_and_the_kept_batches(
    writes: list[Write], data: st.DataObject
) -> None:
    storage = MemoryOffsetStorage()
    stores = {sync: MemoryOffsetStore(storage=storage, sync=sync) for sync in (False, True)}
    for write in writes:
        stores[write.sync].commit(write.offsets, write.state)
    last_synced = max((i for i, write in enumerate(writes) if write.sync), default=-1)
    unsynced = len(writes) - last_synced - 1
    assert storage.unsynced_count == unsynced
    assert contents(storage) == apply(writes)  # a process crash loses nothing
    keep = data.draw(st.integers(0, unsynced), label="keep")
    storage.lose_unsynced(keep)
    assert contents(storage) == apply(writes[: last_synced + 1 + keep])
