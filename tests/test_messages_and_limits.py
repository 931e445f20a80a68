"""Messages and limits: an error never repeats a huge value in full, a huge name is refused
at once, bad paths are typed errors, and every error is one line."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from harness import Crash, Produce, Run, RunBudget, Schedule, explore, run_once
from harness._shown import describe_exception, shown
from harness.catalogue.toys import process_then_commit as correct
from harness.engine import default_seed, load_processor
from harness.errors import ConfigError, HarnessError, InvalidStreamName
from harness.history.io import read_history, write_history
from harness.log.names import validate_log_name
from harness.log.namespace import Namespace
from harness.offsets.leveldb import LevelDBOffsetStore
from harness.search.profiles import profile
from harness.sim.topology import Topology

HUGE = "x" * 10_000_000
BIG = 10**5000
ALO = "at-least-once"

HUGE_VALUES: dict[str, Callable[[], object]] = {
    "explore backend": lambda: explore(correct, guarantee=ALO, backend=HUGE),  # type: ignore[arg-type]
    "explore guarantee": lambda: explore(correct, guarantee=HUGE),
    "explore max_examples": lambda: explore(correct, guarantee=ALO, max_examples=HUGE),  # type: ignore[arg-type]
    "explore max_examples, a huge int": lambda: explore(correct, guarantee=ALO, max_examples=-BIG),
    "explore systematic": lambda: explore(correct, guarantee=ALO, systematic=HUGE),  # type: ignore[arg-type]
    "explore seed": lambda: explore(correct, guarantee=ALO, seed=HUGE),  # type: ignore[arg-type]
    "explore faults": lambda: explore(correct, guarantee=ALO, faults=[HUGE]),
    "explore budget": lambda: explore(correct, guarantee=ALO, budget=HUGE),  # type: ignore[arg-type]
    "RunBudget calls, a huge int": lambda: RunBudget(calls=-BIG),
    "RunBudget calls": lambda: RunBudget(calls=HUGE),  # type: ignore[arg-type]
    "RunBudget seconds": lambda: RunBudget(seconds=HUGE),  # type: ignore[arg-type]
    "Topology partitions, a huge int": lambda: Topology(partitions=BIG),
    "Topology partitions": lambda: Topology(partitions=HUGE),  # type: ignore[arg-type]
    "profile": lambda: profile(HUGE),
    "run_once guarantee": lambda: run_once(correct, Schedule([]), HUGE),
    "load_processor": lambda: load_processor(HUGE + ":f"),
    "a log name": lambda: validate_log_name(HUGE),
    "a history path": lambda: read_history(HUGE + ".txt"),
}


@pytest.mark.parametrize("case", HUGE_VALUES)
def test_an_error_shows_a_huge_value_shortened(case: str) -> None:
    with pytest.raises(HarnessError) as raised:
        HUGE_VALUES[case]()
    message = str(raised.value)
    assert len(message) < 1500, message[:300]
    assert "\n" not in message


def test_a_huge_harness_seed_is_shown_shortened(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESS_SEED", HUGE)
    with pytest.raises(ConfigError) as raised:
        default_seed("m:p")
    assert len(str(raised.value)) < 1000


def test_a_huge_log_name_is_refused_for_its_length_before_any_scan() -> None:
    # its only other fault is its last character: refused for the length, it was not scanned
    with pytest.raises(InvalidStreamName) as raised:
        validate_log_name("a" * 100_000_000 + " ")
    assert "it is at least 100,000,001 bytes once percent-encoded" in str(raised.value)


def test_a_huge_int_where_a_topology_wants_a_count_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="digits"):
        Topology(partitions=BIG)


BAD_PATHS = {"a NUL": "a\0b", "a lone surrogate": "bad\ud800name", "a low surrogate": "x\udc80"}


@pytest.mark.parametrize("bad", BAD_PATHS)
def test_a_nul_or_surrogate_path_is_a_typed_error_in_the_stores_and_histories(
    bad: str, tmp_path: Path
) -> None:
    path = str(tmp_path / BAD_PATHS[bad])
    history, _ = run_once(correct, Schedule([Produce(count=1), Run(3)]), ALO)
    for attempt in (
        lambda: read_history(path + ".jsonl"),
        lambda: read_history(path + ".parquet"),
        lambda: write_history(history, path + ".jsonl"),
        lambda: LevelDBOffsetStore(path),
        lambda: Namespace(f"distributedlog-leveldb://{path}"),
    ):
        with pytest.raises(ConfigError):
            attempt()
    assert os.listdir(tmp_path) == []


def test_parquet_corruption_messages_are_one_line(tmp_path: Path) -> None:
    history, _ = run_once(correct, Schedule([Produce(count=5), Run(10), Crash(), Run(10)]), ALO)
    path = tmp_path / "h.parquet"
    write_history(history, path)
    data = path.read_bytes()
    damaged = tmp_path / "damaged.parquet"
    lines: list[str] = []
    for offset in range(0, len(data), max(1, len(data) // 300)):  # evenly spaced flips
        flipped = bytearray(data)
        flipped[offset] ^= 0x10
        damaged.write_bytes(bytes(flipped))
        try:
            read_history(damaged)
        except HarnessError as exc:
            lines.append(str(exc))
    assert lines, "no flip was noticed at all"
    assert [m for m in lines if "\n" in m] == []


def test_the_cli_prints_every_error_on_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from harness.cli import main

    path = tmp_path / "h.parquet"
    path.write_bytes(b"PAR1" + b"\n" * 50 + b"PAR1")
    assert main(["check", str(path), "--guarantee", ALO]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1


class _NamelessMeta(type):
    def __getattribute__(cls, name: str) -> object:
        if name in ("__name__", "__qualname__"):
            raise RuntimeError("no name")
        return type.__getattribute__(cls, name)


class _Nameless(Exception, metaclass=_NamelessMeta):
    pass


def test_an_exception_whose_type_name_fails_or_is_huge_is_described_never_raising() -> None:
    # a processor's exception once took the whole command down with a traceback when its
    # class would not give its name; a 100,000-character class name was printed in full
    assert describe_exception(_Nameless("it broke")) == "<an exception type>: it broke"
    huge = type("E" * 100_000, (Exception,), {})
    described = describe_exception(huge("n"))
    assert len(described) < 400 and described.endswith(": n") and "100,000" in described
    assert shown(_Nameless()) == "<an object of a type with a failing repr>"


@pytest.mark.parametrize("raised", [SystemExit, KeyboardInterrupt, GeneratorExit])
def test_an_exception_whose_str_raises_a_base_exception_is_described(
    raised: type[BaseException],
) -> None:
    class Sneaky(Exception):
        def __str__(self) -> str:
            raise raised

    said = describe_exception(Sneaky())
    assert said == f"Sneaky: <its __str__ raised {raised.__name__}>"

    # end to end: the run is UNKNOWN naming it, the command does not end silently
    def processor(ctx: object) -> None:
        raise Sneaky()

    _, verdict = run_once(processor, Schedule((Produce(0, 1), Run(3))), "at-least-once")
    assert verdict.status.name == "UNKNOWN"


def test_a_processors_message_cannot_fake_a_verdict_line_or_drive_the_terminal() -> None:
    """A processor's exception text is shown with its control characters escaped: one line,
    no ANSI sequence, nothing that reads as the harness's own "VALID under ..." line."""
    fake = "\x1b[2J\x1b[31mVALID\nVALID under at-least-once\r\x85"

    def processor(ctx: object) -> None:
        raise ValueError(fake)

    text = describe_exception(ValueError(fake))
    assert text == r"ValueError: \x1b[2J\x1b[31mVALID\nVALID under at-least-once\r\x85"
    _, verdict = run_once(processor, Schedule([Produce(count=1), Run(calls=5)]), "at-least-once")
    reasons = " ".join(verdict.reasons)
    assert "\x1b" not in reasons and "\n" not in reasons and r"\x1b[2J" in reasons
