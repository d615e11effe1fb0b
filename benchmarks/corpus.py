"""A seeded, real-shaped benchmark corpus of Copilot CLI session logs, and its manifest.

The shape follows ``../shared/event-format.md`` and what heavy users have on disk: many small
and medium sessions, a few heavy 15-25 MB ones, single tool-output lines over 1.5 MB, a 45 KB
system prompt before every user message, sub-agents, parallel tools, autopilot nudges,
resumes, killed sessions, damaged lines, and message and tool text that mentions event types
(so ``grep`` over-counts, as it does on real logs).

Speed: a pool of template sessions is built once with :class:`synth.SessionBuilder`
and every session of the corpus is a template with a fresh session id, so a 1 GB corpus is
mostly a matter of writing bytes. The exact figures a correct reader must give (llm_calls,
sessions) are known by construction, damage included, and written to ``manifest.json`` beside
the sessions. A finished corpus is cached by (generator version, seed, size) in the temporary
folder and reused.

``python -m benchmarks.corpus --size-mb 100`` builds (or finds) a corpus and prints its
manifest; ``--single-file PATH`` writes one session of that size instead (the memory check
of "a single 2 GB file").
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import time
import uuid
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, BinaryIO

import orjson

import synth
from synth import SessionBuilder, ToolCall

#: Bumped whenever the bytes a (seed, size) pair gives change, so stale cached corpora are
#: rebuilt rather than measured.
GENERATOR_VERSION = 2
MANIFEST = "manifest.json"
SYSTEM_PROMPT_BYTES = 45_000
TURN_START = b"assistant.turn_start"
GREP_F_PATTERN = b'"type":"assistant.turn_start"'

MODELS = ("claude-sonnet-4.5", "gpt-5-mini", "gpt-5", "claude-haiku-4.5", "claude-opus-4.1")
REPOSITORIES = ("octo/webshop", "octo/compiler", "acme/infra", "acme/mobile-app", None)

PROMPTS = (
    "Fix the failing test in the payment module and explain the cause.",
    "Add pagination to the orders endpoint, with tests.",
    "Why is the build slow? Profile it and propose a fix.",
    "Refactor the config loader to validate its input.",
    "Upgrade the HTTP client and fix what breaks.",
    "Write a migration that backfills the new column.",
    "Review this diff for race conditions.",
    "Port the CLI argument parsing to click.",
)
MENTIONING_PROMPTS = (
    "How many LLM calls did my last session make? The docs say to run "
    'grep -c "assistant.turn_start" events.jsonl but the number looks too high.',
    "Parse ~/.copilot/session-state/*/events.jsonl and chart assistant.turn_start per day.",
)
ANSWERS = (
    "Reading the relevant files first.",
    "Running the tests to see the current state.",
    "The failure comes from a stale fixture; updating it.",
    "Applying the change and re-running the suite.",
    "Checking the other call sites for the same pattern.",
    "Done: the change is in place and the tests pass.",
)
MENTIONING_ANSWERS = (
    "Each LLM call starts with an assistant.turn_start event, so I will count those per "
    "session, keyed by interactionId and turnId since turnId restarts at 0.",
    'grep -c "assistant.turn_start" also matches tool output that quotes the log, which is '
    "why the figure is too high; parsing each line is exact.",
)
# An MCP-style tool whose *arguments object* holds the literal "type":"assistant.turn_start":
# the one way the envelope pattern `grep -F` looks for appears on a line that is not a turn.
QUERY_TOOL = "session-logs-query_events"

_CODE = (
    "def handle_{i}(request, session):\n"
    '    """Serve page {i} for the current user."""\n'
    "    items = session.query(Item).filter(Item.page == {i}).limit(50).all()\n"
    "    return render(request, 'page_{i}.html', {{'items': items, 'page': {i}}})\n\n"
)
_TESTS = "tests/test_module_{i}.py::test_case_{j} PASSED{pad}[{pct:3d}%]\n"
_LOG = "2026-08-05 07:{m:02d}:{s:02d},{ms:03d} INFO worker-{w} processed batch {i} in {d} ms\n"


@dataclass(frozen=True)
class Template:
    """One session's bytes and what a correct reader must find in them."""

    kind: str
    session_id: str
    data: bytes
    llm_calls: int
    damage: tuple[str, ...]
    grep_f_lines: int
    grep_lines: int
    lines: int
    longest_line: int


@dataclass
class Manifest:
    """What the corpus holds and the exact answers, written to ``manifest.json``."""

    generator_version: int
    seed: int
    size_mb: int
    sessions: int
    files: int
    bytes: int
    lines: int
    llm_calls: int
    grep_f_lines: int
    grep_lines: int
    damaged_files: int
    heavy_sessions: int
    largest_file: str
    largest_file_bytes: int
    longest_line_bytes: int
    generated_seconds: float
    templates: dict[str, int] = field(default_factory=dict)

    def write(self, folder: Path) -> None:
        (folder / MANIFEST).write_bytes(orjson.dumps(asdict(self), option=orjson.OPT_INDENT_2))

    @classmethod
    def read(cls, folder: Path) -> Manifest:
        raw: dict[str, Any] = orjson.loads((folder / MANIFEST).read_bytes())
        return cls(**raw)


# --------------------------------------------------------------------------------------------
# Text: tool outputs are built by repeating a small pool of seeded blocks (fast at any size)
# --------------------------------------------------------------------------------------------


class _Text:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.blocks = [self._block(kind) for kind in range(4) for _ in range(6)]
        self.mentions = self._mentions()

    def _block(self, kind: int) -> str:
        rng = self.rng
        out: list[str] = []
        size = 0
        while size < 4096:
            i = rng.randrange(10_000)
            if kind == 0:
                piece = _CODE.format(i=i)
            elif kind == 1:
                name = f"{i}::test_case_{rng.randrange(99)}"
                piece = _TESTS.format(
                    i=i, j=rng.randrange(99), pad=" " * (40 - len(name) % 40), pct=i % 101
                )
            elif kind == 2:
                piece = _LOG.format(
                    m=rng.randrange(60),
                    s=rng.randrange(60),
                    ms=rng.randrange(1000),
                    w=rng.randrange(8),
                    i=i,
                    d=rng.randrange(900),
                )
            else:
                piece = (
                    f"src/pkg_{i % 37}/module_{i}.ts:{rng.randrange(400)}: export function f{i}()\n"
                )
            out.append(piece)
            size += len(piece)
        return "".join(out)

    def _mentions(self) -> list[str]:
        """Tool output that quotes real log lines or the docs: ``grep -c`` matches these."""
        rng = self.rng
        quoted = []
        for n in range(4):
            iid = str(uuid.UUID(int=rng.getrandbits(128), version=4))
            lines = [
                orjson.dumps(
                    {
                        "type": "assistant.turn_start",
                        "data": {"turnId": str(t), "interactionId": iid},
                        "id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
                        "timestamp": f"2026-08-0{n + 1}T10:0{t}:00.000Z",
                        "parentId": None,
                    }
                ).decode()
                for t in range(3)
            ]
            quoted.append("\n".join(lines) + "\n")
        quoted.append(
            "Count the LLM calls of a session with:\n\n"
            '    grep -c "assistant.turn_start" ~/.copilot/session-state/<id>/events.jsonl\n'
        )
        return quoted

    def output(self, size: int, *, mention: bool = False) -> str:
        parts: list[str] = []
        total = 0
        while total < size:
            block = self.rng.choice(self.blocks)
            parts.append(block)
            total += len(block)
        text = "".join(parts)[:size]
        return self.rng.choice(self.mentions) + text if mention else text


# --------------------------------------------------------------------------------------------
# Sessions
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Profile:
    kind: str
    size_kb: tuple[int, int]
    turns: tuple[int, int]
    output_sizes: tuple[int, ...]
    output_weights: tuple[float, ...]
    huge_rate: float
    """Chance per interaction of one tool output of 0.8-1.5 MB (a line of 1.6-3 MB)."""


SMALL = _Profile("small", (40, 160), (2, 6), (300, 1_200, 3_000, 6_000), (3, 4, 2, 1), 0.0)
MEDIUM = _Profile(
    "medium",
    (300, 3_000),
    (3, 14),
    (300, 1_500, 4_000, 12_000, 40_000, 120_000),
    (3, 4, 3, 2, 1, 0.3),
    0.02,
)
LARGE = _Profile(
    "large",
    (3_000, 8_000),
    (4, 18),
    (300, 1_500, 4_000, 12_000, 40_000, 120_000),
    (3, 4, 3, 2, 1, 0.5),
    0.04,
)
HEAVY = _Profile(
    "heavy",
    (15_000, 25_000),
    (5, 24),
    (300, 1_500, 4_000, 12_000, 40_000, 120_000, 400_000),
    (3, 4, 3, 2, 1, 0.6, 0.1),
    0.05,
)

ENDINGS = ("shutdown", "killed-in-tool", "killed-at-turn-start", "running")
DAMAGE_KINDS = (
    "duplicate",
    "crlf",
    "split",
    "glue",
    "utf8",
    "line-separator",
    "blank",
    "not-an-event",
    "nul-tail",
    "cut",
)


class _Session:
    """Drives one SessionBuilder through a random but seeded session of a profile."""

    def __init__(self, profile: _Profile, seed: int, start: datetime) -> None:
        self.profile = profile
        self.rng = random.Random(seed)
        self.text = _Text(random.Random(seed ^ 0x5EED))
        repository = self.rng.choice(REPOSITORIES)
        project = repository.split("/")[1] if repository else "scratch"
        self.b = SessionBuilder(
            seed=seed,
            start=start,
            model=self.rng.choice(MODELS),
            cwd=f"/home/dev/{project}",
            repository=repository,
            system_prompt_size=SYSTEM_PROMPT_BYTES,
        )
        self.autopilot = self.rng.random() < 0.3
        self.target = self.rng.randint(*profile.size_kb) * 1024
        # Rates tuned so that, over a corpus, `grep -F -c` is ~5% and `grep -c` ~10% high.
        self.query_rate = 0.032
        self.mention_rate = 0.011

    def build(self, ending: str | None = None) -> SessionBuilder:
        """The whole session; ``ending`` is one of ENDINGS (default: drawn at random)."""
        b, rng = self.b, self.rng
        if self.autopilot:
            b.mode_changed("autopilot")
        resume_at = self.target * rng.uniform(0.3, 0.7) if rng.random() < 0.25 else None
        while True:
            self.interaction()
            if b.size >= self.target:
                break
            if resume_at is not None and b.size >= resume_at:
                b.shutdown()
                b.advance(rng.randint(60_000, 86_400_000))
                b.resume()
                resume_at = None
            else:
                self.between_interactions()
        if ending is None:
            ending = rng.choices(ENDINGS, (16, 2, 1, 1))[0]
        if ending == "shutdown":
            b.shutdown()
        elif ending == "killed-in-tool":
            b.user_message(rng.choice(PROMPTS))
            b.turn("Running it.", [synth.bash("npm run e2e", never_completes=True)], end=False)
        elif ending == "killed-at-turn-start":
            b.user_message(rng.choice(PROMPTS))
            b.turn(None, end=False)
        # "running": stopped between turns with no shutdown (still running, or killed)
        return b

    def between_interactions(self) -> None:
        b, rng = self.b, self.rng
        roll = rng.random()
        if roll < 0.6:
            b.usage_checkpoint()
        elif roll < 0.64:
            b.compaction(rng.randint(-200, 60_000))
        elif roll < 0.67:
            b.model_change(rng.choice(MODELS))
        elif roll < 0.70:
            b.user_requested_shell("git status --short", " M src/app.ts", exit_code=0)
        elif roll < 0.71:
            b.abort("user initiated")

    def interaction(self) -> None:
        b, rng = self.b, self.rng
        prompts = MENTIONING_PROMPTS if rng.random() < self.mention_rate else PROMPTS
        b.user_message(rng.choice(prompts))
        huge = rng.random() < self.profile.huge_rate
        self.turns(rng.randint(*self.profile.turns) - 1, huge=huge)
        if not self.autopilot:
            b.turn(self.answer(final=True))
            return
        for _ in range(rng.choice((0, 0, 1, 2, 3))):
            b.turn(self.answer(final=True))
            b.nudge(flagged=rng.random() < 0.8)
            self.turns(rng.randint(1, 4))
        if rng.random() < 0.7:
            b.task_complete_turn("Implemented the change; all tests pass.")
        else:
            b.turn(self.answer(final=True))

    def answer(self, *, final: bool = False) -> str:
        if self.rng.random() < self.mention_rate * 2:
            return self.rng.choice(MENTIONING_ANSWERS)
        return ANSWERS[-1] if final else self.rng.choice(ANSWERS[:-1])

    def turns(self, count: int, *, huge: bool = False) -> None:
        b, rng = self.b, self.rng
        huge_at = rng.randrange(count) if huge and count > 0 else -1
        for index in range(count):
            roll = rng.random()
            if roll < 0.04:
                b.subagent_run(
                    "Run the test suite and summarise any failures.",
                    llm_calls=rng.randint(1, 4),
                    tool_calls=rng.randint(0, 3),
                    error="Error: sub-agent time budget exceeded" if rng.random() < 0.1 else None,
                )
                continue
            if roll < 0.05:
                b.turn(None)  # the provider failed: a turn with no message
                b.session_error("Request failed: 503 Service Unavailable", "query", 503)
                continue
            tools = [self.tool(huge=index == huge_at and n == 0) for n in range(self.tool_count())]
            if rng.random() < self.query_rate:
                tools.append(self.query_tool())
            b.turn(self.answer(), tools, parallel=len(tools) > 1 and rng.random() < 0.6)

    def tool_count(self) -> int:
        return self.rng.choices((1, 2, 3, 4), (6, 3, 1, 0.5))[0]

    def output_size(self) -> int:
        p = self.profile
        base = self.rng.choices(p.output_sizes, p.output_weights)[0]
        return int(base * self.rng.uniform(0.5, 1.5))

    def tool(self, *, huge: bool = False) -> ToolCall:
        rng, text = self.rng, self.text
        size = rng.randint(800_000, 1_500_000) if huge else self.output_size()
        out = text.output(size, mention=rng.random() < self.mention_rate)
        i = rng.randrange(1000)
        roll = rng.random()
        if roll < 0.35:
            failed = rng.random() < 0.05
            return synth.bash(
                f"npm test -- --grep case_{i}",
                out,
                exit_code=1 if failed else 0,
                success=not failed,
                error="command timed out" if failed else None,
            )
        if roll < 0.6:
            return synth.view(f"/home/dev/project/src/module_{i}.ts", out)
        if roll < 0.75:
            return synth.grep(f"function f{i}", out, path="src")
        if roll < 0.82:
            return synth.glob("src/**/*.ts", out[:2_000])
        if roll < 0.95:
            return synth.edit(f"src/module_{i}.ts", out[:200], out[200:400])
        return synth.create(f"src/new_{i}.ts", out[: max(size // 4, 100)])

    def query_tool(self) -> ToolCall:
        arguments = {"type": "assistant.turn_start", "session": "latest", "limit": 20}
        return ToolCall(QUERY_TOOL, arguments, result=self.text.mentions[0])


def _damage(
    lines: list[bytes], events: Sequence[dict[str, Any]], kinds: Sequence[str], rng: random.Random
) -> tuple[bytes, int]:
    """Apply the named kinds of damage; returns the bytes and the main-agent turns lost.

    Each kind hits a different line, never the last one (``cut`` owns it). Only ``cut`` can
    lose a turn_start (when the session was killed right after one); every other kind leaves
    the count a correct reader gives unchanged, while ``duplicate`` of a turn_start makes every
    line counter one too high.
    """
    out: list[list[bytes]] = [[line] for line in lines]
    used = {len(lines) - 1}

    def pick(wanted: Callable[[dict[str, Any]], bool]) -> int | None:
        candidates = [
            i
            for i, ev in enumerate(events[:-1])
            if i not in used and i + 1 not in used and wanted(ev)
        ]
        if not candidates:
            return None
        index = rng.choice(candidates)
        used.add(index)
        return index

    def main_turn(ev: dict[str, Any]) -> bool:
        return ev["type"] == "assistant.turn_start" and "agentId" not in ev

    def with_text(ev: dict[str, Any]) -> bool:
        return ev["type"] in ("assistant.message", "user.message") and bool(ev["data"]["content"])

    lost = 0
    for kind in kinds:
        if kind == "duplicate" and (i := pick(main_turn)) is not None:
            out[i] = list(synth.duplicate(lines[i]))
        elif kind == "crlf" and (i := pick(lambda ev: True)) is not None:
            out[i] = [synth.crlf(lines[i])]
        elif kind == "split" and (i := pick(with_text)) is not None:
            out[i] = list(synth.split_line(lines[i]))
        elif kind == "utf8" and (i := pick(with_text)) is not None:
            out[i] = [synth.invalid_utf8(lines[i])]
        elif kind == "line-separator" and (i := pick(with_text)) is not None:
            out[i] = [synth.raw_line_separator(lines[i])]
        elif kind == "blank" and (i := pick(lambda ev: True)) is not None:
            out[i] = [lines[i], synth.blank_line()]
        elif kind == "not-an-event" and (i := pick(lambda ev: True)) is not None:
            out[i] = [lines[i], synth.not_an_event()]
        elif (
            kind == "glue"
            and (i := pick(lambda ev: ev["type"] == "tool.execution_complete")) is not None
        ):
            # The complete event is cut and the next one glued on: the tool result is lost.
            used.add(i + 1)
            out[i] = [synth.glue_truncated(lines[i], lines[i + 1])]
            out[i + 1] = []
    data = synth.join_lines([line for group in out for line in group])
    if "cut" in kinds:
        data = synth.cut(data)
        lost += int(main_turn(events[-1]))
    if "nul-tail" in kinds:
        data = synth.nul_tail(data)
    return data, lost


def build_template(profile: _Profile, seed: int, start: datetime, damaged: bool) -> Template:
    session = _Session(profile, seed, start)
    rng = session.rng
    kinds: tuple[str, ...] = ()
    ending = None
    if damaged:
        kinds = tuple(rng.sample(DAMAGE_KINDS, rng.choice((1, 1, 2, 3))))
        if "cut" in kinds:
            # A cut last line means a killed session; half the time it was killed right after
            # a turn began, and the cut turn_start is lost to a reader but matched by grep.
            ending = rng.choice(("killed-in-tool", "killed-at-turn-start"))
    b = session.build(ending)
    events = b.events
    data, lost = _damage(b.lines(), events, kinds, rng) if kinds else (b.to_bytes(), 0)
    main_turns = sum(
        1 for ev in events if ev["type"] == "assistant.turn_start" and "agentId" not in ev
    )
    physical = data.split(b"\n")
    return Template(
        kind=profile.kind,
        session_id=b.session_id,
        data=data,
        llm_calls=main_turns - lost,
        damage=kinds,
        grep_f_lines=sum(1 for line in physical if GREP_F_PATTERN in line),
        grep_lines=sum(1 for line in physical if TURN_START in line),
        lines=len(physical) - (1 if data.endswith(b"\n") else 0),
        longest_line=max(len(line) for line in physical),
    )


# --------------------------------------------------------------------------------------------
# The corpus
# --------------------------------------------------------------------------------------------

#: Templates per kind (built lazily, so a small corpus builds few) and how often a session of
#: the corpus is of each kind: on average ~0.5 MB per session, 2,000 sessions per GB.
POOL = {SMALL.kind: 48, MEDIUM.kind: 24, LARGE.kind: 6}
WEIGHTS = {SMALL.kind: 0.79, MEDIUM.kind: 0.2, LARGE.kind: 0.01}
PROFILES = {p.kind: p for p in (SMALL, MEDIUM, LARGE, HEAVY)}
DAMAGED_SHARE = 0.12
FLAT_SHARE = 0.05
HEAVY_EVERY_MB = 256
FIRST_DAY = datetime(2026, 6, 1, 7, 0, tzinfo=UTC)


def default_folder(size_mb: int, seed: int) -> Path:
    base = Path(tempfile.gettempdir()) / "copilot-logs-bench"
    return base / f"corpus-v{GENERATOR_VERSION}-seed{seed}-{size_mb}mb"


class _Templates:
    """Templates of the pool, built on first use and kept."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.built: dict[tuple[str, int], Template] = {}

    def get(self, kind: str, index: int) -> Template:
        key = (kind, index)
        if key not in self.built:
            template_seed = hash_seed(self.seed, kind, index)
            rng = random.Random(template_seed)
            start = FIRST_DAY + timedelta(
                days=rng.randrange(90),
                minutes=rng.randrange(12 * 60),
                milliseconds=rng.randrange(1000),
            )
            damaged = rng.random() < DAMAGED_SHARE
            self.built[key] = build_template(PROFILES[kind], template_seed, start, damaged)
        return self.built[key]


def hash_seed(seed: int, kind: str, index: int) -> int:
    """A stable per-template seed (``hash()`` of a str is salted per process)."""
    return (seed * 1_000_003 + zlib.crc32(kind.encode())) * 10_007 + index


def _fresh_id(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def generate(folder: Path, size_mb: int, seed: int = 0) -> Manifest:
    """Write a corpus of about ``size_mb`` MB into ``folder`` (made empty) and its manifest."""
    began = time.perf_counter()
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    rng = random.Random(seed)
    templates = _Templates(seed)
    target = size_mb << 20
    heavy_count = max(1, round(size_mb / HEAVY_EVERY_MB)) if size_mb >= 64 else 0
    plan = [templates.get(HEAVY.kind, n) for n in range(heavy_count)]
    written = sum(len(t.data) for t in plan)
    kinds = list(WEIGHTS)
    weights = [WEIGHTS[k] for k in kinds]
    manifest = Manifest(
        generator_version=GENERATOR_VERSION,
        seed=seed,
        size_mb=size_mb,
        sessions=0,
        files=0,
        bytes=0,
        lines=0,
        llm_calls=0,
        grep_f_lines=0,
        grep_lines=0,
        damaged_files=0,
        heavy_sessions=heavy_count,
        largest_file="",
        largest_file_bytes=0,
        longest_line_bytes=0,
        generated_seconds=0.0,
    )

    def emit(template: Template) -> None:
        session_id = _fresh_id(rng)
        data = template.data.replace(template.session_id.encode(), session_id.encode())
        if rng.random() < FLAT_SHARE:
            path = folder / f"{session_id}.jsonl"
        else:
            path = folder / session_id / "events.jsonl"
            path.parent.mkdir()
            if rng.random() < 0.3:
                # Siblings a real session folder holds; readers must ignore them.
                (path.parent / "workspace.yaml").write_text(f"id: {session_id}\n")
        path.write_bytes(data)
        m = manifest
        m.sessions += 1
        m.files += 1
        m.bytes += len(data)
        m.lines += template.lines
        m.llm_calls += template.llm_calls
        m.grep_f_lines += template.grep_f_lines
        m.grep_lines += template.grep_lines
        m.damaged_files += bool(template.damage)
        m.longest_line_bytes = max(m.longest_line_bytes, template.longest_line)
        m.templates[template.kind] = m.templates.get(template.kind, 0) + 1
        if len(data) > m.largest_file_bytes:
            m.largest_file_bytes = len(data)
            m.largest_file = str(path.relative_to(folder))

    for template in plan:
        emit(template)
    while written < target:
        kind = rng.choices(kinds, weights)[0]
        template = templates.get(kind, rng.randrange(POOL[kind]))
        emit(template)
        written += len(template.data)
    manifest.generated_seconds = round(time.perf_counter() - began, 2)
    manifest.write(folder)
    return manifest


def ensure_corpus(
    size_mb: int, seed: int = 0, folder: Path | None = None
) -> tuple[Path, Manifest, bool]:
    """The cached corpus for (seed, size), built when missing; the flag says it was built now.

    It is built in a side folder and renamed into place, so an interrupted run never leaves a
    half corpus that a later run would measure.
    """
    folder = folder or default_folder(size_mb, seed)
    if (folder / MANIFEST).is_file():
        manifest = Manifest.read(folder)
        if manifest.generator_version == GENERATOR_VERSION:
            return folder, manifest, False
    partial = folder.with_name(f"{folder.name}.partial-{os.getpid()}")
    manifest = generate(partial, size_mb, seed)
    if folder.exists():
        shutil.rmtree(folder)
    partial.rename(folder)
    return folder, manifest, True


def session_files(folder: Path) -> list[Path]:
    """Every session log of a corpus, in a stable order."""
    files = [p for p in folder.iterdir() if p.suffix == ".jsonl"]
    files += [p / "events.jsonl" for p in folder.iterdir() if (p / "events.jsonl").is_file()]
    return sorted(files)


# --------------------------------------------------------------------------------------------
# One big file: the "single 2 GB file" of the memory bound
# --------------------------------------------------------------------------------------------


def _chunks(size_mb: int, seed: int, piece_mb: int) -> Iterator[tuple[bytes, int]]:
    """Lines of one long session, in pieces of ~``piece_mb``, with the main turns each holds.

    Each piece is built by its own SessionBuilder (so memory stays flat) sharing one session
    id; the first event of every later piece is re-chained to the last event before it.
    """
    target = size_mb << 20
    written = 0
    start = FIRST_DAY
    session_id: str | None = None
    last_id: str | None = None
    index = 0
    while written < target:
        session = _Session(HEAVY, hash_seed(seed, "single", index), start)
        if session_id is None:
            session_id = session.b.session_id
        else:
            session.b = SessionBuilder(
                session_id=session_id,
                seed=hash_seed(seed, "single", index),
                start=start,
                model=session.b.model,
                system_prompt_size=SYSTEM_PROMPT_BYTES,
            )
        b = session.b
        skip = 0 if index == 0 else 2  # later pieces drop their session.start and model_change
        session.target = min(piece_mb << 20, target - written)
        while b.size < session.target:
            session.interaction()
        last = written + b.size >= target
        if last:
            b.shutdown()
        lines = b.lines()[skip:]
        events = b.events[skip:]
        if last_id is not None and lines:
            first_parent = events[0]["parentId"]
            lines[0] = lines[0].replace(
                f'"parentId":"{first_parent}"'.encode(), f'"parentId":"{last_id}"'.encode()
            )
        last_id = events[-1]["id"]
        main_turns = sum(
            1 for ev in events if ev["type"] == "assistant.turn_start" and "agentId" not in ev
        )
        data = synth.join_lines(lines)
        written += len(data)
        start = datetime.fromisoformat(b.now) + timedelta(minutes=1)
        index += 1
        yield data, main_turns


def write_single_file(
    path: Path, size_mb: int, seed: int = 0, *, piece_mb: int = 20
) -> dict[str, int]:
    """One session of about ``size_mb`` MB at ``path``; returns its bytes and llm_calls."""
    path.parent.mkdir(parents=True, exist_ok=True)
    llm_calls = 0
    size = 0
    out: BinaryIO
    with path.open("wb") as out:
        for data, main_turns in _chunks(size_mb, seed, piece_mb):
            out.write(data)
            size += len(data)
            llm_calls += main_turns
    return {"bytes": size, "llm_calls": llm_calls}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.corpus",
        description="Build (or find) the seeded benchmark corpus and print its manifest.",
    )
    parser.add_argument("--size-mb", type=int, default=1024, help="about this many MB")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, help="folder [default: a cached temporary folder]")
    parser.add_argument(
        "--single-file", type=Path, metavar="PATH", help="write one session of --size-mb instead"
    )
    args = parser.parse_args(argv)
    if args.single_file is not None:
        figures = write_single_file(args.single_file, args.size_mb, args.seed)
        sys.stdout.write(orjson.dumps({"path": str(args.single_file), **figures}).decode() + "\n")
        return 0
    folder, manifest, _ = ensure_corpus(args.size_mb, args.seed, args.out)
    report = {"path": str(folder), **asdict(manifest)}
    sys.stdout.write(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode() + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
