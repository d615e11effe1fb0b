"""The obvious Python loops a user would write instead of copilot-logs, timed as baselines.

``python -m benchmarks.baselines json|orjson FILE...`` prints how many lines parse to an
``assistant.turn_start`` event. Lines are split on ``b"\\n"`` only (binary mode) and a line
that does not parse is skipped, so the loops survive damaged logs; they do not drop replayed
(duplicate) events, which is one reason their count is not exact.
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


LOOPS = {"json": json_loop, "orjson": orjson_loop}


def main(argv: Sequence[str]) -> int:
    if len(argv) < 1 or argv[0] not in LOOPS:
        sys.stderr.write(f"usage: python -m benchmarks.baselines {{{'|'.join(LOOPS)}}} FILE...\n")
        return 2
    sys.stdout.write(f"{LOOPS[argv[0]](argv[1:])}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
