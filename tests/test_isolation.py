"""One session never hides another: when a command's core function raises on one session's
events, that session is reported (status unreadable, finding E125, a warning naming the file,
exit code 3) and every other session is still listed, counted and judged."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import polars as pl
import pytest
from click.testing import CliRunner

from copilot_logs.cli import main
from copilot_logs.commands import audit, count, sessions, timeline, usage, validate
from copilot_logs.errors import ExitCode
from copilot_logs.ingest.logfile import Source
from copilot_logs.ingest.reader import ReadResult, read_source
from copilot_logs.store.collect import map_batches

from .conftest import SAMPLES

POISONED = "c3d2e5f4-6d7f-4e80-a192-2c3d4e5f6071"
"""A bundled session the injected fault fails on."""


def failing(original: Callable[..., Any]) -> Callable[..., Any]:
    """``original``, except that it raises on any batch holding the poisoned session (a
    stand-in for content that breaks a core function)."""

    def core(result: ReadResult, *args: Any, **kwargs: Any) -> Any:
        if POISONED in result.events["session_id"].to_list():
            raise ValueError("a value no rule foresaw")
        return original(result, *args, **kwargs)

    return core


def events_per_file(result: ReadResult) -> dict[str, int]:
    if POISONED in result.events["session_id"].to_list():
        raise KeyError("boom")
    return dict(result.events.group_by("file").len().iter_rows())


def test_a_batch_that_raises_is_redone_file_by_file() -> None:
    sources = [
        Source(path, path.parent.name if path.name == "events.jsonl" else path.stem)
        for path in sorted(SAMPLES.rglob("*.jsonl"))
    ]
    done = list(map_batches(sources, events_per_file))
    counted: dict[str, int] = {}
    for batch in done:
        counted.update(batch.value)
    poisoned = str(SAMPLES / POISONED / "events.jsonl")
    expected = {s.name: read_source(s).events.height for s in sources if s.name != poisoned}
    assert counted == expected  # every other file, each whole
    diagnostics = pl.concat([batch.diagnostics for batch in done])
    failed = diagnostics.filter(pl.col("kind") == "unprocessable")
    assert failed.select("file", "session_id").rows() == [(poisoned, POISONED)]
    assert "KeyError: 'boom'" in failed["message"][0]
    assert all(poisoned not in batch.files_with_events for batch in done)


CORES = {
    "sessions": (sessions, "summarize"),
    "count": (count, "count"),
    "timeline": (timeline, "timeline"),
    "audit": (audit, "facts"),
    "validate": (validate, "check_batch"),
    "usage": (usage, "session_usage"),
}


def run(command: str, root: Path) -> Any:
    result = CliRunner().invoke(main, [command, str(root), "--format", "json"])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result


def rows(command: str, output: str) -> list[dict[str, Any]]:
    data = orjson.loads(output)
    if command == "validate":
        return list(data["findings"])
    return list(data["rows"] if command == "usage" else data)


def key(row: dict[str, Any]) -> str:
    return str(row.get("session_id") or row.get("file"))


@pytest.mark.parametrize("command", sorted(CORES))
def test_a_session_a_command_fails_on_hides_no_other(
    command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "sessions"
    shutil.copytree(SAMPLES, root)
    alone = run(command, root)
    module, name = CORES[command]
    monkeypatch.setattr(module, name, failing(getattr(module, name)))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "other-cache"))

    result = run(command, root)

    # audit's failing verdicts (the bundled autopilot runs have some) outrank it, as documented
    failed_gate = command == "audit" and alone.exit_code == ExitCode.FAILED
    assert result.exit_code == (ExitCode.FAILED if failed_gate else ExitCode.UNREADABLE)
    poisoned = str(root / POISONED / "events.jsonl")
    before = [row for row in rows(command, alone.stdout) if POISONED not in key(row)]
    after = rows(command, result.stdout)
    if command == "validate":
        assert [row for row in after if row["code"] != "E125"] == before
        assert [(row["file"], row["code"]) for row in after if row["code"] == "E125"] == [
            (poisoned, "E125")
        ]
        return
    assert [row for row in after if POISONED not in key(row)] == before
    warnings = [x for x in result.stderr.splitlines() if "unprocessable" in x]
    assert len(warnings) == 1 and warnings[0].startswith(f"warning: {poisoned}:0: unprocessable:")
    assert "ValueError: a value no rule foresaw" in warnings[0]
    if command == "sessions":
        listed = [row for row in after if row["session_id"] == POISONED]
        assert [row["status"] for row in listed] == ["unreadable"]


def test_a_file_whose_reading_raises_is_left_out_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    from copilot_logs.store import collect

    original = collect.read_many

    def read_many(jobs: Any) -> Any:
        if any(source.session_hint == POISONED for source, _ in jobs):
            raise RecursionError("a reader fault")
        return original(jobs)

    monkeypatch.setattr(collect, "read_many", read_many)
    sources = [
        Source(SAMPLES / name / "events.jsonl", name)
        for name in sorted(p.name for p in SAMPLES.iterdir() if (p / "events.jsonl").is_file())
    ]
    done = list(map_batches(sources, events_per_file_unpoisoned, use_cache=True))
    counted: dict[str, int] = {}
    for batch in done:
        counted.update(batch.value)
    poisoned = str(SAMPLES / POISONED / "events.jsonl")
    assert counted == {s.name: read_source(s).events.height for s in sources if s.name != poisoned}
    diagnostics = pl.concat([batch.diagnostics for batch in done])
    failed = diagnostics.filter(pl.col("kind") == "unprocessable")
    assert failed.select("file", "line").rows() == [(poisoned, 0)]
    assert "RecursionError: a reader fault" in failed["message"][0]


def events_per_file_unpoisoned(result: ReadResult) -> dict[str, int]:
    return dict(result.events.group_by("file").len().iter_rows())


def test_count_total_leaves_out_only_the_session_it_fails_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from copilot_logs.commands import count_total

    root = tmp_path / "sessions"
    shutil.copytree(SAMPLES, root)
    without = tmp_path / "without"
    shutil.copytree(SAMPLES, without, ignore=shutil.ignore_patterns(POISONED))
    expected = CliRunner().invoke(main, ["count", "--total", str(without)])
    original = count_total.count_file

    def count_file(source: Source, **kwargs: Any) -> Any:
        if source.session_hint == POISONED:
            raise ValueError("a value no rule foresaw")
        return original(source, **kwargs)

    monkeypatch.setattr(count_total, "count_file", count_file)
    result = CliRunner().invoke(main, ["count", "--total", "--no-cache", str(root)])
    assert result.exit_code == ExitCode.UNREADABLE
    assert int(result.stdout) == int(expected.stdout)
    poisoned = root / POISONED / "events.jsonl"
    assert [x for x in result.stderr.splitlines() if "unprocessable" in x] == [
        f"warning: {poisoned}:0: unprocessable: copilot-logs failed on this session (ValueError: "
        "a value no rule foresaw); it is left out, the other sessions were read: please report it"
    ]
