"""The Spark engine: the project's own reader and per-batch core functions, run on executors.

Spark reads the logs (``binaryFile``: local paths or any URI the cluster's Hadoop file systems
read, ``s3a://`` included), each file whole in one task; a task reads its files in batches of
about BATCH_BYTES and maps the command's core function over each by the local engine's own
batch step (:func:`copilot_logs.store.collect.map_held`: the same batch reader, the same
fallback when a log breaks the reader or the function), and sends back the pickled value with
the batch's diagnostics. The driver gets exactly what
:func:`copilot_logs.store.collect.map_batches` gives locally, so the commands combine and render
the values as they always do. A session resumed in its log stays in one file, so in one batch:
it is judged whole.

A local file that cannot be opened (or that Spark fails to read) is read on the driver by the
local reader, which reports it as the local engine does. Spark's own failures become
:class:`SparkError` (one line, an exit code), never a traceback. How far Spark is (starting,
then the job's tasks done, from its status tracker polled on a thread) goes to an object the
command line passes (:class:`copilot_logs.render.output.SparkStatus`).
"""

from __future__ import annotations

import os
import pickle
import re
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, Protocol, TypeVar
from urllib.parse import urlsplit

from copilot_logs.errors import CopilotLogsError, ExitCode
from copilot_logs.ingest.discover import EVENTS_FILE
from copilot_logs.ingest.logfile import Source, open_log
from copilot_logs.spark.tasks import RESULT_SCHEMA, Done, key, task

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from copilot_logs.ingest.reader import ReadResult
    from copilot_logs.store.collect import BatchResult


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


T = TypeVar("T")

_GLOB = re.compile(r"([\\*?\[\]{}])")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_WRAPPERS = ("An error occurred while calling", "An exception was thrown from the Python worker")


class SparkError(CopilotLogsError):
    """Spark could not do the work: not installed, no Java, a bad master, a failed job."""

    exit_code = ExitCode.USAGE


class SparkJobError(SparkError):
    """A Spark job failed (an executor lost, a file system error): the input was not read."""

    exit_code = ExitCode.UNREADABLE


@dataclass(frozen=True)
class RemoteSource(Source):
    """A log Spark lists under a URI (``s3a://...``): named by its URI, not a local path."""

    uri: str = ""

    @property
    def name(self) -> str:
        return self.uri


def is_uri(selector: str) -> bool:
    """A selector Spark resolves (``s3a://bucket/logs``, ``file:///x``), not a local one."""
    return "://" in selector


def session_hint(path: str) -> str:
    """The id the layout gives a log at ``path``: its folder for events.jsonl, else its stem."""
    pure = PurePosixPath(urlsplit(path).path)
    return pure.parent.name if pure.name == EVENTS_FILE else pure.stem


# --- the session ------------------------------------------------------------------------------


def session(master: str | None = None, progress: Progress | None = None) -> SparkSession:
    """The running SparkSession (under spark-submit or a notebook), else a new one on
    ``master`` (``local[*]`` when neither says) whose JVM writes its logs to :func:`log_file`,
    not to the terminal; ``progress`` is told when one is started."""
    try:
        from pyspark import SparkConf
        from pyspark.sql import SparkSession
    except ImportError:
        raise SparkError(
            "--engine spark needs pyspark: pip install 'copilot-logs[spark]' (and Java 17+)"
        ) from None
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    master = master or SparkConf().get("spark.master", "local[*]")
    if master.startswith("local"):
        # Local workers run this interpreter, the one that has copilot-logs installed.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master(master)
        .appName("copilot-logs")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
    )
    if progress is not None:
        progress.starting(master)
    try:
        with _stderr_to(log_file()):
            return builder.getOrCreate()
    except Exception as error:
        raise SparkError(
            f"could not start Spark on {master}: {first_line(error)} (is Java 17+ installed, "
            f"JAVA_HOME set, the master reachable? Spark's log: {log_file()})"
        ) from None


def log_file() -> Path:
    """Where the JVM that copilot-logs starts writes its stderr (Spark's log, executor
    errors): ``$XDG_CACHE_HOME/copilot-logs/spark.log``, written anew by each run."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return Path(cache) / "copilot-logs" / "spark.log"


@contextmanager
def _stderr_to(path: Path) -> Iterator[None]:
    """The JVM (and the Python workers it starts) inherit file descriptor 2 when launched:
    point it at ``path`` for the launch, so that Spark never writes to the user's terminal."""
    path.parent.mkdir(parents=True, exist_ok=True)
    log = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    saved = os.dup(2)
    try:
        os.dup2(log, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(log)


def first_line(error: BaseException) -> str:
    """One line of an error, control characters escaped: what a user is shown. For an
    executor's Python traceback, its exception line (the last one not indented)."""
    lines = [line for line in str(error).strip().splitlines() if line.strip()]
    while len(lines) > 1 and lines[0].startswith(_WRAPPERS):
        lines.pop(0)  # Py4J's "An error occurred while calling o31.load.": the cause follows
    line = lines[0].lstrip(": ") if lines else type(error).__name__
    if "Traceback (most recent call last)" in str(error):
        line = next((x for x in reversed(lines) if not x[0].isspace()), line)
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", line)[:500]


def spark_errors() -> tuple[type[BaseException], ...]:
    """The exceptions a Spark call raises for a failed job or a bad path."""
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException

    return (PySparkException, Py4JError)


# --- which files ------------------------------------------------------------------------------


def list_uris(spark: SparkSession, uris: Iterable[str]) -> list[Source]:
    """The logs under each URI, laid out as locally: a ``.jsonl`` URI (a glob too) names
    files, any other a folder of ``<id>/events.jsonl`` and ``<id>.jsonl``."""
    sources: list[Source] = []
    for uri in uris:
        base = uri.rstrip("/")
        patterns = (
            [base] if base.endswith(".jsonl") else [f"{base}/*/{EVENTS_FILE}", f"{base}/*.jsonl"]
        )
        for pattern in patterns:
            for path in _listed(spark, pattern):
                sources.append(RemoteSource(None, session_hint(path), uri=path))
    return sources


def _listed(spark: SparkSession, pattern: str) -> list[str]:
    try:
        frame = spark.read.format("binaryFile").load(pattern).select("path")
        return sorted(row.path for row in frame.collect())
    except spark_errors() as error:
        if "PATH_NOT_FOUND" in str(error) or "does not exist" in str(error):
            return []
        raise SparkJobError(f"cannot list {pattern}: {first_line(error)}") from None


def _location(source: Source) -> str:
    """What Spark is given for a source: its URI, or the local file as a file: URI (glob
    characters escaped, so that Hadoop takes them literally)."""
    if isinstance(source, RemoteSource):
        return _GLOB.sub(r"\\\1", source.uri)
    return "file://" + _GLOB.sub(r"\\\1", os.path.abspath(str(source.path)))


def by_key(sources: Iterable[Source]) -> dict[str, Source]:
    """Sources by the key of the path Spark will name them by."""
    return {
        key(s.uri if isinstance(s, RemoteSource) else os.path.abspath(str(s.path))): s
        for s in sources
    }


def plain(source: Source) -> bool:
    """Whether Spark can be given the source's path: printable UTF-8, no colon (Hadoop takes
    ``a:b`` for a URI). Other paths, rare and hostile, are read here by the local engine."""
    if isinstance(source, RemoteSource) or source.path is None:
        return True
    name = str(source.path)
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return name.isprintable() and ":" not in name


MAX_FILE_BYTES = (1 << 31) - 1
"""The largest file Spark's ``binaryFile`` reads (one larger fails the whole job)."""


def opens(source: Source) -> bool:
    """Whether Spark can be given the source: a regular file the local reader would open (stat
    first, as locally, so that a named pipe is never waited on) and Spark can hold whole. Any
    other is read here by the local reader, which reads a larger file and reports the rest as
    the local engine does."""
    if source.path is None:
        return True
    try:
        with open_log(source.path) as stream:
            return os.fstat(stream.fileno()).st_size <= MAX_FILE_BYTES
    except OSError:
        return False


def files_frame(spark: SparkSession, sources: Sequence[Source]) -> DataFrame:
    """The sources' bytes as Spark reads them (one row per file: ``path``, ``content``).
    A file that vanished or cannot be read is left out (the caller reads it locally)."""
    return (
        spark.read.format("binaryFile")
        .option("ignoreMissingFiles", "true")
        .option("ignoreCorruptFiles", "true")
        .load([_location(s) for s in sources])
        .select("path", "content")
    )


def map_batches(
    sources: Sequence[Source],
    fn: Callable[[ReadResult], T],
    *,
    master: str | None = None,
    progress: Progress | None = None,
) -> Iterator[BatchResult[T]]:
    """``fn`` over batches of the sources on Spark's executors: what
    :func:`copilot_logs.store.collect.map_batches` gives locally (values in no particular order).
    ``progress`` hears how far Spark is."""
    from copilot_logs.store.collect import BatchResult, map_batches

    readable = [s for s in sources if plain(s) and opens(s)]
    seen: set[str] = set()
    try:
        spark = session(master, progress)
        with watching(spark, progress):
            rows = _collect(spark, readable, fn) if readable else []
    finally:
        if progress is not None:
            progress.finished()
    for row in rows:
        done: Done = pickle.loads(row.result)
        seen.update(done.names)
        yield BatchResult(done.value, done.diagnostics, done.files_with_events)
    missed = [s for s in sources if s.name not in seen]
    local = [s for s in missed if not isinstance(s, RemoteSource)]
    yield from map_batches(local, fn)
    remote = [s for s in missed if isinstance(s, RemoteSource)]
    if remote:
        yield _unread(remote, fn)


MAX_LEFT_OUT = 16
"""Files Spark fails to read that a job is run again without (a job fails whole for one)."""


def _collect(
    spark: SparkSession, readable: list[Source], fn: Callable[[ReadResult], T]
) -> list[Any]:
    """The job's rows. A job that fails on one file (gone or changed since it was listed, or
    that Spark cannot read) is run again without it, which the caller then reads here as the
    local engine would: one warning, and the rest answered."""
    for _ in range(MAX_LEFT_OUT + 1):
        named = by_key(readable)
        try:
            frame = files_frame(spark, readable).mapInArrow(task(fn, named), RESULT_SCHEMA)
            rows: list[Any] = frame.collect()
            return rows
        except spark_errors() as error:
            failed = failed_file(error, named)
            if failed is None:
                raise SparkJobError(f"the Spark job failed: {first_line(error)}") from None
            readable = [source for source in readable if source is not failed]
            if not readable:
                return []
    raise SparkJobError(f"the Spark job failed on more than {MAX_LEFT_OUT} files")


_FILE_IN_ERROR = re.compile(r"(?:reading file|does not exist:) ([a-z][a-z0-9+.-]*:\S+)")


def failed_file(error: BaseException, named: dict[str, Source]) -> Source | None:
    """The source a failed job names as the file it could not read or find, if it names one
    of ``named`` (what Spark reports: PATH_NOT_FOUND, FAILED_READ_FILE)."""
    text = str(error)
    if "FAILED_READ_FILE" not in text and "PATH_NOT_FOUND" not in text:
        return None  # not about one file: the job failed as a whole
    parameters = getattr(error, "getMessageParameters", None)
    paths = [(parameters() or {}).get("path", "")] if callable(parameters) else []
    paths += [found.rstrip(".") for found in _FILE_IN_ERROR.findall(text)]
    for path in paths:
        if path and key(path) in named:
            return named[key(path)]
    among = [name for name in named if name in text]  # (printed otherwise: the longest)
    return named[max(among, key=len)] if among else None


def _unread(sources: Sequence[Source], fn: Callable[[ReadResult], T]) -> BatchResult[T]:
    """Logs Spark listed but could not read: each reported as an unreadable file."""
    import polars as pl

    from copilot_logs.ingest.reader import ReadResult
    from copilot_logs.ingest.schema import DIAGNOSTICS_SCHEMA, empty_events
    from copilot_logs.store.collect import BatchResult

    diagnostics = pl.DataFrame(
        {
            "session_id": [s.session_hint for s in sources],
            "file": [s.name for s in sources],
            "line": [0] * len(sources),
            "offset": [0] * len(sources),
            "kind": ["unreadable"] * len(sources),
            "message": ["cannot read the file: Spark could not read it"] * len(sources),
            "event_id": [None] * len(sources),
            "more_lines": [None] * len(sources),
            "new_lines": [None] * len(sources),
        },
        schema=DIAGNOSTICS_SCHEMA,
    )
    result = ReadResult(empty_events(), diagnostics)
    return BatchResult(fn(result), diagnostics, [])
