"""The house rules on the render side (issue 13): the commands are thin (their rendering lives
in the render modules) and the small formats (plurals, durations, times, paths) have one home,
``humanize``. Sizes and the click/rich boundary are checked for the whole package in
test_house.py."""

from __future__ import annotations

import os
import re
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from copilot_logs.render import humanize

PACKAGE = Path(__file__).resolve().parent.parent / "copilot_logs"


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _name(path: Path) -> str:
    return path.relative_to(PACKAGE).as_posix()


COMMANDS = [
    path
    for path in sorted((PACKAGE / "cli").glob("*.py"))
    if path.stem not in ("__init__", "options")
]
RENDERING = re.compile(r"\bColumn\(|print_table|markdown_table|github_annotation|\.strftime\(")


@pytest.mark.parametrize("path", COMMANDS, ids=_name)
def test_a_command_lays_out_no_table_of_its_own(path: Path) -> None:
    """Columns, tables, annotations and time formats belong to the renderers."""
    assert RENDERING.findall(path.read_text(encoding="utf-8")) == []


# The shapes the duplicated helpers had: a hand-made plural, a path made relative to the
# working folder, a time formatted to the minute, a "?"-or-count cell.
DUPLICATES = {
    "plural": re.compile(r"""== 1 else ["']s["']"""),
    "relative path": re.compile(r"relative_to\(Path\.cwd\(\)"),
    "minute": re.compile(r"%Y-%m-%d %H:%M\""),
    "unknown count": re.compile(r"""["']\?["'] if \w+ is None else f["']\{\w+:,"""),
}


@pytest.mark.parametrize("shape", DUPLICATES)
def test_a_small_format_is_written_once_in_humanize(shape: str) -> None:
    found = [
        _name(path) for path in _modules() if DUPLICATES[shape].search(path.read_text("utf-8"))
    ]
    assert found == ["render/humanize.py"]


def test_plural_says_one_and_many() -> None:
    assert humanize.plural(1, "file") == "1 file"
    assert humanize.plural(0, "file") == "0 files"
    assert humanize.plural(2, "failing finding") == "2 failing findings"
    assert humanize.plural(1234, "LLM call") == "1234 LLM calls"
    assert humanize.plural(1234, "LLM call", grouped=True) == "1,234 LLM calls"


@pytest.mark.parametrize(
    ("ms", "human", "took", "offset"),
    [
        (None, "", None, None),
        (250, "0.2s", "250ms", "+0.2s"),
        (14_200, "14.2s", "14.2s", "+14.2s"),
        (185_000, "3m05s", "3m05s", "+3m05s"),
        (7_800_000, "2h10m", "2h10m", "+2h10m"),
        (-14_200, "-14.2s", "-14.2s", "-14.2s"),
    ],
)
def test_durations_read_as_people_write_them(
    ms: int | None, human: str, took: str | None, offset: str | None
) -> None:
    assert humanize.human_duration(ms) == human
    if ms is not None:
        assert humanize.took_text(ms) == took
        assert humanize.signed_offset(ms) == offset


def test_times_to_the_minute() -> None:
    moment = datetime(2026, 8, 1, 23, 59, 30, tzinfo=timezone(timedelta(hours=2)))
    assert humanize.minute(moment) == "2026-08-01 23:59"
    assert humanize.minute("2026-08-01") == ""
    local = moment.astimezone()
    assert humanize.local_time(moment) == f"{local:%Y-%m-%d %H:%M}"
    assert humanize.local_time(moment.astimezone(UTC)) == humanize.local_time(moment)
    assert humanize.local_time(None) == ""


def test_unknown_figures_are_a_question_mark_never_zero() -> None:
    assert humanize.count_or_unknown(None) == "?"
    assert humanize.count_or_unknown(0) == "0"
    assert humanize.count_or_unknown(1234567) == "1,234,567"
    assert humanize.decimal_or_unknown(None) == "?"
    assert humanize.decimal_or_unknown(1234.5) == "1,234.50"


def test_short_id_and_yes_no() -> None:
    assert humanize.short_id("3fa85f64-5717-4562") == "3fa85f64"
    assert humanize.short_id("ab\x1bc") == "ab\\x1bc"
    assert humanize.short_id(None) == ""
    assert [humanize.yes_no(v) for v in (True, False, None)] == ["yes", "no", ""]


def test_a_path_under_the_working_folder_is_shown_relative(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inside = tmp_path / "logs" / "events.jsonl"
    inside.parent.mkdir()
    inside.write_text("")
    monkeypatch.chdir(tmp_path)
    assert humanize.display_path(str(inside)) == "logs/events.jsonl"
    outside = tmp_path.parent / "elsewhere.jsonl"
    assert humanize.display_path(str(outside)) == str(outside)
    assert humanize.display_path("<stdin>") == "<stdin>"
    assert humanize.display_path(os.path.join("logs", "events.jsonl")) == "logs/events.jsonl"
