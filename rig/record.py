"""Record scenarios with real Copilot CLI versions: ``python -m rig.record --versions V...``.

Each run gets a fresh HOME and the model server; what it leaves in
``OUT/<version>/<scenario>/``: ``events.jsonl`` (verbatim), ``stdout.jsonl`` (the
``--output-format json`` stream, where the scenario asks for it), ``otel.jsonl`` (the CLI's own
OpenTelemetry file exporter's output, ``COPILOT_OTEL_FILE_EXPORTER_PATH``, where the version
wrote one) and ``truth.json`` (the server's record of every request, the exit codes, and what
the scenario expects). A scenario whose flags
the version does not know is kept as ``truth.json`` with ``"outcome": "unsupported"``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rig import cli
from rig.scenarios import BY_NAME, SCENARIOS, Scenario, Script
from rig.server import MODEL, ModelServer

API_KEY = "rig-offline-key-7c1e"
"""The provider key: any value works, and the CLI masks this string wherever it prints."""
OTEL_FILE = "otel.jsonl"
"""The CLI's own spans (its file exporter, on in every run): kept beside events.jsonl."""
RUN_SECONDS = 240
CANNOT_FETCH = 75
"""The exit code when no CLI could be fetched (EX_TEMPFAIL): CI skips its live step on it."""


def environment(home: Path, url: str) -> dict[str, str]:
    """A clean environment: no token, the provider on loopback, HOME a fresh folder."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "NO_COLOR": "1",
        "COPILOT_PROVIDER_TYPE": "openai",
        "COPILOT_PROVIDER_BASE_URL": url,
        "COPILOT_PROVIDER_API_KEY": API_KEY,
        "COPILOT_MODEL": MODEL,
        "COPILOT_OTEL_FILE_EXPORTER_PATH": str(home / OTEL_FILE),
    }


def record(binary: Path, version: str, scenario: Scenario, out: Path) -> dict[str, Any]:
    """Run ``scenario`` with ``binary`` and write what it left to ``out``; the truth."""
    with (
        tempfile.TemporaryDirectory(prefix="rig-home-") as scratch,
        ModelServer(Script(scenario)) as server,
    ):
        home = Path(scratch)
        work = home / "work"
        work.mkdir()
        env = environment(home, server.url)
        runs = []
        session_id = None
        for index, prompt in enumerate(scenario.prompts):
            args = [str(binary), "-p", prompt, *scenario.flags]
            if index > 0 and session_id:
                args.insert(1, f"--resume={session_id}")
            stop = signal.SIGINT if scenario.interrupt else None
            if scenario.kill and index == 0:
                stop = signal.SIGKILL
            server.truth.run = index
            runs.append(_run(args, work, env, stop, home))
            session_id = session_id or _session_id(home)
        truth: dict[str, Any] = {
            "version": version,
            "scenario": scenario.name,
            "about": scenario.about,
            "flags": list(scenario.flags),
            "prompts": list(scenario.prompts),
            "outcome": _outcome(runs, session_id),
            "runs": [{k: v for k, v in run.items() if k not in ("stdout", "log")} for run in runs],
            "session_id": session_id,
            "expect": scenario.expect,
            "requests": server.truth.requests,
        }
        if out.exists():
            shutil.rmtree(out)
        out.mkdir(parents=True)
        log = runs[-1]["log"]
        if truth["outcome"] != "unsupported" and log:
            shutil.copyfile(log, out / "events.jsonl")
        if truth["outcome"] != "unsupported" and (home / OTEL_FILE).is_file():
            shutil.copyfile(home / OTEL_FILE, out / OTEL_FILE)
        if scenario.json_stream:
            (out / "stdout.jsonl").write_text("".join(run["stdout"] for run in runs))
    (out / "truth.json").write_text(json.dumps(truth, indent=1) + "\n")
    return truth


def _run(
    args: list[str], work: Path, env: dict[str, str], stop: signal.Signals | None, home: Path
) -> dict[str, Any]:
    """One CLI run in its own process group; with ``stop``, SIGINT to the CLI (or SIGKILL to
    its whole group) once a tool has started. What it did, and what it left beside the log."""
    started = time.monotonic()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        child = subprocess.Popen(
            args,
            cwd=work,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
        stopped = False
        try:
            if stop is not None:
                stopped = stop_when_tool_starts(child, home, stop)
            code = child.wait(timeout=RUN_SECONDS)
        except subprocess.TimeoutExpired:
            code = None
        finally:
            _end_group(child)
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode("utf-8", "replace")
        stderr = err.read().decode("utf-8", "replace")
    log = _log(home)
    return {
        "exit_code": code,
        "interrupted": stopped and stop == signal.SIGINT,
        "killed": stopped and stop == signal.SIGKILL,
        "seconds": round(time.monotonic() - started, 1),
        "stdout": stdout,
        "error": _error_line(stderr) if code else None,
        "log": str(log) if log else None,
        **beside_log(log, child.pid),
    }


def stop_when_tool_starts(
    child: subprocess.Popen[bytes], home: Path, stop: signal.Signals, seconds: float = RUN_SECONDS
) -> bool:
    """One second after the log first holds a ``tool.execution_start``: SIGINT to the CLI, or
    SIGKILL to its whole process group (the tool's processes too). Whether it was sent."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and child.poll() is None:
        log = _log(home)
        if log and b'"tool.execution_start"' in log.read_bytes():
            time.sleep(1.0)
            if stop == signal.SIGKILL:
                os.killpg(child.pid, signal.SIGKILL)
            else:
                child.send_signal(stop)
            return True
        time.sleep(0.1)
    return False


INUSE_LOCK = re.compile(r"inuse\.(\d+)\.lock")


def beside_log(log: Path | None, pid: int) -> dict[str, Any]:
    """The log and what sits beside it once a run has ended: the log's size and lines (where
    the run's part of the log ends), the run's pid, the session folder's entries, the pids of
    its ``inuse.<pid>.lock`` files, and whether ``.session-operation-locks/<id>.lock`` is
    there (beside the session folders)."""
    if log is None:
        return {}
    data = log.read_bytes()
    folder = log.parent
    names = sorted(entry.name for entry in folder.iterdir())
    operation_lock = folder.parent / ".session-operation-locks" / f"{folder.name}.lock"
    return {
        "log_bytes": len(data),
        "log_lines": data.count(b"\n"),
        "pid": pid,
        "session_folder": names,
        "inuse_lock_pids": sorted(
            int(found.group(1)) for name in names if (found := INUSE_LOCK.fullmatch(name))
        ),
        "operation_lock": operation_lock.is_file(),
    }


def _end_group(child: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(child.pid, signal.SIGKILL)
    child.wait()


def _log(home: Path) -> Path | None:
    logs = sorted((home / ".copilot" / "session-state").glob("*/events.jsonl"))
    return logs[0] if logs else None


def _session_id(home: Path) -> str | None:
    log = _log(home)
    return log.parent.name if log else None


REFUSED = ("unknown option", "unexpected argument", "invalid value", "unknown argument")


def _error_line(text: str) -> str:
    """The line of stderr that says what went wrong: a refused flag first, else the last."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in lines:
        if any(word in line.lower() for word in REFUSED):
            return line[:300]
    return lines[-1][:300] if lines else ""


def _outcome(runs: list[dict[str, Any]], session_id: str | None) -> str:
    first = runs[0]
    if session_id is None and first["exit_code"] not in (0, None):
        words = (first.get("error") or "").lower()
        if any(word in words for word in REFUSED):
            return "unsupported"
        return "failed"
    if session_id is None:
        return "no-log"
    return "recorded"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rig.record", description=__doc__)
    parser.add_argument(
        "--versions",
        nargs="+",
        required=True,
        help="CLI versions, or 'newest' for the registry's newest",
    )
    parser.add_argument(
        "--scenarios", nargs="+", default=[s.name for s in SCENARIOS], choices=sorted(BY_NAME)
    )
    parser.add_argument("--out", type=Path, default=Path("tests/recordings"))
    options = parser.parse_args(argv)
    failed = 0
    try:
        versions = [cli.newest() if v == "newest" else v for v in options.versions]
        binaries = {version: cli.binary(version) for version in versions}
    except (cli.FetchError, OSError, subprocess.SubprocessError) as trouble:
        print(
            f"rig: the Copilot CLI cannot be fetched ({trouble}); nothing recorded", file=sys.stderr
        )
        return CANNOT_FETCH
    for version, binary in binaries.items():
        for name in options.scenarios:
            truth = record(binary, version, BY_NAME[name], options.out / version / name)
            calls = sum(1 for r in truth["requests"] if r["status"] == 200)
            exits = [run["exit_code"] for run in truth["runs"]]
            print(f"{version} {name}: {truth['outcome']}, {calls} calls, exit {exits}", flush=True)
            failed += truth["outcome"] == "failed"
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
