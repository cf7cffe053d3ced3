"""``Branch.operate`` and ``operate_traced`` run one path: ``run_operation``
through ``lionops.engine.driver.drive``, on either engine, observed or not.

Each way of calling is run here on real calls (a structured answer, a
mismatch raised by the exit's outcome, a Middle that raises, text with
validation skipped, a Middle that annotates its trace) and must give the same
results, exceptions, rows (timings aside), trace meta and kept traces as the
others.
"""

from __future__ import annotations

from typing import Any

import pytest

from lionops import Branch
from lionops.engine import engines
from lionops.observability import observe
from lionops.pipeline.machine import CompiledEngine, TransitionsEngine, get_engine
from lionops.trace import Trace, Traced, annotate
from tests.helpers import Answer, ScriptedMiddle


class Boom(Exception):
    """What a scripted Middle raises."""


class AnnotatingMiddle(ScriptedMiddle):
    """A Middle that writes a fact to the trace being recorded."""

    async def __call__(self, branch: Any, instruction: Any, chat_param: Any, parse_param: Any = None,
                       clear_messages: bool = False, skip_validation: bool = False) -> Any:
        annotate(answered_by="annotating")
        return await super().__call__(branch, instruction, chat_param, parse_param, clear_messages, skip_validation)


def _raising(parse_param: Any) -> Any:
    raise Boom("middle failed")


#: name -> the keywords of one call
CALLS: dict[str, dict[str, Any]] = {
    "structured": {"response_format": Answer,
                   "middle": ScriptedMiddle(lambda pp: pp.response_format.model_validate({"answer": 2}))},
    "mismatch_raise": {"response_format": Answer, "handle_validation": "raise",
                       "middle": ScriptedMiddle({"wrong": 1})},
    "middle_raises": {"response_format": Answer, "middle": ScriptedMiddle(_raising)},
    "skip_validation": {"skip_validation": True, "middle": ScriptedMiddle("text")},
    "annotated": {"skip_validation": True, "middle": AnnotatingMiddle("text")},
}


class OwnTables(engines.CompiledEngine):
    """A compiled engine built from the shipped engine's tables (not the process-wide one)."""

    def __init__(self) -> None:
        reference = get_engine()
        super().__init__(reference.definition, guards=reference.guards, phases=_phases(reference),
                         outcomes=reference.outcomes, failure_guard="phase_raised")


def _phases(engine: Any) -> dict[str, Any]:
    return {s.handler: engine.handlers[s.name] for s in engine.definition.states if s.handler}


class Observer:
    """A real observer: its presence sends the run through the driver."""

    def __init__(self) -> None:
        self.ends: list[Any] = []

    def operation_start(self, ctx: Any, engine: Any, trace: Any) -> Any:
        return engine.name

    def operation_end(self, handle: Any, result: Any, error: BaseException | None) -> None:
        self.ends.append((handle, type(error).__name__ if error else None))


def _kind(exc: BaseException) -> Any:
    return type(exc).__name__, str(exc)


def _shape(trace: Trace) -> Any:
    return (trace.machine, trace.initial, trace.meta, trace.actions,
            [(t.trigger, t.source, t.dest, t.guards, t.error) for t in trace.transitions])


async def _call(how: str, engine: Any, kw: dict[str, Any]) -> Any:
    branch = Branch(engine=engine)
    try:
        if how == "operate":
            got: Any = ("value", await branch.operate(instruction="x", **kw))
        else:
            traced = await branch.operate_traced(instruction="x", **kw)
            assert type(traced) is Traced and traced.trace is branch.traces[-1]
            got = ("value", traced.result)
    except Exception as exc:  # noqa: BLE001 - compared between the paths
        got = ("raised", _kind(exc))
    (trace,) = branch.traces
    assert all(t.at_ns >= 0 and t.phase_ns >= 0 for t in trace.transitions)
    return got, _shape(trace)


@pytest.mark.anyio
@pytest.mark.parametrize("call", sorted(CALLS))
async def test_every_way_of_running_an_operation_gives_the_same_run(anyio_backend: str, call: str) -> None:
    kw = CALLS[call]
    runs = {}
    for engine in (None, "compiled", get_engine(), CompiledEngine(), "transitions", TransitionsEngine(),
                   OwnTables()):
        for how in ("operate", "operate_traced"):
            runs[(repr(engine), how, "direct")] = await _call(how, engine, kw)
            observer = Observer()
            observe.add_observer(observer)
            try:
                runs[(repr(engine), how, "observed")] = await _call(how, engine, kw)
            finally:
                observe.remove_observer(observer)
            assert len(observer.ends) == 1
    first = next(iter(runs.values()))
    assert all(run == first for run in runs.values()), {k: v for k, v in runs.items() if v != first}
    if call == "mismatch_raise":  # the exit's outcome raised: its row carries the error
        assert first[0][0] == "raised" and first[1][-1][-1][-1] is not None
    if call == "annotated":
        assert first[1][2]["answered_by"] == "annotating"


@pytest.mark.anyio
async def test_the_trace_names_the_engine_that_ran_it(anyio_backend: str) -> None:
    branch = Branch()
    kw = CALLS["skip_validation"]
    await branch.operate(instruction="x", **kw)
    branch.engine = "transitions"
    await branch.operate(instruction="x", **kw)
    await branch.operate(instruction="x", engine="compiled", **kw)
    assert [t.engine for t in branch.traces] == ["compiled", "transitions", "compiled"]
    branch.engine = "nope"
    with pytest.raises(ValueError, match="unknown engine 'nope'"):
        await branch.operate(instruction="x", **kw)
    assert len(branch.traces) == 3  # no engine, no trace


@pytest.mark.anyio
async def test_a_subclass_overriding_operate_traced_is_what_operate_runs(anyio_backend: str) -> None:
    seen: list[dict[str, Any]] = []

    class Recording(Branch):
        async def operate_traced(self, **kw: Any) -> Traced:
            seen.append(dict(kw))
            return await super().operate_traced(**kw)

    class Plain(Branch):
        pass

    kw = CALLS["skip_validation"]
    assert await Recording().operate(instruction="x", **kw) == await Plain().operate(instruction="x", **kw)
    assert seen == [{"instruction": "x", **kw}]


def test_a_started_trace_is_the_trace_the_constructor_builds() -> None:
    from lionops.trace import started_trace

    meta: dict[str, Any] = {"k": 1}
    actions: list[Any] = []
    fast = started_trace("operate", "compiled", 12.5, "prepare", meta, actions)
    built = Trace("operate", "compiled", 12.5, "prepare", None, meta, actions)
    assert type(fast) is Trace and fast == built and fast.meta is meta and fast.actions is actions
    for name in Trace.__slots__:
        assert getattr(fast, name) == getattr(built, name), name
    assert fast._records is not built._records and fast._rows is not built._rows
