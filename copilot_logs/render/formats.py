"""Frames -> text: a rich table for people, json / ndjson / csv / markdown for machines.

Machine formats keep stable snake_case field names, the text exactly as logged, and times as
ISO-8601 UTC with a ``Z``.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from copilot_logs.ingest.logfile import STDIN
from copilot_logs.render import output
from copilot_logs.render.escape import json_text, markdown_cell, one_line
from copilot_logs.render.humanize import plural

if TYPE_CHECKING:
    import polars as pl
    from rich.table import Table

ISO_MS = "%Y-%m-%dT%H:%M:%S%.3fZ"


def plain(frame: pl.DataFrame) -> pl.DataFrame:
    """Datetimes as ISO strings, everything else as it is: ready for JSON."""
    import polars as pl

    return frame.with_columns(
        pl.col(name).dt.convert_time_zone("UTC").dt.to_string(ISO_MS)
        if dtype.time_zone is not None
        else pl.col(name).dt.to_string(ISO_MS)
        for name, dtype in frame.schema.items()
        if isinstance(dtype, pl.Datetime)
    )


def records(frame: pl.DataFrame) -> list[dict[str, Any]]:
    return plain(frame).to_dicts()


def write_json(value: Any) -> None:
    text = orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode()
    output.write_exact(json_text(text) + "\n")


def write_ndjson(rows: Sequence[dict[str, Any]]) -> None:
    lines = (orjson.dumps(row, option=orjson.OPT_NON_STR_KEYS).decode() + "\n" for row in rows)
    output.write_exact(json_text("".join(lines)))


def _cell(value: Any) -> str:
    """A csv cell. CSV has no escapes of its own and is read by people and CI logs as often as
    by programs: a control character or a line break in log text is shown as a visible escape
    (as in the tables), so a row stays one line and no line can start a workflow command; json
    keeps the exact text."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | dict):
        return one_line(orjson.dumps(value).decode())
    return one_line(str(value))


FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
"""What makes a spreadsheet read a cell as a formula (OWASP, "CSV Injection")."""


def csv_cell(value: Any) -> str:
    """A csv cell (see :func:`_cell`); text that a spreadsheet would run as a formula (a
    repository, branch, model or tool name from a log beginning with ``=``, ``+``, ``-``,
    ``@``, a tab or a carriage return) gets a leading ``'``, as OWASP recommends, so it is
    shown as text. Numbers are written as they are (``-3`` stays a number)."""
    cell = _cell(value)
    if isinstance(value, str) and value.startswith(FORMULA_START):
        return "'" + cell
    return cell


def write_csv(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> None:
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow([csv_cell(row.get(name)) for name in columns])
    output.write_exact(text.getvalue(), escape="text")


def write_frame(frame: pl.DataFrame, fmt: str) -> None:
    """The machine formats of a flat frame: json (a list of objects), ndjson, csv."""
    rows = records(frame)
    if fmt == "json":
        write_json(rows)
    elif fmt == "ndjson":
        write_ndjson(rows)
    elif fmt == "csv":
        write_csv(rows, frame.columns)
    else:  # pragma: no cover - the CLI only passes known formats
        raise ValueError(fmt)


# --- tables for people -------------------------------------------------------------------


@dataclass(frozen=True)
class Column:
    """A table column: the frame field, its header, and how much it matters when space is short
    (lower ``priority`` is dropped last)."""

    field: str
    header: str
    priority: int = 1
    numeric: bool = False
    max_width: int | None = None
    format: Callable[[Any], str] | None = None
    style: Callable[[Any], str | None] | None = None
    """The rich style of a cell, from its value (a colour terminal only shows it)."""


def _format(column: Column, value: Any) -> str:
    if column.format is not None:
        return column.format(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.2f}"
    return _cell(value)


def _fit(columns: Sequence[Column], cells: list[list[str]], width: int) -> tuple[list[int], bool]:
    """Indexes of the columns to show, and whether their text is cut to their ``max_width``:
    every column whole when the table fits; else the most important first, cut, while it
    fits."""
    from rich.cells import cell_len

    natural = [
        max([len(column.header), *(cell_len(row[index]) for row in cells)]) + 3
        for index, column in enumerate(columns)
    ]
    if 1 + sum(natural) <= width:
        return list(range(len(columns))), False
    capped = [
        min(longest, column.max_width + 3) if column.max_width else longest
        for longest, column in zip(natural, columns, strict=True)
    ]
    chosen: list[int] = []
    used = 1
    for index in sorted(range(len(columns)), key=lambda i: (columns[i].priority, i)):
        if used + capped[index] <= width or not chosen:
            chosen.append(index)
            used += capped[index]
    return sorted(chosen), True


def print_table(
    frame: pl.DataFrame,
    columns: Sequence[Column],
    *,
    title: str | None = None,
    totals: dict[str, Any] | None = None,
    width: int | None = None,
    notes: Sequence[str] = (),
) -> None:
    """A rich table that fits the terminal: low-priority columns go first when it is narrow,
    and a caption names them. Every cell is one line of plain text (no markup is read from
    it). ``notes`` are lines said under the table (what a row's label cannot hold). No row, no
    table: neither a lone header nor a note on hidden columns."""
    if frame.is_empty():
        return
    with output.rich_console(width=width) as console:
        table, hidden = _table(frame, columns, title, totals, console.width)
        console.print(table)
        for note in notes:
            console.print(one_line(note), overflow="fold", markup=False)
        if hidden:
            console.print(
                f"{plural(len(hidden), 'column')} hidden to fit {console.width} columns: "
                f"{', '.join(hidden)}. --format json gives every field; a wider terminal (or "
                "COLUMNS=N) shows more.",
                style="dim",
                overflow="fold",
            )


def _table(
    frame: pl.DataFrame,
    columns: Sequence[Column],
    title: str | None,
    totals: dict[str, Any] | None,
    width: int,
) -> tuple[Table, list[str]]:
    """The table, and the headers of the columns left out to fit ``width``."""
    from rich.table import Table
    from rich.text import Text

    rows = frame.to_dicts()
    cells = [[one_line(_format(c, row.get(c.field))) for c in columns] for row in rows]
    total_cells = [one_line(_format(c, totals.get(c.field))) if totals else "" for c in columns]
    shown, cut = _fit(columns, [*cells, total_cells] if totals else cells, width)
    table = Table(title=title, show_footer=totals is not None, box=None, pad_edge=False)
    for index in shown:
        column = columns[index]
        table.add_column(
            column.header,
            footer=Text(total_cells[index]) if totals else "",
            justify="right" if column.numeric else "left",
            no_wrap=True,
            overflow="ellipsis",
            max_width=column.max_width if cut else None,
            header_style="bold",
            footer_style="bold",
        )
    for row, values in zip(cells, rows, strict=True):
        styles = [(c.style(values.get(c.field)) if c.style else None) or "" for c in columns]
        table.add_row(*(Text(row[i], style=styles[i]) for i in shown))
    return table, [column.header for index, column in enumerate(columns) if index not in shown]


def write_table(
    frame: pl.DataFrame,
    fmt: str,
    columns: Sequence[Column],
    *,
    totals: Callable[[], dict[str, Any]] | None = None,
) -> None:
    """``frame`` in ``fmt``: for people, the table of ``columns`` (with the row ``totals``
    makes); else the machine formats of :func:`write_frame`."""
    if fmt != "table":
        write_frame(frame, fmt)
    else:
        print_table(frame, columns, totals=totals() if totals else None)


def markdown_table(frame: pl.DataFrame, columns: Sequence[Column]) -> str:
    """A GitHub-flavoured markdown table (for pull-request comments); each cell one line, its
    pipes and backslashes escaped."""
    lines = [
        "| " + " | ".join(c.header for c in columns) + " |",
        "|" + "|".join("---:" if c.numeric else "---" for c in columns) + "|",
    ]
    for row in frame.to_dicts():
        values = [markdown_cell(_format(c, row.get(c.field))) for c in columns]
        lines.append("| " + " | ".join(values) + " |")
    return "\n".join(lines) + "\n"


# --- CI formats ------------------------------------------------------------------------------


def _escape_data(text: str) -> str:
    """GitHub's escaping of a workflow command's data, then every other control character as
    a visible escape (the runner would print it raw into the job log)."""
    escaped = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return one_line(escaped)


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def github_annotation(
    level: str,
    message: str,
    *,
    file: str | None = None,
    line: int | None = None,
    title: str | None = None,
) -> str:
    """One GitHub Actions workflow command (``::error file=f,line=3,title=t::message``)."""
    properties = {"file": file and _escape_property(file), "line": line}
    properties["title"] = title and _escape_property(title)
    joined = ",".join(f"{name}={value}" for name, value in properties.items() if value)
    joined = " " + joined if joined else ""
    return f"::{level}{joined}::{_escape_data(message)}"


# --- damaged lines, as warnings on stderr -------------------------------------------------------

MAX_DAMAGE_LINES = 20
"""Problems listed one a line: at most this many a file, and, when several files are damaged,
at most this many in all (beyond that, one summary line)."""


def report_damage(diagnostics: pl.DataFrame, *, quiet: bool = False) -> None:
    """Each damaged line on stderr as FILE:LINE: kind: message, a few per file; two problems
    of one line in the order of their kind, so the report never depends on how batches ran.
    Nothing with ``quiet`` (--quiet)."""
    if quiet or diagnostics.is_empty():
        return
    ordered = diagnostics.sort("file", "line", "kind", "message")
    rows = ordered.select("file", "line", "kind", "message", "more_lines", "new_lines")
    print_damage(rows.iter_rows())


def report_growth(names: Sequence[str]) -> None:
    """One line on stderr naming the logs that grew while the command read them (each was read
    as far as it went when the command reached it)."""
    if not names:
        return
    which = one_line(names[0]) + (f" and {plural(len(names) - 1, 'other')}" if names[1:] else "")
    output.echo(
        f"warning: {plural(len(names), 'log')} grew while being read ({which}): each was read "
        "as far as it went when the command reached it; run the command again to include the "
        "rest",
        err=True,
    )


Damage = tuple[str, int, str, str, "int | None", "int | None"]
"""file, line, kind, message, more_lines, new_lines (see DIAGNOSTICS_SCHEMA)."""


def _count_damage(problems: list[Damage], files: int) -> None:
    """One line counting the damaged lines and problems of several files (a row that sums up
    a kind counts the lines it stands for)."""
    listed = [row for row in problems if row[4] is None]
    lines = len({(file, line) for file, line, *_ in listed})
    lines += sum(row[5] or 0 for row in problems)
    count = len(listed) + sum(row[4] or 0 for row in problems)
    output.echo(
        f"warning: {plural(lines, 'damaged line')} in {plural(files, 'file')} "
        f"({plural(count, 'problem')}), each read as far as it could be; run "
        "`copilot-logs validate --select E1` on the same logs to list them "
        "(--quiet: no damage warnings)",
        err=True,
    )


def print_damage(rows: Iterable[Damage], *, quiet: bool = False) -> None:
    """(file, line, kind, message, more_lines, new_lines) rows, in order, on stderr: at most
    MAX_DAMAGE_LINES a file, then how many more problems, on how many lines; more than
    MAX_DAMAGE_LINES over several files, one line that counts them. A row that sums up the
    problems of a kind the reader did not list one by one (``more_lines`` set) is shown as it
    is: it says how many there were. Nothing with ``quiet``."""
    problems = [] if quiet else list(rows)
    files = {file for file, *_ in problems}
    if len(files) > 1 and len(problems) > MAX_DAMAGE_LINES:
        _count_damage(problems, len(files))
        return
    shown: dict[str, int] = {}
    unshown_lines: dict[str, set[int]] = {}
    for file, line, kind, message, more_lines, _ in problems:
        if more_lines is not None:
            output.echo(f"warning: {one_line(file)}:{line}: {kind}: {one_line(message)}", err=True)
            continue
        shown[file] = shown.get(file, 0) + 1
        if shown[file] <= MAX_DAMAGE_LINES:
            output.echo(f"warning: {one_line(file)}:{line}: {kind}: {one_line(message)}", err=True)
        else:
            unshown_lines.setdefault(file, set()).add(line)
    for file, lines in unshown_lines.items():
        more = shown[file] - MAX_DAMAGE_LINES
        target = "-` on the same input" if file == STDIN else f"{one_line(file)}`"
        output.echo(
            f"warning: {one_line(file)}: {plural(more, 'more problem')} on "
            f"{plural(len(lines), 'line')}; run `copilot-logs validate {target} to "
            "list them all",
            err=True,
        )
