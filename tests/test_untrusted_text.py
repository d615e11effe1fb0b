"""Text from a log never drives a terminal or a CI: every human output shows control
characters as visible escapes, no line is a workflow command, no markup is read; machine
formats keep the exact text; a reader that goes away never changes the exit code."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner, Result

from copilot_logs.cli import main
from copilot_logs.render.escape import inert, json_text, markdown_cell, multiline, one_line
from copilot_logs.render.formats import print_damage
from synth import SessionBuilder, ToolCall
from tests.conftest import PROJECT

# Clear screen, an OSC 52 clipboard write ended by BEL, the one-byte C1 CSI, rich markup, a
# line that GitHub Actions would run, a v1 command, a right-to-left override, and invisible
# characters: a zero-width space, a right-to-left mark, a byte order mark, a tag character
# (hidden ASCII) and a zero-width joiner between two letters.
HOSTILE = (
    "\x1b[2J\x1b]52;c;aGk=\x07\x9b31m[bold red]RED[/bold red][link=https://x.example]l[/link]"
    "\n::error::pwned\r##[warning]v1\u202edesrever\x00"
    "zw\u200bsp\u200fmark\ufeffbom\U000e0041tag\u200djoin"
)
INVISIBLE = "\u00ad\u061c\u180e\u200b-\u200f\u2060-\u2064\u206a-\u206f\ufeff\U000e0000-\U000e007f"
RAW_CONTROL = re.compile(
    f"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069{INVISIBLE}]"
)
REPOSITORY = "octo/" + HOSTILE
PROMPT = "do it " + HOSTILE
HUMAN_RUNS = [
    ("sessions",),
    ("count",),
    ("count", "--by", "repository"),
    ("count", "--by", "model"),
    ("timeline",),
    ("timeline", "--no-tools"),
    ("audit",),
    ("audit", "--all", "--format", "markdown"),
    ("validate",),
    ("validate", "--format", "junit"),
    ("validate", "--statistics"),
    ("usage", "--verbose"),
    ("usage", "--by", "repository", "--breakdown"),
    ("usage", "--by", "model", "--format", "markdown"),
]


def hostile_session(session_id: str = "sess\x1b[2J\n::error::id\x01") -> SessionBuilder:
    b = SessionBuilder(
        seed=7,
        session_id=session_id,
        model="gpt" + HOSTILE,
        repository=REPOSITORY,
        branch="br" + HOSTILE,
        cwd="/tmp/" + HOSTILE,
    )
    b.mode_changed("autopilot")
    b.user_message(PROMPT)
    tool = ToolCall("bash" + HOSTILE, {"command": "ls " + HOSTILE}, error="boom " + HOSTILE)
    b.turn("said " + HOSTILE, [tool])
    b.task_complete_turn("done " + HOSTILE, success=False)
    b.session_error("err " + HOSTILE, error_type="query" + HOSTILE)
    b.shutdown()
    return b


@pytest.fixture
def hostile_file(tmp_path: Path) -> Path:
    """A hostile session in a folder whose own name is hostile, with a damaged line (so a
    warning names the file) and an event of a hostile type."""
    folder = tmp_path / "dir\x1b]0;title\x07\x9b2J\n::error::file"
    folder.mkdir()
    path = folder / "events.jsonl"
    damaged = b'{"type": "x\x1b[2J' + HOSTILE.encode() + b"\n"
    path.write_bytes(hostile_session().to_bytes() + damaged)
    return path


def run(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(main, list(args), env={"COLUMNS": "400", **(env or {})})


def assert_inert(text: str, *, workflow_commands: bool = False) -> None:
    """No raw control character; no line a CI runs (but annotations, when they are meant)."""
    found = RAW_CONTROL.search(text)
    assert found is None, f"raw {found.group()!r} in {text!r}"
    assert "##[" not in text
    for line in text.splitlines():
        if line.lstrip().startswith("::"):
            assert workflow_commands, line
            assert re.match(r"::(error|warning|notice)( [^:]*)?::", line), line


@pytest.mark.parametrize("args", HUMAN_RUNS, ids=" ".join)
def test_human_output_shows_control_characters_as_escapes(
    hostile_file: Path, args: tuple[str, ...]
) -> None:
    result = run(*args, str(hostile_file))
    assert result.exit_code in (0, 1), result.output
    assert result.stdout.strip(), result.stderr
    assert_inert(result.stdout)
    assert_inert(result.stderr)


@pytest.mark.parametrize("command", ["audit", "validate"])
def test_github_annotations_are_the_only_workflow_commands(
    hostile_file: Path, command: str
) -> None:
    result = run(command, str(hostile_file), "--format", "github")
    assert result.exit_code == 1
    assert_inert(result.stdout, workflow_commands=True)
    assert_inert(result.stderr)
    annotations = [line for line in result.stdout.splitlines() if line.startswith("::")]
    assert annotations
    # GitHub's own escaping holds: the message's newline is %0A, never a line break.
    assert any("%0A" in line for line in annotations) or command == "validate"


def test_the_escapes_are_visible_and_the_text_still_there(hostile_file: Path) -> None:
    table = run("sessions", str(hostile_file)).stdout
    assert "octo/\\x1b[2J\\x1b]52;c;" in table
    tree = run("timeline", str(hostile_file), "--width", "1000").stdout
    assert "do it \\x1b[2J" in tree
    assert "\\x3a:error::pwned" not in tree  # inside a line: shown as it is
    assert "::error::pwned" in tree
    assert "#\\x23[warning]v1\\u202edesrever\\x00" in tree


def test_rich_markup_in_log_text_is_never_read(tmp_path: Path) -> None:
    b = SessionBuilder(seed=3, repository="[red]o[/red][link=x]p")
    b.user_message("hi")
    b.turn("ok")
    b.write_to(tmp_path)
    for args in (("sessions",), ("count", "--by", "repository"), ("usage", "--by", "repository")):
        out = run(*args, "--root", str(tmp_path)).stdout
        assert "[red]o[/red][link=x]p" in out, out


def test_a_line_that_would_be_a_workflow_command_is_defused(tmp_path: Path) -> None:
    """The first column of a table is log text at the start of the line."""
    b = SessionBuilder(seed=4, repository="::error title=x::owned")
    b.user_message("hi")
    b.turn("ok")
    b.write_to(tmp_path)
    out = run("count", "--by", "repository", "--root", str(tmp_path)).stdout
    assert_inert(out)
    header, row, _total = out.splitlines()
    assert row.startswith("\\x3a:error title=x::owned ")
    # Escaped before the layout: the columns still line up.
    calls = re.search(r"\s(\d+)\s", row)
    assert calls is not None
    assert calls.end(1) == header.index("llm calls") + len("llm calls")


def test_junit_is_valid_xml_for_any_session_id(hostile_file: Path) -> None:
    result = run("validate", str(hostile_file), "--format", "junit")
    root = ET.fromstring(result.stdout.encode())
    case = root.find("testsuite/testcase")
    assert case is not None
    assert case.get("name") == "sess\\x1b[2J\\n::error::id\\x01"
    failure = case.find("failure")
    assert failure is not None and "E101" in (failure.text or "")


def test_machine_formats_keep_the_exact_text(hostile_file: Path) -> None:
    """json, ndjson and sarif hold the text as logged; JSON writes what a terminal or a CI
    would act on (C1, bidi controls, ``##[``) as ``\\u`` escapes, which decode to the same.
    csv cells show control characters as visible escapes: a row stays one line."""
    runs = {
        fmt: run(*args, str(hostile_file), "--format", fmt).stdout
        for fmt, args in {
            "json": ("sessions",),
            "ndjson": ("timeline",),
            "csv": ("sessions",),
            "sarif": ("validate",),
        }.items()
    }
    assert orjson.loads(runs["json"])[0]["repository"] == REPOSITORY
    assert orjson.loads(runs["ndjson"].splitlines()[0])["model"] == "gpt" + HOSTILE
    assert next(csv.DictReader(io.StringIO(runs["csv"])))["repository"] == one_line(REPOSITORY)
    assert len(runs["csv"].splitlines()) == 2  # the header and the session, one line each
    assert json.loads(runs["sarif"])["runs"][0]["results"]
    for fmt in ("json", "ndjson", "sarif", "csv"):
        assert_inert(runs[fmt])
    sessions = run("validate", str(hostile_file), "--format", "json").stdout
    assert_inert(sessions)
    assert orjson.loads(sessions)["findings"][0]["file"] == str(hostile_file)


def test_markdown_cells_stay_one_cell_on_one_line(tmp_path: Path) -> None:
    b = SessionBuilder(seed=5, repository="a|b\\|c\nd")
    b.user_message("hi")
    b.turn("ok")
    b.shutdown()
    b.write_to(tmp_path)
    out = run("usage", "--by", "repository", "--format", "markdown", "--root", str(tmp_path))
    lines = out.stdout.splitlines()
    assert len(lines) == 4  # header, rule, one repository, total
    unescaped_pipes = [len(re.findall(r"(?<!\\)(?:\\\\)*\|", line)) for line in lines]
    assert len(set(unescaped_pipes)) == 1, lines
    # Shown (GitHub renders `\\` as one backslash) as a|b\|c\nd: the newline as an escape.
    assert lines[2].startswith("| a\\|b\\\\\\|c\\\\nd |")


def test_error_lines_escape_what_the_user_or_a_path_holds(tmp_path: Path) -> None:
    missing = run("sessions", str(tmp_path / "gone\x1b[2J\n::error::x"))
    assert missing.exit_code == 2
    assert missing.stderr.startswith("Error: ")
    assert len(missing.stderr.splitlines()) == 1
    assert "gone\\x1b[2J\\n::error::x" in missing.stderr
    assert_inert(missing.stderr)
    bad_choice = run("sessions", "--format", "\x1b]52;c;aGk=\x07")
    assert bad_choice.exit_code == 2
    assert "Invalid value for '--format'" in bad_choice.stderr
    assert_inert(bad_choice.stderr)
    none = run("sessions", "--root", str(tmp_path), "\x9b2J")
    assert_inert(none.stderr)


def test_the_width_is_bounded(hostile_file: Path) -> None:
    too_wide = run("timeline", str(hostile_file), "--width", "9999999")
    assert too_wide.exit_code == 2
    assert "40<=x<=1000" in too_wide.stderr
    huge = run("timeline", str(hostile_file), env={"COLUMNS": "9999999"})
    assert huge.exit_code == 0
    assert max(len(line) for line in huge.stdout.splitlines()) <= 1000
    table = run("sessions", str(hostile_file), env={"COLUMNS": "9999999"})
    assert max(len(line) for line in table.stdout.splitlines()) <= 1000
    tiny = run("sessions", str(hostile_file), env={"COLUMNS": "3"})
    assert tiny.exit_code == 0
    assert tiny.stdout.startswith("session")


# --- normal text stays readable ----------------------------------------------------------------


def test_normal_text_is_not_mangled(tmp_path: Path) -> None:
    repository = "café/日本語-🚀-Ωμέγα"
    b = SessionBuilder(
        seed=6, repository=repository, branch="feature\tnaïve", model="claude-sonnet-4.5"
    )
    b.user_message("Explain\tthis: naïve façade, 中文 and 😀")
    b.turn("Sure — here it is.")
    b.write_to(tmp_path)
    table = run("sessions", "--root", str(tmp_path)).stdout
    assert repository in table
    assert "feature naïve" in table  # a tab in a cell is a space: the columns stay put
    tree = run("timeline", "--root", str(tmp_path), "--width", "200").stdout
    assert "Explain this: naïve façade, 中文 and 😀" in tree
    assert "Sure — here it is." in tree
    assert "\\" not in tree


def test_the_escaping_functions() -> None:
    assert one_line("a\tb\nc\x1b[2J\x9b\u202e\x7f") == "a b\\nc\\x1b[2J\\x9b\\u202e\\x7f"
    assert multiline("a\tb\nc\r\x00") == "a\tb\nc\\r\\x00"
    assert one_line("Ünïcödé 日本 🚀 \\n") == "Ünïcödé 日本 🚀 \\n"
    assert one_line(" ::x::y ##[z] a::b") == " \\x3a:x::y #\\x23[z] a::b"
    assert inert("ok\n  ::error::x\n\u3000::y") == "ok\n  \\x3a:error::x\n\u3000\\x3a:y"
    assert multiline("a ##[group]y\n##vso[x]") == "a #\\x23[group]y\n#\\x23vso[x]"
    assert inert("::notice::fine", workflow_commands=True) == "::notice::fine"
    assert markdown_cell("a|b\\") == "a\\|b\\\\"
    value = {"s": "x\x9b\x7f\u202e##[error] \u2028 é 日本 \x1b"}
    encoded = json_text(orjson.dumps(value).decode())
    assert encoded == '{"s":"x\\u009b\\u007f\\u202e##\\u005berror] \\u2028 é 日本 \\u001b"}'
    assert json.loads(encoded) == value
    assert json_text('["##vso[task]", "# #[", "##x"]') == '["##vso\\u005btask]", "# #[", "##x"]'
    assert json_text('["a\x7fb"]') == '["a\\u007fb"]'  # all ASCII: DEL alone is escaped
    assert json_text('["plain", "#[x]"]') == '["plain", "#[x]"]'


@pytest.mark.parametrize(
    ("char", "shown"),
    [
        ("\u200b", "\\u200b"),  # zero-width space
        ("\u200c", "\\u200c"),
        ("\u200d", "\\u200d"),  # a joiner between letters
        ("\u200e", "\\u200e"),  # left-to-right mark
        ("\u200f", "\\u200f"),
        ("\u2060", "\\u2060"),  # word joiner
        ("\ufeff", "\\ufeff"),  # byte order mark
        ("\u00ad", "\\xad"),  # soft hyphen
        ("\u061c", "\\u061c"),  # Arabic letter mark
        ("\U000e0041", "\\U000e0041"),  # tag A: hidden ASCII
    ],
)
def test_invisible_characters_are_shown_as_escapes(char: str, shown: str) -> None:
    assert one_line(f"a{char}b") == f"a{shown}b"
    assert multiline(f"a{char}b") == f"a{shown}b"
    encoded = json_text(orjson.dumps([f"a{char}b"]).decode())
    assert encoded.isascii()  # as a \\u escape (two, a surrogate pair, above U+FFFF)
    assert json.loads(encoded) == [f"a{char}b"]


def test_a_joiner_between_emoji_is_kept() -> None:
    scientist = "\U0001f469\u200d\U0001f52c"  # woman + ZWJ + microscope
    family = "\U0001f468\u200d\U0001f469\u200d\U0001f467"
    assert one_line(f"{scientist} {family}") == f"{scientist} {family}"
    assert one_line("\U0001f469\u200dx") == "\U0001f469\\u200dx"


# --- one bad line, many reports -----------------------------------------------------------------


def test_the_damage_summary_counts_what_it_says(capsys: pytest.CaptureFixture[str]) -> None:
    """20 problems are listed; the rest are counted as problems, on how many lines."""
    rows = [("f.jsonl", line, "invalid-json", "bad", None, None) for line in range(1, 22)]
    rows += [("f.jsonl", 21, "crlf", "a CRLF", None, None)]
    rows += [("f.jsonl", 30, "blank-line", "blank", None, None)]
    print_damage(rows)
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 21
    assert err[-1].startswith("warning: f.jsonl: 3 more problems on 2 lines; ")


# --- a reader that goes away ------------------------------------------------------------------


def _closed_pipe_run(args: list[str], home: Path) -> subprocess.CompletedProcess[bytes]:
    """The command with a stdout whose reader is already gone (as `| head -0` leaves it)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    env = {**os.environ, "COPILOT_HOME": str(home), "XDG_CACHE_HOME": str(home / "cache")}
    env["PYTHONPATH"] = str(PROJECT)
    try:
        return subprocess.run(
            [sys.executable, "-m", "copilot_logs", *args],
            stdout=write_end,
            stderr=subprocess.PIPE,
            env=env,
            check=False,
            timeout=120,
        )
    finally:
        os.close(write_end)


@pytest.mark.process
@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["audit"], 1),
        (["audit", "--format", "json"], 1),
        (["validate"], 1),
        (["sessions"], 0),
        (["sessions", "--format", "csv"], 0),
        (["timeline", "--format", "ndjson"], 0),
    ],
    ids=lambda value: " ".join(value) if isinstance(value, list) else str(value),
)
def test_a_closed_pipe_keeps_the_exit_code_and_prints_no_traceback(
    hostile_file: Path, tmp_path: Path, args: list[str], code: int
) -> None:
    done = _closed_pipe_run([*args, str(hostile_file)], tmp_path)
    assert done.returncode == code, done.stderr.decode()
    assert b"Traceback" not in done.stderr
    assert b"Exception ignored" not in done.stderr
    assert b"BrokenPipeError" not in done.stderr


# --- the same shape with and without sessions ------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        ("sessions",),
        ("count",),
        ("count", "--by", "interaction"),
        ("timeline",),
        ("usage",),
        ("usage", "--by", "model", "--breakdown"),
        ("audit",),
    ],
    ids=" ".join,
)
def test_machine_formats_keep_their_shape_with_no_session(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    full = tmp_path / "full"
    b = SessionBuilder(seed=8)
    b.user_message("hi")
    b.turn("ok")
    b.shutdown()
    b.write_to(full)
    empty = tmp_path / "empty"
    empty.mkdir()

    def output(root: Path, fmt: str) -> str:
        return run(*command, "--root", str(root), "--format", fmt).stdout

    assert "No sessions found" in run(*command, "--root", str(empty)).stderr
    shape_one, shape_none = orjson.loads(output(full, "json")), orjson.loads(output(empty, "json"))
    assert type(shape_one) is type(shape_none)
    if isinstance(shape_one, dict):
        assert shape_one.keys() == shape_none.keys()
        assert shape_none["rows"] == []
    else:
        assert shape_none == []
    assert output(empty, "csv") == output(full, "csv").splitlines()[0] + "\n"
    assert output(empty, "ndjson") == ""


# --- nothing prints another way ----------------------------------------------------------------

WRITES = re.compile(
    r"click\.(echo|secho)|(^|[^\w.])print\(|sys\.(__)?(stdout|stderr)|Console\(|os\.write\("
    r"|rich\.(print|get_console)|import print\b"
)


def test_only_the_output_module_writes_to_the_terminal() -> None:
    """Every human output goes through copilot_logs.render.output, so no command can forget the
    escaping: no other module echoes, prints, builds a rich console or touches sys.stdout."""
    package = PROJECT / "copilot_logs"
    offenders = [
        f"{path.relative_to(PROJECT)}:{number}: {line.strip()}"
        for path in sorted(package.rglob("*.py"))
        if path.name != "output.py"
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if WRITES.search(line)
    ]
    assert offenders == []
    # The pattern finds what it is meant to find.
    assert WRITES.search('click.echo("x")') and WRITES.search("    print(x)")
    assert WRITES.search("Console(file=sys.stdout)") and not WRITES.search("console.print(t)")
    assert WRITES.search("from rich import print") and WRITES.search("rich.print(x)")


def test_the_damage_summary_of_standard_input_says_a_command_that_runs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`copilot-logs validate <stdin>` would be a shell redirection from a file named stdin>."""
    rows = [("<stdin>", line, "invalid-json", "bad", None, None) for line in range(1, 23)]
    print_damage(rows)
    last = capsys.readouterr().err.splitlines()[-1]
    assert "<stdin>`" not in last
    assert last.endswith("run `copilot-logs validate -` on the same input to list them all")
