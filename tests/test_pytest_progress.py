"""The pytest plugin's live progress: drawn on pytest's own line, in a real terminal, and taken
back so that what stays on screen is exactly what pytest wrote.

The terminal runs are real: pytest in a pseudo-terminal of 80 or 120 columns, its bytes read
back and drawn by :class:`Screen`, a small terminal (what xterm and tmux do with printable
text, autowrap, CR, LF, BS, TAB and colour sequences; any other control the test refuses). A
run with the progress must leave the screen that the same run writes to a pipe, where no
progress is drawn.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
from pathlib import Path
from typing import Final

import pytest

from harness.pytest_plugin import _TerminalProgress

pytest_plugins = ["pytester"]

# The progress is drawn from the first schedule on (not after half a second).
DELAY_CONFTEST: Final = """
    import os

    from harness.pytest_plugin import _TerminalProgress

    _TerminalProgress.delay = float(os.environ["PROGRESS_DELAY"])
"""

TESTS: Final = """
    import pytest

    from harness.catalogue.toys import commit_before_processing as buggy  # loses under crashes
    from harness.catalogue.toys import process_then_commit as correct

    @pytest.mark.harness(faults=["crash"])
    def test_buggy_processor(harness_explore):
        harness_explore(buggy, guarantee="at-least-once", max_examples=60)

    def test_correct_processor(harness_explore):
        harness_explore(correct, guarantee="at-least-once", max_examples=50)

    def test_plain():
        pass
"""

_CSI: Final = re.compile(r"\x1b\[([0-9;]*)([@-~])")


class Screen:
    """A terminal ``columns`` wide with unbounded scrollback, fed text as a terminal is."""

    def __init__(self, columns: int) -> None:
        self.columns = columns
        self.rows: list[list[str]] = [[]]
        self.row = 0
        self.column = 0
        self.wrap_pending = False  # the cursor sits on the last column after writing there

    def feed(self, text: str) -> None:
        at = 0
        while at < len(text):
            char = text[at]
            if char == "\x1b":
                sequence = _CSI.match(text, at)
                assert sequence is not None, f"unexpected escape {text[at : at + 12]!r}"
                self._csi(sequence.group(1), sequence.group(2))
                at = sequence.end()
                continue
            self._char(char)
            at += 1

    def _csi(self, params: str, final: str) -> None:
        if final == "m":  # colours and attributes: nothing to place
            return
        assert final == "K" and params in ("", "0"), f"unexpected CSI {params}{final}"
        del self.rows[self.row][self.column :]  # erase to the end of the line

    def _char(self, char: str) -> None:
        if char == "\r":
            self.column, self.wrap_pending = 0, False
        elif char == "\n":
            self._down()
        elif char == "\b":
            self.column, self.wrap_pending = max(self.column - 1, 0), False
        elif char == "\t":
            self.column = min((self.column // 8 + 1) * 8, self.columns - 1)
        else:
            assert char.isprintable(), f"unexpected control {char!r}"
            if self.wrap_pending:
                self._down()
                self.column, self.wrap_pending = 0, False
            line = self.rows[self.row]
            line.extend(" " * (self.column + 1 - len(line)))
            line[self.column] = char
            if self.column == self.columns - 1:
                self.wrap_pending = True
            else:
                self.column += 1

    def _down(self) -> None:
        self.row += 1
        self.wrap_pending = False
        if self.row == len(self.rows):
            self.rows.append([])

    def lines(self) -> list[str]:
        return ["".join(row).rstrip() for row in self.rows]


def _environment(**extra: str) -> dict[str, str]:
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("PYTEST_", "HARNESS_", "HYPOTHESIS_"))
        and name not in ("CI", "COLUMNS", "LINES", "NO_COLOR")
    }
    env.update(TERM="xterm-256color", PROGRESS_DELAY="0", **extra)
    return env


def _pytest(args: list[str]) -> list[str]:
    return [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args]


def run_in_terminal(directory: Path, args: list[str], columns: int) -> str:
    """pytest's output in a pseudo-terminal ``columns`` wide, as it was written."""
    parent, child = pty.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    process = subprocess.Popen(
        _pytest(args), cwd=directory, stdin=child, stdout=child, stderr=child, env=_environment()
    )
    os.close(child)
    chunks: list[bytes] = []
    try:
        while True:
            ready, _, _ = select.select([parent], [], [], 300)
            assert ready, "pytest wrote nothing for 300 s"
            try:
                chunk = os.read(parent, 65536)
            except OSError:  # EIO: pytest is done and the terminal has no writer left
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(parent)
        process.kill()
        process.wait()
    return b"".join(chunks).decode()


def run_in_pipe(directory: Path, args: list[str], columns: int) -> str:
    """pytest's output to a pipe (no progress there), laid out for ``columns``, with the
    newlines a terminal would get."""
    env = _environment(COLUMNS=str(columns))
    done = subprocess.run(
        _pytest(args), cwd=directory, env=env, capture_output=True, text=True, check=False
    )
    return done.stdout.replace("\n", "\r\n")  # what a terminal's driver makes of a newline


def test_the_screen_model_draws_what_a_terminal_draws() -> None:
    screen = Screen(10)
    screen.feed("abc\x1b[32mdef\x1b[0m\rX\n\r")  # CR back to the margin, LF down a line
    screen.feed("0123456789wrapped\r\n")  # autowrap after the last column
    screen.feed("one two\b\b\bTWO\b\b\b   \b\b\b!\tx\x1b[K\r\n")
    assert screen.lines() == ["Xbcdef", "0123456789", "wrapped", "one !   x", ""]
    with pytest.raises(AssertionError, match="unexpected CSI"):
        screen.feed("\x1b[2J")


def _tests_region(output: str, columns: int) -> list[str]:
    """The screen lines of the test run: after ``collected N items``, up to pytest's next
    rule (on a terminal, ``collecting ...`` is rewritten by ``collected``; on a pipe, not)."""
    screen = Screen(columns)
    screen.feed(output)
    lines = screen.lines()
    start = next(n for n, line in enumerate(lines) if "collected " in line) + 1
    end = next(n for n in range(start, len(lines)) if lines[n].startswith("====="))
    return lines[start:end]


@pytest.mark.parametrize(
    ("columns", "verbosity"),
    [(80, []), (80, ["-v"]), pytest.param(120, [], marks=pytest.mark.slow)],
)
def test_the_progress_leaves_pytests_lines_as_pytest_wrote_them(
    pytester: pytest.Pytester, columns: int, verbosity: list[str]
) -> None:
    pytester.makeconftest(DELAY_CONFTEST)
    pytester.makepyfile(test_progress=TESTS)
    drawn = run_in_terminal(pytester.path, verbosity, columns)
    plain = run_in_pipe(pytester.path, verbosity, columns)

    # what stays on screen is exactly pytest's own output
    region = _tests_region(drawn, columns)
    assert region == _tests_region(plain, columns)
    # the progress was drawn, on pytest's line, during both harness tests, and never with a
    # carriage return: it goes back over its own text only
    tests_part = drawn[drawn.index("collected ") :]
    assert "search 1/60" in tests_part  # the buggy processor's first schedule
    assert "search 1/50" in tests_part  # the correct one's
    if columns == 120:  # room for the longest form, measured on the terminal mid-test
        assert "harness test_buggy_processor: search 1/60 schedules, 0 failing, ETA" in tests_part
    assert "\r" not in tests_part.replace("\r\n", "\n")
    assert "harness: search" not in plain
    if verbosity:
        assert region[1].startswith("test_progress.py::test_buggy_processor FAILED")
    else:
        assert re.fullmatch(r"test_progress\.py F\.\. +\[100%\]", region[1])
        assert len(region[1]) == columns - 1


# -- when there is no progress ---------------------------------------------------------------

FORCE_TERMINAL: Final = """
    import pytest

    @pytest.hookimpl(trylast=True)
    def pytest_configure(config):
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:  # an xdist worker has none
            reporter.isatty = type(reporter.isatty)(True)  # as if stdout were a terminal
"""


@pytest.fixture
def forced_terminal(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """In-process runs in ``pytester`` see a terminal, outside CI, with no delay."""
    for name in ("CI", "PYTEST_XDIST_WORKER", "PYTEST_ADDOPTS", "HARNESS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.setattr(_TerminalProgress, "delay", 0.0)
    pytester.makeconftest(FORCE_TERMINAL)


@pytest.mark.parametrize(
    ("args", "env", "drawn"),
    [
        ([], {}, True),
        ([], {"CI": "true"}, False),
        ([], {"TERM": "dumb"}, False),
        (["-qq"], {}, False),
        (["-s"], {}, False),  # the test's own output would land on the progress line
        (["--capture=sys"], {}, False),  # what a subprocess writes would land there too
        (["-o", "log_cli=true"], {}, False),  # pytest writes log records on that line
        (["-n", "1"], {}, False),  # an xdist worker has no terminal
    ],
)
@pytest.mark.usefixtures("forced_terminal")
def test_the_progress_is_drawn_only_where_nothing_else_writes_on_its_line(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    args: list[str],
    env: dict[str, str],
    drawn: bool,
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    pytester.makepyfile(
        test_live="""
        from harness.catalogue.toys import process_then_commit as correct

        def test_correct(harness_explore):
            harness_explore(correct, guarantee="at-least-once", max_examples=20)
        """
    )
    if "-n" in args:
        monkeypatch.setenv("PROGRESS_DELAY", "0")
        pytester.makeconftest(FORCE_TERMINAL + DELAY_CONFTEST)
        result = pytester.runpytest_subprocess("-p", "no:cacheprovider", *args)
    else:
        result = pytester.runpytest("-p", "no:cacheprovider", *args)
    assert result.ret == pytest.ExitCode.OK  # the test ran and passed (-qq prints no counts)
    assert ("search 1/20 schedules, 0 failing" in result.stdout.str()) is drawn


@pytest.mark.usefixtures("forced_terminal")
def test_the_progress_stops_and_leaves_the_line_alone_once_another_writes_on_it(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        test_noisy="""
        import pytest

        from harness.catalogue.toys import process_then_commit as correct

        SAY = []
        CALLS = []

        @pytest.fixture
        def plugin_words(request):
            reporter = request.config.pluginmanager.get_plugin("terminalreporter")
            capture = request.config.pluginmanager.get_plugin("capturemanager")

            def say():
                with capture.global_and_fixture_disabled():
                    reporter.write("<a plugin's words>")

            SAY.append(say)

        def noisy(ctx):  # on its 40th call, something writes on pytest's line
            CALLS.append(1)
            if len(CALLS) == 40:
                SAY[0]()
            correct(ctx)

        def test_noisy(plugin_words, harness_explore):
            harness_explore(noisy, guarantee="at-least-once", max_examples=30)
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    before, words, after = result.stdout.str().partition("<a plugin's words>")
    assert words, "the words were written"
    assert "search 1/30 schedules" in before
    assert "harness" not in after.partition("\n")[0]  # nothing drawn after the words
    assert "\b" not in after  # nor taken back over them
