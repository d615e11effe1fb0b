"""copilot-logs on Apache Spark: the tables of ``export`` as Spark DataFrames (see docs/spark.md).

    from copilot_logs import spark as cls
    events = cls.events(spark, "s3a://ci-logs/session-state")   # or local paths, globs, lists

The command line's ``--engine spark`` is :mod:`copilot_logs.spark.engine`. pyspark is the
optional extra ``copilot-logs[spark]``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from functools import partial
from typing import TYPE_CHECKING

from copilot_logs.ingest.logfile import Source
from copilot_logs.spark.engine import (
    by_key,
    files_frame,
    grouped,
    is_uri,
    list_uris,
    opens,
    plain,
    session,
    sources_in,
)

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from copilot_logs.ingest.reader import ReadResult

__all__ = ["events", "findings", "session", "sessions", "table", "tools", "turns", "usage"]

TABLES = ("events", "turns", "tools", "sessions", "findings", "usage")


def sources(spark: SparkSession, paths: str | Sequence[str]) -> list[Source]:
    """The logs ``paths`` name, found as the commands find them (URIs listed by Spark)."""
    from copilot_logs.ingest.discover import Selection, find_sources

    selectors = [paths] if isinstance(paths, str) else list(paths)
    local = [s for s in selectors if not is_uri(s)]
    found = find_sources(Selection(selectors=local)) if local else []
    return found + list_uris(spark, [s for s in selectors if is_uri(s)])


def table(spark: SparkSession, paths: str | Sequence[str], name: str) -> DataFrame:
    """The ``export`` table ``name`` of the logs ``paths`` name, as a Spark DataFrame."""
    if name not in TABLES:
        raise ValueError(f"no table {name!r}: choose from {', '.join(TABLES)}")
    schema = spark_schema(name)
    target = arrow_schema(schema)
    found = sources(spark, paths)
    readable = [s for s in found if plain(s) and opens(s)]
    frame = files_frame(spark, readable).mapInArrow(
        partial(_table_task, name=name, named=by_key(readable), target=target), schema
    )
    unreadable = [(s.name, s.session_hint) for s in found if s not in readable]
    if unreadable:
        # Read where Spark runs them, so they are reported (as unreadable) like every log.
        names = spark.createDataFrame(unreadable, "path string, hint string")
        frame = frame.unionByName(
            names.mapInArrow(partial(_unreadable_task, name=name, target=target), schema)
        )
    return frame


def events(spark: SparkSession, paths: str | Sequence[str]) -> DataFrame:
    """One row per event the reader recovered (``export``'s ``events`` table)."""
    return table(spark, paths, "events")


def turns(spark: SparkSession, paths: str | Sequence[str]) -> DataFrame:
    """One row per LLM call: main-agent turns and sub-agent calls (``turns``)."""
    return table(spark, paths, "turns")


def tools(spark: SparkSession, paths: str | Sequence[str]) -> DataFrame:
    """One row per tool execution (``tools``)."""
    return table(spark, paths, "tools")


def sessions(spark: SparkSession, paths: str | Sequence[str]) -> DataFrame:
    """One row per log: the rows of ``copilot-logs sessions --format json`` (``sessions``)."""
    return table(spark, paths, "sessions")


def findings(spark: SparkSession, paths: str | Sequence[str]) -> DataFrame:
    """The findings of ``copilot-logs validate`` with every rule selected (``findings``)."""
    return table(spark, paths, "findings")


def usage(spark: SparkSession, paths: str | Sequence[str]) -> DataFrame:
    """One row per log: the rows of ``copilot-logs usage --format json`` (``usage``)."""
    return table(spark, paths, "usage")


# --- schemas and the executors' work ----------------------------------------------------------


def spark_schema(name: str) -> StructType:
    """The Spark schema of a table: its polars schema (``export.frames``) through Arrow."""
    from pyspark.sql.pandas.types import from_arrow_schema

    from copilot_logs.commands.export import frames
    from copilot_logs.ingest.reader import ReadResult

    return from_arrow_schema(frames(ReadResult.empty())[name].to_arrow().schema)


def arrow_schema(schema: StructType) -> pa.Schema:
    """The Arrow schema Spark expects back for ``schema`` (microsecond UTC timestamps)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    try:
        return to_arrow_schema(schema, timezone="UTC")
    except TypeError:  # pyspark 3.5: always UTC, no such argument
        return to_arrow_schema(schema)


def _batches(result: ReadResult, name: str, target: pa.Schema) -> Iterator[pa.RecordBatch]:
    from copilot_logs.commands.export import frames

    yield from frames(result)[name].to_arrow().cast(target).to_batches()


def _table_task(
    batches: Iterable[pa.RecordBatch],
    *,
    name: str,
    named: dict[str, Source],
    target: pa.Schema,
) -> Iterator[pa.RecordBatch]:
    from copilot_logs.store.collect import read_held

    for group in grouped(sources_in(batches, named)):
        result = read_held([(source, data, None) for source, data in group])[0]
        yield from _batches(result, name, target)


def _unreadable_task(
    batches: Iterable[pa.RecordBatch], *, name: str, target: pa.Schema
) -> Iterator[pa.RecordBatch]:
    from pathlib import Path

    from copilot_logs.store.collect import read_files

    for batch in batches:
        jobs = [
            (Source(Path(path), hint), None)
            for path, hint in zip(
                batch.column("path").to_pylist(), batch.column("hint").to_pylist(), strict=True
            )
        ]
        yield from _batches(read_files(jobs)[0], name, target)
