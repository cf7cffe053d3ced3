"""Provider presets and the configuration bounds of an OpenAI-compatible endpoint.

:data:`PROVIDER_DEFAULTS` names each provider's default base URL and the
environment variables it reads; the constants here are the defaults of the
endpoint's time and size bounds, and :func:`call_deadline` bounds every
``chat()`` made inside one call of the adapter phase. Pure: no IO.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Literal

from ... import clock
from ...errors import ConfigurationError

__all__ = ["PROVIDER_DEFAULTS", "StructuredMode", "DEFAULT_DEADLINE", "DEFAULT_MAX_RESPONSE_BYTES", "call_deadline"]

StructuredMode = Literal["json_schema", "json_object", "prompt"]


@dataclass(frozen=True, slots=True)
class _ProviderDefaults:
    base_url: str
    key_env: str | None
    base_url_env: str | None


#: provider -> default base URL and the environment variables it reads.
#: Local servers read no key variable, so a cloud key is never sent to them.
PROVIDER_DEFAULTS: dict[str, _ProviderDefaults] = {
    "openai": _ProviderDefaults("https://api.openai.com/v1", "OPENAI_API_KEY", "OPENAI_BASE_URL"),
    "openrouter": _ProviderDefaults("https://openrouter.ai/api/v1", "OPENROUTER_API_KEY", None),
    "vllm": _ProviderDefaults("http://127.0.0.1:8000/v1", None, None),
    "ollama": _ProviderDefaults("http://127.0.0.1:11434/v1", None, None),
    "llamacpp": _ProviderDefaults("http://127.0.0.1:8080/v1", None, None),
    "lmstudio": _ProviderDefaults("http://127.0.0.1:1234/v1", None, None),
}

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
