"""A cassette of a ``Branch.run()`` holds the whole run (every round one
operation, the run machine's own trace and outcome as one run), and replays
it: through a session, through ``replay(path)`` with the caller's branch or
rebuilt from the cassette alone. Resumed operations (``resume``,
``resume_run``) are recorded and replay after the operation they resume.
Edited cassettes are refused or diverge. The model is a real loopback HTTP
server, stopped before every replay."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lionops import Approve, Branch, Defer, Deny, MaxRoundsError, iModel
from lionops.replay import Cassette, CassetteError, CassetteSession, ReplayDivergence, replay
from lionops.run import Ran
from lionops.testing import OpenAIServer
from lionops.testing.openai_server import completion, tool_call
from tests.contract.test_run_loop import Weather

pytestmark = pytest.mark.anyio

KEY = "sk-test-replay-run-0001"


THREE_ROUNDS = [
    completion(tool_calls=[tool_call("get_weather", {"city": "Lisbon"}, "c1")]),
    completion(tool_calls=[tool_call("get_weather", {"city": "Porto"}, "c2")]),
    completion("both 21"),
]


def _model(base_url: str) -> iModel:
    return iModel(provider="openai", model="gpt-4o-mini", base_url=base_url, api_key=KEY)


async def _record_run(path: Path, script: list[Any] = THREE_ROUNDS) -> tuple[Ran, str]:
    weather = Weather()
    with OpenAIServer(list(script)) as server:
        branch = Branch(tools=[weather.get_weather], chat_model=_model(server.base_url))
        ran = await CassetteSession(path, "once").run_traced(branch, "Weather in Lisbon and Porto?")
        base_url = server.base_url
    return ran, base_url


async def test_the_cassette_holds_the_run_and_replay_without_a_branch_replays_the_whole_loop(anyio_backend,
                                                                                              tmp_path):
    path = tmp_path / "run.json"
    recorded, _ = await _record_run(path)
    data = json.loads(path.read_text())
    assert len(data["operations"]) == 3
    (run,) = data["runs"]
    assert (run["first"], run["rounds"], run["max_rounds"]) == (0, 3, 10)
    assert run["outcome"]["result"] == "both 21"
    assert KEY not in path.read_text()
    assert Cassette.load(path).run_at(0) is not None

    replayed = await replay(path)  # branch, stand-in tools and gate rebuilt from the cassette
    assert isinstance(replayed, Ran)
    assert replayed.result == "both 21"
    assert replayed.trace.states == ["start", "round", "round", "round", "returned"]
    assert replayed.trace.trace.path() == recorded.trace.trace.path()
    assert [r.path() for r in replayed.trace.rounds] == [r.path() for r in recorded.trace.rounds]
    # deterministic: a second replay takes the same path
    again = await replay(path)
    assert isinstance(again, Ran) and again.trace.trace.path() == replayed.trace.trace.path()


async def test_replay_with_the_callers_branch_runs_its_real_tools_only_when_asked(anyio_backend, tmp_path):
    path = tmp_path / "run.json"
    _, base_url = await _record_run(path)
    weather = Weather()
    branch = Branch(tools=[weather.get_weather], chat_model=_model(base_url))
    ran = await replay(path, branch, instruction="Weather in Lisbon and Porto?")
    assert isinstance(ran, Ran) and ran.result == "both 21" and weather.calls == []
    branch = Branch(tools=[weather.get_weather], chat_model=_model(base_url))
    ran = await replay(path, branch, instruction="Weather in Lisbon and Porto?", run_tools=True)
    assert isinstance(ran, Ran) and weather.calls == ["Lisbon", "Porto"]


async def test_a_replayed_run_that_leaves_the_recorded_run_diverges(anyio_backend, tmp_path):
    path = tmp_path / "run.json"
    _, base_url = await _record_run(path)
    weather = Weather()
    branch = Branch(tools=[weather.get_weather], chat_model=_model(base_url))
    with pytest.raises(ReplayDivergence) as caught:  # the recorded run took 3 rounds; this one may take 2
        await replay(path, branch, instruction="Weather in Lisbon and Porto?", max_rounds=2)
    assert caught.value.kind == "run"
    session = CassetteSession(path, "none")
    with pytest.raises(ReplayDivergence) as caught:
        await session.run_traced(Branch(tools=[weather.get_weather], chat_model=_model(base_url)),
                                 "Weather in Lisbon and Porto?", max_rounds=2)
    assert caught.value.kind == "run"
    with pytest.raises(ReplayDivergence) as caught:  # an operation where the recording has a run
        await CassetteSession(path, "none").operate(Branch(tools=[weather.get_weather],
                                                           chat_model=_model(base_url)),
                                                    instruction="Weather in Lisbon and Porto?", actions=True)
    assert caught.value.kind == "call"


def _edited(path: Path, change: Any) -> Path:
    data = json.loads(path.read_text())
    change(data)
    out = path.with_name("edited.json")
    out.write_text(json.dumps(data))
    return out


def _drop_a_round(d: dict[str, Any]) -> None:
    d["operations"].pop(1)


def _shorten(d: dict[str, Any]) -> None:
    d["runs"][0]["rounds"] = 2


def _answered_early(d: dict[str, Any]) -> None:
    tr = d["runs"][0]["trace"]["transitions"]
    tr[1]["trigger"], tr[1]["dest"] = "answered", "returned"
    del tr[2:]


def _past_the_end(d: dict[str, Any]) -> None:
    d["runs"][0]["first"] = 2


def _two_runs_share(d: dict[str, Any]) -> None:
    d["runs"].append(dict(d["runs"][0]))


def _not_a_run_trace(d: dict[str, Any]) -> None:
    d["runs"][0]["trace"] = d["operations"][0]["trace"]


@pytest.mark.parametrize("change", [_drop_a_round, _shorten, _answered_early, _past_the_end, _two_runs_share,
                                    _not_a_run_trace])
async def test_an_edited_run_is_refused_on_load(anyio_backend, tmp_path, change):
    path = tmp_path / "run.json"
    await _record_run(path)
    with pytest.raises(CassetteError):
        Cassette.load(_edited(path, change))
    with pytest.raises(CassetteError):
        await replay(_edited(path, change))


def _other_result(d: dict[str, Any]) -> None:
    d["runs"][0]["outcome"]["result"] = "both 22"


def _other_tool_output(d: dict[str, Any]) -> None:
    d["operations"][1]["tool_calls"][0]["output"] = {"city": "Porto", "temp_c": 35}


async def test_an_edited_outcome_or_tool_output_diverges_on_replay(anyio_backend, tmp_path):
    path = tmp_path / "run.json"
    await _record_run(path)
    with pytest.raises(ReplayDivergence) as caught:
        await replay(_edited(path, _other_result))
    assert caught.value.kind == "result"
    with pytest.raises(ReplayDivergence) as caught:  # the round that served it diverges, before round 3 runs
        await replay(_edited(path, _other_tool_output))
    assert caught.value.operation == 1


# ------------------------------------------------------------------ resumed operations


DEFERRING = [
    completion(tool_calls=[tool_call("get_weather", {"city": "Lisbon"}, "c1")]),
    completion("Lisbon 21"),
]


async def _deferring_run(session: CassetteSession, base_url: str, weather: Weather) -> tuple[Branch, Ran]:
    branch = Branch(tools=[weather.get_weather], chat_model=_model(base_url))
    branch.gate(lambda call: Defer(reason="a person approves weather"))
    ran = await session.run_traced(branch, "Weather in Lisbon?")
    return branch, ran


async def test_resume_run_is_recorded_and_replays_from_its_cassette(anyio_backend, tmp_path):
    path = tmp_path / "resumed.json"
    weather = Weather()
    with OpenAIServer(list(DEFERRING)) as server:
        session = CassetteSession(path, "once")
        branch, first = await _deferring_run(session, server.base_url, weather)
        assert first.trace.exit == "deferred"
        (call,) = branch.pending_calls()
        second = await session.resume_run(branch, {call.call_id: Approve(by="ops", reason="fine")})
        base_url = server.base_url
    assert second.result == "Lisbon 21" and weather.calls == ["Lisbon"]
    data = json.loads(path.read_text())
    assert [(r["first"], r["rounds"]) for r in data["runs"]] == [(0, 1), (1, 2)]
    (decision,) = data["operations"][1]["call"]["resume"]
    assert (decision["function"], decision["decision"], decision["by"]) == ("get_weather", "approved", "ops")

    again = Weather()
    session = CassetteSession(path, "none")
    branch, first = await _deferring_run(session, base_url, again)
    (call,) = branch.pending_calls()
    ran = await session.resume_run(branch, {call.call_id: Approve(by="ops", reason="fine")})
    session.finish()
    assert ran.result == "Lisbon 21" and again.calls == []
    assert ran.trace.states == ["start", "round", "round", "returned"]
    assert ran.trace.trace.transitions[0].trigger == "resumed"
    # another decision than the recorded one diverges before anything runs
    session = CassetteSession(path, "none")
    branch, _ = await _deferring_run(session, base_url, again)
    (call,) = branch.pending_calls()
    with pytest.raises(ReplayDivergence) as caught:
        await session.resume_run(branch, {call.call_id: Deny(by="ops", reason="no")})
    assert caught.value.kind == "call" and again.calls == []


async def test_a_deferred_round_replays_without_a_branch_deferred_again(anyio_backend, tmp_path):
    # the stand-in gate repeats the recorded Defer (the cassette's tool calls say "denied": it did not run),
    # for a deferred run and a deferred operation alike, mixed with allowed and denied calls of its round
    script = [completion(tool_calls=[tool_call("get_weather", {"city": "Lisbon"}, "c1"),
                                     tool_call("get_weather", {"city": "Porto"}, "c2"),
                                     tool_call("get_weather", {"city": "Atlantis"}, "c3")])]

    def gate(call: Any) -> bool | Defer:
        city = call.arguments["city"]
        return Defer(reason=f"{city} needs a person") if city == "Porto" else city != "Atlantis"

    for name in ("run", "operation"):
        path = tmp_path / f"deferred-{name}.json"
        weather = Weather()
        with OpenAIServer(list(script)) as server:
            branch = Branch(tools=[weather.get_weather], chat_model=_model(server.base_url))
            branch.gate(gate)
            session = CassetteSession(path, "once")
            kw: dict[str, Any] = {"instruction": "Weather?", "actions": True} if name == "operation" else {}
            await (session.run_traced(branch, "Weather?") if name == "run" else session.operate_traced(branch, **kw))
            session.finish()
        assert weather.calls == ["Lisbon"]
        replayed = await replay(path)
        trace = replayed.trace if name == "operation" else replayed.trace.rounds[0]
        assert [(a.decision, a.reason) for a in trace.actions] == [
            ("allowed", None), ("deferred", "Porto needs a person"), ("denied", trace.actions[2].reason)]
        assert trace.exit == "deferred" and weather.calls == ["Lisbon"]
        if name == "run":
            assert replayed.trace.states == ["start", "round", "suspended"]


async def test_branch_resume_is_recorded_as_one_operation_and_replays(anyio_backend, tmp_path):
    path = tmp_path / "resume.json"
    weather = Weather()
    kw: dict[str, Any] = {"instruction": "Weather in Lisbon?", "actions": True}
    with OpenAIServer(list(DEFERRING[:1])) as server:
        branch = Branch(tools=[weather.get_weather], chat_model=_model(server.base_url))
        branch.gate(lambda call: Defer(reason="ask"))
        session = CassetteSession(path, "once")
        await session.operate_traced(branch, **kw)
        (call,) = branch.pending_calls()
        recorded = await session.resume_traced(branch, {call.call_id: Approve(by="ops")})
        base_url = server.base_url
    assert weather.calls == ["Lisbon"]
    assert "resumed" in [t.trigger for t in recorded.trace.transitions]

    again = Weather()
    branch = Branch(tools=[again.get_weather], chat_model=_model(base_url))
    branch.gate(lambda call: Defer(reason="ask"))
    session = CassetteSession(path, "none")
    await session.operate_traced(branch, **kw)
    (call,) = branch.pending_calls()
    replayed = await session.resume_traced(branch, {call.call_id: Approve(by="ops")})
    session.finish()
    assert replayed.trace.path() == recorded.trace.path() and again.calls == []
    with pytest.raises(CassetteError, match="resumes a suspended operation"):
        await replay(path, operation=1)


async def test_a_run_that_raised_is_recorded_and_raises_again_on_replay(anyio_backend, tmp_path):
    path = tmp_path / "raised.json"
    weather = Weather()
    forever = [completion(tool_calls=[tool_call("get_weather", {"city": "A"}, f"c{i}")]) for i in range(2)]
    with OpenAIServer(forever) as server:
        branch = Branch(tools=[weather.get_weather], chat_model=_model(server.base_url))
        with pytest.raises(MaxRoundsError):
            await CassetteSession(path, "once").run(branch, "x", max_rounds=2)
    (run,) = json.loads(path.read_text())["runs"]
    assert run["outcome"]["error"]["type"] == "MaxRoundsError"
    with pytest.raises(MaxRoundsError):
        await replay(path)


async def test_the_replay_command_replays_a_recorded_run_as_one(anyio_backend, tmp_path, capsys):
    import anyio.to_thread

    from lionops.cli.commands import main

    path = tmp_path / "run.json"
    await _record_run(path)
    capsys.readouterr()
    assert await anyio.to_thread.run_sync(main, ["replay", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"run of operations 0..2 of {path}:" in out
    assert "start -> round -> round -> round -> returned  (exit: answered" in out
    assert "operation 1 of" not in out
    assert "same path, tool calls and result as recorded" in out
    # a round on its own still replays by its number
    assert await anyio.to_thread.run_sync(main, ["replay", str(path), "--operation", "1"]) == 0


async def test_a_cassette_without_runs_keeps_its_shape(anyio_backend, tmp_path):
    path = tmp_path / "one.json"
    with OpenAIServer([completion("hello")]) as server:
        await CassetteSession(path, "once").operate(Branch(chat_model=_model(server.base_url)), instruction="hi")
    assert "runs" not in json.loads(path.read_text())
