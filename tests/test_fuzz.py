"""Hostile logs through every command and every format (strategies in tests/hostile.py).

For any log, file name and command: no exception escapes, the exit code is a documented one,
stdout is valid for its format, no raw control character reaches human output or stderr, no
line a CI runner would read as a workflow command (`::`) is printed except by --format github,
the cache never changes an answer, and one bad file never changes the good sessions' figures.

The hand-made hostile logs run in the fast tier (`make test`); the drawn ones (tier `fuzz`) in
`make test-all` and CI, a few examples per test (the `default` profile in conftest.py), and in
`make fuzz`, many more.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import tempfile
import traceback
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner, Result
from hypothesis import given
from hypothesis import strategies as st

from copilot_logs.cli import main
from copilot_logs.errors import ExitCode
from synth import SessionBuilder, bash

from .conftest import FUZZ_SETTINGS
from .hostile import (
    CONTROLS,
    EVERYTHING,
    FILE_NAMES,
    damaged_sessions,
    hostile_logs,
    known_logs,
)

EXIT_CODES = {int(code) for code in ExitCode}
RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f\x80-\x9f]")
HUMAN_FORMATS = {"table", "text", "markdown"}
WORKFLOW_COMMAND = re.compile(r"::[a-z-]+( [^:\n]*)?::[^\n]*")
UNESCAPED_PIPE = re.compile(r"(?<!\\)\|")


def lines_of(text: str) -> list[str]:
    """Lines as a CI runner or a terminal splits them: at LF, CR or CRLF only (not at the
    other breaks `str.splitlines` knows, which a runner does not)."""
    return re.split(r"\r\n?|\n", text)


def _formats(command: str) -> list[str]:
    found = main.get_command(click.Context(main), command)
    assert found is not None
    options = [p for p in found.params if p.name == "fmt"]
    if not options:
        return []  # export and report write files, and say what they did in text
    assert isinstance(options[0].type, click.Choice)
    return [str(choice) for choice in options[0].type.choices]


#: Every command that reads logs (all but `rules`), each with every format it offers.
LOG_COMMANDS = [c for c in main.list_commands(click.Context(main)) if c != "rules"]


def invoke(*args: str, stdin: bytes | None = None) -> Result:
    # color=True: click would strip CSI sequences from a pipe, not from a terminal; keep them,
    # so the checks see what a terminal would get.
    return CliRunner().invoke(main, list(args), input=stdin, color=True)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _json(text: str) -> Any:
    return json.loads(text, parse_constant=_reject_constant)


def check_stdout(fmt: str, stdout: str) -> None:
    """stdout is valid for ``fmt``."""
    if fmt in ("json", "sarif"):
        parsed = _json(stdout)
        if fmt == "sarif":
            assert isinstance(parsed["runs"], list)
    elif fmt == "ndjson":
        assert stdout == "" or stdout.endswith("\n")
        for line in stdout.split("\n")[:-1]:
            _json(line)
    elif fmt == "csv":
        rows = list(csv.reader(io.StringIO(stdout, newline=""), strict=True))
        assert all(len(row) == len(rows[0]) for row in rows), rows
    elif fmt == "junit" or (fmt == "svg" and stdout):  # no picture when nothing was read
        ElementTree.fromstring(stdout)
    elif fmt == "github":
        # Workflow commands, whole (their text escaped), and maybe a summary line.
        for line in lines_of(stdout):
            assert not line.startswith("::") or WORKFLOW_COMMAND.fullmatch(line), line
    if fmt in HUMAN_FORMATS | {"github"}:
        assert not RAW_CONTROL.search(stdout), RAW_CONTROL.findall(stdout)
    if fmt != "github":
        # A runner reads a workflow command from a line starting with `::` (blanks trimmed).
        assert not [line for line in lines_of(stdout) if line.lstrip().startswith("::")]
    if fmt == "markdown":
        tables = [line for line in stdout.split("\n") if line.startswith("|")]
        if tables:
            width = len(UNESCAPED_PIPE.findall(tables[0]))
            assert all(len(UNESCAPED_PIPE.findall(line)) == width for line in tables), tables


def check(result: Result, fmt: str, args: tuple[str, ...]) -> None:
    """Every promise a run keeps, whatever the input."""
    shown = f"{args!r}\nexit {result.exit_code}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        trace = "".join(traceback.format_exception(result.exception))
        pytest.fail(f"exception escaped: {shown}\n{trace}")
    assert result.exit_code in EXIT_CODES, shown
    if result.exit_code == ExitCode.USAGE:
        assert result.stdout == "", shown
    else:
        try:
            check_stdout(fmt, result.stdout)
        except (AssertionError, ValueError, ElementTree.ParseError, csv.Error) as error:
            pytest.fail(f"stdout is not valid {fmt}: {error!r}\n{shown}")
    assert not RAW_CONTROL.search(result.stderr), shown
    assert not [line for line in lines_of(result.stderr) if line.lstrip().startswith("::")], shown


def _variants(command: str) -> list[tuple[str, ...]]:
    """Every other choice and flag of ``command`` (--by model, --breakdown, --all, ...), each
    alone: they show other fields of the log (models, repositories) in other layouts."""
    found = main.get_command(click.Context(main), command)
    assert found is not None
    variants: list[tuple[str, ...]] = []
    for param in found.params:
        # --engine spark gives the same output (tests/test_spark.py, hostile names included).
        if not isinstance(param, click.Option) or param.name in ("fmt", "total", "help", "engine"):
            continue
        if param.is_flag and not param.expose_value:
            continue  # --no-cache: run_everything runs with and without it
        if param.is_flag:
            variants.append((param.opts[0],))
        elif isinstance(param.type, click.Choice):
            variants.extend((param.opts[0], str(choice)) for choice in param.type.choices)
    return variants


#: Commands that write files (no --format): their arguments, given a fresh folder OUT.
WRITERS = {
    "export": lambda out, selectors, extra: ("export", str(out / "parquet"), *selectors, *extra),
    "report": lambda out, selectors, extra: (
        "report",
        *selectors,
        *extra,
        "--output",
        str(out / "report.html"),
    ),
}


def run_everything(command: str, selectors: list[str]) -> None:
    """``command`` in every format; json also without the cache, and from it (twice: the
    second read is a cache hit), which must all give the same answer."""
    if command == "watch":
        # watch follows until Ctrl-C: --until-done with a short --timeout makes it end (0 or 1
        # with the verdict, 124 when the log's run never ended, 2 for several sessions).
        for fmt in _formats(command):
            args = ("watch", *selectors, "--until-done", "--timeout", "0.3s", "--format", fmt)
            check(invoke(*args), fmt, args)
        return
    if command in WRITERS:
        with tempfile.TemporaryDirectory() as out:
            for extra in (["--no-cache"], []):
                args = WRITERS[command](Path(out), selectors, extra)
                check(invoke(*args), "text", args)
            for page in Path(out).glob("*.html"):
                # Log text is escaped in the page: the element a hostile field holds is not.
                assert "<x/>" not in page.read_text(errors="replace"), args
        return
    for fmt in _formats(command):
        args = (command, *selectors, "--format", fmt)
        check(invoke(*args), fmt, args)
    for variant in _variants(command):
        for fmt in {_formats(command)[0], "json"} & set(_formats(command)):
            args = (command, *selectors, *variant, "--format", fmt)
            check(invoke(*args), fmt, args)
    if "json" in _formats(command):
        answers = []
        for extra in (["--no-cache"], [], []):
            args = (command, *selectors, *extra, "--format", "json")
            result = invoke(*args)
            check(result, "json", args)
            answers.append((result.exit_code, result.stdout))
        assert answers[0] == answers[1] == answers[2], (command, answers)
    if command == "count":
        totals = []
        for extra in (["--no-cache"], [], [], ["--include-subagents"]):
            args = ("count", "--total", *extra, *selectors)
            result = invoke(*args)
            check(result, "text", args)
            totals.append((result.exit_code, result.stdout))
            if result.exit_code != ExitCode.USAGE:
                assert re.fullmatch(r"\d+\n", result.stdout), result.stdout
        assert totals[0] == totals[1] == totals[2], totals


@contextmanager
def written(log: bytes, name: str, *, flat: bool) -> Iterator[Path]:
    """A fresh folder of sessions holding ``log`` as ``name`` (a session folder or a file)."""
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder) / "session-state"
        path = root / f"{name}.jsonl" if flat else root / name / "events.jsonl"
        path.parent.mkdir(parents=True)
        path.write_bytes(log)
        yield root


@pytest.mark.parametrize("command", LOG_COMMANDS)
@pytest.mark.fuzz
@FUZZ_SETTINGS
@given(log=hostile_logs(), name=FILE_NAMES, flat=st.booleans())
def test_hostile_log_through_every_format(command: str, log: bytes, name: str, flat: bool) -> None:
    with written(log, name, flat=flat) as root:
        run_everything(command, [str(root)])


KNOWN = known_logs()


@pytest.mark.parametrize("command", LOG_COMMANDS)
@pytest.mark.parametrize("name", sorted(KNOWN))
def test_known_hostile_log_through_every_format(command: str, name: str) -> None:
    with written(KNOWN[name], name, flat=True) as root:
        run_everything(command, [str(root)])


WORST_NAME = "".join(c for c in CONTROLS if c != "\x00") + "\x1b]52;c;aGFja2Vk\x07\n::error::x"


@pytest.mark.parametrize("command", LOG_COMMANDS)
@pytest.mark.fuzz
@FUZZ_SETTINGS
@given(log=hostile_logs(st.just(EVERYTHING)))
def test_every_control_character_in_every_field(command: str, log: bytes) -> None:
    """Every text field holds every C0 and C1 control and every escape at once; the file name
    holds every control a file name may hold."""
    with written(log, WORST_NAME, flat=False) as root:
        run_everything(command, [str(root)])


def test_hostile_logs_from_standard_input() -> None:
    """`-` reads the same hostile bytes from stdin (no file, no cache)."""
    log = ("\n".join(["{" * 1000, '{"type":"x' + EVERYTHING + '"}', "1e999"]) + "\n").encode()
    for command in LOG_COMMANDS:
        if command in WRITERS:
            with tempfile.TemporaryDirectory() as out:
                args = WRITERS[command](Path(out), ["-"], [])
                check(invoke(*args, stdin=log), "text", args)
        for fmt in _formats(command):
            args = (command, "-", "--format", fmt)
            check(invoke(*args, stdin=log), fmt, args)


# --- one bad file never hides the good ones --------------------------------------------------

#: Seeds the hostile sessions never draw (tests/hostile.py draws 0..65536): the good sessions'
#: event ids are their own, not replays of a hostile session's.
GOOD_SEED = 1 << 20
GOOD_IDS = ("900d0000-0000-4000-8000-000000000001", "900d0000-0000-4000-8000-000000000002")


def _good_sessions(root: Path) -> None:
    for number, session_id in enumerate(GOOD_IDS):
        b = SessionBuilder(session_id=session_id, seed=GOOD_SEED + number)
        b.user_message(f"good prompt {number}")
        b.turn("working", [bash("make test", "ok")])
        b.task_complete_turn("all good")
        b.shutdown()
        b.write_to(root)


def _good_part(command: str, payload: Any, good_root: Path) -> Any:
    """What ``command``'s json says about the good sessions (their rows, their findings)."""
    if command == "validate":
        return [f for f in payload["findings"] if f["file"].startswith(str(good_root))]
    rows = payload["rows"] if isinstance(payload, dict) else payload
    good = [row for row in rows if row.get("session_id") in GOOD_IDS]
    return sorted(good, key=lambda row: json.dumps(row, sort_keys=True))


GOOD_COMMANDS = [c for c in LOG_COMMANDS if "json" in _formats(c)]


#: Options that make a command show every session (audit judges only autopilot ones).
SHOW_ALL = {"audit": ("--all",), "timeline": ("--latest", "1000")}


@pytest.fixture(scope="module")
def good_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("good") / "session-state"
    _good_sessions(root)
    return root


def _good_figures(command: str, selectors: list[str], good_root: Path) -> Any:
    args = (command, *selectors, *SHOW_ALL.get(command, ()), "--format", "json")
    result = invoke(*args)
    # Only what isolation needs (the other tests check stderr and the rest): the run ended
    # with a documented code and its answer is JSON.
    assert result.exception is None or isinstance(result.exception, SystemExit), args
    assert result.exit_code in EXIT_CODES - {ExitCode.USAGE}, (args, result.stderr)
    return _good_part(command, _json(result.stdout), good_root)


@pytest.mark.fuzz
@FUZZ_SETTINGS
@given(log=hostile_logs(), name=FILE_NAMES, flat=st.booleans())
def test_one_bad_file_never_hides_the_good_ones(
    good_root: Path, log: bytes, name: str, flat: bool
) -> None:
    good = str(good_root)
    with written(log, name, flat=flat) as bad:
        for command in GOOD_COMMANDS:
            alone = _good_figures(command, [good], good_root)
            if command != "validate":
                assert len(alone) == len(GOOD_IDS), (command, alone)
            for selectors in ([good, str(bad)], [str(bad), good]):
                assert _good_figures(command, selectors, good_root) == alone, (command, selectors)


def test_controls_cover_c0_del_and_c1() -> None:
    """The strategies' alphabet: all 65 control characters the render boundary must escape."""
    assert len(set(CONTROLS)) == 65
    assert all(RAW_CONTROL.match(c) or c in "\t\n" for c in CONTROLS)
    assert os.fsencode(WORST_NAME)  # a name the file system takes (no NUL, no slash)


@pytest.mark.parametrize("fmt", _formats("rules"))
def test_rules_with_a_hostile_code(fmt: str) -> None:
    """`rules` reads no log, but echoes the code it was given: that echo is escaped too."""
    args = ("rules", EVERYTHING, "--format", fmt)
    result = invoke(*args)
    check(result, fmt, args)
    assert result.exit_code == ExitCode.USAGE


@pytest.mark.fuzz
@FUZZ_SETTINGS
@given(bad=damaged_sessions())
def test_one_bad_session_in_a_stream_never_hides_the_others(bad: bytes) -> None:
    """`cat good bad good`: a damaged session between two good ones (its own session.start
    whole) leaves the good sessions' rows as they are without it."""
    good = []
    for number, session_id in enumerate(GOOD_IDS):
        b = SessionBuilder(session_id=session_id, seed=GOOD_SEED + number)
        b.user_message(f"good prompt {number}")
        b.turn("working", [bash("make test", "ok")])
        b.shutdown()
        good.append(b.to_bytes())
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "stream.jsonl"
        for command in ("count", "sessions"):
            path.write_bytes(good[0] + good[1])
            alone = _good_figures(command, [str(path)], path)
            assert len(alone) == len(GOOD_IDS), (command, alone)
            path.write_bytes(good[0] + bad + good[1])
            assert _good_figures(command, [str(path)], path) == alone, command
