"""How far Spark is, for whoever shows it: starting, then the job's tasks done (Spark's status
tracker, polled on a thread while the job runs). Nothing is shown here: the command line
passes an object that draws it on a terminal (:class:`copilot_logs.render.output.SparkStatus`)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

POLL_SECONDS = 0.5
"""How often the status tracker is asked while a job runs."""


class Progress(Protocol):
    """What Spark is doing, as it happens."""

    def starting(self, master: str) -> None:
        """A new Spark session is being started on ``master`` (the JVM takes seconds)."""

    def tasks(self, done: int, total: int) -> None:
        """The running job has ``done`` of its ``total`` tasks finished."""

    def finished(self) -> None:
        """The work on Spark is over (done, or failed)."""


def tasks_done(spark: SparkSession) -> tuple[int, int]:
    """The tasks finished and in all, over the stages running now."""
    tracker = spark.sparkContext.statusTracker()
    done = total = 0
    for stage in tracker.getActiveStageIds():
        info = tracker.getStageInfo(stage)
        if info is not None:
            done += info.numCompletedTasks
            total += info.numTasks
    return done, total


@contextmanager
def watching(spark: SparkSession, progress: Progress | None) -> Iterator[None]:
    """While the block runs a job, tell ``progress`` how far it is, every POLL_SECONDS."""
    if progress is None:
        yield
        return
    stop = threading.Event()

    def poll() -> None:
        while not stop.wait(POLL_SECONDS):
            done, total = tasks_done(spark)
            if total:
                progress.tasks(done, total)

    thread = threading.Thread(target=poll, name="copilot-logs-spark-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
