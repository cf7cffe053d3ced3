"""Response normalisation: a decoded Chat Completions body -> :class:`ChatCompletion`.

Pure: no IO. :class:`Answers` holds what one endpoint needs to judge an
answer and word a refusal (its provider name, URL and secret scrubbers);
a body that is not a complete answer becomes a typed
:class:`~lionops.errors.EndpointResponseError` (or
:class:`~lionops.errors.EndpointProviderError` for the provider's own error),
never a partial answer.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..._json import loads as bounded_json
from ..._text import summarize
from ...errors import EndpointProviderError, EndpointResponseError, JSONLimitError
from ...usage import Usage
from .config import BODY_PREVIEW

__all__ = ["ChatCompletion", "Answers", "WHOLE_FINISH_REASONS", "plain_reason"]

#: The finish reasons of a whole answer: OpenAI's own, and the synonyms
#: OpenAI-compatible hosts send for a natural end (``eos``, ``eos_token``,
#: ``stop_sequence``, ``end_turn``). Any other, or none, marks an answer that
#: is never taken for a whole one (``length`` and ``content_filter`` are cuts
#: and refusals). An endpoint's ``whole_finish_reasons`` may widen it.
WHOLE_FINISH_REASONS = frozenset({"stop", "tool_calls", "function_call", "eos", "eos_token", "stop_sequence",
                                  "end_turn"})
#: finish reasons kept as they are (any other is the provider's own text, scrubbed where it is kept)
_KNOWN_REASONS = WHOLE_FINISH_REASONS | {"length", "content_filter", "error"}


def plain_reason(reason: str) -> bool:
    """Whether a finish or stop reason may be kept without a scrub: a known
    one, or a plain word of at most 40 letters and underscores (a key has digits)."""
    return reason in _KNOWN_REASONS or (len(reason) <= 40 and reason.replace("_", "").isalpha())

@dataclass(frozen=True, slots=True)
class ChatCompletion:
    """The first choice of one Chat Completions answer, normalized.

    Attributes:
        text: the assistant text (parts joined), or ``None``.
        refusal: the provider's refusal text, or ``None``.
        tool_calls: the raw ``tool_calls`` entries (``{"id", "type",
            "function": {"name", "arguments"}}``), arguments still JSON text;
            every entry the server sent, also one that is not an object.
        finish_reason: ``"stop"``, ``"length"``, ``"tool_calls"``,
            ``"content_filter"``, ... or ``None``.
        usage: the server's integer token counts as sent (``prompt_tokens``,
            ``completion_tokens``, ``total_tokens``); empty when it sent none.
        model: the model name the server reports.
        latency_s: wall time of the whole call in seconds, retries included.
        attempts: HTTP requests made (1 + retries).
        retries: one ``{"status", "delay_s"}`` per retry, in order.
        raw: the decoded response body.
        reasoning: the text of ``reasoning_content`` / ``reasoning`` fields
            (or their stream deltas), kept as a fact; never parsed.
        choices: how many choices the server sent (merged into this answer
            unless the request asked for ``n > 1``).
        tokens: the token usage as one :class:`~lionops.usage.Usage`, the same
            on every endpoint (cache and reasoning counts included, the
            server's whole ``usage`` object kept as ``tokens.raw``).
    """

    text: str | None
    refusal: str | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    finish_reason: str | None = None
    usage: dict[str, int] = field(default_factory=dict)
    model: str | None = None
    latency_s: float = 0.0
    attempts: int = 1
    retries: list[dict[str, Any]] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict, repr=False)
    reasoning: str | None = field(default=None, repr=False)
    choices: int = 1
    tokens: Usage = field(default_factory=Usage)


@dataclass(frozen=True, slots=True)
class Answers:
    """How one endpoint's answers are read and its refusals worded.

    Attributes:
        provider: the provider name shown in messages.
        url: the request URL as shown (no credentials).
        scrub: removes the endpoint's secrets from a text.
        preview: at most :data:`BODY_PREVIEW` characters of a text, secrets removed before the cut.
    """

    provider: str
    url: str
    scrub: Callable[[str], str]
    preview: Callable[[str], str]

    def provider_error(self, err: Any, status: int, where: str) -> EndpointProviderError:
        """The provider's own error (``{"message", "code", ...}`` or text) as a typed error.

        Every value the provider supplied (message, ``code``, and any other
        field shown) goes through the same scrub: the message, the code shown
        and the ``code`` attribute hold no secret of the endpoint."""
        message = err.get("message") if isinstance(err, dict) else err
        message = self.scrub(message if isinstance(message, str) else dumps_preview(err))
        code = self.scrubbed(err.get("code")) if isinstance(err, dict) else None
        return EndpointProviderError(
            f"{self.provider}: POST {self.url} answered {status} with {where}: {message[:BODY_PREVIEW]!r}"
            + (f" (code {self.scrub(repr(code))[:BODY_PREVIEW]})" if code is not None else ""),
            provider_message=message[:BODY_PREVIEW], code=code, provider=self.provider, url=self.url,
        )

    def scrubbed(self, value: Any) -> Any:
        """A provider-supplied value with the endpoint's secrets removed: text
        scrubbed, numbers and flags kept, anything else as its scrubbed JSON text."""
        if value is None or isinstance(value, (bool, int, float)):
            return value
        if isinstance(value, str):
            return self.scrub(value)
        return self.scrub(dumps_preview(value))

    def response_error(self, what: str, status: int, text: str) -> EndpointResponseError:
        """A refused answer; ``what`` may quote the server, so it is scrubbed
        first and cut after (a cut before the scrub could keep part of a secret)."""
        described = summarize(self.scrub(what), 400)
        return EndpointResponseError(
            f"{self.provider}: POST {self.url} answered {status} with {described}: {self.preview(text)!r}",
            provider=self.provider, url=self.url,
        )


    def decode_json(self, text: str, status: int, what: str) -> Any:
        try:
            return bounded_json(text)
        except JSONLimitError as exc:
            raise self.response_error(f"JSON nested too deep to decode (more than {exc.maximum} levels)",
                                      status, text) from None
        except ValueError:
            raise self.response_error(what, status, text) from None


    def completion(self, data: Any, *, latency: float, attempts: int,
                    retries: list[dict[str, Any]], n: Any = None) -> ChatCompletion:
        """The normalized answer of a decoded body (see :class:`ChatCompletion`).

        Every choice of the requested answer is read: with ``n`` unset or 1,
        all choices the server sent are merged, in index order, into one
        answer (some servers put the text in ``choices[0]`` and the tool
        call in ``choices[1]``); with ``n > 1`` the answer is the lowest-index
        choice and the others stay in ``raw``. A body that is not a
        completion (an ``error`` object, no or null ``choices``, a choice or
        message that is not an object) raises a typed error; nothing of it
        is passed on."""

        def bad(what: str) -> EndpointResponseError:  # the body is shown only when it is refused
            return self.response_error(what, 200, dumps_preview(data))

        if not isinstance(data, dict):
            raise bad("a JSON body that is not an object")
        err = error_of(data)
        if err is not None:
            raise self.provider_error(err, 200, "an error object")
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices:
            raise bad("no choices")
        picked = self._picked(choices, n, bad)
        try:
            read = [text_of(m.get("content")) for _, _, m in picked]
        except ValueError as exc:
            raise bad(str(exc)) from None
        texts = [t for t in read if t]
        refusals = [r for _, _, m in picked for r in refusals_of(m)]
        reasoning = [r for _, _, m in picked for r in reasoning_of(m)]
        usage = data.get("usage") or {}
        return ChatCompletion(
            text="\n".join(texts) if texts else read[0],
            refusal="\n".join(refusals) or None,
            tool_calls=_merged_calls(picked, bad),
            finish_reason=merged_finish([c.get("finish_reason") for _, c, _ in picked]),
            usage={k: v for k, v in usage.items() if isinstance(v, int)} if isinstance(usage, dict) else {},
            model=data.get("model") if isinstance(data.get("model"), str) else None,
            latency_s=latency,
            attempts=attempts,
            retries=retries,
            raw=data,
            reasoning="\n".join(reasoning) or None,
            choices=len(choices),
            tokens=Usage.from_chat_completions(usage),
        )

    def _picked(self, choices: list[Any], n: Any,
                bad: Callable[[str], EndpointResponseError]) -> list[tuple[int, dict[str, Any], dict[str, Any]]]:
        """``(index, choice, message)`` of the choices that make the answer, in
        index order (only the first when ``n > 1``); a malformed choice or one
        that ended in an error raises."""
        picked: list[tuple[int, dict[str, Any], dict[str, Any]]] = []
        for pos, choice in enumerate(choices):
            if not isinstance(choice, dict):
                raise bad("a choice that is not an object")
            message = choice.get("message") or {}
            if not isinstance(message, dict):
                raise bad("a message that is not an object")
            if not isinstance(message.get("tool_calls") or [], list):
                raise bad("tool_calls that is not a list")
            if message.get("function_call") is not None and not isinstance(message["function_call"], dict):
                raise bad("a function_call that is not an object")
            if choice.get("finish_reason") == "error" or choice.get("error"):
                try:
                    said = text_of(message.get("content"))
                except ValueError:
                    said = None  # the error stands; content that is no text adds nothing to it
                err = choice.get("error") or said or "finish_reason 'error'"
                raise self.provider_error(err, 200, "a choice that ended in an error")
            index = choice.get("index")
            picked.append((index if isinstance(index, int) else pos, choice, message))
        picked.sort(key=lambda item: item[0])
        return picked[:1] if isinstance(n, int) and n > 1 else picked


def _merged_calls(picked: list[tuple[int, dict[str, Any], dict[str, Any]]],
                  bad: Callable[[str], EndpointResponseError]) -> list[Any]:
    """The tool calls of the picked choices, in order; one id in two choices raises."""
    calls: list[Any] = []
    seen: dict[str, int] = {}
    for index, _, m in picked:
        for call in calls_of(m):
            call_id = call.get("id") if isinstance(call, dict) else None
            if isinstance(call_id, str) and call_id and seen.setdefault(call_id, index) != index:
                raise bad(f"the tool-call id {call_id!r} in choice {seen[call_id]} and again in choice "
                          f"{index} (one call or two cannot be told)")
            calls.append(call)
    return calls


def error_of(obj: Any) -> Any:
    """The provider error an answer object carries: its ``error`` (object or
    text), or the object itself when it is an error (``"object": "error"``,
    ``"type": "error"``); ``None`` when it carries none."""
    if not isinstance(obj, dict):
        return None
    if obj.get("error"):
        return obj["error"]
    if obj.get("object") == "error" or obj.get("type") == "error":
        return obj
    return None


#: The tool-call index under which a stream's legacy ``function_call`` deltas join.
LEGACY_CALL = -1


def empty_call(function: Any) -> bool:
    """Whether a legacy ``function_call`` carries nothing: every value empty
    (``{"name": "", "arguments": ""}``, ``null``s, blanks, ``"{}"``). Some hosts
    send such a placeholder on every answer; it requests no tool."""
    if not isinstance(function, dict):
        return False
    return all(value in (None, {}, "{}") or (isinstance(value, str) and not value.strip())
               for value in function.values())


def calls_of(message: dict[str, Any]) -> list[Any]:
    """A message's tool calls: its ``tool_calls``, then the legacy
    ``function_call`` (``{"name", "arguments"}``) as one more call, so a server
    that answers in the older shape has its call run, never dropped. A
    placeholder ``function_call`` with every value empty is no call."""
    calls = list(message.get("tool_calls") or [])
    legacy = message.get("function_call")
    if isinstance(legacy, dict) and legacy and not empty_call(legacy):
        calls.append({"id": None, "type": "function", "function": legacy})
    return calls


def refusals_of(message: dict[str, Any]) -> list[str]:
    """The refusal text of a message or delta: its ``refusal``, and content
    parts of type ``refusal``."""
    out = [_refusal_text(message.get("refusal"))]
    content = message.get("content")
    if isinstance(content, list):
        out.extend(_refusal_text(p.get("refusal")) for p in content
                   if isinstance(p, dict) and p.get("type") == "refusal")
    return [text for text in out if text]


#: what a refusal that is no text reads as: still a refusal (nothing parsed, no tool runs)
NOT_TEXT_REFUSAL = "the model refused (the refusal it sent was no text)"


def _refusal_text(value: Any) -> str | None:
    """A refusal as text: a string as it is; any other value that is set
    (``5``, an object) is still a refusal, read as :data:`NOT_TEXT_REFUSAL`;
    an empty or unset one (``""``, ``None``, ``false``, ``{}``) is none."""
    if isinstance(value, str) or not value:
        return value or None
    return NOT_TEXT_REFUSAL


def reasoning_of(message: dict[str, Any]) -> list[str]:
    """The reasoning text of a message or delta: ``reasoning_content``,
    ``reasoning``, and content parts of type ``reasoning`` / ``thinking``."""
    out = []
    content = message.get("content")
    if isinstance(content, list):
        for part in content:
            if isinstance(part, dict) and part.get("type") in ("reasoning", "thinking"):
                value = part.get("text") or part.get("thinking") or part.get("reasoning")
                if isinstance(value, str) and value:
                    out.append(value)
    for key in ("reasoning_content", "reasoning"):
        value = message.get(key)
        if isinstance(value, str) and value:
            out.append(value)
        elif isinstance(value, dict) and isinstance(value.get("content"), str):
            out.append(value["content"])
    return out


FINISH_RANK = {"length": 0, "content_filter": 1, "tool_calls": 3, "function_call": 3, "stop": 4}
#: The rank of any other reason (a synonym of a whole end, or a host's own cut):
#: before tool calls and stop, so the endpoint's ``whole_finish_reasons`` judge it.
_OTHER_RANK = 2


def merged_finish(reasons: list[Any]) -> str | None:
    """One finish reason for merged choices: ``None`` when any of them has
    none (an answer said whole in part is not said whole); else a cut-off or
    filter wins, then any other reason, then tool calls, then stop."""
    said = [r for r in reasons if isinstance(r, str) and r]
    if not said or len(said) < len(reasons):
        return None
    return min(said, key=lambda r: FINISH_RANK.get(r, _OTHER_RANK))


def dumps_preview(data: Any) -> str:
    try:
        return json.dumps(data, default=str)[: 4 * BODY_PREVIEW]
    except (ValueError, RecursionError):
        return repr(data)[: 4 * BODY_PREVIEW]


def list_of(obj: dict[str, Any], key: str) -> list[Any]:
    """``obj[key]`` as a list (absent or null: empty); ``ValueError`` for another type."""
    value = obj.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValueError(f"{key} that is not a list")
    return value


def text_of(content: Any) -> str | None:
    """Assistant ``content`` as text: a string, or the text parts of a list
    (parts of other types are no text).

    Raises:
        ValueError: ``content`` is neither, or a text part's ``text`` is no
            string: a malformed answer, never read as text.
    """
    if content is None or isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise ValueError(f"content that is {type(content).__name__}, not text")
    parts = [p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") in ("text", "output_text")]
    for part in parts:
        if not isinstance(part, str):
            raise ValueError(f"a content part whose text is {type(part).__name__}, not text")
    return "".join(parts) if parts else None

