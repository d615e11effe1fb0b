"""The work on Spark's executors: the local engine's own batch step, over the files Spark hands
a task.

Each task reads its files in batches of about BATCH_BYTES and maps the command's core function
over each by :func:`copilot_logs.store.collect.map_held` (the same batch reader, the same
fallback), and sends back the pickled value with the batch's diagnostics (see
:mod:`copilot_logs.spark.engine`). A file whose reading fails is one ``unprocessable``
diagnostic, as locally: the task, and the job, go on with the others.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from copilot_logs.ingest.logfile import Source

if TYPE_CHECKING:
    import pyarrow as pa

    from copilot_logs.ingest.reader import ReadResult

BATCH_BYTES = 24 << 20
"""A task reads and reduces its files in batches of about this much input (as locally)."""
RESULT_SCHEMA = "result binary"


def key(path: str) -> str:
    """A file as Spark names it (``file:/a/b c``) and as we named it, made the same."""
    parts = urlsplit(path)
    if parts.scheme in ("", "file"):
        return os.path.normpath(unquote(parts.path) if parts.scheme else path)
    return path


@dataclass(frozen=True)
class Done:
    """A batch's result as it travels back to the driver, with the files it read."""

    value: Any
    diagnostics: Any
    files_with_events: list[str]
    names: list[str]


def _reduce(group: list[tuple[Source, bytes]], fn: Callable[[ReadResult], Any]) -> Done:
    """``fn`` of a group of files, read and mapped by the local engine's own batch step
    (:func:`copilot_logs.store.collect.map_held`): the same rows, the same ``unprocessable``
    diagnostics."""
    from copilot_logs.store.collect import map_held

    done = map_held(group, fn)
    return Done(
        done.value, done.diagnostics, done.files_with_events, [source.name for source, _ in group]
    )


def sources_in(
    batches: Iterable[pa.RecordBatch], named: dict[str, Source]
) -> Iterator[tuple[Source, bytes]]:
    for batch in batches:
        paths = batch.column("path").to_pylist()
        for index, path in enumerate(paths):
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
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        for group in grouped(sources_in(batches, named)):
            done = pickle.dumps(_reduce(group, fn), protocol=pickle.HIGHEST_PROTOCOL)
            yield pa.RecordBatch.from_pydict({"result": [done]}, schema=_RESULT_ARROW())

    return run


def _RESULT_ARROW() -> pa.Schema:
    import pyarrow as pa

    return pa.schema([("result", pa.binary())])
