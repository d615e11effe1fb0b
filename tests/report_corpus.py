"""A few hundred real-shaped sessions for the report's screenshot test: mostly chats and
completed autopilot runs, and among them what a report must surface, each kind written by
:mod:`synth` so what needs attention is known by construction (:class:`Truth`)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import synth
from synth import SessionBuilder, bash, edit, view

REPOSITORIES = ("octo/webshop", "octo/compiler", "acme/infra", "acme/mobile-app")
KINDS = (
    ("chat", 40),
    ("completed", 25),
    ("capped-looping", 6),
    ("missing-task-complete", 6),
    ("errored", 5),
    ("completed-looping", 5),
    ("damaged", 8),
    ("interrupted", 5),
)


@dataclass
class Truth:
    """What each kind of session is, by construction."""

    kinds: dict[str, str] = field(default_factory=dict)
    """Session id -> its kind."""

    def ids(self, *kinds: str) -> set[str]:
        return {session for session, kind in self.kinds.items() if kind in kinds}


def _autopilot(b: SessionBuilder, prompt: str) -> None:
    b.mode_changed("autopilot")
    b.user_message(prompt)


def _session(kind: str, index: int, rng: random.Random, start: datetime) -> SessionBuilder:
    b = SessionBuilder(
        seed=index,
        start=start.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        repository=rng.choice(REPOSITORIES),
    )
    work = [view(f"src/m{index}.py", "ok"), edit(f"src/m{index}.py", "a", "b")]
    if kind == "chat":
        b.user_message("How does the config loader work?")
        for _ in range(rng.randint(1, 4)):
            b.turn("It reads the file, then validates it.", [view("src/config.py", "...")])
        b.shutdown()
    elif kind in ("completed", "completed-looping"):
        _autopilot(b, "Add pagination to the orders endpoint, with tests.")
        repeats = 4 if kind == "completed-looping" else 1
        for _ in range(repeats):
            b.turn("Checking.", [bash("git status", "clean")])
        b.turn("Working.", work)
        b.task_complete_turn("Added pagination; the tests pass.")
        b.shutdown()
    elif kind == "capped-looping":
        _autopilot(b, "Make the flaky test pass.")
        b.turn("Trying.", [bash("make test", "1 failed")])
        for _ in range(5):
            b.nudge()
            b.turn("Trying again.", [bash("make test", "1 failed")])
            b.turn("I believe this is done.")
        b.shutdown()
    elif kind == "missing-task-complete":
        _autopilot(b, "Upgrade the HTTP client and fix what breaks.")
        b.turn("Working.", work)
        b.turn("Done, I think.")
        b.shutdown()
    elif kind == "errored":
        _autopilot(b, "Write a migration that backfills the new column.")
        b.turn("Working.", work)
        b.session_error("Could not connect to the model")
        b.shutdown()
    elif kind == "interrupted":
        _autopilot(b, "Refactor the router.")
        b.turn("Working.", work, end=False)
    elif kind == "damaged":
        b.user_message("Why is the build slow?")
        b.turn("Profiling.", [bash("make -j1", "ok")])
        b.turn("The linker is slow.")
    return b


def write_corpus(folder: Path, sessions: int = 300, seed: int = 7) -> Truth:
    """``sessions`` logs under ``folder`` (``<id>/events.jsonl``), newest a few hours ago,
    spread over two months; the kinds drawn by their weights."""
    rng = random.Random(seed)
    names = [name for name, _ in KINDS]
    weights = [weight for _, weight in KINDS]
    now = datetime.now(UTC).replace(microsecond=0)
    truth = Truth()
    for index in range(sessions):
        kind = rng.choices(names, weights)[0]
        start = now - timedelta(hours=3 + index * 5, minutes=rng.randint(0, 59))
        b = _session(kind, index, rng, start)
        log = b.write_to(folder)
        if kind == "damaged":  # a crash: NUL padding after a cut last line
            log.write_bytes(synth.nul_tail(synth.cut(log.read_bytes())))
        truth.kinds[b.session_id] = kind
    return truth
