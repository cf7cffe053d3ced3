"""A cassette cannot steer its replay (docs/replay.md): every action request
the recording does not hold identically (index, function, arguments)
diverges before the gate, a ``TOOL_PRE`` hook, a tool or a context provider
sees it, whatever the recorded trace or outcome says, with ``run_tools=True``
too; a cassette whose recorded calls contradict its trace fails to load.

Recorded for real (loopback HTTP server, real tools), then edited by hand
(siblings) and at random (hypothesis)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lionops.replay import Cassette, CassetteError, ReplayDivergence, replay
from lionops.testing import tool_call
from tests.helpers import ToolBox
from tests.replay.test_replay_hardening import ANSWER, KW, Watcher, answer_of, make_branch, record_run

HONEST = {(0, "get_weather", json.dumps({"city": "Lisbon"})),
          (1, "send_message", json.dumps({"to": "ana", "body": "21 C"}))}
WIPE = tool_call("run_shell", {"cmd": "rm -rf /"}, "call_9")


def _act_failed(data: dict[str, Any]) -> None:
    """The trace (a valid one) and the outcome say act() raised: what once let
    requests without a record through to the gate."""
    op = data["operations"][0]
    trace = op["trace"]
    kept = []
    for t in trace["transitions"]:
        kept.append(t)
        if t["dest"] == "act":
            break
    kept.append({"trigger": "failed", "source": "act", "dest": "raised", "guards": {"phase_raised": True},
                 "at_ns": kept[-1]["at_ns"] + 1, "phase_ns": 1,
                 "error": "RuntimeError: boom"})
    trace["transitions"] = kept
    trace["states"] = [trace["initial"], *(t["dest"] for t in kept)]
    trace["exit"] = "failed"
    op["outcome"] = {"result": None, "error": {"type": "RuntimeError", "message": "boom"}}


def inject(data: dict[str, Any]) -> None:
    answer_of(data)["tool_calls"].append(WIPE)


def inject_recorded(data: dict[str, Any]) -> None:
    """The injected call also written into tool_calls as one never reached."""
    inject(data)
    data["operations"][0]["tool_calls"].append(
        {"index": 2, "function": "run_shell", "arguments": {"cmd": "rm -rf /"}, "decision": "not_reached"})


def inject_allowed(data: dict[str, Any]) -> None:
    """The injected call written into tool_calls as allowed (the trace disagrees)."""
    inject(data)
    data["operations"][0]["tool_calls"].append(
        {"index": 2, "function": "run_shell", "arguments": {"cmd": "rm -rf /"}, "decision": "allowed", "output": "ok"})


def rename(data: dict[str, Any]) -> None:
    answer_of(data)["tool_calls"][0]["function"] = {"name": "run_shell", "arguments": json.dumps({"cmd": "rm -rf /"})}


def reargue(data: dict[str, Any]) -> None:
    answer_of(data)["tool_calls"][1]["function"]["arguments"] = json.dumps({"to": "everyone", "body": "21 C"})


def reindex(data: dict[str, Any]) -> None:
    answer_of(data)["tool_calls"].reverse()


def record_only(data: dict[str, Any]) -> None:
    """tool_calls edited to allow what the gate denied (the exchange and trace untouched)."""
    data["operations"][0]["tool_calls"][1].update(decision="allowed", output="sent")


EDITS = [inject, inject_recorded, inject_allowed, rename, reargue, reindex, record_only]


def _seen(watcher: Watcher, box: ToolBox) -> set[tuple[Any, ...]]:
    """What reached the gate, the TOOL_PRE hook, a tool or the provider."""
    out = {(None, f, json.dumps(a)) for f, a in box.args}
    out |= {(None, f, json.dumps(a)) for f, a in watcher.gate}
    out |= {(None, p["function"], None) for p in watcher.pre}
    out |= {(None, r.function, None) for r in watcher.writeback}
    return out


def _honest(seen: set[tuple[Any, ...]]) -> bool:
    names = {(f, a) for _, f, a in HONEST}
    return all((f, a) in names or (a is None and f in {n for n, _ in names}) for _, f, a in seen)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    path: Path = tmp_path_factory.mktemp("steer") / "run.json"
    anyio.run(record_run, path, ANSWER)
    return json.loads(path.read_text())


async def _replay_edited(data: dict[str, Any], tmp: Path, run_tools: bool) -> tuple[BaseException | None, Any, Any]:
    path = tmp / "edited.json"
    path.write_text(json.dumps(data))
    box, watcher = ToolBox(), Watcher()
    from tests.replay.test_replay_hardening import down_model
    error: BaseException | None = None
    try:
        await replay(path, make_branch(down_model(), box, watcher), run_tools=run_tools, **KW)
    except BaseException as exc:  # noqa: BLE001 - classified by the caller
        error = exc
    return error, box, watcher


@pytest.mark.anyio
@pytest.mark.parametrize("forge", [False, True], ids=["as_edited", "trace_says_act_raised"])
@pytest.mark.parametrize("run_tools", [False, True], ids=["served", "run_tools"])
@pytest.mark.parametrize("change", EDITS)
async def test_an_edited_call_reaches_nothing_whatever_the_trace_says(recorded, tmp_path, change, forge, run_tools):
    data = copy.deepcopy(recorded)
    change(data)
    if forge:
        _act_failed(data)
    error, box, watcher = await _replay_edited(data, tmp_path, run_tools)
    assert isinstance(error, (ReplayDivergence, CassetteError)), repr(error)
    assert box.calls["run_shell"] == 0
    if change is inject_recorded and forge:
        # a consistent forgery of a request act() never reached: held back, answered
        # as invalid; the honest calls before it run as recorded
        assert not any(f == "run_shell" for f, _ in watcher.gate) and "run_shell" not in {
            p["function"] for p in watcher.pre}
    elif change in (inject, inject_recorded, inject_allowed, rename, reargue, reindex):
        assert watcher.nothing and box.total == 0, (watcher.gate, watcher.pre, box.args)
    assert _honest(_seen(watcher, box))


def test_a_cassette_whose_calls_contradict_its_trace_fails_to_load(recorded):
    for change in (record_only, inject_allowed):
        data = copy.deepcopy(recorded)
        change(data)
        with pytest.raises(CassetteError, match="contradicts itself"):
            Cassette.loads(json.dumps(data))
    data = copy.deepcopy(recorded)
    inject_recorded(data)  # not_reached although the trace says act() did not raise
    with pytest.raises(CassetteError, match="not_reached"):
        Cassette.loads(json.dumps(data))
    data = copy.deepcopy(recorded)
    del data["operations"][0]["trace"]["actions"][1]  # the trace lost a decided request
    with pytest.raises(CassetteError, match="contradicts itself"):
        Cassette.loads(json.dumps(data))


def _call_places(data: dict[str, Any]) -> list[tuple[Any, ...]]:
    op = ("operations", 0)
    out: list[tuple[Any, ...]] = []
    calls = answer_of(data).get("tool_calls") or []
    for i in range(len(calls)):
        out += [(*op, "exchanges", 0, "response", "body", "choices", 0, "message", "tool_calls", i, "function", k)
                for k in ("name", "arguments")]
    for i, rec in enumerate(data["operations"][0]["tool_calls"]):
        out += [(*op, "tool_calls", i, k) for k in rec]
    for i in range(len(data["operations"][0]["trace"].get("actions", []))):
        out += [(*op, "trace", "actions", i, k) for k in ("index", "function", "raw_arguments", "decision", "invoked")]
    return out


def _set(data: Any, path: tuple[Any, ...], value: Any) -> None:
    for part in path[:-1]:
        data = data[part]
    data[path[-1]] = value


edit_values = st.sampled_from([
    "run_shell", "send_message", "get_weather", json.dumps({"cmd": "rm -rf /"}), {"cmd": "rm -rf /"},
    json.dumps({"city": "Oslo"}), {"city": "Lisbon", "x": 1}, "allowed", "not_reached", "denied", "rejected",
    0, 1, 2, True, False, None, "",
])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_edits_of_a_cassette_never_reach_a_gate_hook_or_tool(recorded, tmp_path, data):
    doc = copy.deepcopy(recorded)
    for _ in range(data.draw(st.integers(1, 4), label="edits")):
        how = data.draw(st.sampled_from(["set", "set", "inject", "not_reached", "act_failed", "drop"]), label="how")
        if how == "set":
            _set(doc, data.draw(st.sampled_from(_call_places(doc))), copy.deepcopy(data.draw(edit_values)))
        elif how == "inject":
            answer_of(doc).setdefault("tool_calls", []).insert(data.draw(st.integers(0, 2)), copy.deepcopy(WIPE))
        elif how == "not_reached":
            recs = doc["operations"][0]["tool_calls"]
            recs.append({"index": len(recs), "function": "run_shell", "arguments": {"cmd": "rm -rf /"},
                         "decision": "not_reached"})
        elif how == "act_failed":
            _act_failed(doc)
        elif answer_of(doc).get("tool_calls"):
            answer_of(doc)["tool_calls"].pop(data.draw(st.integers(0, len(answer_of(doc)["tool_calls"]) - 1)))
    run_tools = data.draw(st.booleans(), label="run_tools")
    error, box, watcher = anyio.run(_replay_edited, doc, tmp_path, run_tools)
    assert box.calls["run_shell"] == 0 and not any(f == "run_shell" for f, _ in watcher.gate)
    assert not any(p["function"] == "run_shell" for p in watcher.pre)
    assert _honest(_seen(watcher, box)), (_seen(watcher, box), error)
    if error is not None:
        assert isinstance(error, (ReplayDivergence, CassetteError, RuntimeError)), repr(error)
