"""What copilot-logs knows of the CLI's format across versions agrees with the recordings and
with the schema file it keeps: docs/compatibility.md is current, the verified range is the
recorded one, every type on disk is known, and the known and ephemeral types are the kept
schema's (ingest/schema_types.json, made by rig/event_schema.py)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

import synth
from copilot_logs.commands import validate
from copilot_logs.ingest import cli_format
from copilot_logs.ingest.reader import read_bytes
from rig import event_schema, matrix

from .recorded import COMMITTED, recordings, version_key

PROJECT = Path(__file__).resolve().parent.parent
COMMITTED_RECORDINGS = [r for r in recordings(COMMITTED) if r.outcome == "recorded"]
SCHEMA_FILE = PROJECT / "copilot_logs/ingest/schema_types.json"
SCHEMA_TYPES: dict[str, bool] = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))["types"]


def test_the_compatibility_page_is_current() -> None:
    """Regenerate it with `python -m rig.matrix > docs/compatibility.md`."""
    page = (PROJECT / "docs" / "compatibility.md").read_text(encoding="utf-8")
    assert page == matrix.page(COMMITTED)


def test_the_verified_range_is_the_recorded_one() -> None:
    versions = sorted({r.version for r in COMMITTED_RECORDINGS}, key=version_key)
    assert (versions[0], versions[-1]) == (cli_format.OLDEST_VERIFIED, cli_format.NEWEST_VERIFIED)
    readme = (PROJECT / "README.md").read_text(encoding="utf-8")
    assert f"**{versions[0]} to {versions[-1]}**" in readme


def test_every_type_the_cli_wrote_is_known_and_persisted() -> None:
    written = {
        json.loads(line)["type"]
        for r in COMMITTED_RECORDINGS
        for line in r.log.read_bytes().splitlines()
    }
    assert written - cli_format.KNOWN_TYPES == set()
    assert written & cli_format.EPHEMERAL_TYPES == set()


def test_the_known_and_ephemeral_types_are_the_kept_schemas() -> None:
    ephemeral = {name for name, flag in SCHEMA_TYPES.items() if flag}
    assert ephemeral - cli_format.PERSISTED_IN_OLDER_CLIS == cli_format.EPHEMERAL_TYPES
    assert set(SCHEMA_TYPES) == cli_format.KNOWN_TYPES | cli_format.EPHEMERAL_TYPES
    assert set(SCHEMA_TYPES) >= cli_format.PERSISTED_IN_OLDER_CLIS


def test_validate_judges_each_type_as_the_kept_schema_says() -> None:
    """A line of every type of the kept file: the ephemeral ones are E106 (but those older
    CLIs persisted), the others are known (no E107); a type of no schema is E107."""
    builder = synth.SessionBuilder(seed=1)
    for name in [*SCHEMA_TYPES, "made.up_type"]:
        builder.event(name, {})
    found = validate.check(read_bytes(builder.to_bytes(), "s.jsonl"))
    types = read_bytes(builder.to_bytes(), "s.jsonl").events.select("line", "type")
    flagged = found.join(types, on="line").group_by("code").agg(pl.col("type"))
    by_code = {code: set(kinds) for code, kinds in flagged.iter_rows()}
    expected_ephemeral = {n for n, eph in SCHEMA_TYPES.items() if eph}
    assert by_code["E106"] == expected_ephemeral - cli_format.PERSISTED_IN_OLDER_CLIS
    assert by_code["E107"] == {"made.up_type"}


PYTHON_SDK = """
class SessionEventType(Enum):
    SESSION_START = "session.start"
    TOOL_SHELL_OUTPUT = "tool.shell_output"
    UNKNOWN = "unknown"
"""

JSON_SCHEMA = {
    "definitions": {
        "SessionEvent": {
            "anyOf": [{"$ref": "#/definitions/StartEvent"}, {"$ref": "#/definitions/IdleEvent"}]
        },
        "StartEvent": {"properties": {"type": {"const": "session.start"}, "data": {}}},
        "IdleEvent": {
            "properties": {
                "type": {"const": "session.idle"},
                "ephemeral": {"type": "boolean", "const": True},
                "data": {},
            }
        },
    }
}


def test_the_schema_script_reads_both_kinds_of_sdk_file() -> None:
    types = event_schema.merged(
        event_schema.python_types(PYTHON_SDK), [event_schema.schema_types(JSON_SCHEMA)]
    )
    assert types == {"session.idle": True, "session.start": False, "tool.shell_output": False}
    text = event_schema.json_text(types, ("a test",))
    assert json.loads(text)["types"] == types


def test_the_kept_schema_file_is_what_the_script_writes() -> None:
    """The file is the script's output for its own types (so an edit by hand shows)."""
    kept = SCHEMA_FILE.read_text(encoding="utf-8")
    assert kept == event_schema.json_text(SCHEMA_TYPES, event_schema.SOURCES)


def test_a_version_is_newer_than_verified_past_the_newest_recorded() -> None:
    major, minor, patch = cli_format.version_key(cli_format.NEWEST_VERIFIED) or ()
    assert not cli_format.newer_than_verified(cli_format.NEWEST_VERIFIED)
    assert not cli_format.newer_than_verified(f"{major}.{minor}.{patch - 1}")
    assert cli_format.newer_than_verified(f"{major}.{minor}.{patch + 1}")
    assert cli_format.newer_than_verified(f"{major}.{minor + 1}.0-preview.2")
    assert not cli_format.newer_than_verified("not a version")
