"""What ``import lionops`` loads, and which way the endpoint and Middle layers import."""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

import lionops

PACKAGE = pathlib.Path(lionops.__file__).parent


def test_import_lionops_loads_no_subprocess_machinery():
    names = "('subprocess', 'lionops.endpoints.cli.process')"
    code = f"import sys, lionops; print(sorted(m for m in {names} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "[]"


def test_a_cli_endpoint_still_loads_its_process_module_on_use():
    from lionops import iModel

    model = iModel(provider="claude_code", cli_command=["claude"], model="m")
    assert type(model.endpoint).__module__ == "lionops.endpoints.cli.claude"
    assert "lionops.endpoints.cli.process" in sys.modules


def _imports(path: pathlib.Path) -> set[str]:
    """Every lionops module ``path`` imports, function-level imports included."""
    module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = package
            for _ in range(max(node.level - 1, 0)):
                base = base.rsplit(".", 1)[0]
            name = f"{base}.{node.module}" if node.level and node.module else (base if node.level else node.module)
            found.add(name or "")
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return {n for n in found if n.startswith("lionops")}


def test_endpoints_import_nothing_of_the_middles_or_the_pipeline():
    for path in (PACKAGE / "endpoints").rglob("*.py"):
        upward = {n for n in _imports(path) if n.startswith(("lionops.middles", "lionops.adapters", "lionops.branch",
                                                             "lionops.operate", "lionops.engine", "lionops.pipeline"))}
        assert upward == set(), f"{path.relative_to(PACKAGE)} imports {sorted(upward)}"


def test_only_the_transport_module_of_the_openai_family_imports_httpx_io():
    for path in (PACKAGE / "endpoints" / "openai").glob("*.py"):
        source = path.read_text()
        if path.name != "transport.py":
            assert "import httpx2" not in source and "import anyio" not in source, path.name


def test_lionops_never_imports_httpx_only_httpx2(tmp_path):
    # HTTP goes through httpx2 (``import httpx2``): neither importing lionops nor
    # a whole call over HTTP, a recording and a replay load the ``httpx`` package.
    code = """
import sys, anyio, lionops
from lionops import Branch, iModel
from lionops.replay import record, replay
from lionops.testing import OpenAIServer, completion
async def main():
    path = sys.argv[1] + "/c.json"
    with OpenAIServer([completion("hi")]) as server:
        model = iModel(provider="openai", model="m", base_url=server.base_url, api_key="k")
        await record(path, Branch(chat_model=model), instruction="x")
        await replay(path, Branch(chat_model=model), instruction="x")
        await model.aclose()
anyio.run(main)
print(sorted(m for m in sys.modules if m.split(".")[0] in ("httpx", "httpcore")), "httpx2" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[] True"
