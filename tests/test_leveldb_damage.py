"""Damaged LevelDB directories: a typed error or exactly the data written, never different data.

Every file kind LevelDB keeps (CURRENT, the MANIFEST, .ldb tables, the .log write-ahead log)
and the harness's own seal is damaged in enumerated ways (bit flips at positions spread over
the file and drawn from a seeded generator, truncations), in a pristine store whose data lives
in both a table and the write-ahead log. Each damaged copy is then read in full: the outcome
must be :class:`CorruptData` naming the directory, or exactly what was written.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import random
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import plyvel
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness._leveldb import SEAL_NAME
from harness.errors import CorruptData, StoreLocked
from harness.log import LogRecord, leveldb_uri, open_namespace
from harness.log.dlsn import DLSN
from harness.offsets import LevelDBOffsetStore

FLIPS = 24
KINDS = ("CURRENT", "MANIFEST", "table", "log", "seal")


def kind_of(name: str) -> str | None:
    if name == "CURRENT":
        return "CURRENT"
    if name.startswith("MANIFEST-"):
        return "MANIFEST"
    if name.endswith((".ldb", ".sst")):
        return "table"
    if name.endswith(".log"):
        return "log"
    return "seal" if name == SEAL_NAME else None


def files_of_kind(database: Path, kind: str) -> list[Path]:
    found = sorted(p for p in database.iterdir() if kind_of(p.name) == kind)
    assert found, f"the pristine store has no {kind} file: {sorted(os.listdir(database))}"
    return found


def damages(data: bytes, seed: int) -> Iterator[tuple[str, bytes]]:
    """Bit flips spread evenly and drawn from ``seed``, then truncations."""
    bits = len(data) * 8
    if not bits:
        return
    rng = random.Random(seed)
    positions = {bits * i // FLIPS for i in range(FLIPS)} | {
        rng.randrange(bits) for _ in range(FLIPS)
    }
    for bit in sorted(positions):
        damaged = bytearray(data)
        damaged[bit // 8] ^= 1 << (bit % 8)
        yield f"flip bit {bit}", bytes(damaged)
    for cut in sorted({0, len(data) // 3, len(data) // 2, len(data) - 1}):
        yield f"truncate to {cut}", data[:cut]


def outcome(read: Callable[[Path], object], directory: Path, expected: object) -> str:
    """``"exact"``, ``"typed"`` (CorruptData naming the directory), or what went wrong."""
    try:
        got = read(directory)
    except CorruptData as exc:
        return "typed" if str(directory) in str(exc) else f"unnamed: {exc}"
    except Exception as exc:
        return f"untyped: {type(exc).__name__}: {exc}"
    return "exact" if got == expected else "different data"


def sweep(
    pristine: Path,
    database: Path,
    kind: str,
    read: Callable[[Path], object],
    expected: object,
    scratch: Path,
) -> dict[str, list[str]]:
    """Damage every file of ``kind`` every way; the damages, by outcome."""
    outcomes: dict[str, list[str]] = {"exact": [], "typed": []}
    relative = database.relative_to(pristine)
    undamaged = scratch / f"undamaged-{kind}"
    shutil.copytree(pristine, undamaged)  # reading reopens the store, which rewrites its files
    assert read(undamaged) == expected
    for number, file in enumerate(files_of_kind(database, kind)):
        for case, (label, damaged) in enumerate(damages(file.read_bytes(), seed=number)):
            copy = scratch / f"{file.name}-{case}"
            shutil.copytree(pristine, copy)
            (copy / relative / file.name).write_bytes(damaged)
            result = outcome(read, copy, expected)
            outcomes.setdefault(result, []).append(f"{file.name}: {label}")
            shutil.rmtree(copy)
    return outcomes


def assert_typed_or_exact(outcomes: dict[str, list[str]]) -> None:
    wrong = {
        result: cases for result, cases in outcomes.items() if result not in ("exact", "typed")
    }
    assert not wrong, wrong
    assert outcomes["typed"], outcomes  # the damage was noticed, not merely harmless


# -- the offset store ------------------------------------------------------------------------


def offsets_written() -> dict[str, DLSN]:
    return {f"reader-{i}": DLSN(1 + i, (i * 7) % 11, i % 3) for i in range(400)}


@pytest.fixture(scope="module")
def pristine_offsets(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("offsets") / "store"
    build_offsets(path)
    return path


def build_offsets(path: Path) -> None:
    """Offsets in a table (first session, compacted on reopen) and in the write-ahead log."""
    offsets = offsets_written()
    first = dict(list(offsets.items())[:250])
    with LevelDBOffsetStore(path) as store:
        for reader, dlsn in first.items():
            store.put(reader, DLSN(0, 0, 0))  # overwritten below: an older value to resurface
            store.put(reader, dlsn)
    with LevelDBOffsetStore(path) as store:
        for reader, dlsn in list(offsets.items())[250:]:
            store.put(reader, dlsn)


def read_offsets(path: Path, *, checks: bool = True) -> dict[str, DLSN]:
    with LevelDBOffsetStore(path, checks=checks) as store:
        return {reader: dlsn for reader in store.readers() if (dlsn := store.get(reader))}


@pytest.mark.parametrize("kind", KINDS)
def test_a_damaged_offset_store_raises_or_returns_exactly_what_was_written(
    kind: str, pristine_offsets: Path, tmp_path: Path
) -> None:
    assert_typed_or_exact(
        sweep(pristine_offsets, pristine_offsets, kind, read_offsets, offsets_written(), tmp_path)
    )


@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_a_drawn_bit_flip_in_an_offset_table_never_yields_a_different_dlsn(
    data: st.DataObject,
) -> None:
    # Hypothesis draws the byte and bit of the one table; tmp_path cannot be used with @given.
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "store"
        with LevelDBOffsetStore(path) as store:
            store.put("r", DLSN(1, 1, 1))
        LevelDBOffsetStore(path).close()  # the reopen moves the offset into a table
        (table,) = files_of_kind(path, "table")
        damaged = bytearray(table.read_bytes())
        index = data.draw(st.integers(0, len(damaged) - 1), label="byte")
        damaged[index] ^= 1 << data.draw(st.integers(0, 7), label="bit")
        table.write_bytes(damaged)
        try:
            with LevelDBOffsetStore(path) as store:
                assert store.get("r") == DLSN(1, 1, 1)
        except CorruptData as exc:
            assert str(path) in str(exc)


# -- the log ---------------------------------------------------------------------------------


def records_written() -> list[tuple[int, bytes]]:
    return [(txid, b"record %d" % txid) for txid in range(1, 601)]


def write_records(root: Path, records: list[tuple[int, bytes]]) -> None:
    with (
        open_namespace(leveldb_uri(root)) as namespace,
        namespace.open_log("events").open_writer() as writer,
    ):
        for txid, payload in records:
            writer.write(LogRecord(txid, payload))
            if txid % 7 == 0:
                writer.commit()
        writer.commit()


def read_log(root: Path, *, checks: bool = True) -> list[tuple[int, bytes]]:
    with (
        open_namespace(leveldb_uri(root), checks=checks) as namespace,
        namespace.open_log("events").open_reader(DLSN.INITIAL) as reader,
    ):
        return [(record.txid, record.payload) for record in reader]


def read_log_unchecked(root: Path) -> list[tuple[int, bytes]]:
    return read_log(root, checks=False)


@pytest.fixture(scope="module")
def pristine_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("log") / "namespace"
    build_log(root)
    return root


def build_log(root: Path) -> None:
    records = records_written()
    write_records(root, records[:300])
    assert read_log(root) == records[:300]  # the reopen moves the first half into a table
    write_records(root, records[300:])


@pytest.mark.parametrize("kind", KINDS)
def test_a_damaged_log_raises_or_returns_exactly_what_was_committed(
    kind: str, pristine_log: Path, tmp_path: Path
) -> None:
    database = pristine_log / "logs" / "events" / "db"
    assert_typed_or_exact(
        sweep(pristine_log, database, kind, read_log, records_written(), tmp_path)
    )


# -- the seal --------------------------------------------------------------------------------


def test_a_truncated_write_ahead_log_is_reported_not_read_as_a_shorter_log(
    tmp_path: Path,
) -> None:
    root = tmp_path / "namespace"
    write_records(root, records_written())
    (log,) = files_of_kind(root / "logs" / "events" / "db", "log")
    os.truncate(log, log.stat().st_size // 2)
    with pytest.raises(CorruptData, match=rf"{log.name} has \d+ bytes, but held \d+ bytes"):
        read_log(root)
    with pytest.raises(CorruptData):  # and again: the seal stays until someone decides
        read_log(root)
    (log.parent / SEAL_NAME).unlink()  # accepting the loss: a committed prefix is left
    survivors = read_log(root)
    assert survivors == records_written()[: len(survivors)]
    assert len(survivors) < len(records_written())


def _open_and_close(path: Path, cycles: int, results: Any) -> None:
    """In a child: open, write and close the store ``cycles`` times; the outcomes, counted."""
    outcomes: dict[str, int] = {}
    for _ in range(cycles):
        try:
            with LevelDBOffsetStore(path) as store:
                store.put("r", DLSN(1, 1, 1))
            said = "opened"
        except StoreLocked:
            said = "locked"
        except BaseException as exc:  # every other outcome is the failure this test is about
            said = f"{type(exc).__name__}: {exc}"
        outcomes[said] = outcomes.get(said, 0) + 1
    results.put(outcomes)


def test_processes_racing_for_a_sealed_store_get_it_or_store_locked(tmp_path: Path) -> None:
    # Checking the seal then opening, and closing then sealing, are one step between
    # processes: without that, one process unlinks a seal another is checking
    # (FileNotFoundError), or opens between another's close and its seal.
    path = tmp_path / "store"
    with LevelDBOffsetStore(path) as store:
        store.put("r", DLSN(1, 1, 1))
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    children = [context.Process(target=_open_and_close, args=(path, 25, results)) for _ in range(3)]
    for child in children:
        child.start()
    outcomes = [results.get() for _ in children]
    for child in children:
        child.join()
    assert all(set(counts) <= {"opened", "locked"} for counts in outcomes), outcomes
    assert sum(counts.get("opened", 0) for counts in outcomes) >= 1, outcomes
    with LevelDBOffsetStore(path) as store:  # and the seal the last one left holds
        assert store.get("r") == DLSN(1, 1, 1)


def test_another_leveldb_client_opening_the_store_voids_the_seal(tmp_path: Path) -> None:
    path = tmp_path / "store"
    with LevelDBOffsetStore(path) as store:
        store.put("r", DLSN(3, 2, 1))
    db = plyvel.DB(str(path))
    db.put(b"s", DLSN(4, 0, 0).serialize_bytes())
    db.close()
    # plyvel replaced the write-ahead log the seal describes; that is not damage
    with LevelDBOffsetStore(path) as store:
        assert (store.get("r"), store.get("s")) == (DLSN(3, 2, 1), DLSN(4, 0, 0))


def test_without_checks_no_seal_is_written_or_read(tmp_path: Path) -> None:
    path = tmp_path / "store"
    with LevelDBOffsetStore(path, checks=False) as store:
        store.put("r", DLSN(3, 2, 1))
    assert not (path / SEAL_NAME).exists()
    with LevelDBOffsetStore(path) as store:
        assert store.get("r") == DLSN(3, 2, 1)
    assert (path / SEAL_NAME).exists()


def read_offsets_unchecked(path: Path) -> dict[str, DLSN]:
    return read_offsets(path, checks=False)


def isolated(read: Callable[[Path], object]) -> Callable[[Path], object]:
    """``read`` in a forked child. Without the checks, some LevelDB builds (the cp313 plyvel
    wheel among them) abort the whole process on a damaged block: one more thing the checks
    prevent. The child's death is the outcome ``"untyped: ChildProcessError: process aborted"``.
    """

    def read_in_child(path: Path) -> object:
        receive, send = os.pipe()
        child = os.fork()
        if child == 0:  # pragma: no cover - runs in the child
            os.close(receive)
            try:
                answer: tuple[str, object] = ("returned", read(path))
            except CorruptData as exc:
                answer = ("corrupt", str(exc))
            except BaseException as exc:  # every outcome goes to the parent
                answer = ("raised", f"{type(exc).__name__}: {exc}")
            with os.fdopen(send, "wb") as pipe:
                pipe.write(pickle.dumps(answer))
            os._exit(0)
        os.close(send)
        with os.fdopen(receive, "rb") as pipe:
            sent = pipe.read()
        _, status = os.waitpid(child, 0)
        if not sent or not (os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0):
            raise ChildProcessError("process aborted")
        how, value = pickle.loads(sent)
        if how == "corrupt":
            raise CorruptData(str(value))
        if how == "raised":
            raise RuntimeError(value)
        return value

    return read_in_child


def test_without_checks_the_same_sweep_returns_different_data(
    pristine_offsets: Path, tmp_path: Path
) -> None:
    # The baseline the checks are measured against: this is what they prevent.
    outcomes = sweep(
        pristine_offsets,
        pristine_offsets,
        "table",
        isolated(read_offsets_unchecked),
        offsets_written(),
        tmp_path,
    )
    assert outcomes.get("different data"), outcomes


def main() -> None:
    """Print the outcome counts of every sweep, with the checks on and off (for reports)."""
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        offsets = root / "offsets" / "store"
        build_offsets(offsets)
        log = root / "log" / "namespace"
        build_log(log)
        stores = (
            (
                "offset store",
                offsets,
                offsets,
                read_offsets,
                isolated(read_offsets_unchecked),
                offsets_written(),
            ),
            (
                "log",
                log,
                log / "logs" / "events" / "db",
                read_log,
                isolated(read_log_unchecked),
                records_written(),
            ),
        )
        for name, pristine, database, checked, unchecked, expected in stores:
            for checks, read in (("on", checked), ("off", unchecked)):
                for kind in KINDS:
                    if checks == "off" and kind == "seal":
                        continue
                    work = root / f"work-{name}-{checks}-{kind}"
                    work.mkdir()
                    outcomes = sweep(pristine, database, kind, read, expected, work)
                    counts = ", ".join(
                        f"{result.split(':')[0]} {len(cases)}"
                        for result, cases in sorted(outcomes.items())
                    )
                    print(f"{name:12} checks {checks:3} {kind:8} {counts}")


if __name__ == "__main__":
    main()


_STORED = st.tuples(
    st.integers(-(2**63), 2**63 - 1),
    st.binary(max_size=12),
    st.integers(0, 0xFFFF),
    st.integers(0, 2**40),
)


@settings(max_examples=300, deadline=None)
@given(
    records=st.lists(_STORED, max_size=6),
    uniform=st.booleans(),
    damage=st.one_of(st.none(), st.tuples(st.integers(0, 400), st.integers(0, 255))),
    cut=st.one_of(st.none(), st.integers(0, 400)),
)
def test_decoding_an_entry_into_columns_gives_the_records_and_errors_of_decode_entry(
    records: list[tuple[int, bytes, int, int]],
    uniform: bool,
    damage: tuple[int, int] | None,
    cut: int | None,
) -> None:
    """The bulk reader's column decoder (decoded in C when every payload has one length) is
    decode_entry's records transposed, and fails where it fails with its error, on intact
    and on damaged entries alike."""
    from harness.log.storage.leveldb import decode_columns, decode_entry, encode_entry

    if uniform and records:  # the fixed-size records the C path decodes
        size = len(records[0][1])
        records = [(t, p.ljust(size, b"x")[:size], f, n) for t, p, f, n in records]
    data = bytearray(encode_entry(records))
    if damage is not None and data:
        data[damage[0] % len(data)] = damage[1]
    if cut is not None:
        del data[cut:]

    def outcome(decode: Callable[[], Any]) -> Any:
        try:
            return decode()
        except CorruptData as exc:
            return ("CorruptData", str(exc))

    expected = outcome(lambda: decode_entry(bytes(data), where="here"))
    got = outcome(lambda: decode_columns(bytes(data), where="here"))
    if isinstance(expected, tuple) and expected[:1] != ("CorruptData",):
        expected = tuple(tuple(column) for column in zip(*expected, strict=True))
        expected = expected or ((), (), (), ())
        got = tuple(tuple(column) for column in got)
    assert got == expected
