"""The same ``operate()`` calls through lionops and through lionagi 0.36.0.

    .venv/bin/python bench/lionagi_diff.py                # both sides, a markdown table
    .venv/bin/python bench/lionagi_diff.py --json         # both sides, JSON
    PY bench/lionagi_diff.py --side lionops|lionagi       # one side, JSON on stdout

lionagi runs in its own virtual environment (``.cache/bench-peers/lionagi``,
made by ``make bench-peers``), each side in its own process. Nothing leaves
the machine: a scripted Middle (the ADR-0022 D3 adapter contract, which
both libraries accept as ``middle=``) stands in for the model, and the tools
are plain functions that count their calls. docs/semantics.md ("Differences
from lionagi 0.36") reports the results and the reason for each difference.
Not part of ``make test``.
"""

# No `from __future__ import annotations`: lionagi 0.36 reads tool annotations
# as classes (a string annotation fails its schema generation).
import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
LIONAGI_PY = ROOT / ".cache" / "bench-peers" / "lionagi" / "bin" / "python"


# ---------------------------------------------------------------- one side


def _lib(side: str) -> dict[str, Any]:
    """The names each case needs, from one library."""
    if side == "lionops":
        import lionops

        def gated(check, tools):
            branch = lionops.Branch(tools=tools)
            branch.gate(check)
            return branch

        return {"Branch": lionops.Branch, "Reason": lionops.Reason, "Instruct": lionops.Instruct, "gated": gated}
    from lionagi import Branch, Session
    from lionagi.operations.fields import Instruct, Reason

    def gated(check, tools):
        # lionagi's gate lives on the session; a standalone branch allows everything.
        session = Session()
        session.gate(check)
        branch = session.default_branch
        branch.register_tools(tools)
        return branch

    return {"Branch": Branch, "Reason": Reason, "Instruct": Instruct, "gated": gated}


def _scripted(answer: Any, seen: dict[str, Any] | None = None):
    """A Middle that returns ``answer`` validated into the effective response
    format (a dict, or a callable of the response format, is used as given)."""

    async def middle(branch, instruction, chat_param, parse_param=None, clear_messages=False,
                     skip_validation=False):
        fmt = getattr(parse_param, "response_format", None)
        value = answer(fmt) if callable(answer) else answer
        if seen is not None:
            seen["returned"] = value
        return value

    return middle


def _validated(data: dict[str, Any]):
    return lambda fmt: fmt.model_validate(data)


def _name(obj: Any) -> str:
    return type(obj).__name__


async def _cases(side: str) -> dict[str, Any]:
    import anyio
    from pydantic import BaseModel

    lib = _lib(side)
    Branch = lib["Branch"]
    calls: list[tuple[str, dict[str, Any]]] = []

    def get_weather(city: str) -> dict:
        """Weather for a city."""
        calls.append(("get_weather", {"city": city}))
        return {"city": city, "temp_c": 21}

    def boom() -> str:
        """Always fails."""
        calls.append(("boom", {}))
        raise ValueError("x")

    live = {"now": 0, "max": 0}

    async def slow(tag: str) -> str:
        """Sleeps a little, counting how many run at once."""
        live["now"] += 1
        live["max"] = max(live["max"], live["now"])
        await anyio.sleep(0.05)
        live["now"] -= 1
        return tag

    class Answer(BaseModel):
        city: str

    class Planned(BaseModel):
        city: str
        action_strategy: str | None = None

    req = {"function": "get_weather", "arguments": {"city": "Oslo"}}
    out: dict[str, Any] = {}

    # 1. Enrichment: the object the Middle returned, or a re-validated copy.
    seen: dict[str, Any] = {}
    branch = Branch(tools=[get_weather])
    result = await branch.operate(instruction="q", response_format=Answer, actions=True,
                                  middle=_scripted(_validated({"city": "Oslo", "action_requests": [req]}), seen))
    out["enrichment_same_object"] = result is seen["returned"]

    # 2. Two identical typed action requests.
    calls.clear()
    branch = Branch(tools=[get_weather])
    result = await branch.operate(instruction="q", response_format=Answer, actions=True,
                                  middle=_scripted(_validated({"city": "Oslo", "action_requests": [req, req]})))
    out["identical_requests"] = {"tool_calls": len(calls), "responses": len(result.action_responses)}

    # 3. A result whose own action_strategy field says "sequential".
    live.update(now=0, max=0)
    branch = Branch(tools=[slow])
    requests = [{"function": "slow", "arguments": {"tag": t}} for t in "abc"]
    await branch.operate(instruction="q", response_format=Planned, actions=True,
                         middle=_scripted(_validated({"city": "Oslo", "action_strategy": "sequential",
                                                      "action_requests": requests})))
    out["declared_sequential_max_concurrent"] = live["max"]

    # 4. How tool errors come back (suppressed, through operate).
    calls.clear()
    branch = Branch(tools=[get_weather, boom])
    result = await branch.operate(instruction="q", response_format=Answer, actions=True, middle=_scripted(
        _validated({"city": "Oslo", "action_requests": [
            {"function": "boom", "arguments": {}},
            {"function": "nope", "arguments": {"x": 1}},
            {"function": "get_weather", "arguments": {"town": "Oslo"}},
        ]})))
    out["tool_errors"] = {
        r.function: (sorted(r.output) if isinstance(r.output, dict) else r.output)
        for r in result.action_responses
    }
    out["tool_errors_invoked"] = [c[0] for c in calls]

    # 5. The exception under handle_validation="raise".
    branch = Branch(tools=[get_weather])
    try:
        await branch.operate(instruction="q", response_format=Answer, handle_validation="raise",
                             middle=_scripted({"town": "Oslo"}))
        out["raise_class"] = None
    except Exception as exc:  # noqa: BLE001 - observed, not handled
        out["raise_class"] = [c.__name__ for c in type(exc).__mro__ if c not in (BaseException, object)]

    # 6. Reason.confidence_score out of range, as text, not a number.
    reason = lib["Reason"]
    scores: dict[str, Any] = {}
    for value in (1.7, -0.2, "0.9", "high", 0.12345):
        try:
            scores[repr(value)] = reason(confidence_score=value).confidence_score
        except Exception as exc:  # noqa: BLE001
            scores[repr(value)] = f"raises {_name(exc)}"
    out["confidence_score"] = scores

    # 7. action_required after enrichment (the model left it out; then said false).
    for label, extra in (("omitted", {}), ("false", {"action_required": False})):
        branch = Branch(tools=[get_weather])
        result = await branch.operate(instruction="q", response_format=Answer, actions=True,
                                      middle=_scripted(_validated({"city": "Oslo", "action_requests": [req],
                                                                   **extra})))
        out[f"action_required_{label}"] = result.action_required

    # 8. No response_format: no caller model class, so nothing is checked.
    class Other(BaseModel):
        note: str
        action_requests: list[dict] | None = None

    for label, answer in (
        ("dict", {"note": "n", "action_requests": [req]}),
        ("other_model", Other(note="n", action_requests=[req])),
        ("text", "plain text"),
    ):
        calls.clear()
        branch = Branch(tools=[get_weather])
        result = await branch.operate(instruction="q", actions=True, handle_validation="raise",
                                      middle=_scripted(answer))
        out[f"no_format_{label}"] = {"type": _name(result), "tool_calls": len(calls)}

    # 9. Gate verdicts other than True/False.
    def raising(call):
        raise RuntimeError("gate down")

    verdicts: dict[str, Any] = {}
    for label, check in (("raises", raising), ("'yes'", lambda call: "yes"), ("1", lambda call: 1),
                         ("None", lambda call: None), ("False", lambda call: False)):
        calls.clear()
        branch = lib["gated"](check, [get_weather])
        try:
            [response] = await branch.act(req)
            verdicts[label] = "ran" if calls else "denied"
        except Exception as exc:  # noqa: BLE001
            verdicts[label] = f"raises {_name(exc)}"
    out["gate_verdicts"] = verdicts

    # 10. The caller's Instruct under reason=True / actions=True.
    instruct = lib["Instruct"](instruction="q")
    branch = Branch(tools=[get_weather])
    await branch.operate(instruct=instruct, reason=True, actions=True, middle=_scripted("text"))
    out["instruct_after_call"] = {"reason": instruct.reason, "actions": instruct.actions}

    # 11. An unknown handle_validation value with a mismatching answer carrying a request.
    calls.clear()
    branch = Branch(tools=[get_weather])
    try:
        result = await branch.operate(instruction="q", response_format=Answer, actions=True,
                                      handle_validation="bogus",
                                      middle=_scripted({"town": "Oslo", "action_requests": [req]}))
        out["unknown_policy"] = {"returned": _name(result), "tool_calls": len(calls)}
    except Exception as exc:  # noqa: BLE001
        out["unknown_policy"] = {"raises": _name(exc), "tool_calls": len(calls)}
    return out


def run_side(side: str) -> dict[str, Any]:
    import anyio

    return anyio.run(_cases, side)


# ---------------------------------------------------------------- both sides


def _side(python: Path | str, side: str) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    with tempfile.TemporaryDirectory() as cwd:  # lionagi dumps its logs under ./data
        proc = subprocess.run([str(python), __file__, "--side", side], capture_output=True, text=True,
                              env=env, cwd=cwd, timeout=300)
    if proc.returncode != 0:
        raise SystemExit(f"{side} side failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--side", choices=["lionops", "lionagi"])
    parser.add_argument("--json", action="store_true")
    opts = parser.parse_args()
    if opts.side:
        print(json.dumps(run_side(opts.side)))
        return
    if not LIONAGI_PY.exists():
        raise SystemExit(f"lionagi is not installed at {LIONAGI_PY}: run `make bench-peers` first")
    ours, theirs = _side(sys.executable, "lionops"), _side(LIONAGI_PY, "lionagi")
    if opts.json:
        print(json.dumps({"lionops": ours, "lionagi": theirs}, indent=2))
        return
    print("| case | lionagi 0.36.0 | lionops | same |\n|---|---|---|---|")
    for key in ours:
        a, b = json.dumps(theirs.get(key)), json.dumps(ours[key])
        print(f"| `{key}` | `{a}` | `{b}` | {'yes' if a == b else '**no**'} |")


if __name__ == "__main__":
    main()
