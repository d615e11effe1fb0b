"""The Spark engine: the project's own reader and per-batch core functions, run on executors.

Spark reads the logs (``binaryFile``: local paths or any URI the cluster's Hadoop file systems
read, ``s3a://`` included), each file whole in one task. A task maps the command's core function
over batches of its files by the local engine's own batch step
(:func:`copilot_logs.store.collect.map_held`), so the driver gets what the local
:func:`copilot_logs.store.collect.map_batches` gives. A file Spark cannot be given or read is
read on the driver by the local reader. Spark's failures become :class:`SparkError`, one line and
an exit code. See docs/spark.md.
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
from urllib.parse import unquote, urlsplit

from copilot_logs.errors import CopilotLogsError, ExitCode
from copilot_logs.ingest.discover import EVENTS_FILE
from copilot_logs.ingest.logfile import Source, open_log

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from copilot_logs.ingest.reader import ReadResult
    from copilot_logs.store.collect import BatchResult

T = TypeVar("T")
POLL_SECONDS = 0.5
BATCH_BYTES = 24 << 20
"""A task reads and reduces its files in batches of about this much input (as locally)."""
MAX_FILE_BYTES = (1 << 31) - 1
"""The largest file Spark's ``binaryFile`` reads (one larger fails the whole job)."""
MAX_LEFT_OUT = 16
"""Files Spark fails to read that a job is run again without (a job fails whole for one)."""
RESULT_SCHEMA = "result binary"

_GLOB = re.compile(r"([\\*?\[\]{}])")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_WRAPPERS = ("An error occurred while calling", "An exception was thrown from the Python worker")
_FILE_IN_ERROR = re.compile(r"(?:reading file|does not exist:) ([a-z][a-z0-9+.-]*:\S+)")


class Progress(Protocol):
    """What Spark is doing, as it happens."""

    def starting(self, master: str) -> None: ...

    def tasks(self, done: int, total: int) -> None: ...

    def finished(self) -> None: ...


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


@dataclass(frozen=True)
class Done:
    """A batch's result as it travels back to the driver, with the files it read."""

    value: Any
    diagnostics: Any
    files_with_events: list[str]
    names: list[str]


def is_uri(selector: str) -> bool:
    return "://" in selector


def key(path: str) -> str:
    """A file as Spark names it (``file:/a/b c``) and as we named it, made the same."""
    parts = urlsplit(path)
    if parts.scheme in ("", "file"):
        return os.path.normpath(unquote(parts.path) if parts.scheme else path)
    return path


def session_hint(path: str) -> str:
    """The id the layout gives a log at ``path``: its folder for events.jsonl, else its stem."""
    pure = PurePosixPath(urlsplit(path).path)
    return pure.parent.name if pure.name == EVENTS_FILE else pure.stem


# --- the session ------------------------------------------------------------------------------


def session(master: str | None = None, progress: Progress | None = None) -> SparkSession:
    """The running SparkSession (under spark-submit or a notebook), else a new one on
    ``master`` (``local[*]`` when neither says) whose JVM writes to :func:`log_file`."""
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
    """``$XDG_CACHE_HOME/copilot-logs/spark.log``: the JVM's stderr, written anew by each run."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return Path(cache) / "copilot-logs" / "spark.log"


@contextmanager
def _stderr_to(path: Path) -> Iterator[None]:
    """The JVM (and its Python workers) inherit file descriptor 2 when launched: point it at
    ``path`` for the launch, so that Spark never writes to the user's terminal."""
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


@contextmanager
def watching(spark: SparkSession, progress: Progress | None) -> Iterator[None]:
    """While the block runs a job, tell ``progress`` its tasks done, every POLL_SECONDS."""
    if progress is None:
        yield
        return
    stop = threading.Event()
    tracker = spark.sparkContext.statusTracker()

    def poll() -> None:
        while not stop.wait(POLL_SECONDS):
            infos = (tracker.getStageInfo(stage) for stage in tracker.getActiveStageIds())
            stages = [info for info in infos if info is not None]
            total = sum(info.numTasks for info in stages)
            if total:
                progress.tasks(sum(info.numCompletedTasks for info in stages), total)

    thread = threading.Thread(target=poll, name="copilot-logs-spark-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


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
            try:
                frame = spark.read.format("binaryFile").load(pattern).select("path")
                paths = sorted(row.path for row in frame.collect())
            except spark_errors() as error:
                if "PATH_NOT_FOUND" in str(error) or "does not exist" in str(error):
                    continue
                raise SparkJobError(f"cannot list {pattern}: {first_line(error)}") from None
            sources += [RemoteSource(None, session_hint(path), uri=path) for path in paths]
    return sources


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


def opens(source: Source) -> bool:
    """Whether Spark can be given the source: a regular file the local reader would open (stat
    first, so that a named pipe is never waited on) and Spark can hold whole."""
    if source.path is None:
        return True
    try:
        with open_log(source.path) as stream:
            return os.fstat(stream.fileno()).st_size <= MAX_FILE_BYTES
    except OSError:
        return False


def files_frame(spark: SparkSession, sources: Sequence[Source]) -> DataFrame:
    """The sources' bytes (``path``, ``content``); a file that vanished or cannot be read is
    left out (the caller reads it locally)."""
    return (
        spark.read.format("binaryFile")
        .option("ignoreMissingFiles", "true")
        .option("ignoreCorruptFiles", "true")
        .load([_location(s) for s in sources])
        .select("path", "content")
    )


# --- the executors' work ----------------------------------------------------------------------


def sources_in(
    batches: Iterable[pa.RecordBatch], named: dict[str, Source]
) -> Iterator[tuple[Source, bytes]]:
    for batch in batches:
        for index, path in enumerate(batch.column("path").to_pylist()):
            source = named.get(key(path))
            if source is not None:
                yield source, batch.column("content")[index].as_py()


def grouped(
    pairs: Iterable[tuple[Source, bytes]], limit: int = BATCH_BYTES
) -> Iterator[list[tuple[Source, bytes]]]:
    """Files in groups of about ``limit`` bytes, at least one file each."""
    group: list[tuple[Source, bytes]] = []
    size = 0
    for source, data in pairs:
        if group and size + len(data) > limit:
            yield group
            group, size = [], 0
        group.append((source, data))
        size += len(data)
    if group:
        yield group


def task(
    fn: Callable[[ReadResult], Any], named: dict[str, Source]
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """``mapInArrow``'s function: each group's :class:`Done`, pickled."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        from copilot_logs.store.collect import map_held

        schema = pa.schema([("result", pa.binary())])
        for group in grouped(sources_in(batches, named)):
            done = map_held(group, fn)
            names = [source.name for source, _ in group]
            value = Done(done.value, done.diagnostics, done.files_with_events, names)
            result = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
            yield pa.RecordBatch.from_pydict({"result": [result]}, schema=schema)

    return run


# --- the driver -------------------------------------------------------------------------------


def map_batches(
    sources: Sequence[Source],
    fn: Callable[[ReadResult], T],
    *,
    master: str | None = None,
    progress: Progress | None = None,
) -> Iterator[BatchResult[T]]:
    """``fn`` over batches of the sources on Spark's executors: what
    :func:`copilot_logs.store.collect.map_batches` gives locally (in no particular order)."""
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
    yield from map_batches([s for s in missed if not isinstance(s, RemoteSource)], fn)
    remote = [s for s in missed if isinstance(s, RemoteSource)]
    if remote:
        yield _unread(remote, fn)


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


def failed_file(error: BaseException, named: dict[str, Source]) -> Source | None:
    """The source of ``named`` a failed job names as the file it could not read or find
    (Spark's PATH_NOT_FOUND, FAILED_READ_FILE); None when the job failed as a whole."""
    text = str(error)
    if "FAILED_READ_FILE" not in text and "PATH_NOT_FOUND" not in text:
        return None
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

    count = len(sources)
    diagnostics = pl.DataFrame(
        {
            "session_id": [s.session_hint for s in sources],
            "file": [s.name for s in sources],
            "line": [0] * count,
            "offset": [0] * count,
            "kind": ["unreadable"] * count,
            "message": ["cannot read the file: Spark could not read it"] * count,
            "event_id": [None] * count,
            "more_lines": [None] * count,
            "new_lines": [None] * count,
        },
        schema=DIAGNOSTICS_SCHEMA,
    )
    return BatchResult(fn(ReadResult(empty_events(), diagnostics)), diagnostics, [])
