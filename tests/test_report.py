"""`copilot-logs report` and `timeline --format svg` without a browser: the page parsed with
html.parser, the SVG with an XML parser, figures checked against expected.json and the log
lines themselves."""

from __future__ import annotations

import base64
import errno
import hashlib
import json
import os
import re
import stat
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

from copilot_logs.cli import main
from copilot_logs.render import html
from copilot_logs.render.svg import tick_step
from synth import SessionBuilder, bash, task, view
from tests.conftest import SAMPLES

COMPLETED_LOG = SAMPLES / "c3d2e5f4-6d7f-4e80-a192-2c3d4e5f6071" / "events.jsonl"

EXPECTED: dict[str, dict[str, Any]] = json.loads((SAMPLES / "expected.json").read_text())
SVG = "{http://www.w3.org/2000/svg}"
HOSTILE_PROMPT = '<script>alert("pwned")</script> & "quotes" \x1b[31mred\u202egnp.exe'
HOSTILE_ARGS = '{"command": "\\"><img src=x onerror=alert(1)>"}'


class Page(HTMLParser):
    """What a test needs from the report: elements with their attributes, the inline script
    and style, the text of each element kind."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str]]] = []
        self.texts: dict[str, list[str]] = {}
        self._open: list[str] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, {k: v or "" for k, v in attrs}))
        self._open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        while self._open and self._open.pop() != tag:
            pass

    def handle_data(self, data: str) -> None:
        if self._open:
            self.texts.setdefault(self._open[-1], []).append(data)

    def all(self, tag: str) -> list[dict[str, str]]:
        return [attrs for name, attrs in self.elements if name == tag]


def run(*args: str) -> Any:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def write_report(tmp_path: Path, *args: str) -> Page:
    out = tmp_path / "report.html"
    result = run("report", *args, "-o", str(out))
    assert result.exit_code == 0, result.output
    return Page(out.read_text(encoding="utf-8"))


def hostile_session(root: Path) -> SessionBuilder:
    builder = SessionBuilder(session_id='bad<id>"x', repository='evil/"><b>repo</b>')
    builder.user_message(HOSTILE_PROMPT)
    builder.turn("<i>answer</i>", [bash("rm -rf /", error="<b>denied</b>"), view("a.py", "x")])
    builder.shutdown()
    builder.write_to(root, layout="flat")
    return builder


def test_the_page_lists_every_sample_session_and_draws_each_one(tmp_path: Path) -> None:
    page = write_report(tmp_path, str(SAMPLES))
    drawn = [a["data-session"] for a in page.all("article")]
    assert sorted(drawn) == sorted(EXPECTED)
    # Newest first, by the start times the sample generator wrote down.
    assert drawn == sorted(EXPECTED, key=lambda sid: EXPECTED[sid]["start"], reverse=True)
    table_ids = [
        attrs["data-v"]
        for attrs in page.all("td")
        if attrs.get("data-v") in EXPECTED and attrs.get("class") is None
    ]
    assert set(table_ids) == set(EXPECTED)
    assert len(page.all("svg")) >= len(EXPECTED) + 1  # a timeline each, the day chart


def test_timelines_limits_the_pictures_not_the_tables(tmp_path: Path) -> None:
    page = write_report(tmp_path, str(SAMPLES), "--timelines", "2")
    newest = sorted(EXPECTED, key=lambda sid: EXPECTED[sid]["start"], reverse=True)
    assert [a["data-session"] for a in page.all("article")] == newest[:2]
    linked = {a["href"] for a in page.all("a") if re.fullmatch(r"#t\d+", a.get("href", ""))}
    assert linked == {"#t1", "#t2"}
    assert {a["data-v"] for a in page.all("td")} >= set(EXPECTED)


def test_session_figures_are_those_of_the_logs(tmp_path: Path) -> None:
    """The calls column of each session row holds what expected.json counted."""
    out = tmp_path / "r.html"
    run("report", str(SAMPLES), "-o", str(out))
    sessions_table = out.read_text().split('aria-label="sessions">')[1].split("</table>")[0]
    rows = re.findall(r"<tr>(.*?)</tr>", sessions_table)
    found = {}
    for row in rows:
        values = re.findall(r'data-v="([^"]*)"', row)
        if values and values[0] in EXPECTED:
            found[values[0]] = values
    assert set(found) == set(EXPECTED)
    calls_at = 10  # session, started, took, repository, branch, cli, model, mode, prompts, nudges
    assert {sid: int(v[calls_at]) for sid, v in found.items()} == {
        sid: e["llm_calls"] for sid, e in EXPECTED.items()
    }


def test_calls_per_day_add_up_to_the_sessions_calls(tmp_path: Path) -> None:
    page = write_report(tmp_path, str(SAMPLES), "--tz", "UTC")
    days = [t for t in page.texts.get("title", []) if re.match(r"\d{4}-\d\d-\d\d: ", t)]
    main_calls = sum(int(re.search(r": (\d+) LLM calls", t)[1]) for t in days)  # type: ignore[index]
    sub_calls = sum(int(re.search(r"(\d+) sub-agent calls", t)[1]) for t in days)  # type: ignore[index]
    assert main_calls == sum(e["llm_calls"] for e in EXPECTED.values())
    assert sub_calls == sum(e["subagent_calls"] for e in EXPECTED.values())
    by_day: dict[str, int] = {}
    for e in EXPECTED.values():
        by_day[e["start"][:10]] = by_day.get(e["start"][:10], 0) + e["llm_calls"]
    assert {t[:10] for t in days} == set(by_day)


def table_rows(html: str, label: str) -> list[list[str]]:
    """The data-v values of each row of the table with this aria-label."""
    body = html.split(f'aria-label="{label}">')[1].split("</table>")[0]
    return [re.findall(r'data-v="([^"]*)"', row) for row in re.findall(r"<tr>(.*?)</tr>", body)][1:]


def test_usage_audit_and_findings_are_those_of_the_logs(tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    run("report", str(SAMPLES), "-o", str(out))
    html = out.read_text()
    usage = table_rows(html, "usage per model")  # model, sessions, requests, premium, ...
    known = [e for e in EXPECTED.values() if e["requests"] is not None]
    assert sum(int(row[2]) for row in usage) == sum(e["requests"] for e in known)
    assert sum(float(row[3]) for row in usage) == pytest.approx(
        sum(e["premium_requests"] for e in known)
    )
    assert {row[0] for row in usage} == {m for e in EXPECTED.values() for m in e["models"]}

    audited = {row[0]: row[1] for row in table_rows(html, "audit")}
    autopilot = {sid: e for sid, e in EXPECTED.items() if e["mode"] == "autopilot"}
    assert audited == {
        sid: "completed" if e["task_complete"] else "nudge-cap" for sid, e in autopilot.items()
    }

    statistics = json.loads(
        run("validate", str(SAMPLES), "--statistics", "--format", "json").stdout
    )["statistics"]
    shown = {row[0]: int(row[3]) for row in table_rows(html, "findings by rule")}
    assert shown == {rule["code"]: rule["count"] for rule in statistics}


def test_log_text_shows_as_text_and_never_as_markup(tmp_path: Path) -> None:
    hostile_session(tmp_path / "logs")
    out = tmp_path / "r.html"
    assert run("report", str(tmp_path / "logs"), "-o", str(out)).exit_code == 0
    raw = out.read_text(encoding="utf-8")
    page = Page(raw)
    assert len(page.all("script")) == 1  # ours
    assert not page.all("img") and not page.all("b") and not page.all("i")
    assert not any(k.startswith("on") for _, attrs in page.elements for k in attrs)
    titles = "\n".join(page.texts["title"])
    assert '<script>alert("pwned")</script> & "quotes"' in titles  # shown, as text
    assert "\x1b" not in raw and "\u202e" not in raw
    assert "\\x1b[31mred\\u202egnp.exe" in titles  # visible escapes instead
    assert 'bad<id>"x' in "".join(page.texts["h3"])
    assert [a["data-session"] for a in page.all("article")] == ['bad<id>"x']  # attribute kept whole
    assert "<b>denied</b>" in titles


def test_the_page_allows_only_its_own_style_and_script(tmp_path: Path) -> None:
    page = write_report(tmp_path, str(SAMPLES))
    (meta,) = [m for m in page.all("meta") if m.get("http-equiv") == "Content-Security-Policy"]
    directives = dict(d.strip().split(" ", 1) for d in meta["content"].split(";"))
    assert directives["default-src"] == "'none'"

    def digest(source: str) -> str:
        return (
            "'sha256-" + base64.b64encode(hashlib.sha256(source.encode()).digest()).decode() + "'"
        )

    assert directives["script-src"] == digest("".join(page.texts["script"]))
    assert directives["style-src"] == digest("".join(page.texts["style"]))
    assert "unsafe" not in meta["content"]


def test_nothing_in_the_page_points_outside_it(tmp_path: Path) -> None:
    page = write_report(tmp_path, str(SAMPLES))
    for _tag, attrs in page.elements:
        for name in ("src", "href", "action", "xlink:href"):
            value = attrs.get(name)
            if value is not None:
                assert value.startswith("#"), (name, value)
    assert not re.search(r"url\(|@import|https?:", "".join(page.texts["style"]))


def test_a_dozen_sessions_stay_small(tmp_path: Path) -> None:
    write_report(tmp_path, str(SAMPLES))
    assert (tmp_path / "report.html").stat().st_size < 1 << 20


def test_report_to_stdout_and_nothing_found(tmp_path: Path) -> None:
    result = run("report", str(SAMPLES / "07f6c938-ab13-4c24-a5d6-60718293a4b5"), "-o", "-")
    assert result.exit_code == 0
    assert result.stdout.startswith("<!DOCTYPE html>")
    assert 'data-session="07f6c938-ab13-4c24-a5d6-60718293a4b5"' in result.stdout
    (tmp_path / "empty").mkdir()
    out = tmp_path / "none.html"
    result = run("report", "--root", str(tmp_path / "empty"), "-o", str(out))
    assert result.exit_code == 0
    assert "No sessions found" in result.stderr
    assert not out.exists()


def test_a_missing_path_is_one_line_and_exit_2(tmp_path: Path) -> None:
    result = run("report", str(tmp_path / "nope"), "-o", str(tmp_path / "r.html"))
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and "no such file or folder" in result.stderr


def test_an_unwritable_output_is_one_line_and_exit_2(tmp_path: Path) -> None:
    target = tmp_path / "no" / "r.html"
    result = run("report", str(SAMPLES), "-o", str(target))
    assert result.exit_code == 2
    assert result.stderr.startswith(f"Error: -o {target}: cannot write the report there")
    assert result.stderr.count("\n") == 1  # said before reading: no damage warnings either
    result = run("report", str(SAMPLES), "-o", str(tmp_path))
    assert result.exit_code == 2 and "is a directory" in result.stderr


@pytest.mark.parametrize(
    ("log_modes", "umask", "page_mode"),
    [
        ((0o600,), 0o022, 0o600),  # Copilot CLI's logs: a private page, whatever the umask
        ((0o644,), 0o022, 0o644),  # logs others may read: so may they the page
        ((0o644,), 0o077, 0o600),  # never more open than the umask
        ((0o644, 0o600), 0o022, 0o600),  # several logs: the bits they all share
        ((0o666,), 0o002, 0o664),  # group may write too; others not, by the umask
    ],
)
def test_the_page_gets_the_mode_of_the_logs_it_shows(
    tmp_path: Path, log_modes: tuple[int, ...], umask: int, page_mode: int
) -> None:
    """Decided (issue 33, docs/report.md): one rule for every file made of logs: the mode of
    the logs it came from. The page named with -o replaces an older one of another mode."""
    logs = []
    for index, mode in enumerate(log_modes):
        log = tmp_path / "logs" / f"s{index}.jsonl"
        log.parent.mkdir(exist_ok=True)
        log.write_bytes(COMPLETED_LOG.read_bytes())
        log.chmod(mode)
        logs.append(str(log))
    out = tmp_path / "r.html"
    out.write_text("an older page")
    out.chmod(0o644 if page_mode == 0o600 else 0o600)
    old = os.umask(umask)
    try:
        assert run("report", *logs, "-o", str(out)).exit_code == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE(out.stat().st_mode) == page_mode


def test_a_page_through_a_link_is_written_to_its_target(tmp_path: Path) -> None:
    target = tmp_path / "site" / "index.html"
    target.parent.mkdir()
    link = tmp_path / "r.html"
    link.symlink_to(target)
    assert run("report", str(SAMPLES), "-o", str(link)).exit_code == 0
    assert link.is_symlink() and "<!DOCTYPE html>" in target.read_text()[:200]


def test_a_full_disk_leaves_the_older_page_and_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "r.html"
    out.write_text("an older page")
    real = os.fdopen

    class Full:
        def __init__(self, stream: Any) -> None:
            self.stream = stream

        def __enter__(self) -> Full:
            return self

        def __exit__(self, *args: Any) -> None:
            self.stream.close()

        def write(self, data: bytes) -> int:
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(html.os, "fdopen", lambda *a, **k: Full(real(*a, **k)))
    result = CliRunner().invoke(main, ["report", str(SAMPLES), "-o", str(out)])
    assert result.exit_code == 3
    assert [line for line in result.stderr.splitlines() if line.startswith("Error:")] == [
        f"Error: -o {out}: cannot write the report there (No space left on device); free some "
        "space and run it again"
    ]
    assert out.read_text() == "an older page"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.html"]


# --- timeline --format svg --------------------------------------------------------------------


def svg_of(path: Path) -> ET.Element:
    result = run("timeline", str(path), "--format", "svg")
    assert result.exit_code == 0, result.output
    return ET.fromstring(result.stdout)


def marks(root: ET.Element, kind: str) -> list[ET.Element]:
    return [e for e in root.iter() if kind in (e.get("class") or "").split()]


def test_timeline_svg_draws_each_call_and_marks_each_failed_tool(tmp_path: Path) -> None:
    builder = SessionBuilder()
    builder.user_message("Fix it.")
    builder.turn("Looking.", [view("a.py", error="no such file"), bash("ls", "a.py")])
    builder.turn("Delegating.", [task("run tests", llm_calls=2, tool_calls=1)])
    builder.turn("Done.")
    builder.shutdown()
    path = builder.write(tmp_path / "s.jsonl")
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    main_turns = [e for e in lines if e["type"] == "assistant.turn_start" and "agentId" not in e]
    failed = [
        e for e in lines if e["type"] == "tool.execution_complete" and not e["data"]["success"]
    ]
    all_tools = [e for e in lines if e["type"] == "tool.execution_start"]

    root = svg_of(path)
    assert root.tag == f"{SVG}svg"
    assert len(marks(root, "turn")) == len(main_turns) == 3
    assert len(marks(root, "tool_failed")) == len(failed) == 1
    assert len(marks(root, "tool")) == len(all_tools)
    assert len(marks(root, "subagent")) == 1
    assert len(marks(root, "subagent-call")) == 2
    tip = marks(root, "tool_failed")[0].find(f"{SVG}title")
    assert tip is not None and tip.text is not None
    assert "view (failed)" in tip.text and "no such file" in tip.text
    assert all(m.get("tabindex") == "0" for m in marks(root, "mark"))


def test_timeline_svg_stays_valid_xml_with_hostile_text(tmp_path: Path) -> None:
    hostile_session(tmp_path)
    (path,) = tmp_path.glob("*.jsonl")
    root = svg_of(path)  # would raise on a raw control character or markup
    titles = " ".join(t.text or "" for t in root.iter(f"{SVG}title"))
    assert '<script>alert("pwned")</script>' in titles
    assert "\\x1b" in titles


def test_timeline_svg_keeps_log_text_off_its_own_lines(tmp_path: Path) -> None:
    """A line break in a prompt is a character reference in the SVG: the picture still shows
    it, but no line of the file begins with log text (a CI log would run `::error::`)."""
    builder = SessionBuilder(repository="octo\n::error::injected\r\n::warning::too")
    builder.user_message("Fix it.")
    builder.turn("Done.")
    builder.shutdown()
    path = builder.write(tmp_path / "s.jsonl")
    result = run("timeline", str(path), "--format", "svg")
    assert result.exit_code == 0, result.output
    assert not [line for line in result.stdout.splitlines() if line.lstrip().startswith("::")]
    titles = " ".join(t.text or "" for t in ET.fromstring(result.stdout).iter(f"{SVG}title"))
    assert "octo\n::error::injected" in titles


def test_timeline_svg_wants_one_session(tmp_path: Path) -> None:
    result = run("timeline", str(SAMPLES), "--format", "svg")
    assert result.exit_code == 2
    assert "draws one session" in result.stderr and "11 were selected" in result.stderr
    (tmp_path / "empty.jsonl").write_bytes(b"")
    result = run("timeline", str(tmp_path / "empty.jsonl"), "--format", "svg")
    assert (result.exit_code, result.stdout) == (3, "")
    assert "empty" in result.stderr
    (tmp_path / "none").mkdir()
    result = run("timeline", "--root", str(tmp_path / "none"), "--format", "svg")
    assert (result.exit_code, result.stdout) == (0, "")
    assert "No sessions found" in result.stderr


@pytest.mark.parametrize(
    ("span", "step"),
    [
        (1_000, 100),
        (9_000, 1_000),
        (55_000, 10_000),
        (7_200_000, 900_000),
        (86_400_000, 10_800_000),
    ],
)
def test_axis_steps_are_round_and_few(span: int, step: int) -> None:
    assert tick_step(span) == step
    assert span / step <= 10


def test_a_long_idle_stretch_is_cut_to_a_marked_break(tmp_path: Path) -> None:
    builder = SessionBuilder()
    builder.user_message("First.")
    builder.turn("One.")
    builder.advance(2 * 3_600_000)
    builder.user_message("Back after two hours.")
    builder.turn("Two.")
    builder.shutdown()
    root = svg_of(builder.write(tmp_path / "s.jsonl"))
    (idle,) = marks(root, "idle")
    title = idle.find(f"{SVG}title")
    assert title is not None and title.text is not None and title.text.startswith("2h00m")
    first, second = marks(root, "turn")
    # On a linear axis a turn of a second or two in a two-hour session is a sliver.
    assert float(first.get("width") or 0) > 50 and float(second.get("width") or 0) > 50
    assert float(first.get("x") or 0) < float(second.get("x") or 0) <= 1200


def test_no_line_of_the_svg_or_the_page_is_a_ci_command(tmp_path: Path) -> None:
    """Both go to stdout (`timeline --format svg`, `report -o -`), where a CI runs a line that
    begins with `::`: a line break in log text is written as a character reference."""
    builder = SessionBuilder(repository="octo/x\n::error::repo")
    builder.user_message("hi\n::error::prompt")
    builder.turn("ok", [bash("true")])
    builder.session_error("::error::boom")
    builder.shutdown()
    path = builder.write(tmp_path / "ci.jsonl")
    svg = run("timeline", str(path), "--format", "svg").stdout
    page = run("report", str(path), "-o", "-").stdout
    for output in (svg, page):
        assert not [line for line in output.splitlines() if line.lstrip().startswith("::")]
        assert "octo/x&#10;::error::repo" in output  # shown, the break a reference
        assert "query: ::error::boom" in output  # mid-line: harmless, kept as it is
    ET.fromstring(svg)  # still valid XML


def _tick_ms(label: str) -> float:
    """A tick label read back by hand: ``0``, ``1.2s``, ``1m05s``, ``1h02m03.4s``."""
    if label == "0":
        return 0.0
    found = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:([\d.]+)s)?", label)
    assert found is not None and label, label
    hours, minutes, seconds = (float(part or 0) for part in found.groups())
    return (hours * 3600 + minutes * 60 + seconds) * 1000


@pytest.mark.parametrize(
    ("span_ms", "idle_ms"),
    [
        (700, None),
        (1_800, None),  # 0 0.2s ... 0.8s 1s 1s 1s 1s before: whole seconds for a 200 ms step
        (2_900, None),
        (4_700, None),
        (12_345, None),
        (75_400, None),
        (3_900_000, None),
        (1_800, 2 * 3_600_000 + 3_456),  # a break, then under two seconds of work
        (65_000, 3_600_000 + 61_500),
    ],
)
def test_tick_labels_are_distinct_and_in_order_at_every_duration(
    tmp_path: Path, span_ms: int, idle_ms: int | None
) -> None:
    builder = SessionBuilder()  # its start written 520 ms in: the span is span_ms + 521
    builder.user_message("Go.", after_ms=1)
    if idle_ms is not None:
        builder.info("waiting", "away", after_ms=1)
        builder.info("resumed", "back", after_ms=idle_ms)
    for _ in range(12):  # busy all along: no stretch is cut to a break
        builder.info("progress", "still here", after_ms=span_ms // 12)
    builder.shutdown(after_ms=1)
    root = svg_of(builder.write(tmp_path / "s.jsonl"))
    labels = [element.text or "" for element in marks(root, "tick")]
    assert len(labels) >= 3, labels
    assert len(set(labels)) == len(labels), labels
    times = [_tick_ms(label) for label in labels]
    assert times == sorted(times), labels


def test_the_page_opens_with_what_needs_attention_as_audit_and_the_logs_say(
    tmp_path: Path,
) -> None:
    """The chips of "Needs attention" against the kinds written (tests/report_corpus.py) and
    `audit`'s own wasted calls: issue 33 found the report silent on 5 loops and 54 calls."""
    from tests.report_corpus import write_corpus

    truth = write_corpus(tmp_path / "logs", sessions=60, seed=3)
    page = run("report", "--root", str(tmp_path / "logs"), "-o", "-", "--quiet").stdout
    head = page.split('<section id="sessions">', 1)[0]
    assert '<section id="attention">' in head  # before the sessions table
    chips = re.findall(r'<div class="chips">(.*?)</div>', head)[0]
    failing = truth.ids("capped-looping", "missing-task-complete", "errored", "interrupted")
    looping = truth.ids("capped-looping", "completed-looping")
    audited = orjson.loads(
        run("audit", "--root", str(tmp_path / "logs"), "--format", "json").stdout
    )
    wasted = sum(row["wasted_calls"] for row in audited if row["looping"])
    assert f"{len(failing)} failing (" in chips
    assert f"{len(looping)} looping: {wasted:,} LLM calls wasted" in chips
    assert f"{len(truth.ids('damaged'))} damaged (" in chips
    attention = head.split('aria-label="needs attention"', 1)[1].split("</table>", 1)[0]
    listed = re.findall(r'<tr[^>]*><td data-v="([^"]+)"', attention)
    assert listed and set(listed) <= set(truth.kinds) - truth.ids("chat", "completed")
