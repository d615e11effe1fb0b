"""Bytes of one file -> events and diagnostics, a block of whole lines at a time.

The reader streams: it holds one block of lines (CLEAN_BLOCK bytes) and the line being assembled,
never the file. It splits on ``b"\\n"`` only (a raw U+2028 inside a string is not a line break). A
block whose every line is clean is decoded whole (:mod:`copilot_logs.ingest.clean_blocks`); in any
other block, runs of FALLBACK_LINES lines are tried the same way, then each line of a run that is
not clean alone, and only the lines that are not clean go through the line reader
(:mod:`copilot_logs.ingest.line_reader`), which recovers and reports the damage. Both ways give the
same rows. Every command reads this way, ``count --total`` too: it reads into a
:class:`copilot_logs.ingest.calls.CallTally`, and the clean runs then give only the columns a count
needs.
"""

from __future__ import annotations

import codecs
from collections.abc import Generator, Iterator

from copilot_logs.ingest import clean_blocks
from copilot_logs.ingest.calls import CallTally
from copilot_logs.ingest.clean_blocks import FALLBACK_LINES, decode_run, line_ends, valid_utf8
from copilot_logs.ingest.decode.envelope import Readable
from copilot_logs.ingest.events_frame import FLUSH_ROWS, Rows
from copilot_logs.ingest.line_reader import LineReader, Physical


class FileReader(LineReader):
    """The line reader, with whole runs of clean lines decoded at once."""

    def lines(self, stream: Readable) -> Iterator[Physical]:
        """The physical lines of the stream for :meth:`run`, read in blocks of whole lines.

        The runs of clean lines of a block are added in one go and yield nothing; the lines of
        any other run are yielded one by one, for the line reader to recover and report. While
        the line reader holds a line (an event split over several lines), the lines after it
        are yielded one by one too. A line longer than a block is gathered in linear time, and
        the NUL runs that begin or end it are counted, not held (see :class:`_LongLine`).
        """
        long = _LongLine(b"")
        offset, number = self.end, self.next_line
        at_start = self.end == 0
        while more := stream.read(clean_blocks.CLEAN_BLOCK):
            begin = 0  # where the block's own lines start
            if at_start:
                at_start = False
                begin = self._skip_bom(more)
                offset += begin
            if long.length:
                newline = more.find(b"\n")
                if newline == -1:
                    long.add(more)
                    continue
                if long.nuls:  # its NULs are not held: the line goes alone to the reader
                    line = long.physical(number, offset, more[:newline], terminated=True)
                    yield line
                    length = line.length + 1
                else:  # the line the last block cut, whole (never the block copied after it)
                    head = long.take() + more[: newline + 1]
                    yield from self._block(head, len(head), offset, number)
                    length = len(head)
                offset, number, begin = offset + length, number + 1, newline + 1
                long = _LongLine(b"")
            cut = more.rfind(b"\n") + 1
            if cut <= begin:
                long.add(more[begin:])
                continue
            long.add(more[cut:])
            if isinstance(self.columns, Rows) and self.columns.held >= FLUSH_ROWS:
                self.columns.flush()
            lines = yield from self._block(more, cut, offset - begin, number, begin)
            offset, number = offset + cut - begin, number + lines
        if long.length:
            yield long.physical(number, offset, b"", terminated=False)

    def _block(
        self, block: bytes, cut: int, offset: int, number: int, begin: int = 0
    ) -> Generator[Physical, None, int]:
        """The lines of ``block`` from ``begin`` to ``cut`` that are not in a clean run;
        returns how many lines there are. ``offset`` is where ``block[0]`` is in the file."""
        ends = line_ends(block, cut, begin)
        view = memoryview(block)
        valid = block.isascii() or valid_utf8(view[begin:cut])
        if valid and self._clean_run(block, ends, (offset, number, begin)):
            return len(ends)
        many = len(ends) > FALLBACK_LINES
        for first in range(0, len(ends), FALLBACK_LINES):
            run = ends[first : first + FALLBACK_LINES]
            start = ends[first - 1] + 1 if first else begin
            clean = many and (valid or valid_utf8(view[start : run[-1]]))
            if clean and self._clean_run(block, run, (offset, number + first, start)):
                continue
            for line, end in enumerate(run, start=number + first):
                if not (
                    (valid or valid_utf8(view[start:end]))
                    and self._clean_run(block, [end], (offset, line, start))
                ):
                    yield Physical(line, offset + start, block[start:end], True)
                start = end + 1
        return len(ends)

    def _clean_run(self, block: bytes, ends: list[int], where: tuple[int, int, int]) -> bool:
        """Add the lines of ``block`` that end at ``ends`` in one go, if they are clean (see
        :func:`copilot_logs.ingest.clean_blocks.decode_run`); adds nothing and returns False
        otherwise."""
        if self.held is not None:
            return False
        counting = isinstance(self.columns, CallTally)
        run = decode_run(block, ends, where, self.seen_ids, counting=counting)
        if run is None:
            return False
        rows = self.columns.count
        for row, session_id in run.sessions:
            self._session(session_id, rows + row, where[1] + row)
        self.columns.extend(run.columns)
        self.seen_ids.update(run.ids)
        self.last_id = run.ids[-1]
        offset, number, _ = where
        self.end, self.next_line = offset + ends[-1] + 1, number + len(ends)
        return True

    def _skip_bom(self, block: bytes) -> int:
        """The length of a UTF-8 byte order mark starting the file's first block (reported),
        or 0."""
        if not block.startswith(codecs.BOM_UTF8):
            return 0
        self.end = len(codecs.BOM_UTF8)
        self.diagnostics.add(
            1, 0, "bom", "a UTF-8 byte order mark starts the file (the CLI writes none); ignored"
        )
        return self.end


_ZEROS = bytes(clean_blocks.CLEAN_BLOCK)


class _LongLine:
    """The start of a line that the blocks read so far have not ended, gathered in linear
    time (never copied again as it grows). The NUL bytes that begin it, and a run of them that
    ends what has come so far, are counted instead of held: a crash can pad a log with
    gigabytes of them, and the line reader only strips and counts them."""

    def __init__(self, start: bytes) -> None:
        self.parts: list[bytes] = []
        self.held = 0
        self.lead = 0
        self.trail = 0
        self.add(start)

    @property
    def nuls(self) -> int:
        return self.lead + self.trail

    @property
    def length(self) -> int:
        return self.lead + self.held + self.trail

    def add(self, chunk: bytes) -> None:
        if not chunk:
            return
        if len(chunk) <= len(_ZEROS) and chunk == _ZEROS[: len(chunk)]:  # (a memcmp: fast)
            if self.parts:
                self.trail += len(chunk)
            else:
                self.lead += len(chunk)
            return
        if not self.parts:
            body = chunk.lstrip(b"\x00")
            self.lead += len(chunk) - len(body)
            chunk = body
            if not chunk:
                return
        body = chunk.rstrip(b"\x00")
        if body and self.trail:  # NULs inside the line: they are held after all
            self.parts.append(bytes(self.trail))
            self.held += self.trail
            self.trail = 0
        if body:
            self.parts.append(body)
            self.held += len(body)
        self.trail += len(chunk) - len(body)

    def take(self) -> bytes:
        """The line so far, all its bytes (when none were counted instead of held)."""
        return b"".join(self.parts)

    def physical(self, number: int, offset: int, end: bytes, *, terminated: bool) -> Physical:
        """The whole line, ending with ``end`` (the bytes of the block that ends it)."""
        self.add(end)
        return Physical(number, offset, self.take(), terminated, self.nuls)
