"""The Anthropic Messages event stream folded into one ``message`` object. Pure: no IO.

Events, in the documented order: ``message_start`` (the message, empty
content, first usage), per block ``content_block_start`` /
``content_block_delta`` (``text_delta``, ``input_json_delta`` fragments of
a tool's input, ``thinking_delta``, ``signature_delta``, ``citations_delta``)
/ ``content_block_stop``, then ``message_delta`` (``stop_reason``, final
usage, and the ``container`` of a code-execution turn) and
``message_stop``. ``ping`` is ignored. An ``error`` event
(``overloaded_error`` mid-stream) is a typed error, retried like a 529 when
the provider says it is passing; a stream that ends before ``message_stop``
is a typed error, never a partial answer.
"""

from __future__ import annotations

from typing import Any

from ..._json import loads as bounded_json
from .._native import Folder, event_kind

__all__ = ["MessagesFolder"]

#: The deltas that carry text, and the field that holds it.
_TEXT_DELTAS = {"text_delta": "text", "input_json_delta": "partial_json", "thinking_delta": "thinking",
                "signature_delta": "signature"}
#: The fields of a ``message_delta`` that update the message.
_MESSAGE_DELTA = ("stop_reason", "stop_sequence", "container")


class MessagesFolder(Folder):
    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.message: dict[str, Any] | None = None
        self.blocks: dict[int, dict[str, Any]] = {}
        self.partial: dict[int, list[str]] = {}

    def feed(self, event: str | None, data: Any) -> bool:
        if not isinstance(data, dict):
            raise self.broken("sent an event that is not a JSON object")
        kind = event_kind(data, event)
        if kind == "error":
            err = data.get("error")
            passing = isinstance(err, dict) and err.get("type") in ("overloaded_error", "api_error")
            raise self.answers.provider_error(err, self.status, "an error event in the stream", retryable=passing)
        if kind == "message_start" and isinstance(data.get("message"), dict):
            self.message = dict(data["message"])
        elif kind == "content_block_start":
            index = data.get("index")
            block = data.get("content_block")
            if isinstance(index, int) and isinstance(block, dict):
                self.blocks[index] = dict(block)
        elif kind == "content_block_delta":
            self._delta(data.get("index"), data.get("delta"))
        elif kind == "content_block_stop":
            self._close(data.get("index"))
        elif kind == "message_delta" and self.message is not None:
            delta: Any = data.get("delta")
            if isinstance(delta, dict):
                self.message.update({k: v for k, v in delta.items() if k in _MESSAGE_DELTA})
            if isinstance(data.get("usage"), dict):
                usage = dict(self.message.get("usage") or {})
                usage.update({k: v for k, v in data["usage"].items() if v is not None})
                self.message["usage"] = usage
        elif kind == "message_stop":
            return True
        return False

    def _delta(self, index: Any, delta: Any) -> None:
        if not isinstance(index, int) or not isinstance(delta, dict):
            return
        block = self.blocks.setdefault(index, {"type": "text", "text": ""})
        kind = delta.get("type")
        field = _TEXT_DELTAS.get(kind) if isinstance(kind, str) else None
        value = delta.get(field) if field is not None else None
        if value is not None and not isinstance(value, str):
            # a text of another type is never made text of the answer
            raise self.broken(f"sent a {kind} whose {field} is {type(value).__name__}, not text")
        piece: str = value or ""
        if kind == "text_delta":
            block["text"] = str(block.get("text") or "") + piece
        elif kind == "input_json_delta":
            self.partial.setdefault(index, []).append(piece)
        elif kind == "thinking_delta":
            block["thinking"] = str(block.get("thinking") or "") + piece
        elif kind == "signature_delta":
            block["signature"] = str(block.get("signature") or "") + piece
        elif kind == "citations_delta" and isinstance(delta.get("citation"), dict):
            block.setdefault("citations", []).append(delta["citation"])

    def _close(self, index: Any) -> None:
        if not isinstance(index, int) or index not in self.blocks:
            return
        block = self.blocks[index]
        if block.get("type") in ("tool_use", "server_tool_use"):
            text = "".join(self.partial.pop(index, []))
            try:
                value = bounded_json(text, what="tool input") if text.strip() else (block.get("input") or {})
            except ValueError:  # not JSON, or nested past the bound (JSONLimitError)
                value = None
            if isinstance(value, dict):
                block["input"] = value
            else:  # kept as text: the request is marked invalid downstream, never dropped
                block["input"] = None
                block["_partial_json"] = text

    def result(self, ended: bool) -> dict[str, Any]:
        if self.message is None:
            raise self.broken("ended without a message_start event")
        if not ended:
            raise self.broken("ended before message_stop: the answer was broken off")
        for index in list(self.partial):
            self._close(index)
        return {**self.message, "content": [self.blocks[i] for i in sorted(self.blocks)]}
