"""R6xx continuity: what a resume or shutdown says about the file agrees with the file, a file
holds one session, and its CLI version is one copilot-logs was checked against."""

from __future__ import annotations

import polars as pl

from copilot_logs.commands.validate.rule import LOCATION, LOG, Context, Family, found
from copilot_logs.derive import SESSION, TURN_END, TYPE
from copilot_logs.ingest import cli_format

CONTINUITY = Family("R")


@CONTINUITY.rule("R601", "event-count-mismatch", "error")
def event_count(ctx: Context) -> pl.LazyFrame:
    """session.resume's eventCount differs from the events before it.

    On resume the CLI records how many events the file held. Fewer events before the resume line
    than it says means events were lost or removed (a rewind, an edit); more means lines were added.
    Counted: the events read before the line, duplicates included.
    """
    resumes = ctx.events.filter(TYPE == "session.resume").with_columns(
        _claimed=pl.col("event_count")
    )
    duplicates = ctx.diagnostics.filter(pl.col("kind") == "duplicate-id").select(
        *SESSION, _dup_line="line"
    )
    counted = (
        resumes.filter(pl.col("_claimed").is_not_null())
        .join(duplicates, on=SESSION, how="left")
        .group_by(*LOCATION, "_claimed", "_row", maintain_order=True)
        .agg(_dups=(pl.col("_dup_line") < pl.col("line")).sum())
        .with_columns(_before=pl.col("_row") + pl.col("_dups"))
        .filter(pl.col("_before") != pl.col("_claimed"))
    )
    return found(
        counted,
        pl.format(
            "session.resume says eventCount {} but {} events precede it: events were {}",
            pl.col("_claimed").cast(pl.Int64),
            "_before",
            pl.when(pl.col("_before") < pl.col("_claimed"))
            .then(pl.lit("lost or removed"))
            .otherwise(pl.lit("added")),
        ),
    )


def _sizes(ctx: Context) -> pl.LazyFrame:
    """The resume and shutdown lines, with the size each claims and the byte offset the CLI
    wrote it at."""
    # A later session in the same file (two logs spliced, `cat a b`) counts its bytes from its
    # own first line: the file it was written to began there.
    later_session = pl.col("session_id") != pl.col("session_id").first().over("file")
    base = pl.when(later_session).then(pl.col("offset").min().over(LOG)).otherwise(0)
    # A byte order mark (E124) was added in front of what the CLI wrote: not counted.
    marks = ctx.diagnostics.filter(pl.col("kind") == "bom").select("file").unique()
    shift = pl.when(pl.col("_base") > 0).then(pl.col("_base")).otherwise(pl.col("_mark"))
    return (
        ctx.events.with_columns(_base=base)
        .filter(TYPE.is_in([*_INTERRUPT, *_SIZED]))
        .with_columns(_interrupted_at=_interrupt_start())
        .filter(TYPE.is_in(_SIZED))
        .join(marks.with_columns(_mark=pl.lit(3, pl.Int64)), on="file", how="left")
        .with_columns(
            _claimed=pl.col("file_size"),
            # A later session's bytes count from its own first line, the first's from the
            # file's start (after a byte order mark).
            offset=pl.col("offset") - shift.fill_null(0),
            _interrupted_at=pl.col("_interrupted_at") - shift.fill_null(0),
        )
    )


_INTERRUPT = ("abort", TURN_END)
"""The lines an interrupt (Ctrl-C) writes."""
_SIZED = ("session.resume", "session.shutdown")
"""The lines that claim the file's size."""


def _interrupt_start() -> pl.Expr:
    """On a line that is not one an interrupt writes: the byte offset where the lines of an
    interrupt (``abort`` and ``assistant.turn_end``) just before it begin, when that run of
    them holds an abort; else null. On Ctrl-C the CLI takes the file's size for its shutdown
    before it writes them (seen in the recordings of 1.0.70 to 1.0.102).

    Over the interrupt lines and the line itself only (the frame filtered to them), by running
    sums in reading order: ``_prev_type`` tells where a run begins, the count of aborts so far
    whether one came since."""
    interrupt = TYPE.is_in(_INTERRUPT)
    after_interrupt = pl.col("_prev_type").is_in(_INTERRUPT).fill_null(False)
    abort = (TYPE == "abort").cast(pl.Int64)
    aborts = abort.cum_sum()
    begins = interrupt & ~after_interrupt
    before_run = pl.when(begins).then(aborts - abort).forward_fill()
    run_start = pl.when(begins).then(pl.col("offset")).forward_fill()
    return pl.when(after_interrupt & (aborts > before_run)).then(run_start).over(LOG)


@CONTINUITY.rule("R602", "file-size-mismatch", "error")
def file_size(ctx: Context) -> pl.LazyFrame:
    """eventsFileSizeBytes (on resume or shutdown) differs from the line's byte offset.

    `session.resume` and `session.shutdown` record the size of the file just before their own line.
    A different byte offset means bytes before the line were lost, added or rewritten after the CLI
    wrote them. A later session in the same file counts from its own first line. Not a finding: a
    shutdown whose size is where the lines of an interrupt (`abort`, and the `assistant.turn_end` it
    closes) begin, just before it: on Ctrl-C the CLI takes the size before it writes them.
    """
    interrupted = (TYPE == "session.shutdown") & (pl.col("_claimed") == pl.col("_interrupted_at"))
    wrong = _sizes(ctx).filter(
        pl.col("_claimed").is_not_null()
        & (pl.col("_claimed") != pl.col("offset"))
        & ~interrupted.fill_null(False)
    )
    return found(
        wrong,
        pl.format(
            "{} says eventsFileSizeBytes {} but its line starts at byte {}: {} bytes before it "
            "were {}",
            "type",
            pl.col("_claimed").cast(pl.Int64),
            "offset",
            (pl.col("offset") - pl.col("_claimed")).abs().cast(pl.Int64),
            pl.when(pl.col("offset") < pl.col("_claimed"))
            .then(pl.lit("lost or removed"))
            .otherwise(pl.lit("added or rewritten")),
        ),
    )


@CONTINUITY.rule("R603", "several-sessions", "info")
def several_sessions(ctx: Context) -> pl.LazyFrame:
    """A file holds more than one session: a session.start with another sessionId.

    The CLI writes one session per file, but a recorder, a copy or `cat a b` can put two in one file
    or stream. From a session.start whose sessionId differs from the session before it, the lines
    belong to that new session: every command reports each session on its own row and checks each as
    its own log (its first line starts the parent chain and the timestamp order again). The finding
    points at the session.start where the next session begins.
    """
    later = ctx.events.with_columns(
        _first=pl.col("session_id").first().over("file"),
        _sessions=pl.col("session_id").n_unique().over("file"),
    ).filter((pl.col("_row") == 0) & (pl.col("session_id") != pl.col("_first")))
    return found(
        later,
        pl.format(
            "session {} begins here: this file holds {} sessions (it began with session {}); "
            "each is reported on its own",
            "session_id",
            "_sessions",
            "_first",
        ),
    )


@CONTINUITY.rule(
    "R604",
    "newer-cli-version",
    "info",
    "The log was written by a Copilot CLI newer than any copilot-logs was checked against.",
    "copilot-logs is checked against logs that real CLI versions wrote "
    f"({cli_format.OLDEST_VERIFIED} to {cli_format.NEWEST_VERIFIED}, docs/compatibility.md). "
    "The log format moves with the CLI: a newer version may mark lines in a way this "
    "version does not know yet. The figures are likely right; this note says they were not "
    "verified for that version. Reported on the session.start line.",
)
def newer_cli(ctx: Context) -> pl.LazyFrame:
    starts = ctx.events.filter(TYPE == "session.start").with_columns(_version="copilot_version")
    newer = starts.filter(
        pl.col("_version").map_elements(cli_format.newer_than_verified, return_dtype=pl.Boolean)
    )
    return found(
        newer,
        pl.format(
            "written by Copilot CLI {}, newer than {}, the newest version copilot-logs was "
            "checked against",
            "_version",
            pl.lit(cli_format.NEWEST_VERIFIED),
        ),
    )


RULES = tuple(CONTINUITY.rules)
