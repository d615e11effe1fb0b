"""E1xx envelope: each line is one whole event, with an id, a parent, a time and a type.

Most of these the reader finds while it reads (damage it reports as diagnostics of a kind);
the others are checks over the events it kept.
"""

from __future__ import annotations

import polars as pl

from copilot_logs.commands.validate.rule import LOG, Context, Family, found, text, timestamp
from copilot_logs.derive import TYPE
from copilot_logs.ingest.cli_format import EPHEMERAL_TYPES, KNOWN_TYPES

ENVELOPE = Family("E")

_UUID = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
EPHEMERAL = TYPE.is_in(list(EPHEMERAL_TYPES)) | TYPE.str.ends_with("_delta")

ENVELOPE.reports(
    {
        ("E101", "invalid-json", "error", ("invalid-json",)): """A line is not valid JSON.

        Each line of events.jsonl is one JSON object. A line that does not parse (and is not an
        event split by raw newlines, or a cut last line, which have rules of their own) holds an
        event that is lost: every figure computed from the log may be short by it. The reader skips
        the line and goes on.
        """,
        ("E102", "not-an-event", "error", ("not-an-event", "incomplete-envelope")): """
        A line is JSON but not an event: it lacks type, id, timestamp or data.

        Every event carries an envelope of `type` (string), `id`, `timestamp` and `data` (object). A
        JSON value that is not an object or has no `type` is skipped; an object with a type but no
        `id`, `timestamp` or `data` is kept, but cannot be chained, ordered or read fully. Either
        way the line was not written by the CLI as it stands.
        """,
        ("E103", "duplicate-event-id", "error", ("duplicate-id",)): """
        Two lines carry the same event id.

        Event ids are UUIDs, unique in a log. A second line with an id already read is a replayed or
        copied line; the reader keeps the first and drops the later one, so nothing is counted
        twice, but the file is no longer the one the CLI wrote. The finding points at the repeated
        line.
        """,
    }
)


@ENVELOPE.rule("E104", "broken-parent-chain", "error")
def parent_chain(ctx: Context) -> pl.LazyFrame:
    """An event's parentId is not the id of the event on the line before it.

    `parentId` chains each line to the previous line's event (null on the first line), sub-agent
    lines included. A break means lines were removed, inserted or reordered after they were written
    (a dropped line, an edit, two logs spliced together). The finding points at the first line after
    the break. Files with no parentId at all (a writer that does not chain) are not checked.
    """
    chained = pl.col("parent_id").is_not_null().any().over(LOG)
    broken = ctx.events.filter(chained & ~pl.col("parent_id").eq_missing(pl.col("_prev_id")))
    message = (
        pl.when(pl.col("_prev_id").is_null() & (pl.col("_row") == 0))
        .then(pl.format("the first event has parentId {}; it should have none", "parent_id"))
        .otherwise(
            pl.format(
                "parentId {} is not the id of the previous event ({} on line {}): lines were "
                "removed, added or reordered",
                text(pl.col("parent_id")),
                text(pl.col("_prev_id")),
                text(pl.col("_prev_line")),
            )
        )
    )
    return found(broken, message)


@ENVELOPE.rule("E105", "timestamp-backwards", "error")
def timestamps(ctx: Context) -> pl.LazyFrame:
    """An event's timestamp is earlier than the previous event's.

    The CLI appends events as they happen, so timestamps never decrease down the file. A timestamp
    earlier than the line before it means lines were reordered or edited, and durations computed
    from the log (turns, tools, sessions) would be wrong or negative.
    """
    backwards = ctx.events.filter(pl.col("timestamp") < pl.col("_prev_ts"))
    return found(
        backwards,
        pl.format(
            "timestamp {} is earlier than the previous event's {} (line {})",
            timestamp(pl.col("timestamp")),
            timestamp(pl.col("_prev_ts")),
            "_prev_line",
        ),
    )


def _first_of_type(frame: pl.LazyFrame) -> pl.LazyFrame:
    return frame.with_columns(_lines=pl.len().over(LOG, "type")).unique(
        subset=[LOG, "type"], keep="first", maintain_order=True
    )


@ENVELOPE.rule("E106", "ephemeral-event", "warning")
def ephemeral(ctx: Context) -> pl.LazyFrame:
    """An ephemeral event type (streamed live, never persisted) is on disk.

    Types such as `session.idle`, `assistant.usage`, `session.usage_info`, `assistant.intent`,
    `tool.execution_progress` and every `*_delta` are streamed to live clients and never written to
    events.jsonl. One on disk means the log was recorded by something other than the CLI (an SDK
    client dumping its stream), and figures such as per-call usage may be counted twice. Reported
    once per type and file, on its first line.
    """
    return found(
        _first_of_type(ctx.events.filter(EPHEMERAL)),
        pl.format(
            "{} is an ephemeral event type, streamed live and never persisted by the CLI "
            "({} lines in this file; first here)",
            "type",
            "_lines",
        ),
    )


@ENVELOPE.rule("E107", "unknown-event-type", "info")
def unknown_type(ctx: Context) -> pl.LazyFrame:
    """An event type this version of copilot-logs does not know.

    New CLI versions add event types. Unknown ones are kept and counted, never an error; this note
    says which ones appeared so a reader can check whether they matter. Reported once per type and
    file, on its first line.
    """
    unknown = ctx.events.filter(~TYPE.is_in(list(KNOWN_TYPES)) & ~EPHEMERAL)
    return found(
        _first_of_type(unknown),
        pl.format("unknown event type {} ({} lines in this file; first here)", "type", "_lines"),
    )


@ENVELOPE.rule("E108", "missing-session-start", "error")
def first_event(ctx: Context) -> pl.LazyFrame:
    """The first event is not session.start.

    The CLI writes `session.start` (session id, CLI version, start time, repository) as the first
    line of every log. A log that begins with anything else lost its head, so the session's
    identity, start time and context are unknown.
    """
    first = ctx.events.filter((pl.col("_row") == 0) & (TYPE != "session.start"))
    return found(first, pl.format("the first event is {}, not session.start", "type"))


@ENVELOPE.rule("E109", "session-id-mismatch", "error")
def session_id(ctx: Context) -> pl.LazyFrame:
    """session.start's sessionId is not the name of the session's folder (or file).

    The CLI stores a session as `session-state/<sessionId>/events.jsonl` (or `<sessionId>.jsonl`)
    and finds it by that name when resuming. A different id inside means the file was moved or
    copied over another session. Checked only when the folder (or the file's stem) is a UUID: other
    names are copies that claim nothing.
    """
    folder = pl.col("file").str.extract(r"([^/\\]+)[/\\]events\.jsonl$")
    stem = pl.col("file").str.extract(r"([^/\\]+)\.jsonl$")
    named = pl.when(pl.col("file").str.contains(r"(^|[/\\])events\.jsonl$")).then(folder)
    starts = (
        ctx.events.filter(TYPE == "session.start")
        .unique(subset=["file"], keep="first", maintain_order=True)
        .with_columns(_expected=named.otherwise(stem))
    )
    claimed = pl.col("claimed_session_id")
    wrong = starts.filter(
        pl.col("_expected").str.contains(_UUID) & ~claimed.eq_missing(pl.col("_expected"))
    )
    return found(
        wrong,
        pl.format(
            "session.start says sessionId {} but the log is stored as session {}",
            text(claimed),
            "_expected",
        ),
    )


ENVELOPE.reports(
    {
        ("E110", "file-cut", "error", ("cut-line",)): """
        The last line is cut off mid-event (no newline, not valid JSON).

        Events are appended one whole line at a time. A last line cut short means the session was
        still being written when the file was read, or the process was killed mid-write; the event
        on it is lost and the session's end (open turn, missing shutdown) follows from that.
        """,
        ("E111", "truncated-event", "error", ("truncated-event",)): """
        A truncated event with a complete event glued on behind it, on one line.

        A write was interrupted and the next event was appended right after the partial one, with no
        newline between them. The reader recovers the complete event and loses the truncated one.
        """,
        ("E112", "split-event", "warning", ("split-event",)): """
        One event is spread over several lines by raw newlines inside a string.

        A literal newline inside a JSON string (a known CLI bug) splits one event over two or more
        physical lines. The reader rejoins them and loses nothing, but tools that read the file line
        by line (`jq`, `grep -c`) see broken JSON and wrong counts.
        """,
        ("E113", "invalid-utf8", "warning", ("invalid-utf8",)): """
        A line holds bytes that are not UTF-8.

        The log is UTF-8. Invalid bytes were replaced by U+FFFD so the event could still be read;
        the text around them is altered.
        """,
        ("E114", "crlf-line-ending", "warning", ("crlf",)): """A line ends with CRLF instead of LF.

        The CLI writes LF only. A CR before the newline means the file went through a tool that
        rewrote its line endings; the events still parse, but byte offsets (and so
        `eventsFileSizeBytes`) no longer match what the CLI wrote.
        """,
        ("E115", "nul-padding", "warning", ("nul-bytes",)): """
        NUL bytes pad a line (what a crash leaves at the end of a file).

        After a crash some file systems leave the end of the file filled with NUL bytes. The reader
        ignores them; the events the process had not written yet are lost, which other findings (an
        open turn, a missing shutdown) may show.
        """,
        ("E116", "blank-line", "warning", ("blank-line",)): """An empty (or whitespace-only) line.

        The CLI never writes an empty line. One means the file was edited or concatenated by hand;
        no event is lost.
        """,
        ("E117", "unreadable-file", "error", ("unreadable",)): """The file could not be read at all.

        Permission denied, a broken or looping symbolic link, a named pipe or socket, a file name
        that is not UTF-8, or an I/O error: nothing in the file was checked. The message says which,
        and what to do.
        """,
        ("E118", "empty-file", "error", ("empty-file", "no-event")): """
        The file is empty, or holds no event at all.

        The CLI writes `session.start` as soon as a session begins, so a 0-byte events file is a
        session whose log was lost or truncated to nothing; a file whose every line is damage (NUL
        padding, blank lines, text that is not an event) holds no session either.
        """,
    }
)


@ENVELOPE.rule("E119", "invalid-timestamp", "error")
def timestamp_format(ctx: Context) -> pl.LazyFrame:
    """An event's timestamp is not an ISO-8601 time a log can hold.

    Timestamps are ISO-8601 UTC with milliseconds (`2026-08-05T07:49:01.551Z`). One that does not
    parse cannot be ordered or used in durations; nor can one outside the years 1000 to 9998
    (`0001-01-01`, `+10000-01-01`), which no CLI writes and no date type of every tool holds. Either
    is read as no time; the rest of the event is kept.
    """
    missing = ctx.diagnostics.filter(
        (pl.col("kind") == "incomplete-envelope") & pl.col("message").str.contains("timestamp")
    ).select("file", "line")
    bad = ctx.events.filter(pl.col("timestamp").is_null()).join(
        missing, on=["file", "line"], how="anti"
    )
    return found(
        bad,
        pl.format("{} event's timestamp is not an ISO-8601 time in the years 1000 to 9998", "type"),
    )


OTHER_DAMAGE = "E120"
"""The catch-all: a reader diagnostic of a kind no other rule lists is reported under it."""

ENVELOPE.reports(
    {
        (OTHER_DAMAGE, "damaged-line", "error", ()): """
        The reader reported damage of a kind no other rule covers.

        A catch-all so that no diagnostic of the reader is ever dropped: the message says what the
        reader found.
        """,
        ("E121", "lone-surrogate", "warning", ("lone-surrogate",)): """
        A string holds a lone UTF-16 surrogate escape.

        JSON.stringify writes a string cut inside a surrogate pair (an emoji, say) with a lone
        `\\udXXX` escape: valid JSON, but not Unicode text, so strict parsers (orjson, msgspec,
        serde) reject the whole line. The reader replaces the lone half with U+FFFD and keeps the
        event.
        """,
        ("E122", "out-of-range-number", "warning", ("out-of-range-number",)): """
        A number too large for a 64-bit column (2^63 or more, or 1e999) was read as null.

        JSON puts no bound on numbers, but token counts, sizes and costs are stored in 64-bit
        columns, and a number like 1e999 is infinity as a double. The reader keeps the event and
        reads such a number as null; the message names the field. Figures built on that field leave
        it out.
        """,
        ("E123", "too-deep", "error", ("too-deep",)): """
        A line nests JSON too deep to read (about 1,000 levels).

        No event the CLI writes nests more than a few levels. A line nested about 1,000 levels deep
        cannot be read by the JSON parsers without exhausting their stack: the reader skips it, like
        a line that is not JSON.
        """,
        ("E124", "byte-order-mark", "warning", ("bom",)): """
        The file starts with a UTF-8 byte order mark.

        The CLI writes UTF-8 without a byte order mark. One at the start means the file went through
        an editor or tool that added it; the reader ignores it and reads every event, but byte
        offsets (and so `eventsFileSizeBytes`) are off by three bytes, and `jq` refuses the first
        line.
        """,
        ("E125", "unprocessable-session", "error", ("unprocessable",)): """
        copilot-logs failed on this session's events; the other sessions were still read.

        Each session is processed on its own. When a command fails on one session's events (content
        no other rule foresaw), that session is left out, reported here, and the command's exit code
        is 3; please report the message with the file, if you can share it.
        """,
    }
)

RULES = tuple(ENVELOPE.rules)
