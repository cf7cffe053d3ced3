"""Server-sent-event streams: framing and fragment accumulation.

Pure: no IO. :class:`EventFields` turns event-stream lines into ``data:``
payloads, :class:`StreamAccumulator` folds ``chat.completion.chunk`` objects
into one ``chat.completion``, and :func:`fold_events` / :func:`stream_end`
judge a stream the way :class:`~.response.Answers` judges a body.
"""

from __future__ import annotations

import re
from typing import Any

from ..._json import loads as bounded_json
from .response import LEGACY_CALL, Answers, empty_call, error_of, list_of, reasoning_of, refusals_of, text_of

__all__ = ["StreamAccumulator", "EventFields", "LINE_BREAK", "fold_events", "fold_chunk", "stream_end",
           "events_of_text"]

class StreamAccumulator:
    """Assembles ``chat.completion.chunk`` objects into one ``chat.completion``.

    Each choice ``index`` is assembled on its own (all of them are kept; the
    endpoint decides how choices make one answer). Text, refusal and
    reasoning deltas (``reasoning_content`` / ``reasoning``) are
    concatenated; reasoning never joins the text. A ``finish_reason`` of
    ``""`` or ``null`` is no end; the last real one counts.

    Tool-call deltas are told apart the way servers key them. A delta with
    an ``index`` joins the call at that index; when it carries an ``id``
    other than that call's, it joins the call of that id at the same index
    (servers that share one index among calls), starts a new call when it
    also names a function (a new call under a repeated index), and else
    still joins by index (servers that send a new id with every fragment).
    A new index is a new call, even under an id seen before (servers that
    repeat one id). A delta without an ``index`` joins the call with its
    ``id`` (a new id is a new call); one with neither joins the latest call,
    unless it names a function while the latest call already has a name
    (servers that key by nothing). ``arguments`` sent as a JSON object rather
    than text are used whole; an object mixed with text fragments for one
    call is an error.

    A chunk of the wrong shape (``choices``, ``delta`` or ``tool_calls`` of
    the wrong type, a tool-call delta that is not an object, an ``id`` that
    is not text, an ``index`` that is not an integer, ``arguments`` that are
    neither text nor an object) raises ``ValueError``: a fragment is never
    dropped, so a call is never assembled from part of its arguments.
    """

    def __init__(self) -> None:
        self._choices: dict[int, _ChoiceParts] = {}
        self.usage: dict[str, Any] | None = None
        self.model: str | None = None
        self.id: str | None = None

    def _choice(self, index: int) -> _ChoiceParts:
        if index not in self._choices:
            self._choices[index] = _ChoiceParts()
        return self._choices[index]

    @property
    def text(self) -> list[str]:
        """The text deltas of every choice, in choice order."""
        return [t for i in sorted(self._choices) for t in self._choices[i].text]

    @property
    def calls(self) -> list[dict[str, Any]]:
        """The tool calls of every choice, in choice order."""
        return [c for i in sorted(self._choices) for c in self._choices[i].real_calls()]

    @property
    def finish_reason(self) -> str | None:
        """The first choice's finish reason, else any choice's; ``None`` while none ended."""
        reasons = [self._choices[i].finish_reason for i in sorted(self._choices)]
        return next((r for r in reasons if r), None)

    def add(self, chunk: dict[str, Any]) -> None:
        """Fold one chunk in; chunks without choices (the usage chunk) are fine."""
        if not isinstance(chunk, dict):
            raise ValueError("a chunk that is not an object")
        self.model = chunk.get("model") if isinstance(chunk.get("model"), str) else self.model
        self.id = chunk.get("id") if isinstance(chunk.get("id"), str) else self.id
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        for choice in list_of(chunk, "choices"):
            if not isinstance(choice, dict):
                raise ValueError("a choice that is not an object")
            index = choice.get("index", 0)
            if not isinstance(index, int) or isinstance(index, bool):
                raise ValueError(f"a choice index that is not an integer: {index!r}")
            parts = self._choice(index)
            delta = choice.get("delta") or {}
            if not isinstance(delta, dict):
                raise ValueError("a delta that is not an object")
            content = text_of(delta.get("content"))
            if content:
                parts.text.append(content)
            parts.refusal.extend(refusals_of(delta))
            parts.reasoning.extend(reasoning_of(delta))
            for entry in list_of(delta, "tool_calls"):
                parts.add_call(entry)
            legacy = delta.get("function_call")
            if legacy is not None:
                if not isinstance(legacy, dict):
                    raise ValueError("a function_call delta that is not an object")
                parts.add_call({"index": LEGACY_CALL, "function": legacy})
            if choice.get("error"):
                parts.error = choice["error"]
            if isinstance(choice.get("finish_reason"), str) and choice["finish_reason"]:
                parts.finish_reason = choice["finish_reason"]

    def completion(self) -> dict[str, Any]:
        """The assembled ``chat.completion`` object (one choice per index seen)."""
        choices = []
        for index in sorted(self._choices) or [0]:
            parts = self._choices.get(index) or _ChoiceParts()
            message: dict[str, Any] = {
                "role": "assistant",
                "content": "".join(parts.text) if parts.text else None,
                "refusal": "".join(parts.refusal) if parts.refusal else None,
            }
            if parts.reasoning:
                message["reasoning_content"] = "".join(parts.reasoning)
            calls = parts.real_calls()
            if calls:
                message["tool_calls"] = calls
            choice: dict[str, Any] = {"index": index, "message": message, "finish_reason": parts.finish_reason}
            if parts.error is not None:
                choice["error"] = parts.error
            choices.append(choice)
        return {
            "id": self.id, "object": "chat.completion", "model": self.model,
            "choices": choices, "usage": self.usage or {},
        }


#: An event-stream line ends with CR LF, LF or CR alone.
LINE_BREAK = re.compile(r"\r\n|\r|\n")


class EventFields:
    """Server-sent-event lines -> ``(event name, data)`` per ``data:`` line;
    the event name holds until the blank line that ends the event."""

    def __init__(self) -> None:
        self.event: str | None = None
        self.data: list[str] = []
        self.first = True

    def feed(self, lines: list[str], *, end: bool = False) -> list[tuple[str | None, str]]:
        """The events that ``lines`` complete. The ``data:`` lines of one event
        are joined with newlines, as the event-stream format says; a data line
        that follows a whole JSON payload or ``[DONE]`` without the blank line
        between starts a new event (servers that leave the blank line out).
        A byte-order mark before the first line is ignored. With ``end``, an
        event still open is completed."""
        out: list[tuple[str | None, str]] = []
        for raw in lines:
            line = raw.rstrip("\r")
            if self.first:
                line, self.first = line.removeprefix("\ufeff"), False
            if not line:
                self._dispatch(out)
                self.event = None
            elif line.startswith("event:"):
                self.event = line[6:].strip() or None
            elif line.startswith("data:"):
                if self.data and _whole_payload("\n".join(self.data)):
                    self._dispatch(out)
                self.data.append(line[5:].strip())
        if end:
            self._dispatch(out)
        return out

    def _dispatch(self, out: list[tuple[str | None, str]]) -> None:
        data, self.data = "\n".join(self.data), []
        if data.strip():  # an event with empty data (``data:`` alone, a keep-alive) is no event
            out.append((self.event, data))


def _whole_payload(data: str) -> bool:
    if data == "[DONE]":
        return True
    try:
        bounded_json(data)
    except ValueError:  # not JSON, or past the bounds (JSONLimitError)
        return False
    return True


class _ChoiceParts:
    """The deltas of one streamed choice (see :class:`StreamAccumulator`)."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.refusal: list[str] = []
        self.reasoning: list[str] = []
        self.calls: list[dict[str, Any]] = []
        self.finish_reason: str | None = None
        self.error: Any = None
        self._by_id: dict[str, int] = {}
        self._by_index: dict[int, int] = {}
        self._index_of: dict[int, int] = {}

    def _position(self, index: Any, call_id: Any, name: Any) -> int | None:
        if index is not None:
            pos = self._by_index.get(index)
            if pos is None:
                return None  # a new index is a new call (even under an id seen before)
            call = self.calls[pos]
            if not call_id or call["id"] in (None, call_id):
                return pos
            own = self._by_id.get(call_id)
            if own is not None and self._index_of.get(own) == index:
                return own  # one index shared by calls told apart by their ids
            if name and call["function"]["name"]:
                return None  # a new call under a repeated index
            return pos  # an unknown id on a fragment: the index decides
        if call_id:
            return self._by_id.get(call_id)  # a new id without an index is a new call
        if not self.calls or (name and self.calls[-1]["function"]["name"]):
            return None  # a second name, keyed by nothing that joins it to the last call
        return len(self.calls) - 1

    def real_calls(self) -> list[dict[str, Any]]:
        """The calls assembled, without a legacy ``function_call`` placeholder
        whose every value stayed empty (:func:`~.response.empty_call`)."""
        return [call for pos, call in enumerate(self.calls)
                if not (self._index_of.get(pos) == LEGACY_CALL and empty_call(call["function"]))]

    def add_call(self, entry: Any) -> None:
        if not isinstance(entry, dict):
            raise ValueError("a tool-call delta that is not an object")
        index, call_id = entry.get("index"), entry.get("id")
        fn = entry.get("function") or {}
        if index is not None and (not isinstance(index, int) or isinstance(index, bool)):
            raise ValueError(f"a tool-call index that is not an integer: {index!r}")
        if call_id is not None and not isinstance(call_id, str):
            raise ValueError(f"a tool-call id that is not text: {call_id!r}")
        if not isinstance(fn, dict) or not isinstance(fn.get("arguments", ""), (str, dict, type(None))):
            raise ValueError("a tool-call function or arguments fragment of the wrong type")
        name = fn.get("name") if isinstance(fn.get("name"), str) else None
        pos = self._position(index, call_id or None, name)
        if pos is None:
            self.calls.append({"id": None, "type": "function", "function": {"name": None, "arguments": ""}})
            pos = len(self.calls) - 1
        call = self.calls[pos]
        if index is not None:
            self._by_index[index] = pos
            self._index_of.setdefault(pos, index)
        if call_id:
            call["id"] = call["id"] or call_id
            self._by_id.setdefault(call_id, pos)
        if name and not call["function"]["name"]:
            call["function"]["name"] = name
        _join_arguments(call["function"], fn.get("arguments"))


def _join_arguments(fn: dict[str, Any], part: Any) -> None:
    """Append an ``arguments`` fragment: text is concatenated, an object is used whole."""
    have = fn["arguments"]
    if part is None or part == "":
        return
    if isinstance(part, dict):
        if have == "" or have == part:
            fn["arguments"] = part
            return
        raise ValueError("tool-call arguments sent both as an object and as other fragments")
    if isinstance(have, dict):
        raise ValueError("tool-call arguments sent both as an object and as text")
    # Some servers resend the whole text so far in each delta: a fragment that
    # starts with everything already received replaces it instead of doubling it.
    fn["arguments"] = part if have and part.startswith(have) else have + part


def fold_events(acc: StreamAccumulator, payloads: list[tuple[str | None, str]], status: int, answers: Answers) -> bool:
    """Fold ``data:`` payloads into ``acc``; ``True`` once ``[DONE]`` is seen.

    A chunk carrying the provider's ``error``, or any data of an ``event:
    error``, ends the call with :class:`~lionops.errors.EndpointProviderError`."""
    for event, payload in payloads:
        if payload == "[DONE]":
            return True
        if event == "error":
            try:
                data: Any = bounded_json(payload)
            except ValueError:  # not JSON, or past the bounds (JSONLimitError)
                data = payload
            err = data.get("error") or data if isinstance(data, dict) else data
            raise answers.provider_error(err or "an error event", status, "a stream error event")
        chunk = answers.decode_json(payload, status, "a stream chunk that is not JSON")
        fold_chunk(acc, chunk, payload, status, answers)
    return False


def fold_chunk(acc: StreamAccumulator, chunk: Any, payload: str, status: int, answers: Answers) -> None:
    err = error_of(chunk)
    if err is not None:
        raise answers.provider_error(err, status, "a stream chunk carrying an error")
    try:
        acc.add(chunk)
    except ValueError as exc:
        raise answers.response_error(f"a malformed stream chunk ({exc})", status, payload) from None


def stream_end(acc: StreamAccumulator, done: bool, status: int, answers: Answers) -> dict[str, Any]:
    if acc.finish_reason is None:
        # Cut off: never pass part of an answer on as a whole one.
        how = "[DONE] before any finish reason" if done else "an end before a finish reason or [DONE]"
        err = answers.response_error(f"an incomplete stream ({how})", status, "".join(acc.text))
        if done:  # the server said the stream was over: what it sent is kept apart, never as a whole answer
            err.unfinished = acc.completion()
        raise err
    return acc.completion()


def events_of_text(text: str, status: int, answers: Answers) -> dict[str, Any]:
    """A whole event stream already read (one sent without its content type)."""
    acc = StreamAccumulator()
    payloads = EventFields().feed(LINE_BREAK.split(text), end=True)
    return stream_end(acc, fold_events(acc, payloads, status, answers), status, answers)
