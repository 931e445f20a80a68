"""LevelDBOffsetStore: the tutorial's byte layout, corrupt bytes, locks, sync."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import plyvel
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.errors import ConfigError, CorruptData, StoreLocked
from harness.log.dlsn import DLSN
from harness.offsets import LevelDBOffsetStore
from harness.offsets.leveldb import STATE_KEY_PREFIX

INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
DLSNS = st.builds(DLSN, INT64, INT64, INT64)


def raw_contents(path: Path) -> dict[bytes, bytes]:
    db = plyvel.DB(str(path))
    try:
        return dict(db.iterator())
    finally:
        db.close()


def raw_put(path: Path, key: bytes, value: bytes) -> None:
    db = plyvel.DB(str(path), create_if_missing=True)
    try:
        db.put(key, value)
    finally:
        db.close()


def test_an_offset_is_the_reader_id_in_utf8_and_the_25_serialized_bytes(tmp_path: Path) -> None:
    path = tmp_path / "offsets"
    with LevelDBOffsetStore(path) as store:
        store.put("reader-1", DLSN.INITIAL)
        store.put("lecteur-é", DLSN(99, 88, 77))
    assert raw_contents(path) == {
        b"reader-1": bytes.fromhex("01000000000000000100000000000000000000000000000000"),
        "lecteur-é".encode(): DLSN(99, 88, 77).serialize_bytes(),
    }


def test_a_state_entry_sits_under_the_state_prefix(tmp_path: Path) -> None:
    path = tmp_path / "offsets"
    with LevelDBOffsetStore(path) as store:
        store.commit({"state": DLSN(1, 2, 3)}, {"state": b"s", "counts": b"\x00\x01"})
        store.commit({}, {"state": None})
    assert STATE_KEY_PREFIX == b"\x00state\x00"
    assert raw_contents(path) == {
        b"state": DLSN(1, 2, 3).serialize_bytes(),
        b"\x00state\x00counts": b"\x00\x01",
    }


def test_offsets_written_by_another_leveldb_client_are_read(tmp_path: Path) -> None:
    path = tmp_path / "offsets"
    raw_put(path, "读者".encode(), DLSN(5, 6, 7).serialize_bytes())
    raw_put(path, b"old-reader", DLSN(3, 2, 1).serialize_bytes(version=0))  # 200 bytes
    raw_put(path, STATE_KEY_PREFIX + b"counts", b"42")
    with LevelDBOffsetStore(path) as store:
        assert store.get("读者") == DLSN(5, 6, 7)
        assert store.get("old-reader") == DLSN(3, 2, 1)
        assert store.get_state("counts") == b"42"
        assert store.readers() == ["old-reader", "读者"]


@given(put=DLSNS, committed=DLSNS)
@settings(deadline=None, max_examples=50)
def test_put_and_commit_write_exactly_serialize_bytes(put: DLSN, committed: DLSN) -> None:
    # put() and commit() pack DLSNs themselves (the hot path); they must match DLSN's bytes.
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "offsets"
        with LevelDBOffsetStore(path) as store:
            store.put("p", put)
            store.commit({"c": committed})
            assert (store.get("p"), store.get("c")) == (put, committed)
        assert raw_contents(path) == {
            b"p": put.serialize_bytes(),
            b"c": committed.serialize_bytes(),
        }


def test_a_corrupt_offset_names_the_store_the_reader_and_the_bytes(tmp_path: Path) -> None:
    path = tmp_path / "offsets"
    raw_put(path, b"reader-1", b"\x01\x00\x00\x00\x00\x00\x07")
    with LevelDBOffsetStore(path) as store, pytest.raises(CorruptData) as info:
        store.get("reader-1")
    assert str(info.value) == (
        f"offset store {str(path)!r}: the offset of reader 'reader-1' (key b'reader-1') is not "
        "a serialized DLSN: 7 bytes b'\\x01\\x00\\x00\\x00\\x00\\x00\\x07', expected the 25 "
        "bytes of DLSN.serialize_bytes(). Overwrite it with put('reader-1', dlsn), or restore "
        "the directory from a backup"
    )


def test_a_corrupt_offset_can_be_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "offsets"
    raw_put(path, b"reader-1", b"x" * 1000)
    with LevelDBOffsetStore(path) as store:
        with pytest.raises(
            CorruptData, match=r"1000 bytes b'x{198}\.\.\. \(1,000 bytes\), expected"
        ):
            store.get("reader-1")
        store.put("reader-1", DLSN.INITIAL)
        assert store.get("reader-1") == DLSN.INITIAL


def test_a_key_that_is_not_utf8_makes_readers_raise_corrupt_data(tmp_path: Path) -> None:
    path = tmp_path / "offsets"
    raw_put(path, b"bad-\xff", DLSN.INITIAL.serialize_bytes())
    with LevelDBOffsetStore(path) as store, pytest.raises(CorruptData) as info:
        store.readers()
    assert str(info.value) == (
        f"offset store {str(path)!r}: key b'bad-\\xff' is not a UTF-8 reader id (invalid start "
        "byte at byte 4); it was not written by an offset store. Remove it with another "
        "LevelDB client, or restore the directory from a backup"
    )


def test_a_second_handle_in_this_process_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "offsets"
    with LevelDBOffsetStore(path) as store:
        with pytest.raises(StoreLocked, match=f"^LevelDB directory {str(path)!r} is locked"):
            LevelDBOffsetStore(path)
        store.put("r", DLSN.INITIAL)
    with LevelDBOffsetStore(path) as store:  # closing released the lock
        assert store.get("r") == DLSN.INITIAL


@pytest.mark.slow
def test_a_directory_held_by_another_process_raises_store_locked(tmp_path: Path) -> None:
    path = tmp_path / "offsets"
    holder = textwrap.dedent(
        """
        import sys
        import plyvel
        db = plyvel.DB(sys.argv[1], create_if_missing=True)
        print("ready", flush=True)
        sys.stdin.readline()
        db.close()
        """
    )
    child = subprocess.Popen(
        [sys.executable, "-c", holder, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdin is not None
        assert child.stdout.readline() == "ready\n"
        with pytest.raises(StoreLocked) as info:
            LevelDBOffsetStore(path)
        message = str(info.value)
        assert message.startswith(
            f"LevelDB directory {str(path)!r} is locked by another process or by another open "
            "handle in this one (LevelDB allows a single process at a time)."
        )
        child.stdin.write("\n")
        child.stdin.flush()
        assert child.wait(timeout=30) == 0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        for stream in (child.stdin, child.stdout):
            if stream is not None:
                stream.close()
    with LevelDBOffsetStore(path) as store:  # the child's exit released the lock
        assert store.readers() == []


@pytest.mark.parametrize("sync", [False, True])
def test_sync_is_fixed_at_opening_and_writes_land_either_way(tmp_path: Path, sync: bool) -> None:
    path = tmp_path / "offsets"
    with LevelDBOffsetStore(path, sync=sync) as store:
        assert store.sync is sync
        store.put("a", DLSN(1, 0, 0))
        store.commit({"b": DLSN(2, 0, 0)}, {"k": b"v"})
    assert raw_contents(path) == {
        b"a": DLSN(1, 0, 0).serialize_bytes(),
        b"b": DLSN(2, 0, 0).serialize_bytes(),
        b"\x00state\x00k": b"v",
    }


def test_a_rejected_commit_writes_nothing_to_the_directory(tmp_path: Path) -> None:
    path = tmp_path / "offsets"
    with LevelDBOffsetStore(path) as store:
        store.put("a", DLSN.INITIAL)
        bad_state: dict[str, object] = {"k": b"v", "j": "text"}
        with pytest.raises(ConfigError, match="must be bytes"):
            store.commit({"a": DLSN(9, 9, 9), "b": DLSN(9, 9, 9)}, bad_state)  # type: ignore[arg-type]
    assert raw_contents(path) == {b"a": DLSN.INITIAL.serialize_bytes()}


def test_repr_and_closed(tmp_path: Path) -> None:
    store = LevelDBOffsetStore(tmp_path / "offsets", sync=True)
    assert repr(store) == f"LevelDBOffsetStore({str(tmp_path / 'offsets')!r}, sync=True)"
    before = store.closed
    store.close()
    assert (before, store.closed) == (False, True)
    assert repr(store).endswith(", sync=True, closed)")


def test_thousands_of_readers_round_trip(tmp_path: Path) -> None:
    with LevelDBOffsetStore(tmp_path / "offsets") as store:
        for i in range(5000):
            store.put(f"reader-{i}", DLSN(1, i, 0))
        assert store.get("reader-0") == DLSN(1, 0, 0)
        assert store.get("reader-4999") == DLSN(1, 4999, 0)
        assert len(store.readers()) == 5000
