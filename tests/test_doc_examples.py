"""The examples of README.md and docs/*.md run, so they cannot drift from the CLI; the links
between the pages resolve.

The conventions the pages follow (and this file enforces):

- A fenced ```console block is a shell session. A line starting with `$ ` is a command (a line
  ending in `\\` goes on on the next one); the lines after it, up to the next `$ `, are what it
  prints, stdout and stderr together (trailing spaces ignored). A line `...` stands for any
  number of lines. A `$ echo $?` after a command checks its exit code (its output line is the
  code); without one, the command must exit 0. Each block runs in bash in a fresh temporary
  folder holding a copy of sample_sessions/, with copilot-logs on PATH, TZ=UTC, COLUMNS=80
  (a command may set another), an empty COPILOT_HOME and a private cache. A block whose
  commands pipe into jq is skipped where jq is not installed. The fast tier runs each
  `copilot-logs` of a command line in-process (click's runner), and the rest of its pipeline
  (`| jq`, `| grep`, `printf ... |`) in bash; tier `process` runs the whole line in bash.
- A ```pycon block is a doctest: its `>>>` lines run and what they print must match. A
  ```python block runs and must not raise. Both run in such a folder, where `copilot-parquet/`
  also holds an export of the samples (the folder docs/export.md reads).
- A block that cannot run in the tests (it needs a Copilot CLI, a CI runner, a Spark cluster
  or a live terminal) is preceded by the line `<!-- not run: REASON -->`: it is left out,
  and only its options are checked (below).
- A `$ ` prompt in any other block (an indented one, another language) fails the tests: it
  would be an example that never runs.
- Every `copilot-logs COMMAND ... --option` written anywhere (code blocks, synopses, CI recipes,
  inline code) names a real command and real options of it.
"""

from __future__ import annotations

import doctest
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from copilot_logs.cli import main

from .conftest import NO_JQ, PROJECT, SAMPLES

PAGES = [PROJECT / "README.md", *sorted((PROJECT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```([\w-]*)\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
NOT_RUN = re.compile(r"^<!-- not run: (.+) -->$")


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    language: str
    text: str
    not_run: str | None

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(PROJECT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    text = page.read_text(encoding="utf-8")
    found = []
    for match in FENCE.finditer(text):
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        marker = NOT_RUN.match(before)
        line = text.count("\n", 0, match.start()) + 1
        found.append(Block(page, line, match[1], match[2], marker[1] if marker else None))
    return found


def all_blocks(language: str) -> list[Any]:
    """The blocks of ``language`` that run (a ``not run`` one is only checked for options)."""
    return [
        pytest.param(block, id=block.name)
        for page in PAGES
        for block in blocks(page)
        if block.language == language and not block.not_run
    ]


def prose(page: Path) -> str:
    """The page without its fenced blocks."""
    return FENCE.sub("", page.read_text(encoding="utf-8"))


# --- console blocks ---------------------------------------------------------------------------


@dataclass
class Command:
    line: str
    output: list[str]


def commands_of(text: str) -> list[Command]:
    found: list[Command] = []
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    index = 0
    while index < len(lines):
        line = lines[index]
        assert line.startswith("$ "), f"output before any command: {line!r}"
        command = line[2:]
        while command.endswith("\\"):
            index += 1
            command += "\n" + lines[index]
        index += 1
        output = []
        while index < len(lines) and not lines[index].startswith("$ "):
            output.append(lines[index].rstrip())
            index += 1
        while output and output[-1] == "":
            output.pop()
        found.append(Command(command, output))
    return found


def matches(expected: list[str], actual: list[str]) -> bool:
    """`actual` equals `expected`, where a line `...` stands for any number of lines."""
    if not expected:
        return not actual
    if expected[0] == "...":
        rest = expected[1:]
        return any(matches(rest, actual[start:]) for start in range(len(actual) + 1))
    return bool(actual) and actual[0] == expected[0] and matches(expected[1:], actual[1:])


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder holding a copy of sample_sessions/, as the examples expect."""
    shutil.copytree(SAMPLES, tmp_path / "sample_sessions")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TZ", "UTC")
    return tmp_path


Run = Callable[[str, Path], tuple[str, int]]
"""How a command line runs: its output (stdout and stderr together) and exit code."""


def shell_environment() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["COLUMNS"] = "80"
    env.pop("NO_COLOR", None)
    return env


def shell(command: str, cwd: Path, stdin: str | None = None) -> tuple[str, int]:
    """The command line run in bash (pipefail), copilot-logs on PATH."""
    done = subprocess.run(
        ["bash", "-c", f"set -o pipefail\n{command}"],
        cwd=cwd,
        env=shell_environment(),
        input=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=None if stdin is not None else subprocess.DEVNULL,
        text=True,
        timeout=120,
    )
    return done.stdout, done.returncode


def pipeline(command: str) -> list[str]:
    """The commands of a pipeline: ``command`` split at each ``|`` outside quotes."""
    parts, current, quote, index = [], "", "", 0
    while index < len(command):
        char = command[index]
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "\\":
            current += command[index : index + 2]
            index += 2
            continue
        elif char == "|" and command[index + 1 : index + 2] != "|":
            parts.append(current)
            current, index = "", index + 1
            continue
        current += char
        index += 1
    return [*parts, current]


REDIRECTS = {"2>/dev/null", "2>&1", ">/dev/null"}


def _joined_redirects(words: list[str]) -> list[str]:
    """``words`` with a stdout redirect and its target as one word (``> out`` -> ``>out``)."""
    joined: list[str] = []
    for word in words:
        if joined and joined[-1] == ">":
            joined[-1] = f">{word}"
        else:
            joined.append(word)
    return joined


def in_process(command: str, cwd: Path) -> tuple[str, int]:
    """The command line as bash runs it, its ``copilot-logs`` in this process (click's runner:
    no Python starts) and the other commands of its pipeline in bash. The line holds one
    ``copilot-logs`` at most, after ``NAME=value`` assignments, redirected only by
    ``2>/dev/null``, ``2>&1``, ``>/dev/null`` or ``> FILE``: an example written otherwise fails
    here."""
    parts = pipeline(re.sub(r"\\\n\s*", " ", command))  # a line continued with \\ is one
    words = [shlex.split(part, comments=True) for part in parts]
    ours = [i for i, part in enumerate(words) if "copilot-logs" in part]
    if not ours:
        return shell(command, cwd)
    at = ours[0]
    assignments = [w for w in words[at] if re.match(r"^\w+=", w)]
    rest = _joined_redirects(words[at][len(assignments) :])
    into = [w[1:] for w in rest if w.startswith(">") and w != ">/dev/null"]
    rest = [w for w in rest if not (w.startswith(">") and w != ">/dev/null")]
    readable = (
        len(ours) == 1
        and not re.search(r"&&|;|\$\(|`", command)
        and rest[:1] == ["copilot-logs"]
        and not any(re.match(r"^\d*[<>]", w) and w not in REDIRECTS for w in rest)
    )
    assert readable, f"cannot run in-process (see in_process): $ {command}"
    redirects = [w for w in rest if w in REDIRECTS]
    args = [w for w in rest[1:] if w not in REDIRECTS]
    printed, codes = "", []
    stdin = None
    if at > 0:
        stdin, code = shell(" | ".join(parts[:at]), cwd)
        codes.append(code)
    env: dict[str, str | None] = {"COLUMNS": "80", "NO_COLOR": None}
    for assignment in assignments:
        name, _, value = assignment.partition("=")
        env[name] = value.replace("$PWD", str(cwd))
    result = CliRunner().invoke(main, args, input=stdin, env=env, prog_name="copilot-logs")
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    codes.append(result.exit_code)
    out, err = result.stdout, result.stderr
    if redirects == ["2>&1", ">/dev/null"]:
        out, err = err, ""
    elif "2>&1" in redirects:
        out, err = result.output, ""
    elif "2>/dev/null" in redirects:
        err = ""
    if ">/dev/null" in redirects and redirects != ["2>&1", ">/dev/null"]:
        out = ""
    printed += err
    if into:  # `> FILE`: what it prints goes to that file, in the example's folder
        (cwd / into[-1]).write_text(out)
        out = ""
    if at + 1 < len(parts):
        out, code = shell(" | ".join(parts[at + 1 :]), cwd, stdin=out)
        codes.append(code)
    failed = [code for code in codes if code]
    return printed + out, failed[-1] if failed else 0


def check_session(block: Block, cwd: Path, run: Run) -> None:
    commands = commands_of(block.text)
    assert commands, f"{block.name}: a console block with no command"
    for index, command in enumerate(commands):
        if command.line == "echo $?":
            continue
        if re.search(r"\bjq\b", command.line) and shutil.which("jq") is None:
            pytest.skip(NO_JQ)
        output, code = run(command.line, cwd)
        printed = [line.rstrip() for line in output.rstrip("\n").split("\n")]
        if printed == [""]:
            printed = []
        where = f"{block.name}: $ {command.line}"
        assert matches(command.output, printed), (
            f"{where}\nexpected:\n" + "\n".join(command.output) + "\ngot:\n" + output
        )
        after = commands[index + 1] if index + 1 < len(commands) else None
        expected_code = int(after.output[0]) if after and after.line == "echo $?" else 0
        assert code == expected_code, f"{where}: exit {code}"


@pytest.mark.parametrize("block", all_blocks("console"))
def test_console_examples_run_as_shown(block: Block, workdir: Path) -> None:
    check_session(block, workdir, in_process)


@pytest.mark.process
@pytest.mark.parametrize("block", all_blocks("console"))
def test_console_examples_run_as_shown_in_a_shell(block: Block, workdir: Path) -> None:
    check_session(block, workdir, shell)


# --- python examples --------------------------------------------------------------------------


@pytest.fixture
def pyworkdir(workdir: Path) -> Path:
    """The samples, and their export in copilot-parquet/ (docs/export.md reads it)."""
    output, code = in_process("copilot-logs export copilot-parquet sample_sessions", workdir)
    assert code == 0, output
    return workdir


@pytest.mark.parametrize("block", all_blocks("python"))
def test_python_examples_run(block: Block, pyworkdir: Path) -> None:
    exec(compile(block.text, block.name, "exec"), {"__name__": "__docs__"})


@pytest.mark.parametrize("block", all_blocks("pycon"))
def test_pycon_examples_print_what_they_show(block: Block, pyworkdir: Path) -> None:
    test = doctest.DocTestParser().get_doctest(
        block.text, {"__name__": "__docs__"}, block.name, str(block.page), block.line
    )
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    runner.run(test)
    assert test.examples, f"{block.name}: no example"
    assert runner.summarize(verbose=False).failed == 0, block.name


# --- the conventions hold ---------------------------------------------------------------------


def test_every_prompt_is_in_a_block_that_runs() -> None:
    for page in PAGES:
        indented = re.findall(r"^ {4,}\$ .*$", prose(page), re.MULTILINE)
        assert not indented, f"{page.name}: a `$ ` example outside a console block: {indented}"
        for block in blocks(page):
            if block.language in ("console", "pycon") or block.not_run:
                continue
            prompts = re.findall(r"^\s*\$ .*$", block.text, re.MULTILINE)
            assert not prompts, f"{block.name}: `$ ` in a ```{block.language} block: {prompts}"


def test_the_examples_cover_every_command() -> None:
    shown = set()
    for page in PAGES:
        for block in blocks(page):
            if block.language == "console" and not block.not_run:
                shown |= set(re.findall(r"^\$ (?:\S+=\S+ )*copilot-logs (\w+)", block.text, re.M))
    assert shown >= set(main.list_commands(click.Context(main)))


def invocations(text: str) -> list[str]:
    """Each `copilot-logs ...` written in `text`, up to the end of its shell command (a
    synopsis' continuation lines, which start with spaces and `[`, included)."""
    joined = re.sub(r"\\\n\s*", " ", text)
    joined = re.sub(r"\n\s+(?=\[)", " ", joined)
    found = []
    for match in re.finditer(r"(?:^|(?<=[\s`$(/]))copilot-logs ([^\n`]*)", joined):
        found.append(re.split(r" \| | >|&&| #|;|\)", match[1])[0])
    return found


def check_invocation(words: str, where: str) -> None:
    tokens = words.split()
    command: click.Command = main
    while tokens and isinstance(command, click.Group):
        sub = command.get_command(click.Context(command), tokens[0])
        if sub is None:
            break
        tokens.pop(0)
        command = sub
    if command is main and tokens and not tokens[0].startswith("-"):
        return  # prose: "copilot-logs reads ...", not a command line
    known = {"--help"} | {
        name for param in command.params for name in (*param.opts, *param.secondary_opts)
    }
    for option in re.findall(r"(?<![\w-])(--?[a-zA-Z][\w-]*)", " ".join(tokens)):
        assert option in known, f"{where}: `{command.name}` has no option {option}"


def test_every_command_line_names_real_commands_and_options() -> None:
    checked = 0
    for page in PAGES:
        texts = [block.text for block in blocks(page)]
        texts += re.findall(r"`(copilot-logs [^`]+)`", prose(page))
        for text in texts:
            for words in invocations(text):
                check_invocation(words, page.name)
                checked += 1
    assert checked > 100


def test_the_option_check_catches_a_wrong_option() -> None:
    (words,) = invocations("$ copilot-logs count --totl sample_sessions | head")
    with pytest.raises(AssertionError, match="--totl"):
        check_invocation(words, "here")
    (words,) = invocations("copilot-logs cache info --format json > x")
    check_invocation(words, "here")


def test_the_output_matcher() -> None:
    assert matches(["a", "...", "d"], ["a", "b", "c", "d"])
    assert matches(["a", "..."], ["a"])
    assert not matches(["a", "...", "d"], ["a", "b"])
    assert not matches(["a"], ["a", "b"])


# --- links ------------------------------------------------------------------------------------


def github_slugs(page: Path) -> set[str]:
    """The anchors GitHub gives the headings of a page (a repeated one gets -1, -2, ...)."""
    seen: dict[str, int] = {}
    slugs = set()
    for heading in re.findall(r"^#{1,6} (.+)$", prose(page), re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        slugs.add(slug if count == 0 else f"{slug}-{count}")
    return slugs


def links(page: Path) -> list[str]:
    text = re.sub(r"`[^`\n]*`", "", prose(page))
    return re.findall(r"\]\(([^)\s]+)\)", text)


def test_links_between_pages_resolve() -> None:
    checked = 0
    for page in PAGES:
        for target in links(page):
            if re.match(r"[a-z]+:", target):
                continue  # https: and the like
            path_part, _, anchor = target.partition("#")
            path = (page.parent / path_part).resolve() if path_part else page
            assert path.is_relative_to(PROJECT), f"{page.name}: {target} leaves the project"
            assert path.exists(), f"{page.name}: {target} does not exist"
            if anchor:
                assert path.suffix == ".md", f"{page.name}: {target}"
                assert anchor in github_slugs(path), f"{page.name}: no anchor {target}"
            checked += 1
    assert checked > 30


def test_every_docs_page_is_linked_from_the_readme_or_the_docs() -> None:
    linked = {
        (page.parent / target.partition("#")[0]).resolve()
        for page in PAGES
        for target in links(page)
        if not re.match(r"[a-z]+:", target) and target.partition("#")[0]
    }
    for page in PAGES[1:]:
        assert page in linked, f"{page.name} is linked from no page"


def test_no_page_points_outside_the_clone() -> None:
    for page in [*PAGES, PROJECT / "sample_sessions" / "README.md"]:
        assert "../shared" not in page.read_text(encoding="utf-8"), page.name


# --- the README stays short; exit codes are documented once -----------------------------------


def test_the_readme_is_read_in_five_minutes() -> None:
    assert len((PROJECT / "README.md").read_bytes()) < 15_000


def test_exit_codes_are_documented_once_and_linked() -> None:
    for page in PAGES[1:]:
        text = prose(page)
        assert not re.search(r"^#+ .*exit codes", text, re.MULTILINE | re.IGNORECASE), page.name
    for name in main.list_commands(click.Context(main)):
        page = PROJECT / "docs" / f"{name}.md"
        assert "../README.md#exit-codes" in page.read_text(encoding="utf-8"), page.name


# --- the pre-commit hook of docs/ci.md works as pre-commit runs it ----------------------------


def test_the_pre_commit_hook_runs_on_the_staged_logs(workdir: Path) -> None:
    """pre-commit runs `entry` with the staged files that match `files` as arguments."""
    (config,) = [b for b in blocks(PROJECT / "docs" / "ci.md") if "repo: local" in b.text]
    entry = re.search(r"^\s+entry: (.+)$", config.text, re.M)
    files = re.search(r"^\s+files: (.+)$", config.text, re.M)
    assert entry and files
    logs = sorted(str(p.relative_to(workdir)) for p in workdir.rglob("*") if p.is_file())
    staged = [log for log in logs if re.search(files[1], log)]
    assert len(staged) == 11  # every log, not README.md or expected.json
    clean = [log for log in staged if any(f"/{id}" in log for id in ("a1f0c3e2", "b2e1d4f3"))]
    assert len(clean) == 2
    assert in_process(f"{entry[1]} {' '.join(clean)}", workdir)[1] == 0
    output, code = in_process(f"{entry[1]} {' '.join(staged)}", workdir)
    assert code == 1
    assert "X302 tool-not-completed-in-turn" in output
