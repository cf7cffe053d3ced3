"""Exceptions raised by lionops.

Every exception lionops raises on purpose derives from :class:`LionopsError`
or from the built-in type the ADR names (``ValueError``, ``TypeError``), so
callers can catch either the ADR contract or the library family.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "LionopsError",
    "ConfigurationError",
    "RemovedKeywordError",
    "MisspelledKeywordError",
    "MismatchError",
    "RefusalError",
    "TruncatedOutputError",
    "InternalInvariantError",
]


class LionopsError(Exception):
    """Base class of lionops' own exceptions."""


class ConfigurationError(ValueError, LionopsError):
    """A call or object is configured in a way the pipeline cannot run (a ValueError).

    Raised, for example, when ``act()`` dispatches with a strategy other than
    ``"sequential"`` or ``"concurrent"`` (ADR-0022 D4), or when no endpoint is
    configured for the selected adapter (D3).
    """


class RemovedKeywordError(TypeError, LionopsError):
    """A removed keyword (``request_model``, ``operative_model``, ``imodel``) was passed.

    ADR-0022 D1: removed names are rejected with guidance to their replacement.
    The message names the keyword and the replacement.
    """

    def __init__(self, keyword: str, replacement: str) -> None:
        self.keyword = keyword
        self.replacement = replacement
        super().__init__(
            f"'{keyword}' was removed from operate(); pass {replacement} instead"
        )


class MisspelledKeywordError(TypeError, LionopsError):
    """A leftover keyword is a near miss of a real one (``handle_validaton``).

    ADR-0022 D1 sends remaining ``operate()`` keywords to the provider as
    request options, and an API ``iModel`` sends its unknown options with
    every request; a near miss would be sent instead of taking effect, so it
    is refused before any request. The message names the keyword and the
    suggestion, never the value (which may be a key).
    """

    def __init__(self, keyword: str, suggestion: str, where: str = "operate()") -> None:
        self.keyword = keyword
        self.suggestion = suggestion
        super().__init__(
            f"{where} got an unexpected keyword {keyword!r}; did you mean {suggestion!r}? "
            "(other unknown keywords are sent to the model as request options)"
        )


class MismatchError(ValueError, LionopsError):
    """The adapter result is not an instance of the caller's model (ADR-0022 D3).

    Raised under ``handle_validation="raise"``. The message names the expected
    model and includes at most the first 200 characters of ``repr(result)``.

    Attributes:
        expected: name of the expected model class.
        received: ``repr(result)[:200]``.
        reason: why the model output could not be coerced (``"length"``,
            ``"refusal"``, ``"error"``) or ``None`` for a plain mismatch.
        detail: extra text carried by the reason (the refusal text, ...).
    """

    def __init__(
        self,
        expected: str,
        received: str,
        *,
        reason: str | None = None,
        detail: str | None = None,
    ) -> None:
        self.expected = expected
        self.received = received
        self.reason = reason
        self.detail = detail
        msg = (
            f"Failed to parse LLM response into '{expected}'. "
            f"Received (truncated): {received}. "
            "Hint: verify the model supports structured JSON output "
            "(e.g. response_format / function-calling) for this provider."
        )
        if reason is not None:
            msg += f" Reason: {reason}"
            if detail:
                msg += f": {detail}"
        super().__init__(msg)


class RefusalError(MismatchError):
    """The model refused; ``detail`` carries the refusal text."""


class TruncatedOutputError(MismatchError):
    """The model output was cut off at the token limit (``finish_reason: "length"``)."""


class InternalInvariantError(LionopsError):
    """The machine reached a state in which no declared guard holds (a lionops bug)."""

    def __init__(self, state: str, guards: dict[str, Any]) -> None:
        self.state = state
        self.guards = guards
        super().__init__(
            f"no guard holds in state {state!r} (evaluated: {guards}); "
            "this is a lionops bug"
        )


# --------------------------------------------------------------------------
# Endpoint (HTTP) errors, raised by API-backed iModels (the API path of ADR-0022 D3).
# Their messages never contain the API key or request headers.

__all__ += [
    "EndpointError",
    "EndpointStatusError",
    "EndpointAuthError",
    "EndpointRateLimitError",
    "EndpointResponseError",
    "EndpointProviderError",
    "EndpointConnectionError",
    "EndpointTimeoutError",
]


class EndpointError(LionopsError):
    """A model endpoint call failed.

    Attributes:
        provider: the provider name (``"openai"``, ``"vllm"``, ...).
        url: the request URL without credentials or query string.
        attempts: HTTP requests made for this call (retries included).
        retries: one ``{"status", "delay_s"}`` per retry made before the
            failure, in order (``status`` is ``None`` for a refused connection).

    The exception chain (``__cause__``, ``__context__``) is always empty: the
    HTTP library's own exceptions hold the request and its headers, so they
    are described in the message (secrets removed) and never attached.
    """

    attempts: int = 1

    def __init__(self, message: str, *, provider: str | None = None, url: str | None = None) -> None:
        self.provider = provider
        self.url = url
        self.retries: list[dict[str, Any]] = []
        super().__init__(message)


class EndpointStatusError(EndpointError):
    """The endpoint answered with an HTTP error status (4xx, or 5xx after the retries).

    Attributes:
        status: the HTTP status code.
        body: at most 300 characters of the response body, secrets removed.
        attempts: HTTP requests made for this call (retries included).
    """

    def __init__(self, message: str, *, status: int, body: str = "", attempts: int = 1,
                 provider: str | None = None, url: str | None = None) -> None:
        self.status = status
        self.body = body
        self.attempts = attempts
        super().__init__(message, provider=provider, url=url)


class EndpointAuthError(EndpointStatusError):
    """401 or 403: the key is missing, wrong or not allowed. Never retried."""


class EndpointRateLimitError(EndpointStatusError):
    """429 after the retries, or a ``Retry-After`` above the configured cap.

    Attributes:
        retry_after: the delay the server asked for, in seconds, or ``None``.
    """

    def __init__(self, message: str, *, retry_after: float | None = None, **kw: Any) -> None:
        self.retry_after = retry_after
        super().__init__(message, **kw)


class EndpointResponseError(EndpointError):
    """A 2xx answer whose body is not a Chat Completions JSON object."""


class EndpointProviderError(EndpointResponseError):
    """A 2xx answer that carries the provider's own error: an ``error`` object
    in the body or in a stream chunk, or ``finish_reason: "error"``.

    Attributes:
        provider_message: the provider's error message (secrets removed), or ``None``.
        code: the provider's error code, when it gave one.
    """

    def __init__(self, message: str, *, provider_message: str | None = None, code: Any = None,
                 **kw: Any) -> None:
        self.provider_message = provider_message
        self.code = code
        super().__init__(message, **kw)


class EndpointConnectionError(EndpointError):
    """The endpoint could not be reached (connection refused, DNS, reset)."""


class EndpointTimeoutError(EndpointConnectionError, TimeoutError):
    """A time bound ran out (also a ``TimeoutError``).

    Attributes:
        limit: which bound: ``"timeout"`` (one read, write or connect waited
            longer than the endpoint's ``timeout``) or ``"deadline"`` (the
            whole call, retries and waits included, would outlast the
            endpoint's ``deadline``).
        seconds: that bound, in seconds.
    """

    def __init__(self, message: str, *, limit: str = "timeout", seconds: float | None = None,
                 provider: str | None = None, url: str | None = None) -> None:
        self.limit = limit
        self.seconds = seconds
        super().__init__(message, provider=provider, url=url)
