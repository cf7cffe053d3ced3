"""The one provider registry: provider name -> :class:`ProviderSpec`.

``iModel(provider=name, ...)`` looks ``name`` up here, imports the spec's
endpoint class and builds it. Each provider declares, in one place:

- ``endpoint``: ``"module:Class"`` of its endpoint (imported on first use,
  so ``import lionops`` loads no HTTP or subprocess code);
- ``base_url`` and ``base_url_env``: its default API root and the
  environment variable that overrides it;
- ``key_env``: the environment variable its API key is read from;
- ``local``: a server on this machine that needs no key (no key variable is
  read, so a cloud key is never sent to it);
- ``otel_name``: the OpenTelemetry ``gen_ai.provider.name`` value;
- ``is_cli``: a CLI agent (``run_and_collect``) rather than an API (``communicate``).

A provider registers itself with :func:`register_provider`, at the import
of its package. A name not yet registered is looked for as a package
``lionops.endpoints.<name>`` and imported once, so a provider package inside
lionops needs no line anywhere else. Pure apart from that import.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigurationError, did_you_mean

__all__ = ["ProviderSpec", "register_provider", "provider_spec", "providers", "PROVIDERS", "endpoint_class",
           "otel_provider_name"]

#: The packages that declare the built-in providers; imported on the first lookup.
_BUILTIN_PACKAGES = ("lionops.endpoints.openai.config", "lionops.endpoints.cli", "lionops.endpoints.openai_responses",
                     "lionops.endpoints.anthropic", "lionops.endpoints.google")


@dataclass(frozen=True, slots=True)
class ProviderSpec:
    """What one provider declares (see the module docstring).

    Attributes:
        name: the provider name given to ``iModel(provider=...)`` (lower case).
        endpoint: ``"module:Class"`` of the endpoint class; the class is built as
            ``Class(provider=name, model=model, **options)`` and meets
            :class:`~lionops.endpoints.base.Endpoint`.
        otel_name: the ``gen_ai.provider.name`` value (a registered one when the
            conventions list the provider: ``openai``, ``anthropic``, ``gcp.gemini``).
        base_url: the default API root; ``None`` for a CLI agent.
        key_env: the environment variable holding the API key; ``None`` when
            the provider reads none (a local server, a CLI agent that logs in itself).
        base_url_env: the environment variable that overrides ``base_url``.
        local: a server on this machine; it needs no API key.
        is_cli: a CLI agent.
    """

    name: str
    endpoint: str
    otel_name: str
    base_url: str | None = None
    key_env: str | None = None
    base_url_env: str | None = None
    local: bool = False
    is_cli: bool = False

    def __post_init__(self) -> None:
        if not self.name or self.name != self.name.lower():
            raise ConfigurationError(f"a provider name is lower case and not empty, got {self.name!r}")
        module, sep, attr = self.endpoint.partition(":")
        if not (module and sep and attr):
            raise ConfigurationError(f"provider {self.name!r}: endpoint must be 'module:Class', got {self.endpoint!r}")
        if self.local and self.key_env is not None:
            raise ConfigurationError(f"provider {self.name!r}: a local provider reads no API key variable")

    @property
    def needs_key(self) -> bool:
        """A cloud API provider: a request without an API key is refused before it is sent."""
        return not (self.local or self.is_cli) and self.key_env is not None


_REGISTRY: dict[str, ProviderSpec] = {}
_LOADED = False


def register_provider(spec: ProviderSpec, *, replace: bool = False) -> ProviderSpec:
    """Register ``spec`` under ``spec.name``; returns it.

    Raises:
        ConfigurationError: the name is taken by a different spec (pass
            ``replace=True`` to replace it on purpose).
    """
    known = _REGISTRY.get(spec.name)
    if known is not None and known != spec and not replace:
        raise ConfigurationError(
            f"provider {spec.name!r} is already registered ({known.endpoint}); pass replace=True to replace it")
    _REGISTRY[spec.name] = spec
    return spec


def _load_builtins() -> None:
    global _LOADED
    if not _LOADED:
        _LOADED = True
        for module in _BUILTIN_PACKAGES:
            importlib.import_module(module)


def provider_spec(name: str) -> ProviderSpec:
    """The spec registered as ``name`` (any case).

    A name not registered yet is looked for as the package
    ``lionops.endpoints.<name>``, which registers itself when imported.

    Raises:
        ConfigurationError: no such provider (the message lists the known ones).
    """
    _load_builtins()
    key = name.lower() if isinstance(name, str) else name
    spec = _REGISTRY.get(key)
    if spec is None and isinstance(key, str) and key.isidentifier():
        package = f"{__package__}.{key}"
        if importlib.util.find_spec(package) is not None:
            importlib.import_module(package)
            spec = _REGISTRY.get(key)
    if spec is None:
        raise ConfigurationError(
            f"unknown provider {name!r}{did_you_mean(name, _REGISTRY)}; known: {sorted(_REGISTRY)}")
    return spec


def endpoint_class(spec: ProviderSpec) -> Any:
    """The endpoint class ``spec`` names, imported on first use."""
    module, _, attr = spec.endpoint.partition(":")
    return getattr(importlib.import_module(module), attr)


def providers() -> dict[str, ProviderSpec]:
    """Every registered provider, by name (a copy)."""
    _load_builtins()
    return dict(_REGISTRY)


def otel_provider_name(name: str | None) -> str | None:
    """The ``gen_ai.provider.name`` of provider ``name``; ``name`` itself when unregistered."""
    if not name:
        return name
    _load_builtins()
    spec = _REGISTRY.get(name.lower())
    return spec.otel_name if spec is not None else name


class _EndpointPaths(Mapping[str, str]):
    """Provider name -> ``"module:Class"`` of its endpoint, read live from the registry."""

    def __getitem__(self, name: str) -> str:
        _load_builtins()
        return _REGISTRY[name].endpoint

    def __iter__(self) -> Iterator[str]:
        _load_builtins()
        return iter(list(_REGISTRY))

    def __len__(self) -> int:
        _load_builtins()
        return len(_REGISTRY)

    def __repr__(self) -> str:
        return f"PROVIDERS({dict(self)!r})"


#: Provider name -> ``"module:Class"`` of its endpoint: a read-only view of the registry.
PROVIDERS: Mapping[str, str] = _EndpointPaths()
