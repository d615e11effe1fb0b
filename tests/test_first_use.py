"""What a newcomer meets first (issue 24): a bare command, the help's pointers, the hints of
an error, shell completion, the damage warnings of every command, ``-V``."""

from __future__ import annotations

import json
import re
import shutil
import tomllib
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from copilot_logs.cli import main

from .conftest import PROJECT, SAMPLES

DAMAGED_SAMPLE = SAMPLES / "4bbad07c-ef57-4068-a9ba-a4b5c6d7e8f9" / "events.jsonl"
DAMAGED_LINES = {13, 18, 19, 20, 26, 27, 31, 33, 35, 42}
"""The damaged lines of that sample, found by hand (docs/damaged-logs.md lists them); line 42
holds two problems."""
DAMAGED_SAMPLE_LINES = len(DAMAGED_LINES)


def _invoke(*args: str, **kwargs: object) -> click.testing.Result:
    return CliRunner().invoke(main, list(args), prog_name="copilot-logs", **kwargs)  # type: ignore[arg-type]


def _commands() -> list[str]:
    return main.list_commands(click.Context(main))


# --- a bare command shows its help (item 2) ---------------------------------------------------


@pytest.mark.parametrize(
    ("args", "listed"), [((), ["count", "watch", "Options:"]), (("cache",), ["info", "clear"])]
)
def test_a_bare_group_shows_its_help_as_click_does(
    args: tuple[str, ...], listed: list[str]
) -> None:
    result = _invoke(*args)
    assert result.exit_code == 2  # click's code for a group given no command
    assert "Error" not in result.stderr
    assert "\\n" not in result.stderr  # the help as lines, not one escaped line
    lines = result.stderr.splitlines()
    assert lines[0].startswith(f"Usage: copilot-logs {' '.join(args)}".rstrip())
    assert "Commands:" in lines
    for word in listed:
        assert any(line.strip().startswith(word) for line in lines), word


# --- the help's pointers (item 9) -------------------------------------------------------------


def _all_help() -> dict[str, str]:
    helps = {"": _invoke("--help").stdout}
    for name in _commands():
        helps[name] = _invoke(name, "--help").stdout
    for sub in ("info", "clear"):
        helps[f"cache {sub}"] = _invoke("cache", sub, "--help").stdout
    return helps


KNOWN_ADDRESSES = {
    "https://json.schemastore.org/sarif-2.1.0.json",  # SARIF's own schema, in every report
    "http://www.w3.org/2000/svg",  # the SVG namespace
    "https://opentelemetry.io/schemas/1.44.0",  # the semantic conventions otel's spans follow
}
"""The only web addresses the package may hold: the project has no public address yet."""


def test_the_help_links_no_address_and_names_only_docs_pages_that_exist() -> None:
    """The project has no public address: no help links one, and a docs page a help or an
    error names (``docs/NAME.md`` of the source) exists (issue 33: every link was dead)."""
    named = []
    for name, text in _all_help().items():
        assert "README" not in text, name
        assert not re.findall(r"https?://\S+", text), name
        for page in re.findall(r"\bdocs/[\w-]+\.md", text):
            assert (PROJECT / page).is_file(), (name, page)
            named.append(name)
    assert {"cache", "export", "doctor"} <= set(named)
    for module in (PROJECT / "copilot_logs").rglob("*.py"):
        source = module.read_text()
        for page in re.findall(r"\bdocs/[\w-]+\.md", source):
            assert (PROJECT / page).is_file(), (module, page)
        addresses = set(re.findall(r"https?://[^\s\"'`)]+", source))
        assert addresses <= KNOWN_ADDRESSES, module
    assert "urls" not in tomllib.loads((PROJECT / "pyproject.toml").read_text())["project"]


def test_watch_does_not_offer_standard_input_it_refuses() -> None:
    usage = {name: _invoke(name, "--help").stdout.splitlines()[0] for name in _commands()}
    assert "|-]" not in usage["watch"]
    assert "[SESSION|PREFIX|PATH]..." in usage["watch"]
    assert "|-]" in usage["count"]  # the others read `-`
    assert _invoke("watch", "-").exit_code == 2


def test_the_hint_after_a_missing_session_repeats_the_root(tmp_path: Path) -> None:
    root = tmp_path / "my sessions"
    shutil.copytree(SAMPLES, root)
    result = _invoke("count", "--root", str(root), "zzz")
    assert result.exit_code == 2
    assert f"run `copilot-logs sessions --root '{root}'` to list the sessions" in result.stderr
    without = _invoke("count", "zzz")
    assert "run `copilot-logs sessions` to list the sessions" in without.stderr


def test_a_number_past_64_bits_is_shown_as_the_integer_the_log_holds(tmp_path: Path) -> None:
    lines = DAMAGED_SAMPLE.parent.with_name("c3d2e5f4-6d7f-4e80-a192-2c3d4e5f6071")
    events = [json.loads(line) for line in (lines / "events.jsonl").read_text().splitlines()]
    message = next(e for e in events if e["type"] == "assistant.message")
    message["data"]["outputTokens"] = 2**64
    log = tmp_path / "big.jsonl"
    log.write_text("".join(json.dumps(e) + "\n" for e in events))
    result = _invoke("count", str(log))
    assert "data.outputTokens (18446744073709551616)" in result.stderr
    assert "e+19" not in result.stderr


def test_dash_capital_v_prints_the_version() -> None:
    assert _invoke("-V").stdout == _invoke("--version").stdout
    assert _invoke("-V").stdout.startswith("copilot-logs, version ")


# --- shell completion (item 9) ----------------------------------------------------------------


def _complete(words: str, env: dict[str, str] | None = None) -> list[str]:
    """What bash would offer for the last word of ``words``, through click's own mechanism
    (the script `_COPILOT_LOGS_COMPLETE=bash_source copilot-logs` installs calls this)."""
    parts = words.split(" ")
    result = _invoke(
        env={
            "_COPILOT_LOGS_COMPLETE": "bash_complete",
            "COMP_WORDS": words,
            "COMP_CWORD": str(len(parts) - 1),
            **(env or {}),
        }
    )
    assert result.exit_code == 0, result.output
    return result.stdout.splitlines()


def test_session_ids_complete_under_the_root_given(tmp_path: Path) -> None:
    assert _complete(f"copilot-logs timeline --root {SAMPLES} 4b") == [
        "plain,4bbad07c-ef57-4068-a9ba-a4b5c6d7e8f9"
    ]
    # Both layouts; every id that starts with what was typed, in order.
    assert _complete(f"copilot-logs count --root {SAMPLES} d") == [
        "plain,d4c3f605-7e80-4f91-b2a3-3d4e5f607182"
    ]
    assert len(_complete(f"copilot-logs count --root {SAMPLES} ")) == 11
    # No id matches: the shell completes file names.
    assert _complete(f"copilot-logs count --root {SAMPLES} ./sam") == ["file,./sam"]
    # The default root: $COPILOT_HOME/session-state.
    home = tmp_path / "home"
    shutil.copytree(SAMPLES, home / "session-state")
    assert _complete("copilot-logs watch a1", {"COPILOT_HOME": str(home)}) == [
        "plain,a1f0c3e2-4b5d-4c6e-8f70-0a1b2c3d4e5f"
    ]


def test_commands_and_options_complete() -> None:
    assert "plain,timeline" in _complete("copilot-logs ti")
    assert "plain,--quiet" in _complete("copilot-logs count --q")


# --- damage warnings: --quiet, and one line when there are many (item 8) ----------------------


def _damaged_root(tmp_path: Path, copies: int) -> Path:
    root = tmp_path / "session-state"
    for index in range(copies):
        folder = root / f"damaged-{index}"
        folder.mkdir(parents=True)
        shutil.copy(DAMAGED_SAMPLE, folder / "events.jsonl")
    return root


@pytest.mark.parametrize(
    "command", [["count"], ["count", "--total"], ["sessions"], ["usage"], ["audit"], ["timeline"]]
)
def test_quiet_silences_the_damage_warnings(tmp_path: Path, command: list[str]) -> None:
    root = _damaged_root(tmp_path, 1)
    loud = _invoke(*command, "--root", str(root))
    assert loud.stderr.count("warning: ") == DAMAGED_SAMPLE_LINES + 1  # one line holds two
    quiet = _invoke(*command, "--root", str(root), "--quiet")
    assert "warning" not in quiet.stderr
    assert quiet.stdout == loud.stdout and quiet.exit_code == loud.exit_code


def test_many_damaged_files_make_one_summary_line(tmp_path: Path) -> None:
    root = _damaged_root(tmp_path, 3)
    for command in (["count"], ["count", "--total"], ["sessions"]):
        result = _invoke(*command, "--root", str(root))
        warnings = [line for line in result.stderr.splitlines() if line.startswith("warning")]
        assert warnings == [
            f"warning: {3 * DAMAGED_SAMPLE_LINES} damaged lines in 3 files "
            f"({3 * (DAMAGED_SAMPLE_LINES + 1)} problems), each read as far as it could be; run "
            "`copilot-logs validate --select E1` on the same logs to list them "
            "(--quiet: no damage warnings)"
        ], command
    # What the summary points to lists every one of them.
    listed = _invoke("validate", "--select", "E1", "--root", str(root)).stdout
    for index in range(3):
        found = re.findall(rf"damaged-{index}/events\.jsonl:(\d+): E1", listed)
        assert {int(line) for line in found} >= DAMAGED_LINES


def test_two_damaged_files_with_few_problems_are_still_listed(tmp_path: Path) -> None:
    lines = DAMAGED_SAMPLE.read_bytes().splitlines(keepends=True)
    root = tmp_path / "session-state"
    for name in ("a", "b"):
        (root / name).mkdir(parents=True)
        # Up to line 18: two damaged lines each (13 truncated, 18 blank).
        (root / name / "events.jsonl").write_bytes(b"".join(lines[:18]))
    result = _invoke("count", "--root", str(root))
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning")]
    assert len(warnings) == 4
    assert all(re.match(r"warning: .*events\.jsonl:1[38]: ", w) for w in warnings)


# --- tables on narrow and wide terminals (item 5) ---------------------------------------------


def _headers(line: str) -> list[str]:
    return [name for name in re.split(r"\s{2,}", line.strip()) if name]


@pytest.mark.parametrize("command", [["usage"], ["sessions"], ["count"], ["audit"]])
def test_a_narrow_table_names_the_columns_it_left_out(command: list[str]) -> None:
    wide = _invoke(*command, str(SAMPLES), env={"COLUMNS": "1000"}).stdout.splitlines()
    every = _headers(wide[0])
    assert not any("hidden" in line for line in wide)
    narrow = _invoke(*command, str(SAMPLES), env={"COLUMNS": "80"}).stdout
    note = re.search(
        r"(\d+) columns? hidden to fit 80 columns: (.*?)\. --format json", narrow, re.S
    )
    assert note is not None, narrow
    hidden = [name.strip() for name in note[2].replace("\n", " ").split(", ")]
    shown = _headers(narrow.splitlines()[0])
    assert int(note[1]) == len(hidden) > 0
    assert sorted(shown + hidden) == sorted(every)
    assert [name for name in every if name in shown] == shown  # the order kept


def test_a_table_with_room_cuts_no_text(tmp_path: Path) -> None:
    repository = "an-organisation-with-a-long-name/a-repository-with-a-long-name"
    source = SAMPLES / "a1f0c3e2-4b5d-4c6e-8f70-0a1b2c3d4e5f" / "events.jsonl"
    events = [json.loads(line) for line in source.read_text().splitlines()]
    events[0]["data"]["context"]["repository"] = repository
    (tmp_path / "s.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    wide = _invoke("sessions", str(tmp_path / "s.jsonl"), env={"COLUMNS": "250"}).stdout
    assert repository in wide and "…" not in wide
    narrow = _invoke("sessions", str(tmp_path / "s.jsonl"), env={"COLUMNS": "120"}).stdout
    assert repository not in narrow  # no room: cut, and said so
    assert "hidden to fit 120 columns" in narrow or "…" in narrow
