"""The report page's one style sheet and one script, and the Content-Security-Policy that
allows exactly these two (by their sha256) and nothing else, so no text from a log can run in
the page even if escaping failed."""

from __future__ import annotations

import base64
import hashlib

STYLE = """
:root{color-scheme:light;--ink:#111827;--muted:#4b5563;--line:#e5e7eb;--accent:#1d4ed8}
*{box-sizing:border-box}
body{
  margin:0;
  font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;
  color:var(--ink);
  background:#f9fafb;
}
header,main{max-width:1260px;margin:0 auto;padding:0 16px}
header{padding-top:20px}
h1{font-size:22px;margin:0 0 4px}
h2{font-size:18px;margin:28px 0 8px;border-bottom:2px solid var(--line);padding-bottom:4px}
h3{font-size:15px;margin:0 0 2px;word-break:break-all}
p.meta,.facts{color:var(--muted);margin:0 0 8px}
nav a{margin-right:14px}
a{color:var(--accent)}
.card{
  background:#fff;
  border:1px solid var(--line);
  border-radius:8px;
  padding:12px;
  margin:10px 0;
  overflow-x:auto;
}
table{border-collapse:collapse;width:100%;font-size:13px;font-variant-numeric:tabular-nums}
th,td{padding:3px 7px;border-bottom:1px solid var(--line);text-align:left;white-space:nowrap}
td.num,th.num{text-align:right}
td.note{white-space:normal;min-width:280px}
th button{
  font:inherit;
  font-weight:600;
  background:none;
  border:0;
  padding:0;
  cursor:pointer;
  color:inherit;
}
th[aria-sort=ascending] button::after{content:" \\25B2"}
th[aria-sort=descending] button::after{content:" \\25BC"}
tbody tr:hover{background:#f3f4f6}
.chips span{
  display:inline-block;
  margin:0 8px 6px 0;
  padding:2px 10px;
  border-radius:12px;
  background:#e5e7eb;
}
.chips .bad{background:#fee2e2;color:#991b1b}
.chips .good{background:#dcfce7;color:#166534}
svg{display:block;max-width:none}
.mark{cursor:pointer}
.mark:focus{outline:none;stroke:#f59e0b;stroke-width:3}
g.mark:focus rect{stroke:#f59e0b;stroke-width:3}
#tip{
  position:absolute;
  z-index:9;
  max-width:520px;
  white-space:pre-wrap;
  background:#111827;
  color:#f9fafb;
  padding:6px 9px;
  border-radius:6px;
  font-size:12px;
  pointer-events:none;
}
#tip[hidden]{display:none}
.empty{color:var(--muted);font-style:italic}
input.all:not(:checked) ~ .card tr.more{display:none}
input.all + label{margin-left:4px;color:var(--accent);cursor:pointer}
"""

SCRIPT = """
(function () {
  var tip = document.getElementById('tip');
  function show(mark) {
    var title = mark.querySelector('title');
    if (!title) { return; }
    tip.textContent = title.textContent;
    tip.hidden = false;
    var box = mark.getBoundingClientRect();
    var room = window.scrollX + document.documentElement.clientWidth - tip.offsetWidth - 8;
    tip.style.left = Math.max(window.scrollX + 4, Math.min(box.left + window.scrollX, room)) + 'px';
    tip.style.top = (box.bottom + window.scrollY + 6) + 'px';
  }
  function hide() { tip.hidden = true; }
  function markOf(target) { return target.closest ? target.closest('.mark') : null; }
  document.addEventListener('mouseover', function (e) {
    var mark = markOf(e.target);
    if (mark) { show(mark); } else { hide(); }
  });
  document.addEventListener('focusin', function (e) {
    var mark = markOf(e.target);
    if (mark) { show(mark); }
  });
  document.addEventListener('focusout', hide);
  document.addEventListener('keydown', function (e) { if (e.key === 'Escape') { hide(); } });
  function key(row, column, numeric) {
    var value = row.cells[column].getAttribute('data-v');
    if (value === null || value === '') { return null; }
    return numeric ? parseFloat(value) : value.toLowerCase();
  }
  document.querySelectorAll('table.sortable').forEach(function (table) {
    var heads = table.querySelectorAll('thead th');
    heads.forEach(function (th, column) {
      th.querySelector('button').addEventListener('click', function () {
        var ascending = th.getAttribute('aria-sort') !== 'ascending';
        var numeric = th.classList.contains('num');
        heads.forEach(function (other) { other.removeAttribute('aria-sort'); });
        th.setAttribute('aria-sort', ascending ? 'ascending' : 'descending');
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) {
          var x = key(a, column, numeric), y = key(b, column, numeric);
          if (x === y) { return 0; }
          if (x === null) { return 1; }
          if (y === null) { return -1; }
          return (x < y ? -1 : 1) * (ascending ? 1 : -1);
        });
        rows.forEach(function (row) { body.appendChild(row); });
        var shown = table.getAttribute('data-shown');
        if (shown !== null) {  // the first rows in the new order are the ones shown
          rows.forEach(function (row, index) {
            row.classList.toggle('more', index >= parseInt(shown, 10));
          });
        }
      });
    });
  });
  document.documentElement.setAttribute('data-ready', 'yes');
})();
"""


def sha256(source: str) -> str:
    """The CSP source expression allowing exactly this inline style or script."""
    digest = hashlib.sha256(source.encode()).digest()
    return f"'sha256-{base64.b64encode(digest).decode()}'"


def policy(style: str = STYLE, script: str = SCRIPT) -> str:
    return (
        f"default-src 'none'; style-src {sha256(style)}; script-src {sha256(script)}; "
        "img-src data:; base-uri 'none'; form-action 'none'"
    )
