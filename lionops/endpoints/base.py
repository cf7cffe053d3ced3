"""The provider contract: what every endpoint behind ``iModel`` offers.

An endpoint is the one object that talks to a provider. The machine never
reaches a provider any other way: the ``communicate`` Middle calls
:meth:`ChatEndpoint.chat`, the ``run_and_collect`` Middle calls
:meth:`AgentEndpoint.run` (ADR-0022 D3), and everything that writes text
out (errors, traces, recordings, spans) passes it through
:meth:`Endpoint.scrub` first.

- :class:`Endpoint`: what every endpoint offers (``provider``, ``model``,
  ``is_cli``, ``base_url``, ``otel_name``, ``scrub``, ``aclose``).
- :class:`ChatEndpoint`: an API endpoint (``is_cli`` false) that the
  ``communicate`` Middle drives: ``chat(messages, **options)`` returns one
  normalized :class:`~lionops.endpoints.openai.ChatCompletion`, whatever
  the wire protocol.
- :class:`AgentEndpoint`: a CLI agent (``is_cli`` true) that the
  ``run_and_collect`` Middle drives: ``run(prompt, ...)`` returns one
  :class:`~lionops.endpoints.cli.CLIRun`.

These are :class:`typing.Protocol` classes: an endpoint meets the contract by
its members, not by inheriting. A provider is registered by name in
:mod:`lionops.endpoints.registry`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

if TYPE_CHECKING:
    from .cli.records import CLIRun, CLIToolEvent
    from .openai.response import ChatCompletion

__all__ = ["Endpoint", "ChatEndpoint", "AgentEndpoint", "StructuredMode"]

#: How a pydantic response format is asked for (see :class:`ChatEndpoint`).
StructuredMode = Literal["json_schema", "json_object", "prompt"]


@runtime_checkable
class Endpoint(Protocol):
    """What every endpoint offers.

    Attributes:
        provider: the registered provider name (``"openai"``, ``"codex"``, ...).
        model: the provider's model name, or ``None`` (the provider's default).
        is_cli: true for a CLI agent (:class:`AgentEndpoint`, selects ``RunParam``
            and ``run_and_collect``, ADR-0022 D1/D3), false for an API endpoint
            (:class:`ChatEndpoint`).
    """

    provider: str
    model: str | None

    @property
    def is_cli(self) -> bool: ...

    @property
    def base_url(self) -> str | None:
        """The server this endpoint talks to, as shown (no credentials); ``None``
        for a CLI agent left to its own configuration."""
        ...

    @property
    def otel_name(self) -> str:
        """The OpenTelemetry ``gen_ai.provider.name`` of this endpoint's provider:
        the conventions' registered value where they list the provider
        (``openai``, ``anthropic``, ``gcp.gemini``), else the provider's own
        name. The built-in endpoints read it from their provider's
        :class:`~lionops.endpoints.registry.ProviderSpec` (``otel_name``)."""
        ...

    def scrub(self, text: str) -> str:
        """``text`` with every secret of this endpoint (keys, secret headers,
        secret environment values) replaced; applied before any text leaves
        lionops (errors, logs, traces, recordings, spans)."""
        ...

    async def aclose(self) -> None:
        """Release what the endpoint holds (HTTP connections, state folders).
        A later call may open them again; closing twice does nothing."""
        ...


@runtime_checkable
class ChatEndpoint(Endpoint, Protocol):
    """An API endpoint driven by the ``communicate`` Middle (``is_cli`` false).

    Attributes:
        base_url: the API root as shown (no credentials).
        deadline: the default total seconds of one call (retries included).
        stream: ask for a streamed answer by default.
        structured_output: how a pydantic response format is asked for
            (``"json_schema"``, ``"json_object"`` or ``"prompt"``).
        native_tools: send offered tools natively also when a caller model exists.
        default_options: request options sent with every call.
    """

    @property
    def base_url(self) -> str: ...

    deadline: float
    stream: bool
    structured_output: StructuredMode
    native_tools: bool
    default_options: dict[str, Any]

    async def chat(self, messages: list[dict[str, Any]], **options: Any) -> ChatCompletion:
        """One logical call: ``messages`` in Chat Completions shape (``role``,
        ``content``, ``tool_calls``, ``tool_call_id``), ``options`` the request
        options (``tools``, ``response_format``, ``temperature``, ``stream``,
        ``deadline``, ...). Returns the normalized first answer, its
        :class:`~lionops.usage.Usage` in ``usage``.

        Raises a :class:`~lionops.errors.EndpointError` subclass on any
        failure; never returns a partial or cut answer as complete."""
        ...


@runtime_checkable
class AgentEndpoint(Endpoint, Protocol):
    """A CLI agent driven by the ``run_and_collect`` Middle (``is_cli`` true).

    Attributes:
        reports_cuts: the agent says when its answer was cut at a token limit.
    """

    reports_cuts: bool

    async def run(
        self,
        prompt: str,
        *,
        system: str | None = None,
        options: Mapping[str, Any] | None = None,
        sink: Callable[[bytes], Any] | None = None,
        on_tool: Callable[[CLIToolEvent], None] | None = None,
    ) -> CLIRun:
        """Run one turn; raises a :class:`~lionops.errors.CLIError` subclass on failure."""
        ...
