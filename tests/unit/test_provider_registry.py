"""The provider contract (lionops.endpoints.base) and the one provider registry."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from lionops import ConfigurationError, iModel
from lionops.endpoints.base import AgentEndpoint, ChatEndpoint, Endpoint
from lionops.endpoints.registry import PROVIDERS, ProviderSpec, provider_spec, providers, register_provider


def test_every_builtin_provider_builds_an_endpoint_that_meets_the_contract() -> None:
    for name, spec in providers().items():
        model = iModel(provider=name, model="m", api_key="k") if not spec.is_cli else iModel(provider=name)
        assert isinstance(model.endpoint, Endpoint) and model.endpoint.provider == name
        assert isinstance(model.endpoint, AgentEndpoint if spec.is_cli else ChatEndpoint), name
        assert model.is_cli is spec.is_cli
        assert PROVIDERS[name] == spec.endpoint


def test_the_builtin_table_declares_keys_locality_and_otel_names() -> None:
    specs = providers()
    assert (specs["openai"].key_env, specs["openai"].base_url_env, specs["openai"].local) == (
        "OPENAI_API_KEY", "OPENAI_BASE_URL", False)
    assert all(specs[n].local and specs[n].key_env is None for n in ("vllm", "ollama", "llamacpp", "lmstudio"))
    assert {n: specs[n].otel_name for n in ("openai", "claude_code", "codex", "gemini")} == {
        "openai": "openai", "claude_code": "anthropic", "codex": "openai", "gemini": "gcp.gemini"}
    assert specs["openai"].needs_key and not specs["ollama"].needs_key and not specs["codex"].needs_key


def test_an_unknown_provider_names_the_known_ones() -> None:
    with pytest.raises(ConfigurationError, match="unknown provider 'nope'.*openai"):
        iModel(provider="nope")
    with pytest.raises(ConfigurationError, match="unknown provider"):
        provider_spec("../etc")


@pytest.mark.parametrize("bad", [
    dict(name="", endpoint="a:B", otel_name="x"),
    dict(name="Upper", endpoint="a:B", otel_name="x"),
    dict(name="x", endpoint="no-colon", otel_name="x"),
    dict(name="x", endpoint="a:B", otel_name="x", local=True, key_env="X_KEY"),
])
def test_a_malformed_spec_is_refused(bad) -> None:
    with pytest.raises(ConfigurationError):
        ProviderSpec(**bad)


def test_a_taken_name_is_replaced_only_on_purpose() -> None:
    spec = provider_spec("openai")
    assert register_provider(spec) is spec  # the same spec again is no change
    other = ProviderSpec("openai", spec.endpoint, "other", spec.base_url, spec.key_env, spec.base_url_env)
    with pytest.raises(ConfigurationError, match="already registered"):
        register_provider(other)
    assert provider_spec("openai") is spec


def test_an_endpoint_that_misses_the_contract_is_refused_by_name() -> None:
    class Half:
        provider, model, is_cli = "x", None, False

    with pytest.raises(ConfigurationError, match=r"lacks \['base_url', 'otel_name', 'scrub', 'aclose'\]"):
        iModel(endpoint=Half())  # type: ignore[arg-type]


def test_imodel_forwards_nothing_implicitly() -> None:
    model = iModel(provider="ollama", model="m")
    assert model.scrub("x") == "x"
    with pytest.raises(AttributeError):
        model.chat  # type: ignore[attr-defined]  # noqa: B018


def test_a_provider_package_registers_itself_when_first_named(tmp_path: Path) -> None:
    # A package lionops.endpoints.<name> is imported when <name> is first looked up.
    package = tmp_path / "zzlocal"
    package.mkdir()
    (package / "__init__.py").write_text(textwrap.dedent("""
        from lionops.endpoints.registry import ProviderSpec, register_provider
        register_provider(ProviderSpec("zzlocal", "lionops.endpoints.openai:ChatCompletionsEndpoint",
                                       otel_name="zzlocal", base_url="http://127.0.0.1:9/v1", local=True))
    """))
    code = textwrap.dedent(f"""
        import lionops.endpoints
        lionops.endpoints.__path__.append({str(tmp_path)!r})
        from lionops import iModel
        model = iModel(provider="zzlocal", model="m")
        print(model.endpoint.base_url, model.endpoint.provider)
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["http://127.0.0.1:9/v1", "zzlocal"]


def test_an_unknown_provider_names_every_built_in_one_in_a_fresh_process() -> None:
    # The native providers are built in too: the list and the suggestion do not
    # depend on which provider packages happened to be imported before.
    code = textwrap.dedent("""
        from lionops import ConfigurationError, iModel
        try:
            iModel(provider="anthropc", model="m")
        except ConfigurationError as exc:
            print(exc)
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "did you mean 'anthropic'" in done.stdout
    for name in ("anthropic", "google", "openai_responses", "openai", "codex"):
        assert f"'{name}'" in done.stdout
