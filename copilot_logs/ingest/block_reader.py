"""Bytes of one file -> events and diagnostics, a block of whole lines at a time.

The reader streams: it holds one block of lines (CLEAN_BLOCK bytes) and the line being
assembled, never the file. It splits on ``b"\\n"`` only (a raw U+2028 inside a string is not a
line break). A block whose every line is clean is decoded whole (:mod:`copilot_logs.
clean_blocks`); in any other block, runs of FALLBACK_LINES lines are tried the same way, and
the lines of a run that is not clean go one by one through the line reader
(:mod:`copilot_logs.ingest.line_reader`), which recovers and reports the damage. Both ways give the
same rows.
"""

from __future__ import annotations

import codecs
from collections.abc import Generator, Iterator

from copilot_logs.ingest import clean_blocks
from copilot_logs.ingest.clean_blocks import FALLBACK_LINES, decode_run, line_ends, valid_utf8
from copilot_logs.ingest.decode.envelope import Readable
from copilot_logs.ingest.events_frame import FLUSH_ROWS
from copilot_logs.ingest.line_reader import LineReader, Physical


class FileReader(LineReader):
    """The line reader, with whole runs of clean lines decoded at once."""

    def lines(self, stream: Readable) -> Iterator[Physical]:
        """The physical lines of the stream for :meth:`run`, read in blocks of whole lines.

        The runs of clean lines of a block are added in one go and yield nothing; the lines of
        any other run are yielded one by one, for the line reader to recover and report. While
        the line reader holds a line (an event split over several lines), the lines after it
        are yielded one by one too.
        """
        pending = self._skip_bom(stream) if self.end == 0 else b""
        offset, number = self.end, self.next_line
        while True:
            more = stream.read(clean_blocks.CLEAN_BLOCK)
            block = pending + more if pending else more
            if not more:
                if block:
                    yield Physical(number, offset, block, False)
                return
            cut = block.rfind(b"\n") + 1
            if cut == 0:
                pending = block  # one line longer than a block: read on
                continue
            pending = block[cut:]
            if self.clean_lane and self.columns.held >= FLUSH_ROWS:
                self.columns.flush()
            lines = yield from self._block(block, cut, offset, number)
            offset, number = offset + cut, number + lines

    def _block(
        self, block: bytes, cut: int, offset: int, number: int
    ) -> Generator[Physical, None, int]:
        """The lines of ``block`` before ``cut`` that are not in a clean run; returns how
        many lines there are."""
        ends = line_ends(block, cut)
        view = memoryview(block)
        valid = block.isascii() or valid_utf8(view[:cut])
        if valid and self._clean_run(block, ends, (offset, number, 0)):
            return len(ends)
        many = len(ends) > FALLBACK_LINES
        for first in range(0, len(ends), FALLBACK_LINES):
            run = ends[first : first + FALLBACK_LINES]
            start = ends[first - 1] + 1 if first else 0
            clean = many and (valid or valid_utf8(view[start : run[-1]]))
            if clean and self._clean_run(block, run, (offset, number + first, start)):
                continue
            for line, end in enumerate(run, start=number + first):
                yield Physical(line, offset + start, block[start:end], True)
                start = end + 1
        return len(ends)

    def _clean_run(self, block: bytes, ends: list[int], where: tuple[int, int, int]) -> bool:
        """Add the lines of ``block`` that end at ``ends`` in one go, if they are clean (see
        :func:`copilot_logs.ingest.clean_blocks.decode_run`); adds nothing and returns False
        otherwise."""
        if not self.clean_lane or self.held is not None:
            return False
        run = decode_run(block, ends, where, self.seen_ids)
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

    def _skip_bom(self, stream: Readable) -> bytes:
        """Step over a UTF-8 byte order mark at the start of the file (reported); returns the
        bytes read that are not one."""
        head = stream.read(len(codecs.BOM_UTF8))
        if head != codecs.BOM_UTF8:
            return head
        self.end = len(head)
        self.diagnostics.add(
            1, 0, "bom", "a UTF-8 byte order mark starts the file (the CLI writes none); ignored"
        )
        return b""
