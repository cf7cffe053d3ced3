"""Pydantic models of the ADR-0022 vocabulary.

``Instruct`` (D1), ``Reason``, ``ActionRequestModel`` and
``ActionResponseModel`` (D2), and :class:`RawOutput`, the text an adapter
returns when the model output must not be coerced (cut-off or refusal).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, JsonValue, PrivateAttr, field_validator, model_validator
from pydantic.json_schema import SkipJsonSchema

from ._invalid_mark import invalid_reason
from ._json import loads as bounded_json
from ._text import safe_str, summarize
from .errors import TraceFormatError
from .messages import to_jsonable

__all__ = [
    "HashableModel",
    "Instruct",
    "Reason",
    "ActionRequestModel",
    "ActionResponseModel",
    "ActionRecord",
    "Decision",
    "DECISIONS",
    "RawOutput",
    "REQUEST_KEY_ALIASES",
    "normalize_request_keys",
    "decode_arguments",
]


class HashableModel(BaseModel):
    """A pydantic model hashable by its JSON dump (ADR-0022 D1/D2 base)."""

    def __hash__(self) -> int:
        return hash(self.model_dump_json())


class Instruct(HashableModel):
    """The normalized instruction (ADR-0022 D1)."""

    instruction: str | None = None
    guidance: JsonValue | None = None
    context: JsonValue | None = None
    reason: bool | None = None
    actions: bool | None = None
    action_strategy: Literal["sequential", "concurrent"] | None = None


def _schema_description(text: str) -> ConfigDict:
    """Config giving the JSON schema shown to models its own description,
    so class docstrings (written for developers) never reach a provider."""
    return ConfigDict(json_schema_extra=lambda schema, cls: schema.update(description=text))


class Reason(HashableModel):
    """The model's stated reasoning, added by ``reason=True`` (ADR-0022 D2)."""

    model_config = _schema_description("Your reasoning: a short title, the content, and your confidence from 0 to 1.")

    title: str | None = None
    content: str | None = None
    confidence_score: float | None = None


#: Explicit key aliases a model may use in an action request .
#: Applied by table lookup, never by fuzzy matching.
REQUEST_KEY_ALIASES: dict[str, str] = {
    "name": "function",
    "parameters": "arguments",
    "args": "arguments",
    "input": "arguments",
}


_ALIAS_KEYS = frozenset(REQUEST_KEY_ALIASES)


def normalize_request_keys(data: Mapping[str, Any]) -> dict[str, Any]:
    """Rename aliased keys (``name`` → ``function``, ...) unless the canonical key exists."""
    out = dict(data)
    if _ALIAS_KEYS.isdisjoint(out):  # nothing to rename (the usual request)
        return out
    for alias, canonical in REQUEST_KEY_ALIASES.items():
        if alias in out and canonical not in out:
            out[canonical] = out.pop(alias)
    return out


def decode_arguments(value: Any) -> dict[str, Any]:
    """Decode action-request arguments into a JSON object .

    A dict is returned as is; ``None`` becomes ``{}``; a string is decoded as
    JSON, twice at most (double encoding). Anything that is not, or does not
    decode to, a JSON object raises ``ValueError`` naming the non-object value.
    """
    if type(value) is dict:  # the usual request: already an object
        return value
    if value is None:
        return {}
    current = value
    for _ in range(3):
        if isinstance(current, dict):
            return current
        if isinstance(current, str):
            try:
                # raw control characters in strings are text; depth bounded (JSONLimitError is a ValueError)
                current = bounded_json(current, strict=False, what="arguments")
            except ValueError as exc:
                raise ValueError(
                    f"arguments are not a JSON object: {_preview(value)} ({getattr(exc, 'msg', exc)})"
                ) from None
            except RecursionError:  # hostile nesting must not escape act()
                raise ValueError(
                    f"arguments are not a JSON object: {_preview(value)} (nested too deep)"
                ) from None
            continue
        break
    raise ValueError(
        f"arguments must be a JSON object, got {type(current).__name__}: {_preview(value)}"
    )


def _preview(value: Any, limit: int = 200) -> str:
    return summarize(value, limit, use_repr=True)


class ActionRequestModel(HashableModel):
    """One action the model proposes (ADR-0022 D2/D4).

    ``function`` is a registered tool name; ``arguments`` a JSON object.
    Arguments given as JSON text are decoded; aliases ``name``,
    ``parameters``, ``args``, ``input`` are normalized. A string that is
    not a JSON object, a list or a scalar fails validation.

    ``invalid`` marks a request that must not run: the parse sets it on
    requests recovered from repaired JSON, the Middles on a native tool call
    whose arguments could not be decoded; ``act()`` answers such a request
    with an error payload and never invokes the tool. Any mark but ``None``
    or ``False`` counts, kept as a reason in words. ``call_id`` is the provider's
    id of a native tool call (``tool_calls[].id``): ``act()`` puts it on the
    request's messages, so the next turn can pair each result with its call.
    Neither is part of the schema shown to the model, nor of dumps.
    """

    model_config = _schema_description(
        "One tool call: the name of a registered function and its arguments as a JSON object."
    )

    function: str | None = None
    arguments: dict[str, Any] | None = None
    invalid: SkipJsonSchema[str | None] = Field(default=None, repr=False, exclude=True)
    call_id: SkipJsonSchema[str | None] = Field(default=None, repr=False, exclude=True)

    @model_validator(mode="before")
    @classmethod
    def _aliases(cls, data: Any) -> Any:
        if isinstance(data, dict) and not _ALIAS_KEYS.isdisjoint(data):  # a key to rename
            return normalize_request_keys(data)
        return data

    @field_validator("invalid", mode="before")
    @classmethod
    def _mark(cls, value: Any) -> str | None:
        # Any mark but None or False is kept, in words (the request never
        # runs); None and False are no mark, so an answer whose request says
        # "invalid": false stays a valid answer.
        return invalid_reason(value)

    @field_validator("arguments", mode="before")
    @classmethod
    def _decode(cls, value: Any) -> Any:
        if value is None or type(value) is dict:  # nothing to decode
            return value
        return decode_arguments(value)


#: What ``act()`` decided for one action request (see :class:`ActionRecord`).
Decision: TypeAlias = Literal[
    "allowed", "denied", "invalid", "rejected", "not_offered", "error", "timed_out", "deferred", "over_limit",
]
DECISIONS: tuple[str, ...] = (
    "allowed", "denied", "invalid", "rejected", "not_offered", "error", "timed_out", "deferred", "over_limit",
)


@dataclass(frozen=True, slots=True)
class ActionRecord:
    """The one typed fact ``act()`` makes per action request (ADR-0022 D4).

    Messages, the event log, hook payloads, the trace (``Trace.actions``) and
    replay recordings are all derived from it; nothing reads a decision back
    from an output's shape.

    Attributes:
        index: position of the request in the call's request list.
        function: the requested name, as the model wrote it.
        raw_arguments: the arguments as the model wrote them, decoded from
            JSON text when they decode to an object (``"false"`` stays the
            string ``"false"``); otherwise the value as given.
        arguments: the validated keyword arguments the tool was (or would have
            been) called with; ``None`` when they never validated.
        decision: ``"allowed"`` (the tool ran and returned), ``"denied"`` (a
            gate said no, raised or returned a non-bool), ``"invalid"`` (no
            usable name or arguments), ``"rejected"`` (unknown tool, arguments
            that do not fit, or over the per-call request cap),
            ``"not_offered"`` (a registered tool not offered in this call),
            ``"error"`` (the tool, or a hook around it, raised),
            ``"timed_out"`` (the gate or the tool exceeded its bound),
            ``"deferred"`` (a gate answered ``Defer``: not run, a decision
            comes through ``Branch.resume()``), ``"over_limit"`` (the call
            would pass the branch's ``tool_calls`` limit: not invoked).
        reason: why, in words, for every decision but ``"allowed"``.
        output: the tool's return value, or the error payload the model sees.
        error_type: the exception class name when something raised.
        duration_s: seconds the tool ran (``None`` when it was not invoked).
        call_id: the provider's id of a native tool call, when known.
        invoked: whether the tool function was called.
    """

    index: int
    function: Any
    raw_arguments: Any
    arguments: dict[str, Any] | None
    decision: Decision
    reason: str | None = None
    output: Any = None
    error_type: str | None = None
    duration_s: float | None = None
    call_id: str | None = None
    invoked: bool = False

    @property
    def is_error(self) -> bool:
        """Every decision but ``"allowed"`` is an error (from the decision, never the output)."""
        return self.decision != "allowed"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-compatible dict of every field."""
        return {
            "index": self.index, "function": to_jsonable(self.function),
            "raw_arguments": to_jsonable(self.raw_arguments), "arguments": to_jsonable(self.arguments),
            "decision": self.decision, "reason": self.reason, "output": to_jsonable(self.output),
            "error_type": self.error_type, "duration_s": self.duration_s, "call_id": self.call_id,
            "invoked": self.invoked,
        }

    @classmethod
    def from_dict(cls, d: Any) -> ActionRecord:
        """The inverse of :meth:`to_dict`. Raises ``ValueError`` on a malformed record."""
        index = d.get("index") if isinstance(d, dict) else None
        if type(index) is not int or d.get("decision") not in DECISIONS:
            raise TraceFormatError(f"not an action record: {summarize(d, use_repr=True)}")
        args = d.get("arguments")
        duration = d.get("duration_s")
        return cls(
            index=d["index"], function=d.get("function"), raw_arguments=d.get("raw_arguments"),
            arguments=args if isinstance(args, dict) else None, decision=d["decision"],
            reason=d.get("reason") if isinstance(d.get("reason"), str) else None, output=d.get("output"),
            error_type=d.get("error_type") if isinstance(d.get("error_type"), str) else None,
            duration_s=float(duration) if isinstance(duration, (int, float)) else None,
            call_id=d.get("call_id") if isinstance(d.get("call_id"), str) else None,
            invoked=d.get("invoked") is True,
        )

    def response(self) -> ActionResponseModel:
        """The ADR's ``ActionResponseModel`` of this record, carrying it as ``.record``."""
        function, arguments = self.function, self.raw_arguments
        if type(function) is str and type(arguments) is dict and _STR_ONLY.issuperset(map(type, arguments)):
            # Values validation would pass through as they are: set them
            # directly, as validation would leave them (a shallow copy of
            # the arguments, the output itself, every field set), with the record.
            out = _new_response(ActionResponseModel)
            _set_dict(out, {"function": function, "arguments": dict(arguments), "output": self.output})
            _set_fields_set(out, {"function", "arguments", "output"})
            _set_extra(out, None)
            _set_private(out, {"_record": self})
            return out
        # anything else is validated: a name that is not a str becomes one,
        # arguments that are not a dict become {}, a key that is not a str
        # its text (a JSON object's keys are text; the record keeps the original)
        if not isinstance(arguments, dict):
            arguments = {}
        elif not all(isinstance(key, str) for key in arguments):
            arguments = {key if isinstance(key, str) else safe_str(key): value for key, value in arguments.items()}
        out = ActionResponseModel(function=function if isinstance(function, str) else str(function or "unknown"),
                                  arguments=arguments, output=self.output)
        out._record = self
        return out

    def __repr__(self) -> str:
        return (f"ActionRecord(#{self.index} {self.function!r} {self.decision}"
                + (f", reason={self.reason!r}" if self.reason else "") + ")")


class ActionResponseModel(HashableModel):
    """One observed tool outcome, produced only by ``act()`` (ADR-0022 D2/D4).

    ``output`` is the tool's return value, or an error payload:
    ``{"error": "denied by governance gate", "function": ...}`` for a
    denial, ``{"error": str(exc), "type": ExcName, "message": ...}`` for a
    suppressed tool error. ``record`` is the :class:`ActionRecord` ``act()``
    made for it (``None`` for a response built by hand); equality and hash
    use the three fields only.
    """

    model_config = ConfigDict(
        arbitrary_types_allowed=True,
        json_schema_extra=lambda schema, cls: schema.update(
            description="An observed tool result, filled by the runtime."),
    )

    function: str = Field(default_factory=str)
    arguments: dict[str, Any] = Field(default_factory=dict)
    output: Any = None
    _record: ActionRecord | None = PrivateAttr(default=None)

    @property
    def record(self) -> ActionRecord | None:
        """The typed decision ``act()`` recorded for this response."""
        return self._record

    @property
    def decision(self) -> str | None:
        """``record.decision``, or ``None`` for a response built by hand."""
        return self._record.decision if self._record is not None else None

    @property
    def is_error(self) -> bool:
        """True unless ``act()`` recorded the call as ``"allowed"`` (a tool that
        returned). Read from the record, never from the output's shape: a tool
        returning ``{"error": None}`` is not an error. A response built by hand
        (no record) counts as an error only when ``output["error"]`` is set."""
        if self._record is not None:
            return self._record.is_error
        return isinstance(self.output, dict) and self.output.get("error") is not None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ActionResponseModel):
            return NotImplemented
        return (self.function, self.arguments, self.output) == (other.function, other.arguments, other.output)

    __hash__ = HashableModel.__hash__


_STR_ONLY = frozenset({str})
#: what :meth:`ActionRecord.response` makes and fills an ``ActionResponseModel`` with
_new_response = BaseModel.__new__
#: the setters of BaseModel's four instance slots (what ``object.__setattr__`` reaches for each name)
_set_dict = vars(BaseModel)["__dict__"].__set__
_set_fields_set = vars(BaseModel)["__pydantic_fields_set__"].__set__
_set_extra = vars(BaseModel)["__pydantic_extra__"].__set__
_set_private = vars(BaseModel)["__pydantic_private__"].__set__


class RawOutput(str):
    """Model text returned uncoerced, with the reason it was not parsed.

    Adapters return a ``RawOutput`` for a ``finish_reason: "length"`` cut-off
    (``reason="length"``), a refusal (``reason="refusal"``, ``detail`` the
    refusal text), or an answer the server never said was whole
    (``reason="no_finish_reason"`` or ``"unknown_finish_reason"``). A failed
    CLI result is not returned at all: it raises since text would read as a
    successful answer. It is a
    ``str``, so the caller's mismatch policy applies unchanged (ADR-0022 D3);
    under ``"raise"`` the error carries the reason.
    """

    reason: str | None
    detail: str | None

    def __new__(cls, text: str, reason: str | None = None, detail: str | None = None) -> RawOutput:
        obj = super().__new__(cls, text)
        obj.reason = reason
        obj.detail = detail
        return obj

    def __repr__(self) -> str:
        return f"RawOutput({str.__repr__(self)}, reason={self.reason!r})"

    def __reduce__(self) -> Any:
        return (RawOutput, (str(self), self.reason, self.detail))
