"""One token-usage record for every endpoint: :class:`Usage`.

Providers count tokens in different ways: OpenAI's ``prompt_tokens``
includes cached input, Anthropic's ``input_tokens`` does not, Gemini's
``candidatesTokenCount`` leaves out thinking. A :class:`Usage` counts them
one way, whatever the provider:

- ``input_tokens`` is **every** input token: cache reads and cache writes
  included. ``cache_read_tokens`` and ``cache_write_tokens`` are parts of it.
- ``output_tokens`` is every generated token: reasoning included.
  ``reasoning_tokens`` is part of it.
- a count the provider did not report is ``None`` (not 0).

The provider's own counts are kept unchanged in ``raw``. The mapping for
each provider is the table "Token usage" in docs/api.md. Pure: no IO.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ._frozen import FrozenDict

__all__ = ["Usage"]


def _count(value: Any) -> int | None:
    """``value`` when it is a non-negative integer count, else ``None``."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _get(raw: Mapping[str, Any], *path: str) -> int | None:
    value: Any = raw
    for key in path:
        if type(value) is not dict and not isinstance(value, Mapping):  # a dict skips the ABC check
            return None
        value = value.get(key)
    return _count(value)


def _sum(*parts: int | None) -> int | None:
    """The sum of the reported parts; ``None`` when none is reported."""
    known = [p for p in parts if p is not None]
    return sum(known) if known else None


def _frozen(raw: Any) -> Mapping[str, Any]:
    """A read-only copy of a JSON usage object (nested objects too)."""
    if not isinstance(raw, Mapping):
        return FrozenDict()
    return FrozenDict({str(k): _frozen(v) if isinstance(v, Mapping) else v for k, v in raw.items()})


@dataclass(frozen=True, slots=True)
class Usage:
    """The tokens one model call used, counted one way for every provider.

    Attributes:
        input_tokens: every input token, cache reads and writes included.
        output_tokens: every generated token, reasoning included.
        cache_read_tokens: input tokens read from the provider's prompt cache.
        cache_write_tokens: input tokens written to the provider's prompt cache.
        reasoning_tokens: output tokens spent on reasoning (thinking).
        raw: the provider's own counts, as it sent them (read-only).

    Every count is ``None`` when the provider did not report it.
    """

    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    reasoning_tokens: int | None = None
    raw: Mapping[str, Any] = field(default_factory=FrozenDict, repr=False, compare=False)

    @property
    def total_tokens(self) -> int | None:
        """``input_tokens + output_tokens``; ``None`` when neither is reported."""
        return _sum(self.input_tokens, self.output_tokens)

    def __bool__(self) -> bool:
        """False when the provider reported no count at all."""
        return any(v is not None for v in (self.input_tokens, self.output_tokens, self.cache_read_tokens,
                                           self.cache_write_tokens, self.reasoning_tokens))

    def as_dict(self) -> dict[str, int]:
        """The reported counts (and ``total_tokens``) as a JSON object; unreported ones left out."""
        out = {
            "input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
            "cache_read_tokens": self.cache_read_tokens, "cache_write_tokens": self.cache_write_tokens,
            "reasoning_tokens": self.reasoning_tokens, "total_tokens": self.total_tokens,
        }
        return {k: v for k, v in out.items() if v is not None}

    # ------------------------------------------------------------ providers

    @classmethod
    def from_chat_completions(cls, raw: Any) -> Usage:
        """A Chat Completions ``usage`` object (OpenAI and compatible hosts).

        ``prompt_tokens`` already includes ``prompt_tokens_details.cached_tokens``
        and ``completion_tokens`` includes ``completion_tokens_details.reasoning_tokens``.
        A host that reports cache writes the Anthropic way
        (``cache_creation_input_tokens``) or as ``prompt_tokens_details.cache_write_tokens``
        has them kept."""
        if not isinstance(raw, Mapping):
            return cls()
        return cls(
            input_tokens=_get(raw, "prompt_tokens"),
            output_tokens=_get(raw, "completion_tokens"),
            cache_read_tokens=_get(raw, "prompt_tokens_details", "cached_tokens"),
            cache_write_tokens=_get(raw, "prompt_tokens_details", "cache_write_tokens")
            or _get(raw, "cache_creation_input_tokens"),
            reasoning_tokens=_get(raw, "completion_tokens_details", "reasoning_tokens"),
            raw=_frozen(raw),
        )

    @classmethod
    def from_responses(cls, raw: Any) -> Usage:
        """An OpenAI Responses ``usage`` object (``input_tokens`` includes
        ``input_tokens_details.cached_tokens``, ``output_tokens`` includes
        ``output_tokens_details.reasoning_tokens``); Codex's ``turn.completed``
        usage (``cached_input_tokens``, ``reasoning_output_tokens``) too."""
        if not isinstance(raw, Mapping):
            return cls()
        return cls(
            input_tokens=_get(raw, "input_tokens"),
            output_tokens=_get(raw, "output_tokens"),
            cache_read_tokens=_get(raw, "input_tokens_details", "cached_tokens") or _get(raw, "cached_input_tokens"),
            cache_write_tokens=_get(raw, "cache_write_input_tokens"),
            reasoning_tokens=_get(raw, "output_tokens_details", "reasoning_tokens")
            or _get(raw, "reasoning_output_tokens"),
            raw=_frozen(raw),
        )

    @classmethod
    def from_anthropic(cls, raw: Any) -> Usage:
        """An Anthropic Messages ``usage`` object (Claude Code's result event too).

        Anthropic's ``input_tokens`` leaves out ``cache_read_input_tokens`` and
        ``cache_creation_input_tokens``: they are added; without
        ``input_tokens`` the input is not counted at all (as in the
        endpoint's ``usage`` dict), only the cache counts are kept. Thinking is counted in
        ``output_tokens``; Claude Code reports it apart as
        ``output_tokens_details.thinking_tokens``."""
        if not isinstance(raw, Mapping):
            return cls()
        read = _get(raw, "cache_read_input_tokens")
        write = _get(raw, "cache_creation_input_tokens")
        fresh = _get(raw, "input_tokens")
        return cls(  # with no input_tokens the input's total is not known: the cache counts alone are no total
            input_tokens=None if fresh is None else _sum(fresh, read, write),
            output_tokens=_get(raw, "output_tokens"),
            cache_read_tokens=read,
            cache_write_tokens=write,
            reasoning_tokens=_get(raw, "output_tokens_details", "thinking_tokens"),
            raw=_frozen(raw),
        )

    @classmethod
    def from_gemini(cls, raw: Any) -> Usage:
        """A Gemini ``usageMetadata`` object (``promptTokenCount`` includes
        ``cachedContentTokenCount``; ``candidatesTokenCount`` leaves out
        ``thoughtsTokenCount``, which is added), or the Gemini CLI's
        ``stats`` (``input_tokens`` includes ``cached``; ``input`` is the
        uncached part)."""
        if not isinstance(raw, Mapping):
            return cls()
        if "input_tokens" in raw or "input" in raw or "cached" in raw:  # the CLI's stats
            cached = _get(raw, "cached")
            given = _get(raw, "input_tokens")
            return cls(
                input_tokens=given if given is not None else _sum(_get(raw, "input"), cached),
                output_tokens=_get(raw, "output_tokens"),
                cache_read_tokens=cached,
                reasoning_tokens=_get(raw, "thoughts"),
                raw=_frozen(raw),
            )
        thoughts = _get(raw, "thoughtsTokenCount")
        return cls(
            input_tokens=_sum(_get(raw, "promptTokenCount"), _get(raw, "toolUsePromptTokenCount")),
            output_tokens=_sum(_get(raw, "candidatesTokenCount"), thoughts),
            cache_read_tokens=_get(raw, "cachedContentTokenCount"),
            reasoning_tokens=thoughts,
            raw=_frozen(raw),
        )

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={v}" for k, v in self.as_dict().items() if k != "total_tokens")
        return f"Usage({shown})"
