"""The generated Mermaid parses with Mermaid's own parser (``mermaid.parse`` under jsdom).

The parser is pinned in tests/mermaid/ and installed into ``.cache/mermaid``
by ``make mermaid-parser`` (``make test`` runs it), or here on first use.
These tests skip, saying why, only when it cannot be installed (no
node/npm, or the npm registry unreachable).
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from lionops import Trace, TransitionRecord
from lionops.cli.diagram import Overlay, render_all, render_mermaid
from lionops.engine.definition import default_definition, parse_definition
from tests.unit.test_diagram import _extended

HERE = Path(__file__).resolve().parents[1]


def _installer():
    spec = importlib.util.spec_from_file_location("mermaid_install", HERE / "mermaid" / "install.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def mermaid_parse():
    installer = _installer()
    reason = installer.install()
    if reason and reason.startswith(installer.UNAVAILABLE):
        pytest.skip(f"Mermaid's parser is not available: {reason}")
    if reason:
        pytest.fail(f"Mermaid's parser did not install: {reason}")
    node = shutil.which("node")

    def parse(tmp: Path, texts: dict[str, str]) -> dict[str, dict]:
        files = []
        for name, text in texts.items():
            (tmp / name).write_text(text, encoding="utf-8")
            files.append(str(tmp / name))
        proc = subprocess.run([node, str(HERE / "mermaid" / "parse.mjs"), str(installer.CACHE), *files],
                              capture_output=True, text=True, timeout=120)
        results = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
        assert len(results) == len(files), proc.stderr
        return {Path(r["file"]).name: r for r in results}

    return parse


def _doc_block(doc: str) -> str:
    return doc.split("```mermaid\n", 1)[1].split("```", 1)[0]


def test_generated_mermaid_parses(mermaid_parse, tmp_path: Path):
    d = default_definition()
    files = render_all(d)
    failed = Trace(transitions=[
        TransitionRecord("prepared", "prepare", "schema", {}),
        TransitionRecord("failed", "schema", "raised", {}, error="TypeError: removed keyword"),
    ])
    extended = parse_definition(_extended(), source="states/operate.toml")
    texts = {
        "operate.mmd": files["operate.mmd"],
        "doc-block.mmd": _doc_block(files["operate.md"]),
        "trace.mmd": render_mermaid(d, Overlay.from_trace(d, failed), note="trace run.json"),
        "extended.mmd": render_mermaid(extended),
    }
    results = mermaid_parse(tmp_path, texts)
    for name, r in results.items():
        assert r["ok"], f"{name} does not parse: {r.get('error')}"
        assert r["type"] == "stateDiagram"


def test_the_parser_rejects_broken_mermaid(mermaid_parse, tmp_path: Path):
    """The check has teeth: a malformed edge fails."""
    broken = render_mermaid(default_definition()).replace("prepare --> schema:", "prepare -> schema:")
    (r,) = mermaid_parse(tmp_path, {"broken.mmd": broken}).values()
    assert not r["ok"] and "Parse error" in r["error"]


def test_installer_says_why_it_cannot_install(tmp_path: Path, monkeypatch):
    installer = _installer()
    monkeypatch.setattr(installer.shutil, "which", lambda name: None)
    reason = installer.install(tmp_path / "cache")
    assert reason == "node/npm are not installed" and reason.startswith(installer.UNAVAILABLE)
    assert not installer.installed(tmp_path / "cache")
