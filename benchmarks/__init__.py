"""Benchmarks of copilot-logs against the floor (cat, grep) and the obvious loops (jq, json,
orjson), on a seeded real-shaped corpus. Run with ``make bench``; never part of the tests."""
