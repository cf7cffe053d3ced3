"""Replay against edited cassettes and traces: an edit seen only in an
argument's type, a failure a Middle wraps or swallows, a tool schema that
cannot be built, a trace that reads but cannot have run, each found before
any observer sees it; and a call that raises before the machine runs keeps
the cassette aligned."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, Field

from lionops import Branch
from lionops.errors import ConfigurationError, TraceFormatError
from lionops.replay import ReplayDivergence, record, replay
from lionops.testing import OpenAIServer, completion, tool_call
from tests.openai_server import make_model
from tests.replay.test_replay_hardening import Watcher, answer_of, edit


class Dial:
    """A real tool whose argument types matter: it records exactly what it got."""

    def __init__(self) -> None:
        self.got: list[Any] = []

    def tools(self) -> list[Any]:
        dial = self

        def set_level(level: int, note: Any = None) -> str:
            """Set the level."""
            dial.got.append((level, note))
            return f"level {level}"

        return [set_level]


KW = dict(instruction="Set the level to 1.", actions=True)


async def _record(path: Path, arguments: dict[str, Any]) -> Any:
    answer = completion("done", tool_calls=[tool_call("set_level", arguments, "call_1")])
    with OpenAIServer([answer]) as server:
        model = make_model(server)
        branch = Branch(chat_model=model, tools=Dial().tools())
        await record(path, branch, **KW)
        await model.aclose()
    return model


def _set_arguments(arguments: dict[str, Any]) -> Any:
    def change(data: dict[str, Any]) -> None:
        answer_of(data)["tool_calls"][0]["function"]["arguments"] = json.dumps(arguments)
    return change


@pytest.mark.anyio
@pytest.mark.parametrize("recorded, edited", [
    ({"level": 1}, {"level": "1"}),              # equal only once validated (text to int)
    ({"level": 1}, {"level": 1.0}),              # a float, equal to Python
    ({"level": 1}, {"level": True}),             # a bool, equal to Python
    ({"level": 1}, {"level": 1, "note": None}),  # a default spelled out
    ({"level": 1, "note": 1}, {"level": 1, "note": True}),  # reaches the tool as True
    ({"level": 1, "note": [0]}, {"level": 1, "note": [False]}),
], ids=["text", "float", "bool", "default", "any-bool", "nested-bool"])
@pytest.mark.parametrize("run_tools", [False, True])
async def test_an_argument_edit_seen_only_in_its_type_diverges_before_any_observer(tmp_path, recorded, edited,
                                                                                   run_tools):
    path = tmp_path / "run.json"
    model = await _record(path, recorded)
    edit(path, _set_arguments(edited))
    dial, watcher = Dial(), Watcher()
    branch = watcher.attach(Branch(chat_model=model, tools=dial.tools()))
    with pytest.raises(ReplayDivergence) as info:
        await replay(path, branch, run_tools=run_tools, **KW)
    assert info.value.kind == "tool_call" and "nothing was dispatched" in str(info.value), info.value
    assert watcher.nothing and dial.got == []


@pytest.mark.anyio
@pytest.mark.parametrize("arguments", [{"level": 1}, {"level": 1, "note": True}, {"level": 1, "note": 1.5}])
async def test_an_honest_replay_of_typed_arguments_still_passes(tmp_path, arguments):
    path = tmp_path / "run.json"
    model = await _record(path, arguments)
    for run_tools in (False, True):
        dial = Dial()
        traced = await replay(path, Branch(chat_model=model, tools=dial.tools()), run_tools=run_tools, **KW)
        assert traced.trace.exit is not None
        assert dial.got == ([(arguments["level"], arguments.get("note"))] if run_tools else [])


# ============================================================ failed recordings behind a custom Middle

async def wrapping_middle(branch, instruction, chat_param, parse_param=None, clear_messages=False,
                          skip_validation=False):
    """A Middle that turns the endpoint's failure into its own error."""
    from lionops import LionopsError, communicate

    try:
        return await communicate(branch, instruction, chat_param, parse_param, clear_messages, skip_validation)
    except LionopsError as exc:
        raise RuntimeError("the model is unavailable") from exc


async def swallowing_middle(branch, instruction, chat_param, parse_param=None, clear_messages=False,
                            skip_validation=False):
    """A Middle that answers nothing when the endpoint fails."""
    from lionops import LionopsError, communicate

    try:
        return await communicate(branch, instruction, chat_param, parse_param, clear_messages, skip_validation)
    except LionopsError:
        return None


@pytest.mark.anyio
@pytest.mark.parametrize("middle", [wrapping_middle, swallowing_middle])
@pytest.mark.parametrize("down", ["refused", "503", "429"])
@pytest.mark.parametrize("mode", ["once", "new_episodes"])
async def test_a_failure_a_middle_wraps_or_swallows_is_not_recorded(tmp_path, middle, down, mode):
    from lionops.replay import CassetteSession
    from lionops.testing import Reply, error_body
    from tests.replay.test_replay_hardening import down_model

    path = tmp_path / "run.json"
    kw = dict(instruction="Hello?", middle=middle)
    if down == "refused":
        model = down_model()
        server = None
    else:
        status = int(down)
        server = OpenAIServer([Reply(error_body("busy", "server_error"), status=status)])
        server.__enter__()
        model = make_model(server, max_retries=0)
    try:
        session = CassetteSession(path, mode)
        if middle is wrapping_middle:
            with pytest.raises(RuntimeError, match="unavailable") as info:
                await session.operate(Branch(chat_model=model), **kw)
            assert any("was not saved" in note for note in info.value.__notes__)
        else:
            assert await session.operate(Branch(chat_model=model), **kw) is None
        assert not path.exists() and session.recorded == 0 and session.failed is not None
    finally:
        if server is not None:
            server.__exit__(None, None, None)
    with OpenAIServer([completion("Hi.")]) as server:  # the next run, server up: records afresh
        model = make_model(server)
        assert await CassetteSession(path, mode).operate(Branch(chat_model=model), **kw) == "Hi."
        await model.aclose()
    assert await CassetteSession(path, "none").operate(Branch(chat_model=down_model()), **kw) == "Hi."


# ============================================================ malformed schemas pydantic refuses to build

def _tool_with(properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": "zz", "parameters": {"type": "object", "properties": properties}}}


class Record(BaseModel):
    record_id: str = Field(alias="_id")  # an answer key pydantic holds under another name
    copy_of: str = Field("", alias="copy")


def tag(model_config: str, _scope: str = "all", copy: int = 1, __class__: str = "") -> str:
    """Tag a record."""
    return f"{model_config}/{_scope}/{copy}"


@pytest.mark.anyio
async def test_names_pydantic_holds_under_another_name_replay_from_the_cassette_alone(tmp_path):
    # parameters and answer keys such as ``_id``, ``model_config``, ``copy``, ``__class__``
    from tests.replay.test_replay_hardening import run_lionops

    path = tmp_path / "run.json"
    arguments = {"model_config": "x", "_scope": "mine", "copy": 2, "__class__": "c"}
    answer = completion(json.dumps({"_id": "r1", "copy": "r0"}), tool_calls=[tool_call("tag", arguments, "call_1")])
    with OpenAIServer([answer]) as server:
        model = make_model(server)
        result, _ = await record(path, Branch(chat_model=model, tools=[tag]), instruction="Tag r1.",
                                 response_format=Record, actions=True)
        await model.aclose()
    assert [(r.function, r.arguments, r.output) for r in result.action_responses] == [
        ("tag", arguments, "x/mine/2")]
    replayed, _ = await replay(path)  # the branch, the tool and the response model rebuilt from the cassette
    dumped = replayed.model_dump()
    assert (dumped["_id"], dumped["copy"]) == ("r1", "r0")
    assert [(r.function, r.arguments, r.output) for r in replayed.action_responses] == [
        ("tag", arguments, "x/mine/2")]
    proc = run_lionops("replay", str(path))
    assert proc.returncode == 0, proc.stderr


@pytest.mark.anyio
@pytest.mark.parametrize("properties", [
    {"a": {"enum": []}},                   # an empty Literal
], ids=["empty-enum"])
async def test_a_tool_schema_pydantic_cannot_build_is_a_cassette_error(tmp_path, properties):
    from lionops.cli.commands import main as cli
    from lionops.replay import CassetteError
    from tests.replay.test_replay_hardening import ANSWER, record_run

    path = tmp_path / "run.json"
    await record_run(path, ANSWER)
    edit(path, lambda d: d["operations"][0]["call"]["registered_tools"].append(_tool_with(properties)))
    with pytest.raises(CassetteError, match="cannot be rebuilt") as info:
        await replay(path)
    assert "\n" not in str(info.value)
    assert cli(["replay", str(path)]) == 2


# ============================================================ traces that read but are wrong

def _trace_json(**changes: Any) -> str:
    from tests.replay.test_replay_hardening import _good_trace

    d = _good_trace()
    steps = changes.pop("steps", {})
    d.update(changes)
    for i, step in steps.items():
        d["transitions"][i].update(step)
    return json.dumps(d).replace('"NAN"', "NaN").replace('"INF"', "Infinity")


WRONG_TRACES = [
    (_trace_json(format=True), "unsupported trace format True"),
    (_trace_json(format=1.0), "unsupported trace format 1.0"),
    (_trace_json(started_at="NAN"), "'started_at' is nan"),
    (_trace_json(started_at="INF"), "'started_at' is inf"),
    (_trace_json(steps={0: {"guards": {"is_admin": True}}}), "are not those 'prepare' evaluates"),
    (_trace_json(steps={0: {"guards": {"phase_raised": False, "preparation_succeeded": False}}}), "evaluates"),
    (_trace_json(steps={0: {"guards": {"phase_raised": True}}}), "evaluates"),  # that one fires failed
    (_trace_json(steps={1: {"guards": {}}}), "evaluates"),
    (_trace_json(steps={0: {"at_ns": 50}, 1: {"at_ns": 10}}), "'at_ns' 10 is before the previous step's 50"),
]


@pytest.mark.parametrize("text, needle", WRONG_TRACES, ids=[n for _, n in WRONG_TRACES])
def test_a_trace_that_reads_but_cannot_have_run_is_refused(tmp_path, text, needle):
    from lionops.cli.commands import main as cli
    from lionops.trace import Trace

    with pytest.raises(ValueError) as info:
        Trace.from_json(text)
    assert type(info.value) is TraceFormatError and needle in str(info.value), str(info.value)
    path = tmp_path / "t.json"
    path.write_text(text)
    assert cli(["trace", "show", str(path)]) == 2


@pytest.mark.anyio
async def test_every_recorded_trace_reads_back(tmp_path):
    """Real traces (each engine, a success and a failure) pass the stricter checks."""
    from lionops import EndpointAuthError
    from lionops.testing import Reply, error_body
    from lionops.trace import Trace
    from tests.helpers import ToolBox
    from tests.replay.test_replay_hardening import ANSWER, make_branch

    unauthorized = Reply(error_body("Incorrect API key provided"), status=401)
    with OpenAIServer([ANSWER, ANSWER, unauthorized, unauthorized]) as server:
        model = make_model(server, max_retries=0)
        for engine in ("compiled", "transitions"):
            branch = make_branch(model, ToolBox())
            traced = await branch.operate_traced(instruction="q", actions=True, engine=engine)
            assert Trace.from_json(traced.trace.to_json()) == traced.trace
        for engine in ("compiled", "transitions"):
            with pytest.raises(EndpointAuthError):
                await branch.operate(instruction="q", engine=engine)
            assert Trace.from_json(branch.traces[-1].to_json()) == branch.traces[-1]
        await model.aclose()


# ============================================================ the comparison every replay check uses

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_scalars = st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from([0.0, 1.0, -1.0, 2.5]) | st.text(max_size=3)
_json = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=2), inner,
                                                                                             max_size=3), max_leaves=12)


@given(_json, _json)
def test_same_json_is_equality_of_the_json_text(a, b):
    """Two values are the same to a replay exactly when they serialize to the
    same JSON (keys in any order): ``true``, ``1`` and ``1.0`` never match."""
    from lionops.replay.divergence import first_difference, same_json

    text = lambda v: json.dumps(v, sort_keys=True)  # noqa: E731
    assert same_json(a, b) == (text(a) == text(b))
    assert (first_difference(a, b) is None) == same_json(a, b)


@pytest.mark.anyio
async def test_a_call_that_raises_before_the_machine_runs_keeps_the_cassette_aligned(tmp_path):
    """A recorded call that fails before anything fires (an unknown engine)
    is still an operation of the cassette, so the calls after it replay
    against their own recordings."""
    from lionops.replay import CassetteSession
    from tests.replay.test_replay_hardening import down_model

    path = tmp_path / "run.json"
    calls = [dict(instruction="One?"), dict(instruction="Two?", engine="no-such-engine"), dict(instruction="Three?")]

    async def run_all(session: CassetteSession, model: Any) -> list[Any]:
        out: list[Any] = []
        for kw in calls:
            branch = Branch(chat_model=model)
            try:
                out.append(await session.operate(branch, **kw))
            except ValueError as exc:  # the unknown engine
                out.append(type(exc))
        return out

    with OpenAIServer([completion("1"), completion("3")]) as server:
        model = make_model(server)
        recorded = await run_all(CassetteSession(path, "once"), model)
        await model.aclose()
    assert recorded == ["1", ConfigurationError, "3"]
    session = CassetteSession(path, "none")
    assert await run_all(session, down_model()) == recorded
    session.finish()


def test_an_empty_tools_selector_is_recorded_as_no_tool_shown() -> None:
    """``tools=[]`` offers no tool (the schema phase), so the recorded call
    shows the model none; ``tools=None`` or no selector shows every one."""
    from lionops.replay import Redactor
    from lionops.replay.run import describe_call

    def lookup(q: str) -> str:
        """Look up."""
        return q

    def wipe(path: str) -> str:
        """Wipe."""
        return path

    branch = Branch(tools=[lookup, wipe])
    redactor = Redactor()
    shown = {
        repr(selector): [s["function"]["name"] for s in describe_call(branch, kw, redactor).tool_schemas]
        for selector, kw in (
            ([], {"actions": True, "tools": []}),
            (set(), {"actions": True, "tools": set()}),
            (None, {"actions": True, "tools": None}),
            ("absent", {"actions": True}),
            (["lookup"], {"actions": True, "tools": ["lookup"]}),
        )
    }
    assert shown == {"[]": [], "set()": [], "None": ["lookup", "wipe"], "'absent'": ["lookup", "wipe"],
                     "['lookup']": ["lookup"]}
