"""Frames -> text: a rich table for people, json / ndjson / csv / markdown for machines.

Machine formats go to stdout with stable snake_case field names, the text exactly as logged;
times are ISO-8601 UTC strings with a ``Z``. Text for people (tables, markdown, annotations)
shows log text through :mod:`copilot_logs.render.output`; all of it leaves through
:mod:`copilot_logs.render.output`.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from copilot_logs.ingest.decode.envelope import STDIN
from copilot_logs.render import output
from copilot_logs.render.humanize import plural
from copilot_logs.render.output import json_text, markdown_cell, one_line

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


def write_csv(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> None:
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow([_cell(row.get(name)) for name in columns])
    output.write_exact(text.getvalue())


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


def _format(column: Column, value: Any) -> str:
    if column.format is not None:
        return column.format(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.2f}"
    return _cell(value)


def _fit(columns: Sequence[Column], cells: list[list[str]], width: int) -> list[int]:
    """Indexes of the columns to show: most important first, while the table fits."""
    from rich.cells import cell_len

    natural = []
    for index, column in enumerate(columns):
        longest = max([len(column.header), *(cell_len(row[index]) for row in cells)])
        if column.max_width:
            longest = min(longest, column.max_width)
        natural.append(longest + 3)
    chosen: list[int] = []
    used = 1
    for index in sorted(range(len(columns)), key=lambda i: (columns[i].priority, i)):
        if used + natural[index] <= width or not chosen:
            chosen.append(index)
            used += natural[index]
    return sorted(chosen)


def print_table(
    frame: pl.DataFrame,
    columns: Sequence[Column],
    *,
    title: str | None = None,
    totals: dict[str, Any] | None = None,
    width: int | None = None,
) -> None:
    """A rich table that fits the terminal: low-priority columns go first when it is narrow.
    Every cell is one line of plain text (no markup is read from it)."""
    with output.rich_console(width=width) as console:
        console.print(_table(frame, columns, title, totals, console.width))


def _table(
    frame: pl.DataFrame,
    columns: Sequence[Column],
    title: str | None,
    totals: dict[str, Any] | None,
    width: int,
) -> Table:
    from rich.table import Table
    from rich.text import Text

    rows = frame.to_dicts()
    cells = [[one_line(_format(c, row.get(c.field))) for c in columns] for row in rows]
    total_cells = [one_line(_format(c, totals.get(c.field))) if totals else "" for c in columns]
    shown = _fit(columns, [*cells, total_cells] if totals else cells, width)
    table = Table(title=title, show_footer=totals is not None, box=None, pad_edge=False)
    for index in shown:
        column = columns[index]
        table.add_column(
            column.header,
            footer=Text(total_cells[index]) if totals else "",
            justify="right" if column.numeric else "left",
            no_wrap=True,
            overflow="ellipsis",
            max_width=column.max_width,
            header_style="bold",
            footer_style="bold",
        )
    for row in cells:
        table.add_row(*(Text(row[index]) for index in shown))
    return table


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
    """One GitHub Actions workflow command (``::error file=f,line=3,title=t::message``).

    ``level`` is ``error``, ``warning`` or ``notice``.
    """
    properties = []
    if file:
        properties.append(f"file={_escape_property(file)}")
    if line:
        properties.append(f"line={line}")
    if title:
        properties.append(f"title={_escape_property(title)}")
    joined = (" " + ",".join(properties)) if properties else ""
    return f"::{level}{joined}::{_escape_data(message)}"


# --- damaged lines, as warnings on stderr -------------------------------------------------------

MAX_DAMAGE_LINES = 20


def report_damage(diagnostics: pl.DataFrame) -> None:
    """Each damaged line on stderr as FILE:LINE: kind: message, a few per file; two problems
    of one line in the order of their kind, so the report never depends on how batches ran."""
    ordered = diagnostics.sort("file", "line", "kind", "message")
    rows = ordered.select("file", "line", "kind", "message", "more_lines")
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


def print_damage(rows: Iterable[tuple[str, int, str, str, int | None]]) -> None:
    """(file, line, kind, message, more_lines) rows, in order, on stderr; at most
    MAX_DAMAGE_LINES a file, then how many more problems, on how many lines. A row that sums
    up the problems of a kind the reader did not list (``more_lines`` set) is always shown:
    it says how many there were."""
    shown: dict[str, int] = {}
    unshown_lines: dict[str, set[int]] = {}
    for file, line, kind, message, more_lines in rows:
        if more_lines is not None:
            output.echo(f"warning: {one_line(file)}:{line}: {kind}: {one_line(message)}", err=True)
            continue
        shown[file] = shown.get(file, 0) + 1
        if shown[file] <= MAX_DAMAGE_LINES:
            output.echo(f"warning: {one_line(file)}:{line}: {kind}: {one_line(message)}", err=True)
        else:
            unshown_lines.setdefault(file, set()).add(line)
    for file, lines in unshown_lines.items():
        problems = shown[file] - MAX_DAMAGE_LINES
        target = "-` on the same input" if file == STDIN else f"{one_line(file)}`"
        output.echo(
            f"warning: {one_line(file)}: {plural(problems, 'more problem')} on "
            f"{plural(len(lines), 'line')}; run `copilot-logs validate {target} to "
            "list them all",
            err=True,
        )
