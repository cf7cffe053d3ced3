"""A run suspended at ``deferred`` is in ``branch.snapshot()``: another
process restores the branch and ``resume_run(decisions)`` continues the
loop, against a real loopback model server (each process its own event
loop, asyncio or trio). Objects are never read from the file: a restored
run's response model is given again and must have the run's schema."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from lionops import Approve, Branch, Defer, Deny, ResumeError, SnapshotError
from lionops.pipeline.loop import NEXT_ROUND_INSTRUCTION
from lionops.testing import OpenAIServer
from lionops.testing.openai_server import completion

ROOT = Path(__file__).resolve().parents[2]


class Answer(BaseModel):
    city: str
    summary: str


class Other(BaseModel):
    city: str


def get_weather(city: str) -> dict[str, Any]:
    """Weather for a city."""
    return {"city": city, "temp_c": 21}


def needs_a_person(call: Any) -> Any:
    return Defer(reason="weather needs a person")


SUSPEND = """
import json, sys, anyio
from lionops import Branch, iModel
from tests.contract.test_run_snapshot import Answer, get_weather, needs_a_person

async def main(path, base_url):
    model = iModel(provider="openai", model="gpt-4o-mini", base_url=base_url, api_key="sk-test-snap-0001")
    branch = Branch(chat_model=model, tools=[get_weather], name="desk")
    branch.gate(needs_a_person)
    ran = await branch.run_traced("Weather in Lisbon?", response_format=Answer, max_rounds=4)
    branch.snapshot(path)
    print(json.dumps({"exit": ran.trace.exit, "pending": [p.call_id for p in branch.pending_calls()]}))

anyio.run(main, sys.argv[1], sys.argv[2], backend=sys.argv[3])
"""

RESUME = """
import json, sys, anyio
from lionops import Approve, Branch, iModel
from tests.contract.test_run_snapshot import Answer, get_weather, needs_a_person

async def main(path, base_url, call_id):
    model = iModel(provider="openai", model="gpt-4o-mini", base_url=base_url, api_key="sk-test-snap-0001")
    branch = Branch.restore(path, chat_model=model, tools=[get_weather])
    branch.gate(needs_a_person)  # gates are code: registered again
    result, run = await branch.resume_run({call_id: Approve(by="ann", reason="fine")}, response_format=Answer)
    print(json.dumps({"result": result.model_dump(), "states": run.states, "exit": run.exit,
                      "rounds": [r.exit for r in run.rounds], "pending": len(branch.pending_calls())}))

anyio.run(main, sys.argv[1], sys.argv[2], sys.argv[3], backend=sys.argv[4])
"""


def _python(code: str, *args: str) -> Any:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


SCRIPT = [  # a caller model: the model asks for tools in the answer's action_requests
    completion(json.dumps({"city": "?", "summary": "checking",
                           "action_requests": [{"function": "get_weather", "arguments": {"city": "Lisbon"}}]})),
    completion(json.dumps({"city": "Lisbon", "summary": "21 degrees"})),
]


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_run_suspended_in_one_process_is_resumed_in_another(tmp_path, backend):
    path = str(tmp_path / "branch.json")
    with OpenAIServer(list(SCRIPT)) as server:
        first = _python(SUSPEND, path, server.base_url, backend)
        assert first["exit"] == "deferred" and len(first["pending"]) == 1
        (call_id,) = first["pending"]
        snapshot = json.loads(Path(path).read_text())
        (run,) = snapshot["runs"]
        assert run["calls"] == [call_id] and run["max_rounds"] == 4
        assert run["keywords"]["instruction"] == "Weather in Lisbon?"
        assert run["needs"] == {"response_format": Answer.model_json_schema()}
        assert "sk-test-snap-0001" not in Path(path).read_text()
        out = _python(RESUME, path, server.base_url, call_id, backend)
        bodies = [r.body["messages"] for r in server.chat_requests]
    assert {k: out["result"][k] for k in ("city", "summary")} == {"city": "Lisbon", "summary": "21 degrees"}
    assert out["states"] == ["start", "round", "round", "returned"]
    assert (out["exit"], out["rounds"], out["pending"]) == ("answered", ["enriched", "no_requests"], 0)
    # the second model request carries the approved call's result, then the next round's instruction
    assert len(bodies) == 2
    assert '"output": {"city": "Lisbon", "temp_c": 21}' in bodies[1][-2]["content"]
    assert NEXT_ROUND_INSTRUCTION in bodies[1][-1]["content"]


async def _suspended(tmp_path: Path, server: OpenAIServer) -> tuple[str, Any]:
    from lionops import iModel

    model = iModel(provider="openai", model="gpt-4o-mini", base_url=server.base_url, api_key="sk-test-snap-0001")
    branch = Branch(chat_model=model, tools=[get_weather])
    branch.gate(needs_a_person)
    await branch.run("Weather in Lisbon?", response_format=Answer)
    path = str(branch.snapshot(tmp_path / "branch.json"))
    return path, model


@pytest.mark.anyio
async def test_a_restored_run_needs_its_response_model_again_with_the_same_schema(anyio_backend, tmp_path):
    with OpenAIServer(list(SCRIPT)) as server:
        path, model = await _suspended(tmp_path, server)
        restored = Branch.restore(path, chat_model=model, tools=[get_weather])
        restored.gate(needs_a_person)
        (call,) = restored.pending_calls()
        with pytest.raises(ResumeError, match=r"\['response_format'\]"):
            await restored.resume_run({call.call_id: Approve(by="ann")})
        with pytest.raises(ResumeError, match="JSON schema differs"):
            await restored.resume_run({call.call_id: Approve(by="ann")}, response_format=Other)
        assert restored.pending_calls() == [call]  # nothing was decided
        result, run = await restored.resume_run({call.call_id: Deny(by="ann", reason="not today")},
                                                response_format=Answer)
    assert isinstance(result, Answer) and run.exit == "answered"


@pytest.mark.anyio
async def test_a_restored_run_without_a_model_is_refused_before_any_decision(anyio_backend, tmp_path):
    ran: list[str] = []

    def get_weather(city: str) -> dict[str, Any]:  # the module's tool, counting its calls
        """Weather for a city."""
        ran.append(city)
        return {"city": city, "temp_c": 21}

    with OpenAIServer(list(SCRIPT)) as server:
        from lionops import iModel

        model = iModel(provider="openai", model="gpt-4o-mini", base_url=server.base_url, api_key="sk-test-snap-0001")
        branch = Branch(chat_model=model, tools=[get_weather])
        branch.gate(needs_a_person)
        await branch.run("Weather in Lisbon?", response_format=Answer)
        path = branch.snapshot(tmp_path / "branch.json")
        restored = Branch.restore(path, tools=[get_weather])  # chat_model forgotten
        restored.gate(needs_a_person)
        (call,) = restored.pending_calls()
        with pytest.raises(ResumeError, match=r"no chat_model: give it to Branch\.restore\(path, chat_model="):
            await restored.resume_run({call.call_id: Approve(by="ann")}, response_format=Answer)
        assert restored.pending_calls() == [call] and ran == []  # nothing was decided, nothing ran
        result, run = await restored.resume_run({call.call_id: Approve(by="ann")}, response_format=Answer,
                                                chat_model=model)  # a model given here serves as well
    assert isinstance(result, Answer) and run.exit == "answered" and ran == ["Lisbon"]


@pytest.mark.parametrize("bad", [{"calls": 3, "max_rounds": 2, "keywords": {}},
                                 {"calls": ["c1"], "max_rounds": "2", "keywords": {}},
                                 {"calls": ["c1"], "max_rounds": 2}])
def test_a_malformed_suspended_run_in_a_snapshot_is_refused(tmp_path, bad):
    path = Branch().snapshot(tmp_path / "b.json")
    doc = json.loads(path.read_text())
    doc["runs"] = [bad]
    path.write_text(json.dumps(doc))
    with pytest.raises(SnapshotError):
        Branch.restore(path)


@pytest.mark.anyio
async def test_a_restored_run_refuses_to_continue_before_its_gates_are_registered_again(anyio_backend, tmp_path):
    """Gates are code, so the snapshot holds their names: the rounds after a
    resume ask the model again, and their calls must pass the same gates.
    Until a gate of each name is registered, resume_run decides nothing."""
    ran: list[str] = []

    def get_weather(city: str) -> dict[str, Any]:  # the module's tool, counting its calls
        """Weather for a city."""
        ran.append(city)
        return {"city": city, "temp_c": 21}

    with OpenAIServer(list(SCRIPT)) as server:
        path, model = await _suspended(tmp_path, server)
        restored = Branch.restore(path, chat_model=model, tools=[get_weather])
        (call,) = restored.pending_calls()
        with pytest.raises(ResumeError, match=r"gates \['needs_a_person'\].*branch\.gate\(check\)"):
            await restored.resume_run({call.call_id: Approve(by="ann")}, response_format=Answer)
        assert restored.pending_calls() == [call] and ran == []  # nothing decided, nothing ran
        restored.gate(needs_a_person)
        result, run = await restored.resume_run({call.call_id: Approve(by="ann")}, response_format=Answer)
    assert isinstance(result, Answer) and run.exit == "answered" and ran == ["Lisbon"]


def test_limits_come_back_from_the_snapshot_unless_given(tmp_path):
    from lionops import UsageLimits

    path = Branch(limits=UsageLimits(requests=2, cost=1.5)).snapshot(tmp_path / "b.json")
    assert Branch.restore(path).limits == UsageLimits(requests=2, cost=1.5)
    assert Branch.restore(path, limits=None).limits is None
    assert Branch.restore(path, limits=UsageLimits(requests=9)).limits == UsageLimits(requests=9)


KEY = "snapshot-signing-key-0123456789"


@pytest.mark.parametrize("edit", ["name", "usage", "gates", "signature", "unsigned"])
def test_a_signed_snapshot_refuses_any_change_and_never_shows_its_key(tmp_path, edit):
    """snapshot(path, key=) signs the document; restore(path, key=) refuses a
    file changed after it was written (a pending call's arguments with their
    digest recomputed included), a missing signature, and another key."""
    branch = Branch(name="desk")
    branch.gate(needs_a_person)
    path = branch.snapshot(tmp_path / "b.json", key=KEY)
    assert Branch.restore(path, key=KEY).name == "desk"
    doc = json.loads(path.read_text())
    if edit == "name":
        doc["name"] = "forged"
    elif edit == "usage":
        doc["usage"]["requests"] = 7
    elif edit == "gates":
        doc["gates"] = []
    elif edit == "signature":
        doc["signature"]["value"] = "0" * 64
    else:
        del doc["signature"]
    path.write_text(json.dumps(doc))
    with pytest.raises(SnapshotError) as caught:
        Branch.restore(path, key=KEY)
    assert KEY not in str(caught.value)
    with pytest.raises(SnapshotError):
        Branch.restore(path, key="another-key")


def test_a_signed_snapshot_needs_its_key(tmp_path):
    path = Branch().snapshot(tmp_path / "b.json", key=b"k" * 32)
    with pytest.raises(SnapshotError, match="is signed: give Branch.restore"):
        Branch.restore(path)
