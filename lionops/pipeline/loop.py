"""The run machine (``states/run.toml``) bound to the generic engine: the
loop of ``Branch.run()``, each round one operate() call.

The tables here are the run machine's phase handlers (:data:`RUN_PHASES`),
guards (:data:`RUN_GUARDS`, pure predicates of the :class:`RunContext`) and
outcomes (:data:`RUN_OUTCOMES`). The run is driven by the same
:func:`~lionops.engine.driver.drive` as every operation, on the same
engine classes.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NoReturn

from .._text import safe_str
from ..clock import current_clock
from ..engine import engines
from ..engine.definition import MachineDefinition, run_definition
from ..engine.driver import drive
from ..engine.engines import Engine
from ..errors import (
    ArgumentTypeError,
    ConfigurationError,
    MaxRoundsError,
    ResumeError,
    SnapshotError,
    UsageLimitExceeded,
)
from ..messages import to_jsonable
from ..observability import observe
from ..run import Ran, RunTrace
from ..trace import Trace, started_trace
from .context import OperationContext
from .machine import begin_operation
from .resume import claim, release

__all__ = [
    "RunContext", "RUN_PHASES", "RUN_GUARDS", "RUN_OUTCOMES", "RUN_FAILURE_GUARD", "DEFAULT_MAX_ROUNDS",
    "NEXT_ROUND_INSTRUCTION", "run_engine", "run_loop", "run_context", "round_keywords", "run_to_dict",
    "run_from_dict", "resumed_keywords", "OBJECT_KEYWORDS", "cli_next_instruction", "CLI_NEXT_ROUND_PREFIX",
]

#: The rounds a run may take unless ``max_rounds=`` says otherwise.
DEFAULT_MAX_ROUNDS = 10

#: The instruction of every round after the first: the tool results are the
#: messages before it (the branch's history).
NEXT_ROUND_INSTRUCTION = (
    "The results of the tool calls you requested are in the messages above. "
    "Answer the original instruction now, or request further tool calls if you need them."
)

#: How a later round's instruction to a CLI agent starts (see :func:`cli_next_instruction`).
CLI_NEXT_ROUND_PREFIX = ("You requested tool calls while working on the task below; the runtime ran them. "
                         "Their results follow, oldest first.")

#: The guard of the wildcard transition an exception leaving a phase fires.
RUN_FAILURE_GUARD = "run_phase_raised"


@dataclass(eq=False)
class RunContext:
    """What the run machine's handlers and guards read and write."""

    branch: Any
    operate_kw: dict[str, Any]
    max_rounds: Any = DEFAULT_MAX_ROUNDS
    engine: Any = None
    resume: dict[str, Any] | None = None
    rounds: list[Trace] = field(default_factory=list)
    result: Any = None
    error: BaseException | None = None
    limit_error: UsageLimitExceeded | None = None
    run_trace: RunTrace | None = None
    #: the claimed deferred calls a resumed run's first round runs
    work: Any = None
    #: how a round runs ``operate_traced(**kw)`` (a cassette session records or
    #: replays it); ``None``: the round drives the operate machine itself
    operate: Callable[[dict[str, Any]], Awaitable[Any]] | None = None
    #: how a resumed run's first round runs ``resume_traced(decisions)`` (a
    #: cassette session records or replays it); ``None``: the round drives it itself
    resume_with: Callable[[dict[str, Any]], Awaitable[Any]] | None = None
    #: a run read from a snapshot: the object keywords ``resume_run`` must be given again
    #: (name -> the JSON schema a response model must have, else ``None``)
    needs: dict[str, Any] = field(default_factory=dict)

    @property
    def last(self) -> Trace | None:
        return self.rounds[-1] if self.rounds else None


# ------------------------------------------------------------------ phases

async def start_phase(ctx: RunContext) -> None:
    """Check ``max_rounds`` (a positive int) before any round; a resumed run
    claims its deferred calls here, every decision checked before anything runs."""
    n = ctx.max_rounds
    if isinstance(n, bool) or not isinstance(n, int):
        raise ArgumentTypeError(f"max_rounds must be an int, got {type(n).__name__}")
    if n < 1:
        raise ConfigurationError(f"max_rounds must be >= 1, got {n!r}")
    if ctx.resume is not None and ctx.resume_with is None:
        branch = ctx.branch
        ctx.work = claim(branch.suspensions, branch.acts, ctx.resume)


def round_keywords(ctx: RunContext) -> dict[str, Any]:
    """The operate() keywords of the next round: the run's, with
    :data:`NEXT_ROUND_INSTRUCTION` after the first round (for a CLI agent,
    which starts a new session each turn and so sees no history:
    :func:`cli_next_instruction`)."""
    kw = dict(ctx.operate_kw)
    if ctx.rounds:
        kw["instruction"] = cli_next_instruction(ctx) if _cli_round(ctx, kw) else NEXT_ROUND_INSTRUCTION
    kw.setdefault("action_strategy", "concurrent")
    return kw


def _cli_round(ctx: RunContext, kw: dict[str, Any]) -> bool:
    model = kw.get("chat_model") or kw.get("imodel") or getattr(ctx.branch, "chat_model", None)
    return getattr(getattr(model, "endpoint", model), "is_cli", False) is True


def cli_next_instruction(ctx: RunContext) -> str:
    """The instruction of a later round for a CLI agent: the run's task and
    every tool call of the run so far with the payload the model reads (the
    tool's output, or the denial or error payload), oldest first, as JSON,
    then :data:`NEXT_ROUND_INSTRUCTION`'s request to answer or ask again."""
    calls = [{"function": to_jsonable(a.function), "arguments": to_jsonable(a.raw_arguments),
              "output": to_jsonable(a.output)} for r in ctx.rounds for a in r.actions if a.decision != "deferred"]
    task = ctx.operate_kw.get("instruction")
    return (f"{CLI_NEXT_ROUND_PREFIX}\n\nTask:\n{task if isinstance(task, str) else json.dumps(to_jsonable(task))}"
            f"\n\nTool calls and their results:\n{json.dumps(calls, ensure_ascii=False)}\n\n"
            "Answer the task now, or request further tool calls if you need them.")


async def _round_through(ctx: RunContext, operate: Callable[[dict[str, Any]], Awaitable[Any]]) -> None:
    """A round run by ``operate`` (``operate_traced`` recorded or replayed);
    the trace of a round that raised is the branch's newest."""
    branch = ctx.branch
    known = len(branch.traces)
    try:
        traced = await operate(round_keywords(ctx))
    except UsageLimitExceeded as exc:
        trace = _newest(branch, known)
        if trace is None or trace.exit != "over_limit":
            raise
        ctx.rounds.append(trace)
        ctx.limit_error = exc
        return
    except BaseException:
        trace = _newest(branch, known)
        if trace is not None:
            ctx.rounds.append(trace)
        raise
    ctx.rounds.append(traced.trace)
    ctx.result = traced.result


def _newest(branch: Any, known: int) -> Trace | None:
    traces = branch.traces
    return traces[-1] if traces and len(traces) > known else None


async def round_phase(ctx: RunContext) -> None:
    """One operate() (or, in a resumed run's first round, one resume()); its
    trace joins the run's before it starts, so a round that raises is in it."""
    branch = ctx.branch
    work, decisions, ctx.work, ctx.resume = ctx.work, ctx.resume, None, None
    if work is not None:
        op = OperationContext(branch=branch, resume=work)
    elif decisions is not None and ctx.resume_with is not None:
        resume_with = ctx.resume_with
        await _round_through(ctx, lambda _kw: resume_with(decisions))
        return
    elif ctx.operate is not None:
        await _round_through(ctx, ctx.operate)
        return
    else:
        op = OperationContext(branch=branch, call_kwargs=round_keywords(ctx))
    engine, trace, clock = begin_operation(op, ctx.engine)
    ctx.rounds.append(trace)
    try:
        try:
            ctx.result = await drive(op, engine, trace, clock=clock)
        finally:
            branch.traces.append(trace)
            if work is not None:
                release(branch.suspensions, work)
    except UsageLimitExceeded as exc:
        if trace.exit != "over_limit":
            raise
        ctx.limit_error = exc
    finally:
        branch.trim_history()


# ------------------------------------------------------------------ guards

def run_phase_raised(ctx: RunContext) -> bool:
    return ctx.error is not None


def run_arguments_checked(ctx: RunContext) -> bool:
    return ctx.resume is None


def run_resume_requested(ctx: RunContext) -> bool:
    return ctx.resume is not None


def round_over_limit(ctx: RunContext) -> bool:
    return ctx.limit_error is not None


def round_deferred(ctx: RunContext) -> bool:
    last = ctx.last
    return last is not None and last.exit == "deferred"


def round_ran_no_tool(ctx: RunContext) -> bool:
    """No request of the last round was acted on (its trace never entered ``act``)."""
    last = ctx.last
    return last is None or "act" not in last.states or not last.actions


def rounds_exhausted(ctx: RunContext) -> bool:
    return len(ctx.rounds) >= int(ctx.max_rounds)


def rounds_remain(ctx: RunContext) -> bool:
    return len(ctx.rounds) < int(ctx.max_rounds)


# ------------------------------------------------------------------ outcomes

def return_last_result(ctx: RunContext) -> Any:
    return ctx.result


def raise_run_usage_limit(ctx: RunContext) -> NoReturn:
    assert ctx.limit_error is not None
    ctx.limit_error.run_trace = ctx.run_trace
    raise ctx.limit_error


def raise_max_rounds(ctx: RunContext) -> NoReturn:
    raise MaxRoundsError(ctx.max_rounds, ctx.run_trace)


def raise_run_error(ctx: RunContext) -> NoReturn:
    assert ctx.error is not None
    raise ctx.error


RUN_PHASES: dict[str, Callable[[RunContext], Any]] = {"start": start_phase, "round": round_phase}

RUN_GUARDS: dict[str, Callable[[RunContext], bool]] = {
    f.__name__: f for f in (run_phase_raised, run_arguments_checked, run_resume_requested, round_over_limit,
                            round_deferred, round_ran_no_tool, rounds_exhausted, rounds_remain)
}

RUN_OUTCOMES: dict[str, Callable[[RunContext], Any]] = {
    f.__name__: f for f in (return_last_result, raise_run_usage_limit, raise_max_rounds, raise_run_error)
}


def run_context(branch: Any, instruction: Any, response_format: Any, tools: Any, max_rounds: Any,
                operate_kw: dict[str, Any]) -> RunContext:
    """The context of ``branch.run(instruction, response_format=, tools=, max_rounds=, **operate_kw)``:
    every round is ``operate(actions=True, ...)`` with the tools ``tools`` offers
    (``True``: all registered; ``False``: actions off)."""
    if "actions" in operate_kw:
        raise ConfigurationError("run() takes no actions=: every round runs the tools tools= offers "
                                 "(tools=False: none)")
    kw: dict[str, Any] = {**operate_kw, "instruction": instruction, "actions": tools is not False}
    if response_format is not None:
        kw["response_format"] = response_format
    if tools is not True and tools is not False:
        kw["tools"] = tools
    engine = kw.pop("engine", None)
    return RunContext(branch, kw, max_rounds, engine)


#: Run keywords that hold objects (models, classes, functions): a snapshot
#: names them, and ``resume_run`` after a restore must be given them again.
OBJECT_KEYWORDS = frozenset({"chat_model", "parse_model", "middle", "response_format", "operative", "field_models",
                             "call_params", "engine", "instruct"})


def _schema_of(value: Any) -> dict[str, Any] | None:
    schema = getattr(value, "model_json_schema", None)
    return schema() if callable(schema) and isinstance(value, type) else None


def run_to_dict(ctx: RunContext, calls: list[str]) -> dict[str, Any]:
    """The JSON form of a suspended run kept in a branch snapshot (data only):
    the deferred calls it waits on, ``max_rounds``, the plain keywords, and
    the object keywords by name (a response model with its JSON schema)."""
    kw = ctx.operate_kw
    needs: dict[str, Any] = dict(ctx.needs)
    plain: dict[str, Any] = {}
    for key, value in kw.items():
        if key == "response_format" and isinstance(value, dict):
            plain[key] = to_jsonable(value)
        elif key in OBJECT_KEYWORDS:
            needs[key] = _schema_of(value)
        elif key == "tools":
            items = value if isinstance(value, (list, tuple)) else [value]
            plain[key] = [v if isinstance(v, str) else getattr(v, "name", None) or getattr(v, "__name__", repr(v))
                          for v in items]
        else:
            plain[key] = to_jsonable(value)
    engine = ctx.engine if ctx.engine is None or isinstance(ctx.engine, str) else getattr(ctx.engine, "name", None)
    return {"calls": list(calls), "max_rounds": ctx.max_rounds, "engine": engine, "keywords": plain,
            "needs": needs}


def run_from_dict(branch: Any, d: Any) -> tuple[RunContext, list[str]]:
    """Rebuild a suspended run from :func:`run_to_dict` on ``branch``; returns it and its calls.

    Raises:
        SnapshotError: not a suspended run's data.
    """
    try:
        calls = [str(c) for c in d["calls"]]
        keywords, needs = dict(d["keywords"]), dict(d.get("needs") or {})
        max_rounds, engine = d["max_rounds"], d.get("engine")
    except (KeyError, TypeError, ValueError) as exc:
        raise SnapshotError(f"malformed suspended run: {type(exc).__name__}: {safe_str(exc)}") from None
    if isinstance(max_rounds, bool) or not isinstance(max_rounds, int) or not isinstance(engine, (str, type(None))):
        raise SnapshotError("malformed suspended run: max_rounds must be an int and engine a name or null")
    return RunContext(branch, keywords, max_rounds, engine, needs=needs), calls


def resumed_keywords(ctx: RunContext, given: dict[str, Any]) -> dict[str, Any]:
    """The keywords a resumed run's rounds use: the run's, overlaid with
    ``given``; a run read from a snapshot must be given its object keywords
    again, a response model with the JSON schema it had.

    Raises:
        ResumeError: an object keyword of the run missing, or a response
            model whose schema differs from the run's.
    """
    missing = sorted(k for k in ctx.needs if k not in given)
    if missing:
        raise ResumeError(f"this run was read from a snapshot: give its keywords {missing} to resume_run() "
                          "again (objects are never read from a file)")
    for key, schema in ctx.needs.items():
        if schema is not None and _schema_of(given[key]) != schema:
            raise ResumeError(f"{key}= is not the model the run was suspended with: its JSON schema differs")
    return {**ctx.operate_kw, **given}


def _tables(definition: MachineDefinition | None) -> dict[str, Any]:
    return {"definition": definition or run_definition(), "guards": RUN_GUARDS, "phases": RUN_PHASES,
            "outcomes": RUN_OUTCOMES, "failure_guard": RUN_FAILURE_GUARD}


_ENGINES: dict[str, type[engines.CompiledEngine] | type[engines.TransitionsEngine]] = {
    "compiled": engines.CompiledEngine, "transitions": engines.TransitionsEngine,
}


@functools.cache
def run_engine(name: str = "compiled") -> Engine:
    """The process-wide engine of that name (``compiled``, ``transitions``) over the run machine."""
    try:
        cls = _ENGINES[name]
    except KeyError:
        raise ConfigurationError(f"unknown engine {name!r}; known: {sorted(_ENGINES)}") from None
    return cls(**_tables(None))


def _engine_name(engine: Any) -> str:
    """The run engine's name for an operate engine given by name or instance."""
    if engine is None:
        return "compiled"
    return engine if isinstance(engine, str) else str(getattr(engine, "name", "compiled"))


async def run_loop(ctx: RunContext) -> Ran:
    """Drive the run machine on ``ctx``: its rounds on the branch's (or
    ``ctx.engine``'s) engine, the loop itself on the engine of the same name."""
    chosen = run_engine(_engine_name(ctx.engine if ctx.engine is not None else ctx.branch.engine))
    clock = current_clock()
    definition = chosen.definition
    trace = started_trace(definition.name, chosen.name, clock.time(), definition.initial, {}, [])
    run_trace = ctx.run_trace = RunTrace(trace, ctx.rounds)
    if observe.observers:  # one observed step for the whole run; each round is an observed operation
        facts: Mapping[str, Any] = {"branch.id": str(ctx.branch.id), "max_rounds": ctx.max_rounds,
                                    "branch": ctx.branch, "run_trace": run_trace,
                                    "chat_model": ctx.operate_kw.get("chat_model") or ctx.branch.chat_model}
        result = await observe.observe_step("run", _noted(ctx, chosen, trace), **facts)
    else:
        result = await drive(ctx, chosen, trace, clock=clock, as_operation=False)
    return Ran(result, run_trace)


async def _noted(ctx: RunContext, engine: Engine, trace: Trace) -> Any:
    """The run driven inside its observed step; its end (exit, rounds) is
    told to the observers as the note ``run_end`` while the step is current."""
    try:
        return await drive(ctx, engine, trace, as_operation=False)
    finally:
        observe.note("run_end", exit=trace.exit, rounds=len(ctx.rounds))
