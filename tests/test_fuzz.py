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
from datetime import UTC, datetime
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
    LoopRun,
    damaged_sessions,
    hostile_logs,
    known_logs,
    loop_runs,
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
    "otel": lambda out, selectors, extra: (
        "otel",
        *selectors,
        *extra,
        "--include-open",
        "--capture-content",
        "--out",
        str(out / "traces.jsonl"),
    ),
}


def run_everything(command: str, selectors: list[str]) -> None:
    """``command`` in every format; json also without the cache, and from it (twice: the
    second read is a cache hit), which must all give the same answer."""
    if command == "diff":  # two sides: the hostile folder against itself
        selectors = [*selectors, *selectors]
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
            for traces in Path(out).glob("*.jsonl"):
                check_stdout("ndjson", traces.read_text())
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


#: diff is left out: each of its sides is one selector, so a bad file cannot sit beside the good
#: ones in a side given as two selectors (run_everything gives it hostile folders).
GOOD_COMMANDS = [c for c in LOG_COMMANDS if "json" in _formats(c) and c != "diff"]


#: Options that make a command show every session (audit judges only autopilot ones).
SHOW_ALL = {
    "audit": ("--all",),
    "timeline": ("--latest", "1000"),
    # prune shows the folders it would remove: every one (a dry run changes nothing)
    "prune": ("--older-than", "0", "--quiet-for", "0", "--keep-newest", "0"),
}


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


# --- doctor --repair on hostile logs ---------------------------------------------------------

#: What a listed change does to a line of the copy: a line it names is written anew (joined,
#: an escape written, a value changed) or added.
REWRITES = ("joined ", "wrote ", "parentId ", "session.resume ", "session.shutdown ")


def _tree(folder: Path) -> dict[str, bytes | None]:
    """Every path under ``folder`` (links not followed) and a file's bytes."""
    return {
        str(path.relative_to(folder)): path.read_bytes() if path.is_file() else None
        for path in sorted(folder.rglob("*"))
        if not path.is_symlink()
    }


def _kept(original: bytes, pieces: list[dict[str, Any]]) -> bytes:
    """``original`` without the pieces set aside (their offsets are into the original)."""
    kept, cursor = [], 0
    for piece in sorted(pieces, key=lambda p: p["offset"]):
        assert piece["offset"] >= cursor, pieces  # pieces never overlap
        kept.append(original[cursor : piece["offset"]])
        cursor = piece["offset"] + piece["length"]
    return b"".join([*kept, original[cursor:]])


SEPARATOR_ESCAPES = {
    "U+2028": ("\u2028".encode(), b"\\u2028"),
    "U+2029": ("\u2029".encode(), b"\\u2029"),
}


def _as_listed(line: bytes, changes: list[str]) -> bytes | None:
    """An original line with the listed changes of values and escapes made by hand, or None
    when one of them is of another kind (joined, added, not UTF-8) or not found once."""
    for what in changes:
        words = what.split(" ")
        if words[0] == "parentId":
            was, now = what[len("parentId ") :].split(" -> ")
            old = b'"parentId":' + (b"null" if was == "None" else json.dumps(was).encode())
            new = b'"parentId":' + json.dumps(now).encode()
        elif what.startswith("wrote the raw U+"):
            old, new = SEPARATOR_ESCAPES[words[3]]
            line = line.replace(old, new)
            continue
        elif words[0] in ("session.resume", "session.shutdown") and len(words) == 5:
            old = f'"{words[1]}":{words[2]}'.encode()
            new = f'"{words[1]}":{words[4]}'.encode()
        else:
            return None
        if line.count(old) != 1:
            return None
        line = line.replace(old, new)
    return line


def check_repair(original: bytes, record: dict[str, Any], out: Path) -> None:
    """One repaired copy: inside ``out``, the sidecar as its pieces say, and every line of the
    copy either a line of the original (less what was set aside) or one a listed change
    names."""
    folder = Path(record["events"]).parent
    assert folder.parent == out and folder.name == record["session_id"], record["events"]
    assert record["original_bytes"] == len(original)
    sidecar = Path(record["sidecar"]).read_bytes() if record["sidecar"] else b""
    for piece in record["set_aside"]:
        at, length = piece["sidecar_offset"], piece["length"]
        assert sidecar[at : at + length] == original[piece["offset"] : piece["offset"] + length]
    assert len(sidecar) == sum(piece["length"] for piece in record["set_aside"])
    report = json.loads((folder / "repair.json").read_text())
    assert report == record
    lines = set(_kept(original, record["set_aside"]).split(b"\n"))
    copy = Path(record["events"]).read_bytes()
    assert copy.endswith(b"\n") or copy == b""
    unexplained = [line for line in copy.split(b"\n")[:-1] if line not in lines]
    rewritten = {c["line"] for c in record["changes"] if c["what"].startswith(REWRITES)}
    added = [c for c in record["changes"] if c["what"].startswith("added a")]
    assert len(unexplained) <= len(rewritten) + len(added), (unexplained, record["changes"])
    # A line whose changes are values and escapes: the copy holds it with those bytes alone
    # changed, as made here by hand from the original line.
    physical = original.split(b"\n")
    by_line: dict[int, list[str]] = {}
    for change in record["changes"]:
        if change["what"].startswith(REWRITES):
            by_line.setdefault(change["line"], []).append(change["what"])
    for number, whats in by_line.items():
        line = physical[number - 1].strip(b"\x00").rstrip(b"\r")
        if number == 1 and any(p["offset"] == 0 for p in record["set_aside"]):
            line = line.removeprefix(b"\xef\xbb\xbf")  # a byte order mark, set aside
        if line.count(b'{"type":"') != 1:
            continue  # two events glued on one line: the copy writes them apart
        expected = _as_listed(line, whats)
        if expected is not None:
            assert expected in copy.split(b"\n"), (number, whats, line)


@FUZZ_SETTINGS
@given(log=hostile_logs(), flat=st.booleans())
def test_repair_of_a_hostile_log(log: bytes, flat: bool) -> None:
    """The copy stays inside --out, the original is byte-identical, every changed byte is
    listed, and the command exits 0 only when doctor calls every copy resumable; a refusal
    (exit 2) writes nothing."""
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        path = root / "state" / ("session.jsonl" if flat else "session/events.jsonl")
        path.parent.mkdir(parents=True)
        path.write_bytes(log)
        out = root / "home" / "repaired"
        before = _tree(root)
        args = ("doctor", str(path), "--repair", "--out", str(out), "--format", "json")
        result = invoke(*args)
        check(result, "json", args)
        assert path.read_bytes() == log
        after = _tree(root)
        outside = {k: v for k, v in after.items() if not k.startswith("home")}
        assert outside == before, sorted(set(outside) ^ set(before))
        if result.exit_code not in (0, 1):
            assert not out.exists() or list(out.iterdir()) == [], result.stderr
            return
        records = _json(result.stdout)
        assert sorted(p.name for p in out.iterdir()) == sorted(r["session_id"] for r in records)
        for record in records:
            check_repair(log, record, out)
            judged = invoke(
                "doctor", str(Path(record["events"])), "--format", "json", "--running-within", "0"
            )
            [verdict] = [row["verdict"] for row in _json(judged.stdout)]
            assert verdict == record["verdict"]
        resumable = all(record["verdict"] != "cannot-resume" for record in records)
        assert result.exit_code == (0 if resumable else 1), records


KNOWN_REPAIRS = sorted(KNOWN)


@pytest.mark.parametrize("name", KNOWN_REPAIRS)
def test_repair_of_a_known_hostile_log(name: str) -> None:
    test_repair_of_a_hostile_log.hypothesis.inner_test(log=KNOWN[name], flat=False)  # type: ignore[attr-defined]


# --- audit's loop signs on runs whose truth is known -----------------------------------------


@FUZZ_SETTINGS
@given(run=loop_runs())
def test_loop_signs_on_generated_runs(run: LoopRun) -> None:
    from copilot_logs.api import read_bytes as read_log
    from copilot_logs.commands.audit import audit

    later = datetime(2030, 1, 1, tzinfo=UTC)
    [row] = audit(read_log(run.builder.to_bytes()), now=later).to_dicts()
    assert row["looping"] is run.looping, (run.episodes, row["loop_signals"])
    assert (row["wasted_calls"] or 0) == run.wasted_calls, run.episodes
    if run.looping:
        assert row["loop_signals"] == ["repeated-call"]
