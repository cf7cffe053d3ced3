"""Secrets in any URL, for every endpoint (docs/cli.md): a CLI preset's
``base_url`` with a password in its user info or a key in its query reaches
the child only through its environment or a 0600 file, never its argv, and
is scrubbed (by the scrubber the HTTP endpoint uses, lionops._secrets) from
everything recorded or raised: the ``CLIProcessError`` and its stderr tail,
``trace.error``, the event log, the cassette and its recorded outcome, the
endpoint's repr and ``base_url``. The fake CLI (a real subprocess) records
its own argv and echoes its configuration to stderr, as a CLI reporting a
connection failure does; the real Codex CLI (.cache/codex) runs a turn
against a loopback Responses API peer through such a URL."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from urllib.parse import quote

import pytest

from lionops import Branch, iModel
from lionops.endpoints.cli import CLIError
from lionops.replay import record
from tests.cli_support import fake_model
from tests.helpers import Answer

pytestmark = pytest.mark.anyio

PASSWORD = "pw/SENTINEL-5e1f9a"  # written percent-encoded in the URL
QUERY_KEY = "qk-SENTINEL-77c2d0"
FORMS = (PASSWORD, quote(PASSWORD, safe=""), QUERY_KEY, "SENTINEL")
URLS = {
    "user info": f"http://lion:{quote(PASSWORD, safe='')}@127.0.0.1:9/v1",
    "key-named query": f"http://127.0.0.1:9/v1?api-key={QUERY_KEY}",
    "other query": f"http://127.0.0.1:9/v1?sig={QUERY_KEY}&v=2",
    "both": f"http://lion:{quote(PASSWORD, safe='')}@127.0.0.1:9/v1?key={QUERY_KEY}",
}
#: how each preset hands the URL to the child: (option of the fake CLI, value)
ECHO = {
    "claude_code": ("--stderr-env", "ANTHROPIC_BASE_URL"),
    "gemini": ("--stderr-env", "GOOGLE_GEMINI_BASE_URL"),
    "codex": ("--stderr-file", "$CODEX_HOME/config.toml"),
}


def _clean(text: str, where: str) -> None:
    for form in FORMS:
        assert form not in text, (where, form, text[:300])


@pytest.mark.parametrize("shape", list(URLS))
@pytest.mark.parametrize("provider", list(ECHO))
async def test_a_secret_in_a_preset_url_reaches_no_argv_record_or_error(tmp_path: Path, provider, shape):
    echo, what = ECHO[provider]
    argv_file = tmp_path / "argv.json"
    model = fake_model("exit1.jsonl", "--exit", "1", echo, what, "--record", str(argv_file), provider=provider,
                       base_url=URLS[shape], api_key="sk-preset-SENTINEL-key", home=tmp_path / "home")
    branch = Branch(chat_model=model)
    cassette = tmp_path / "run.json"
    with pytest.raises(CLIError) as info:
        await record(cassette, branch, instruction="go", response_format=Answer)
    err = info.value
    assert "[redacted]" in err.stderr_tail  # the child did echo its URL; what left it is scrubbed
    chain, current = [], err
    while current is not None:
        chain.append(f"{current!s} {current!r}")
        current = current.__cause__ or current.__context__
    written = {
        "child argv": json.dumps(json.loads(argv_file.read_text())["argv"]),
        "error": " ".join(chain), "stderr tail": err.stderr_tail,
        "trace": branch.traces[-1].to_json(), "trace.error": str(branch.traces[-1].transitions[-1].error),
        "logs": json.dumps(branch.logs.to_list()), "cassette": cassette.read_text(),
        "endpoint": f"{model.endpoint!r} {model.endpoint.base_url}",
    }
    for where, text in written.items():
        _clean(text, where)
    recorded = json.loads(cassette.read_text())["operations"][0]
    assert recorded["outcome"]["error"]["type"] == type(err).__name__
    if provider == "codex":
        config = tmp_path / "home" / "config.toml"
        assert stat.S_IMODE(config.stat().st_mode) == 0o600
        assert (QUERY_KEY in URLS[shape]) == (QUERY_KEY in config.read_text())


def test_the_http_endpoint_and_the_cli_presets_share_one_url_scrubber():
    from lionops._secrets import url_secrets

    url = URLS["both"]
    assert {PASSWORD, quote(PASSWORD, safe=""), QUERY_KEY} <= set(url_secrets(url))
    for provider in ECHO:
        endpoint = iModel(provider=provider, base_url=url, api_key="sk-x-0000").endpoint
        _clean(endpoint.scrub(f"failed to reach {url}"), provider)
        _clean(endpoint.redact(f"failed to reach {url}"), provider)
        _clean(" ".join(endpoint.argv()), provider)


async def test_the_real_codex_cli_reaches_its_peer_through_a_url_with_secrets(tmp_path: Path):
    from tests.cli_real import base_env, installed
    from tests.responses_peer import ResponsesPeer, Turn, message

    codex = installed("codex")
    with ResponsesPeer(lambda request: Turn([message('{"answer": 7}', "final_answer")])) as peer:
        base = peer.base_url.replace("http://", f"http://lion:{quote(PASSWORD, safe='')}@")
        model = iModel(provider="codex", cli_command=[str(codex)], model="gpt-5-codex", timeout=60, cwd=tmp_path,
                       inherit_env=False, env=base_env(tmp_path / "home"), base_url=f"{base}/v1?api-key={QUERY_KEY}",
                       api_key="sk-codex-SENTINEL-0077", home=tmp_path / "codex", kill_grace=1.0)
        branch = Branch(chat_model=model)
        cassette = tmp_path / "run.json"
        traced = await record(cassette, branch, instruction="Answer.", response_format=Answer)
    assert traced.result.answer == 7
    assert peer.paths == [f"/v1/responses?api-key={QUERY_KEY}"]  # the key came through the 0600 file
    for where, text in {"cassette": cassette.read_text(), "trace": traced.trace.to_json(),
                        "argv": " ".join(model.endpoint.argv()), "endpoint": repr(model.endpoint)}.items():
        _clean(text, where)
