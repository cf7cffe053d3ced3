"""Record through the real loopback HTTP adapter, replay offline.

The server is a real HTTP peer (tests/openai_server.py); it is stopped
before every replay, so a replay that touched the network would fail.
"""

from __future__ import annotations

import json

import pytest

from lionops import Branch, MismatchError
from lionops.replay import Cassette, CassetteError, ReplayDivergence, record, replay
from lionops.testing import OpenAIServer, Reply, chunked, completion, error_body, tool_call
from tests.helpers import ToolBox
from tests.openai_server import make_model
from tests.peers.test_api_operate import Forecast

pytestmark = pytest.mark.anyio

KW = dict(instruction="Weather in Lisbon? Tell Ana.", response_format=Forecast, actions=True, temperature=0.1)
ANSWER = completion(
    json.dumps({"city": "Lisbon", "temp_c": 21}),
    tool_calls=[tool_call("get_weather", {"city": "Lisbon"}, "call_1"),
                tool_call("send_message", {"to": "ana", "body": "21 C"}, "call_2")],
)


#: The path of a call whose tools ran (ADR-0022 D1-D4), written out by hand.
WITH_ACTIONS = ["prepare", "schema", "adapter", "validate", "gate", "act", "enrich", "returned"]


def make_branch(model, box: ToolBox, *, deny: str = "send_message") -> Branch:
    branch = Branch(chat_model=model, system="Be brief.", tools=box.tools())
    branch.gate(lambda inv: inv.function != deny)
    return branch


async def record_run(path, *replies, kw=KW, model_kw=None, **record_kw):
    """Record one run against a loopback server; returns (traced, box, model).
    The server is stopped on return."""
    box = ToolBox()
    with OpenAIServer(list(replies)) as server:
        model = make_model(server, **(model_kw or {}))
        traced = await record(path, make_branch(model, box), **record_kw, **kw)
        await model.aclose()
    return traced, box, model


def edit(path, change) -> None:
    data = json.loads(path.read_text())
    change(data["operations"][0])
    path.write_text(json.dumps(data))


async def test_replay_offline_gives_the_same_result_and_trace(tmp_path):
    path = tmp_path / "run.json"
    recorded, box, model = await record_run(path, ANSWER)
    assert box.calls == {"get_weather": 1} and recorded.trace.exit == "enriched"

    replay_box = ToolBox()
    replayed = await replay(path, make_branch(model, replay_box), **KW)  # server stopped: no network
    assert replayed.trace.path() == recorded.trace.path()
    assert replayed.trace.states == WITH_ACTIONS and replayed.trace.exit == "enriched"
    assert (replayed.result.city, replayed.result.temp_c) == ("Lisbon", 21)
    assert [r.record.decision for r in replayed.result.action_responses] == ["allowed", "denied"]
    assert [t.guards for t in replayed.trace.transitions] == [t.guards for t in recorded.trace.transitions]
    assert replayed.result.model_dump() == recorded.result.model_dump()
    assert replay_box.total == 0  # recorded outputs served: no side effects
    assert [r.output for r in replayed.result.action_responses][0] == {"city": "Lisbon", "temp_c": 20}


async def test_tools_run_for_real_when_asked(tmp_path):
    path = tmp_path / "run.json"
    _, _, model = await record_run(path, ANSWER)
    box = ToolBox()
    traced = await replay(path, make_branch(model, box), run_tools=True, **KW)
    assert box.calls == {"get_weather": 1} and traced.trace.exit == "enriched"


async def test_changed_model_output_diverges_at_validate(tmp_path):
    path = tmp_path / "run.json"
    _, _, model = await record_run(path, ANSWER)

    def drop_temperature(op):
        op["exchanges"][0]["response"]["body"]["choices"][0]["message"]["content"] = '{"city": "Lisbon"}'

    edit(path, drop_temperature)
    with pytest.raises(ReplayDivergence) as info:
        await replay(path, make_branch(model, ToolBox()), **KW)
    err = info.value
    assert (err.kind, err.index) == ("transition", 3)
    assert err.expected == "validate --validated--> gate"
    assert err.actual == "validate --mismatch_return_value--> returned"
    assert "transition 3" in str(err) and err.trace.exit == "mismatch_return_value"


async def test_secrets_never_reach_the_cassette(tmp_path, monkeypatch):
    key, header, option, field, custom, env = (
        "sk-planted-key-0123456789", "hdr-secret-value-77", "sk-option-secret-abcdef",
        "field-secret-value-42", "tok_918273", "env-secret-value-5150",
    )
    monkeypatch.setenv("BILLING_SERVICE_TOKEN", env)
    path = tmp_path / "run.json"
    kw = {**KW, "user": option, "metadata": {"api_key": field, "note": f"ref {custom}", "env": env}}
    model_kw = {"api_key": key, "headers": {"X-Api-Key": header}}
    traced, _, model = await record_run(path, ANSWER, kw=kw, model_kw=model_kw, patterns=[r"tok_\d{6}"])
    data = path.read_bytes()
    for secret in (key, header, option, field, custom, env):
        assert secret.encode() not in data
    request = Cassette.load(path).operations[0].exchanges[0].request
    assert request.headers["authorization"] == "Bearer ***" and request.headers["x-api-key"] == "***"
    # the same redaction normalizes the live request, so the replay still matches
    replayed = await replay(path, make_branch(model, ToolBox()), **kw)
    assert replayed.trace.path() == traced.trace.path()


async def test_a_request_the_recording_lacks_diverges(tmp_path):
    path = tmp_path / "run.json"
    _, _, model = await record_run(path, ANSWER)
    branch = Branch(chat_model=model, system="Be verbose.", tools=ToolBox().tools())  # another system prompt
    with pytest.raises(ReplayDivergence) as info:
        await replay(path, branch, **KW)
    err = info.value
    assert err.kind == "exchange" and err.index == 0
    assert "request.body.messages[0].content" in str(err) and "Be brief." in str(err)
    assert err.trace.transitions[2].trigger == "failed"


async def test_unused_recorded_exchanges_diverge(tmp_path):
    path = tmp_path / "run.json"
    _, _, model = await record_run(path, ANSWER)
    edit(path, lambda op: op["exchanges"].append(op["exchanges"][0]))
    with pytest.raises(ReplayDivergence) as info:
        await replay(path, make_branch(model, ToolBox()), **KW)
    assert info.value.kind == "unused_exchange" and info.value.index == 1


async def test_a_changed_gate_diverges_at_the_tool_call(tmp_path):
    path = tmp_path / "run.json"
    _, _, model = await record_run(path, ANSWER)
    with pytest.raises(ReplayDivergence) as info:
        await replay(path, make_branch(model, ToolBox(), deny="get_weather"), **KW)
    err = info.value
    assert (err.kind, err.index) == ("tool_call", 0)
    assert err.expected.endswith("allowed") and err.actual.endswith("denied")


async def test_a_changed_call_diverges_before_running(tmp_path):
    path = tmp_path / "run.json"
    _, _, model = await record_run(path, ANSWER)
    box = ToolBox()
    with pytest.raises(ReplayDivergence, match=r"call\.options\.temperature: expected 0\.1, actual 0\.7") as info:
        await replay(path, make_branch(model, box), **{**KW, "temperature": 0.7})
    assert info.value.kind == "call" and info.value.trace is None


async def test_a_recorded_failure_replays_as_the_same_failure(tmp_path):
    path = tmp_path / "run.json"
    kw = {**KW, "handle_validation": "raise"}
    with pytest.raises(MismatchError):
        await record_run(path, completion('{"city": "Lisbon"}'), kw=kw)
    op = Cassette.load(path).operations[0]
    assert op.outcome.error.type == "MismatchError" and op.trace_obj().exit == "mismatch_raise"
    with OpenAIServer() as server:
        model = make_model(server)
    with pytest.raises(MismatchError):  # the server is stopped: served from the cassette
        await replay(path, make_branch(model, ToolBox()), **kw)


async def test_retries_and_streams_replay_without_waiting(tmp_path):
    path = tmp_path / "run.json"
    busy = Reply(error_body("busy", "rate_limit_error"), status=429, headers={"Retry-After": "0"})
    streamed = Reply(stream=chunked(ANSWER))
    recorded, _, model = await record_run(path, busy, streamed, model_kw={"stream": True})
    op = Cassette.load(path).operations[0]
    assert [e.response.status for e in op.exchanges] == [429, 200]
    assert op.exchanges[1].response.text.startswith("data: ")
    replayed = await replay(path, make_branch(model, ToolBox()), **KW)
    assert replayed.trace.meta["http_attempts"] == 2
    assert replayed.result.model_dump() == recorded.result.model_dump()
    assert (replayed.result.city, replayed.result.temp_c) == ("Lisbon", 21)


async def test_replay_rebuilds_the_call_from_the_cassette_alone(tmp_path):
    path = tmp_path / "run.json"
    recorded, _, _ = await record_run(path, ANSWER)
    replayed = await replay(path)
    assert replayed.trace.path() == recorded.trace.path()
    assert replayed.result.model_dump() == recorded.result.model_dump()
    assert replayed.trace.states == WITH_ACTIONS
    assert replayed.result.model_dump()["city"] == "Lisbon" and replayed.result.model_dump()["temp_c"] == 21


def test_cassettes_are_validated_json(tmp_path):
    good = Cassette().model_dump(mode="json")
    for bad, needle in (
        ({**good, "version": 2}, "version 2 is not supported"),
        ({**good, "extra": 1}, "extra"),
        ({**good, "operations": [{"call": {}, "trace": {"format": 9}}]}, "unsupported trace format"),
    ):
        with pytest.raises(CassetteError, match=needle):
            Cassette.loads(json.dumps(bad))
    with pytest.raises(CassetteError, match="not JSON"):
        Cassette.loads("!!python/object:os.system")
