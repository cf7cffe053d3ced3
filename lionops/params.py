"""Typed internal parameters produced by ``prepare_operate_kw`` (ADR-0022 D1).

All are frozen dataclasses; ``with_updates(**changes)`` returns a copy.
``ChatParam``, ``RunParam`` and ``ParseParam`` keep their fields in the
instance ``__dict__``: a copy made per call is that one mapping copied with
the changes applied (see :meth:`MorphParam.with_updates`).
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, get_args

from ._alcall import AlcallParams

if TYPE_CHECKING:
    from .imodel import iModel

__all__ = [
    "HandleValidation",
    "ActionStrategy",
    "ACTION_STRATEGIES",
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
#: the strategies ``act()`` runs (ADR-0022 D4), those of :data:`ActionStrategy`
ACTION_STRATEGIES: tuple[str, ...] = get_args(ActionStrategy)

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
        try:
            names = _COPY_PLANS[cls]
        except KeyError:
            names = _COPY_PLANS[cls] = _copy_plan(cls)
        if names is None:  # __init__ must run, or the fields live in slots (no __dict__)
            return dataclasses.replace(self, **changes)  # type: ignore[type-var]
        fields = self.__dict__
        # a name is not a field (TypeError), or the __dict__ holds more than
        # the fields (a cached_property's value derived from them, an
        # attribute set on the instance): not copied.
        if not changes.keys() <= names or len(fields) != len(names):
            return dataclasses.replace(self, **changes)  # type: ignore[type-var]
        # Every field lives in the instance's __dict__ and no __post_init__
        # needs to run: the copy is the same mapping with the changes applied,
        # filled without the frozen __setattr__.
        new = object.__new__(cls)
        state = new.__dict__
        state.update(fields)
        state.update(changes)
        return new

    @classmethod
    def of_fields(cls, fields: dict[str, Any]) -> Any:
        """``cls(**fields)`` for a ``fields`` that names every field: the
        instance's ``__dict__`` filled in one update when no ``__init__`` work
        is needed (the :meth:`with_updates` conditions), else ``cls(**fields)``."""
        try:
            names = _COPY_PLANS[cls]
        except KeyError:
            names = _COPY_PLANS[cls] = _copy_plan(cls)
        if names is None or fields.keys() != names:
            return cls(**fields)
        new = object.__new__(cls)
        state = new.__dict__
        # One key at a time, not update(): the instance's __dict__ keeps the
        # keys the class's instances share (a split table, about 40% of the
        # memory of a dict of its own), and so do the copies made of it.
        for name, value in fields.items():
            state[name] = value
        return new


def _copy_plan(cls: type) -> frozenset[str] | None:
    """The field names of ``cls`` when :meth:`MorphParam.with_updates` may copy
    its instances' ``__dict__``: no ``__post_init__``, no field set by
    ``__init__`` itself (``init=False``) and no field kept in a slot (a
    subclass declared with slots); otherwise ``None`` (``dataclasses.replace``)."""
    fields = dataclasses.fields(cls)
    names = frozenset(f.name for f in fields if f.init)
    if hasattr(cls, "__post_init__") or len(names) != len(fields):
        return None
    if any(isinstance(getattr(cls, name, None), types.MemberDescriptorType) for name in names):
        return None
    return names


#: per MorphParam class: its field names when copies need no __init__ (:func:`_copy_plan`), else None
_COPY_PLANS: dict[type, frozenset[str] | None] = {}


@dataclass(slots=True, frozen=True)
class FuzzyMatchKeysParams:
    """How parsed keys are matched to model fields (Jaro-Winkler similarity).

    ``threshold`` is a similarity in [0, 1]; ``handle_unmatched`` is one of
    ``"ignore"``, ``"remove"``, ``"raise"``.
    """

    similarity_threshold: float = 0.85
    fuzzy_match: bool = True
    handle_unmatched: Literal["ignore", "remove", "raise"] = "remove"


@dataclass(frozen=True)
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
    include_token_usage_to_model: bool = False
    imodel: iModel | None = None
    imodel_kw: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RunParam(ChatParam):
    """Parameters of one CLI run (ADR-0022 D1): a ChatParam plus persistence.

    ``stream_persist``: append every raw stream line to a JSONL file under
    ``persist_dir``. ``snapshot_dir``: write an atomic JSON snapshot of the
    branch after the turn (``None``: no snapshot).
    """

    stream_persist: bool = False
    persist_dir: str = DEFAULT_PERSIST_DIR
    snapshot_dir: str | None = None


@dataclass(frozen=True)
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

