"""Provider presets and the configuration bounds of an OpenAI-compatible endpoint.

:data:`CHAT_PROVIDERS` registers each Chat Completions provider (its default
base URL, the environment variables it reads, whether it is local) in
:mod:`lionops.endpoints.registry`; the constants here are the defaults of the
endpoint's time and size bounds, and :func:`call_deadline` bounds every
``chat()`` made inside one call of the adapter phase. Pure: no IO.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

from ... import clock
from ...errors import ConfigurationError
from ..base import StructuredMode
from ..registry import ProviderSpec, register_provider

__all__ = ["CHAT_PROVIDERS", "StructuredMode", "DEFAULT_DEADLINE", "DEFAULT_MAX_RESPONSE_BYTES", "call_deadline"]


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

#: The endpoint's own keywords: a near miss of one is refused, not sent as a request option.
ENDPOINT_KEYWORDS = (
    "provider", "model", "base_url", "api_key", "timeout", "max_retries", "deadline", "retry_after_cap",
    "backoff_initial", "backoff_factor", "backoff_max", "structured_output", "stream", "headers", "verify",
    "native_tools", "silence_timeout", "max_response_bytes",
)

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
