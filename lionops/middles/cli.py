"""``run_and_collect``: the CLI Middle (ADR-0022 D1/D3).

One turn through a CLI agent subprocess (:mod:`lionops.endpoints.cli`),
finished exactly like the API path: :func:`~lionops.middles.common.begin_turn`
records the user turn (with the tool schemas and the request JSON schema in
the prompt, since a CLI agent has no structured-output channel), and
:func:`~lionops.middles.common.finish_turn` records the assistant message
and runs the inner parse.

The CLI's own tool calls are recorded as ``action_request`` /
``action_response`` messages (metadata ``executed_by="cli"``) and as
``cli_tool`` log entries, for provenance only: lionops never executes them.
The model's ``action_requests`` in its structured answer are left to the
coordinator, which validates the result and routes them through ``act()``
(ADR-0022 P4, D4).

With a :class:`~lionops.params.RunParam`:

- ``stream_persist``: every raw stdout chunk is appended to
  ``<persist_dir>/<run id>.jsonl`` and fsynced as it arrives, so a crash
  leaves every byte received (the file is the CLI's stdout, byte for byte);
- ``snapshot_dir``: after the turn (also a failed one),
  ``<snapshot_dir>/<branch id>.json`` is replaced atomically by
  ``branch.snapshot()``.
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path
from typing import Any, cast

import anyio.to_thread

from ..endpoints.base import AgentEndpoint
from ..endpoints.cli.records import CUT_OFF_STOP_REASONS, CLIRun, CLIToolEvent
from ..errors import CLIError, ConfigurationError
from ..models import RawOutput
from ..observability import observe
from ..params import RunParam
from ..parse import ends_inside_json, split_reasoning
from ..trace import annotate
from .common import begin_turn, finish_turn, record_assistant


def _cut_detail(endpoint: Any, run: CLIRun) -> str | None:
    """Why the answer is a cut, or ``None`` when it is whole."""
    if run.cut:
        said = f": {run.stop_detail}" if run.stop_detail else ""
        return f"the answer was cut off (stop_reason {run.stop_reason!r}){said}"
    if not getattr(endpoint, "reports_cuts", True) and ends_inside_json(run.text):
        return ("the answer ends inside a JSON value; this CLI reports no finish reason, so the answer "
                "is treated as cut off")
    return None

__all__ = ["run_and_collect", "StreamFile", "ends_inside_json", "CUT_OFF_STOP_REASONS"]


class StreamFile:
    """An append-only file that is flushed and fsynced on every write.

    ``await write(chunk)`` appends bytes; the file is created (with its
    directory) by :meth:`open`. Writes run in a worker thread and are not
    abandoned on cancellation, so every chunk handed over reaches the disk.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fh: Any = None
        self.bytes = 0

    @classmethod
    def open(cls, directory: str | os.PathLike[str], run_id: str) -> StreamFile:
        """Create ``<directory>/<run_id>.jsonl`` (raises ``OSError`` if it cannot)."""
        path = Path(directory) / f"{run_id}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        stream = cls(path)
        stream._fh = open(path, "ab", buffering=0)  # noqa: SIM115 - closed by close()
        return stream

    def _append(self, chunk: bytes) -> None:
        self._fh.write(chunk)
        os.fsync(self._fh.fileno())

    async def write(self, chunk: bytes) -> None:
        await anyio.to_thread.run_sync(self._append, chunk)
        self.bytes += len(chunk)

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


def _endpoint_of(branch: Any, chat_param: Any) -> AgentEndpoint:
    """The :class:`~lionops.endpoints.base.AgentEndpoint` of the call's model."""
    model = getattr(chat_param, "imodel", None) or getattr(branch, "chat_model", None)
    endpoint = getattr(model, "endpoint", model)
    if endpoint is None or not getattr(endpoint, "is_cli", False) or not callable(getattr(endpoint, "run", None)):
        raise ConfigurationError(
            "run_and_collect needs a CLI-backed model: pass chat_model=iModel(provider='claude_code', "
            "cli_command=[...]) or middle= to operate()"
        )
    return cast(AgentEndpoint, endpoint)


def _system_text(branch: Any) -> str | None:
    """The branch's system message as text (sent as the CLI's system prompt addition)."""
    for message in branch.messages:
        if message.role == "system" and message.content is not None:
            return message.content if isinstance(message.content, str) else str(message.content)
    return None


def _run_id(branch: Any) -> str:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    return f"{stamp}-{str(branch.id)[:8]}-{uuid.uuid4().hex[:8]}"


def _recorder(branch: Any, provider: str) -> Any:
    """Record a CLI tool event as a message and a log entry (never executed here)."""

    def record(event: CLIToolEvent) -> None:
        if observe.observers:  # instrumentation seam
            observe.note("cli_tool", event=event)
        meta: dict[str, Any] = {"executed_by": "cli", "provider": provider, "call_id": event.call_id}
        if event.parent is not None:
            meta["parent_call_id"] = event.parent
        if event.kind == "request":
            branch.messages.add_action_request(
                event.function, event.arguments, sender=provider, recipient=event.function, metadata=meta,
            )
        else:
            meta["is_error"] = event.is_error
            branch.messages.add_action_response(
                event.function, event.arguments, event.output,
                sender=event.function, recipient=provider, metadata=meta,
            )
        branch.logs.log("cli_tool", {"kind": event.kind, "function": event.function,
                                     "call_id": event.call_id, "provider": provider, "branch": branch.id})

    return record


def _facts(run: CLIRun | None, stream: StreamFile | None, snapshot: Path | None) -> dict[str, Any]:
    facts: dict[str, Any] = run.facts() if run is not None else {}
    if stream is not None:
        facts["stream_path"] = str(stream.path)
    if snapshot is not None:
        facts["snapshot_path"] = str(snapshot)
    return facts


async def run_and_collect(
    branch: Any,
    instruction: Any,
    chat_param: Any,
    parse_param: Any = None,
    clear_messages: bool = False,
    skip_validation: bool = False,
) -> Any:
    """Run one CLI turn and return the parsed answer (a Middle, ADR-0022 D3).

    The endpoint is ``chat_param.imodel`` or ``branch.chat_model`` (must be
    CLI-backed). The branch's system message, if any, goes to the CLI as its
    system prompt addition (else the endpoint's ``system``). Earlier turns
    are not replayed: each call is a new CLI session. Messages recorded, in order: the user turn (instruction,
    guidance, context, tool schemas, request JSON schema), the CLI's own tool
    calls (provenance, ``executed_by="cli"``), the assistant answer with
    metadata ``usage`` (token counts), ``cost_usd`` (US dollars, when the
    CLI reports it) and ``cli`` (session, exit code, stream counts, stream
    and snapshot paths). The same facts are put on the trace with
    :func:`lionops.trace.annotate` (``usage``, ``cost_usd``, ``cli``).

    Returns:
        The raw text under ``skip_validation``; else the inner parse of the
        answer (a ``parse_param.response_format`` instance, a mapping, the
        text, or ``None`` when the CLI produced no text).

    Raises:
        ConfigurationError: no CLI-backed model.
        lionops.endpoints.cli.CLIError: the CLI failed (non-zero exit,
            crash, timeout, corrupt stream, or a result with ``is_error``);
            its message carries the stderr tail and the stream path. Nothing
            is parsed and no assistant message is recorded.
        OSError: the stream file or snapshot could not be written.
    """
    endpoint = _endpoint_of(branch, chat_param)
    user = begin_turn(branch, instruction, chat_param, clear_messages, schema_in_prompt=True)
    run_param = chat_param if isinstance(chat_param, RunParam) else None
    stream: StreamFile | None = None
    snapshot: Path | None = None
    failure: CLIError | None = None
    if run_param is not None and run_param.snapshot_dir is not None:
        snapshot = Path(run_param.snapshot_dir) / f"{branch.id}.json"
    if run_param is not None and run_param.stream_persist:
        stream = StreamFile.open(run_param.persist_dir, _run_id(branch))
    try:
        try:
            run: CLIRun = await endpoint.run(
                user.content,
                system=_system_text(branch),
                options=dict(getattr(chat_param, "imodel_kw", None) or {}),
                sink=stream.write if stream is not None else None,
                on_tool=_recorder(branch, endpoint.provider),
            )
        except CLIError as exc:
            failure = exc
            exc.stream_path = str(stream.path) if stream is not None else None
            facts = _facts(exc.run, stream, snapshot)
            facts["error"] = exc.summary
            annotate(cli=facts)
            branch.logs.log("cli_error", {"provider": endpoint.provider, "error": exc.summary,
                                          "type": type(exc).__name__, "branch": branch.id, **facts})
            raise
    finally:
        if stream is not None:
            stream.close()
        if failure is not None and snapshot is not None:
            try:
                branch.snapshot(snapshot)
            except OSError as exc:  # the CLI failure stays the error raised
                branch.logs.log("snapshot_error", {"path": str(snapshot), "error": str(exc), "branch": branch.id})
    facts = _facts(run, stream, snapshot)
    tokens = run.tokens.as_dict()
    metadata: dict[str, Any] = {"usage": dict(run.usage), "tokens": tokens, "cli": facts}
    trace_facts: dict[str, Any] = {"usage": dict(run.usage), "tokens": dict(tokens), "cli": facts}
    if run.cost_usd is not None:
        metadata["cost_usd"] = trace_facts["cost_usd"] = run.cost_usd
    # Reasoning is never the answer (``<think>`` blocks, ...): kept as a fact, as on the API path.
    text, reasoning = split_reasoning(run.text)
    text = text or None
    if reasoning:
        metadata["reasoning"] = reasoning
    annotate(**trace_facts, reasoning_chars=len(reasoning) if reasoning else 0)
    cut = _cut_detail(endpoint, run)
    if cut is not None:
        # A cut-off answer is never parsed or repaired.
        result: Any = RawOutput(text or "", reason="length", detail=cut)
        record_assistant(branch, result, metadata)
    else:
        result = await finish_turn(branch, text, parse_param, skip_validation, metadata=metadata)
    if snapshot is not None:
        branch.snapshot(snapshot)
    return result
