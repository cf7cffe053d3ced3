"""Provider presets and the configuration bounds of an OpenAI-compatible endpoint.

:data:`CHAT_PROVIDERS` registers each Chat Completions provider (its default
base URL, the environment variables it reads, whether it is local) in
:mod:`lionops.endpoints.registry`; the constants here are the defaults of the
endpoint's time and size bounds, and :func:`call_deadline` bounds every
``chat()`` made inside one call of the adapter phase. Pure: no IO.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from ... import clock
from ...errors import ArgumentTypeError, BaseURLError, ConfigurationError
from ..base import StructuredMode
from ..registry import ProviderSpec, register_provider

__all__ = [
    "CHAT_PROVIDERS", "RetryPolicy", "Limits", "StructuredMode", "DEFAULT_DEADLINE", "DEFAULT_MAX_RESPONSE_BYTES",
    "call_deadline",
]


_CHAT = "lionops.endpoints.openai:ChatCompletionsEndpoint"

#: The Chat Completions providers (registered in :mod:`lionops.endpoints.registry`).
#: Local servers read no key variable, so a cloud key is never sent to them.
CHAT_PROVIDERS = tuple(register_provider(spec) for spec in (
    ProviderSpec("openai", _CHAT, "openai", "https://api.openai.com/v1", "OPENAI_API_KEY", "OPENAI_BASE_URL"),
    ProviderSpec("openrouter", _CHAT, "openrouter", "https://openrouter.ai/api/v1", "OPENROUTER_API_KEY"),
    ProviderSpec("vllm", _CHAT, "vllm", "http://127.0.0.1:8000/v1", local=True),
    ProviderSpec("ollama", _CHAT, "ollama", "http://127.0.0.1:11434/v1", local=True),
    ProviderSpec("llamacpp", _CHAT, "llamacpp", "http://127.0.0.1:8080/v1", local=True),
    ProviderSpec("lmstudio", _CHAT, "lmstudio", "http://127.0.0.1:1234/v1", local=True),
))

def _shown(url: str) -> str:
    """The part of a refused ``base_url`` an error may show: no query or
    fragment (they may hold a key), nothing when it holds user info."""
    head = url.split("?", 1)[0].split("#", 1)[0]
    return "(not shown: it holds user info)" if "@" in head else repr(head[:200])


def check_base_url(provider: str, url: str) -> None:
    """Refuse a ``base_url`` that cannot be an API root, naming the fault.

    Raises:
        BaseURLError: a space or control character, an unreadable URL, no
            scheme or one other than http/https, no host, a port that is not
            a number in 1-65535, or user info (see :class:`BaseURLError`).
    """
    where = f"{provider}: base_url"
    for pos, char in enumerate(url):
        if char.isspace() or ord(char) < 32 or ord(char) == 127:
            raise BaseURLError(f"{where} holds a space or control character at position {pos}; "
                               "remove it (percent-encode one that belongs in a path)", fault="space")
    try:
        split = urlsplit(url)
    except ValueError as exc:
        raise BaseURLError(f"{where} {_shown(url)} cannot be read: {exc}", fault="unreadable") from None
    scheme = split.scheme.lower()
    if scheme not in ("http", "https"):
        if "://" not in url:
            raise BaseURLError(f"{where} {_shown(url)} has no scheme: write it as http://... or https://...",
                               fault="no_scheme")
        raise BaseURLError(f"{where} has the scheme {split.scheme[:20]!r}; only http and https are spoken",
                           fault="scheme")
    if "@" in split.netloc:
        # httpx2 would send it as Basic auth in place of the bearer key, and
        # an echoing server would return it: refused, never shown.
        raise BaseURLError(f"{where} must not contain user info ('user:password@'); "
                           "pass the key as api_key= or a header in headers=", fault="user_info")
    try:
        port = split.port
    except ValueError as exc:
        raise BaseURLError(f"{where} {_shown(url)} has a bad port: {exc}", fault="port") from None
    if port == 0:
        raise BaseURLError(f"{where} {_shown(url)} has the port 0, which no server listens on", fault="port")
    if not split.hostname:
        raise BaseURLError(f"{where} {_shown(url)} names no host", fault="no_host")


#: Request keys the Middle owns; default options may not set them.
RESERVED = frozenset({"messages"})

#: The longest preview of a body (or an error text) an error message shows.
BODY_PREVIEW = 300

#: The default total time for one call (retries, waits and streaming included), seconds.
DEFAULT_DEADLINE = 600.0

#: When the running adapter call must end (:func:`lionops.clock.monotonic`),
#: so every ``chat()`` inside it (a parse-model re-ask too) ends by then; ``None`` outside one.
_CALL_ENDS_AT: ContextVar[float | None] = ContextVar("lionops_call_ends_at", default=None)


@contextlib.contextmanager
def call_deadline(seconds: float) -> Iterator[float]:
    """Bound every ``chat()`` made in this context (and tasks started from it)
    to end within ``seconds`` from now: the total of one adapter call. Nested
    bounds keep the earlier end. Yields the end time.

    Raises:
        ConfigurationError: ``seconds`` is not a positive number.
    """
    ends = clock.monotonic() + check_deadline(seconds)
    outer = _CALL_ENDS_AT.get()
    token = _CALL_ENDS_AT.set(ends if outer is None else min(outer, ends))
    try:
        yield ends
    finally:
        _CALL_ENDS_AT.reset(token)


#: The default cap on a response body, counted after decompression.
DEFAULT_MAX_RESPONSE_BYTES = 16 * 1024 * 1024


def check_deadline(value: Any) -> float:
    """``value`` as a deadline in seconds; ``ConfigurationError`` unless a positive number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ConfigurationError(f"deadline must be a positive number of seconds, got {value!r}")
    return float(value)


def _number(name: str, value: Any, *, count: bool = False) -> float:
    """``value`` as a number: ``ArgumentTypeError`` (a ``TypeError``) for anything
    else, ``ConfigurationError`` for ``nan`` or an infinite count."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ArgumentTypeError(f"{name} takes a number of {'items' if count else 'seconds'}, got {value!r}")
    if isinstance(value, float) and (math.isnan(value) or (count and math.isinf(value))):
        raise ConfigurationError(f"{name} must be a number (finite for a count), got {value!r}")
    return value


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """When a failed request is made again (429, 5xx, a refused connection) and how long to wait.

    Attributes:
        max_retries: retries after the first request (2 → at most 3 requests).
        retry_after_cap: the longest ``Retry-After`` honoured, in seconds; a
            larger one raises :class:`~lionops.errors.EndpointRateLimitError` at once.
        backoff_initial, backoff_factor, backoff_max: the wait before retry
            *n* when the server gives no ``Retry-After``:
            ``min(backoff_initial * backoff_factor ** (n - 1), backoff_max)`` s.

    Raises:
        ConfigurationError: a value that is not a number, ``nan``, an infinite
            count, or a negative ``max_retries`` / ``retry_after_cap``.
    """

    max_retries: int = 2
    retry_after_cap: float = 60.0
    backoff_initial: float = 0.5
    backoff_factor: float = 2.0
    backoff_max: float = 8.0

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "max_retries", int(_number("max_retries", self.max_retries, count=True)))
        for name in ("retry_after_cap", "backoff_initial", "backoff_factor", "backoff_max"):
            set_(self, name, float(_number(name, getattr(self, name))))
        if self.max_retries < 0 or self.retry_after_cap < 0:
            raise ConfigurationError("max_retries must be >= 0, timeout > 0, retry_after_cap >= 0")

    def backoff(self, retry: int) -> float:
        """Seconds to wait before retry ``retry`` (1 for the first) without ``Retry-After``."""
        return min(self.backoff_initial * self.backoff_factor ** (retry - 1), self.backoff_max)


@dataclass(frozen=True, slots=True)
class Limits:
    """The time and size bounds of one call.

    Attributes:
        timeout: seconds one socket operation may wait (one connect, one
            write, one read, a pool slot); it does not bound the call.
        deadline: seconds for the whole call: every attempt, every retry wait,
            a whole stream (per call: ``chat(..., deadline=...)``).
        silence_timeout: the longest a stream may go without a ``data:`` event, seconds.
        max_response_bytes: the largest response body read, counted after decompression.

    Raises:
        ConfigurationError: a value that is not a positive number (a finite
            one for ``max_response_bytes``).
    """

    timeout: float = 60.0
    deadline: float = DEFAULT_DEADLINE
    silence_timeout: float = 60.0
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "timeout", float(_number("timeout", self.timeout)))
        set_(self, "silence_timeout", float(_number("silence_timeout", self.silence_timeout)))
        set_(self, "max_response_bytes", int(_number("max_response_bytes", self.max_response_bytes, count=True)))
        if self.timeout <= 0:
            raise ConfigurationError("max_retries must be >= 0, timeout > 0, retry_after_cap >= 0")
        set_(self, "deadline", check_deadline(self.deadline))
        if self.silence_timeout <= 0 or self.max_response_bytes <= 0:
            raise ConfigurationError("silence_timeout and max_response_bytes must be > 0")


#: The keywords that build a :class:`RetryPolicy` / :class:`Limits` (also accepted one by one).
RETRY_KEYWORDS = ("max_retries", "retry_after_cap", "backoff_initial", "backoff_factor", "backoff_max")
LIMIT_KEYWORDS = ("timeout", "deadline", "silence_timeout", "max_response_bytes")

#: The endpoint's own keywords: a near miss of one is refused, not sent as a request option.
ENDPOINT_KEYWORDS = (
    "provider", "model", "base_url", "api_key", "retry", "limits", *RETRY_KEYWORDS, *LIMIT_KEYWORDS,
    "structured_output", "stream", "headers", "verify", "native_tools",
)
