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
  commands pipe into jq is skipped where jq is not installed.
- A ```pycon block is a doctest: its `>>>` lines run and what they print must match. A
  ```python block runs and must not raise. Both run in such a folder, where `copilot-parquet/`
  also holds an export of the samples (the folder docs/export.md reads).
- A block that cannot run in the tests (it needs a Copilot CLI, a CI runner, a Spark cluster
  or a live terminal) is preceded by the line `<!-- not run: REASON -->`: it is skipped,
  with its reason, and only its options are checked (below).
- A `$ ` prompt in any other block (an indented one, another language) fails the tests: it
  would be an example that never runs.
- Every `copilot-logs COMMAND ... --option` written anywhere (code blocks, synopses, CI recipes,
  inline code) names a real command and real options of it.
"""

from __future__ import annotations

import doctest
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
import pytest

from copilot_logs.cli import main

from .conftest import PROJECT, SAMPLES

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
    return [
        pytest.param(block, id=block.name)
        for page in PAGES
        for block in blocks(page)
        if block.language == language
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


def shell(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["COLUMNS"] = "80"
    env.pop("NO_COLOR", None)
    return subprocess.run(
        ["bash", "-c", f"set -o pipefail\n{command}"],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        timeout=120,
    )


def check_session(block: Block, cwd: Path) -> None:
    commands = commands_of(block.text)
    assert commands, f"{block.name}: a console block with no command"
    for index, command in enumerate(commands):
        if command.line == "echo $?":
            continue
        if re.search(r"\bjq\b", command.line) and shutil.which("jq") is None:
            pytest.skip("jq is not installed")
        done = shell(command.line, cwd)
        printed = [line.rstrip() for line in done.stdout.rstrip("\n").split("\n")]
        if printed == [""]:
            printed = []
        where = f"{block.name}: $ {command.line}"
        assert matches(command.output, printed), (
            f"{where}\nexpected:\n" + "\n".join(command.output) + "\ngot:\n" + done.stdout
        )
        after = commands[index + 1] if index + 1 < len(commands) else None
        expected_code = int(after.output[0]) if after and after.line == "echo $?" else 0
        assert done.returncode == expected_code, f"{where}: exit {done.returncode}"


@pytest.mark.parametrize("block", all_blocks("console"))
def test_console_examples_run_as_shown(block: Block, workdir: Path) -> None:
    if block.not_run:
        pytest.skip(block.not_run)
    check_session(block, workdir)


# --- python examples --------------------------------------------------------------------------


@pytest.fixture
def pyworkdir(workdir: Path) -> Path:
    """The samples, and their export in copilot-parquet/ (docs/export.md reads it)."""
    done = shell("copilot-logs export copilot-parquet sample_sessions", workdir)
    assert done.returncode == 0, done.stdout
    return workdir


@pytest.mark.parametrize("block", all_blocks("python"))
def test_python_examples_run(block: Block, pyworkdir: Path) -> None:
    if block.not_run:
        pytest.skip(block.not_run)
    exec(compile(block.text, block.name, "exec"), {"__name__": "__docs__"})


@pytest.mark.parametrize("block", all_blocks("pycon"))
def test_pycon_examples_print_what_they_show(block: Block, pyworkdir: Path) -> None:
    if block.not_run:
        pytest.skip(block.not_run)
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
    assert shell(f"{entry[1]} {' '.join(clean)}", workdir).returncode == 0
    done = shell(f"{entry[1]} {' '.join(staged)}", workdir)
    assert done.returncode == 1
    assert "X302 tool-not-completed-in-turn" in done.stdout
