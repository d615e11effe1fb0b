"""Options every command shares, and the one way commands load sessions.

Also the values only the command line reads: sizes (:func:`parse_size`) and time zones for day
buckets (:func:`resolve_zone`: an IANA name, else the machine's local zone; both known to polars).
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import click

from copilot_logs.cli import Command, complete_sessions
from copilot_logs.errors import ExitCode, SelectionError
from copilot_logs.render import output
from copilot_logs.render.escape import one_line
from copilot_logs.render.formats import report_damage, report_growth

if TYPE_CHECKING:
    from datetime import datetime, timedelta

    import polars as pl

    from copilot_logs import store
    from copilot_logs.ingest.discover import Picks, Selection
    from copilot_logs.ingest.logfile import Source
    from copilot_logs.ingest.reader import ReadResult
    from copilot_logs.store.collect import BatchResult

    Engine = Callable[[list[Source], Callable[[ReadResult], Any]], Iterable[BatchResult[Any]]]

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")
HUMAN_FORMATS = ("table", "markdown")
SAID = 3
"""Sessions found in two places that are named one by one (then counted)."""


def stacked(*decorators: Callable[[Any], Any]) -> Callable[[F], F]:
    """The decorators as one, applied as when written in this order above a function."""

    def apply(function: F) -> F:
        return functools.reduce(lambda done, decorator: decorator(done), decorators[::-1], function)

    return apply


def _remember(name: str) -> Callable[[click.Context, click.Parameter, Any], None]:
    """The callback of an option that gives the command no argument: its value goes to the
    context's meta, read by :func:`given` wherever the command's reading needs it."""

    def callback(ctx: click.Context, _param: click.Parameter, value: Any) -> None:
        ctx.meta[f"copilot_logs.{name}"] = value

    return callback


def given(name: str) -> Any:
    """The value of --no-cache (``no_cache``), --quiet, --engine or --master given the running
    command (None outside one)."""
    ctx = click.get_current_context(silent=True)
    return ctx.meta.get(f"copilot_logs.{name}") if ctx is not None else None


def use_cache() -> bool:
    return not given("no_cache")


def quiet() -> bool:
    return bool(given("quiet"))


@dataclass(frozen=True)
class Picked:
    """What the shared options chose: the selectors and --root, --since, --until, --latest."""

    selectors: tuple[str, ...] = ()
    root: Path | None = None
    since: str | None = None
    until: str | None = None
    latest: int | None = None


reading_flags = stacked(
    click.option(
        "--no-cache",
        is_flag=True,
        expose_value=False,
        callback=_remember("no_cache"),
        help="Read every file again; neither use nor update the store (see `copilot-logs cache`).",
    ),
    click.option(
        "--quiet",
        "-q",
        is_flag=True,
        expose_value=False,
        callback=_remember("quiet"),
        help="No warnings about damaged lines (`copilot-logs validate` lists them).",
    ),
)
ROOT_HELP = "[default: $COPILOT_HOME/session-state or ~/.copilot/session-state]."


def root_option(what: str = "Folder of sessions") -> Callable[[F], F]:
    return click.option(
        "--root", type=click.Path(path_type=Path, file_okay=False), help=f"{what} {ROOT_HELP}"
    )


def selectors_and_root(*, stdin: bool) -> Callable[[F], F]:
    """The SELECTORS argument (``-``, standard input, with ``stdin``) and --root."""
    metavar = "[SESSION|PREFIX|PATH|-]..." if stdin else "[SESSION|PREFIX|PATH]..."
    argument = click.argument(
        "selectors", nargs=-1, metavar=metavar, shell_complete=complete_sessions
    )
    return stacked(argument, root_option())


def selection_options(function: F, *, stdin: bool = True) -> F:
    """SELECTORS plus --root, --since, --until, --latest, --no-cache and --quiet, read the same
    way by every command: given to it as one ``picked`` (a :class:`Picked`)."""

    @functools.wraps(function)
    def command(*args: Any, selectors: tuple[str, ...], **kwargs: Any) -> Any:
        chosen = [kwargs.pop(name) for name in ("root", "since", "until", "latest")]
        return function(*args, picked=Picked(selectors, *chosen), **kwargs)

    options: Callable[[Any], F] = stacked(
        selectors_and_root(stdin=stdin),
        click.option(
            "--since",
            metavar="WHEN",
            help="Sessions started at or after WHEN: a date, an ISO time, an ISO week "
            "(2026-W48), today, yesterday, or an age (7d, 12h).",
        ),
        click.option(
            "--until",
            metavar="WHEN",
            help="Sessions started before WHEN (a date or week includes that day or week).",
        ),
        click.option(
            "--latest", type=click.IntRange(min=1), metavar="N", help="Only the N newest sessions."
        ),
        reading_flags,
    )
    return options(command)


engine_options = stacked(
    click.option(
        "--engine",
        type=click.Choice(["local", "spark"]),
        default="local",
        expose_value=False,
        callback=_remember("engine"),
        help="Read the logs here, or on Apache Spark (pip install 'copilot-logs[spark]'; "
        "paths may then be URIs such as s3a://bucket/session-state).",
    ),
    click.option(
        "--master",
        metavar="URL",
        expose_value=False,
        callback=_remember("master"),
        help="With --engine spark: the Spark master [default: spark-submit's, else local[*]].",
    ),
)


def format_option(*choices: str, default: str = "table") -> Callable[[F], F]:
    return click.option(
        "--format", "fmt", type=click.Choice(choices), default=default, help="Output format."
    )


def reading_command(
    *formats: str, default: str = "table", engine: bool = True, stdin: bool = True
) -> Callable[[Callable[..., None]], click.Command]:
    """A command that reads session logs, called with the context, one ``picked`` (the options
    of :func:`selection_options`), then --engine and --master (unless ``engine`` is false) and
    --format FORMATS (if any): in --help before the command's own options."""

    def declare(function: Callable[..., None]) -> click.Command:
        wrapped: Any = click.pass_context(function)
        if formats:
            wrapped = format_option(*formats, default=default)(wrapped)
        if engine:
            wrapped = engine_options(wrapped)
        return click.command(cls=Command)(selection_options(wrapped, stdin=stdin))

    return declare


def choose(picked: Picked, *, zone: str | None = None) -> Selection:
    """What the shared options chose, with --since/--until as UTC times; a bare date starts and
    ends in ``zone`` (an IANA name; local time when None)."""
    from copilot_logs.ingest.discover import Selection, parse_when

    day_zone = ZoneInfo(zone) if zone else None
    return Selection(
        selectors=picked.selectors,
        root=picked.root,
        since=parse_when(picked.since, zone=day_zone) if picked.since else None,
        until=parse_when(picked.until, end_of_day=True, zone=day_zone) if picked.until else None,
        latest=picked.latest,
    )


def find(picked: Picked, *, zone: str | None = None) -> list[Source]:
    """The selected session logs, newest first; says so on stderr when there is none."""
    from copilot_logs.ingest.discover import find_sources

    selection = choose(picked, zone=zone)
    notes: list[str] = []
    sources = find_sources(selection, notes)
    for note in notes[:SAID]:  # a session found in two places
        output.echo(f"warning: {one_line(note)}", err=True)
    if len(notes) > SAID:
        more = len(notes) - SAID
        output.echo(f"warning: and {more} more sessions found in two places, alike", err=True)
    if not sources:
        where = ", ".join(picked.selectors) if picked.selectors else str(selection.resolved_root)
        output.echo(f"No sessions found in {one_line(where)}.", err=True)
    return sources


def load(
    picked: Picked, *, report: bool = True, zone: str | None = None, whole_logs: bool = False
) -> Loaded | None:
    """Find the selected sessions, to be read when the command maps its core over them
    (:meth:`Loaded.map`), damage said on stderr unless not ``report`` (validate's findings say
    it). A log selected by the id of one of its sessions gives that session only, unless
    ``whole_logs`` (validate, doctor and export judge or write logs, not sessions).

    None (said on stderr) when there is no session. Called before the command imports its core
    (and polars): worker processes for a big selection start here, importing polars meanwhile.
    """
    if given("engine") == "spark":
        loaded = _load_on_spark(picked, report=report, zone=zone)
    else:
        from copilot_logs.store import look_up
        from copilot_logs.store.pool import start_workers_early

        sources = find(picked, zone=zone)
        if not sources:
            return None
        found = look_up(sources) if use_cache() else None
        start_workers_early(sources, use_cache(), found)
        chosen = choose(picked, zone=zone)
        loaded = Loaded(sources, report=report, window=(chosen.since, chosen.until), found=found)
    if loaded is not None and not whole_logs:
        from copilot_logs.ingest.discover import picks

        loaded.chosen = picks(loaded.sources)
    return loaded


def _load_on_spark(picked: Picked, *, report: bool, zone: str | None) -> Loaded | None:
    """As :func:`load`, the logs to be read by Spark: URIs listed there, the rest found here."""
    from copilot_logs.spark import engine

    master = given("master")
    uris = [s for s in picked.selectors if engine.is_uri(s)]
    rest = tuple(s for s in picked.selectors if not engine.is_uri(s))
    if uris and (picked.since or picked.until or picked.latest):
        raise click.UsageError("--since, --until and --latest select local logs, not URIs")
    if "-" in rest:
        raise click.UsageError("--engine spark reads files, not standard input")
    sources = find(replace(picked, selectors=rest), zone=zone) if rest or not uris else []
    if uris:
        sources += engine.list_uris(engine.session(master, output.spark_status()), uris)
        if not sources:
            output.echo(f"No sessions found in {one_line(', '.join(uris))}.", err=True)
    if not sources:
        return None
    mapper = functools.partial(engine.map_batches, master=master, progress=output.spark_status())
    return Loaded(sources, report=report, engine=mapper)


@dataclass
class Loaded:
    """The selected sessions, read batch by batch through the store (unless --no-cache) when a
    command maps its core function over them; a progress bar on a terminal for a long read."""

    sources: list[Source]
    report: bool = True
    window: tuple[datetime | None, datetime | None] = (None, None)
    """--since/--until, applied to standard input once read (files were chosen by them)."""
    found: list[store.Found] | None = None
    """Each source's entry in the store, looked up by :func:`load` for the first :meth:`map`
    (a map writes entries, so a later one looks them up again)."""
    engine: Engine | None = None
    """None: read here (the store, worker processes); else Spark's ``map_batches``."""
    chosen: Picks = ()
    """The logs selected by the id of a session they hold, and those ids: their other sessions
    are left out of every batch (:func:`copilot_logs.ingest.discover.picked_then`)."""
    diagnostics: pl.DataFrame | None = None
    files_with_events: set[str] = field(default_factory=set)

    def map(self, fn: Callable[[ReadResult], T], *, remember: bool = True) -> list[T]:
        """``fn`` (picklable: a module-level function or a partial of one) over every batch;
        their values, in no particular order. ``remember=False`` for a function whose work is
        its side effect (export writes files): it always runs."""
        import polars as pl

        from copilot_logs.ingest import discover, logfile
        from copilot_logs.ingest.schema import empty_diagnostics
        from copilot_logs.store.collect import map_batches

        values: list[T] = []
        diagnostics = [empty_diagnostics()]
        since, until = self.window
        looked, self.found = self.found, None
        growth = logfile.Growth(self.sources, looked)
        narrowed = any(s.path is None for s in self.sources) and (since or until) is not None
        if self.chosen:
            fn = functools.partial(discover.picked_then, fn=fn, chosen=self.chosen)
        step: Callable[[ReadResult], Any] = (
            functools.partial(discover.window_then, fn=fn, since=since, until=until)
            if narrowed
            else fn
        )
        with output.progress(len(self.sources), sum(s.size for s in self.sources)) as advance:
            batches = (
                self.engine(self.sources, step)
                if self.engine is not None
                else map_batches(
                    self.sources,
                    step,
                    use_cache=use_cache(),
                    on_read=advance,
                    remember=remember,
                    found=looked,
                )
            )
            for done in batches:
                value, found = done.value, done.diagnostics
                if narrowed:  # standard input's sessions outside --since/--until: not reported
                    value, dropped = value
                    found = discover.without(found, dropped)
                values.append(value)
                diagnostics.append(found)
                self.files_with_events.update(done.files_with_events)
        self.diagnostics = pl.concat(diagnostics)
        if self.report:
            report_damage(self.diagnostics, quiet=quiet())
        report_growth([source.name for source in growth.grown()])
        return values

    def empty_files(self) -> set[str]:
        """Files that were selected but gave no event at all (unreadable, empty, not a log)."""
        if self.diagnostics is None:
            return set()
        return set(self.diagnostics["file"].unique().to_list()) - self.files_with_events


def read_each(loaded: Loaded | None, fn: Callable[[ReadResult], T]) -> list[T]:
    """``fn`` over every batch read; with no session found, over an empty read, so every
    machine format keeps its shape (json ``[]``, csv its header)."""
    from copilot_logs.ingest.reader import ReadResult

    return loaded.map(fn) if loaded is not None else [fn(ReadResult.empty())]


def exit_code(loaded: Loaded | None) -> ExitCode:
    """UNREADABLE when some selected file gave nothing at all, else OK (no session: OK)."""
    return ExitCode.UNREADABLE if loaded is not None and loaded.empty_files() else ExitCode.OK


def parse_duration(
    ctx: click.Context, param: click.Parameter, value: str | None
) -> timedelta | None:
    """A duration option's value (see :mod:`copilot_logs.durations`) -> a timedelta, or None
    when not given."""
    from copilot_logs.durations import parse_duration as parse

    try:
        return None if value is None else parse(value)
    except ValueError as error:
        raise click.BadParameter(str(error), ctx, param) from None


LARGEST_SIZE = 1 << 60
"""The largest size taken (an exbibyte): more than any disk, and still an int64."""
_SIZE = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*([kmgtp]?)(i?b?)", re.IGNORECASE)
_POWER = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4, "p": 5}


def parse_size(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    """A size option's value -> bytes (None when not given): ``500M``, ``1.5G``, ``20GiB``,
    ``10MB`` or a bare number of bytes, read as ``du`` and ``ls`` read them: K, M, G, T (and KiB
    ... TiB) are powers of 1024, KB, MB, GB, TB powers of 1000."""
    if value is None:
        return None
    found = _SIZE.fullmatch(value.strip())
    if found is None or (found[2] == "" and found[3].lower() not in ("", "b")):
        why = f"{value!r} is not a size like 500M, 1.5G, 20GiB, 10MB or 4096 (bytes)"
        raise click.BadParameter(why, ctx, param)
    number, prefix, suffix = found[1], found[2].lower(), found[3].lower()
    size = float(number) * (1000 if suffix == "b" and prefix else 1024) ** _POWER[prefix]
    if size > LARGEST_SIZE:
        why = f"{value!r} is larger than the largest size taken, 1EiB"
        raise click.BadParameter(why, ctx, param)
    return int(size)


folder_options = stacked(selectors_and_root(stdin=False), reading_flags)
"""SELECTORS, --root, --no-cache and --quiet, as ``disk`` and ``prune`` read them."""
heavy_option = click.option(
    "--heavy",
    metavar="SIZE",
    default="1G",
    callback=parse_size,
    help="A session whose files/ holds more than SIZE (allocated) is heavy-files.",
)


def fail_on_option(
    verdicts: Sequence[str], default: str, *, also: tuple[str, str] | None = None
) -> Callable[[F], F]:
    """--fail-on VERDICT,...: exit 1 when a session gets one of these verdicts (``none``:
    never); ``also`` is one more name and what it marks. The command receives a frozenset."""
    names = (*verdicts, also[0]) if also else tuple(verdicts)

    def chosen(ctx: click.Context, param: click.Parameter, value: str) -> frozenset[str]:
        picked = {part.strip().lower() for part in value.split(",") if part.strip()} - {"none"}
        unknown = ", ".join(sorted(picked - set(names)))
        if unknown:
            why = f"unknown verdict {unknown}; choose from {', '.join(names)} (or none)"
            raise click.BadParameter(why, ctx, param)
        return frozenset(picked)

    more = f"; and `{also[0]}`, {also[1]}." if also else "."
    return click.option(
        "--fail-on",
        metavar="VERDICT,...",
        default=default,
        callback=chosen,
        help="Exit 1 when a session gets one of these verdicts (`none`: never). Verdicts: "
        + ", ".join(verdicts)
        + more,
    )


def running_within_option(what: str) -> Callable[[F], F]:
    """--running-within DURATION: ``what`` is a session whose last event is this recent."""
    help = f"{what} (90s, 10m, 1h; a bare number is seconds; 0: never)."
    return click.option(
        "--running-within", default="10m", callback=parse_duration, metavar="DURATION", help=help
    )


def nudge_cap_option(note: str = "its default is 5") -> Callable[[F], F]:
    """--nudge-cap N (default 5, the CLI's own): the nudges per task after which the CLI stops."""
    help = f"Nudges per task after which the CLI stops ({note})."
    return click.option("--nudge-cap", type=click.IntRange(min=1), default=5, help=help)


def _valid_zone(name: str) -> bool:
    """Whether both Python and polars know the zone: the system's zone files also hold
    names polars' own database refuses (``posixrules``, ``localtime``, ``Factory``,
    ``posix/...``, ``right/...``)."""
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        return False
    import polars as pl

    try:
        pl.Series([0], dtype=pl.Datetime("ms", "UTC")).dt.convert_time_zone(name)
    except pl.exceptions.PolarsError:
        return False
    return True


def resolve_zone(name: str | None) -> str:
    """An IANA zone name checked to exist; None means the local zone: $TZ, else what
    /etc/localtime points at, else UTC."""
    if name is not None:
        if not _valid_zone(name):
            raise SelectionError(
                f"--tz {name}: unknown time zone; use an IANA name like Europe/Berlin or UTC"
            )
        return name
    candidates = [os.environ.get("TZ", "").lstrip(":")]
    try:
        target = str(Path("/etc/localtime").resolve())
        candidates.append(target.split("zoneinfo/", 1)[1] if "zoneinfo/" in target else "")
    except OSError:
        pass
    return next((zone for zone in candidates if zone and _valid_zone(zone)), "UTC")
