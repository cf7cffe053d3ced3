"""The Gemini ``streamGenerateContent?alt=sse`` stream folded into one answer. Pure: no IO.

Each event is a whole ``GenerateContentResponse`` holding the next parts of
the first candidate; the last carries ``finishReason`` and
``usageMetadata``. Parts are appended in order, adjacent text parts of the
same kind (thought or answer) joined; a part's ``thoughtSignature`` is
kept. An ``error`` object is a typed error; a stream that ends with no
``finishReason`` (and no ``promptFeedback.blockReason``) is a typed error,
never a partial answer.
"""

from __future__ import annotations

from typing import Any

from .._native import Folder

__all__ = ["GenerateFolder"]


class GenerateFolder(Folder):
    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.last: dict[str, Any] | None = None
        self.parts: list[dict[str, Any]] = []
        self.finish: Any = None
        self.candidate: dict[str, Any] = {}

    def feed(self, event: str | None, data: Any) -> bool:
        if not isinstance(data, dict):
            raise self.broken("sent an event that is not a JSON object")
        if isinstance(data.get("error"), dict):
            err = data["error"]
            passing = err.get("status") in ("UNAVAILABLE", "INTERNAL") or err.get("code") in (500, 503)
            raise self.answers.provider_error(err, self.status, "an error in the stream", retryable=passing)
        self.last = {**(self.last or {}), **{k: v for k, v in data.items() if k != "candidates"}}
        candidates = data.get("candidates")
        if isinstance(candidates, list) and candidates and isinstance(candidates[0], dict):
            candidate = candidates[0]
            self.candidate.update({k: v for k, v in candidate.items() if k != "content"})
            content: Any = candidate.get("content")
            for part in (content.get("parts") if isinstance(content, dict) else None) or ():
                if isinstance(part, dict):
                    self._add(dict(part))
            if candidate.get("finishReason"):
                self.finish = candidate["finishReason"]
        return False

    def _add(self, part: dict[str, Any]) -> None:
        prev = self.parts[-1] if self.parts else None
        if (prev is not None and isinstance(part.get("text"), str) and isinstance(prev.get("text"), str)
                and bool(prev.get("thought")) == bool(part.get("thought")) and set(part) <= {"text", "thought",
                                                                                             "thoughtSignature"}
                and "thoughtSignature" not in prev):
            prev["text"] += part["text"]
            if "thoughtSignature" in part:
                prev["thoughtSignature"] = part["thoughtSignature"]
            return
        self.parts.append(part)

    def settled(self) -> bool:
        return bool(self.finish)

    def result(self, ended: bool) -> dict[str, Any]:
        if self.last is None:
            raise self.broken("ended without an answer")
        blocked = isinstance(self.last.get("promptFeedback"), dict) and self.last["promptFeedback"].get("blockReason")
        if not blocked and not self.finish:
            raise self.broken("ended without a finishReason: the answer was broken off")
        out = dict(self.last)
        if self.candidate or self.parts:
            out["candidates"] = [{**self.candidate, "content": {"role": "model", "parts": self.parts}}]
        return out
