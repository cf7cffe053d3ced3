"""Every fenced ``python`` block of README.md and docs/*.md runs.

The pages are found by glob (``README.md``, ``docs/*.md``), so a new page is
covered as soon as it exists. Each block runs offline on the installed
package in a fresh subprocess (``python tests/contract/test_docs.py``), in a fresh
module namespace, in a temporary working directory, with a timeout. The
subprocess's environment has no provider keys, and ``OPENAI_BASE_URL`` and the
OTLP exporters' endpoint point at a closed loopback port (an export gives up
after a second instead of retrying for ten), so nothing a block does can reach
a network.

How a page controls its blocks
==============================

The first line of a block may be a directive comment:

``# doc: not run: <reason>``
    The block is not executed (it needs a real provider, a real CLI, a path
    of the reader's machine). The reason is required and checked. Keep such
    blocks rare: most can run against one of the fixtures below.

``# doc: continue``
    The block continues the previous block of the page: it runs after it, in
    the same namespace and the same subprocess (a chain). A chain fails at
    its first failing block, named by its line.

An HTML comment placed between the previous block and a block names what
that block (and the chain it starts) needs. Readers of the rendered page do
not see it. One comment may hold several directives, one per line:

``<!-- doc: server -->``
    A loopback :class:`lionops.testing.OpenAIServer` runs while the chain
    runs. ``OPENAI_BASE_URL`` points at it and ``OPENAI_API_KEY`` is set to
    a dummy key, so ``iModel(provider="openai", ...)`` talks to it. It is
    ``doc_server`` in the namespace; script its answers in a setup.

``<!-- doc: fake-cli NAME SESSION -->``
    An executable ``NAME`` on ``PATH`` that replays
    ``tests/fixtures/cli/SESSION`` through ``tests/fake_cli.py`` (a real
    subprocess speaking Claude Code's stream-json), so
    ``iModel(provider="claude_code", cli_command=["NAME"])`` runs.

``<!-- doc: setup`` followed by Python lines, then ``-->``
    Hidden code run in the chain's namespace before the block: the tool
    functions and models a snippet assumes, the server's scripted answers
    (``doc_server.push(completion(...))``, with ``lionops.testing``'s
    builders already imported), and so on.

``<!-- doc: check`` followed by Python lines, then ``-->``
    Hidden code run after the block, in its namespace: assertions that the
    block did what its text says.

``<!-- doc: pytest -->``
    The block is a pytest test module. It is written to a temporary folder
    and run twice by a real ``python -m pytest`` subprocess (so a
    ``lionops_cassette`` test records on the first run and replays on the
    second); both runs must pass. A setup runs before the first run, and with
    ``server`` the loopback server runs during the first run only.

Blocks with a top-level ``await`` run inside an event loop, once on asyncio
and once on trio (in the same subprocess, each run in a fresh namespace and
working directory); other blocks run once (a block that calls
``anyio.run(main)`` picks its own backend).

Run one page: ``.venv/bin/python -m pytest -q tests/contract/test_docs.py -k semantics``.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import textwrap
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FAKE_CLI = ROOT / "tests" / "fake_cli.py"
CLI_SESSIONS = ROOT / "tests" / "fixtures" / "cli"
#: Seconds one chain (or one pytest run) may take; generous for a loaded machine.
TIMEOUT_S = 120
#: A loopback port nothing listens on (the discard port): requests are refused.
CLOSED_BASE_URL = "http://127.0.0.1:9/v1"
#: The OTLP exporters' endpoint and timeout (seconds) a block sees: the same
#: closed port, so a span export a page makes fails fast. That exports arrive
#: is shown against a real receiver in tests/peers/test_otel_otlp.py.
CLOSED_OTLP_ENV = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9", "OTEL_EXPORTER_OTLP_TIMEOUT": "1"}
#: Environment variables a block never sees.
SCRUBBED_ENV = ("OPENAI_API_KEY", "OPENROUTER_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "LIONOPS_MODEL")

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>[^\n`]*)$")
_COMMENT = re.compile(r"<!--\s*doc:(?P<body>.*?)-->", re.S)
_DIRECTIVE = re.compile(r"^#\s*doc:\s*(?P<word>not run|continue|[a-z-]+)\s*:?\s*(?P<rest>.*)$")
#: ``co_flags`` bit of code compiled from a top-level ``await``.
CO_COROUTINE = 0x80
_MIN_REASON = 12  # characters: a reason says why, not just "no"


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


@dataclass
class Block:
    page: str
    line: int  # 1-based line of the opening fence
    code: str
    directive: str = ""  # "", "not run", "continue"
    reason: str = ""
    server: bool = False
    fake_cli: list[tuple[str, str]] = field(default_factory=list)
    setup: str = ""
    check: str = ""
    pytest: bool = False

    @property
    def has_await(self) -> bool:
        return _has_top_level_await(self.code)


def _has_top_level_await(code: str) -> bool:
    try:
        compiled = compile(code, "<doc>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    except SyntaxError:
        return False
    return bool(compiled.co_flags & CO_COROUTINE)


def _apply_comments(text: str, block: Block) -> None:
    for match in _COMMENT.finditer(text):
        body = match.group("body")
        first, _, rest = body.partition("\n")
        words = first.split()
        if not words:
            raise ValueError(f"{block.page}:{block.line}: empty doc comment")
        kind = words[0]
        if kind in ("setup", "check"):
            code = textwrap.dedent(rest)
            setattr(block, kind, getattr(block, kind) + code + "\n")
            continue
        for line in [first, *rest.splitlines()]:
            words = line.split()
            if not words:
                continue
            if words[0] == "server":
                block.server = True
            elif words[0] == "pytest":
                block.pytest = True
            elif words[0] == "fake-cli" and len(words) == 3:
                block.fake_cli.append((words[1], words[2]))
            else:
                raise ValueError(f"{block.page}:{block.line}: unknown doc directive {line.strip()!r}")


def extract(path: Path) -> list[Block]:
    """The ``python`` blocks of one page, with the directives that apply to each."""
    return extract_text(path.relative_to(ROOT).as_posix(), path.read_text(encoding="utf-8"))


def extract_text(rel: str, text: str) -> list[Block]:
    """:func:`extract` of a page's text; ``rel`` names the page in reports."""
    lines = text.splitlines()
    blocks: list[Block] = []
    between: list[str] = []  # text since the previous python block
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            between.append(lines[i])
            i += 1
            continue
        fence, info, indent = m.group("fence"), m.group("info").strip(), len(m.group("indent"))
        start = i
        body: list[str] = []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i][indent:] if lines[i][:indent].strip() == "" else lines[i])
            i += 1
        i += 1  # closing fence
        if info.split()[:1] != ["python"]:
            between.append("")
            continue
        block = Block(rel, start + 1, "\n".join(body) + "\n")
        _apply_comments("\n".join(between), block)
        between = []
        first = next((ln for ln in body if ln.strip()), "")
        d = _DIRECTIVE.match(first.strip())
        if d:
            block.directive = d.group("word")
            block.reason = d.group("rest").strip()
        blocks.append(block)
    return blocks


def chains(blocks: list[Block]) -> list[list[Block]]:
    """Blocks grouped into chains: a block and the ``# doc: continue`` blocks after it."""
    out: list[list[Block]] = []
    for block in blocks:
        if block.directive == "not run":
            continue
        if block.directive == "continue":
            if not out or out[-1][-1].page != block.page:
                raise ValueError(f"{block.page}:{block.line}: '# doc: continue' without a block before it")
            out[-1].append(block)
        else:
            out.append([block])
    return out


ALL_BLOCKS = [b for p in pages() for b in extract(p)]
CHAINS = chains(ALL_BLOCKS)


def _params() -> list[object]:
    return [pytest.param(chain, id=f"{chain[0].page}:{chain[0].line}") for chain in CHAINS]


def _backends(chain: list[Block]) -> list[str]:
    """asyncio and trio for a chain with a top-level ``await``; else one run."""
    return ["asyncio", "trio"] if any(b.has_await for b in chain) else ["-"]


def _env(tmp: Path, chain: list[Block]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in SCRUBBED_ENV and not k.startswith("OTEL_EXPORTER_OTLP_")}
    env["OPENAI_BASE_URL"] = CLOSED_BASE_URL
    env.update(CLOSED_OTLP_ENV)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    fakes = [f for b in chain for f in b.fake_cli]
    if fakes:
        bindir = tmp / "bin"
        bindir.mkdir()
        for name, session in fakes:
            exe = bindir / name
            exe.write_text(
                f"#!/bin/sh\nexec {sys.executable} {FAKE_CLI} --session {CLI_SESSIONS / session} \"$@\"\n"
            )
            exe.chmod(0o755)
        env["PATH"] = f"{bindir}{os.pathsep}{env.get('PATH', '')}"
    return env


def _describe(proc: subprocess.CompletedProcess[str]) -> str:
    return f"exit {proc.returncode}\n--- stdout\n{proc.stdout[-4000:]}\n--- stderr\n{proc.stderr[-6000:]}"


def test_not_run_blocks_say_why():
    """A block that is not run carries its reason; such blocks stay rare."""
    skipped = [b for b in ALL_BLOCKS if b.directive == "not run"]
    for b in skipped:
        assert len(b.reason) >= _MIN_REASON, f"{b.page}:{b.line}: '# doc: not run' needs a reason"
    assert len(skipped) <= max(2, len(ALL_BLOCKS) // 8), [f"{b.page}:{b.line}" for b in skipped]


def test_directives_are_known():
    for b in ALL_BLOCKS:
        assert b.directive in ("", "not run", "continue"), f"{b.page}:{b.line}: unknown '# doc: {b.directive}'"


def test_every_page_is_covered():
    """The pages with python blocks include README and the adapter pages (the glob works)."""
    covered = {b.page for b in ALL_BLOCKS}
    assert {"README.md", "docs/api.md", "docs/cli.md", "docs/replay.md"} <= covered


SAMPLE = """\
Text.

<!-- doc: server
fake-cli claude plain_answer.jsonl -->
<!-- doc: setup
x = 1
-->

```python
y = x + 1
```

```json
{"not": "python"}
```

<!-- doc: check
assert y == 2
-->
```python
# doc: continue
z = y
```

```python
# doc: not run: needs a real provider key to mean anything
iModel(provider="openai").call()
```

```python
value = await something()
```
"""


def test_extraction_reads_directives_and_chains():
    """The runner's own rules, on a sample page."""
    blocks = extract_text("sample.md", SAMPLE)
    assert [b.line for b in blocks] == [9, 20, 25, 30]
    first, cont, skipped, awaiting = blocks
    assert first.server and first.fake_cli == [("claude", "plain_answer.jsonl")]
    assert first.setup.strip() == "x = 1" and not first.check
    assert cont.directive == "continue" and cont.check.strip() == "assert y == 2" and not cont.server
    assert skipped.directive == "not run" and skipped.reason.startswith("needs a real provider")
    assert awaiting.has_await and not first.has_await
    assert [[b.line for b in c] for c in chains(blocks)] == [[9, 20], [30]]


def test_unknown_directive_and_orphan_continue_are_errors():
    with pytest.raises(ValueError, match="unknown doc directive"):
        extract_text("bad.md", "<!-- doc: sever -->\n```python\npass\n```\n")
    with pytest.raises(ValueError, match="without a block before it"):
        chains(extract_text("bad.md", "```python\n# doc: continue\npass\n```\n"))


def test_a_failing_block_is_named(tmp_path: Path):
    """A failure names the page, the block's line and the backend."""
    [chain] = chains(extract_text(
        "sample.md", "text\n\n```python\nimport anyio\nawait anyio.sleep(0)\nassert False, 'boom'\n```\n"))
    spec = tmp_path / "chain.json"
    spec.write_text(json.dumps({"blocks": [asdict(b) for b in chain], "backends": _backends(chain)}))
    proc = subprocess.run([sys.executable, __file__, "chain", str(spec)], cwd=tmp_path,
                          env=_env(tmp_path, chain), capture_output=True, text=True, timeout=TIMEOUT_S)
    assert proc.returncode != 0
    assert 'File "sample.md:3 [asyncio]", line 3' in proc.stderr and "AssertionError: boom" in proc.stderr


@pytest.mark.parametrize("chain", _params())
def test_block_runs(chain: list[Block], tmp_path: Path):
    env = _env(tmp_path, chain)
    spec = tmp_path / "chain.json"
    spec.write_text(json.dumps({"blocks": [asdict(b) for b in chain], "backends": _backends(chain)}))
    if chain[0].pytest:
        _run_pytest_block(chain, spec, env, tmp_path)
        return
    proc = subprocess.run(
        [sys.executable, __file__, "chain", str(spec)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=TIMEOUT_S,
    )
    if proc.returncode != 0:
        pytest.fail(f"{chain[0].page}:{chain[0].line} failed\n{_describe(proc)}", pytrace=False)


def _run_pytest_block(chain: list[Block], spec: Path, env: dict[str, str], tmp: Path) -> None:
    project = tmp / "project"
    project.mkdir()
    (project / "test_doc_example.py").write_text("".join(b.code for b in chain))
    for run in (1, 2):
        spec.write_text(json.dumps({"blocks": [asdict(b) for b in chain], "run": run, "project": str(project)}))
        proc = subprocess.run(
            [sys.executable, __file__, "pytest", str(spec)],
            cwd=project, env=env, capture_output=True, text=True, timeout=TIMEOUT_S,
        )
        if proc.returncode != 0 or " passed" not in proc.stdout:
            pytest.fail(f"{chain[0].page}:{chain[0].line} pytest run {run} failed\n{_describe(proc)}", pytrace=False)


# ---------------------------------------------------------------- the subprocess side


def _namespace(block: dict[str, object], backend: str) -> dict[str, object]:
    import types

    suffix = "" if backend == "-" else f"_{backend}"
    module = types.ModuleType(f"doc_{Path(str(block['page'])).stem}_{block['line']}{suffix}")
    sys.modules[module.__name__] = module
    return module.__dict__


def _exec(code: str, ns: dict[str, object], where: str, backend: str) -> None:
    compiled = compile(code, where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    if compiled.co_flags & CO_COROUTINE:  # a top-level await
        import anyio

        async def run() -> None:
            await eval(compiled, ns)  # noqa: S307 - the documentation's own code

        anyio.run(run, backend=backend if backend != "-" else "asyncio")
    else:
        exec(compiled, ns)  # noqa: S102 - the documentation's own code


def _start_server(ns: dict[str, object]):
    from lionops import testing

    server = testing.OpenAIServer().start()
    os.environ["OPENAI_BASE_URL"] = server.base_url
    os.environ["OPENAI_API_KEY"] = "sk-doc-test"
    ns["doc_server"] = server
    return server


def _prelude(ns: dict[str, object]) -> None:
    exec("import json\nfrom lionops.testing import OpenAIServer, Reply, completion, tool_call, chunked", ns)  # noqa: S102


def _run_chain(spec: dict[str, object]) -> int:
    """Run one chain once per backend, each run in a fresh namespace, working
    directory and (with ``server``) a fresh loopback server."""
    blocks: list[dict[str, object]] = spec["blocks"]  # type: ignore[assignment]
    home, environ = Path.cwd(), dict(os.environ)
    for backend in spec["backends"]:  # type: ignore[attr-defined]
        workdir = home / (backend if backend != "-" else "run")
        workdir.mkdir()
        os.chdir(workdir)
        ns = _namespace(blocks[0], backend)
        server = _start_server(ns) if any(b["server"] for b in blocks) else None
        try:
            for b in blocks:
                where = f"{b['page']}:{b['line']}" + ("" if backend == "-" else f" [{backend}]")
                if b["setup"]:
                    _prelude(ns)
                    _exec(str(b["setup"]), ns, f"{where} (setup)", backend)
                _exec(str(b["code"]), ns, where, backend)
                if b["check"]:
                    _exec(str(b["check"]), ns, f"{where} (check)", backend)
        finally:
            if server is not None:
                server.stop()
            os.environ.clear()
            os.environ.update(environ)
            os.chdir(home)
    return 0


def _run_pytest(spec: dict[str, object]) -> int:
    blocks: list[dict[str, object]] = spec["blocks"]  # type: ignore[assignment]
    ns: dict[str, object] = {}
    first = spec["run"] == 1
    server = _start_server(ns) if first and any(b["server"] for b in blocks) else None
    try:
        for b in blocks:
            if b["setup"] and first:
                _prelude(ns)
                _exec(str(b["setup"]), ns, f"{b['page']}:{b['line']} (setup)", "asyncio")
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_doc_example.py"],
            cwd=str(spec["project"]), timeout=TIMEOUT_S,
        )
        return proc.returncode
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    mode, path = sys.argv[1], sys.argv[2]
    loaded = json.loads(Path(path).read_text())
    sys.exit(_run_chain(loaded) if mode == "chain" else _run_pytest(loaded))
