"""``iModel``: the model a branch talks to, API-backed or CLI-backed.

``iModel(provider=..., model=..., **options)`` resolves ``provider`` to an
endpoint class and delegates to it:

- ``"openai"`` and OpenAI-compatible aliases (``"vllm"``, ``"ollama"``,
  ``"llamacpp"``, ``"lmstudio"``, ``"openrouter"``): Chat Completions over
  httpx (:mod:`lionops.endpoints.openai`); ``is_cli`` is false.
- ``"claude_code"``, ``"codex"``, ``"gemini"``: a CLI agent subprocess
  streaming JSON lines (:mod:`lionops.endpoints.cli`); ``is_cli`` is true.
  ``base_url=`` / ``api_key=`` / ``home=`` point the CLI at a server
  (docs/cli.md, "Pointing an agent at your server").

Secrets (API keys) are never shown by ``repr`` or ``str``.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from .endpoints import cli as _cli_endpoints
from .endpoints import openai as _openai_endpoints
from .errors import ArgumentTypeError, ConfigurationError, did_you_mean

__all__ = ["iModel", "PROVIDERS"]

#: provider name -> "module:Class" of its endpoint.
PROVIDERS: dict[str, str] = {
    "openai": "lionops.endpoints.openai:ChatCompletionsEndpoint",
    "vllm": "lionops.endpoints.openai:ChatCompletionsEndpoint",
    "ollama": "lionops.endpoints.openai:ChatCompletionsEndpoint",
    "llamacpp": "lionops.endpoints.openai:ChatCompletionsEndpoint",
    "lmstudio": "lionops.endpoints.openai:ChatCompletionsEndpoint",
    "openrouter": "lionops.endpoints.openai:ChatCompletionsEndpoint",
    "claude_code": "lionops.endpoints.cli:ClaudeCodeEndpoint",
    "codex": "lionops.endpoints.cli:CodexEndpoint",
    "gemini": "lionops.endpoints.cli:GeminiEndpoint",
}


#: The endpoint modules the table names. The CLI package loads its process
#: code only when one of its endpoint classes is first read.
_MODULES: dict[str, ModuleType] = {
    "lionops.endpoints.openai": _openai_endpoints,
    "lionops.endpoints.cli": _cli_endpoints,
}


def _load(path: str) -> Any:
    module, _, attr = path.partition(":")
    return getattr(_MODULES[module], attr)


class iModel:  # noqa: N801 - the ADR's name
    """A model endpoint. See the module docstring for providers.

    Args:
        provider: a key of :data:`PROVIDERS`, or ``endpoint=`` an endpoint object.
        model: the provider's model name.
        endpoint: an already-built endpoint (anything with ``is_cli``).
        **options: passed to the endpoint class (``base_url``, ``api_key``,
            ``cli_command``, ``timeout``, ``deadline``, default request
            options, ...). For API models ``timeout`` bounds one socket
            operation and ``deadline`` the whole call, retries included
            (docs/api.md, "What bounds what").

    Raises:
        ConfigurationError: unknown provider.
    """

    __slots__ = ("provider", "model", "endpoint")

    def __init__(
        self,
        provider: str | None = None,
        model: str | None = None,
        *,
        endpoint: Any = None,
        **options: Any,
    ) -> None:
        if endpoint is None:
            if provider is None:
                raise ConfigurationError("iModel needs provider= or endpoint=")
            if not isinstance(provider, str):
                raise ArgumentTypeError(f"provider must be a provider name (str), got {type(provider).__name__}")
            key = provider.lower()
            if key not in PROVIDERS:
                raise ConfigurationError(
                    f"unknown provider {provider!r}{did_you_mean(key, PROVIDERS)}; known: {sorted(PROVIDERS)}"
                )
            endpoint = _load(PROVIDERS[key])(provider=key, model=model, **options)
        self.provider = provider or getattr(endpoint, "provider", None)
        self.model = model or getattr(endpoint, "model", None)
        self.endpoint = endpoint

    @property
    def is_cli(self) -> bool:
        """True for CLI-backed models (selects RunParam and run_and_collect, ADR-0022 D1/D3)."""
        return bool(getattr(self.endpoint, "is_cli", False))

    def __getattr__(self, name: str) -> Any:
        # Delegate endpoint capabilities (invoke, stream, aclose, ...).
        endpoint = object.__getattribute__(self, "endpoint")
        return getattr(endpoint, name)

    def __repr__(self) -> str:
        return f"iModel(provider={self.provider!r}, model={self.model!r}, is_cli={self.is_cli})"

    __str__ = __repr__
