"""Does the real CLI resume a damaged log? ``python -m rig.resume --versions V... [--damages D]``.

For each version and damage (:mod:`rig.damage`): the version's own recording of the damage's
base scenario is damaged and put alone in a fresh HOME's ``.copilot/session-state/<id>/``, then
``copilot --resume=ID -p "[rig:main] Go on." --allow-all-tools`` runs against the model server.
``kill-9`` instead runs a real session, kills the CLI with SIGKILL while its tool runs, and
resumes in that same HOME. ``none`` is the undamaged control.

What it keeps in ``OUT/<version>/resume-<damage>/``: ``truth.json`` (exit code, the requests the
server got and what history the first one carried, whether the CLI kept the file's bytes, the
warnings it logged, and the ``verdict``) and ``appended.jsonl`` (what the CLI wrote to the log
after resuming, each ``system.message``'s content elided); for ``kill-9`` also ``killed.jsonl``,
the log as the killed CLI left it.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from rig import cli, record
from rig.damage import BY_NAME, DAMAGES, Damage
from rig.replies import Reply, text
from rig.scenarios import BY_NAME as SCENARIOS
from rig.scenarios import Script
from rig.server import ModelServer

PROMPT = "[rig:main] Go on."
KILLED = "killed.jsonl"
"""kill-9's damaged log, as the killed CLI left it (not ``events.jsonl``: this folder is no
scenario recording)."""
RUN_SECONDS = 120
CONTROL = Damage("none", "the recording as it is (the control)", "one-tool", lambda data: data)
ALL = (CONTROL, *DAMAGES)


class HistoryServer(ModelServer):
    """The model server, also keeping what conversation each request carried."""

    def __init__(self, script: Any) -> None:
        super().__init__(script)
        self.histories: list[dict[str, Any]] = []

    def __enter__(self) -> HistoryServer:
        super().__enter__()
        return self

    def answer(
        self, request: dict[str, Any], headers: dict[str, str]
    ) -> tuple[Reply, dict[str, Any]]:
        self.histories.append(history(request.get("messages") or []))
        return super().answer(request, headers)


def _resumed(agent: str, step: int, request: dict[str, Any]) -> Reply:
    return text("Resumed.")


def history(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """What a request's conversation holds, and the tool calls in it no tool message answers
    (a provider refuses such a request: "tool_use ids were found without tool_result")."""
    calls: list[str] = []
    answered: list[str] = []
    results = []
    prompts = []
    for message in messages:
        role = message.get("role")
        if role == "user":
            words = _text(message.get("content"))
            mark = words.find("[rig:")
            prompts.append(words[mark : mark + 120] if mark >= 0 else words[-120:])
        for call in message.get("tool_calls") or []:
            calls.append(str(call.get("id")))
        if role == "tool":
            answered.append(str(message.get("tool_call_id")))
            results.append(
                {"id": message.get("tool_call_id"), "content": _text(message.get("content"))[:300]}
            )
    return {
        "roles": [m.get("role") for m in messages],
        "user_prompts": prompts,
        "tool_calls": calls,
        "tool_results": results,
        "unanswered": [c for c in calls if c not in answered],
        "unknown_results": [a for a in answered if a not in calls],
    }


def _text(content: Any) -> str:
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content or "")


def environment(home: Path, url: str, version: str) -> dict[str, str]:
    """The rig's environment; the CLI unpacks itself (235 MB) under XDG_CACHE_HOME, shared per
    version so that each run does not unpack it again."""
    env = record.environment(home, url)
    env["XDG_CACHE_HOME"] = str(cli.cache_root() / version / "xdg-cache")
    return env


def place(home: Path, log: bytes) -> str:
    """``log`` as the only session of ``home``; its id (from the first line)."""
    session_id = json.loads(log.split(b"\n", 1)[0])["data"]["sessionId"]
    folder = home / ".copilot" / "session-state" / session_id
    folder.mkdir(parents=True)
    (folder / "events.jsonl").write_bytes(log)
    return str(session_id)


def run(
    args: list[str], cwd: Path, env: dict[str, str], kill_on_tool: Path | None = None
) -> dict[str, Any]:
    """Run the CLI; with ``kill_on_tool`` (the log to watch), SIGKILL it one second after a
    tool started. Its exit code (-9 when killed), stderr's last lines, whether it was killed."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        child = subprocess.Popen(
            args,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
        killed = False
        try:
            if kill_on_tool is not None:
                killed = record.stop_when_tool_starts(
                    child, kill_on_tool, signal.SIGKILL, RUN_SECONDS
                )
            code = child.wait(timeout=RUN_SECONDS)
        except subprocess.TimeoutExpired:
            code = None
        finally:
            record._end_group(child)
        tails = {name: _tail(stream) for name, stream in (("stdout", out), ("stderr", err))}
    return {"exit_code": code, "killed": killed, **tails}


def _tail(stream: Any) -> list[str]:
    stream.seek(0)
    text = stream.read().decode("utf-8", "replace")
    return [line.strip()[:300] for line in text.splitlines() if line.strip()][-3:]


def base_log(version: str, scenario: str, recordings: Path) -> bytes:
    """The version's recording of ``scenario``; recorded now (not kept) when there is none."""
    path = recordings / version / scenario / "events.jsonl"
    if path.is_file():
        return path.read_bytes()
    with tempfile.TemporaryDirectory(prefix="rig-base-") as scratch:
        out = Path(scratch) / "out"
        record.record(cli.binary(version), version, SCENARIOS[scenario], out)
        return (out / "events.jsonl").read_bytes()


def killed_log(binary: Path, version: str, home: Path) -> tuple[bytes, dict[str, Any]]:
    """A real session in ``home`` whose CLI was killed (SIGKILL) while its tool ran."""
    work = home / "work"
    work.mkdir(exist_ok=True)
    scenario = SCENARIOS["interrupted"]
    with ModelServer(Script(scenario)) as server:
        env = environment(home, server.url, version)
        args = [str(binary), "-p", scenario.prompts[0], *scenario.flags]
        done = run(args, work, env, kill_on_tool=home)
    log = record._log(home)
    return (log.read_bytes() if log else b""), done


def probe(version: str, damage: Damage, recordings: Path) -> tuple[dict[str, Any], bytes, bytes]:
    """Damage, resume, observe; then repair the damaged log with ``doctor --repair`` and
    resume the copy: the truth, the damaged log, and what the CLI appended to it."""
    binary = cli.binary(version)
    with tempfile.TemporaryDirectory(prefix="rig-resume-") as scratch:
        root = Path(scratch)
        home = root / "home"
        (home / "work").mkdir(parents=True)
        killed_run: dict[str, Any] | None = None
        if damage.apply is None:
            damaged, killed_run = killed_log(binary, version, home)
            session_id = str(record._session_id(home))
        else:
            damaged = damage.apply(base_log(version, damage.base, recordings))
            session_id = place(home, damaged)
        folder = home / ".copilot" / "session-state" / session_id
        saved = root / "saved" / session_id
        shutil.copytree(folder, saved, ignore=shutil.ignore_patterns("*.lock"))
        seen = resume_in(binary, version, home, session_id)
        repaired = repaired_resume(binary, version, saved, root)
    after = seen.pop("after")
    kept = after.startswith(damaged)
    appended = after[len(damaged) :] if kept else after
    truth = {
        "version": version,
        "scenario": f"resume-{damage.name}",
        "outcome": "resume-probe",
        "damage": damage.name,
        "about": damage.about,
        "base": damage.base,
        "session_id": session_id,
        "killed_run": killed_run,
        **seen,
        "file_kept": kept,
        "appended_types": _types(appended),
        "dropped": dropped(damaged, after),
    }
    truth["verdict"] = verdict(truth, first_prompt(damaged))
    truth["repaired"] = repaired
    return truth, damaged, appended


def resume_in(binary: Path, version: str, home: Path, session_id: str) -> dict[str, Any]:
    """``copilot --resume`` of ``session_id`` in ``home``: how it went, and the log after."""
    with HistoryServer(_resumed) as server:
        env = environment(home, server.url, version)
        args = [str(binary), f"--resume={session_id}", "-p", PROMPT, "--allow-all-tools"]
        done = run(args, home / "work", env)
        requests, histories = server.truth.requests, server.histories
    log = home / ".copilot" / "session-state" / session_id / "events.jsonl"
    return {
        "resume": done,
        "requests": requests,
        "history": histories[0] if histories else None,
        "cli_warnings": _warnings(home),
        "after": log.read_bytes() if log.is_file() else b"",
    }


def repaired_resume(binary: Path, version: str, saved: Path, root: Path) -> dict[str, Any]:
    """``doctor --repair`` of the damaged session folder ``saved``, and the copy resumed in a
    fresh HOME: the verdict and what it rests on."""
    from copilot_logs.commands.doctor.repair import repair
    from copilot_logs.ingest.logfile import Source

    state = root / "repaired-home" / ".copilot" / "session-state"
    (root / "repaired-home" / "work").mkdir(parents=True)
    done = repair(Source(saved / "events.jsonl", saved.name), state)
    copy = done.events.read_bytes()
    seen = resume_in(binary, version, root / "repaired-home", saved.name)
    after = seen.pop("after")
    truth = {**seen, "dropped": dropped(copy, after)}
    history = truth["history"] or {}
    return {
        "verdict": verdict(truth, first_prompt(copy)),
        "exit_code": truth["resume"]["exit_code"],
        "stderr": truth["resume"]["stderr"],
        "requests": len(truth["requests"]),
        "roles": history.get("roles"),
        "unanswered": history.get("unanswered"),
        "changes": [f"line {c.line}: {c.what}" for c in done.changes],
        "set_aside_bytes": done.set_aside_bytes,
        "dropped": truth["dropped"],
    }


def dropped(damaged: bytes, after: bytes) -> list[dict[str, Any]]:
    """The events copilot-logs reads from the damaged log that are gone from the log after the
    resume (the CLI rewrote the file without them): their line and type."""
    from copilot_logs.ingest.reader import read_bytes

    before = read_bytes(damaged).events.select("event_id", "line", "type")
    kept = set(read_bytes(after).events["event_id"].to_list())
    return [row for row in before.iter_rows(named=True) if row.pop("event_id") not in kept]


def first_prompt(log: bytes) -> str | None:
    """The first user.message's rig prompt (from its ``[rig:`` mark to the end of the JSON
    string): what a request carrying the earlier conversation must hold."""
    for line in log.split(b"\n"):
        if b'"user.message"' in line:
            found = re.search(r'\[rig:[^"\\]*', line.decode("utf-8", "replace"))
            return found.group(0) if found else None
    return None


def verdict(truth: dict[str, Any], prompt: str | None) -> str:
    """``resumed``: the model was called with the earlier history, every tool call in it
    answered, the CLI exited 0 and kept every event copilot-logs reads from the log;
    otherwise what went wrong first: ``refused`` (no model call, an exit code), ``no-call``,
    ``history-lost`` (the first prompt is not in the request), ``unanswered-tool-call`` (a
    tool call without its result: a provider refuses the request), ``failed-after-call``,
    ``resumed-dropping`` (the CLI rewrote the log without some events)."""
    code = truth["resume"]["exit_code"]
    if not truth["requests"]:
        return "refused" if code not in (0, None) else "no-call"
    carried = truth["history"] or {}
    prompts = " ".join(carried.get("user_prompts", []))
    if prompt and prompt.replace("\u2028", "") not in prompts.replace("\u2028", ""):
        return "history-lost"
    if carried.get("unanswered") or carried.get("unknown_results"):
        return "unanswered-tool-call"
    if code != 0:
        return "failed-after-call"
    return "resumed-dropping" if truth["dropped"] else "resumed"


_NOISE = re.compile(
    r"tls_certs|CAFE metrics|not in the built-in catalog|managedSettings|managed hooks"
)


def _warnings(home: Path) -> list[str]:
    """The CLI's own log's warnings and errors (noise left out), home shown as $HOME."""
    found: list[str] = []
    for path in sorted((home / ".copilot" / "logs").glob("*.log")):
        for line in path.read_text("utf-8", "replace").splitlines():
            if ("[WARNING]" in line or "[ERROR]" in line) and not _NOISE.search(line):
                found.append(line.split(" ", 1)[-1].replace(str(home), "$HOME")[:300])
    return found[:12]


def _types(data: bytes) -> list[str]:
    kinds = []
    for line in data.split(b"\n"):
        try:
            kinds.append(str(json.loads(line).get("type")))
        except (ValueError, AttributeError):
            kinds.append("<not json>") if line.strip(b"\x00 ") else None
    return kinds


def elided(data: bytes) -> bytes:
    """``data`` with each system.message's content replaced by its length (the evidence is
    about the other events; the system prompt is most of the bytes)."""
    out = []
    for line in data.split(b"\n"):
        try:
            event = json.loads(line)
        except ValueError:
            out.append(line)
            continue
        if event.get("type") == "system.message" and isinstance(event.get("data"), dict):
            content = event["data"].get("content")
            event["data"]["content"] = f"<elided: {len(content or '')} characters>"
            line = json.dumps(event, ensure_ascii=False, separators=(",", ":")).encode()
        out.append(line)
    return b"\n".join(out)


def write(truth: dict[str, Any], damaged: bytes, appended: bytes, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "truth.json").write_text(json.dumps(truth, indent=1, ensure_ascii=False) + "\n")
    (out / "appended.jsonl").write_bytes(elided(appended))
    if truth["damage"] == "kill-9":
        (out / KILLED).write_bytes(damaged)


EVIDENCE = Path("copilot_logs/commands/doctor/evidence.json")
OUTCOME_ORDER = (
    "resumed",
    "resumed-dropping",
    "history-lost",
    "unanswered-tool-call",
    "failed-after-call",
    "no-call",
    "refused",
)


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version)[:3])


def note(truth: dict[str, Any]) -> str:
    """What the CLI did, in a few words, for the table's notes."""
    words = []
    if truth["verdict"] in ("refused", "no-call"):
        errors = [line for line in truth["resume"]["stderr"] if line.startswith("Error:")]
        said = errors[-1] if errors else "nothing on stderr"
        said = re.sub(r"[0-9a-f]{8}-[0-9a-f-]{27}", "ID", said)
        return f"exit {truth['resume']['exit_code']}, no model call: {said}"
    appended = truth["appended_types"]
    if "tool.execution_complete" in appended[:3] and appended[0] == "session.resume":
        words.append("wrote a tool.execution_complete (error code interrupted) for the open call")
    else:
        opened = {r["id"]: r["content"] for r in (truth["history"] or {}).get("tool_results", [])}
        closing = [c for c in opened.values() if "interrupted" in c]
        if closing:
            words.append(f'answered the open call in the request only: "{closing[0]}"')
    if not truth["file_kept"]:
        words.append("rewrote the log")
    if truth["dropped"]:
        lost = ", ".join(f"line {d['line']} ({d['type']})" for d in truth["dropped"])
        words.append(f"dropped {lost}")
    if truth["verdict"] == "history-lost":
        words.append("the first prompt was not in the request")
    if truth["verdict"] == "unanswered-tool-call":
        words.append(f"sent tool calls without results: {truth['history']['unanswered']}")
    return "; ".join(words)


def evidence_json(recordings: Path) -> str:
    """The text of copilot_logs/commands/doctor/evidence.json (package data, read by
    copilot_logs.commands.doctor), from the committed resume truths."""
    outcomes: dict[str, dict[str, str]] = {}
    notes: dict[str, dict[str, str]] = {}
    about = {damage.name: damage.about for damage in ALL}
    repaired: dict[str, dict[str, str]] = {}
    closing: dict[str, Any] = {}
    truths = sorted(recordings.glob("*/resume-*/truth.json"))
    for path in sorted(truths, key=lambda p: _version_key(p.parent.parent.name)):
        truth = json.loads(path.read_text())
        damage, version = truth["damage"], truth["version"]
        outcomes.setdefault(damage, {})[version] = truth["verdict"]
        if truth.get("repaired"):
            repaired.setdefault(damage, {})[version] = truth["repaired"]["verdict"]
        notes.setdefault(damage, {})[version] = note(truth)
        if damage == "kill-9":
            closing = _closing(path.parent / "appended.jsonl", version) or closing
    versions = sorted({v for row in outcomes.values() for v in row}, key=_version_key)
    order = [d.name for d in ALL if d.name in outcomes]
    evidence = {
        "about": "What the real Copilot CLI did when it resumed each damaged log: generated from "
        "tests/recordings/VERSION/resume-DAMAGE/truth.json by `python -m rig.resume --evidence` "
        "(`make record-resume`); do not edit by hand (tests/test_doctor.py checks it).",
        "versions": versions,
        "damages": {d: about[d] for d in order},
        "outcomes": {d: outcomes[d] for d in order},
        "notes": {
            d: {v: n for v, n in notes[d].items() if n} for d in order if any(notes[d].values())
        },
        "repaired": {d: repaired.get(d, {}) for d in order},
        "close_version": closing.get("version"),
        "close_tool": closing.get("tool", {}),
        "close_warning": closing.get("warning", {}),
    }
    return json.dumps(evidence, indent=1, ensure_ascii=False) + "\n"


def _closing(appended: Path, version: str) -> dict[str, Any] | None:
    """How ``version`` closed the open tool call of a killed session on resume, when it wrote
    anything: the data of its tool.execution_complete and session.warning."""
    events = [json.loads(line) for line in appended.read_bytes().split(b"\n") if line.strip()]
    tool = next((e["data"] for e in events if e["type"] == "tool.execution_complete"), None)
    warning = next((e["data"] for e in events if e["type"] == "session.warning"), None)
    if tool is None:
        return None
    tool = {k: v for k, v in tool.items() if k != "toolCallId"}
    return {"version": version, "tool": tool, "warning": warning or {}}


def _stop(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rig.resume", description=__doc__)
    parser.add_argument("--versions", nargs="+", default=[])
    names = [d.name for d in ALL]
    parser.add_argument("--damages", nargs="+", default=names, choices=names)
    parser.add_argument("--recordings", type=Path, default=Path("tests/recordings"))
    parser.add_argument("--out", type=Path, default=Path("tests/recordings"))
    parser.add_argument(
        "--evidence",
        action="store_true",
        help=f"only write {EVIDENCE} from the truths under --out (no CLI is run)",
    )
    options = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _stop)  # so that a killed run still ends the CLI it started
    if options.evidence:
        EVIDENCE.write_text(evidence_json(options.out), encoding="utf-8")
        return 0
    by_name = {"none": CONTROL, **BY_NAME}
    try:
        versions = [cli.newest() if v == "newest" else v for v in options.versions]
        for version in versions:
            cli.binary(version)
    except (cli.FetchError, OSError, subprocess.SubprocessError) as trouble:
        print(f"rig: the Copilot CLI cannot be fetched ({trouble})", file=sys.stderr)
        return record.CANNOT_FETCH
    for version in versions:
        for name in options.damages:
            truth, damaged, appended = probe(version, by_name[name], options.recordings)
            write(truth, damaged, appended, options.out / version / f"resume-{name}")
            print(
                f"{version} {name}: {truth['verdict']} (exit {truth['resume']['exit_code']}, "
                f"{len(truth['requests'])} requests, appended {truth['appended_types']})",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
