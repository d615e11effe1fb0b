"""The obvious Python a user would write instead of copilot-logs, timed as baselines.

``python -m benchmarks.baselines json|orjson|polars FILE...`` prints how many lines parse to an
``assistant.turn_start`` event. In the loops lines are split on ``b"\\n"`` only (binary mode)
and a line that does not parse is skipped, so the loops survive damaged logs; they do not drop
replayed (duplicate) events, which is one reason their count is not exact. ``polars`` is the
one-liner ``pl.scan_ndjson(files, schema=...).collect()`` with the envelope and the few data
fields the commands use: it stops at the first damaged line, so the bench gives it only the
undamaged files.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence

TURN_START = "assistant.turn_start"


def json_loop(paths: Sequence[str]) -> int:
    llm_calls = 0
    for path in paths:
        with open(path, "rb") as stream:
            for line in stream:
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if isinstance(event, dict) and event.get("type") == TURN_START:
                    llm_calls += 1
    return llm_calls


def orjson_loop(paths: Sequence[str]) -> int:
    import orjson

    llm_calls = 0
    for path in paths:
        with open(path, "rb") as stream:
            for line in stream:
                try:
                    event = orjson.loads(line)
                except orjson.JSONDecodeError:
                    continue
                if isinstance(event, dict) and event.get("type") == TURN_START:
                    llm_calls += 1
    return llm_calls


def polars_schema() -> dict[str, object]:
    """The envelope and the data fields the commands read most: what a user would declare."""
    import polars as pl

    data = pl.Struct(
        {
            "messageId": pl.String,
            "chunkIndex": pl.Int64,
            "toolCallId": pl.String,
            "toolName": pl.String,
            "success": pl.Boolean,
            "model": pl.String,
            "outputTokens": pl.Int64,
            "interactionId": pl.String,
            "turnId": pl.String,
            "sessionId": pl.String,
        }
    )
    return {
        "type": pl.String,
        "data": data,
        "agentId": pl.String,
        "id": pl.String,
        "timestamp": pl.String,
        "parentId": pl.String,
    }


def polars_one_liner(paths: Sequence[str]) -> int:
    import polars as pl

    frame = pl.scan_ndjson(list(paths), schema=polars_schema()).collect()  # type: ignore[arg-type]
    return frame.filter(pl.col("type") == TURN_START).height


LOOPS = {"json": json_loop, "orjson": orjson_loop, "polars": polars_one_liner}


def main(argv: Sequence[str]) -> int:
    if len(argv) < 1 or argv[0] not in LOOPS:
        sys.stderr.write(f"usage: python -m benchmarks.baselines {{{'|'.join(LOOPS)}}} FILE...\n")
        return 2
    sys.stdout.write(f"{LOOPS[argv[0]](argv[1:])}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
