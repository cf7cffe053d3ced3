"""The OpenAI Responses event stream folded into one ``response`` object. Pure: no IO.

Events, in the documented order: ``response.created`` /
``response.in_progress``, per item ``response.output_item.added``, its
deltas (``response.output_text.delta``, ``response.refusal.delta``,
``response.function_call_arguments.delta`` fragments,
``response.reasoning_summary_text.delta``) and ``.done`` events, then
``response.output_item.done`` with the whole item, and one terminal event:
``response.completed``, ``response.incomplete`` or ``response.failed``
(each carrying the whole response). An ``error`` event is a typed error; a
stream without a terminal event is a typed error, never a partial answer.
"""

from __future__ import annotations

from typing import Any

from .._native import Folder, event_kind

__all__ = ["ResponsesFolder"]

_TEXT_DELTAS = frozenset({"response.output_text.delta", "response.refusal.delta",
                          "response.function_call_arguments.delta"})
_TERMINAL = ("response.completed", "response.incomplete", "response.failed")


class ResponsesFolder(Folder):
    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.response: dict[str, Any] | None = None
        self.items: dict[int, dict[str, Any]] = {}

    def _item(self, index: Any) -> dict[str, Any] | None:
        return self.items.get(index) if isinstance(index, int) else None

    def feed(self, event: str | None, data: Any) -> bool:
        if not isinstance(data, dict):
            raise self.broken("sent an event that is not a JSON object")
        kind = event_kind(data, event)
        if kind == "error":
            err = {"message": data.get("message"), "code": data.get("code")} if "message" in data else data.get("error")
            passing = isinstance(err, dict) and err.get("code") in ("server_error", "rate_limit_exceeded")
            raise self.answers.provider_error(err, self.status, "an error event in the stream", retryable=passing)
        if kind in ("response.created", "response.in_progress") and isinstance(data.get("response"), dict):
            self.response = dict(data["response"])
        elif kind in ("response.output_item.added", "response.output_item.done"):
            index, item = data.get("output_index"), data.get("item")
            if isinstance(index, int) and isinstance(item, dict):
                self.items[index] = dict(item)
        elif kind in _TEXT_DELTAS and data.get("delta") is not None and not isinstance(data.get("delta"), str):
            # a text of another type is never made text of the answer
            raise self.broken(f"sent a {kind} event whose delta is {type(data['delta']).__name__}, not text")
        elif kind == "response.output_text.delta" or kind == "response.refusal.delta":
            item = self._item(data.get("output_index"))
            if item is not None:
                parts = item.setdefault("content", [])
                part_type = "output_text" if kind == "response.output_text.delta" else "refusal"
                key = "text" if part_type == "output_text" else "refusal"
                if not parts or parts[-1].get("type") != part_type:
                    parts.append({"type": part_type, key: ""})
                parts[-1][key] = str(parts[-1].get(key) or "") + str(data.get("delta") or "")
        elif kind == "response.function_call_arguments.delta":
            item = self._item(data.get("output_index"))
            if item is not None:
                item["arguments"] = str(item.get("arguments") or "") + str(data.get("delta") or "")
        elif kind == "response.function_call_arguments.done":
            item = self._item(data.get("output_index"))
            if item is not None and isinstance(data.get("arguments"), str):
                item["arguments"] = data["arguments"]
        elif kind in _TERMINAL and isinstance(data.get("response"), dict):
            self.response = dict(data["response"])
            return True
        return False

    def result(self, ended: bool) -> dict[str, Any]:
        if self.response is None or not ended or self.response.get("status") in (None, "in_progress", "queued"):
            raise self.broken("ended without response.completed, .incomplete or .failed: the answer was broken off")
        if not self.response.get("output") and self.items:
            return {**self.response, "output": [self.items[i] for i in sorted(self.items)]}
        return self.response
