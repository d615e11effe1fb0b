"""The public Python API: the package's names are the functions, and they give the commands'
figures."""

from __future__ import annotations

import subprocess
import sys

import pytest

import copilot_logs as cl

from .conftest import SAMPLES


def test_every_public_name_is_callable_after_import() -> None:
    result = cl.read(SAMPLES)
    # Importing the core modules must not shadow the API functions of the same names.
    for name in (
        "sessions",
        "count",
        "turns",
        "tools",
        "subagent_runs",
        "timeline",
        "audit",
        "validate",
        "usage",
    ):
        assert callable(getattr(cl, name)), name
    assert cl.sessions(result).height == 11
    assert int(cl.count(result)["llm_calls"].sum()) == 53
    assert cl.turns(result).height == 53
    assert cl.audit(result).filter(verdict="nudge-cap").height == 1
    assert cl.validate(result).failed
    assert cl.usage(result).totals["requests"] == 45
    assert len(cl.timeline(result)) == 11


def test_read_file_and_read_bytes() -> None:
    path = SAMPLES / "c3d2e5f4-6d7f-4e80-a192-2c3d4e5f6071" / "events.jsonl"
    from_file = cl.read_file(path)
    from_bytes = cl.read_bytes(path.read_bytes(), name=str(path))
    assert from_file.events["event_id"].to_list() == from_bytes.events["event_id"].to_list()
    assert from_file.events["session_id"][0] == "c3d2e5f4-6d7f-4e80-a192-2c3d4e5f6071"


@pytest.mark.process
def test_importing_the_package_does_not_import_polars() -> None:
    code = "import copilot_logs, copilot_logs.cli, sys; print('polars' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
