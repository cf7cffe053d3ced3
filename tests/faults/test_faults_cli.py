"""Faults, cancellation and bad input through the CLI adapter.

Every test drives ``operate()`` through the real ``run_and_collect`` Middle
and a real subprocess: ``tests/fake_cli.py`` (which can exit non-zero, be
killed, hang, or start a grandchild), or ``sh -c 'cat FILE'`` where only the
bytes matter. Sessions are built per test from the stream-json events below.
The invariants: the adapter is awaited once; a failure is a ``CLIError``
naming its cause and the trace ends ``adapter → raised``; the CLI's own
tool calls are provenance only, never executed by lionops; no lionops tool
runs and the gate is never asked unless a valid request of the final answer
reached ``act()``; no subprocess outlives the call; the persisted stream
holds every byte received.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from lionops import Branch, iModel, run_and_collect
from lionops.endpoints.cli import (
    CLIError,
    CLIProcessError,
    CLIResultError,
    CLIStreamError,
    CLITimeoutError,
)
from tests.cli_support import ADAPTER_FAILED, FAKE_CLI, alive, fake_model, read_pid, roles
from tests.helpers import Answer, Governed, ToolBox, cancel_once, polled
from tests.strategies import (
    Labeled,
    Recorder,
    _invalid,
    _valid,
    allowed,
    expected_output,
    hostile_value,
    json_scalars,
    labeled_request,
    make_tools,
)

pytestmark = pytest.mark.anyio

SESSION_ID = "5f0c1e2a-7d4b-4c1e-9a3f-2b8d6e4c1a90"


# ---------------------------------------------------------------- stream-json sessions


def init() -> dict[str, Any]:
    return {"type": "system", "subtype": "init", "session_id": SESSION_ID, "model": "claude-sonnet-4-5"}


def say(text: str) -> dict[str, Any]:
    return {"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": text}]},
            "parent_tool_use_id": None, "session_id": SESSION_ID}


def tool_use(call_id: str, name: Any, arguments: Any) -> dict[str, Any]:
    return {"type": "assistant", "message": {"role": "assistant", "content": [
        {"type": "tool_use", "id": call_id, "name": name, "input": arguments}]},
        "parent_tool_use_id": None, "session_id": SESSION_ID}


def tool_result(call_id: str, output: Any) -> dict[str, Any]:
    return {"type": "user", "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": call_id, "content": output, "is_error": False}]},
        "session_id": SESSION_ID}


def result(text: str = "", *, is_error: bool = False, subtype: str = "success") -> dict[str, Any]:
    return {"type": "result", "subtype": subtype, "is_error": is_error, "result": text, "num_turns": 1,
            "session_id": SESSION_ID, "usage": {"input_tokens": 10, "output_tokens": 2}}


def lines(*events: Any) -> bytes:
    """Events as stream-json lines (bytes are written as they are)."""
    return b"".join(e if isinstance(e, bytes) else json.dumps(e).encode() + b"\n" for e in events)


def write_session(path: Path, *events: Any) -> Path:
    path.write_bytes(lines(*events))
    return path


def cat_model(session: Path, **options: Any) -> iModel:
    """A CLI model whose process is ``sh -c 'cat SESSION'``: the cheapest real
    subprocess that prints a session verbatim (its other arguments are ignored)."""
    options.setdefault("timeout", 30)
    options.setdefault("kill_grace", 0.5)
    return iModel(provider="claude_code", cli_command=["sh", "-c", 'cat "$0"', str(session)], **options)


#: The answer whose action request runs if a failed turn were taken for a good one.
ACTING = json.dumps({"answer": 1, "action_requests": [{"function": "send_message",
                                                       "arguments": {"to": "team", "body": "done"}}]})


def governed(chat_model: Any) -> Governed:
    return Governed(chat_model, run_and_collect, instruction="go", response_format=Answer)


def stream_file(directory: Path) -> bytes:
    (path,) = directory.glob("*.jsonl")
    return path.read_bytes()


def gone(pid: int) -> bool:
    """The process has exited and been reaped (no /proc entry, not even a zombie)."""
    return not os.path.exists(f"/proc/{pid}")


# ---------------------------------------------------------------- cancellation


@pytest.mark.parametrize("how", ["cancel", "fail_after"])
async def test_cancelled_while_the_cli_streams(tmp_path, how):
    """Cancelled while the CLI (and a grandchild) run and stream: both are
    terminated, the CLI reaped, before the cancellation propagates; no tool,
    no gate; the stream file holds what was received."""
    session = write_session(tmp_path / "s.jsonl", init(), say(ACTING), result(ACTING))
    pid_file, child_file, streams = tmp_path / "pid", tmp_path / "child", tmp_path / "streams"
    model = fake_model(str(session), "--hang-after", "2", "--pidfile", str(pid_file),
                       "--child-pidfile", str(child_file), kill_grace=0.2)
    g = governed(model)
    call = lambda: g.operate(stream_persist=True, persist_dir=str(streams))  # noqa: E731
    if how == "cancel":
        received = polled(lambda: streams.exists() and stream_file(streams).count(b"\n") == 2)
        scope = await cancel_once(received, call)
        assert scope.cancelled_caught  # propagated, not swallowed
        g.check_failed(anyio.get_cancelled_exc_class())
    else:
        with pytest.raises(TimeoutError) as info:
            with anyio.fail_after(1.5):
                await call()
        assert not isinstance(info.value, CLIError)  # the caller's deadline, not the CLI's timeout
        g.check_failed()
    assert gone(read_pid(pid_file)) and not alive(read_pid(child_file))
    assert stream_file(streams) == session.read_bytes()[: len(stream_file(streams))]
    assert stream_file(streams).count(b"\n") == 2


# ---------------------------------------------------------------- subprocess faults

TORN = lines(init(), say(ACTING))[:-40] + b"\n" + lines(result(ACTING))
_A, _B = json.dumps(say(ACTING)).encode(), json.dumps(tool_use("t1", "Bash", {"command": "ls"})).encode()
INTERLEAVED = lines(init()) + _A[:60] + _B[:50] + b"\n" + _A[60:] + _B[50:] + b"\n" + lines(result(ACTING))

#: kind -> (session bytes, fake CLI arguments, model options, error, words in the message)
FAULTS = {
    "exit-2": (lines(init(), say(ACTING), result(ACTING)), ["--exit", "2", "--stderr", "boom"], {},
               CLIProcessError, "exited with status 2"),
    "killed": (lines(init(), say(ACTING), result(ACTING)), ["--kill-after", "2"], {},
               CLIProcessError, "killed by signal SIGKILL"),
    "hangs": (lines(init(), say(ACTING), result(ACTING)), ["--hang-after", "2"], {"timeout": 0.5, "kill_grace": 0.2},
              CLITimeoutError, "no result within 0.5 s"),
    "no-result": (lines(init(), say(ACTING)), [], {}, CLIProcessError, "without a final result event"),
    "torn-line": (TORN, [], {}, CLIStreamError, "stdout line 2 is corrupt"),
    "interleaved-lines": (INTERLEAVED, ["--chunk", "9"], {}, CLIStreamError, "is corrupt"),
    "is-error-exit-0": (lines(init(), say(ACTING), result(is_error=True, subtype="error_during_execution")),
                            [], {}, CLIResultError, "error_during_execution"),
}


@pytest.mark.parametrize("kind", list(FAULTS))
async def test_cli_faults_are_a_clear_error_and_nothing_runs(tmp_path, kind):
    """Each subprocess fault, after an answer asking for a side-effecting tool
    has been printed: the typed CLIError naming the cause, the adapter awaited
    once, no tool, no gate, no assistant message, a ``cli_error`` log entry,
    a snapshot of the failed turn, and the stream file holding every byte
    the CLI wrote before it failed."""
    data, fake_args, options, error, words = FAULTS[kind]
    session = tmp_path / "s.jsonl"
    session.write_bytes(data)
    streams, snaps = tmp_path / "streams", tmp_path / "snaps"
    g = governed(fake_model(str(session), *fake_args, **options))
    with pytest.raises(error) as info:
        await g.operate(stream_persist=True, persist_dir=str(streams), snapshot_dir=str(snaps))
    assert type(info.value) is error and words in str(info.value)
    g.check_failed(error)
    assert g.branch.traces[-1].states == ADAPTER_FAILED
    (entry,) = g.branch.logs.of_kind("cli_error")
    assert entry.content["type"] == error.__name__
    received = stream_file(streams)
    expected = data if kind != "killed" and kind != "hangs" else lines(init(), say(ACTING))
    assert received == expected
    snap = json.loads((snaps / f"{g.branch.id}.json").read_text())
    assert [m["role"] for m in snap["messages"]] == roles(g.branch)


# ---------------------------------------------------------------- hostile stdout

#: tool_use blocks the CLI may print: names of lionops tools among them; the
#: input of any shape. lionops records them and never runs them.
CLI_TOOL_USES = st.lists(st.tuples(st.sampled_from(["echo", "add", "ping", "Bash", "", None, 7]),
                                   hostile_value.filter(lambda v: not isinstance(v, (bytes, float)))),
                         max_size=4)


#: Final-answer requests, built for the exit they lead to: a request without
#: an ADR shape (the answer does not validate: the mapping comes back, nothing
#: runs), none at all (nothing to run), only valid requests (every one is
#: decided; the allowed ones run), or any mix of requests that have a shape.
#: Each kind gets the same share of the examples.
_dispatchable = st.one_of(_valid(), _valid(), _invalid())
_plain_valid = _valid().filter(lambda r: not isinstance(r.payload, BaseModel))  # a model prints as its repr
#: a value that is no request at all (a mapping without the keys still reads as a request with no name)
_no_request = st.builds(lambda v: Labeled(v, "shape"), st.one_of(
    st.none(), st.booleans(), st.integers(), st.text(max_size=12), st.lists(json_scalars, max_size=2)))
FINAL_REQUESTS = {
    "shape": st.tuples(st.lists(_dispatchable, max_size=3), _no_request, st.lists(labeled_request, max_size=3)).map(
        lambda t: [*t[0], t[1], *t[2]]),
    "empty": st.just([]),
    "valid": st.lists(_plain_valid, min_size=1, max_size=6),
    "mixed": st.lists(_dispatchable, min_size=1, max_size=6),
}
EXPECTED_EXITS = {
    "shape": {"mismatch_return_value"},
    "empty": {"no_responses"},
    "valid": {"enriched"},
    "mixed": {"enriched", "mismatch_return_value"},  # an invalid request may not fit ActionRequestModel
}


@pytest.mark.parametrize("built_for", sorted(FINAL_REQUESTS))
@settings(max_examples=max(3, settings.default.max_examples // 12))
@given(data=st.data(), uses=CLI_TOOL_USES, strategy=st.sampled_from(["concurrent", "sequential"]))
async def test_hostile_cli_stdout_runs_only_valid_final_requests(tmp_path_factory, built_for, data, uses, strategy):
    """The CLI prints tool_use blocks with hostile input (some naming lionops
    tools) and a final answer with hostile action_requests (tests/strategies.py):
    lionops never runs a CLI tool call; it runs exactly the valid requests of
    the final answer the gate allows, or, when the answer does not validate,
    nothing; an invalid request is never invoked."""
    reqs = data.draw(FINAL_REQUESTS[built_for], label="final requests")
    rec = Recorder()
    payload = [r.payload for r in reqs]
    answer = json.dumps({"answer": 1, "action_requests": payload}, default=repr)
    events: list[Any] = [init()]
    for i, (name, arguments) in enumerate(uses):
        events += [tool_use(f"t{i}", name, arguments), tool_result(f"t{i}", "ok")]
    events += [say(answer), result(answer)]
    session = write_session(tmp_path_factory.mktemp("s") / "s.jsonl", *events)
    b = Branch(chat_model=cat_model(session), tools=make_tools(rec))
    b.gate(rec.gate)
    out, trace = await b.operate_traced(instruction="go", actions=True, response_format=Answer,
                                        action_strategy=strategy)
    event(f"exit={trace.exit}")
    assert trace.exit in EXPECTED_EXITS[built_for], (built_for, trace.exit)
    provenance = [m for m in b.messages if m.metadata.get("executed_by") == "cli"]
    assert len(provenance) == 2 * len(uses)  # every CLI tool call recorded, none run by lionops
    if trace.exit != "enriched":
        assert rec.invoked == [] and rec.asked == [] and trace.actions == []
        assert not [m for m in b.messages if m.role.startswith("action_") and m not in provenance]
        if trace.exit == "mismatch_return_value":  # the answer comes back as it was written
            assert out == {"answer": 1, "action_requests": json.loads(answer)["action_requests"]}
        else:
            assert out.answer == 1 and out.action_responses is None
        return
    sent = json.loads(answer)["action_requests"]
    assert len(out.action_responses) == len(sent)
    valid = [r for r in reqs if r.kind == "valid"]
    assert sorted(json.dumps(i, sort_keys=True) for i in rec.invoked) == sorted(
        json.dumps([r.function, r.arguments], sort_keys=True) for r in valid if allowed(r.function, r.arguments))
    for req, resp in zip(reqs, out.action_responses, strict=False):
        if req.kind == "valid" and allowed(req.function, req.arguments):
            assert resp.output == expected_output(req.function, req.arguments)
        elif req.kind != "valid":
            assert resp.is_error


async def test_ten_megabyte_lines(tmp_path):
    """A 10 MB noise line, a CLI tool call with 10 MB of input and a 10 MB
    answer field: decoded, recorded whole, persisted byte for
    byte; the lionops tool asked for in the answer runs once."""
    blob = "x" * 10_000_000
    answer = json.dumps({"answer": 2, "note": blob,
                         "action_requests": [{"function": "search", "arguments": {"q": "lion"}}]})
    session = write_session(tmp_path / "s.jsonl", init(), ("~" * 10_000_000 + "\n").encode(),
                            tool_use("t1", "Write", {"content": blob}), tool_result("t1", "ok"),
                            say(answer), result(answer))
    streams = tmp_path / "streams"
    g = governed(cat_model(session))
    out, trace = await g.branch.operate_traced(instruction="go", actions=True, response_format=Answer,
                                               stream_persist=True, persist_dir=str(streams))
    assert out.answer == 2 and g.box.calls == {"search": 1}
    assert trace.meta["cli"]["stream"]["noise"] == 1
    (request,) = [m for m in g.branch.messages if m.metadata.get("executed_by") == "cli" and m.role == "action_request"]
    assert request.content["arguments"]["content"] == blob
    assert stream_file(streams) == session.read_bytes()


async def test_non_utf8_bytes_are_replaced_never_fatal(tmp_path):
    """Bytes that are not UTF-8 in a noise line and inside an event's text:
    replaced (U+FFFD), the turn goes on; the stream file keeps the raw bytes."""
    text_line = json.dumps(say("caf\udcff")).replace("\\udcff", "\udcff").encode("utf-8", "surrogateescape")
    session = tmp_path / "s.jsonl"
    session.write_bytes(b"\xff\xfe\x00 not utf-8\n" + lines(init()) + text_line + b"\n" + lines(result("x")))
    assert b"caf\xff" in session.read_bytes()
    streams = tmp_path / "streams"
    g = governed(cat_model(session))
    out = await g.branch.operate(instruction="go", stream_persist=True, persist_dir=str(streams))
    assert out == "caf\ufffd"
    assert stream_file(streams) == session.read_bytes()
    assert g.branch.traces[-1].meta["cli"]["stream"]["noise"] == 1


# ---------------------------------------------------------------- shared branch

CLI_CALLS = 8


def cli_kind(i: int) -> str:
    return {0: "hang", 1: "exit_1"}.get(i % 4, "ok")


async def test_concurrent_cli_turns_on_one_branch_lose_nothing(tmp_path):
    """Eight concurrent CLI turns on one branch through one iModel (each call
    picks its session with cli_args): some fail, some are cancelled while they
    stream; every trace is whole with its own session, every message is there
    once, and no CLI process outlives its call."""
    sessions = {}
    for i in range(CLI_CALLS):
        tag = f"c{i}"
        answer = json.dumps({"answer": i, "action_requests": [{"function": "search", "arguments": {"q": tag}}]})
        events = [{**init(), "session_id": tag}, tool_use(f"t{i}", "Bash", {"command": tag}),
                  tool_result(f"t{i}", tag), say(answer), {**result(answer), "session_id": tag}]
        sessions[i] = write_session(tmp_path / f"{tag}.jsonl", *events)
    model = fake_model(str(sessions[0]), kill_grace=0.2)
    box = ToolBox()
    b = Branch(chat_model=model, tools=box.tools())
    scopes: dict[int, anyio.CancelScope] = {}
    results: dict[int, Any] = {}
    pids = {i: tmp_path / f"pid{i}" for i in range(CLI_CALLS)}

    async def call(i: int) -> None:
        args = ["--session", str(sessions[i]), "--pidfile", str(pids[i])]
        args += {"hang": ["--hang-after", "3"], "exit_1": ["--exit", "1"]}.get(cli_kind(i), [])
        with anyio.CancelScope() as scope:
            scopes[i] = scope
            try:
                results[i] = await b.operate(instruction=f"c{i}", actions=True, response_format=Answer,
                                             cli_args=args)
            except CLIProcessError as exc:
                results[i] = exc

    hangs = [i for i in range(CLI_CALLS) if cli_kind(i) == "hang"]
    with anyio.fail_after(30):  # safety net only
        async with anyio.create_task_group() as tg:
            for i in range(CLI_CALLS):
                tg.start_soon(call, i)
            await polled(lambda: len(results) == CLI_CALLS - len(hangs)
                         and sum(1 for m in b.messages.by_role("action_request")
                                 if m.metadata.get("executed_by") == "cli") == CLI_CALLS)()
            for i in hangs:
                scopes[i].cancel()

    assert len(b.traces) == CLI_CALLS and all(gone(read_pid(p)) for p in pids.values())
    for i in range(CLI_CALLS):
        kind = cli_kind(i)
        if kind == "ok":
            assert results[i].answer == i and results[i].action_responses[0].output == [f"c{i}"]
        elif kind == "exit_1":
            assert isinstance(results[i], CLIProcessError)
        else:
            assert scopes[i].cancelled_caught and i not in results
    by_session = {t.meta["cli"]["session_id"]: t for t in b.traces if t.meta.get("cli", {}).get("session_id")}
    ok = [i for i in range(CLI_CALLS) if cli_kind(i) == "ok"]
    assert sorted(by_session) == sorted(
        [f"c{i}" for i in ok] + [f"c{i}" for i in range(CLI_CALLS) if cli_kind(i) == "exit_1"])
    assert sorted(a["q"] for _, a in box.args) == sorted(f"c{i}" for i in ok)
    cli = [m for m in b.messages if m.metadata.get("executed_by") == "cli"]
    assert sorted(m.content["arguments"]["command"] for m in cli if m.role == "action_request") == sorted(
        f"c{i}" for i in range(CLI_CALLS))
    assert sorted(m.content.split("\n\n")[0] for m in b.messages.by_role("user")) == sorted(
        f"c{i}" for i in range(CLI_CALLS))
    assert len(b.messages.by_role("assistant")) == len(ok)
    assert len(b.logs.of_kind("cli_error")) == sum(cli_kind(i) == "exit_1" for i in range(CLI_CALLS))


# ---------------------------------------------------------------- durability: kill -9 the parent

#: A real parent process: runs CLI turns on one branch, forever, with the
#: stream persisted and a snapshot after each turn; prints each CLI tool call
#: it received ("got t<k>") and each finished turn ("turn N").
PARENT = r"""
import sys, anyio
from lionops import Branch, iModel

fake, session, streams, snaps, pidfile = sys.argv[1:6]
model = iModel(provider="claude_code", cli_command=[sys.executable, fake, "--session", session,
               "--chunk", "4096", "--pidfile", pidfile], timeout=60)
b = Branch(chat_model=model)
b.logs.subscribe(lambda e: e.kind == "cli_tool" and e.content["kind"] == "request"
                 and print("got", e.content["call_id"], flush=True))

async def main():
    n = 0
    while True:
        await b.operate(instruction=f"turn {n}", stream_persist=True, persist_dir=streams, snapshot_dir=snaps)
        print("turn", n, flush=True)
        n += 1

anyio.run(main)
"""

#: Kill once the parent reported this many CLI tool calls (60 per turn): early,
#: mid-stream, at the end of a turn's stream (while its snapshot is written)
#: and into the next turn.
KILL_AFTER = (3, 31, 59, 60, 61, 97, 120, 121)


def test_sigkill_of_the_parent_mid_turn_leaves_whole_files(tmp_path):
    """SIGKILL the Python process running CLI turns, at points spread over a
    turn (while the stream is written, while the snapshot is replaced): each
    persisted stream is a byte prefix of what the CLI printed and holds every
    tool call the parent reported receiving; finished turns' streams are
    whole; the snapshot is whole (the previous turn's or the new one)."""
    pad = "p" * 5_000
    events = [init()]
    for k in range(60):
        events += [tool_use(f"t{k}", "Read", {"path": f"f{k}", "pad": pad}), tool_result(f"t{k}", pad)]
    events += [say("done"), result("done")]
    session = write_session(tmp_path / "s.jsonl", *events)
    data = session.read_bytes()
    for kill_after in KILL_AFTER:
        run = tmp_path / f"kill{kill_after}"
        streams, snaps, pidfile = run / "streams", run / "snaps", run / "cli.pid"
        parent = subprocess.Popen([sys.executable, "-c", PARENT, str(FAKE_CLI), str(session), str(streams),
                                   str(snaps), str(pidfile)], stdout=subprocess.PIPE, text=True)
        seen: list[str] = []  # tool calls the parent received in the turn it was killed in
        try:
            total = 0
            while total < kill_after:
                line = parent.stdout.readline()
                assert line, "the parent died"
                if line.startswith("got "):
                    seen.append(line.split()[1])
                    total += 1
                else:
                    seen = []
        finally:
            parent.send_signal(signal.SIGKILL)
            parent.wait(timeout=10)
            parent.stdout.close()
            _kill_group(pidfile)
        files = sorted(streams.glob("*.jsonl"), key=lambda p: p.stat().st_mtime_ns)
        partial = [f.read_bytes() for f in files if f.read_bytes() != data]
        assert len(partial) <= 1 and all(data.startswith(p) for p in partial)  # never torn or reordered
        last = files[-1].read_bytes()
        assert all(f'"id": "{call_id}"'.encode() in last for call_id in seen)  # on disk before it was seen
        for snap in snaps.glob("*.json"):
            doc = json.loads(snap.read_text())  # whole: the previous turn's or the new one
            assert doc["messages"][-1]["role"] == "assistant"
            assert len(doc["messages"]) % 122 == 0  # whole turns: user, 60 CLI calls and results, answer
        if kill_after > 60:
            assert list(snaps.glob("*.json"))


def _kill_group(pidfile: Path) -> None:
    """The orphaned CLI of a killed parent (it runs in its own session)."""
    try:
        os.killpg(int(pidfile.read_text()), signal.SIGKILL)
    except (FileNotFoundError, ValueError, ProcessLookupError, PermissionError):
        pass
    deadline = time.monotonic() + 5
    while pidfile.exists() and alive(int(pidfile.read_text())) and time.monotonic() < deadline:
        time.sleep(0.01)
