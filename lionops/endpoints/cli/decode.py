"""Line decoding of CLI stdout (pure: bytes in, events out)."""

from __future__ import annotations

import json
import re
from typing import Any, ClassVar

from ..._json import check_value
from ..._json import loads as bounded_json
from ..._text import summarize
from ...errors import ConfigurationError


def _preview(text: str, limit: int = 120) -> str:
    return summarize(text, limit)


class LineDecoder:
    """Splits a byte stream into JSON events, line by line.

    ``feed(chunk)`` returns the events completed by ``chunk``; ``close()``
    those left at the end. A line may arrive in any number of reads. Blank
    lines are skipped; a line that does not start with ``{`` or that decodes
    to a non-object is noise (counted, ignored).

    A line that starts with ``{`` but is not valid JSON is repaired when it
    is an event cut by another complete event written into it (for
    example ``<head of A>{"type":"rate_limit_event",...}\\n<rest of A>\\n``):
    the embedded event is emitted, the head waits, and is joined with the
    following line(s) (at most :attr:`max_joins`). A line that cannot be
    repaired is recorded in :attr:`corrupt` as ``(line number, preview)``;
    decoding goes on so the rest of the stream is still read and persisted,
    and the caller turns the record into :class:`CLIStreamError`. Nothing is
    dropped silently.

    The work per line is bounded: a line longer than ``max_line_bytes`` is
    not kept (its bytes are skipped up to the next newline, so memory stays
    bounded even when no newline ever comes) and is recorded in
    :attr:`oversized` as ``(line number, preview)``; a broken line is
    searched for an embedded event from at most ``max_repair_scans`` of its
    ``{"type":`` markers (the last ones), so a line made of many markers
    costs at most that many parses. JSON nested too deeply for the decoder
    is treated as undecodable, never as a crash.
    """

    max_joins: ClassVar[int] = 3
    _EMBEDDED = re.compile(r'\{\s*"type"\s*:')

    def __init__(self, *, max_line_bytes: int = 64 * 1024 * 1024, max_repair_scans: int = 16) -> None:
        if max_line_bytes < 1 or max_repair_scans < 0:
            raise ConfigurationError("max_line_bytes must be positive and max_repair_scans not negative")
        self.max_line_bytes = max_line_bytes
        self.max_repair_scans = max_repair_scans
        self._buf = bytearray()
        self._line = 0
        self._pending: str | None = None
        self._pending_line = 0
        self._joins = 0
        self._skipping = False
        self.corrupt: tuple[int, str] | None = None
        self.oversized: tuple[int, str] | None = None
        self.counts: dict[str, int] = {"lines": 0, "events": 0, "noise": 0, "blank": 0, "recovered": 0}

    @property
    def buffered(self) -> int:
        """Bytes held for a line not yet complete (the next ``feed`` may decode them)."""
        return len(self._buf) + (len(self._pending) if self._pending is not None else 0)

    def feed(self, chunk: bytes) -> list[dict[str, Any]]:
        """Events completed by ``chunk`` (bytes of stdout, any split)."""
        out: list[dict[str, Any]] = []
        if self._skipping:
            nl = chunk.find(b"\n")
            if nl < 0:
                return out
            self._skipping = False
            chunk = chunk[nl + 1:]
        # Only the new bytes are searched for a newline, so a long line that
        # arrives in many small reads costs linear time.
        start = len(self._buf)
        self._buf.extend(chunk)
        begin = 0
        while True:
            nl = self._buf.find(b"\n", max(begin, start))
            if nl < 0:
                break
            raw = bytes(self._buf[begin:nl])
            begin = nl + 1
            self._line += 1
            if len(raw) > self.max_line_bytes:
                self._too_long(raw)
            else:
                self._take(raw.decode("utf-8", errors="replace"), out)
        if begin:
            del self._buf[:begin]
        if len(self._buf) > self.max_line_bytes:
            # A line that outgrew the bound before its newline arrived.
            self._line += 1
            self._too_long(bytes(self._buf[:240]))
            self._buf.clear()
            self._skipping = True
        return out

    def close(self) -> list[dict[str, Any]]:
        """Events of a final line without a newline; records an unfinished repair as corrupt."""
        out: list[dict[str, Any]] = []
        if self._buf:
            raw = bytes(self._buf)
            self._buf.clear()
            self._line += 1
            self._take(raw.decode("utf-8", errors="replace"), out)
        if self._pending is not None:
            self._mark_corrupt(self._pending_line, self._pending)
        return out

    # -- internals

    def _too_long(self, head: bytes) -> None:
        self.counts["oversized"] = self.counts.get("oversized", 0) + 1
        if self.oversized is None:
            self.oversized = (self._line, _preview(head[:240].decode("utf-8", errors="replace")))

    def _emit(self, obj: Any, out: list[dict[str, Any]]) -> None:
        if isinstance(obj, dict):
            self.counts["events"] += 1
            out.append(obj)
        else:
            self.counts["noise"] += 1

    def _mark_corrupt(self, line: int, text: str) -> None:
        if self.corrupt is None:
            self.corrupt = (line, _preview(text))
        self._pending = None
        self._joins = 0

    def _split_embedded(self, text: str) -> tuple[str, dict[str, Any]] | None:
        """``(head, event)`` when ``text`` ends with a complete event object
        that starts after position 0, else ``None`` (at most
        ``max_repair_scans`` markers, the last ones, are tried)."""
        decoder = json.JSONDecoder()
        starts = [m.start() for m in self._EMBEDDED.finditer(text) if m.start() > 0]
        for start in reversed(starts[len(starts) - self.max_repair_scans:] if self.max_repair_scans else []):
            try:
                obj, end = decoder.raw_decode(text, start)
                check_value(obj)
            except (ValueError, RecursionError):  # RecursionError: raw_decode has no bound of its own
                continue
            if end == len(text) and isinstance(obj, dict):
                return text[:start], obj
        return None

    @staticmethod
    def _loads(text: str) -> tuple[bool, Any]:
        try:
            return True, bounded_json(text, what="a CLI event")
        except ValueError:  # not JSON, or past the bounds (JSONLimitError)
            return False, None

    def _take(self, line: str, out: list[dict[str, Any]]) -> None:
        text = line.strip()
        if not text:
            self.counts["blank"] += 1
            return
        self.counts["lines"] += 1
        if self._pending is not None:
            self._continue(text, out)
            return
        if not text.startswith("{"):
            self.counts["noise"] += 1
            return
        ok, obj = self._loads(text)
        if ok:
            self._emit(obj, out)
            return
        self._hold(text, self._line, out)

    def _hold(self, text: str, line: int, out: list[dict[str, Any]]) -> None:
        """Keep the head of a broken line, emitting an event embedded at its end."""
        split = self._split_embedded(text)
        if split is not None:
            head, embedded = split
            self._emit(embedded, out)
            text = head
        self._pending = text
        self._pending_line = line

    def _continue(self, text: str, out: list[dict[str, Any]]) -> None:
        assert self._pending is not None
        joined = self._pending + text
        ok, obj = self._loads(joined)
        if ok:
            self.counts["recovered"] += 1
            self._pending = None
            self._joins = 0
            self._emit(obj, out)
            return
        self._joins += 1
        alone_ok, alone = self._loads(text) if text.startswith("{") else (False, None)
        if alone_ok or self._joins >= self.max_joins:
            # The held head is not continued by this line: it is corrupt.
            self._mark_corrupt(self._pending_line, self._pending)
            if alone_ok:
                self._emit(alone, out)
            elif text.startswith("{"):
                self._hold(text, self._line, out)
            return
        self._hold(joined, self._pending_line, out)
