"""Exceptions raised by lionops: one tree under :class:`LionopsError`.

Every exception lionops raises on purpose derives from :class:`LionopsError`.
Where the ADR or Python's conventions name a built-in type (``ValueError``,
``TypeError``, ``LookupError``, ``TimeoutError``, ...), the class derives
from that type too, so callers can catch either the ADR contract or the
library family::

    LionopsError
    ├── ConfigurationError (ValueError)
    │   └── MachineDefinitionError
    ├── UnknownStateError (KeyError)
    ├── ArgumentTypeError (TypeError)
    │   └── GateSignatureError
    ├── ReadOnlyError (TypeError)
    ├── NotStartedError (RuntimeError)
    ├── TraceFormatError (ValueError)
    ├── RemovedKeywordError (TypeError)
    ├── MisspelledKeywordError (TypeError)
    ├── MismatchError (ValueError)
    │   ├── RefusalError
    │   └── TruncatedOutputError
    ├── InternalInvariantError
    ├── UnknownToolError (LookupError, ValueError)
    ├── ToolNotOfferedError (LookupError)
    ├── ToolArgumentsError (ValueError)
    ├── InvalidActionRequest (ValueError)
    ├── RequestLimitError (ValueError)
    ├── ToolOutputError (TypeError)
    ├── ResumeError (ValueError)           deferred tool calls
    │   ├── UnknownCallError (LookupError)
    │   ├── CallAlreadyDecidedError
    │   └── ToolChangedError
    ├── SnapshotError (ValueError)
    ├── UsageLimitExceeded
    ├── MaxRoundsError                     Branch.run() reached max_rounds
    ├── EndpointError                      HTTP (API) endpoints
    │   ├── EndpointStatusError
    │   │   ├── EndpointAuthError
    │   │   └── EndpointRateLimitError
    │   ├── EndpointResponseError
    │   │   └── EndpointProviderError
    │   └── EndpointConnectionError
    │       └── EndpointTimeoutError (TimeoutError)
    ├── CLIError (RuntimeError)            CLI agent endpoints
    │   ├── CLIProcessError
    │   ├── CLITimeoutError (TimeoutError)
    │   ├── CLIStreamError
    │   └── CLIResultError
    ├── CassetteError (ValueError)         record and replay
    │   └── CassetteNotFoundError (FileNotFoundError)
    ├── ReplayDivergence (AssertionError)
    └── JSONLimitError (ValueError)        foreign JSON past its depth or size bound

The classes are also importable from the modules that raise them
(``lionops.tools``, ``lionops.endpoints.cli``, ``lionops.replay``, ...).
Other packages over the core keep their own branches of the tree
(``lionops.temporal.errors.DurableError``,
``lionops.observability.InstrumentationError``). No message, and no
exception chain, carries a secret.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from ._names import closest

if TYPE_CHECKING:
    from .endpoints.cli.records import CLIRun
    from .trace import Trace

__all__ = [
    "LionopsError",
    "ConfigurationError",
    "RemovedKeywordError",
    "MisspelledKeywordError",
    "MismatchError",
    "RefusalError",
    "TruncatedOutputError",
    "InternalInvariantError",
    "MachineDefinitionError",
    "UnknownStateError",
    "ArgumentTypeError",
    "GateSignatureError",
    "ReadOnlyError",
    "NotStartedError",
    "TraceFormatError",
]


def did_you_mean(name: Any, known: Iterable[str]) -> str:
    """`` " (did you mean 'a' or 'b'?)"`` for the names of ``known`` closest to
    ``name`` (at most three), or ``""`` when none is close."""
    found = closest(name, known) if isinstance(name, str) else []
    if not found:
        return ""
    return " (did you mean " + " or ".join(repr(n) for n in found) + "?)"


class LionopsError(Exception):
    """Base class of lionops' own exceptions."""


class ConfigurationError(ValueError, LionopsError):
    """A call or object is configured in a way the pipeline cannot run (a ValueError).

    Raised, for example, when ``act()`` dispatches with a strategy other than
    ``"sequential"`` or ``"concurrent"`` (ADR-0022 D4), or when no endpoint is
    configured for the selected adapter (D3).
    """


class BaseURLError(ConfigurationError):
    """A ``base_url`` that cannot be an API root, found when the model is built.

    Attributes:
        fault: what is wrong: ``"space"`` (a space or control character),
            ``"unreadable"``, ``"no_scheme"``, ``"scheme"`` (not http or https),
            ``"no_host"``, ``"port"`` (not a number, out of range, or 0) or
            ``"user_info"`` (``user:password@``, refused: pass ``api_key=``).
    """

    def __init__(self, message: str, *, fault: str) -> None:
        super().__init__(message)
        self.fault = fault


class MissingAPIKeyError(ConfigurationError):
    """A cloud provider was given no API key: neither ``api_key=`` nor its
    environment variable (nor a credential header). Raised by the first call,
    before any request is sent; local providers need no key.

    Attributes:
        variable: the environment variable to set (``OPENAI_API_KEY``, ...).
    """

    def __init__(self, message: str, *, variable: str | None) -> None:
        super().__init__(message)
        self.variable = variable


class MachineDefinitionError(ConfigurationError):
    """A state machine definition (``states/*.toml``) is inconsistent, or names a
    guard, phase handler or outcome that the code lacks. The message names the
    first fault; fix the definition (``python -m lionops diagram --check``)."""


class UnknownStateError(KeyError, LionopsError):
    """A state name that the machine does not declare (a ``KeyError``); the
    message names the closest declared states."""

    def __init__(self, name: Any, known: Iterable[str]) -> None:
        self.name = name
        self.known = list(known)
        super().__init__(f"unknown state {name!r}{did_you_mean(name, self.known)}; declared: {self.known}")

    def __str__(self) -> str:  # KeyError would show the repr of the message
        return str(self.args[0])


class ArgumentTypeError(TypeError, LionopsError):
    """A value of the wrong type was passed (a ``TypeError``).

    The message names the parameter and the type it takes; pass a value of
    that type.
    """


class GateSignatureError(ArgumentTypeError):
    """A gate check, hook handler or context provider cannot be called the way
    lionops calls it (one positional argument: the ``ToolInvocation``, the hook
    payload or the response). Refused when it is registered, so it never
    silently denies or fails later; give the function exactly one parameter
    without a default, e.g. ``def check(invocation) -> bool``."""


class ReadOnlyError(TypeError, LionopsError):
    """A shared read-only value (a mapping or list lionops hands to a gate, a
    hook or a trace reader) was changed in place. Copy it (``dict(x)``,
    ``list(x)``) and change the copy."""


class NotStartedError(RuntimeError, LionopsError):
    """An object was used before it was started (a test server's ``url`` before
    ``start()`` or its ``with`` block). Start it first."""


class TraceFormatError(ValueError, LionopsError):
    """A trace (or its JSON form) is not a valid trace of the machine: not JSON,
    an unsupported format number, a missing field, a step that is not a declared
    edge. The message names where and what; the trace was written by another
    machine or edited by hand."""


class RemovedKeywordError(TypeError, LionopsError):
    """A removed keyword (``request_model``, ``operative_model``, ``imodel``) was passed.

    ADR-0022 D1: removed names are rejected with guidance to their replacement.
    The message names the keyword and the replacement.
    """

    def __init__(self, keyword: str, replacement: str) -> None:
        self.keyword = keyword
        self.replacement = replacement
        super().__init__(
            f"'{keyword}' was removed from operate(); pass {replacement} instead"
        )


class MisspelledKeywordError(TypeError, LionopsError):
    """A leftover keyword is a near miss of a real one (``handle_validaton``).

    ADR-0022 D1 sends remaining ``operate()`` keywords to the provider as
    request options, and an API ``iModel`` sends its unknown options with
    every request; a near miss would be sent instead of taking effect, so it
    is refused before any request. The message names the keyword and the
    suggestion, never the value (which may be a key).
    """

    def __init__(self, keyword: str, suggestion: str, where: str = "operate()",
                 rest: str = "other unknown keywords are sent to the model as request options") -> None:
        self.keyword = keyword
        self.suggestion = suggestion
        super().__init__(f"{where} got an unexpected keyword {keyword!r}; did you mean {suggestion!r}? ({rest})")


class MismatchError(ValueError, LionopsError):
    """The adapter result is not an instance of the caller's model (ADR-0022 D3).

    Raised under ``handle_validation="raise"``. The message names the expected
    model and includes at most the first 200 characters of ``repr(result)``;
    for an answer that was never parsed (a ``RawOutput``), the reason and its
    detail come first, and the structured-output hint of a plain mismatch is
    left out.

    Attributes:
        expected: name of the expected model class.
        received: ``repr(result)[:200]``.
        reason: why the model output could not be coerced (``"length"``,
            ``"refusal"``, ``"no_finish_reason"``, ``"unknown_finish_reason"``,
            ...) or ``None`` for a plain mismatch.
        detail: extra text carried by the reason (the refusal text, ...).
    """

    def __init__(
        self,
        expected: str,
        received: str,
        *,
        reason: str | None = None,
        detail: str | None = None,
    ) -> None:
        self.expected = expected
        self.received = received
        self.reason = reason
        self.detail = detail
        if reason is None:
            msg = (
                f"Failed to parse LLM response into '{expected}'. "
                f"Received (truncated): {received}. "
                "Hint: verify the model supports structured JSON output "
                "(e.g. response_format / function-calling) for this provider."
            )
        else:  # the answer was never parsed: why comes first, the structured-output hint does not apply
            msg = (f"Failed to parse LLM response into '{expected}': {reason}"
                   f"{f': {detail}' if detail else ''}. Received (truncated): {received}.")
        super().__init__(msg)


class RefusalError(MismatchError):
    """The model refused; ``detail`` carries the refusal text."""


class TruncatedOutputError(MismatchError):
    """The model output was cut off at the token limit (``finish_reason: "length"``)."""


class InternalInvariantError(LionopsError):
    """The machine reached a state in which no declared guard holds (a lionops bug)."""

    def __init__(self, state: str, guards: dict[str, Any]) -> None:
        self.state = state
        self.guards = guards
        super().__init__(
            f"no guard holds in state {state!r} (evaluated: {guards}); "
            "this is a lionops bug"
        )


# --------------------------------------------------------------------------
# Endpoint (HTTP) errors, raised by API-backed iModels (the API path of ADR-0022 D3).
# Their messages never contain the API key or request headers.

__all__ += [
    "EndpointError",
    "EndpointStatusError",
    "EndpointAuthError",
    "EndpointRateLimitError",
    "EndpointResponseError",
    "EndpointProviderError",
    "EndpointConnectionError",
    "EndpointTimeoutError",
]


class EndpointError(LionopsError):
    """A model endpoint call failed.

    Attributes:
        provider: the provider name (``"openai"``, ``"vllm"``, ...).
        url: the request URL without credentials or query string.
        attempts: HTTP requests made for this call (retries included).
        retries: one ``{"status", "delay_s"}`` per retry made before the
            failure, in order (``status`` is ``None`` for a refused connection).

    The exception chain (``__cause__``, ``__context__``) is always empty: the
    HTTP library's own exceptions hold the request and its headers, so they
    are described in the message (secrets removed) and never attached.
    """

    attempts: int = 1

    def __init__(self, message: str, *, provider: str | None = None, url: str | None = None) -> None:
        self.provider = provider
        self.url = url
        self.retries: list[dict[str, Any]] = []
        super().__init__(message)


class EndpointStatusError(EndpointError):
    """The endpoint answered with an HTTP error status (4xx, or 5xx after the retries).

    Attributes:
        status: the HTTP status code.
        body: at most 300 characters of the response body, secrets removed.
        attempts: HTTP requests made for this call (retries included).
    """

    def __init__(self, message: str, *, status: int, body: str = "", attempts: int = 1,
                 provider: str | None = None, url: str | None = None) -> None:
        self.status = status
        self.body = body
        self.attempts = attempts
        super().__init__(message, provider=provider, url=url)


class EndpointAuthError(EndpointStatusError):
    """401 or 403: the key is missing, wrong or not allowed. Never retried."""


class EndpointRateLimitError(EndpointStatusError):
    """429 after the retries, or a ``Retry-After`` above the configured cap.

    Attributes:
        retry_after: the delay the server asked for, in seconds, or ``None``.
    """

    def __init__(self, message: str, *, retry_after: float | None = None, **kw: Any) -> None:
        self.retry_after = retry_after
        super().__init__(message, **kw)


class EndpointResponseError(EndpointError):
    """A 2xx answer whose body is not a Chat Completions JSON object.

    Attributes:
        unfinished: for a stream that ended with ``[DONE]`` but never sent a
            finish reason, what it carried (a ``ChatCompletion`` whose
            ``finish_reason`` is ``None``); else ``None``. It is never taken
            for a whole answer: with no response format asked for,
            ``communicate`` returns its text as an uncoerced ``RawOutput``
            (reason ``"no_finish_reason"``) and runs no tool.
    """

    unfinished: Any = None


class EndpointProviderError(EndpointResponseError):
    """A 2xx answer that carries the provider's own error: an ``error`` object
    in the body or in a stream chunk, or ``finish_reason: "error"``.

    Attributes:
        provider_message: the provider's error message (secrets removed), or ``None``.
        code: the provider's error code, when it gave one.
    """

    def __init__(self, message: str, *, provider_message: str | None = None, code: Any = None,
                 **kw: Any) -> None:
        self.provider_message = provider_message
        self.code = code
        super().__init__(message, **kw)


class EndpointConnectionError(EndpointError):
    """The endpoint could not be reached (connection refused, DNS, reset)."""


class EndpointTimeoutError(EndpointConnectionError, TimeoutError):
    """A time bound ran out (also a ``TimeoutError``).

    Attributes:
        limit: which bound: ``"timeout"`` (one read, write or connect waited
            longer than the endpoint's ``timeout``) or ``"deadline"`` (the
            whole call, retries and waits included, would outlast the
            endpoint's ``deadline``) or ``"silence_timeout"`` (a stream sent
            no ``data:`` event for the endpoint's ``silence_timeout``).
        seconds: that bound, in seconds.
        earlier_attempts: when the deadline ended a call that had already
            retried, each earlier attempt and its outcome, in order
            (``"attempt 1: EndpointStatusError (HTTP 500)"``); also named in
            the message. Empty otherwise.
    """

    earlier_attempts: list[str] = []  # noqa: RUF012 - replaced per instance, never mutated

    def __init__(self, message: str, *, limit: str = "timeout", seconds: float | None = None,
                 provider: str | None = None, url: str | None = None) -> None:
        self.limit = limit
        self.seconds = seconds
        super().__init__(message, provider=provider, url=url)


# --------------------------------------------------------------------------
# Tools and action requests (ADR-0022 D4).

__all__ += [
    "UnknownToolError",
    "ToolNotOfferedError",
    "ToolArgumentsError",
    "InvalidActionRequest",
    "RequestLimitError",
    "ToolOutputError",
]


class UnknownToolError(LookupError, ValueError, LionopsError):
    """The requested function is not a registered tool (a ``LookupError``, and a
    ``ValueError`` as ``tools=`` selectors always raised).

    The message lists the registered tools and, for a near miss, the closest
    names (``tools=["refnd"]``: ``did you mean 'refund'?``). Register the tool
    (``Branch(tools=...)``, ``branch.register_tools``) or fix the name.

    Attributes:
        name: the name asked for.
        known: the registered names, sorted.
        suggestions: the registered names closest to ``name`` (at most three).
    """

    def __init__(self, name: Any, known: Iterable[str], *, selector: bool = False) -> None:
        self.name = name
        self.known = sorted(known)
        self.suggestions = closest(name, self.known) if isinstance(name, str) else []
        hint = did_you_mean(name, self.known)
        if selector:  # a tools= selector names a tool that is not registered
            super().__init__(f"tool {name!r} is not registered{hint}")
        else:
            super().__init__(f"unknown function {name!r}{hint}; registered tools: {self.known}")


class ToolNotOfferedError(LookupError, LionopsError):
    """A registered tool that was not offered in this call (only offered tools run)."""

    def __init__(self, name: str, offered: Iterable[str], *, replaced: bool = False) -> None:
        self.name = name
        self.offered = sorted(offered)
        self.replaced = replaced
        what = "was registered anew after it was offered" if replaced else "is not offered"
        super().__init__(f"{name!r} {what} in this call; offered tools: {self.offered}")


class ToolArgumentsError(ValueError, LionopsError):
    """Arguments do not satisfy the tool's signature (validated before the call)."""

    def __init__(self, tool: str, error: ValidationError | str) -> None:
        self.tool = tool
        if isinstance(error, ValidationError):
            parts = []
            for e in error.errors(include_url=False):
                loc = ".".join(str(x) for x in e.get("loc", ())) or "(arguments)"
                parts.append(f"{loc}: {e.get('msg')}")
            detail = "; ".join(parts)
        else:
            detail = error
        super().__init__(f"invalid arguments for {tool!r}: {detail}")


class InvalidActionRequest(ValueError, LionopsError):
    """A request of valid shape whose content cannot be invoked (non-object arguments, no name)."""


class RequestLimitError(ValueError, LionopsError):
    """An action request past the per-call cap (``Branch.max_requests``): never run."""


class ToolOutputError(TypeError, LionopsError):
    """A tool returned a value that cannot be serialized to JSON (an error
    payload under ``suppress_errors``, like any tool failure)."""


# --------------------------------------------------------------------------
# Deferred tool calls, snapshots and usage limits.

__all__ += [
    "ResumeError", "UnknownCallError", "CallAlreadyDecidedError", "ToolChangedError",
    "SnapshotError", "UsageLimitExceeded",
]


class ResumeError(ValueError, LionopsError):
    """A decision that ``Branch.resume()`` refuses; nothing was run or decided."""


class UnknownCallError(LookupError, ResumeError):
    """A decision names a call id that no suspended operation of the branch holds."""

    def __init__(self, call_id: Any, pending: Iterable[str]) -> None:
        self.call_id = call_id
        self.pending = sorted(pending)
        super().__init__(f"no deferred tool call {call_id!r}; pending: {self.pending}")


class CallAlreadyDecidedError(ResumeError):
    """A decision for a deferred call that was decided before (a call runs at most once)."""

    def __init__(self, call_id: str, decided: str) -> None:
        self.call_id = call_id
        self.decided = decided
        super().__init__(f"deferred tool call {call_id!r} was already decided ({decided})")


class ToolChangedError(ResumeError):
    """The tool of an approved call is gone, or its definition or the stored
    arguments differ from what was deferred (the hash no longer matches)."""

    def __init__(self, call_id: str, function: str, detail: str) -> None:
        self.call_id = call_id
        self.function = function
        super().__init__(f"deferred call {call_id!r} to {function!r} cannot run: {detail}")


class SnapshotError(ValueError, LionopsError):
    """A branch snapshot that ``Branch.restore()`` cannot read."""


class UsageLimitExceeded(LionopsError):
    """The next model request or tool call would pass a usage limit of the branch.

    ``limit`` names it (``requests``, ``input_tokens``, ``output_tokens``,
    ``total_tokens``, ``tool_calls``, ``cost``), ``value`` is its setting and
    ``usage`` the usage so far (a dict of the same names). Raised by
    ``Branch.run()``, ``run_trace`` is the :class:`~lionops.run.RunTrace` of
    the run it stopped (exit ``over_limit``, every round's trace); ``None``
    for a single operation (its trace is ``branch.traces[-1]``)."""

    def __init__(self, limit: str, value: float, usage: dict[str, Any], run_trace: Any = None) -> None:
        self.limit = limit
        self.value = value
        self.usage = dict(usage)
        self.run_trace = run_trace
        super().__init__(f"usage limit {limit}={value!r} would be exceeded; usage so far: {self.usage}")



__all__ += ["MaxRoundsError"]


class MaxRoundsError(LionopsError):
    """``Branch.run()`` ran ``max_rounds`` rounds and the last one still acted
    on tool calls: the model was not asked again (exit ``max_rounds``).

    ``max_rounds`` is the setting; ``run_trace`` the :class:`~lionops.run.RunTrace`
    of the run (every round's trace, the last round's tool results in its actions)."""

    def __init__(self, max_rounds: int, run_trace: Any = None) -> None:
        self.max_rounds = max_rounds
        self.run_trace = run_trace
        super().__init__(f"the run reached max_rounds={max_rounds} with tool calls still being made; "
                         "raise max_rounds= or give the model what it needs to answer")

# --------------------------------------------------------------------------
# CLI agent errors, raised by CLI-backed iModels (the CLI path of ADR-0022 D3).

__all__ += ["CLIError", "CLIProcessError", "CLITimeoutError", "CLIStreamError", "CLIResultError"]


class CLIError(LionopsError, RuntimeError):
    """A CLI turn failed. The message says why and ends with the stderr tail.

    Attributes:
        provider: ``"claude_code"``, ``"codex"``, ...
        returncode: the exit status (negative: killed by that signal), or
            ``None`` when the process had not exited on its own.
        stderr_tail: the last bytes of stderr, decoded, secrets redacted.
        stream_path: the persisted JSONL stream of the run, when persisted
            (set by ``run_and_collect``).
        run: the partial :class:`~lionops.endpoints.cli.CLIRun` (events seen
            before the failure).
    """

    def __init__(self, message: str, *, provider: str | None = None, returncode: int | None = None,
                 stderr_tail: str = "", run: CLIRun | None = None) -> None:
        self.provider = provider
        self.returncode = returncode
        self.stderr_tail = stderr_tail
        self.stream_path: str | None = None
        self.run = run
        self.summary = message
        super().__init__(message)

    def __str__(self) -> str:
        text = self.summary
        if self.stream_path:
            text += f" (stream: {self.stream_path})"
        tail = self.stderr_tail.strip()
        text += f"; stderr tail: {tail!r}" if tail else "; stderr was empty"
        return text


class CLIProcessError(CLIError):
    """The CLI could not start, exited non-zero, was killed by a signal, or
    exited without a final result event (a crash mid-stream)."""


class CLITimeoutError(CLIError, TimeoutError):
    """The CLI ran past ``timeout`` seconds; its process group was killed."""


class CLIStreamError(CLIError):
    """The stdout stream is corrupt: a JSON line could not be decoded nor
    repaired. ``line`` is its 1-based stdout line number,
    ``preview`` its first 120 characters."""

    def __init__(self, message: str, *, line: int | None = None, preview: str = "", **kw: Any) -> None:
        super().__init__(message, **kw)
        self.line = line
        self.preview = preview


class CLIResultError(CLIError):
    """The CLI's final result reports failure (``is_error: true``, Codex
    ``turn.failed``), whatever the exit code.

    ``subtype`` is the result subtype (``"error_max_turns"``,
    ``"error_during_execution"``, ``"turn.failed"``, ...); the message is
    never empty.
    """

    def __init__(self, message: str, *, subtype: str | None = None, **kw: Any) -> None:
        super().__init__(message, **kw)
        self.subtype = subtype


# --------------------------------------------------------------------------
# Record and replay (``lionops.replay``).

__all__ += ["CassetteError", "CassetteNotFoundError", "ReplayDivergence"]


class CassetteError(LionopsError, ValueError):
    """A cassette is missing, unreadable, not JSON, or not a valid cassette
    (see docs/replay.md, "What is validated").

    Every malformed cassette raises this, never ``RecursionError``,
    ``KeyError`` or ``TypeError``. The message is one line: the source and
    the first problem found.

    Attributes:
        problems: every problem found, one line each (``loc: message``).
    """

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        super().__init__(message)
        self.problems: list[str] = problems if problems is not None else [message]


class CassetteNotFoundError(CassetteError, FileNotFoundError):
    """No cassette at the path and the record mode does not record."""


class ReplayDivergence(LionopsError, AssertionError):
    """A replay did not take the recorded path.

    Attributes:
        kind: what differs: ``"transition"``, ``"exchange"`` (a request the
            recording lacks), ``"unused_exchange"``, ``"tool_call"``,
            ``"unused_tool_call"``, ``"call"`` (the normalized call),
            ``"result"``, ``"error"`` or ``"operation"`` (operations beyond
            or short of the cassette).
        index: the transition index, request number, tool-call index or
            operation number the difference is at.
        expected, actual: the recorded and the replayed item, as text
            (``None`` where one side has nothing).
        operation: the operation's position in the cassette.
        traced: the replay's ``Traced`` (or ``None`` when the run raised);
            ``trace``: the replayed trace when one exists.

    A subclass of ``AssertionError`` so test runners report it as a failure.
    """

    def __init__(self, message: str, *, kind: str, index: int | None = None, expected: str | None = None,
                 actual: str | None = None, operation: int = 0) -> None:
        super().__init__(f"operation {operation}: {message}")
        self.kind = kind
        self.index = index
        self.expected = expected
        self.actual = actual
        self.operation = operation
        self.traced: Any = None
        self.trace: Trace | None = None

    def __repr__(self) -> str:
        return (f"ReplayDivergence(kind={self.kind!r}, operation={self.operation}, index={self.index}, "
                f"expected={self.expected!r}, actual={self.actual!r})")


# --------------------------------------------------------------------------
# Foreign JSON (bodies, stream events, tool-call arguments, CLI events,
# cassettes, payloads): one bounded loader, lionops._json.

__all__ += ["JSONLimitError"]


class JSONLimitError(LionopsError, ValueError):
    """Foreign JSON past a bound: nested deeper than ``maximum`` levels
    (``limit="depth"``) or longer than ``maximum`` characters
    (``limit="size"``). Raised before it is decoded, never a ``RecursionError``.

    Attributes:
        limit: ``"depth"`` or ``"size"``.
        found: the depth (or length) found; for depth, the first level past
            the bound (the scan stops there).
        maximum: the bound.
    """

    def __init__(self, message: str, *, limit: str, found: int, maximum: int) -> None:
        super().__init__(message)
        self.limit = limit
        self.found = found
        self.maximum = maximum
