"""What every provider's collector shares: usage, answer segments, failure text."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .records import CLIRun, CLIToolEvent


def _object(value: Any) -> dict[str, Any]:
    """``value`` when it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _usage(raw: Any, mapping: Mapping[str, str], *, cached_in_input: str | None = None,
           keep_extra: bool = False) -> dict[str, int]:
    """Token counts renamed by ``mapping``; ``total_tokens`` is input plus output.

    ``input_tokens`` never includes cache reads (they are
    ``cache_read_input_tokens``), so adding the two never counts a token
    twice: when the CLI's input count includes its cached count
    (``cached_in_input`` names that field), the cached part is taken out.
    With ``keep_extra``, other integer fields are kept under their own names.
    """
    out: dict[str, int] = {}
    if not isinstance(raw, Mapping):
        return out
    for src, dst in mapping.items():
        value = _int(raw.get(src))
        if value is not None:
            out[dst] = value
    if cached_in_input is not None and "input_tokens" in out:
        cached = _int(raw.get(cached_in_input)) or 0
        out["input_tokens"] = max(out["input_tokens"] - cached, 0)
    if keep_extra:
        for key, value in raw.items():
            if isinstance(key, str) and key not in mapping and _int(value) is not None:
                out.setdefault(key, value)
    if "input_tokens" in out or "output_tokens" in out:
        out["total_tokens"] = out.get("input_tokens", 0) + out.get("output_tokens", 0)
    return out


def _distinct(messages: Sequence[str], without: str | None = None) -> list[str]:
    """``messages`` without repeats (first occurrence kept) and without ``without``."""
    seen: list[str] = []
    for message in messages:
        if message and message != without and message not in seen:
            seen.append(message)
    return seen


class _Collector:
    """Folds a provider's events into a :class:`CLIRun`; ``on_tool`` sees CLI tool calls.

    Answer text is kept as segments ``(message key, text)`` since the last
    CLI tool request; the answer is the exact concatenation of the segments
    of the last message that has text (text the CLI did not print is never
    inserted).
    """

    def __init__(self, run: CLIRun, on_tool: Callable[[CLIToolEvent], None] | None = None) -> None:
        self.run = run
        self.on_tool = on_tool
        self._segments: list[tuple[Any, str]] = []
        self._result_text: str | None = None
        self._anonymous = 0

    def _key(self, key: Any) -> Any:
        if key is None:
            self._anonymous += 1
            return ("anonymous", self._anonymous)
        return key

    def _text(self, key: Any, text: str) -> None:
        self._segments.append((key, text))

    def _tool(self, event: CLIToolEvent) -> None:
        self.run.tool_events.append(event)
        if event.kind == "request":
            # Text before a CLI tool call is preamble, not the answer.
            self._segments.clear()
        if self.on_tool is not None:
            self.on_tool(event)

    def _answer(self) -> str:
        with_text = [key for key, text in self._segments if text]
        if not with_text:
            return ""
        last = with_text[-1]
        return "".join(text for key, text in self._segments if key == last)

    def finish(self) -> None:
        text = self._answer()
        if not text.strip() and self._result_text:
            text = self._result_text
        self.run.text = text if text.strip() else None

    def handle(self, event: dict[str, Any]) -> None:  # pragma: no cover - abstract
        raise NotImplementedError


def _failure_message(subtype: Any, result: Any, errors: Any, status: Any = None) -> str:
    """A non-empty description of a failed result; a reason is said once."""
    parts: list[str] = []
    if isinstance(result, str) and result.strip():
        parts.append(result.strip())
    if isinstance(errors, list):
        parts.extend(str(e) if not isinstance(e, dict) else str(e.get("message") or e) for e in errors if e)
    elif isinstance(errors, str) and errors.strip():
        parts.append(errors.strip())
    if status is not None:
        parts.append(f"API error status {status}")
    parts = _distinct(parts)
    if not parts:
        parts.append(f"the CLI reported {subtype or 'an error'} with no error message")
    return "; ".join(parts)
