"""OpenAI-compatible Chat Completions over one reused ``httpx2.AsyncClient``.

:class:`ChatCompletionsEndpoint` backs ``iModel(provider="openai", ...)`` and
the compatible aliases (``vllm``, ``ollama``, ``llamacpp``, ``lmstudio``,
``openrouter``). It sends one ``POST {base_url}/chat/completions`` per
logical call, retries 429 and 5xx answers and refused connections a bounded
number of times, and turns every failure into a typed
:class:`~lionops.errors.EndpointError`.

Every answer is read through httpx2's streaming API, capped at
``max_response_bytes`` counted after decompression, and normalized: a body or
stream that is not a complete answer (the provider's ``error``, no choices, a
stream without a finish reason) is a typed error, never a partial answer.

Every wait (``Retry-After``, backoff) goes through :func:`lionops.clock.sleep`.
Three time bounds apply: ``timeout`` bounds each socket operation (one
connect, one write, one read), ``deadline`` bounds the whole call (every
attempt, every retry wait, a whole stream), and ``max_retries`` bounds the
number of requests. The deadline is measured on :func:`lionops.clock.monotonic`.

The API key is held as a :class:`pydantic.SecretStr`, sent only in the
``Authorization`` header, and removed from every message this module
writes: reprs, log records and exception text, before any
text is cut to a preview. Exceptions carry no chain (the HTTP library's
exceptions hold the request headers). httpx2's and httpcore2's log records are
scrubbed of every live endpoint's secrets. A base URL's query may hold
credentials too: it is never shown; user info in a base URL is refused.

The package is split by concern: :mod:`.config` (provider presets and
bounds), :mod:`.transport` (the HTTP client, deadlines, body caps and
retries: the only module doing IO), :mod:`.response` (a body to a
:class:`ChatCompletion`, pure) and :mod:`.stream` (event-stream framing and
fragment accumulation, pure). Request shaping (the response format asked
for, tool schemas) belongs to the Middles (:mod:`lionops.middles`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..._secrets import scrubbed_preview
from ...errors import (  # noqa: F401 - the errors these endpoints raise, importable here as before the split
    EndpointAuthError,
    EndpointConnectionError,
    EndpointError,
    EndpointProviderError,
    EndpointRateLimitError,
    EndpointResponseError,
    EndpointStatusError,
    EndpointTimeoutError,
)
from .config import (
    CHAT_PROVIDERS,
    DEFAULT_DEADLINE,
    DEFAULT_MAX_RESPONSE_BYTES,
    Limits,
    RetryPolicy,
    StructuredMode,
    call_deadline,
)
from .response import ChatCompletion
from .stream import StreamAccumulator

if TYPE_CHECKING:
    from .transport import ChatCompletionsEndpoint, parse_retry_after

#: Names served by :mod:`.transport`, imported on first use: it imports httpx2,
#: which is not needed until a call goes over HTTP.
_FROM_TRANSPORT = frozenset({"ChatCompletionsEndpoint", "parse_retry_after"})


def __getattr__(name: str) -> Any:
    if name in _FROM_TRANSPORT:
        from . import transport

        return getattr(transport, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "ChatCompletionsEndpoint",
    "ChatCompletion",
    "CHAT_PROVIDERS",
    "RetryPolicy",
    "Limits",
    "parse_retry_after",
    "StreamAccumulator",
    "StructuredMode",
    "DEFAULT_DEADLINE",
    "call_deadline",
    "scrubbed_preview",
    "DEFAULT_MAX_RESPONSE_BYTES",
]
