"""Typed internal parameters produced by ``prepare_operate_kw`` (ADR-0022 D1).

All are frozen dataclasses; ``with_updates(**changes)`` returns a copy.
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

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
            fields = dataclasses.fields(self)  # type: ignore[arg-type]
            names = tuple(f.name for f in fields if f.init)
            # __init__ must run: __post_init__, or fields it sets itself (init=False).
            if hasattr(cls, "__post_init__") or len(names) != len(fields):
                return dataclasses.replace(self, **changes)  # type: ignore[type-var]
            # The slot descriptors: setting through them skips the frozen __setattr__.
            found = [getattr(cls, name, None) for name in names]
            slots = [s for s in found if isinstance(s, types.MemberDescriptorType)]
            if len(slots) != len(found):
                # a subclass without slots keeps its own fields in __dict__
                return dataclasses.replace(self, **changes)  # type: ignore[type-var]
            setters = {name: s.__set__ for name, s in zip(names, slots, strict=False)}
            plan = _COPY_PLANS[cls] = (_slot_copier(cls, names), setters)
        copy, setters = plan
        # Plain fields (no __post_init__): copy the slots without running __init__.
        new = copy(self)
        try:
            for name, value in changes.items():
                setters[name](new, value)
        except KeyError:  # not a field
            return dataclasses.replace(self, **changes)  # type: ignore[type-var] # raises TypeError
        return new


def _slot_copier(cls: type, names: tuple[str, ...]) -> Callable[[Any], Any]:
    """A function that copies the slots ``names`` of a ``cls`` instance into a
    new one without ``__init__``: one straight line per field, generated once
    per class (as ``dataclasses`` generates ``__init__``); ``names`` are the
    dataclass's field names, so identifiers."""
    namespace: dict[str, Any] = {"_new": object.__new__, "_cls": cls}
    lines = ["def copy(self):", "    new = _new(_cls)"]
    for i, name in enumerate(names):
        assert name.isidentifier()
        namespace[f"_set{i}"] = getattr(cls, name).__set__
        lines.append(f"    _set{i}(new, self.{name})")
    lines.append("    return new")
    exec("\n".join(lines), namespace)  # noqa: S102 - source built from field names only
    copier: Callable[[Any], Any] = namespace["copy"]
    return copier


#: per MorphParam class without ``__post_init__``: the copier of its slots
#: (:func:`_slot_copier`) and the slot setters by field name.
_COPY_PLANS: dict[type, tuple[Callable[[Any], Any], dict[str, Callable[[Any, Any], None]]]] = {}


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
