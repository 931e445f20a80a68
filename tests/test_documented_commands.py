"""Every ``python -m harness ...`` line of a fenced block in README.md and docs/*.md works.

Each documented command line is parsed by the command's own parser (a synopsis, with its
``[--option ...]`` and ``a|b`` alternatives, must name only options and choices that exist);
the lines that need no Spark, no Kafka application and no long search (``list``,
``generate``, ``check``, ``replay``, ``report``, ``--version`` and the demo) then run for real,
in a directory holding the files they name (a replay file, a history), with ``--records``
kept small. A renamed flag, a dropped choice or a command that no longer exists fails here.
"""

from __future__ import annotations

import argparse
import re
import shlex
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness._usage import UsageParser
from harness.catalogue.toys import commit_before_processing
from harness.check import Guarantee
from harness.cli import main
from harness.cli._parser import COMMANDS, _load, build_parser
from harness.engine import Replay
from harness.faults import Crash, Produce, Run, Schedule
from harness.sim.topology import Topology

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_START = re.compile(r"^(?:\$ )?(?:\S*/)?python3? -m harness(?=\s|$)")
_RUN_FOR_REAL = {"list", "generate", "check", "replay", "report"}
"""The commands run for real (with no arguments: the demo); the others are parsed only."""
_SMALL = "2000"
"""The ``--records`` a documented ``generate`` runs with here."""


def _documented() -> Iterator[tuple[str, str]]:
    """``(where, command line)`` for every documented line, continuations joined."""
    for path in DOCS:
        fenced = False
        lines = path.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines):
            if line.startswith("```"):
                fenced = not fenced
                continue
            if not fenced:
                continue
            for segment in line.split("&&"):
                if not _START.match(segment.strip()):
                    continue
                text, following = segment.strip(), number + 1
                while text.endswith("\\") or (
                    following < len(lines) and re.match(r"\s+[\[(]", lines[following])
                ):
                    text = text.rstrip("\\") + " " + lines[following].strip()
                    following += 1
                yield f"{path.name}:{number + 1}", text


DOCUMENTED = list(_documented())


def _words(text: str) -> list[str]:
    """The arguments after ``python -m harness``, up to a redirection or a pipe."""
    text = _START.sub("", text)
    try:
        words = shlex.split(text, comments=True)
    except ValueError:  # a synopsis: "<the job's own arguments>"
        words = text.split()
    for cut in (">", "|", "2>"):
        if cut in words:
            words = words[: words.index(cut)]
    return words


def _parser(words: list[str]) -> tuple[Any, list[str]]:
    """The parser of the command ``words`` name, and the words it parses."""
    selected = next((c for c in COMMANDS if words[:1] == [c.name]), None)
    if selected is None or not selected.raw:
        return build_parser(selected), words
    parser = UsageParser(prog=f"python -m harness {selected.name}")
    _load(selected).add_arguments(parser)
    rest = words[1:]
    return parser, rest[: rest.index("--")] if "--" in rest else rest


def _is_synopsis(text: str) -> bool:
    return bool(re.search(r"\[--|\w\|\w|\(--|\.\.\.", text))


def _check_synopsis(parser: Any, words: list[str], text: str) -> None:
    """Every option a synopsis names is the command's, every alternative one of its choices."""
    commands = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if commands and words[:1] and not words[0].startswith("-"):
        parser = commands[0].choices[words[0]]
    for option, value in re.findall(r"(--[a-z][a-z0-9-]*)(?:[ =]([\w.-]+(?:\|[\w.-]+)+))?", text):
        assert option in parser._option_string_actions, f"{option} is no option"
        action = parser._option_string_actions[option]
        if value and action.choices is not None:
            assert set(value.split("|")) <= set(action.choices), f"{option} {value}"


@pytest.mark.parametrize(("where", "text"), DOCUMENTED, ids=[w for w, _ in DOCUMENTED])
def test_a_documented_command_line_parses(where: str, text: str) -> None:
    words = _words(text)
    parser, parsed = _parser(words)
    if _is_synopsis(text):
        _check_synopsis(parser, words, text)
        return
    try:
        parser.parse_args(parsed)
    except SystemExit as exc:  # --version, --help
        assert exc.code == 0, where


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A directory with a replay file and histories where the docs name them."""
    monkeypatch.chdir(tmp_path)
    spec = Replay(
        f"harness.catalogue.toys:{commit_before_processing.__name__}",
        Guarantee.AT_LEAST_ONCE,
        Topology(),
        "memory",
        Schedule((Produce(0, 1), Run(3), Crash())),
    )
    saved = spec.save(tmp_path)
    shutil.copy(saved, tmp_path / "FILE")
    for name in ("history.parquet", "big.parquet"):
        assert main(["generate", name, "--records", "200"]) == 0
    return saved


def _for_real(words: list[str], saved: Path) -> list[str]:
    """``words`` runnable here: the files they name exist, ``--records`` is small."""
    out: list[str] = []
    for word in words:
        if re.fullmatch(r"\.harness/failures/.+\.json", word):
            Path(word).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(saved, word)
        out.append(_SMALL if out[-1:] == ["--records"] else word)
    return out


RUNNABLE = [
    (where, text)
    for where, text in DOCUMENTED
    if not _is_synopsis(text)
    and (not _words(text) or _words(text)[0] in _RUN_FOR_REAL or _words(text) == ["--version"])
    and not {"--spark", "spark"} & set(_words(text))
]


@pytest.mark.parametrize(("where", "text"), RUNNABLE, ids=[w for w, _ in RUNNABLE])
def test_a_documented_command_line_runs(
    where: str, text: str, files: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(_for_real(_words(text), files))
    err = capsys.readouterr().err
    assert code in (0, 1), f"{where}: exit {code}: {err}"  # a verdict, not an error
    assert "error:" not in err and "Traceback" not in err, where


def test_the_documented_commands_are_found() -> None:
    commands = {(_words(text) or ["demo"])[0] for _, text in DOCUMENTED}
    assert {"run", "list", "replay", "report", "check", "generate", "kafka"} <= commands
    assert {"check-spark", "spark-job", "demo"} <= commands
    assert len(RUNNABLE) >= 10
