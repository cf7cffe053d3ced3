"""Field specifications for generated models (ADR-0022 D2).

A :class:`Spec` names one field of a generated Operative model; a
:class:`FieldModel` is the older spelling, converted with ``to_spec()``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from .errors import ArgumentTypeError
from .models import ActionRequestModel, ActionResponseModel, Reason

__all__ = ["Spec", "FieldModel", "default_field", "to_fields_dict"]

_MISSING: Any = PydanticUndefined


@dataclass(frozen=True, slots=True)
class Spec:
    """One field of a generated model.

    Args:
        base_type: the field's type (e.g. ``int``, a pydantic model).
        name: the field name; a Spec without a name does not enter the
            generated field map (ADR-0022 D1).
        default: default value; omitted means required (``nullable`` implies
            a default of ``None``).
        description: shown in the JSON schema.
        nullable: the type becomes ``T | None``.
        listable: the type becomes ``list[T]``.
    """

    base_type: Any
    name: str | None = None
    default: Any = _MISSING
    description: str | None = None
    nullable: bool = False
    listable: bool = False
    metadata: tuple[tuple[str, Any], ...] = field(default=())

    @property
    def annotation(self) -> Any:
        t = self.base_type
        if self.listable:
            t = list[t]  # type: ignore[valid-type]
        if self.nullable:
            t = t | None
        return t

    def field_definition(self) -> tuple[Any, FieldInfo]:
        """``(annotation, FieldInfo)`` for ``pydantic.create_model``."""
        default = self.default
        if default is _MISSING and self.nullable:
            default = None
        info = FieldInfo(default=default, description=self.description)
        return self.annotation, info

    def key(self) -> tuple[Any, ...]:
        """A hashable identity used to cache generated types."""
        try:
            hash(self.default)
            default_key: Any = self.default
        except TypeError:
            default_key = repr(self.default)
        return (self.name, self.base_type, default_key, self.description, self.nullable, self.listable)


@dataclass(frozen=True, slots=True)
class FieldModel(Spec):
    """The older field description; ``to_spec()`` converts it to a plain :class:`Spec`."""

    def to_spec(self) -> Spec:
        return Spec(
            self.base_type,
            name=self.name,
            default=self.default,
            description=self.description,
            nullable=self.nullable,
            listable=self.listable,
        )


_DEFAULT_FIELDS: dict[str, Spec] = {
    "reason": Spec(Reason, name="reason", nullable=True, description="Your reasoning for this answer."),
    "action_required": Spec(
        bool, name="action_required", nullable=True,
        description="True when action_requests must be executed before the task is done.",
    ),
    "action_requests": Spec(
        ActionRequestModel, name="action_requests", nullable=True, listable=True,
        description="Tool calls to execute: each names a registered function and its arguments object.",
    ),
    "action_responses": Spec(
        ActionResponseModel, name="action_responses", nullable=True, listable=True,
        description="Observed tool results, filled by the runtime after execution.",
    ),
}


def default_field(name: str) -> Spec:
    """The generated field ``reason``, ``action_required``, ``action_requests`` or ``action_responses``."""
    return _DEFAULT_FIELDS[name]


def to_fields_dict(field_models: list[Any] | None) -> dict[str, Spec] | None:
    """Convert ``field_models`` to ``{name: Spec}`` (ADR-0022 D1).

    Raises:
        TypeError: an entry is neither a FieldModel nor a Spec.

    Entries whose Spec name is empty are left out.
    """
    if not field_models:
        return None
    if not isinstance(field_models, (list, tuple)):
        raise ArgumentTypeError(f"field_models must be a list of FieldModel or Spec, got {type(field_models).__name__}")
    out: dict[str, Spec] = {}
    for fm in field_models:
        if isinstance(fm, FieldModel):
            spec = fm.to_spec()
        elif isinstance(fm, Spec):
            spec = fm
        else:
            raise ArgumentTypeError(f"Expected FieldModel or Spec, got {type(fm)}")
        if spec.name:
            out[spec.name] = spec
    return out
