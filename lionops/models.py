"""Pydantic models of the ADR-0022 vocabulary.

``Instruct`` (D1), ``Reason``, ``ActionRequestModel`` and
``ActionResponseModel`` (D2), and :class:`RawOutput`, the text an adapter
returns when the model output must not be coerced (cut-off or refusal).
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, field_validator, model_validator
from pydantic.json_schema import SkipJsonSchema

from .hooks import summarize

__all__ = [
    "HashableModel",
    "Instruct",
    "Reason",
    "ActionRequestModel",
    "ActionResponseModel",
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


#: Explicit key aliases a model may use in an action request (field report C08).
#: Applied by table lookup, never by fuzzy matching.
REQUEST_KEY_ALIASES: dict[str, str] = {
    "name": "function",
    "parameters": "arguments",
    "args": "arguments",
    "input": "arguments",
}


def normalize_request_keys(data: dict[str, Any]) -> dict[str, Any]:
    """Rename aliased keys (``name`` → ``function``, ...) unless the canonical key exists."""
    out = dict(data)
    for alias, canonical in REQUEST_KEY_ALIASES.items():
        if alias in out and canonical not in out:
            out[canonical] = out.pop(alias)
    return out


def decode_arguments(value: Any) -> dict[str, Any]:
    """Decode action-request arguments into a JSON object (field report C05).

    A dict is returned as is; ``None`` becomes ``{}``; a string is decoded as
    JSON, twice at most (double encoding). Anything that is not, or does not
    decode to, a JSON object raises ``ValueError`` naming the non-object value.
    """
    if value is None:
        return {}
    current = value
    for _ in range(3):
        if isinstance(current, dict):
            return current
        if isinstance(current, str):
            try:
                current = json.loads(current, strict=False)  # raw control characters in strings are text
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
    Arguments given as JSON text are decoded (C05); aliases ``name``,
    ``parameters``, ``args``, ``input`` are normalized (C08). A string that is
    not a JSON object, a list or a scalar fails validation.

    ``invalid`` is set only by adapters for a native tool call whose
    arguments could not be decoded: ``act()`` answers such a request with an
    error payload and never invokes the tool. It is not part of the schema
    shown to the model.
    """

    model_config = _schema_description(
        "One tool call: the name of a registered function and its arguments as a JSON object."
    )

    function: str | None = None
    arguments: dict[str, Any] | None = None
    invalid: SkipJsonSchema[str | None] = Field(default=None, repr=False, exclude=True)

    @model_validator(mode="before")
    @classmethod
    def _aliases(cls, data: Any) -> Any:
        if isinstance(data, dict):
            return normalize_request_keys(data)
        return data

    @field_validator("arguments", mode="before")
    @classmethod
    def _decode(cls, value: Any) -> Any:
        if value is None:
            return None
        return decode_arguments(value)


class ActionResponseModel(HashableModel):
    """One observed tool outcome, produced only by ``act()`` (ADR-0022 D2/D4).

    ``output`` is the tool's return value, or an error payload:
    ``{"error": "denied by governance gate", "function": ...}`` for a
    denial, ``{"error": str(exc), "type": ExcName, "message": ...}`` for a
    suppressed tool error.
    """

    model_config = ConfigDict(
        arbitrary_types_allowed=True,
        json_schema_extra=lambda schema, cls: schema.update(
            description="An observed tool result, filled by the runtime."),
    )

    function: str = Field(default_factory=str)
    arguments: dict[str, Any] = Field(default_factory=dict)
    output: Any = None

    @property
    def is_error(self) -> bool:
        """True when ``output`` is an error payload (denial, bad request, tool error)."""
        return isinstance(self.output, dict) and "error" in self.output


class RawOutput(str):
    """Model text returned uncoerced, with the reason it was not parsed.

    Adapters return a ``RawOutput`` for a ``finish_reason: "length"`` cut-off
    (``reason="length"``) or a refusal (``reason="refusal"``, ``detail`` the
    refusal text). A failed CLI result is not returned at all: it raises
    (field report C18), since text would read as a successful answer. It is a
    ``str``, so the caller's mismatch policy applies unchanged (ADR-0022 D3);
    under ``"raise"`` the error carries the reason (C12, C13).
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
