"""Where the Spark engine's time goes, against the local engine (docs/spark.md).

    python -m benchmarks.corpus --size-mb 50
    python -m benchmarks.spark_engine /tmp/copilot-logs-bench/corpus-v2-seed0-50mb [MASTER]

Times the ``sessions`` core function mapped over the corpus by the local engine (no cache)
and by the Spark engine on MASTER (default ``local[2]``): the session start, a first job (the
Python workers start) and the same job again. Needs ``copilot-logs[spark]`` and Java 17+.
"""

from __future__ import annotations

import sys
import time

from copilot_logs.commands.sessions import newest_first, summarize
from copilot_logs.ingest.discover import Selection, find_sources
from copilot_logs.spark import engine
from copilot_logs.store.collect import map_batches


def main(argv: list[str]) -> int:
    corpus, master = argv[0], (argv[1] if len(argv) > 1 else "local[2]")
    sources = find_sources(Selection(selectors=[corpus]))
    print(f"{len(sources)} logs, {sum(s.size for s in sources):,} bytes")
    started = time.perf_counter()
    local = newest_first([done.value for done in map_batches(sources, summarize)])
    print(f"local engine, no cache: {time.perf_counter() - started:.1f} s")
    started = time.perf_counter()
    engine.session(master)
    print(f"spark session start ({master}): {time.perf_counter() - started:.1f} s")
    for run in ("first", "second"):
        started = time.perf_counter()
        rows = newest_first([done.value for done in engine.map_batches(sources, summarize)])
        print(f"spark job, {run} run: {time.perf_counter() - started:.1f} s")
        print("same rows as the local engine:", rows.equals(local))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
