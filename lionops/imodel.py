"""``iModel``: the model a branch talks to, API-backed or CLI-backed.

``iModel(provider=..., model=..., **options)`` resolves ``provider`` in the
provider registry (:mod:`lionops.endpoints.registry`) to an endpoint class
and builds it; every call then goes through ``iModel.endpoint``, which meets
the provider contract (:class:`lionops.endpoints.base.Endpoint`):

- ``"openai"`` and OpenAI-compatible aliases (``"vllm"``, ``"ollama"``,
  ``"llamacpp"``, ``"lmstudio"``, ``"openrouter"``): Chat Completions over
  HTTP (:mod:`lionops.endpoints.openai`); ``is_cli`` is false.
- ``"claude_code"``, ``"codex"``, ``"gemini"``: a CLI agent subprocess
  streaming JSON lines (:mod:`lionops.endpoints.cli`); ``is_cli`` is true.
  ``base_url=`` / ``api_key=`` / ``home=`` point the CLI at a server
  (docs/cli.md, "Pointing an agent at your server").

Secrets (API keys) are never shown by ``repr`` or ``str``.
"""

from __future__ import annotations

from typing import Any

from .endpoints.base import Endpoint
from .endpoints.registry import PROVIDERS, endpoint_class, provider_spec
from .errors import ArgumentTypeError, ConfigurationError

__all__ = ["iModel", "PROVIDERS"]


def _meets_contract(endpoint: object) -> bool:
    return isinstance(endpoint, Endpoint)


class iModel:  # noqa: N801 - the ADR's name
    """A model endpoint. See the module docstring for providers.

    Args:
        provider: a registered provider name (:data:`PROVIDERS`,
            :mod:`lionops.endpoints.registry`), or ``endpoint=`` an endpoint object.
        model: the provider's model name.
        endpoint: an already-built endpoint (an
            :class:`~lionops.endpoints.base.Endpoint`).
        **options: passed to the endpoint class (``base_url``, ``api_key``,
            ``cli_command``, ``timeout``, ``deadline``, default request
            options, ...). For API models ``timeout`` bounds one socket
            operation and ``deadline`` the whole call, retries included
            (docs/api.md, "What bounds what").

    Attributes:
        endpoint: the endpoint every call goes through; what it offers is
            :class:`~lionops.endpoints.base.Endpoint` (docs/api.md, "The provider contract").

    Raises:
        ConfigurationError: unknown provider, or an endpoint that does not
            meet the contract.
    """

    __slots__ = ("provider", "model", "endpoint")

    provider: str | None
    model: str | None
    endpoint: Endpoint

    def __init__(
        self,
        provider: str | None = None,
        model: str | None = None,
        *,
        endpoint: Endpoint | None = None,
        **options: Any,
    ) -> None:
        if endpoint is None:
            if provider is None:
                raise ConfigurationError("iModel needs provider= or endpoint=")
            if not isinstance(provider, str):
                raise ArgumentTypeError(f"provider must be a provider name (str), got {type(provider).__name__}")
            spec = provider_spec(provider)
            endpoint = endpoint_class(spec)(provider=spec.name, model=model, **options)
        elif not _meets_contract(endpoint):
            missing = [name for name in ("provider", "model", "is_cli", "base_url", "otel_name", "scrub", "aclose")
                       if not hasattr(endpoint, name)]
            raise ConfigurationError(
                f"endpoint= {type(endpoint).__name__} does not meet the Endpoint contract "
                f"(lionops.endpoints.base.Endpoint); it lacks {missing}"
            )
        self.provider = provider or endpoint.provider
        self.model = model or endpoint.model
        self.endpoint = endpoint

    @property
    def is_cli(self) -> bool:
        """True for CLI-backed models (selects RunParam and run_and_collect, ADR-0022 D1/D3)."""
        return bool(self.endpoint.is_cli)

    def scrub(self, text: str) -> str:
        """``text`` with the endpoint's secrets removed (:meth:`Endpoint.scrub`)."""
        return self.endpoint.scrub(text)

    async def aclose(self) -> None:
        """Release the endpoint's connections (:meth:`Endpoint.aclose`)."""
        await self.endpoint.aclose()

    def __repr__(self) -> str:
        return f"iModel(provider={self.provider!r}, model={self.model!r}, is_cli={self.is_cli})"

    __str__ = __repr__
