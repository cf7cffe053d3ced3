"""Typed internal parameters produced by ``prepare_operate_kw`` (ADR-0022 D1).

All are frozen dataclasses; ``with_updates(**changes)`` returns a copy.
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from itertools import repeat
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, TypeVar

from ._slots import exhaust, get_slot, set_slot, slot_descriptors
from .alcall import AlcallParams

if TYPE_CHECKING:
    from .imodel import iModel

__all__ = [
    "HandleValidation",
    "ActionStrategy",
    "MorphParam",
    "ChatParam",
    "RunParam",
    "ParseParam",
    "ActionParam",
    "FuzzyMatchKeysParams",
    "AlcallParams",
    "DEFAULT_PERSIST_DIR",
]

HandleValidation: TypeAlias = Literal["raise", "return_value", "return_none"]
ActionStrategy: TypeAlias = Literal["sequential", "concurrent"]

#: RunParam.persist_dir default; overridden only by an explicit non-None value.
DEFAULT_PERSIST_DIR = ".lionops/streams"


class MorphParam:
    """Base of the parameter dataclasses: immutable, updated by copy."""

    __slots__ = ()

    def with_updates(self, **changes: Any) -> Any:
        """Return a copy with ``changes`` applied (as ``dataclasses.replace``).

        Raises ``TypeError`` for a name that is not a field.
        """
        cls = type(self)
        plan = _COPY_PLANS.get(cls)
        if plan is None:
            plan = _COPY_PLANS[cls] = _copy_plan(cls)
        if not plan:  # __init__ must run (see _copy_plan)
            return dataclasses.replace(self, **changes)  # type: ignore[type-var]
        slots, names, field_names = plan
        if not changes.keys() <= field_names:  # not a field
            return dataclasses.replace(self, **changes)  # type: ignore[type-var] # raises TypeError
        # Plain fields (no __post_init__): fill the slots without running
        # __init__, new.<field> = changes.get(field, self.<field>) for each
        # field in one C-level loop (lionops._slots).
        new = object.__new__(cls)
        exhaust(map(set_slot, slots, repeat(new), map(changes.get, names, map(get_slot, slots, repeat(self)))))
        return new


def param_builder(cls: type[_P]) -> Callable[[dict[str, Any]], _P]:
    """A function ``fields -> cls(**fields)``, made once per class: when
    ``fields`` gives every field of a class whose copies need no ``__init__``
    (:func:`_copy_plan`), it fills the slots from ``fields`` in one C-level
    loop (lionops._slots) instead."""
    plan = _COPY_PLANS.get(cls)
    if plan is None:
        plan = _COPY_PLANS[cls] = _copy_plan(cls)
    if not plan:
        return lambda fields: cls(**fields)
    slots, names, field_names = plan

    def build(fields: dict[str, Any]) -> _P:
        if fields.keys() != field_names:  # some left to their defaults, or not a field
            return cls(**fields)
        new = object.__new__(cls)
        exhaust(map(set_slot, slots, repeat(new), map(fields.__getitem__, names)))
        return new

    return build


def _copy_plan(cls: type) -> _CopyPlan | tuple[()]:
    """The slot descriptors and names of ``cls``'s fields, in field order;
    ``()`` when a copy must run ``__init__``: a ``__post_init__``, a field
    ``__init__`` sets itself (``init=False``), or a subclass without slots
    (its own fields live in ``__dict__``)."""
    fields = dataclasses.fields(cls)
    names = tuple(f.name for f in fields if f.init)
    if hasattr(cls, "__post_init__") or len(names) != len(fields):
        return ()
    slots = slot_descriptors(cls, names)
    if slots is None:
        return ()
    return slots, names, frozenset(names)


#: a class's field slot descriptors, its field names in the same order, and those as a set
_CopyPlan: TypeAlias = tuple[tuple[types.MemberDescriptorType, ...], tuple[str, ...], frozenset[str]]

_P = TypeVar("_P", bound=MorphParam)

#: per MorphParam class: its copy plan (:func:`_copy_plan`).
_COPY_PLANS: dict[type, _CopyPlan | tuple[()]] = {}


@dataclass(slots=True, frozen=True)
class FuzzyMatchKeysParams:
    """How parsed keys are matched to model fields (Jaro-Winkler similarity).

    ``threshold`` is a similarity in [0, 1]; ``handle_unmatched`` is one of
    ``"ignore"``, ``"remove"``, ``"raise"``.
    """

    similarity_algo: Literal["jaro_winkler"] = "jaro_winkler"
    similarity_threshold: float = 0.85
    fuzzy_match: bool = True
    handle_unmatched: Literal["ignore", "remove", "raise"] = "remove"


@dataclass(slots=True, frozen=True)
class ChatParam(MorphParam):
    """Parameters of one API chat turn (ADR-0022 D1).

    ``response_format`` is a pydantic model class, a model instance, a dict
    schema or ``None``; after the ``schema`` phase it is the generated
    *response* type when an Operative was built (D2). ``tool_schemas`` is the
    list of tool schemas offered to the model. ``imodel_kw`` holds the
    remaining ``**kwargs`` of ``operate()`` as model invocation options.
    """

    guidance: Any = None
    context: Any = None
    sender: Any = None
    recipient: Any = None
    response_format: Any = None
    progression: Any = None
    tool_schemas: list[dict[str, Any]] | None = None
    images: list[Any] | None = None
    image_detail: Literal["low", "high", "auto"] | None = None
    plain_content: str | None = None
    include_token_usage_to_model: bool = False
    imodel: iModel | None = None
    imodel_kw: Mapping[str, Any] = field(default_factory=dict)


@dataclass(slots=True, frozen=True)
class RunParam(ChatParam):
    """Parameters of one CLI run (ADR-0022 D1): a ChatParam plus persistence.

    ``stream_persist``: append every raw stream line to a JSONL file under
    ``persist_dir``. ``snapshot_dir``: write an atomic JSON snapshot of the
    branch after the turn (``None``: no snapshot).
    """

    stream_persist: bool = False
    persist_dir: str = DEFAULT_PERSIST_DIR
    snapshot_dir: str | None = None


@dataclass(slots=True, frozen=True)
class ParseParam(MorphParam):
    """How a Middle parses model text into ``response_format`` (ADR-0022 D1).

    ``alcall_params`` governs parse-model retries (default
    ``DEFAULT_PARSE_CALL_PARAMS``); ``imodel`` is the parse model.
    ``handle_validation`` is always ``"return_value"`` when handed to a Middle
    by the coordinator, so the outer policy decides (D3).
    """

    response_format: Any = None
    fuzzy_match_params: FuzzyMatchKeysParams = field(default_factory=FuzzyMatchKeysParams)
    handle_validation: HandleValidation = "return_value"
    alcall_params: AlcallParams | None = None
    imodel: iModel | None = None
    imodel_kw: Mapping[str, Any] = field(default_factory=dict)


@dataclass(slots=True, frozen=True)
class ActionParam(MorphParam):
    """How action requests run through ``act()`` (ADR-0022 D4).

    ``tools``: which registered tools are offered (``None``: all).
    ``strategy``: ``"concurrent"`` (through ``action_call_params``) or
    ``"sequential"`` (input order); anything else raises
    ``ConfigurationError`` when ``act()`` dispatches. ``suppress_errors``:
    tool errors become error-payload responses instead of raising.
    """

    action_call_params: AlcallParams | None = None
    tools: Any = None
    strategy: str = "concurrent"
    suppress_errors: bool = True
    verbose_action: bool = False


# A Middle and a ToolRef are described in their own modules; the alias is
# re-exported here for the ADR's parameter vocabulary.
ToolRef: TypeAlias = Any
MiddleFn: TypeAlias = Callable[..., Any]
