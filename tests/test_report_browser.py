"""The report in a real browser: headless Chromium opens the file from disk, runs its script
under its own Content-Security-Policy, and the test reads the DOM it leaves and its console.

Skipped only where no Chromium binary exists (`.ci/run` installs one). Screenshots are kept
under .pytest_cache/report-screenshots/ (sample_sessions.png, real-samples.png) to look at.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

from copilot_logs.cli import main
from synth import SessionBuilder, view
from tests.conftest import NO_CHROMIUM, NO_EDGE_SAMPLES, PROJECT, SAMPLES
from tests.report_corpus import write_corpus
from tests.test_report import EXPECTED, HOSTILE_PROMPT, Page, hostile_session

# Opens the report in a headless Chromium (tier `browser`: make test-all, CI).
pytestmark = pytest.mark.browser

BROWSERS = ("chromium", "chromium-headless-shell", "chromium-browser", "google-chrome")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--enable-logging=stderr",
    "--v=0",
)
SHOTS = PROJECT / ".pytest_cache" / "report-screenshots"


@dataclass
class Opened:
    dom: str
    console: list[str]


@pytest.fixture(scope="module")
def browser() -> str:
    found = next((path for name in BROWSERS if (path := shutil.which(name))), None)
    if found is None:
        pytest.skip(NO_CHROMIUM)
    return found


def chromium(
    browser: str, page: Path, tmp_path: Path, *action: str
) -> subprocess.CompletedProcess[str]:
    profile = tmp_path / f"profile-{len(list(tmp_path.glob('profile-*')))}"
    return subprocess.run(
        [browser, *FLAGS, f"--user-data-dir={profile}", *action, page.resolve().as_uri()],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def open_page(browser: str, page: Path, tmp_path: Path) -> Opened:
    """The DOM after the page's scripts ran, and every message the page put on the console
    (errors, CSP violations, uncaught exceptions)."""
    done = chromium(browser, page, tmp_path, "--dump-dom")
    console = [
        line for line in done.stderr.splitlines() if ":CONSOLE" in line or "Uncaught" in line
    ]
    return Opened(done.stdout, console)


def screenshot(
    browser: str, page: Path, tmp_path: Path, name: str, size: str = "1280,2400"
) -> Path:
    """The page as Chromium draws it, kept as .pytest_cache/report-screenshots/NAME.png to look
    at (said nowhere: a line among the dots would alarm)."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    shot = SHOTS / f"{name}.png"
    shot.unlink(missing_ok=True)
    chromium(browser, page, tmp_path, f"--screenshot={shot}", f"--window-size={size}")
    assert shot.is_file() and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    return shot


def report(tmp_path: Path, *args: str) -> Path:
    out = tmp_path / "report.html"
    result = CliRunner().invoke(main, ["report", *args, "-o", str(out)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return out


def session_ids(folder: Path) -> set[str]:
    """The ids in each log's session.start, read by hand."""
    ids = set()
    for log in folder.rglob("*.jsonl"):
        for line in log.read_bytes().splitlines():
            if b'"session.start"' in line:
                ids.add(json.loads(line)["data"]["sessionId"])
    return ids


def check_rendered(opened: Opened, expected_ids: set[str]) -> None:
    assert opened.console == []
    assert 'data-ready="yes"' in opened.dom  # the script ran: the CSP let it
    dom = Page(opened.dom)
    timelines = [a["data-session"] for a in dom.all("article")]
    assert sorted(timelines) == sorted(expected_ids)  # one timeline per session
    headings = "".join(dom.texts["h3"])
    assert all(sid in headings for sid in expected_ids)  # every session named
    assert len(dom.all("svg")) >= len(expected_ids)


def test_samples_render_in_chromium(browser: str, tmp_path: Path) -> None:
    page = report(tmp_path, str(SAMPLES))
    check_rendered(open_page(browser, page, tmp_path), set(EXPECTED))
    screenshot(browser, page, tmp_path, "sample_sessions")


def test_real_samples_render_in_chromium(browser: str, real_samples: Path, tmp_path: Path) -> None:
    page = report(tmp_path, str(real_samples))
    check_rendered(open_page(browser, page, tmp_path), session_ids(real_samples))
    screenshot(browser, page, tmp_path, "real-samples")


def test_edge_case_real_logs_render_in_chromium(browser: str, tmp_path: Path) -> None:
    edge = PROJECT.parent / "shared" / "real-samples-edge"
    if not edge.is_dir():
        pytest.skip(NO_EDGE_SAMPLES)
    page = report(tmp_path, str(edge))
    # One file there holds two session.start lines: how many sessions it makes is the
    # reader's call, so the oracle is the `sessions` command's list.
    listed = CliRunner().invoke(main, ["sessions", str(edge), "--format", "json"])
    check_rendered(
        open_page(browser, page, tmp_path), {row["session_id"] for row in json.loads(listed.stdout)}
    )


def test_focusing_a_mark_shows_its_details(browser: str, tmp_path: Path) -> None:
    """Keyboard users get what a mouse hover gives: the focused mark's details, shown (a mark
    takes focus, and the page answers the focus event)."""
    focus_failed_tool = """
      var mark = document.querySelector('.mark.tool_failed');
      mark.focus();
      // A headless window may not hold system focus, and then focus() sends no event:
      // send the one a Tab press would.
      mark.dispatchEvent(new FocusEvent('focusin', {bubbles: true}));
      var tip = document.getElementById('tip');
      document.body.setAttribute('data-focused', document.activeElement === mark ? 'yes' : 'no');
      document.body.setAttribute('data-tip', tip.hidden ? 'hidden' : tip.textContent);
    """
    builder = SessionBuilder()
    builder.user_message("Fix it.")
    builder.turn("Looking.", [view("a.py", error="no such file")])
    builder.turn("Done.")
    builder.shutdown()
    builder.write_to(tmp_path / "logs")
    page = _with_script(report(tmp_path, str(tmp_path / "logs")), focus_failed_tool)
    opened = open_page(browser, page, tmp_path)
    assert opened.console == []
    dom = Page(opened.dom)
    (body,) = dom.all("body")
    assert body["data-focused"] == "yes"
    assert body["data-tip"].startswith("view (failed), turn 1\n")
    assert "no such file" in body["data-tip"] and '{"path":"a.py"}' in body["data-tip"]


def test_hostile_log_text_stays_text_in_the_browser(browser: str, tmp_path: Path) -> None:
    builder = hostile_session(tmp_path / "logs")
    opened = open_page(browser, report(tmp_path, str(tmp_path / "logs")), tmp_path)
    check_rendered(opened, {builder.session_id})
    dom = Page(opened.dom)
    assert not dom.all("img") and not dom.all("b") and not dom.all("i")
    assert len(dom.all("script")) == 1
    assert HOSTILE_PROMPT[:30] in "".join(dom.texts["title"])


def _with_script(page: Path, script: str) -> Path:
    """The page with one more inline script, allowed by adding its hash to the CSP."""
    html = page.read_text()
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    html = html.replace("script-src ", f"script-src 'sha256-{digest}' ", 1)
    html = html.replace("</body>", f"<script>{script}</script></body>", 1)
    changed = page.with_name("changed.html")
    changed.write_text(html)
    return changed


def test_clicking_a_heading_sorts_the_sessions_table(browser: str, tmp_path: Path) -> None:
    click_calls = """
      var table = document.querySelector('table[aria-label=sessions]');
      var heads = Array.prototype.slice.call(table.tHead.rows[0].cells);
      var calls = heads.filter(function (h) { return h.textContent === 'calls'; })[0];
      calls.querySelector('button').click();
      calls.querySelector('button').click();
      var ids = Array.prototype.map.call(table.tBodies[0].rows, function (row) {
        return row.cells[0].getAttribute('data-v');
      });
      document.body.setAttribute('data-order', ids.join(','));
      document.body.setAttribute('data-sort', calls.getAttribute('aria-sort'));
    """
    page = _with_script(report(tmp_path, str(SAMPLES)), click_calls)
    opened = open_page(browser, page, tmp_path)
    assert opened.console == []
    match = re.search(r'<body data-order="([^"]*)" data-sort="([^"]*)"', opened.dom)
    assert match is not None
    order = match[1].split(",")
    assert match[2] == "descending"
    assert [EXPECTED[sid]["llm_calls"] for sid in order] == sorted(
        (e["llm_calls"] for e in EXPECTED.values()), reverse=True
    )


def test_a_script_the_policy_does_not_allow_is_caught(browser: str, tmp_path: Path) -> None:
    """The console check can fail: an inline script without its hash is refused and said so."""
    page = report(tmp_path, str(SAMPLES))
    bad = page.with_name("bad.html")
    bad.write_text(page.read_text().replace("</body>", "<script>alert(1)</script></body>"))
    opened = open_page(browser, bad, tmp_path)
    assert any("Content Security Policy" in line for line in opened.console)


# --- a large corpus: what needs attention above the fold (issue 33) ----------------------

MEASURE_THE_FOLD = """
  var fold = window.innerHeight, width = document.documentElement.clientWidth;
  var body = document.body;
  function chip(words) {
    var found = Array.prototype.filter.call(
      document.querySelectorAll('#attention .chips span'),
      function (c) { return c.textContent.indexOf(words) >= 0; });
    return found.length ? found[0] : null;
  }
  function bottom(el) {
    return el ? String(Math.round(el.getBoundingClientRect().bottom)) : 'none';
  }
  body.setAttribute('data-fold', String(fold));
  body.setAttribute('data-failing-bottom', bottom(chip(' failing (')));
  body.setAttribute('data-looping-bottom', bottom(chip(' looping: ')));
  var sessions = document.querySelector('table[aria-label=sessions]');
  var heads = Array.prototype.slice.call(sessions.tHead.rows[0].cells);
  var right = {};
  heads.forEach(function (h) {
    right[h.textContent] = Math.round(h.getBoundingClientRect().right);
  });
  body.setAttribute('data-width', String(width));
  body.setAttribute('data-rights', JSON.stringify(right));
  function visible() {
    return Array.prototype.filter.call(sessions.tBodies[0].rows,
      function (r) { return r.offsetParent !== null; }).length;
  }
  body.setAttribute('data-visible', String(visible()));
  var calls = heads.filter(function (h) { return h.textContent === 'calls'; })[0];
  calls.querySelector('button').click();
  calls.querySelector('button').click();  // most calls first
  var column = heads.indexOf(calls);
  var shownCalls = Array.prototype.filter.call(sessions.tBodies[0].rows,
    function (r) { return r.offsetParent !== null; }).map(function (r) {
      return parseInt(r.cells[column].getAttribute('data-v'), 10); });
  body.setAttribute('data-visible-sorted', String(shownCalls.length));
  var last = -1;  // the last row shown, in the table's new order
  Array.prototype.forEach.call(sessions.tBodies[0].rows, function (r, index) {
    if (r.offsetParent !== null) { last = index; }
  });
  body.setAttribute('data-last-shown', String(last));
  body.setAttribute('data-sorted-first', String(shownCalls[0]));
  document.querySelector('label[for=all-sessions]').click();
  body.setAttribute('data-visible-all', String(visible()));
"""
PROBLEM_COLUMNS = ("status", "verdict", "looping", "resume", "errors", "done", "damaged")


def test_a_large_corpus_opens_with_what_needs_attention_above_the_fold(
    browser: str, tmp_path: Path
) -> None:
    """Three hundred real-shaped sessions (tests/report_corpus.py): the failing verdicts and
    the loops are on the first screen of a 1400 x 900 window, the sessions table lists what
    needs attention first, its problem columns fit the width, and it shows 50 rows until
    asked for all."""
    truth = write_corpus(tmp_path / "logs", sessions=300)
    page = report(tmp_path, "--root", str(tmp_path / "logs"), "--quiet")
    screenshot(browser, page, tmp_path, "corpus-300-above-the-fold", size="1400,900")
    measured = _with_script(page, MEASURE_THE_FOLD)
    done = chromium(browser, measured, tmp_path, "--window-size=1400,900", "--dump-dom")
    (body,) = Page(done.stdout).all("body")
    fold = int(body["data-fold"])
    assert 0 < int(body["data-failing-bottom"]) <= fold, body
    assert 0 < int(body["data-looping-bottom"]) <= fold, body
    rights = json.loads(body["data-rights"])
    for column in PROBLEM_COLUMNS:
        assert rights[column] <= int(body["data-width"]), (column, rights)
    assert (body["data-visible"], body["data-visible-all"]) == ("50", "300")
    # Sorted, the 50 shown are the first in the new order: the most calls among all.
    assert (body["data-visible-sorted"], body["data-last-shown"]) == ("50", "49")
    assert int(body["data-sorted-first"]) == _most_calls(tmp_path / "logs")
    # The order, from the kinds written: every session that needs attention before any other.
    listed = _sessions_table_ids(page.read_text())  # as written, before the clicks above
    assert sorted(listed) == sorted(truth.kinds)
    calm = truth.ids("chat", "completed")
    first_calm = min(listed.index(session) for session in calm)
    assert set(listed[:first_calm]) == set(truth.kinds) - calm


def _sessions_table_ids(dom: str) -> list[str]:
    """The session ids of the sessions table, in the order of its rows."""
    table = dom.split('aria-label="sessions"', 1)[1].split("</table>", 1)[0]
    return re.findall(r'<tr[^>]*><td data-v="([^"]+)"', table)


def _most_calls(root: Path) -> int:
    """The most LLM calls of any session, as `sessions --format json` counts them."""
    listed = CliRunner().invoke(main, ["sessions", "--root", str(root), "--format", "json"])
    return max(row["llm_calls"] for row in json.loads(listed.stdout))
