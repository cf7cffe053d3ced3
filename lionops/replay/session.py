"""Cassette sessions: record modes over a cassette file.

A :class:`CassetteSession` maps the n-th ``operate`` call made through it
to the n-th operation of its cassette. Record modes (the idea of vcrpy's):

- ``"none"``: replay only; a missing cassette or an operation beyond it fails;
- ``"once"`` (default): replay when the cassette exists, else record every
  operation and write it;
- ``"new_episodes"``: replay recorded operations, record those beyond them
  and append them;
- ``"all"``: record every operation, overwriting the cassette.

A failed recording does not become the truth in ``once`` and
``new_episodes`` (see :func:`~lionops.replay.run.failed_to_reach`): when a
recorded run could not reach the model (connection refused or reset, a
timeout, 5xx or 429 after the retries, a CLI agent that could not start or
timed out; also behind a Middle that raises its own error from the
endpoint's, or swallows it), its operation is not saved and the session
saves nothing more.
In ``once`` the cassette file this session wrote is removed, so the next run
records afresh; in ``new_episodes`` the file keeps the operations recorded
before the failure, and the next run records from there. The caller gets the
run's own error, with a note saying the recording was not saved. ``all``
(and :func:`record`) saves what happened, a failure included: that is how a
test of a failing endpoint is recorded on purpose.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar, Unpack, get_args

from .._redact import Redactor
from .._text import summarize
from .._version import __version__
from ..errors import ArgumentTypeError, ConfigurationError, did_you_mean
from ..governance import Approve, Deny
from ..pipeline.loop import DEFAULT_MAX_ROUNDS, RunContext, run_context
from ..run import Ran, RunTrace
from ..trace import Traced
from .cassette import (
    Cassette,
    CassetteError,
    CassetteNotFoundError,
    Operation,
    OutcomeRecord,
    RedactionRecord,
    RunRecord,
)
from .divergence import ReplayDivergence, compare_traces
from .rebuild import rebuild, rebuild_run
from .run import _outcome, compare_outcome, failed_to_reach, record_operation, replay_operation

if TYPE_CHECKING:
    from ..branch import Branch, OperateKwargs

__all__ = ["CassetteSession", "RecordMode", "RECORD_MODES", "record", "replay", "compare_run"]

logger = logging.getLogger("lionops.replay")

RecordMode = Literal["none", "once", "new_episodes", "all"]
RECORD_MODES: tuple[str, ...] = get_args(RecordMode)


class CassetteSession:
    """Record or replay ``operate()`` calls against one cassette file.

    Args:
        path: the cassette file (JSON).
        record_mode: ``"none"``, ``"once"``, ``"new_episodes"`` or ``"all"``
            (see the module docstring).
        redact: ``False`` turns off pattern, field-name and environment
            redaction (credential headers are always redacted).
        patterns: extra secret regular expressions (stored in the cassette
            and applied again on replay).
        secrets: literal secret values to redact.
        run_tools: on replay, run the real tools instead of serving their
            recorded outputs.

    Patterns stored in the file are checked as untrusted
    (:func:`~lionops.replay.pattern_problem`), except those also
    given here in ``patterns``.

    Attributes:
        recorded, replayed: operations recorded (and saved) and replayed so far.
        failed: the error of the recording that was not saved, if one failed.

    Raises:
        ValueError: an unknown record mode.
        CassetteError: the existing file is not a valid cassette.
    """

    def __init__(self, path: str | Path, record_mode: RecordMode = "once", *, redact: bool = True,
                 patterns: Iterable[str] = (), secrets: Iterable[str] = (), run_tools: bool = False) -> None:
        if record_mode not in RECORD_MODES:
            raise ConfigurationError(f"record_mode must be one of {RECORD_MODES}, "
                                     f"got {record_mode!r}{did_you_mean(record_mode, RECORD_MODES)}")
        self.path = Path(path)
        self.record_mode: RecordMode = record_mode
        self.run_tools = run_tools
        self._recorded: Cassette | None = None
        patterns = list(patterns)
        if record_mode != "all" and self.path.exists():
            self._recorded = Cassette.load(self.path, trusted_patterns=patterns)
        self.failed: BaseException | None = None
        stored = list(self._recorded.redaction.patterns) if self._recorded else []
        self.patterns = [*stored, *(p for p in patterns if p not in stored)]
        self.redactor = Redactor(patterns=tuple(self.patterns), secrets=tuple(secrets), defaults=redact, env=redact)
        self._operations: list[Operation] = list(self._recorded.operations) if self._recorded else []
        self._runs: list[RunRecord] = list(self._recorded.runs) if self._recorded else []
        self._next = 0
        self.recorded = 0
        self.replayed = 0

    @property
    def cassette(self) -> Cassette:
        """The cassette as it stands (recorded operations included)."""
        return Cassette(lionops=__version__, redaction=RedactionRecord(patterns=self.patterns),
                        operations=list(self._operations), runs=list(self._runs))

    @property
    def recording(self) -> bool:
        """Whether the next operation runs for real and is recorded (else it is replayed)."""
        recorded = len(self._recorded.operations) if self._recorded and self.record_mode != "all" else 0
        return self._next >= recorded and self._may_record()

    def _may_record(self) -> bool:
        if self.record_mode in ("all", "new_episodes"):
            return True
        return self.record_mode == "once" and self._recorded is None

    async def operate_traced(self, branch: Branch, **kw: Unpack[OperateKwargs]) -> Traced:
        """``branch.operate_traced(**kw)``, recorded or replayed by the record mode.

        Returns the ``Traced`` of the run; re-raises the run's error (a replay
        re-raises it only when the recording raised the same way).

        Raises:
            ReplayDivergence: the replay left the recorded path, or this
                operation is beyond the cassette and the mode does not record.
            CassetteNotFoundError: mode ``"none"`` and no cassette file.
        """
        return await self._operation(branch, dict(kw), None)

    async def resume_traced(self, branch: Branch, decisions: dict[str, Approve | Deny]) -> Traced:
        """``branch.resume_traced(decisions)``, recorded or replayed as one
        operation (the decisions are in its call, ``call.resume``; a replay
        compares them by call, who and why, not by call id).

        Raises what :meth:`operate_traced` and ``Branch.resume`` raise."""
        return await self._operation(branch, {}, dict(decisions))

    async def resume(self, branch: Branch, decisions: dict[str, Approve | Deny]) -> Any:
        """Like :meth:`resume_traced`, returning only the result."""
        return (await self.resume_traced(branch, decisions)).result

    async def _operation(self, branch: Branch, kw: dict[str, Any], decisions: dict[str, Any] | None) -> Traced:
        index = self._next
        self._next += 1
        recorded = self._recorded.operations if self._recorded else []
        if self.record_mode != "all" and index < len(recorded):
            self.replayed += 1
            return await replay_operation(branch, recorded[index], kw, self.redactor,
                                          operation=index, run_tools=self.run_tools, decisions=decisions)
        if not self._may_record():
            if self._recorded is None:
                raise CassetteNotFoundError(
                    f"no cassette at {self.path} (record mode {self.record_mode!r} does not record)")
            raise ReplayDivergence(
                f"{self.path} holds {len(recorded)} operation(s);"
                f" record mode {self.record_mode!r} does not record more",
                kind="operation", index=index, expected=None, actual=f"operation {index}", operation=index,
            )
        op, traced, error = await record_operation(branch, kw, self.redactor, decisions)
        if self.record_mode != "all" and failed_to_reach(op, error):
            self._discard(error or CassetteError(
                f"operation {index} returned, but its last exchange failed before the model answered"))
        elif self.failed is None:
            self._operations.append(op)
            self.recorded += 1
            self.save()
        if error is not None:
            raise error
        assert traced is not None
        return traced

    async def operate(self, branch: Branch, **kw: Unpack[OperateKwargs]) -> Any:
        """Like :meth:`operate_traced`, returning only the result."""
        return (await self.operate_traced(branch, **kw)).result

    async def run_traced(self, branch: Branch, instruction: Any = None, **kw: Any) -> Ran:
        """``branch.run_traced(instruction, **kw)`` with every round recorded or
        replayed as one operation of this cassette (by the record mode), in
        round order, and the run itself as one run of the cassette (its
        machine's trace and outcome): the cassette holds the whole run. A
        replay compares the run's trace and outcome with the recorded run's
        once it ends.

        Raises what :meth:`operate_traced` raises, and what ``Branch.run`` raises;
        ReplayDivergence (kind ``"run"``) when the replayed run leaves the recorded one."""
        args = {k: kw.pop(k) for k in ("response_format", "tools", "max_rounds") if k in kw}
        ctx = run_context(branch, instruction, args.get("response_format"), args.get("tools", True),
                          args.get("max_rounds", DEFAULT_MAX_ROUNDS), kw)
        return await self._run(branch, ctx)

    async def run(self, branch: Branch, instruction: Any = None, **kw: Any) -> Any:
        """Like :meth:`run_traced`, returning only the result."""
        return (await self.run_traced(branch, instruction, **kw)).result

    async def resume_run(self, branch: Branch, decisions: dict[str, Approve | Deny], *,
                         max_rounds: int | None = None, **operate_kw: Any) -> Ran:
        """``branch.resume_run(decisions, max_rounds=, **operate_kw)`` with its
        first round recorded or replayed as :meth:`resume_traced`, the next
        ones as :meth:`run_traced`'s, and the continued run as one run of the cassette."""
        return await self._run(branch, branch._resumed_run(decisions, max_rounds, operate_kw))

    async def _run(self, branch: Branch, ctx: RunContext) -> Ran:
        first = self._next
        recorded = self._recorded if self._recorded is not None and self.record_mode != "all" else None
        expected = recorded.run_at(first) if recorded is not None and first < len(recorded.operations) else None
        if recorded is not None and first < len(recorded.operations) and expected is None:
            raise ReplayDivergence(f"the run starts at operation {first}; the recording has no run there",
                                   kind="run", index=first, expected=None, actual=f"a run from operation {first}",
                                   operation=first)

        async def one_round(round_kw: dict[str, Any]) -> Traced:
            return await self._operation(branch, round_kw, None)

        async def resumed_round(decisions: dict[str, Any]) -> Traced:
            return await self._operation(branch, {}, decisions)

        ctx.operate, ctx.resume_with = one_round, resumed_round
        saved = len(self._operations)
        try:
            ran = await branch._run(ctx)
        except ReplayDivergence:
            raise
        except Exception as exc:
            self._end_run(ctx, first, saved, expected, None, exc)
            raise
        self._end_run(ctx, first, saved, expected, ran.result, None)
        return ran

    def _end_run(self, ctx: RunContext, first: int, saved: int, expected: RunRecord | None, result: Any,
                 error: BaseException | None) -> None:
        """After a run: in replay compare it with the recorded run; when its
        rounds were recorded, record the run."""
        run_trace = ctx.run_trace
        if run_trace is None:  # refused before the loop started
            return
        if expected is not None:
            found = compare_run(expected, run_trace, _outcome(result, error, self.redactor), operation=first,
                                outputs=not self.run_tools)
            if found is not None:
                raise found from error
            return
        rounds = len(self._operations) - saved
        if self.failed is not None or rounds != len(run_trace.rounds) or rounds == 0:
            return  # a round was not saved: the run is not a recording
        self._runs.append(RunRecord(first=saved, rounds=rounds, max_rounds=int(ctx.max_rounds),
                                    trace=self.redactor.value(run_trace.trace.to_dict()),
                                    outcome=_outcome(result, error, self.redactor)))
        self.save()

    def save(self) -> Path:
        """Write the cassette (redacted, atomically)."""
        return self.cassette.save(self.path, self.redactor)

    def _discard(self, error: BaseException) -> None:
        """A recording failed before the model answered: save nothing more;
        in ``once`` remove the file this session wrote."""
        first = self.failed is None
        self.failed = error
        if first and self.record_mode == "once":
            self.path.unlink(missing_ok=True)  # once records only when there was no file
        kept = "removed" if self.record_mode == "once" else "keeps the operations recorded before it"
        error.add_note(f"lionops: this recording failed before the model answered and was not saved "
                       f"({self.path} {kept}); the next run records afresh")
        logger.warning("%s: a recording that failed before the model answered was not saved: %s",
                       self.path, summarize(error, 200))

    def finish(self) -> None:
        """End the session: in replay, every recorded operation must have run.

        Raises:
            ReplayDivergence: recorded operations were not replayed (kind ``"operation"``).
        """
        recorded = len(self._recorded.operations) if self._recorded and self.record_mode != "all" else 0
        if self._next < recorded:
            raise ReplayDivergence(
                f"{recorded - self._next} recorded operation(s) of {self.path} were not replayed "
                f"(the run made {self._next})",
                kind="operation", index=self._next, expected=f"operation {self._next}", actual=None,
                operation=self._next,
            )

    def __repr__(self) -> str:
        return (f"CassetteSession({str(self.path)!r}, record_mode={self.record_mode!r}, "
                f"recorded={self.recorded}, replayed={self.replayed})")


async def record(path: str | Path, branch: Branch, /, *, patterns: Iterable[str] = (), secrets: Iterable[str] = (),
                 **kw: Any) -> Traced:
    """Run ``branch.operate_traced(**kw)`` for real and write its cassette to
    ``path`` (one operation; overwrites). Returns the ``Traced``; re-raises
    the run's error after writing."""
    session = CassetteSession(path, "all", patterns=patterns, secrets=secrets)
    return await session.operate_traced(branch, **kw)


async def replay(source: str | Path | Cassette, branch: Branch | None = None, /, *, operation: int = 0,
                 run_tools: bool = False, patterns: Iterable[str] = (), **kw: Any) -> Traced | Ran:
    """Replay one recorded operation, or the recorded run that starts there.

    With a ``branch`` (and the keywords of the recorded call) the caller's
    own branch, tools, gates and response model run; without one, all is
    rebuilt from the cassette (:func:`lionops.replay.rebuild.rebuild`):
    stand-in tools serving recorded outputs, a gate repeating the recorded
    decisions, the response model from its JSON schema.

    When ``operation`` is the first round of a recorded ``Branch.run()``
    (``cassette.runs``), the whole run replays: every round against its
    operation, then the run's own trace and outcome against the recorded
    run's; the keywords are ``run()``'s (``instruction``, ``response_format``,
    ``tools``, ``max_rounds``, operate keywords). Returns the replay's
    ``Ran(result, run_trace)`` then, else its ``Traced``.

    ``patterns``: the caller's own redaction patterns (trusted; a pattern
    stored in the file is accepted only when it passes
    :func:`~lionops.replay.pattern_problem` or is one of these).

    Raises:
        ReplayDivergence: the first difference from the recording.
        CassetteError: the cassette is invalid, the operation does not
            exist, or it cannot be rebuilt (a custom middle, a schema that
            cannot be made into a model, a resumed operation, which replays
            only after the one it resumes: :class:`CassetteSession`).
    """
    patterns = list(patterns)
    cassette = source if isinstance(source, Cassette) else Cassette.load(source, trusted_patterns=patterns)
    if not 0 <= operation < len(cassette.operations):
        raise CassetteError(f"the cassette has {len(cassette.operations)} operation(s); no operation {operation}")
    op = cassette.operations[operation]
    if op.call.resume is not None:
        raise CassetteError(f"operation {operation} resumes a suspended operation; it replays after the "
                            "operation it resumes, through a CassetteSession on the same branch")
    stored = list(cassette.redaction.patterns)
    redactor = Redactor(patterns=(*stored, *(p for p in patterns if p not in stored)))
    run = cassette.run_at(operation)
    if run is not None:
        replaying = _replay_run(cassette, run, branch, kw, redactor, run_tools)
        return await (_rebuilt(replaying) if branch is None else replaying)
    if branch is None:
        if kw:
            raise ArgumentTypeError("replay without a branch rebuilds the call from the cassette; pass no keywords")
        branch, kw = rebuild(op, operation=operation)
        return await _rebuilt(replay_operation(branch, op, kw, redactor, operation=operation, run_tools=run_tools))
    return await replay_operation(branch, op, kw, redactor, operation=operation, run_tools=run_tools)


_T = TypeVar("_T")

#: what a divergence of a replay rebuilt from the cassette alone adds to its message
REBUILT_HINT = ("; this replay was rebuilt from the cassette alone (stand-in tools and a gate repeating the "
                "recorded decisions): replay(path, branch, **keywords) runs your own tools, gates and response model")


async def _rebuilt(replaying: Awaitable[_T]) -> _T:
    """``replaying``'s result; a divergence says it came from a rebuilt replay."""
    try:
        return await replaying
    except ReplayDivergence as exc:
        exc.args = (f"{exc.args[0]}{REBUILT_HINT}", *exc.args[1:])
        raise


async def _replay_run(cassette: Cassette, run: RunRecord, branch: Branch | None, kw: dict[str, Any],
                      redactor: Redactor, run_tools: bool) -> Ran:
    """Replay the recorded run ``run``: each round against its operation, then the run itself."""
    ops = cassette.operations[run.first:run.first + run.rounds]
    if branch is None:
        if kw:
            raise ArgumentTypeError("replay without a branch rebuilds the run from the cassette; pass no keywords")
        branch, operate_kw = rebuild_run(ops, operation=run.first)
        ctx = RunContext(branch, operate_kw, run.max_rounds)
    else:
        args = {k: kw.pop(k) for k in ("instruction", "response_format", "tools", "max_rounds") if k in kw}
        ctx = run_context(branch, args.get("instruction"), args.get("response_format"), args.get("tools", True),
                          args.get("max_rounds", run.max_rounds), kw)
    rounds = iter(range(run.first, run.first + run.rounds))
    replayed = branch

    async def one_round(round_kw: dict[str, Any]) -> Traced:
        n = next(rounds, None)
        if n is None:
            raise ReplayDivergence(f"the run asks for round {run.rounds + 1}; the recording has {run.rounds}",
                                   kind="run", index=run.rounds, expected=None,
                                   actual=f"round {run.rounds + 1}", operation=run.first)
        return await replay_operation(replayed, cassette.operations[n], round_kw, redactor, operation=n,
                                      run_tools=run_tools)

    ctx.operate = one_round
    try:
        ran = await branch._run(ctx)
    except ReplayDivergence:
        raise
    except Exception as exc:
        found = compare_run(run, ctx.run_trace, _outcome(None, exc, redactor), operation=run.first,
                            outputs=not run_tools)
        if found is not None:
            raise found from exc
        raise
    found = compare_run(run, ran.trace, _outcome(ran.result, None, redactor), operation=run.first,
                        outputs=not run_tools)
    if found is not None:
        raise found
    return ran


def compare_run(expected: RunRecord, actual: RunTrace | None, outcome: OutcomeRecord, *, operation: int,
                outputs: bool = True) -> ReplayDivergence | None:
    """The first difference of a replayed run from the recorded one: the run
    machine's transitions (guards included), the number of rounds, then the
    outcome (kind ``"run"``, or the outcome's ``"result"``/``"error"``)."""
    if actual is None:
        return ReplayDivergence("the run did not start; the recording ran", kind="run", operation=operation)
    found = compare_traces(expected.trace_obj(), actual.trace, operation=operation)
    if found is not None:
        return ReplayDivergence(f"the run's {found.args[0].split(': ', 1)[1]}", kind="run", index=found.index,
                                expected=found.expected, actual=found.actual, operation=operation)
    if len(actual.rounds) != expected.rounds:
        return ReplayDivergence(f"the run took {len(actual.rounds)} round(s); the recording {expected.rounds}",
                                kind="run", index=len(actual.rounds), expected=str(expected.rounds),
                                actual=str(len(actual.rounds)), operation=operation)
    return compare_outcome(expected.outcome, outcome, operation=operation, outputs=outputs)
