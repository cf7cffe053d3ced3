"""``Branch.run()``: the loop of operate() rounds as the run machine
(states/run.toml), on the same engine and driver as operate (DESIGN "The
loop is a second machine"); a gate's ``Deny(reason=...)`` the model reads."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from lionops import (
    Approve,
    Branch,
    ConfigurationError,
    Defer,
    Deny,
    MaxRoundsError,
    RunTrace,
    UsageLimitExceeded,
    iModel,
)
from lionops._limits import UsageLimits
from lionops.errors import ArgumentTypeError, TraceFormatError
from lionops.pipeline.loop import DEFAULT_MAX_ROUNDS, NEXT_ROUND_INSTRUCTION
from lionops.testing import OpenAIServer
from lionops.testing.openai_server import completion, tool_call

pytestmark = pytest.mark.anyio


class Answer(BaseModel):
    city: str
    summary: str


class Weather:
    """A real tool that records every call."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def get_weather(self, city: str) -> dict[str, Any]:
        """Weather for a city."""
        self.calls.append(city)
        return {"city": city, "temp_c": 21}


class Rounds:
    """A scripted Middle: round ``i`` answers ``script[i]`` (a dict validated
    into the generated response type); it records the messages it saw."""

    def __init__(self, *script: dict[str, Any], forever: dict[str, Any] | None = None) -> None:
        self.script = list(script)
        self.forever = forever
        self.seen: list[list[tuple[str, Any]]] = []
        self.instructions: list[Any] = []

    async def __call__(self, branch, instruction, chat_param, parse_param=None,
                       clear_messages=False, skip_validation=False):
        self.seen.append([(m.role, m.content) for m in branch.messages])
        self.instructions.append(instruction)
        branch.messages.add("user", instruction)
        data = self.script.pop(0) if self.script else self.forever
        assert data is not None, "the script ran out"
        value = parse_param.response_format.model_validate(data)
        branch.messages.add("assistant", repr(value))
        return value


def ask(*cities: str) -> dict[str, Any]:
    return {"city": "?", "summary": "checking",
            "action_requests": [{"function": "get_weather", "arguments": {"city": c}} for c in cities]}


ANSWER = {"city": "Lisbon", "summary": "21 degrees"}


def _model(server: OpenAIServer, **kw: Any) -> iModel:
    return iModel(provider="openai", model="gpt-4o-mini", base_url=server.base_url, api_key="sk-test-loop-0001", **kw)


# ------------------------------------------------------------------ a real loopback model

async def test_a_three_round_conversation_over_http_sends_each_rounds_tool_results(anyio_backend):
    weather = Weather()
    with OpenAIServer([
        completion(tool_calls=[tool_call("get_weather", {"city": "Lisbon"}, "c1")]),
        completion(tool_calls=[tool_call("get_weather", {"city": "Porto"}, "c2")]),
        completion("Lisbon and Porto: 21 degrees"),
    ]) as server:
        branch = Branch(tools=[weather.get_weather], chat_model=_model(server))
        result, run = await branch.run_traced("Weather in Lisbon and Porto?")
        bodies = [r.body["messages"] for r in server.chat_requests]
    assert result == "Lisbon and Porto: 21 degrees"
    assert run.states == ["start", "round", "round", "round", "returned"]
    assert run.exit == "answered"
    assert [r.exit for r in run.rounds] == ["enriched", "enriched", "no_requests"]
    assert weather.calls == ["Lisbon", "Porto"]
    assert len(bodies) == 3
    # round 2 carries round 1's call and its result in the native form, then the next instruction
    assert [m["role"] for m in bodies[1]] == ["user", "assistant", "tool", "user"]
    assert bodies[1][1]["tool_calls"][0]["id"] == "c1"
    assert bodies[1][2] == {"role": "tool", "tool_call_id": "c1",
                            "content": json.dumps({"city": "Lisbon", "temp_c": 21})}
    assert bodies[1][3]["content"] == NEXT_ROUND_INSTRUCTION
    assert [m["role"] for m in bodies[2]] == ["user", "assistant", "tool", "user", "assistant", "tool", "user"]
    # the run's trace and every round's trace are in the branch; JSON round-trips
    assert branch.traces[-3:] == run.rounds
    assert RunTrace.from_json(run.to_json()) == run
    assert [a.function for a in run.actions] == ["get_weather", "get_weather"]


async def test_usage_counted_across_rounds_is_the_sum_of_the_rounds(anyio_backend):
    weather = Weather()
    with OpenAIServer([
        completion(tool_calls=[tool_call("get_weather", {"city": "A"}, "a")], prompt_tokens=10, completion_tokens=3),
        completion(tool_calls=[tool_call("get_weather", {"city": "B"}, "b")], prompt_tokens=20, completion_tokens=4),
        completion("done", prompt_tokens=30, completion_tokens=5),
    ]) as server:
        branch = Branch(tools=[weather.get_weather], chat_model=_model(server), limits=UsageLimits(requests=99))
        _, run = await branch.run_traced("go")
    assert run.usage == {"requests": 3, "input_tokens": 60, "output_tokens": 12, "total_tokens": 72,
                         "tool_calls": 2}
    assert {k: getattr(branch.usage, k) for k in run.usage} == run.usage


async def test_a_usage_limit_counts_every_round_and_ends_the_run_at_over_limit(anyio_backend):
    weather = Weather()
    with OpenAIServer(lambda request: completion(tool_calls=[tool_call("get_weather", {"city": "X"}, "x")])) as server:
        branch = Branch(tools=[weather.get_weather], chat_model=_model(server), limits=UsageLimits(requests=2))
        with pytest.raises(UsageLimitExceeded) as info:
            await branch.run("go", max_rounds=5)
        assert len(server.chat_requests) == 2
    assert info.value.limit == "requests"
    run = branch.traces[-1]
    assert run.exit == "over_limit"  # the third round's own trace: the request never made
    assert weather.calls == ["X", "X"]
    stopped = info.value.run_trace  # the run's own trace travels with the error, as MaxRoundsError's does
    assert stopped.exit == "over_limit" and stopped.states == ["start", "round", "round", "round", "raised"]
    assert [r.exit for r in stopped.rounds] == ["enriched", "enriched", "over_limit"]
    assert stopped.rounds[-1] is run and type(stopped).from_json(stopped.to_json()).exit == "over_limit"
    with pytest.raises(UsageLimitExceeded) as single:  # one operation: its trace is branch.traces[-1]
        await branch.operate(instruction="again")
    assert single.value.run_trace is None


# ------------------------------------------------------------------ a scripted Middle

async def test_a_structured_answer_after_a_tool_round(anyio_backend):
    weather = Weather()
    middle = Rounds(ask("Lisbon"), ANSWER)
    branch = Branch(tools=[weather.get_weather])
    result, run = await branch.run_traced("Weather in Lisbon?", response_format=Answer, middle=middle)
    assert isinstance(result, Answer) and result.summary == "21 degrees"
    assert run.exit == "answered" and len(run.rounds) == 2
    assert middle.instructions == ["Weather in Lisbon?", NEXT_ROUND_INSTRUCTION]
    # the second round's model sees the first round's action request and response in the history
    roles = [role for role, _ in middle.seen[1]]
    assert "action" in roles or any("temp_c" in str(content) for _, content in middle.seen[1])


async def test_max_rounds_ends_a_model_that_never_stops_asking(anyio_backend):
    weather = Weather()
    branch = Branch(tools=[weather.get_weather])
    with pytest.raises(MaxRoundsError) as info:
        await branch.run("loop", response_format=Answer, middle=Rounds(forever=ask("A")), max_rounds=3)
    err = info.value
    assert err.max_rounds == 3
    assert err.run_trace.exit == "max_rounds"
    assert err.run_trace.states == ["start", "round", "round", "round", "raised"]
    assert weather.calls == ["A", "A", "A"]


async def test_the_default_max_rounds_is_finite(anyio_backend):
    weather = Weather()
    with pytest.raises(MaxRoundsError) as info:
        await Branch(tools=[weather.get_weather]).run("loop", response_format=Answer, middle=Rounds(forever=ask("A")))
    assert len(info.value.run_trace.rounds) == DEFAULT_MAX_ROUNDS == len(weather.calls)


@pytest.mark.parametrize(("bad", "error"), [(0, ConfigurationError), (-1, ConfigurationError),
                                            (True, ArgumentTypeError), ("3", ArgumentTypeError),
                                            (2.0, ArgumentTypeError)])
async def test_a_bad_max_rounds_fails_before_any_round(anyio_backend, bad, error):
    middle = Rounds(ANSWER)
    branch = Branch()
    with pytest.raises(error):
        await branch.run("x", response_format=Answer, middle=middle, max_rounds=bad)
    assert middle.instructions == []
    assert branch.traces == []


async def test_a_round_that_raises_ends_the_run_at_failed_with_that_exception(anyio_backend):
    class Broken(RuntimeError):
        pass

    async def broken(branch, instruction, chat_param, parse_param=None, clear_messages=False,
                     skip_validation=False):
        raise Broken("endpoint down")

    branch = Branch()
    with pytest.raises(Broken):
        await branch.run("x", response_format=Answer, middle=broken)
    assert branch.traces[-1].exit == "failed"


async def test_a_deferred_call_suspends_the_run_and_resume_run_continues_it(anyio_backend):
    weather = Weather()
    middle = Rounds(ask("Lisbon"), ANSWER)
    branch = Branch(tools=[weather.get_weather])
    branch.gate(lambda call: Defer(reason="a person checks every lookup"))
    _, run = await branch.run_traced("Weather?", response_format=Answer, middle=middle)
    assert run.exit == "deferred" and run.states[-1] == "suspended"
    assert weather.calls == []
    (pending,) = branch.pending_calls()
    result, resumed = await branch.resume_run({pending.call_id: Approve(by="ops")})
    assert weather.calls == ["Lisbon"]
    assert resumed.trace.triggers == ["resumed", "next_round", "answered"]
    assert isinstance(result, Answer)
    assert branch.pending_calls() == []


# ------------------------------------------------------------------ a denial the model can read

async def test_a_gates_deny_reason_reaches_the_model_bounded_and_without_secrets(anyio_backend, monkeypatch):
    secret = "sk-live-0123456789abcdef"
    monkeypatch.setenv("WEATHER_API_KEY", secret)
    weather = Weather()
    reason = f"Porto is closed to this account (key {secret}) " + "x" * 500
    with OpenAIServer([
        completion(tool_calls=[tool_call("get_weather", {"city": "Porto"}, "p")]),
        completion("Porto is not available to you."),
    ]) as server:
        branch = Branch(tools=[weather.get_weather], chat_model=_model(server))
        branch.gate(lambda call: Deny(by="policy", reason=reason))
        result, run = await branch.run_traced("Porto?")
        second = server.chat_requests[1].body["messages"]
    assert result == "Porto is not available to you."
    assert weather.calls == []
    told = json.loads(second[2]["content"])
    assert told["error"] == "denied by governance gate"
    assert told["reason"].startswith("Porto is closed to this account")
    assert secret not in json.dumps(second) and secret not in run.to_json()
    assert len(told["reason"]) <= 200 + len("...") and told["reason"].endswith("...")
    assert run.actions[0].decision == "denied"


async def test_a_plain_false_keeps_the_plain_denial_payload(anyio_backend):
    weather = Weather()
    middle = Rounds(ask("Porto"), ANSWER)
    branch = Branch(tools=[weather.get_weather])
    branch.gate(lambda call: False)
    _, run = await branch.run_traced("Porto?", response_format=Answer, middle=middle)
    (record,) = run.actions
    assert record.output == {"error": "denied by governance gate", "function": "get_weather"}


# ------------------------------------------------------------------ the same engine, the same trace format

async def test_both_engines_take_the_same_path(anyio_backend):
    paths = []
    for engine in ("compiled", "transitions"):
        weather = Weather()
        branch = Branch(tools=[weather.get_weather], engine=engine)
        _, run = await branch.run_traced("x", response_format=Answer, middle=Rounds(ask("A"), ask("B"), ANSWER))
        assert run.trace.engine == engine and {r.engine for r in run.rounds} == {engine}
        paths.append((run.trace.path(), [r.path() for r in run.rounds]))
    assert paths[0] == paths[1]


def test_a_run_trace_that_does_not_add_up_is_refused():
    with pytest.raises(TraceFormatError):
        RunTrace.from_dict({"format": "lionops.run_trace/1", "exit": None, "run": {}, "rounds": []})
    with pytest.raises(TraceFormatError):
        RunTrace.from_json("[1]")
    with pytest.raises(TraceFormatError):
        RunTrace.from_json("{")


# ------------------------------------------------------------------ properties

_PLAN = st.lists(  # per round: the cities asked for (empty: the model answers)
    st.lists(st.sampled_from(["ok", "deny", "bad", "missing"]), min_size=0, max_size=3), min_size=1, max_size=6)


@settings(max_examples=40, deadline=None)
@given(plan=_PLAN, max_rounds=st.integers(min_value=1, max_value=5))
def test_property_no_tool_before_validation_and_every_decision_and_the_loop_ends(plan, max_rounds):
    import anyio

    weather = Weather()
    script = []
    for kinds in plan:
        reqs = []
        for k in kinds:
            args: dict[str, Any] = {"city": k} if k != "bad" else {"city": 7, "extra": 1}
            reqs.append({"function": "get_weather" if k != "missing" else "nope", "arguments": args})
        script.append({**ANSWER, "action_requests": reqs} if reqs else ANSWER)
    middle = Rounds(*script, forever=ANSWER)
    branch = Branch(tools=[weather.get_weather])
    branch.gate(lambda call: Deny(by="p", reason="no") if call.arguments["city"] == "deny" else True)

    async def go() -> RunTrace:
        try:
            return (await branch.run_traced("x", response_format=Answer, middle=middle, max_rounds=max_rounds)).trace
        except MaxRoundsError as exc:
            return exc.run_trace  # type: ignore[no-any-return]

    run = anyio.run(go)
    assert 1 <= len(run.rounds) <= max_rounds
    assert run.exit in {"answered", "max_rounds"}
    # a tool ran only for a request that validated and that every gate allowed, once per such record
    allowed = [a for a in run.actions if a.decision == "allowed"]
    assert weather.calls == [a.arguments["city"] for a in allowed]
    assert all(a.arguments["city"] == "ok" for a in allowed)
    assert all(not a.invoked for a in run.actions if a.decision != "allowed")
    usage = run.usage
    assert usage["requests"] == len(run.rounds)
    assert usage["tool_calls"] == sum(sum(1 for a in r.actions if a.invoked) for r in run.rounds) == len(allowed)
    assert (branch.usage.requests, branch.usage.tool_calls) == (usage["requests"], usage["tool_calls"])


# ------------------------------------------------------------------ OpenTelemetry

async def test_the_run_is_one_invoke_agent_span_with_one_span_per_round(anyio_backend, otel):
    weather = Weather()
    with OpenAIServer([
        completion(tool_calls=[tool_call("get_weather", {"city": "Lisbon"}, "c1")], prompt_tokens=10,
                   completion_tokens=3),
        completion(tool_calls=[tool_call("get_weather", {"city": "Porto"}, "c2")], prompt_tokens=20,
                   completion_tokens=4),
        completion("both 21", prompt_tokens=30, completion_tokens=5),
    ]) as server:
        branch = Branch(tools=[weather.get_weather], chat_model=_model(server), name="forecaster")
        await branch.run("Weather in Lisbon and Porto?")
    (run,) = otel.roots()
    assert run.name == "invoke_agent forecaster"
    assert run.parent is None
    a = run.attributes
    assert (a["gen_ai.operation.name"], a["gen_ai.agent.name"]) == ("invoke_agent", "forecaster")
    assert (a["gen_ai.provider.name"], a["gen_ai.request.model"]) == ("openai", "gpt-4o-mini")
    assert a["gen_ai.conversation.id"] == branch.id
    assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == (60, 12)
    assert (a["lionops.machine"], a["lionops.exit"], a["lionops.terminal"]) == ("run", "answered", "returned")
    assert list(a["lionops.states"]) == ["start", "round", "round", "round", "returned"]
    assert (a["lionops.rounds"], a["lionops.max_rounds"]) == (3, DEFAULT_MAX_ROUNDS)
    assert [e.name for e in run.events] == ["started", "next_round", "next_round", "answered"]
    rounds = otel.children(run)
    assert [r.name for r in rounds] == ["round 1", "round 2", "round 3"]
    for n, r in enumerate(rounds, 1):
        assert "gen_ai.operation.name" not in r.attributes  # the agent invocation is the run
        assert r.attributes["lionops.round"] == n
        assert r.attributes["lionops.machine"] == "operate"
        assert r.attributes["gen_ai.conversation.id"] == branch.id
    assert [r.attributes["lionops.exit"] for r in rounds] == ["enriched", "enriched", "no_requests"]
    # each round keeps its own children: its chat span, and its tool spans
    assert [[c.name.split(" ")[0] for c in otel.children(r)][:2] for r in rounds] == [
        ["chat", "execute_tool"], ["chat", "execute_tool"], ["chat"]]
    # the run counts once as an agent invocation
    (point,) = otel.metrics()["gen_ai.invoke_agent.duration"].data.data_points
    assert point.count == 1
    assert point.attributes["gen_ai.agent.name"] == "forecaster"


async def test_the_run_span_never_holds_the_key_even_with_content_capture(anyio_backend, otel_content):
    weather = Weather()
    with OpenAIServer([
        completion(tool_calls=[tool_call("get_weather", {"city": "sk-test-loop-0001"}, "c1")]),
        completion("the key is sk-test-loop-0001"),
    ]) as server:
        branch = Branch(tools=[weather.get_weather], chat_model=_model(server))
        assert await branch.run("x") == "the key is sk-test-loop-0001"
    (run,) = otel_content.roots()
    assert "lionops.result" in run.attributes
    assert "sk-test-loop-0001" not in otel_content.dump()


async def test_a_failing_run_span_records_the_error(anyio_backend, otel):
    weather = Weather()
    with pytest.raises(MaxRoundsError):
        await Branch(tools=[weather.get_weather]).run("x", response_format=Answer, middle=Rounds(forever=ask("A")),
                                                       max_rounds=2)
    (run,) = otel.roots()
    assert run.name == "invoke_agent lionops"
    assert not run.status.is_ok
    assert run.attributes["error.type"] == "lionops.errors.MaxRoundsError"
    assert run.attributes["lionops.exit"] == "max_rounds"
    assert [r.name for r in otel.children(run)] == ["round 1", "round 2"]


async def test_an_operation_a_tool_of_a_round_starts_is_its_own_agent_invocation(anyio_backend, otel):
    inner = Branch(name="helper")

    async def consult(city: str) -> str:
        """Ask the helper."""
        return str(await inner.operate(instruction=city, middle=Rounds(ANSWER), response_format=Answer))

    branch = Branch(tools=[consult], name="outer")
    await branch.run("x", response_format=Answer,
                     middle=Rounds({"city": "?", "summary": "?",
                                    "action_requests": [{"function": "consult", "arguments": {"city": "A"}}]},
                                   ANSWER))
    names = sorted(s.name for s in otel.roots())
    assert names == ["invoke_agent helper", "invoke_agent outer"]
    (helper,) = [s for s in otel.roots() if s.name == "invoke_agent helper"]
    (tool,) = otel.named("execute_tool")
    assert helper.parent is not None and helper.parent.span_id == tool.context.span_id


async def test_a_resumed_run_is_its_own_invoke_agent_span(anyio_backend, otel):
    weather = Weather()
    branch = Branch(tools=[weather.get_weather])
    branch.gate(lambda call: Defer(reason="ask a person"))
    middle = Rounds(ask("A"), ANSWER)
    ran = await branch.run_traced("x", response_format=Answer, middle=middle)
    assert ran.trace.exit == "deferred"
    (call,) = branch.pending_calls()
    await branch.resume_run({call.call_id: Approve(by="ops")})
    first, second = sorted(otel.roots(), key=lambda s: s.start_time or 0)
    assert first.attributes["lionops.exit"] == "deferred"
    assert second.attributes["lionops.exit"] == "answered"
    assert [e.name for e in second.events][:1] == ["resumed"]
    assert [r.name for r in otel.children(second)] == ["round 1", "round 2"]


# ------------------------------------------------------------------ record and replay

async def test_a_cassette_holds_the_whole_run_and_replays_it_without_the_network(anyio_backend, tmp_path):
    from lionops.replay import CassetteSession

    path = tmp_path / "run.json"
    script = [
        completion(tool_calls=[tool_call("get_weather", {"city": "Lisbon"}, "c1")]),
        completion(tool_calls=[tool_call("get_weather", {"city": "Porto"}, "c2")]),
        completion("both 21"),
    ]
    weather = Weather()
    with OpenAIServer(script) as server:
        branch = Branch(tools=[weather.get_weather], chat_model=_model(server))
        session = CassetteSession(path, "once")
        result, recorded = await session.run_traced(branch, "Weather?")
        base_url = server.base_url
    assert result == "both 21" and session.recorded == 3
    assert len(json.loads(path.read_text())["operations"]) == 3
    assert "sk-test-loop-0001" not in path.read_text()

    again = Weather()
    branch = Branch(tools=[again.get_weather], chat_model=iModel(provider="openai", model="gpt-4o-mini",
                                                                 base_url=base_url, api_key="sk-test-loop-0001"))
    session = CassetteSession(path, "none")
    result, replayed = await session.run_traced(branch, "Weather?")
    session.finish()
    assert result == "both 21" and session.replayed == 3
    assert replayed.trace.path() == recorded.trace.path()
    assert [r.path() for r in replayed.rounds] == [r.path() for r in recorded.rounds]
    assert again.calls == []  # the tools' recorded outputs are served


async def test_tools_selects_the_offered_tools_of_every_round(anyio_backend):
    weather = Weather()

    def get_time(city: str) -> str:
        """Local time of a city."""
        return "12:00"

    middle = Rounds({**ANSWER, "action_requests": [{"function": "get_time", "arguments": {"city": "L"}},
                                                   {"function": "get_weather", "arguments": {"city": "L"}}]},
                    ANSWER)
    branch = Branch(tools=[weather.get_weather, get_time])
    _, run = await branch.run_traced("x", response_format=Answer, middle=middle, tools=["get_weather"])
    assert [a.decision for a in run.actions] == ["not_offered", "allowed"]
    assert weather.calls == ["L"]


async def test_tools_false_runs_one_round_and_no_tool(anyio_backend):
    weather = Weather()
    branch = Branch(tools=[weather.get_weather])
    _, run = await branch.run_traced("x", response_format=Answer, middle=Rounds(ask("A")), tools=False)
    assert run.exit == "answered" and len(run.rounds) == 1 and run.rounds[0].exit == "no_action_param"
    assert weather.calls == []


async def test_resume_run_checks_every_decision_before_any_round(anyio_backend):
    from lionops import UnknownCallError

    weather = Weather()
    branch = Branch(tools=[weather.get_weather])
    branch.gate(lambda call: Defer(reason="later"))
    await branch.run("Weather?", response_format=Answer, middle=Rounds(ask("Lisbon"), ANSWER))
    (pending,) = branch.pending_calls()
    with pytest.raises(UnknownCallError):
        await branch.resume_run({pending.call_id: Approve(by="ops"), "nope": Approve(by="ops")})
    assert branch.pending_calls() == [pending] and weather.calls == []


async def test_actions_is_not_a_run_keyword(anyio_backend):
    with pytest.raises(ConfigurationError, match="tools="):
        await Branch().run("x", response_format=Answer, middle=Rounds(ANSWER), actions=True)


async def test_trace_show_prints_the_loop_then_each_round(anyio_backend, tmp_path):
    import subprocess
    import sys

    weather = Weather()
    _, run = await Branch(tools=[weather.get_weather]).run_traced(
        "x", response_format=Answer, middle=Rounds(ask("A"), ANSWER))
    path = tmp_path / "run.json"
    path.write_text(run.to_json())
    out = subprocess.run([sys.executable, "-m", "lionops", "trace", "show", str(path)],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    assert "start -> round -> round -> returned  (exit: answered" in out
    assert out.count("prepare -> schema -> adapter") == 2
