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
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Unpack, get_args

from .._redact import Redactor
from .._version import __version__
from ..errors import ArgumentTypeError, ConfigurationError, did_you_mean
from ..pipeline.loop import DEFAULT_MAX_ROUNDS, run_context
from ..run import Ran
from ..text import summarize
from ..trace import Traced
from .cassette import Cassette, CassetteError, CassetteNotFoundError, Operation, RedactionRecord
from .divergence import ReplayDivergence
from .rebuild import rebuild
from .run import failed_to_reach, record_operation, replay_operation

if TYPE_CHECKING:
    from ..branch import Branch, OperateKwargs

__all__ = ["CassetteSession", "RecordMode", "RECORD_MODES", "record", "replay"]

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
        self._next = 0
        self.recorded = 0
        self.replayed = 0

    @property
    def cassette(self) -> Cassette:
        """The cassette as it stands (recorded operations included)."""
        return Cassette(lionops=__version__, redaction=RedactionRecord(patterns=self.patterns),
                        operations=list(self._operations))

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
        index = self._next
        self._next += 1
        recorded = self._recorded.operations if self._recorded else []
        if self.record_mode != "all" and index < len(recorded):
            self.replayed += 1
            return await replay_operation(branch, recorded[index], dict(kw), self.redactor,
                                          operation=index, run_tools=self.run_tools)
        if not self._may_record():
            if self._recorded is None:
                raise CassetteNotFoundError(
                    f"no cassette at {self.path} (record mode {self.record_mode!r} does not record)")
            raise ReplayDivergence(
                f"{self.path} holds {len(recorded)} operation(s);"
                f" record mode {self.record_mode!r} does not record more",
                kind="operation", index=index, expected=None, actual=f"operation {index}", operation=index,
            )
        op, traced, error = await record_operation(branch, dict(kw), self.redactor)
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
        round order: the cassette holds the whole run.

        Raises what :meth:`operate_traced` raises, and what ``Branch.run`` raises."""
        args = {k: kw.pop(k) for k in ("response_format", "tools", "max_rounds") if k in kw}
        ctx = run_context(branch, instruction, args.get("response_format"), args.get("tools", True),
                          args.get("max_rounds", DEFAULT_MAX_ROUNDS), kw)

        async def one_round(round_kw: dict[str, Any]) -> Traced:
            return await self.operate_traced(branch, **round_kw)

        ctx.operate = one_round
        return await branch._run(ctx)

    async def run(self, branch: Branch, instruction: Any = None, **kw: Any) -> Any:
        """Like :meth:`run_traced`, returning only the result."""
        return (await self.run_traced(branch, instruction, **kw)).result

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
                 run_tools: bool = False, patterns: Iterable[str] = (), **kw: Any) -> Traced:
    """Replay one recorded operation.

    With a ``branch`` (and the keywords of the recorded call) the caller's
    own branch, tools, gates and response model run; without one, all is
    rebuilt from the cassette (:func:`lionops.replay.rebuild.rebuild`):
    stand-in tools serving recorded outputs, a gate repeating the recorded
    decisions, the response model from its JSON schema.

    ``patterns``: the caller's own redaction patterns (trusted; a pattern
    stored in the file is accepted only when it passes
    :func:`~lionops.replay.pattern_problem` or is one of these).

    Returns the replay's ``Traced``.

    Raises:
        ReplayDivergence: the first difference from the recording.
        CassetteError: the cassette is invalid, the operation does not
            exist, or it cannot be rebuilt (a custom middle, a schema that
            cannot be made into a model).
    """
    patterns = list(patterns)
    cassette = source if isinstance(source, Cassette) else Cassette.load(source, trusted_patterns=patterns)
    if not 0 <= operation < len(cassette.operations):
        raise CassetteError(f"the cassette has {len(cassette.operations)} operation(s); no operation {operation}")
    op = cassette.operations[operation]
    if branch is None:
        if kw:
            raise ArgumentTypeError("replay without a branch rebuilds the call from the cassette; pass no keywords")
        branch, kw = rebuild(op, operation=operation)
    stored = list(cassette.redaction.patterns)
    redactor = Redactor(patterns=(*stored, *(p for p in patterns if p not in stored)))
    return await replay_operation(branch, op, kw, redactor, operation=operation, run_tools=run_tools)
