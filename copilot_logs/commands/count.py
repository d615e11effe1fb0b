"""LLM calls and what surrounds them, per session or regrouped: what ``count`` reports."""

from __future__ import annotations

import polars as pl

from copilot_logs import derive
from copilot_logs.derive import SESSION, TYPE
from copilot_logs.ingest.reader import ReadResult

GROUPINGS = ("session", "interaction", "model", "day", "repository")
UNKNOWN = "unknown"


def _keys(flags: pl.DataFrame, by: str, zone: str) -> tuple[pl.DataFrame, list[str]]:
    """Add the grouping key columns for ``by`` and name them."""
    # A session is one session of a log file: two copies of a session are two rows, never one
    # merged row, and two sessions in one file are two rows too.
    if by == "session":
        return flags, list(SESSION)
    if by == "interaction":
        return flags, [*SESSION, "interaction_index"]
    if by == "day":
        day = pl.col("timestamp").dt.convert_time_zone(zone).dt.date().alias("day")
        return flags.with_columns(day), ["day"]
    if by == "repository":
        facts = derive.session_facts(flags).select(
            *SESSION, repository=pl.coalesce("repository", "cwd", pl.lit(UNKNOWN))
        )
        keyed = flags.drop("repository").join(facts, on=SESSION, how="left")
        return keyed, ["repository"]
    if by == "model":
        turn_models = derive.turns(flags).select(*SESSION, "turn_index", turn_model=pl.col("model"))
        keyed = flags.join(turn_models, on=[*SESSION, "turn_index"], how="left").with_columns(
            model=pl.coalesce(
                pl.when(pl.col("in_turn")).then(pl.col("turn_model")),
                pl.when(TYPE == "assistant.message").then(pl.col("model")),
                pl.col("session_model"),
                pl.lit(UNKNOWN),
            )
        )
        return keyed, ["model"]
    raise ValueError(f"unknown grouping {by!r}")


def count(result: ReadResult, *, by: str = "session", zone: str = "UTC") -> pl.DataFrame:
    """One row per group with every figure of ``model.COUNT_FIELDS``.

    ``zone`` is the IANA zone whose calendar days ``by="day"`` uses.
    """
    flags = derive.count_flags(derive.annotate(result.events))
    keyed, keys = _keys(flags, by, zone)
    table = keyed.group_by(keys, maintain_order=True).agg(
        pl.col(name).sum() for name in derive.COUNT_FIELDS
    )
    if by == "session":
        order = derive.session_facts(flags).select(*SESSION, "started_at")
        table = (
            table.join(order, on=SESSION, how="left")
            .select("session_id", "started_at", *derive.COUNT_FIELDS, "file")
            .pipe(derive.newest_first)
        )
    else:
        # Events outside any figure (session.start before the first model event, say) would
        # make empty groups; a group is shown only when something in it was counted.
        table = table.filter(pl.sum_horizontal(derive.COUNT_FIELDS) > 0).sort(keys)
    return table


def combine(tables: list[pl.DataFrame]) -> pl.DataFrame:
    """``count`` tables of several batches as one: per-session rows newest first, other
    groupings summed again (a group may span batches)."""
    table = pl.concat(tables)
    if "started_at" in table.columns:
        return derive.newest_first(table)
    keys = [name for name in table.columns if name not in derive.COUNT_FIELDS]
    return table.group_by(keys).agg(pl.col(name).sum() for name in derive.COUNT_FIELDS).sort(keys)


def totals(table: pl.DataFrame) -> dict[str, int]:
    """The sum of every figure over the rows of a ``count`` table."""
    return {name: int(table[name].sum()) for name in derive.COUNT_FIELDS}
