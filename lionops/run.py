"""The trace of one ``Branch.run()``: the run machine's own transitions
(``states/run.toml``) and the :class:`~lionops.trace.Trace` of each round.

A :class:`RunTrace` dumps to JSON and loads back like a ``Trace``: the loop's
trace is checked against the ``run`` machine, each round's against ``operate``.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

from ._limits import UsageSoFar, count_request
from .engine.definition import run_definition
from .errors import TraceFormatError
from .models import ActionRecord
from .trace import Trace, read_json

__all__ = ["RunTrace", "Ran", "RUN_TRACE_FORMAT", "round_usage", "USAGE_FIELDS"]

#: The ``format`` of :meth:`RunTrace.to_dict`.
RUN_TRACE_FORMAT = "lionops.run_trace/1"

#: What :attr:`RunTrace.usage` counts, as ``branch.usage`` names it.
USAGE_FIELDS = ("requests", "input_tokens", "output_tokens", "total_tokens", "tool_calls")


def round_usage(trace: Trace) -> dict[str, int]:
    """The usage of one round from its trace, counted as ``branch.usage``
    counts it: one request when its model was asked (``adapter_returned``
    fired) with the tokens the endpoint reported (``meta["usage"]``), and
    the tool calls that were invoked."""
    used = UsageSoFar()
    if any(t.trigger == "adapter_returned" for t in trace.transitions):
        count_request(None, used, trace.meta)
    used.tool_calls = sum(1 for a in trace.actions if a.invoked)
    return {k: int(getattr(used, k)) for k in USAGE_FIELDS}


class RunTrace:
    """The trace of one ``Branch.run()``.

    Attributes:
        trace: the run machine's own trace (states ``start``, ``round`` ...,
            exit ``answered``, ``max_rounds``, ``deferred``, ``over_limit`` or
            ``failed``).
        rounds: one operate :class:`~lionops.trace.Trace` per round, in order.
    """

    __slots__ = ("trace", "rounds")

    def __init__(self, trace: Trace, rounds: list[Trace] | None = None) -> None:
        self.trace = trace
        self.rounds: list[Trace] = [] if rounds is None else rounds

    @property
    def exit(self) -> str | None:
        """The run's exit trigger."""
        return self.trace.exit

    @property
    def states(self) -> list[str]:
        return self.trace.states

    @property
    def actions(self) -> list[ActionRecord]:
        """The action records of every round, in order."""
        return [a for r in self.rounds for a in r.actions]

    @property
    def usage(self) -> dict[str, int]:
        """Requests, tokens and invoked tool calls, summed over the rounds."""
        total = dict.fromkeys(USAGE_FIELDS, 0)
        for r in self.rounds:
            for k, v in round_usage(r).items():
                total[k] += v
        return total

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RunTrace):
            return NotImplemented
        return (self.trace, self.rounds) == (other.trace, other.rounds)

    __hash__ = None  # type: ignore[assignment]

    def to_dict(self) -> dict[str, Any]:
        return {"format": RUN_TRACE_FORMAT, "exit": self.exit, "run": self.trace.to_dict(),
                "rounds": [r.to_dict() for r in self.rounds]}

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_dict(cls, d: Any) -> RunTrace:
        """Build from :meth:`to_dict`'s output: the loop's trace checked
        against the ``run`` machine, each round against ``operate``.

        Raises:
            TraceFormatError (a ValueError): not a run trace, or a part that is not a valid trace.
        """
        if not isinstance(d, dict):
            raise TraceFormatError(f"not a valid run trace: expected an object, got {type(d).__name__}")
        if d.get("format") != RUN_TRACE_FORMAT:
            raise TraceFormatError(f"not a valid run trace: format {d.get('format')!r}, expected {RUN_TRACE_FORMAT!r}")
        rounds = d.get("rounds")
        if not isinstance(rounds, list):
            raise TraceFormatError("not a valid run trace: rounds must be a list")
        run = Trace.from_dict(d.get("run"), run_definition())  # type: ignore[arg-type]
        out = cls(run, [Trace.from_dict(r) for r in rounds])
        if d.get("exit") != out.exit:
            raise TraceFormatError(f"not a valid run trace: exit {d.get('exit')!r} but the run ended at {out.exit!r}")
        visits = sum(1 for s in run.states if s == "round")
        # a round that failed before its operation started has no trace
        if not (visits == len(out.rounds) or (out.exit == "failed" and visits == len(out.rounds) + 1)):
            raise TraceFormatError(f"not a valid run trace: {visits} round(s) in the run but {len(out.rounds)} traces")
        return out

    @classmethod
    def from_json(cls, text: str | bytes) -> RunTrace:
        """Parse :meth:`to_json`'s output (checked as :meth:`from_dict` says)."""
        return cls.from_dict(read_json(text, "run trace"))

    def __repr__(self) -> str:
        return f"RunTrace({' -> '.join(self.states)}, exit={self.exit!r}, rounds={len(self.rounds)})"


class Ran(NamedTuple):
    """``(result, trace)`` returned by ``Branch.run_traced``."""

    result: Any
    trace: RunTrace
