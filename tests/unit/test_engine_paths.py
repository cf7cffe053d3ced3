"""The compiled engine gives, through the driver's one loop, the runs the reference engine gives.

Both are driven here over the shipped definition with tables of plain
functions (guards that read a script, phases that record their calls, raise
or wait), on every path and every rare firing: a phase raising in each
state, each guard raising, no guard holding in each state, cancellation, a
clock that fails mid-row, observers on. Rows (timings aside), outcomes,
exceptions and their chaining must be equal.
"""

from __future__ import annotations

import itertools
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from lionops.clock import Clock, use_clock
from lionops.engine import engines
from lionops.engine.definition import default_definition, parse_definition
from lionops.engine.driver import drive, new_trace
from lionops.errors import InternalInvariantError
from lionops.observability import observe
from lionops.pipeline.machine import CompiledEngine, TransitionsEngine

D = default_definition()

#: The guards that hold on the longest path (every phase runs).
HAPPY = {"preparation_succeeded", "schema_published", "adapter_awaited_once", "validation_passed",
         "requests_present", "all_requests_acted", "result_enriched"}


class Phase(Exception):
    """What a scripted phase raises."""


class GuardBug(Exception):
    """What a scripted guard raises."""


class Ctx:
    """A context for the driver: an ``error`` and a script of guard values."""

    def __init__(self, values: dict[str, Any], raising: str | None = None, cancels: str | None = None) -> None:
        self.error: BaseException | None = None
        self.values = values
        self.raising = raising
        self.cancels = cancels
        self.scope = anyio.CancelScope()
        self.calls: list[str] = []

    def guard(self, name: str) -> bool:
        self.calls.append(f"guard:{name}")
        value = self.values[name]
        if isinstance(value, BaseException):
            raise type(value)(*value.args)  # a fresh exception each time, so chaining shows
        return bool(value)


def _guards() -> dict[str, Any]:
    guards: dict[str, Any] = {name: (lambda ctx, n=name: ctx.guard(n)) for name in D.guard_names}

    def phase_raised(ctx: Ctx) -> bool:
        ctx.calls.append("guard:phase_raised")
        if ctx.values.get("phase_raised") is not None:
            raise GuardBug(*ctx.values["phase_raised"].args)
        return ctx.error is not None

    guards["phase_raised"] = phase_raised
    return guards


def _phases() -> dict[str, Any]:
    def phase(name: str) -> Any:
        async def run(ctx: Ctx) -> None:
            ctx.calls.append(f"phase:{name}")
            if ctx.cancels == name:
                ctx.scope.cancel()
                await anyio.lowlevel.checkpoint()
            if ctx.raising == name:
                raise Phase(name)
        return run

    return {s.handler: phase(s.handler) for s in D.states if s.handler}


def _outcomes() -> dict[str, Any]:
    def outcome(name: str) -> Any:
        def run(ctx: Ctx) -> Any:
            if name.startswith("raise"):
                raise ctx.error if ctx.error is not None else RuntimeError(name)
            return name
        return run

    return {name: outcome(name) for name in D.outcome_names}


TABLES = {"guards": _guards(), "phases": _phases(), "outcomes": _outcomes()}
ENGINES = (CompiledEngine(**TABLES), TransitionsEngine(**TABLES))


def _kind(exc: BaseException | None) -> Any:
    if exc is None:
        return None
    return (type(exc).__name__, str(exc), _kind(exc.__context__), _kind(exc.__cause__))


async def _run(engine: Any, ctx: Ctx) -> tuple[Any, ...]:
    trace = new_trace(engine, {})
    try:
        got: Any = ("value", await drive(ctx, engine, trace))
    except Exception as exc:  # noqa: BLE001 - compared between the engines
        got = ("raised", _kind(exc))
    rows = [(t.trigger, t.source, t.dest, t.guards, t.error) for t in trace.transitions]
    assert all(t.at_ns >= 0 and t.phase_ns >= 0 for t in trace.transitions)
    return got, rows, ctx.calls, _kind(ctx.error)


async def _both(make: Any) -> tuple[Any, ...]:
    results = [await _run(engine, make()) for engine in ENGINES]
    assert results[0] == results[1]
    return results[0]


def _values(**changes: Any) -> dict[str, Any]:
    values: dict[str, Any] = {name: name in HAPPY for name in D.guard_names if name != "phase_raised"}
    values.update(changes)
    return values


@pytest.mark.anyio
async def test_every_exit_of_every_guard_combination_is_the_same_run(anyio_backend: str) -> None:
    """Each guard's value flipped alone and in pairs: every transition of the machine fires."""
    names = sorted(_values())
    fired = set()
    for flips in itertools.chain(((),), ((n,) for n in names), itertools.combinations(names, 2)):
        values = _values(**{n: n not in HAPPY for n in flips})
        got, rows, _, _ = await _both(lambda v=values: Ctx(v))
        fired.update(row[0] for row in rows)
    assert fired == set(D.triggers)


@pytest.mark.anyio
@pytest.mark.parametrize("state", [s.name for s in D.states if s.handler])
async def test_a_phase_raising_in_each_state_fails_the_same_way(anyio_backend: str, state: str) -> None:
    got, rows, calls, error = await _both(lambda: Ctx(_values(), raising=state))
    assert got == ("raised", ("Phase", state, None, None))
    assert rows[-1][:3] == ("failed", state, "raised") and rows[-1][4] == f"Phase: {state}"


@pytest.mark.anyio
@pytest.mark.parametrize("guard", sorted(D.guard_names))
async def test_each_guard_raising_fails_its_phase_the_same_way(anyio_backend: str, guard: str) -> None:
    """A guard's exception becomes the error; when the failure guard itself
    raises, its second exception propagates, chained to the first."""
    state = next((t.source for t in D.transitions if t.guard == guard and t.source in D.nonterminal), "prepare")
    before = [t.guard for t in D.candidates(state)]
    before = before[1:before.index(guard)] if guard in before else []  # the guards evaluated first
    values = _values(**{name: False for name in before}, **{guard: GuardBug(guard)})
    got, rows, calls, error = await _both(lambda: Ctx(values))
    assert f"guard:{guard}" in calls
    if guard == "phase_raised":
        assert got == ("raised", ("GuardBug", guard, ("GuardBug", guard, None, None), None))  # chained
        assert rows == []
    else:
        assert got == ("raised", ("GuardBug", guard, None, None))
        assert rows[-1] == ("failed", state, "raised", {"phase_raised": True}, f"GuardBug: {guard}")


@pytest.mark.anyio
@pytest.mark.parametrize("state", D.nonterminal)
async def test_no_guard_holding_in_each_state_is_the_same_invariant_error(anyio_backend: str, state: str) -> None:
    off = {t.guard: False for t in D.candidates(state) if t.guard != "phase_raised"}
    got, rows, calls, error = await _both(lambda: Ctx(_values(**off)))
    assert got[0] == "raised" and got[1][0] == "InternalInvariantError"
    source, trigger, dest, guards, message = rows[-1][1], rows[-1][0], rows[-1][2], rows[-1][3], rows[-1][4]
    assert (source, trigger, dest) == (state, "failed", "raised")
    assert list(guards) == list(dict.fromkeys(t.guard for t in D.candidates(state)))
    assert message is not None and message.startswith("InternalInvariantError")


@pytest.mark.anyio
async def test_no_guard_holding_and_then_the_failure_guard_raising_propagates(anyio_backend: str) -> None:
    def phase_raised(ctx: Ctx) -> bool:
        if isinstance(ctx.error, InternalInvariantError):
            raise GuardBug("after the invariant error")
        return ctx.error is not None

    tables = dict(TABLES, guards=dict(TABLES["guards"], phase_raised=phase_raised))
    for engine_cls in (CompiledEngine, TransitionsEngine):
        engine = engine_cls(**tables)
        trace = new_trace(engine, {})
        with pytest.raises(GuardBug, match="after the invariant error") as info:
            await drive(Ctx(_values(validation_passed=False)), engine, trace)
        assert info.value.__context__ is None
        assert trace.path() == (("prepare", "prepared", "schema"), ("schema", "schema_ready", "adapter"),
                                ("adapter", "adapter_returned", "validate"))


@pytest.mark.anyio
@pytest.mark.parametrize("state", [s.name for s in D.states if s.handler])
async def test_cancellation_in_each_phase_is_recorded_and_re_raised(anyio_backend: str, state: str) -> None:
    seen = []
    for engine in ENGINES:
        ctx = Ctx(_values(), cancels=state)
        trace = new_trace(engine, {})
        with ctx.scope:
            await drive(ctx, engine, trace)
        assert ctx.scope.cancelled_caught
        assert ctx.error is not None and isinstance(ctx.error, anyio.get_cancelled_exc_class())
        seen.append([(t.trigger, t.source, t.dest, t.guards) for t in trace.transitions])
        assert seen[-1][-1][:3] == ("failed", state, "raised")
    assert seen[0] == seen[1]


class FailingClock(Clock):
    """A real clock whose trace timer fails on one read."""

    def __init__(self, fail_at: int) -> None:
        self.reads = 0
        self.fail_at = fail_at

    def perf_counter_ns(self) -> int:  # type: ignore[override]
        self.reads += 1
        if self.reads == self.fail_at:
            raise OSError(f"read {self.reads}")
        return self.reads


@pytest.mark.anyio
@pytest.mark.parametrize("fail_at", range(1, 20))
async def test_a_clock_failing_mid_run_is_not_taken_for_a_guard(anyio_backend: str, fail_at: int) -> None:
    """What the row's clock read raises propagates unchanged: it never fails the phase."""
    results = []
    for engine in ENGINES:
        ctx = Ctx(_values())
        trace = new_trace(engine, {})
        with use_clock(FailingClock(fail_at)):
            try:
                await drive(ctx, engine, trace)
            except OSError as exc:
                outcome: Any = _kind(exc)
            else:
                outcome = "returned"
        results.append((outcome, [(t.trigger, t.at_ns, t.phase_ns) for t in trace.transitions], _kind(ctx.error)))
    assert results[0] == results[1]
    assert results[0][2] is None  # the context never holds the clock's error


class Recorder:
    """A real observer that records what it is told."""

    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []

    def operation_start(self, ctx: Any, engine: Any, trace: Any) -> Any:
        self.events.append(("start", engine.name))
        return engine.name

    def operation_end(self, handle: Any, result: Any, error: BaseException | None) -> None:
        self.events.append(("end", (handle, result, _kind(error))))


@pytest.mark.anyio
@pytest.mark.parametrize("raising", [None, "adapter"])
async def test_observers_see_the_same_operation_on_both_engines(anyio_backend: str, raising: str | None) -> None:
    results = []
    for engine in ENGINES:
        recorder = Recorder()
        observe.add_observer(recorder)
        try:
            results.append((await _run(engine, Ctx(_values(), raising=raising)), recorder.events))
        finally:
            observe.remove_observer(recorder)
    (compiled, compiled_events), (reference, reference_events) = results
    assert compiled == reference
    assert [e[0] for e in compiled_events] == ["start", "end"]
    assert compiled_events[1][1][1:] == reference_events[1][1][1:]


@pytest.mark.anyio
async def test_each_record_has_its_own_guards(anyio_backend: str) -> None:
    """Rows share their constant part between runs; the records made of them never do."""
    engine = ENGINES[0]
    first, second = new_trace(engine, {}), new_trace(engine, {})
    for trace in (first, second):
        await drive(Ctx(_values()), engine, trace)
    first.transitions[0].guards["phase_raised"] = True
    assert second.transitions[0].guards == {"phase_raised": False, "preparation_succeeded": True}
    third = new_trace(engine, {})
    await drive(Ctx(_values()), engine, third)
    assert third.transitions[0].guards == {"phase_raised": False, "preparation_succeeded": True}


LOOP = parse_definition({
    "machine": {"name": "loop", "initial": "work", "terminals": ["done", "broken"]},
    "states": [{"name": "work", "handler": "work"}, {"name": "check"},
               {"name": "done", "terminal": True}, {"name": "broken", "terminal": True}],
    "transitions": [
        {"trigger": "failed", "source": "*", "dest": "broken", "guard": "phase_raised", "outcome": "raise_error"},
        {"trigger": "again", "source": "work", "dest": "work", "guard": "more"},
        {"trigger": "worked", "source": "work", "dest": "check", "guard": "enough"},
        {"trigger": "back", "source": "check", "dest": "work", "guard": "redo"},
        {"trigger": "finished", "source": "check", "dest": "done", "guard": "checked", "outcome": "value"},
    ],
})


def _loop_engines() -> tuple[Any, ...]:
    guards = {
        "phase_raised": lambda ctx: ctx.error is not None,
        "more": lambda ctx: ctx.runs % 3 != 0,
        "enough": lambda ctx: True,
        "redo": lambda ctx: ctx.runs < 6,
        "checked": lambda ctx: True,
    }
    tables = {"guards": guards, "phases": {"work": _counting}, "outcomes": {"raise_error": _reraise,
                                                                           "value": lambda ctx: ctx.runs}}
    return tuple(cls(LOOP, **tables, failure_guard="phase_raised")
                 for cls in (engines.CompiledEngine, engines.TransitionsEngine))


class Runs:
    """The context of the loop machine: how often ``work`` ran."""

    def __init__(self) -> None:
        self.error: BaseException | None = None
        self.runs = 0


async def _counting(ctx: Runs) -> None:
    ctx.runs += 1


def _reraise(ctx: Runs) -> Any:
    assert ctx.error is not None
    raise ctx.error


@pytest.mark.anyio
@pytest.mark.parametrize("fail_at", [None, *range(1, 30)])
async def test_loops_back_into_the_same_and_an_earlier_state_run_the_same(anyio_backend: str,
                                                                          fail_at: int | None) -> None:
    """A transition back into its own state and one to an earlier state; a
    clock failing on any read (the rows of the loop included) propagates."""
    results = []
    for engine in _loop_engines():
        ctx = Runs()
        trace = new_trace(engine, {})
        with use_clock(FailingClock(fail_at or 10**6)):
            try:
                got: Any = await drive(ctx, engine, trace)
            except OSError as exc:
                got = _kind(exc)
        results.append((got, [(t.trigger, t.source, t.dest, t.guards, t.at_ns) for t in trace.transitions],
                        _kind(ctx.error)))
    assert results[0] == results[1]
    assert results[0][2] is None
    if fail_at is None:
        assert results[0][0] == 6
        assert [row[0] for row in results[0][1]] == [
            "again", "again", "worked", "back", "again", "again", "worked", "finished"]
