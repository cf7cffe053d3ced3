"""Replay that its cassette cannot steer: bounded redaction patterns, every
malformed cassette a ``CassetteError``, injected calls stopped before any
observer sees them, failed recordings never kept, garbage traces refused.

Recordings are made against the real loopback HTTP server
(tests/openai_server.py), which is stopped before every replay.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from lionops import Branch, EndpointConnectionError, EndpointStatusError, EndpointTimeoutError, HookPoint, iModel
from lionops._redact import MAX_PATTERNS, pattern_problem
from lionops.cli.commands import main as cli
from lionops.errors import TraceFormatError
from lionops.replay import Cassette, CassetteError, CassetteSession, ReplayDivergence, record, replay
from lionops.testing import OpenAIServer, Reply, completion, error_body, tool_call
from lionops.trace import Trace
from tests.cli_support import fake_model
from tests.helpers import Answer, ToolBox
from tests.openai_server import make_model
from tests.peers.test_api_operate import Forecast

KW = dict(instruction="Weather in Lisbon? Tell Ana.", response_format=Forecast, actions=True, temperature=0.1)
ANSWER = completion(
    json.dumps({"city": "Lisbon", "temp_c": 21}),
    tool_calls=[tool_call("get_weather", {"city": "Lisbon"}, "call_1"),
                tool_call("send_message", {"to": "ana", "body": "21 C"}, "call_2")],
)
PLAIN = dict(instruction="Weather in Lisbon?", response_format=Forecast)
PLAIN_ANSWER = completion(json.dumps({"city": "Lisbon", "temp_c": 21}))


class Watcher:
    """A gate, a TOOL_PRE hook and a context provider that keep what they saw."""

    def __init__(self) -> None:
        self.gate: list[tuple[str, dict[str, Any]]] = []
        self.pre: list[dict[str, Any]] = []
        self.writeback: list[Any] = []

    def attach(self, branch: Branch) -> Branch:
        def gate(inv: Any) -> bool:
            self.gate.append((inv.function, dict(inv.arguments)))
            return inv.function != "send_message"

        async def pre(payload: dict[str, Any]) -> None:
            self.pre.append(payload)

        watcher = self

        class Provider:
            def writeback(self, response: Any) -> None:
                watcher.writeback.append(response)

        branch.gate(gate)
        branch.on(HookPoint.TOOL_PRE, pre)
        branch.add_context_provider(Provider())
        return branch

    @property
    def nothing(self) -> bool:
        return not (self.gate or self.pre or self.writeback)


def down_model() -> Any:
    """A model whose server is stopped: its port refuses connections."""
    with OpenAIServer() as down:
        return make_model(down, max_retries=0)


def make_branch(model: Any, box: ToolBox, watcher: Watcher | None = None) -> Branch:
    branch = Branch(chat_model=model, system="Be brief.", tools=box.tools())
    if watcher is not None:
        return watcher.attach(branch)
    branch.gate(lambda inv: inv.function != "send_message")
    return branch


async def record_run(path: Path, *replies: Any, kw: dict[str, Any] = KW, **record_kw: Any) -> Any:
    """Record one run against a loopback server (stopped on return); returns the model."""
    with OpenAIServer(list(replies)) as server:
        model = make_model(server)
        await record(path, make_branch(model, ToolBox()), **record_kw, **kw)
        await model.aclose()
    return model


def edit(path: Path, change: Any) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def answer_of(data: dict[str, Any]) -> dict[str, Any]:
    """The recorded model message of the first operation."""
    return data["operations"][0]["exchanges"][0]["response"]["body"]["choices"][0]["message"]


def run_lionops(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m lionops ...`` as a real process (a generous bound: a hang fails, never blocks CI)."""
    return subprocess.run([sys.executable, "-m", "lionops", *args], capture_output=True, text=True, timeout=120)


def assert_one_line_error(proc: subprocess.CompletedProcess[str], status: int, needle: str = "") -> None:
    assert proc.returncode == status, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert needle in lines[0], lines[0]


# ============================================================ injected calls (before any observer)

def inject_call(data: dict[str, Any]) -> None:
    answer_of(data)["tool_calls"].append(tool_call("run_shell", {"cmd": "rm -rf /"}, "call_9"))


def change_arguments(data: dict[str, Any]) -> None:
    answer_of(data)["tool_calls"][0]["function"]["arguments"] = json.dumps({"city": "Lisbon; rm -rf /"})


def rename_call(data: dict[str, Any]) -> None:
    answer_of(data)["tool_calls"][1]["function"]["name"] = "run_shell"
    answer_of(data)["tool_calls"][1]["function"]["arguments"] = json.dumps({"cmd": "rm -rf /"})


def drop_call(data: dict[str, Any]) -> None:
    answer_of(data)["tool_calls"].pop()


@pytest.mark.anyio
@pytest.mark.parametrize("change", [inject_call, change_arguments, rename_call, drop_call])
async def test_an_edited_call_diverges_before_the_gate_hooks_or_writeback_see_it(tmp_path, change):
    path = tmp_path / "run.json"
    model = await record_run(path, ANSWER)
    edit(path, change)
    box, watcher = ToolBox(), Watcher()
    with pytest.raises(ReplayDivergence) as info:
        await replay(path, make_branch(model, box, watcher), **KW)
    err = info.value
    assert err.kind == "tool_call" and "nothing was dispatched" in str(err)
    assert watcher.nothing, (watcher.gate, watcher.pre, watcher.writeback)  # saw nothing, not even the honest calls
    assert box.total == 0
    assert err.trace.path()[-1] == ("act", "failed", "raised")


@pytest.mark.anyio
async def test_an_injected_call_is_named_and_run_tools_does_not_change_that(tmp_path):
    path = tmp_path / "run.json"
    model = await record_run(path, ANSWER)
    edit(path, inject_call)
    box, watcher = ToolBox(), Watcher()
    with pytest.raises(ReplayDivergence) as info:
        await replay(path, make_branch(model, box, watcher), run_tools=True, **KW)
    assert (info.value.kind, info.value.index, info.value.expected) == ("tool_call", 2, None)
    assert "#2 run_shell" in info.value.actual and "rm -rf /" in info.value.actual
    assert watcher.nothing and box.total == 0


@pytest.mark.anyio
async def test_an_injected_call_through_a_session_and_the_honest_replay_still_passes(tmp_path):
    path = tmp_path / "run.json"
    model = await record_run(path, ANSWER)
    honest = Watcher()
    await CassetteSession(path, "none").operate_traced(make_branch(model, ToolBox(), honest), **KW)
    assert sorted(f for f, _ in honest.gate) == ["get_weather", "send_message"] and len(honest.writeback) == 2
    edit(path, inject_call)
    watcher = Watcher()
    with pytest.raises(ReplayDivergence, match="run_shell"):
        await CassetteSession(path, "none").operate_traced(make_branch(model, ToolBox(), watcher), **KW)
    assert watcher.nothing


@pytest.mark.anyio
async def test_an_injected_call_in_a_cli_agent_recording_reaches_no_observer(tmp_path):
    path = tmp_path / "run.json"
    kw = dict(instruction="Weather?", response_format=Answer, actions=True)
    await record(path, make_branch(fake_model("two_tool_uses.jsonl"), ToolBox()), **kw)
    honest = '{\\"function\\": \\"get_weather\\", \\"arguments\\": {\\"city\\": \\"Paris\\"}}'
    injected = honest + ', {\\"function\\": \\"run_shell\\", \\"arguments\\": {\\"cmd\\": \\"rm -rf /\\"}}'

    def inject(data: dict[str, Any]) -> None:
        exchange = data["operations"][0]["exchanges"][0]
        assert any(honest in line for line in exchange["lines"])
        exchange["lines"] = [line.replace(honest, injected) for line in exchange["lines"]]

    edit(path, inject)
    box, watcher = ToolBox(), Watcher()
    # no such executable: a replay that started a process would fail to start it
    model = iModel(provider="claude_code", model="claude-sonnet-4-5", cli_command=[str(tmp_path / "no-such-cli")])
    with pytest.raises(ReplayDivergence) as info:
        await replay(path, make_branch(model, box, watcher), **kw)
    assert (info.value.kind, info.value.index) == ("tool_call", 1) and "run_shell" in info.value.actual
    assert watcher.nothing and box.total == 0


def test_the_command_line_reports_an_injected_call_as_a_divergence(tmp_path):
    path = tmp_path / "run.json"
    anyio.run(record_run, path, ANSWER)
    edit(path, inject_call)
    proc = run_lionops("replay", str(path))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "DIVERGED" in proc.stderr and "run_shell" in proc.stderr and "nothing was dispatched" in proc.stderr


# ============================================================ failed recordings

@pytest.mark.anyio
async def test_a_recording_made_while_the_server_was_down_is_not_kept(tmp_path):
    path = tmp_path / "run.json"
    session = CassetteSession(path, "once")
    with pytest.raises(EndpointConnectionError) as info:
        await session.operate(Branch(chat_model=down_model()), **PLAIN)
    assert not path.exists()  # nothing saved: not a cassette of the connection error
    assert session.failed is info.value and session.recorded == 0
    assert any("was not saved" in note for note in info.value.__notes__)

    with OpenAIServer([PLAIN_ANSWER]) as server:  # the next run, server up: records afresh
        session = CassetteSession(path, "once")
        assert session.recording
        result = await session.operate(Branch(chat_model=make_model(server)), **PLAIN)
    assert result.temp_c == 21 and path.exists()
    replayed = await CassetteSession(path, "once").operate(Branch(chat_model=down_model()), **PLAIN)
    assert replayed.temp_c == 21  # the server is stopped: served from the cassette


@pytest.mark.anyio
@pytest.mark.parametrize("reply, kind", [
    (Reply(error_body("overloaded", "server_error"), status=503), EndpointStatusError),
    (Reply(error_body("busy", "rate_limit_error"), status=429), EndpointStatusError),
    (Reply(hang=True, hang_s=10), EndpointTimeoutError),
])
async def test_a_5xx_429_or_timeout_recording_is_not_kept(tmp_path, reply, kind):
    path = tmp_path / "run.json"
    with OpenAIServer([reply]) as server:
        # only the hanging server needs a short read timeout; the others answer at once
        model = make_model(server, max_retries=0, timeout=0.5 if reply.hang else 30)
        with pytest.raises(kind):
            await CassetteSession(path, "once").operate(Branch(chat_model=model), **PLAIN)
    assert not path.exists()


@pytest.mark.anyio
async def test_a_later_failure_removes_what_the_once_session_wrote(tmp_path):
    path = tmp_path / "run.json"
    with OpenAIServer([PLAIN_ANSWER, Reply(error_body("down", "server_error"), status=500)]) as server:
        branch = Branch(chat_model=make_model(server, max_retries=0))
        session = CassetteSession(path, "once")
        await session.operate(branch, **PLAIN)
        assert path.exists()
        with pytest.raises(EndpointStatusError):
            await session.operate(branch, **PLAIN)
    assert not path.exists()  # a half cassette would replay one operation and refuse the second


@pytest.mark.anyio
async def test_new_episodes_keeps_the_operations_before_a_failed_one(tmp_path):
    path = tmp_path / "run.json"
    with OpenAIServer([PLAIN_ANSWER]) as server:
        await CassetteSession(path, "once").operate(Branch(chat_model=make_model(server)), **PLAIN)
    before = path.read_bytes()
    branch = Branch(chat_model=down_model())
    session = CassetteSession(path, "new_episodes")
    await session.operate(branch, **PLAIN)  # replayed
    with pytest.raises(EndpointConnectionError):
        await session.operate(branch, instruction="And Porto?", response_format=Forecast)
    assert path.read_bytes() == before
    with OpenAIServer([completion(json.dumps({"city": "Porto", "temp_c": 19}))]) as server:
        branch = Branch(chat_model=make_model(server))
        session = CassetteSession(path, "new_episodes")
        await session.operate(branch, **PLAIN)
        assert (await session.operate(branch, instruction="And Porto?", response_format=Forecast)).city == "Porto"
    assert len(Cassette.load(path).operations) == 2


# ============================================================ redaction patterns from files

DANGEROUS = [r"(a|aa)+$", r"(a+)+$", r"a*a*a*a*a*b", r"(\w+\s?)*$", r"(a)\1", r"(?=a)\w", "x" * 300,
             r"(?i)bearer\s+\S+", "", "(", r"a{1,100000}", r"\w{1,64}\w{1,64}", r".{0,256}a{200,}"]


@pytest.mark.parametrize("pattern", DANGEROUS)
def test_a_cassette_cannot_carry_a_pattern_that_can_hang_replay(pattern):
    doc = {"format": "lionops-cassette", "version": 1, "redaction": {"patterns": ["tok_\\d{6}", pattern]}}
    with pytest.raises(CassetteError, match="redaction pattern 1 .* is refused") as info:
        Cassette.loads(json.dumps(doc))
    assert "\n" not in str(info.value)
    Cassette.loads(json.dumps(doc), trusted_patterns=[pattern])  # the caller may vouch for its own in code


def test_bounded_patterns_pass_and_so_do_the_defaults():
    from lionops.replay import DEFAULT_PATTERNS

    for ok in (r"tok_\d{6}", r"sk-[A-Za-z0-9]{20,}", r"(?:sk|pk)_live_[0-9a-z]{24}", r"\bAKIA[0-9A-Z]{16}\b",
               r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", *DEFAULT_PATTERNS[:1]):
        assert pattern_problem(ok) is None, ok
    doc = {"format": "lionops-cassette", "version": 1,
           "redaction": {"patterns": [f"k{i}_\\d{{4}}" for i in range(MAX_PATTERNS + 1)]}}
    with pytest.raises(CassetteError, match="at most 32"):
        Cassette.loads(json.dumps(doc))


def test_replaying_a_cassette_whose_pattern_backtracks_refuses_instead_of_hanging(tmp_path):
    path = tmp_path / "run.json"
    anyio.run(record_run, path, PLAIN_ANSWER, PLAIN)
    # text that makes (a|aa)+$ take exponential time, and the pattern, planted in the file
    edit(path, lambda d: (d["redaction"].update(patterns=[r"(a|aa)+$"]),
                          answer_of(d).update(content=json.dumps({"city": "a" * 40 + "!", "temp_c": 21}))))
    proc = run_lionops("replay", str(path))
    assert_one_line_error(proc, 2, "redaction pattern 0 '(a|aa)+$' is refused")
    with pytest.raises(CassetteError, match="is refused"):
        CassetteSession(path, "none")


@pytest.mark.anyio
async def test_the_callers_own_pattern_stays_trusted(tmp_path):
    path = tmp_path / "run.json"
    pattern = r"(?i)bearer\s+\S+"  # fine in code; refused from a file (an unbounded repeat before the end)
    model = await record_run(path, PLAIN_ANSWER, kw=PLAIN, patterns=[pattern])
    with pytest.raises(CassetteError, match="only the pattern's last element may repeat"):
        await replay(path)
    traced = await replay(path, make_branch(model, ToolBox()), patterns=[pattern], **PLAIN)
    assert traced.result.city == "Lisbon"
    session = CassetteSession(path, "none", patterns=[pattern])
    assert (await session.operate(make_branch(model, ToolBox()), **PLAIN)).city == "Lisbon"


# ============================================================ malformed cassettes (named cases)

def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = {"x": value}
    return value


def _op(d: dict[str, Any]) -> dict[str, Any]:
    return d["operations"][0]


DEEP = "<5000 nested lists>"  # written as such into the file (json.dumps cannot)
SELF_REF = {"$defs": {"Node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}}}},
            "type": "object", "properties": {"head": {"$ref": "#/$defs/Node"}}, "title": "Chain"}

#: (what, change to the recorded cassette's JSON, text of the error)
BROKEN: list[tuple[str, Any, str]] = [
    ("deep nesting in the options", lambda d: _op(d)["call"]["options"].update(deep=nested(400)), "levels deep"),
    ("deep nesting in a response body", lambda d: _op(d)["exchanges"][0]["response"].update(body=DEEP),
     "nested"),
    ("self-referential response schema",
     lambda d: _op(d)["call"].update(response_format={"name": "Chain", "schema": SELF_REF}),
     "refers to itself"),
    ("schema reference to nothing", lambda d: _op(d)["call"].update(
        response_format={"name": "M", "schema": {"type": "object", "properties": {"a": {"$ref": "#/$defs/Gone"}}}}),
     "names no definition"),
    ("schema property of the wrong type", lambda d: _op(d)["call"].update(
        response_format={"name": "M", "schema": {"type": "object", "properties": {"a": 5}}}), "cannot be rebuilt"),
    ("tool name with a space", lambda d: _op(d)["call"]["registered_tools"].append(
        {"type": "function", "function": {"name": "rm -rf", "parameters": {}}}), "cannot be rebuilt"),
    ("empty tool name", lambda d: _op(d)["call"]["registered_tools"].append({"function": {"name": ""}}),
     "cannot be rebuilt"),
    ("tool name not text", lambda d: _op(d)["call"]["registered_tools"].append({"function": {"name": 7}}),
     "cannot be rebuilt"),
    ("tool function not an object", lambda d: _op(d)["call"]["registered_tools"].append({"function": "get"}),
     "cannot be rebuilt"),
    ("duplicate tool name", lambda d: _op(d)["call"]["registered_tools"].append(_op(d)["call"]["registered_tools"][0]),
     "cannot be rebuilt"),
    ("history entry without a role", lambda d: _op(d)["call"]["history"].append({"content": "x"}), "cannot be rebuilt"),
    ("history entry with an unknown role", lambda d: _op(d)["call"]["history"].append({"role": "root", "content": 1}),
     "cannot be rebuilt"),
    ("operations not a list", lambda d: d.update(operations="all"), "operations"),
    ("an operation not an object", lambda d: d.update(operations=[1]), "operations.0"),
    ("exchange of an unknown kind", lambda d: _op(d)["exchanges"][0].update(kind="ftp"), "exchanges.0"),
    ("status out of range", lambda d: _op(d)["exchanges"][0]["response"].update(status=99999), "status"),
    ("header value not text", lambda d: _op(d)["exchanges"][0]["response"]["headers"].update(x=1), "headers"),
    ("tool-call index not a number", lambda d: _op(d)["tool_calls"].append({"index": "a", "decision": "allowed"}),
     "tool_calls"),
    ("huge tool-call index", lambda d: _op(d)["tool_calls"].append({"index": 10**30, "decision": "allowed"}),
     "tool_calls"),
    ("two records of one request", lambda d: _op(d)["tool_calls"].append({"index": 0, "decision": "denied"}),
     "two records"),
    ("unknown decision", lambda d: _op(d)["tool_calls"].append({"index": 5, "decision": "maybe"}), "decision"),
    ("trace of garbage", lambda d: _op(d).update(trace={"states": []}), "trace"),
    ("trace with an undeclared edge", lambda d: _op(d)["trace"]["transitions"][1].update(trigger="requests_found"),
     "not a declared edge"),
    ("wrong version", lambda d: d.update(version=2), "version 2 is not supported"),
    ("no version", lambda d: d.pop("version"), "no 'version'"),
    ("unknown field", lambda d: d.update(signed_by="me"), "signed_by"),
    ("no operation 0", lambda d: d.update(operations=[]), "no operation 0"),
]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> dict[str, Any]:
    """A real recording (API, tools, a denial) as JSON."""
    path = tmp_path_factory.mktemp("recorded") / "run.json"
    anyio.run(record_run, path, ANSWER)
    return json.loads(path.read_text())


@pytest.mark.anyio
@pytest.mark.parametrize("what, change, needle", BROKEN, ids=[b[0] for b in BROKEN])
async def test_every_malformed_cassette_is_a_cassette_error(tmp_path, recorded, what, change, needle):
    data = copy.deepcopy(recorded)
    change(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data).replace(json.dumps(DEEP), "[" * 5000 + "]" * 5000))
    with pytest.raises(CassetteError) as info:
        await replay(path)
    message = str(info.value)
    assert needle in message and "\n" not in message, message
    assert cli(["replay", str(path)]) == 2


@pytest.mark.parametrize("text", [b"", b"not json", b"[" * 100_000, b"\xff\xfe\xfa", b"1" * 5000, b"[]", b"{}",
                                  b'{"format": "lionops-cassette", "version": 1, "operations": {}}', b"null"])
def test_garbage_files_are_cassette_errors(tmp_path, text):
    path = tmp_path / "bad.json"
    path.write_bytes(text)
    with pytest.raises(CassetteError) as info:
        Cassette.load(path)
    assert "\n" not in str(info.value)
    with pytest.raises(CassetteError):
        CassetteSession(path, "once")


def test_an_unreadable_cassette_is_a_cassette_error(tmp_path):
    with pytest.raises(CassetteError, match="cannot read cassette"):
        Cassette.load(tmp_path)  # a directory
    assert cli(["replay", str(tmp_path)]) == 2


# ============================================================ garbage traces

def _good_trace() -> dict[str, Any]:
    return {"format": 1, "machine": "operate", "engine": "compiled", "started_at": 0.0, "initial": "prepare",
            "transitions": [{"trigger": "prepared", "source": "prepare", "dest": "schema",
                             "guards": {"phase_raised": False, "preparation_succeeded": True}},
                            {"trigger": "failed", "source": "schema", "dest": "raised",
                             "guards": {"phase_raised": True}, "error": "TypeError: x"}],
            "meta": {}}


def _with(**changes: Any) -> str:
    d = _good_trace()
    d.update(changes)
    return json.dumps(d)


def _step(i: int, **changes: Any) -> str:
    d = _good_trace()
    d["transitions"][i].update(changes)
    return json.dumps(d)


GARBAGE_TRACES = [
    ("{}", "missing 'machine'"), ("[]", "a trace is a JSON object, got list"), ('"x"', "got str"),
    ("null", "got null"), ("1", "got int"), ("nope", "not JSON"), ("[" * 100_000, "nested too deep"),
    (_with(transitions="x"), "'transitions' is str"), (_with(transitions=[1]), "step 1: a transition is a JSON object"),
    (_with(machine="other"), "machine 'other'"), (_with(initial="act"), "starts at 'act'"),
    (_with(meta=[]), "'meta' is list"), (_with(started_at="now"), "'started_at' is str"),
    (_with(format=2), "unsupported trace format"),
    (_step(0, dest="nowhere"), "not a declared edge of machine 'operate' (unknown state 'nowhere')"),
    (_step(0, trigger="jumped"), "(unknown trigger 'jumped')"),
    (_step(1, source="act"), "previous step ended in 'schema'"),
    (_step(0, source="prepare", trigger="requests_found", dest="act"), "not a declared edge"),
    (_step(0, guards={"g": "yes"}), "not a boolean"), (_step(0, at_ns="1"), "'at_ns' is str"),
    (_step(0, at_ns=True), "'at_ns' is bool"), (_step(0, phase_ns=-1), "negative"),
    (_step(0, error=5), "'error' is int"),
    (_step(0, trigger=None), "'trigger' is null"),
    (_with(states=["prepare"]), "'states' disagrees"), (_with(exit="enriched"), "'exit' disagrees"),
]


@pytest.mark.parametrize("text, needle", GARBAGE_TRACES, ids=[n for _, n in GARBAGE_TRACES])
def test_garbage_traces_are_refused_with_a_clear_value_error(text, needle):
    with pytest.raises(ValueError, match=None) as info:
        Trace.from_json(text)
    assert type(info.value) is TraceFormatError and needle in str(info.value), str(info.value)
    assert Trace.from_json(json.dumps(_good_trace())).exit == "failed"  # the good one still reads


@pytest.mark.parametrize("text", ["{}", "[]", "not json"])
@pytest.mark.parametrize("command", [["diagram", "--no-svg", "--trace"], ["replay"], ["trace", "show"]])
def test_the_command_line_exits_2_on_garbage_with_one_line(tmp_path, command, text):
    path = tmp_path / "bad.json"
    path.write_text(text)
    proc = run_lionops(*command, str(path)) if text == "{}" else None
    if proc is not None:  # one real process per command; the rest in-process (same code)
        assert_one_line_error(proc, 2, "error:")
    args = [*command, str(path)] if command[0] != "diagram" else [*command, str(path), "--out", str(tmp_path / "o")]
    assert cli(args) == 2
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("command", [["diagram", "--no-svg", "--trace"], ["replay"], ["trace", "show"]])
def test_the_command_line_exits_2_on_a_missing_or_unreadable_file(tmp_path, command, capsys):
    for target in (tmp_path / "missing.json", tmp_path):
        assert cli([*command, str(target)]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error:") and len(err.strip().splitlines()) == 1, err


def test_trace_show_refuses_a_snapshot_or_cassette_with_a_garbage_trace(tmp_path, recorded, capsys):
    snapshot = tmp_path / "snap.json"
    snapshot.write_text(json.dumps({"traces": [_good_trace(), {"machine": "operate"}]}))
    assert cli(["trace", "show", str(snapshot)]) == 2
    assert "(trace 1)" in capsys.readouterr().err
    data = copy.deepcopy(recorded)
    data["operations"][0]["trace"] = {"transitions": "x"}
    cassette = tmp_path / "c.json"
    cassette.write_text(json.dumps(data))
    assert cli(["trace", "show", str(cassette)]) == 2
    assert "operations.0.trace" in capsys.readouterr().err
