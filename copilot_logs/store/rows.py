"""A command's value per log, kept in the store's headers as rows of plain values.

A command maps its core function over batches of logs; when the value is a frame with a
``file`` column (or a tuple of such frames) it splits by log, and each log's rows are kept in
its entry's header: each column's values in their physical form (ints for times and
durations), with the column's dtype as text (:func:`dtype_text`). A warm run builds one frame
per command from all the logs' rows (:func:`frame_of`), without reading any events. A value
whose dtypes have no text here (categoricals, decimals, objects) is not kept: it is computed
from the frames on every run.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable, Iterable, Sequence
from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING, Any

from copilot_logs.store.entry import Header, Rows

if TYPE_CHECKING:
    import polars as pl

_PLAIN = frozenset(
    {
        *("Int8", "Int16", "Int32", "Int64", "UInt8", "UInt16", "UInt32", "UInt64"),
        *("Float32", "Float64", "Boolean", "String", "Null"),
    }
)


def describe(fn: Callable[..., Any]) -> str | None:
    """A stable text naming ``fn`` and its bound options, or None when it has none (a lambda,
    a closure, an option that has no stable text): such a function's values are not kept."""
    if isinstance(fn, functools.partial):
        inner = describe(fn.func)
        texts = [_stable(value) for value in fn.args]
        names = [""] * len(texts)
        for name, value in sorted(fn.keywords.items()):
            texts.append(_stable(value))
            names.append(f"{name}=")
        if inner is None or None in texts:
            return None
        return f"{inner}({', '.join(f'{n}{t}' for n, t in zip(names, texts, strict=True))})"
    module, name = getattr(fn, "__module__", None), getattr(fn, "__qualname__", "")
    if not module or not name or "<" in name:
        return None
    return f"{module}.{name}"


def _stable(value: object) -> str | None:
    """The text of an option value that is the same in every process (set order is not)."""
    if value is None:
        return "null"
    if isinstance(value, bool | int | float | str | date | datetime | timedelta):
        return repr(value)
    if isinstance(value, set | frozenset | tuple | list):
        items = [_stable(item) for item in value]
        if None in items:
            return None
        texts = [item for item in items if item is not None]
        if isinstance(value, set | frozenset):
            return "{" + ", ".join(sorted(texts)) + "}"
        return "[" + ", ".join(texts) + "]"
    return None


def dtype_text(dtype: Any) -> str | None:
    """``Int64``, ``Datetime|us|UTC``, ``Duration|ms``, ``List|String``, ``Struct|`` and its
    fields' names and texts in JSON...; None for a dtype that is not kept."""
    import polars as pl

    name = type(dtype).__name__
    if name in _PLAIN or name in ("Date", "Time"):
        return name
    if isinstance(dtype, pl.Datetime):
        return f"Datetime|{dtype.time_unit}|{dtype.time_zone or ''}"
    if isinstance(dtype, pl.Duration):
        return f"Duration|{dtype.time_unit}"
    if isinstance(dtype, pl.List):
        inner = dtype_text(dtype.inner)
        return None if inner is None else f"List|{inner}"
    if isinstance(dtype, pl.Struct):
        fields = [(field.name, dtype_text(field.dtype)) for field in dtype.fields]
        if any(text is None for _, text in fields):
            return None
        return f"Struct|{json.dumps(fields)}"
    return None


def parse_dtype(text: str) -> pl.DataType:
    """The dtype :func:`dtype_text` wrote (ValueError for any other text)."""
    import polars as pl

    kind, _, rest = text.partition("|")
    if kind in _PLAIN or kind in ("Date", "Time"):
        if rest:
            raise ValueError(text)
        dtype: pl.DataType = getattr(pl, kind)()
        return dtype
    if kind == "Datetime":
        unit, _, zone = rest.partition("|")
        return pl.Datetime(_unit(unit), zone or None)
    if kind == "Duration":
        return pl.Duration(_unit(rest))
    if kind == "List":
        return pl.List(parse_dtype(rest))
    if kind == "Struct":
        fields = json.loads(rest)
        if not isinstance(fields, list):
            raise ValueError(text)
        return pl.Struct([pl.Field(str(name), parse_dtype(str(inner))) for name, inner in fields])
    raise ValueError(text)


def _unit(text: str) -> Any:
    if text not in ("ns", "us", "ms"):
        raise ValueError(text)
    return text


def split_rows(frame: object) -> tuple[Rows, dict[str, Rows]] | None:
    """The rows of a log that has none in a frame with a ``file`` column, and each log's rows;
    None when it is not a frame with one, or one of its dtypes is not kept."""
    import polars as pl

    if not isinstance(frame, pl.DataFrame) or "file" not in frame.columns:
        return None
    schema = [(name, dtype_text(dtype)) for name, dtype in frame.schema.items()]
    texts = [(name, text) for name, text in schema if text is not None]
    if len(texts) != len(schema):
        return None
    physical = frame.select(pl.all().to_physical())
    columns = [None if s.name == "file" else s.to_list() for s in physical.iter_columns()]
    where: dict[str, list[int]] = {}
    for at, file in enumerate(frame["file"].to_list()):
        where.setdefault(file, []).append(at)
    split = {
        file: Rows(texts, len(rows), [[] if c is None else [c[at] for at in rows] for c in columns])
        for file, rows in where.items()
    }
    return Rows(texts, 0, [[] for _ in texts]), split


def frame_of(parts: Sequence[tuple[str, Rows]]) -> pl.DataFrame:
    """One frame of several logs' rows (each under the caller's name for the log), all of one
    schema. Raises ValueError (or polars' error) when the rows do not fit their schema."""
    import polars as pl

    schema = parts[0][1].schema
    heights = [rows.height for _, rows in parts]
    if any(len(rows.columns) != len(schema) for _, rows in parts):
        raise ValueError("not one column per field of the schema")
    series = []
    for index, (name, text) in enumerate(schema):
        dtype = parse_dtype(text)
        if name == "file":
            files = [file for file, rows in parts for _ in range(rows.height)]
            series.append(pl.Series(name, files, dtype=pl.String))
            continue
        values = []
        for (_, rows), height in zip(parts, heights, strict=True):
            column = rows.columns[index]
            if len(column) != height:
                raise ValueError(f"{name}: {len(column)} values for {height} rows")
            values.extend(column)
        series.append(_series(name, values, _physical(dtype)).cast(dtype))
    return pl.DataFrame(series)


def _series(name: str, values: list[Any], physical: Any) -> pl.Series:
    """The values as a series of ``physical``. A nested column (a list of structs: usage's per
    model figures) goes through JSON text that polars decodes to that exact type in one call:
    built value by value from Python, it costs most of a warm ``usage``. NaN and infinities
    have no JSON text, so a column holding one takes the slow way."""
    import orjson
    import polars as pl

    nested = isinstance(physical, pl.List | pl.Struct)
    if nested and all(_finite(value) for value in values):
        texts = pl.Series(name, [orjson.dumps(value).decode() for value in values], pl.String)
        return texts.str.json_decode(physical)
    return pl.Series(name, values, dtype=physical, strict=True)


def _finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(_finite(item) for item in value)
    if isinstance(value, dict):
        return all(_finite(item) for item in value.values())
    return True


def _physical(dtype: Any) -> Any:
    import polars as pl

    if isinstance(dtype, pl.List):
        return pl.List(_physical(dtype.inner))
    if isinstance(dtype, pl.Struct):
        return pl.Struct([pl.Field(f.name, _physical(f.dtype)) for f in dtype.fields])
    if isinstance(dtype, pl.Date):
        return pl.Int32()
    if isinstance(dtype, pl.Datetime | pl.Duration | pl.Time):
        return pl.Int64()
    return dtype


DIAGNOSTIC_COLUMNS = (
    *("session_id", "line", "offset", "kind", "message", "event_id"),
    *("more_lines", "new_lines"),
)
"""The diagnostics columns a header keeps (``file`` is the caller's name for the log)."""


def diagnostics_of(logs: Iterable[tuple[str, Header]]) -> pl.DataFrame:
    """The diagnostics frame the headers of these logs keep (each under the caller's name)."""
    import polars as pl

    from copilot_logs.ingest.schema import DIAGNOSTICS_SCHEMA

    rows = [(row[0], name, *row[1:]) for name, header in logs for row in header.diagnostics]
    return pl.DataFrame(rows, schema=DIAGNOSTICS_SCHEMA, orient="row")
