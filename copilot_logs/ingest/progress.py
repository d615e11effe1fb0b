"""How far a read of a log got, and what counting its calls found: one record of each, used
by the reader (where a read stops and where the next goes on), by the store's entries (which
nest both) and by ``count --total``. No polars here.
"""

from __future__ import annotations

from typing import Annotated

import msgspec

Count = Annotated[int, msgspec.Meta(ge=0)]

DamageRow = tuple[Count, str, str, Count | None, Count | None]
"""(line, kind, message, more_lines, new_lines) of a problem the reader reported (see
DIAGNOSTICS_SCHEMA: a file's first problems one by one, then a row per kind sums up the rest)."""


class ReadState(msgspec.Struct, frozen=True, omit_defaults=True, forbid_unknown_fields=True):
    """How far a read of a log got; a read that goes on from here (the log grew) reads what
    a whole read would read after it."""

    end: Count = 0
    """Bytes read: up to and including the last newline."""
    next_line: Count = 1
    last_id: str | None = None
    """The id of the last event read."""
    session_id: str | None = None
    """The session the last rows belong to: appended rows continue it."""
    seen_ids: frozenset[str] = frozenset()
    """The event ids read so far, where a read going on needs them (a replayed line is read
    once). A read into frames returns none (its rows hold them), a count returns them; a
    store header never holds them (an entry without frames keeps them in its body)."""


class Figures(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What a count of a log's calls found (:class:`copilot_logs.ingest.calls.CallCounter`),
    with the damage the read met."""

    llm_calls: Count = 0
    subagent_calls: Count = 0
    messages: tuple[tuple[str, str], ...] = ()
    """The counter's memory (sorted): a count going on where this one stopped starts from it."""
    damage: tuple[DamageRow, ...] = ()
    unreadable: bool = False
    """Nothing could be read: no event at all, only damage."""
