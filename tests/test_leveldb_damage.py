"""Damaged LevelDB directories: a typed error or exactly the data written, never different data.

Every file kind LevelDB keeps (CURRENT, the MANIFEST, .ldb tables, the .log write-ahead log)
and the harness's own seal is damaged in enumerated ways (bit flips at positions spread over
the file and drawn from a seeded generator, truncations, and in the files of LevelDB's log
format every bit of the length fields of a spread of records, the damage LevelDB takes for a
torn write), in a pristine store whose data lives in both a table and the write-ahead log,
sealed by a clean close or left unsealed as a crash leaves it. Each damaged copy is then read
in full: the outcome must be :class:`CorruptData` naming the directory, or exactly what was
written. The sweeps marked ``slow`` flip more positions and every record's length field.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import pickle
import random
import shutil
import signal
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import plyvel
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness._leveldb import SEAL_NAME
from harness._wal import BLOCK_SIZE, HEADER_SIZE
from harness.errors import CorruptData, StoreLocked
from harness.log import LogRecord, leveldb_uri, open_namespace
from harness.log.dlsn import DLSN
from harness.offsets import LevelDBOffsetStore

FLIPS = 24
KINDS = ("CURRENT", "MANIFEST", "table", "log", "seal")
LOG_FORMAT = ("MANIFEST", "log")  # the kinds in LevelDB's log format


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


def record_headers(data: bytes) -> list[int]:
    """The offsets of the record headers of a file in LevelDB's log format, block by block."""
    headers = []
    for block in range(0, len(data), BLOCK_SIZE):
        position, end = block, min(block + BLOCK_SIZE, len(data))
        while end - position >= HEADER_SIZE:
            length = data[position + 4] | (data[position + 5] << 8)
            if length == 0 and data[position + 6] == 0:
                break
            headers.append(position)
            position += HEADER_SIZE + length
    return headers


def length_bits(data: bytes, every: int) -> set[int]:
    """Every bit of the length field of every ``every``-th record and of the last three."""
    headers = record_headers(data)
    chosen = sorted(set(headers[::every]) | set(headers[-3:]))
    return {(header + 4) * 8 + bit for header in chosen for bit in range(16)}


def damages(
    data: bytes, seed: int, *, flips: int = FLIPS, lengths: int = 0, truncations: bool = True
) -> Iterator[tuple[str, bytes]]:
    """Bit flips spread evenly and drawn from ``seed`` (and, with ``lengths``, every bit of the
    length field of every ``lengths``-th log-format record), then truncations (unless not
    ``truncations``)."""
    bits = len(data) * 8
    if not bits:
        return
    rng = random.Random(seed)
    positions = {bits * i // flips for i in range(flips)} | {
        rng.randrange(bits) for _ in range(flips)
    }
    if lengths:
        positions |= length_bits(data, lengths)
    for bit in sorted(positions):
        damaged = bytearray(data)
        damaged[bit // 8] ^= 1 << (bit % 8)
        yield f"flip bit {bit}", bytes(damaged)
    if not truncations:
        return
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
    *,
    flips: int = FLIPS,
    lengths: int = 0,
    truncations: bool = True,
) -> dict[str, list[str]]:
    """Damage every file of ``kind`` every way (:func:`damages`); the damages, by outcome."""
    outcomes: dict[str, list[str]] = {"exact": [], "typed": []}
    relative = database.relative_to(pristine)
    undamaged = scratch / f"undamaged-{kind}"
    shutil.copytree(pristine, undamaged)  # reading reopens the store, which rewrites its files
    assert read(undamaged) == expected
    for number, file in enumerate(files_of_kind(database, kind)):
        cases = damages(
            file.read_bytes(),
            seed=number,
            flips=flips,
            lengths=lengths if kind in LOG_FORMAT else 0,
            truncations=truncations,
        )
        for case, (label, damaged) in enumerate(cases):
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


def unsealed(pristine: Path, database: Path, scratch: Path) -> Path:
    """A copy of ``pristine`` whose database lost its seal: what a crash (or a close without
    checks) leaves. Its write-ahead log still holds every write, as after a SIGKILL.

    Its sweeps flip bits but do not truncate: with no seal, a file cut at a record boundary
    is what a crash leaves, and reads as the prefix it holds (see
    ``test_an_unsealed_truncated_log_reads_as_a_committed_prefix``).
    """
    copy = scratch / "unsealed"
    shutil.copytree(pristine, copy)
    (copy / database.relative_to(pristine) / SEAL_NAME).unlink()
    return copy


# (kind, sealed): the seal itself can only be damaged where there is one
CASES = [(kind, True) for kind in KINDS] + [(kind, False) for kind in KINDS if kind != "seal"]
CASE_IDS = [f"{kind}-{'sealed' if sealed else 'unsealed'}" for kind, sealed in CASES]
# The fast suite leaves out unsealed tables: the seal does not change how a table is checked.
FAST = [
    pytest.param(kind, sealed, id=name)
    for (kind, sealed), name in zip(CASES, CASE_IDS, strict=True)
    if sealed or kind != "table"
]


def offset_sweep(
    kind: str, sealed: bool, pristine: Path, scratch: Path, **how: int
) -> dict[str, list[str]]:
    """The outcomes of damaging the offset store ``pristine`` (sealed or not): :func:`sweep`."""
    if not sealed:
        pristine = unsealed(pristine, pristine, scratch)
    return sweep(
        pristine,
        pristine,
        kind,
        read_offsets,
        offsets_written(),
        scratch,
        truncations=sealed,
        **how,
    )


@pytest.mark.parametrize(("kind", "sealed"), FAST)
def test_a_damaged_offset_store_raises_or_returns_exactly_what_was_written(
    kind: str, sealed: bool, pristine_offsets: Path, tmp_path: Path
) -> None:
    assert_typed_or_exact(offset_sweep(kind, sealed, pristine_offsets, tmp_path, lengths=25))


@pytest.mark.slow
@pytest.mark.parametrize(("kind", "sealed"), CASES, ids=CASE_IDS)
def test_the_full_sweep_of_an_offset_store(
    kind: str, sealed: bool, pristine_offsets: Path, tmp_path: Path
) -> None:
    # 300 evenly spaced flips, as issue 26 measured, and every bit of every length field.
    outcomes = offset_sweep(kind, sealed, pristine_offsets, tmp_path, flips=300, lengths=1)
    assert_typed_or_exact(outcomes)


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


def log_sweep(
    kind: str, sealed: bool, pristine: Path, scratch: Path, **how: int
) -> dict[str, list[str]]:
    """The outcomes of damaging the log namespace ``pristine`` (sealed or not)."""
    if not sealed:
        pristine = unsealed(pristine, log_database(pristine), scratch)
    database = log_database(pristine)
    return sweep(
        pristine, database, kind, read_log, records_written(), scratch, truncations=sealed, **how
    )


@pytest.mark.parametrize(("kind", "sealed"), FAST)
def test_a_damaged_log_raises_or_returns_exactly_what_was_committed(
    kind: str, sealed: bool, pristine_log: Path, tmp_path: Path
) -> None:
    assert_typed_or_exact(log_sweep(kind, sealed, pristine_log, tmp_path, lengths=20))


@pytest.mark.slow
@pytest.mark.parametrize(("kind", "sealed"), CASES, ids=CASE_IDS)
def test_the_full_sweep_of_a_log(
    kind: str, sealed: bool, pristine_log: Path, tmp_path: Path
) -> None:
    assert_typed_or_exact(log_sweep(kind, sealed, pristine_log, tmp_path, flips=300, lengths=1))


def log_database(root: Path) -> Path:
    return root / "logs" / "events" / "db"


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


def flip_a_length_field(log: Path) -> None:
    """Flip the top bit of the first record's length: LevelDB takes the record for one torn
    by a crash and drops it with every record after it."""
    damaged = bytearray(log.read_bytes())
    assert len(damaged) < BLOCK_SIZE  # one, partial block: where LevelDB forgives
    damaged[5] ^= 0x80
    log.write_bytes(damaged)


def test_a_flipped_length_in_a_sealed_write_ahead_log_is_reported_not_read_as_older_offsets(
    tmp_path: Path,
) -> None:
    path = tmp_path / "store"
    with LevelDBOffsetStore(path) as store:
        for step in range(50):
            store.put("r", DLSN(1, step, 0))
    (log,) = files_of_kind(path, "log")
    flip_a_length_field(log)
    with pytest.raises(CorruptData, match=rf"{log.name} differs from the \d+ bytes it held"):
        read_offsets(path)
    # accepting the loss: without the checks, LevelDB reads the store as if empty (what the
    # digest prevents), and from then on that is the store
    assert read_offsets(path, checks=False) == {}
    assert read_offsets(path) == {}


def test_a_flipped_length_in_an_unsealed_write_ahead_log_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "store"
    with LevelDBOffsetStore(path, checks=False) as store:  # closes without a seal
        for step in range(50):
            store.put("r", DLSN(1, step, 0))
    (log,) = files_of_kind(path, "log")
    flip_a_length_field(log)
    with pytest.raises(CorruptData, match="length field is damaged") as raised:
        read_offsets(path)
    assert str(path) in str(raised.value) and "checks=False" in str(raised.value)


def _write_synced_then_die(path: Path, puts: int) -> None:  # pragma: no cover - in the child
    store = LevelDBOffsetStore(path, sync=True)
    for step in range(puts):
        store.put(f"reader-{step % 7}", DLSN(1, step, 0))
    os.kill(os.getpid(), signal.SIGKILL)


def synced_then_killed(path: Path, puts: int) -> dict[str, DLSN]:
    """A store whose writer acknowledged ``puts`` synced writes, then died by SIGKILL (no seal);
    the offsets it acknowledged."""
    child = multiprocessing.get_context("fork").Process(
        target=_write_synced_then_die, args=(path, puts)
    )
    child.start()
    child.join()
    assert child.exitcode == -signal.SIGKILL
    assert not (path / SEAL_NAME).exists()
    return {f"reader-{step % 7}": DLSN(1, step, 0) for step in range(puts)}


def test_synced_offsets_of_a_killed_writer_are_read_exactly_or_reported_when_damaged(
    tmp_path: Path,
) -> None:
    pristine = tmp_path / "killed"
    acknowledged = synced_then_killed(pristine, 120)
    outcomes = sweep(
        pristine,
        pristine,
        "log",
        read_offsets,
        acknowledged,
        tmp_path,
        lengths=15,
        truncations=False,
    )
    assert_typed_or_exact(outcomes)


def test_a_torn_last_write_of_a_killed_writer_opens_with_what_came_before(tmp_path: Path) -> None:
    # The legitimate crash: the last record is cut short. No false alarm; the earlier writes stay.
    path = tmp_path / "killed"
    acknowledged = synced_then_killed(path, 20)
    (log,) = files_of_kind(path, "log")
    last = record_headers(log.read_bytes())[-1]
    os.truncate(log, last + HEADER_SIZE + 3)
    del acknowledged["reader-5"]  # written by step 19, the torn one: step 12 is the value left
    acknowledged["reader-5"] = DLSN(1, 12, 0)
    assert read_offsets(path) == acknowledged


def test_a_seal_of_the_first_format_is_still_read_as_sizes(tmp_path: Path) -> None:
    root = tmp_path / "namespace"
    write_records(root, records_written())
    database = log_database(root)
    (log,) = files_of_kind(database, "log")
    current = (database / "CURRENT").read_text().strip()
    sizes = {current: (database / current).stat().st_size, log.name: log.stat().st_size}
    old = {"format": 1, "current": current, "files": sizes}
    (database / SEAL_NAME).write_text(json.dumps(old))
    assert read_log(root) == records_written()
    write_records(root, [(601, b"one more")])
    current = (database / "CURRENT").read_text().strip()
    (database / SEAL_NAME).write_text(
        json.dumps(old | {"current": current, "files": {current: 10**9}})
    )
    with pytest.raises(CorruptData, match=rf"{current} has \d+ bytes, but held 1000000000"):
        read_log(root)


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


@pytest.mark.parametrize("sealed", [True, False])
def test_a_store_whose_current_file_is_gone_is_damaged_not_a_new_empty_one(
    sealed: bool, tmp_path: Path
) -> None:
    path = tmp_path / "store"
    with LevelDBOffsetStore(path) as store:
        for entry in range(50):
            store.put(f"r{entry}", DLSN(1, entry, 0))
    db = plyvel.DB(str(path))
    db.compact_range()  # the offsets now live in a table the manifest names
    db.close()
    with LevelDBOffsetStore(path) as store:
        store.put("late", DLSN(2, 0, 0))
    assert list(path.glob("*.ldb"))
    if not sealed:  # as a crash leaves it
        (path / SEAL_NAME).unlink()
    (path / "CURRENT").unlink()
    # LevelDB would start a new database, delete the table and replay the log: 50 of the 51
    # offsets gone with no error
    with pytest.raises(CorruptData, match="CURRENT"):
        LevelDBOffsetStore(path)
    assert list(path.glob("*.ldb"))


def test_a_write_ahead_log_the_seal_does_not_know_is_damage(tmp_path: Path) -> None:
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    with LevelDBOffsetStore(ours) as store:
        store.put("r", DLSN(1, 1, 0))
    with LevelDBOffsetStore(theirs) as store:
        store.put("r", DLSN(9, 9, 0))
    # another store's log copied in under a newer number: LevelDB replays it, and the sealed
    # store read the other store's offset with no error
    (log,) = theirs.glob("*.log")
    shutil.copy(log, ours / "000099.log")
    with pytest.raises(CorruptData, match=r"000099\.log"):
        LevelDBOffsetStore(ours)


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
                    outcomes = sweep(
                        pristine, database, kind, read, expected, work, flips=300, lengths=1
                    )
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
