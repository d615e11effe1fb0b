"""The house rules of issue 13, checked on the package's own source.

The core (everything but ``cli/`` and ``render/``) never imports click or rich, a command's
code is found by its name, and the test-data generator is not part of the package. Sizes are
advice (docs/development.md, "Sizes"), not a test.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import click
import pytest

from copilot_logs.cli import main

PACKAGE = Path(__file__).resolve().parent.parent / "copilot_logs"
PRESENTATION = ("cli", "render")
"""The only subpackages that may import click or rich."""
CORE_OF = {"rules": "commands/validate", "cache": "store"}
"""Commands whose core is not a module of their own name: `rules` lists validate's rules,
`cache` shows the store."""


def modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return names


def test_the_core_never_imports_click_or_rich() -> None:
    offenders = [
        str(path.relative_to(PACKAGE.parent))
        for path in modules()
        if path.relative_to(PACKAGE).parts[0] not in PRESENTATION
        and imported(path) & {"click", "rich"}
    ]
    assert offenders == []


@pytest.mark.parametrize("command", sorted(main.list_commands(click.Context(main))))
def test_a_command_is_found_by_its_name(command: str) -> None:
    assert (PACKAGE / "cli" / f"{command}.py").is_file()
    core = PACKAGE / CORE_OF.get(command, f"commands/{command}")
    assert core.with_suffix(".py").is_file() or (core / "__init__.py").is_file()


def test_the_test_data_generator_is_not_in_the_package() -> None:
    assert not [p for p in modules() if "synth" in p.stem]
    assert not [p for p in modules() if "synth" in imported(p)]


LAYERS = {
    "errors": 0,
    "durations": 0,
    "modes": 0,
    "ingest": 1,
    "derive": 2,
    "store": 2,
    "commands": 3,
    "render": 4,
    "config": 5,
    "api": 5,
    "spark": 5,
    "cli": 6,
    "__init__": 7,
    "__main__": 7,
}
"""Data flows one way: a module imports only from its own stage or the stages below it."""


def stage(dotted: str) -> str:
    parts = dotted.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_data_flows_one_way() -> None:
    upward = []
    for path in modules():
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        own = stage(".".join(rel.parts))
        assert own in LAYERS, f"{path}: a stage the house does not know; add it to LAYERS"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [node.module]
            for name in names:
                if name.startswith("copilot_logs.") and LAYERS[stage(name)] > LAYERS[own]:
                    upward.append(f"{rel}: {name}")
    assert upward == []


def summary(path: Path) -> str:
    """A module's row in docs/architecture.md: the first paragraph of its docstring, on one
    line (``|`` escaped for the table)."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    return " ".join(doc.split("\n\n")[0].split()).replace("|", "\\|")


def test_the_architecture_page_lists_every_module() -> None:
    page = (PACKAGE.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    listed = dict(re.findall(r"^\| `(copilot_logs/[\w/]+\.py)` \| (.*) \|$", page, flags=re.M))
    real = {
        str(path.relative_to(PACKAGE.parent)): summary(path)
        for path in modules()
        if path.name != "__main__.py"
    }
    assert set(listed) == set(real)
    # Each row says what its module's docstring says first; the rows to paste when it fails:
    stale = [f"| `{name}` | {real[name]} |" for name in sorted(real) if listed[name] != real[name]]
    assert stale == [], "\n".join(stale)


def test_every_module_says_what_it_is() -> None:
    assert [str(path) for path in modules() if not summary(path)] == []


DECODERS = {
    "json.load",
    "json.loads",
    "orjson.loads",
    "msgspec.json.decode",
    "msgspec.json.Decoder",
    "polars.read_ndjson",
    "polars.scan_ndjson",
}
"""What decodes JSON text: outside ``ingest/``, none of these may appear."""
OWN_JSON = {
    # export's manifest reads the _manifest.json it wrote itself into OUT, not a log
    "copilot_logs/commands/export.py",
    # the store reads the dtypes it wrote into its own entries' headers
    "copilot_logs/store/entry.py",
    # diff reads the baseline it wrote itself (--save-baseline), not a log
    "copilot_logs/commands/diff/baseline.py",
    # otel --skip-existing reads OpenTelemetry files (the CLI's own spans), which are no log
    "copilot_logs/commands/otel/__init__.py",
    # otel --endpoint reads the collector's answer (OTLP's partialSuccess)
    "copilot_logs/commands/otel/push.py",
    # doctor reads the recorded resumes it ships as package data (evidence.json)
    "copilot_logs/commands/doctor/__init__.py",
}
"""Modules outside ``ingest/`` that decode JSON that is not an event line: each says why."""


def decoders_used(source: str) -> list[str]:
    """Each use (a call, an import, a mere reference) of a :data:`DECODERS` name in ``source``,
    through whatever name it was imported as."""
    tree = ast.parse(source)
    names: dict[str, str] = {}
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                names[alias.asname or top] = alias.name if alias.asname else top
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                dotted = f"{node.module}.{alias.name}"
                names[alias.asname or alias.name] = dotted
                found += [dotted] if dotted in DECODERS else []
    for node in ast.walk(tree):
        parts: list[str] = []
        inner: ast.expr = node  # type: ignore[assignment]
        while isinstance(inner, ast.Attribute):
            parts.insert(0, inner.attr)
            inner = inner.value
        if isinstance(inner, ast.Name) and inner.id in names and isinstance(node, ast.expr):
            dotted = ".".join([names[inner.id], *parts])
            found += [dotted] if dotted in DECODERS else []
    return found


@pytest.mark.parametrize(
    "source",
    [
        "import orjson\norjson.loads(b'{}')",
        "import orjson as fast\nrows = map(fast.loads, lines)",
        "from orjson import loads\nloads(b'{}')",
        "import json\njson.loads('{}')",
        "import msgspec\nDECODER = msgspec.json.Decoder(dict)",
        "from msgspec import json\njson.decode(b'{}')",
        "def f():\n    import polars as pl\n    return pl.read_ndjson(path)",
    ],
)
def test_the_decoder_check_sees_every_spelling(source: str) -> None:
    assert decoders_used(source)


def test_no_module_outside_ingest_decodes_an_event_line() -> None:
    # One decoder of an event line: the reader's (ingest/). Everything else reads the frames,
    # or asks ingest (ingest.decode.parse_line / parse_detail).
    offenders = {
        str(path.relative_to(PACKAGE.parent)): used
        for path in modules()
        if path.relative_to(PACKAGE).parts[0] != "ingest"
        and str(path.relative_to(PACKAGE.parent)) not in OWN_JSON
        and (used := decoders_used(path.read_text(encoding="utf-8")))
    }
    assert offenders == {}
    assert [name for name in OWN_JSON if not (PACKAGE.parent / name).is_file()] == []


PAYLOAD_READS = {"json_path_match", "json_decode", "json_extract", "parse_detail", "parse_line"}
"""What reads a payload's JSON text: polars' JSON expressions, ingest's payload parsers."""
OWN_PAYLOAD = {
    # the store's own JSON (its rows of plain values), not a log's payload
    "copilot_logs/store/entry.py": {"json_decode"},
    # doctor --repair rewrites whole event lines (through ingest's parse_line): it reads where
    # a line's parent and counters are, never a figure or a fact of the session
    "copilot_logs/commands/doctor/repair.py": {"parse_line"},
}


def payload_reads(source: str) -> set[str]:
    """Each :data:`PAYLOAD_READS` name used in ``source``, as an attribute or a name, and each
    use of the ``detail`` column by name."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr in PAYLOAD_READS:
            found.add(node.attr)
        elif isinstance(node, ast.Name) and node.id in PAYLOAD_READS:
            found.add(node.id)
        elif isinstance(node, ast.alias) and node.name in PAYLOAD_READS:
            found.add(node.name)
        elif isinstance(node, ast.Constant) and node.value == "detail":
            found.add("detail")
    return found


@pytest.mark.parametrize(
    "source",
    [
        'pl.col("detail").str.json_path_match("$.summary")',
        "from copilot_logs.ingest.decode import parse_detail",
        'frame["detail"]',
        "texts.str.json_decode(dtype)",
    ],
)
def test_the_payload_check_sees_every_spelling(source: str) -> None:
    assert payload_reads(source)


def test_only_the_reader_and_the_session_model_read_payloads() -> None:
    # What a session is (when it ended, which completion counts, where a credit went) is read
    # from the payloads once, by the session model (derive/) over the reader's columns
    # (ingest/); every command reads the model's columns.
    offenders = {
        name: used
        for path in modules()
        if path.relative_to(PACKAGE).parts[0] not in ("ingest", "derive")
        and (used := payload_reads(path.read_text(encoding="utf-8")))
        - OWN_PAYLOAD.get(name := str(path.relative_to(PACKAGE.parent)), set())
    }
    assert offenders == {}


READERS = {
    f"copilot_logs.ingest.reader.{name}"
    for name in (
        "read_many",
        "read_many_bytes",
        "read_stream",
        "read_source",
        "read_bytes",
        "FileReader",
        "decode_run",
    )
} | {"copilot_logs.ingest.events_frame"}
"""What reads a log's bytes into events: outside ``ingest/``, only ``store/`` may use these."""
OWN_READ = {
    # count --total reads through the same block reader into a counting sink (no frames): its
    # warm path answers from the store's headers, its cold path is reader.count_calls
    "copilot_logs/commands/count_total.py": {
        "copilot_logs.ingest.reader",
        "copilot_logs.ingest.reader.count_calls",
    },
}


def readers_used(source: str) -> set[str]:
    """Each import of a :data:`READERS` name (or of the reader module itself) in ``source``,
    and each reader function called through ``reader.NAME``."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                dotted = f"{node.module}.{alias.name}"
                if (
                    dotted in READERS
                    or node.module in READERS
                    or dotted == "copilot_logs.ingest.reader"
                ):
                    found.add(dotted)
        elif isinstance(node, ast.Import):
            found.update(
                a.name for a in node.names if a.name.startswith("copilot_logs.ingest.reader")
            )
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "reader"
        ):
            found.add(f"copilot_logs.ingest.reader.{node.attr}")
    return found


@pytest.mark.parametrize(
    "source",
    [
        "from copilot_logs.ingest.reader import read_many",
        "from copilot_logs.ingest.reader import ReadResult, read_stream as rs",
        "from copilot_logs.ingest import reader\nreader.read_source(s)",
        "from copilot_logs.ingest.reader import FileReader",
        "from copilot_logs.ingest import events_frame",
    ],
)
def test_the_reader_check_sees_every_spelling(source: str) -> None:
    assert readers_used(source) - {"copilot_logs.ingest.reader.ReadResult"}


def test_every_command_reads_logs_through_the_store() -> None:
    # One read path: ingest/ reads the bytes, store/ (collect.py) hands every command its
    # batches. A command, the API, watch or Spark that read a log on its own would skip the
    # store's key, its isolation of a log that fails, and its batches.
    allowed_types = {
        "copilot_logs.ingest.reader.ReadResult",
        "copilot_logs.ingest.reader.ReadState",
    }
    offenders = {
        name: used
        for path in modules()
        if path.relative_to(PACKAGE).parts[0] not in ("ingest", "store")
        and (name := str(path.relative_to(PACKAGE.parent)))
        and (
            used := readers_used(path.read_text(encoding="utf-8"))
            - allowed_types
            - OWN_READ.get(name, set())
        )
    }
    assert offenders == {}
