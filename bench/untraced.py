"""lionops without trace recording, to measure what recording costs.

``drive_untraced`` is ``lionops.engine.driver.drive`` with everything that
only feeds the trace taken out (the Trace, its TransitionRecords, the clock
reads, the annotate() context); the phases, guards, engine and outcomes are
the production ones. Error paths are kept minimal: the benchmark scenarios
never fail.
"""

from __future__ import annotations

from typing import Any

from lionops import Branch, Traced
from lionops.engine.engines import Engine
from lionops.pipeline.context import OperationContext
from lionops.pipeline.machine import resolve_engine


async def drive_untraced(ctx: OperationContext, engine: Engine) -> Any:
    handlers, terminals = engine.handlers, engine.terminals
    run = engine.begin(ctx)
    state, fired = run.state, None
    try:
        while state not in terminals:
            handler = handlers[state]
            if handler is not None and ctx.error is None:
                try:
                    await handler(ctx)
                except Exception as exc:  # noqa: BLE001 - the failed transition takes it
                    ctx.error = exc
            fired = run.fire()[0]
            state = fired.dest
    finally:
        run.close()
    return engine.outcomes[fired.outcome](ctx)


class UntracedBranch(Branch):
    """A Branch whose ``operate()`` records no trace (benchmark only).

    Only the drive differs: the keyword handling, context and engine
    selection are Branch's own, so the difference to Branch is recording.
    """

    async def operate_traced(self, **kw: Any) -> Traced:
        kwargs = dict(kw)
        engine = kwargs.pop("engine", None)
        kwargs.setdefault("action_strategy", "concurrent")
        ctx = OperationContext(branch=self, call_kwargs=kwargs)
        try:
            return Traced(await drive_untraced(ctx, resolve_engine(engine, self.engine)), None)
        finally:
            self.trim_history()
