"""use_runtime: the seams it swaps, what it restores, and the unchanged case."""

from __future__ import annotations

import pytest

from lionops.clock import RecordingClock
from lionops.runtime import Runtime, current_runtime, use_runtime


def test_named_seams_change_and_the_rest_stay() -> None:
    clock = RecordingClock()
    meta: dict[str, object] = {}
    with use_runtime(clock=clock) as outer:
        with use_runtime(trace_meta=meta) as inner:
            assert inner is current_runtime()
            assert inner.clock is clock and inner.trace_meta is meta
            assert inner.http_transport is None and inner.tool_runner is None
        assert current_runtime() is outer
    assert current_runtime().clock is None


def test_the_previous_runtime_comes_back_after_an_exception() -> None:
    before = current_runtime()
    with pytest.raises(RuntimeError), use_runtime(trace_meta={}):
        raise RuntimeError("inside")
    assert current_runtime() is before


def test_no_change_keeps_the_current_runtime() -> None:
    clock = RecordingClock()
    with use_runtime(clock=clock) as outer:
        with use_runtime(clock=clock, tool_runner=None) as same:
            assert same is outer is current_runtime()
        assert current_runtime() is outer


def test_an_unknown_seam_is_a_type_error() -> None:
    before = current_runtime()
    with pytest.raises(TypeError, match="clocks"):
        use_runtime(clocks=None)
    assert current_runtime() is before


def test_a_swapped_runtime_equals_one_built_directly() -> None:
    meta = {"k": 1}
    with use_runtime(trace_meta=meta) as rt:
        assert rt == Runtime(trace_meta=meta)
        assert repr(rt) == "Runtime(swapped=['trace_meta'])"


def test_the_trace_runtime_is_a_runtime_like_one_built_directly() -> None:
    """The driver's trace meta swap (``_enter_trace``) gives what ``use_runtime`` gives."""
    import dataclasses

    from lionops.runtime import _enter_trace, _leave

    async def runner(tool: object, kwargs: dict[str, object]) -> object:
        return None

    seams = {"http_transport": object(), "cli_transport": print, "tool_runner": runner,
             "clock": RecordingClock(), "before_dispatch": len}
    for outer in ({}, seams):
        meta: dict[str, object] = {}
        with use_runtime(**outer) as before:
            token = _enter_trace(meta)
            try:
                rt = current_runtime()
                with use_runtime(trace_meta=meta) as swapped:
                    assert rt == swapped
                assert type(rt) is Runtime and isinstance(rt, Runtime)
                assert rt == Runtime(**outer, trace_meta=meta) and rt != before
                built = Runtime(**outer, trace_meta=meta)
                assert all(getattr(rt, f.name) is getattr(built, f.name) for f in dataclasses.fields(Runtime))
                assert repr(rt) == repr(Runtime(**outer, trace_meta=meta))
                with pytest.raises(dataclasses.FrozenInstanceError):
                    rt.trace_meta = {}  # type: ignore[misc]
            finally:
                _leave(token)
            assert current_runtime() is before
