"""Branch public surface, traces and docs that run."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import lionops
from lionops import Branch, HookPoint, Tool, Trace, Traced, TransitionRecord
from tests.helpers import ScriptedMiddle, ToolBox

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.anyio

PUBLIC = """Branch iModel Tool ToolInvocation HookPoint Instruct Reason ActionRequestModel
ActionResponseModel ChatParam RunParam ParseParam ActionParam AlcallParams HandleValidation Spec
FieldModel Operative Step prepare_operate_kw operate act Middle communicate run_and_collect Trace
TransitionRecord Traced ConfigurationError""".split()


def test_public_names_are_importable_and_typed():
    for name in PUBLIC:
        assert hasattr(lionops, name), name
        assert name in lionops.__all__
    assert (Path(lionops.__file__).parent / "py.typed").exists()


async def test_operate_traced_returns_named_tuple_and_records_trace():
    b = Branch()
    traced = await b.operate_traced(instruction="x", middle=ScriptedMiddle("hello"))
    assert isinstance(traced, Traced) and traced.result == "hello"
    assert traced.trace is b.traces[-1] and traced.trace.exit == "no_action_param"
    assert await b.operate(instruction="y", middle=ScriptedMiddle("again")) == "again"
    assert len(b.traces) == 2


async def test_trace_appended_when_operate_raises_and_round_trips():
    b = Branch()
    with pytest.raises(lionops.ConfigurationError):
        await b.operate(instruction="x")  # no endpoint configured
    t = b.traces[-1]
    assert t.exit == "failed" and t.states[-1] == "raised" and "ConfigurationError" in t.error
    back = Trace.from_json(t.to_json())
    assert back.path() == t.path() and back.states == t.states and back.exit == t.exit
    assert back.transitions[-1].error == t.transitions[-1].error
    assert all(isinstance(r, TransitionRecord) for r in back.transitions)
    assert all(r.at_ns >= 0 and r.phase_ns >= 0 for r in back.transitions)
    ats = [r.at_ns for r in t.transitions]
    assert ats == sorted(ats)  # monotonic timing
    with pytest.raises(ValueError):
        Trace.from_json(json.dumps({"format": 99}))


async def test_messages_roles_and_logs():
    box = ToolBox()
    b = Branch(system="be brief", tools=box.tools())
    await b.operate(instruction="x", actions=True,
                    middle=ScriptedMiddle({"action_requests": [{"function": "search", "arguments": {"q": "a"}}]}))
    assert [m.role for m in b.messages] == ["system", "user", "assistant", "action_request", "action_response"]
    assert b.logs.of_kind("action")[0].content["output"] == ["a"]
    with pytest.raises(ValueError, match="unknown message role"):
        b.messages.add("robot", "x")  # type: ignore[arg-type]


async def test_failing_observers_never_change_the_outcome():
    """Hooks and writeback that raise are logged, never raised."""
    box = ToolBox()
    b = Branch(tools=box.tools())

    def bad_hook(payload):
        raise RuntimeError("hook down")

    class BadProvider:
        def writeback(self, r):
            raise RuntimeError("store down")

    for p in HookPoint:
        b.on(p, bad_hook)
    b.add_context_provider(BadProvider())
    out = await b.operate(instruction="x", actions=True,
                          middle=ScriptedMiddle({"action_requests": [{"function": "search", "arguments": {"q": "a"}}]}))
    assert out["action_responses"][0].output == ["a"]
    assert len(b.logs.of_kind("hook_error")) == 2 and len(b.logs.of_kind("writeback_error")) == 1


def test_register_tools_and_reprs():
    b = Branch(name="demo")

    def f(x: int) -> int:
        """F."""
        return x

    (tool,) = b.register_tools(f)
    assert isinstance(tool, Tool) and repr(tool) == "Tool(name='f')"
    with pytest.raises(ValueError, match="already registered"):
        b.register_tools(f)
    b.register_tools(Tool(f, name="g"))
    assert b.acts.names == ["f", "g"]
    assert "name='demo'" in repr(b) and "tools=['f', 'g']" in repr(b)
    with pytest.raises(ValueError, match="not registered"):
        b.acts.get_tool_schema(tools=["nope"])
    with pytest.raises(TypeError, match="callable"):
        Tool(42)  # type: ignore[arg-type]


async def test_branch_dumps_are_atomic_json(tmp_path):
    b = Branch()
    await b.operate(instruction="x", middle=ScriptedMiddle("t"))
    doc = json.loads(b.snapshot(tmp_path / "snap" / "b.json").read_text())
    assert doc["traces"][0]["exit"] == "no_action_param" and doc["messages"][0]["role"] == "user"
    assert json.loads(b.dump_logs(tmp_path / "logs.json").read_text()) == []
    assert not list((tmp_path / "snap").glob(".*.tmp"))


def test_readme_example_runs(tmp_path):
    """Docs that run: the README's Python example executes and prints what it says."""
    text = (ROOT / "README.md").read_text()
    blocks = [b for b in re.findall(r"```python\n(.*?)```", text, re.DOTALL) if "operate_traced(" in b]
    assert blocks, "README has a python example of operate_traced"
    script = tmp_path / "example.py"
    script.write_text(blocks[0])
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "{'city': 'Lisbon', 'temp_c': 21}" in out.stdout and "enriched" in out.stdout


def test_demo_runs(tmp_path):
    out = subprocess.run([sys.executable, "-m", "lionops.cli.demo"], capture_output=True, text=True,
                         timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "trace:" in out.stdout
    trace = Trace.from_json((tmp_path / "out" / "demo-trace.json").read_text())
    assert trace.states[0] == "prepare" and trace.states[-1] in ("returned", "raised")


def test_trace_show_cli(tmp_path):
    t = Trace(transitions=[TransitionRecord("failed", "prepare", "raised", {"phase_raised": True},
                                            error="TypeError: x")])
    p = tmp_path / "t.json"
    p.write_text(t.to_json())
    out = subprocess.run([sys.executable, "-m", "lionops", "trace", "show", str(p)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "prepare -> raised" in out.stdout and "phase_raised=T" in out.stdout


async def test_trace_json_survives_non_json_adapter_facts():
    """annotate() values that JSON cannot hold never break Trace.to_json()."""
    from lionops.trace import annotate

    async def middle(*a, **k):
        annotate(opaque=object(), nested={"s": {1, 2}})
        return "t"

    b = Branch()
    await b.operate(instruction="x", middle=middle)
    back = Trace.from_json(b.traces[-1].to_json())
    assert back.meta["opaque"].startswith("<object object") and sorted(back.meta["nested"]["s"]) == [1, 2]


async def test_trace_rows_materialize_once_and_compare_by_value():
    b = Branch()
    await b.operate(instruction="x", middle=ScriptedMiddle("t"))
    t = b.traces[-1]
    first = t.transitions
    assert first is t.transitions and all(isinstance(r, TransitionRecord) for r in first)
    assert Trace.from_json(t.to_json()) == t
    assert t != Trace()
