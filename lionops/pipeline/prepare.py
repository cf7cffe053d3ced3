"""ADR-0022 D1: ``prepare_operate_kw`` normalizes the public keywords into
typed parameters; the ``prepare`` phase puts them on the operation context."""

from __future__ import annotations

import functools
import inspect
import math
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, ParamSpec, TypedDict

from pydantic import BaseModel, ValidationError

from .._alcall import AlcallParams
from .._defaults import DEFAULT_ACTION_CALL_PARAMS, DEFAULT_PARSE_CALL_PARAMS
from .._formats import check_response_format
from .._names import near_miss
from ..errors import ArgumentTypeError, ConfigurationError, MisspelledKeywordError, RemovedKeywordError
from ..fields import to_fields_dict
from ..models import Instruct
from ..operative import field_clashes
from ..params import ACTION_STRATEGIES, ActionParam, ChatParam, FuzzyMatchKeysParams, ParseParam, RunParam
from .context import BranchLike, OperationContext
from .validate import HANDLE_VALIDATION_VALUES

if TYPE_CHECKING:
    from ..engine.engines import Engine
    from ..imodel import iModel
    from ..operative import Operative

__all__ = [
    "prepare_operate_kw", "phase", "Prepared", "OperateKwargs", "REMOVED_KEYWORDS", "misspelled_keyword", "check_flags",
]

#: ADR-0022 D1: removed names and their replacements.
REMOVED_KEYWORDS: dict[str, str] = {
    "request_model": "response_format=",
    "operative_model": "response_format=",
    "imodel": "chat_model=",
}

@functools.cache
def _operate_keywords() -> tuple[str, ...]:
    return tuple(OperateKwargs.__annotations__)


def misspelled_keyword(name: str) -> str | None:
    """The ``operate()`` keyword ``name`` is probably a misspelling of, or ``None``.

    A pure check (:func:`lionops._names.near_miss`): a name within one edit
    (two for names of eight characters or more) of an ``operate()`` keyword,
    that is not itself a keyword, a removed keyword or a known provider
    option (:data:`PROVIDER_OPTIONS`). Names shorter than four characters are
    never flagged.
    """
    return near_miss(name, _operate_keywords(), REMOVED_KEYWORDS)


def check_flags(flags: dict[str, Any]) -> None:
    """Raise TypeError for a boolean keyword that is not a bool (``"false"``
    is truthy: it would run tools). A deliberate difference from the shipped
    code, which tested truthiness."""
    for name, value in flags.items():
        if not isinstance(value, bool):
            raise ArgumentTypeError(f"{name} must be a bool, got {type(value).__name__} {value!r}")


class OperateKwargs(TypedDict, total=False):
    """The keywords of ``Branch.operate`` (ADR-0022 D1): those of
    :func:`prepare_operate_kw` and ``engine``; extra keywords are model
    invocation options."""

    instruct: Instruct | dict[str, Any]
    instruction: Any
    guidance: Any
    context: Any
    sender: Any
    recipient: Any
    progression: Any
    chat_model: iModel
    invoke_actions: bool
    tool_schemas: list[dict[str, Any]]
    images: list[Any]
    image_detail: Literal["low", "high", "auto"]
    parse_model: iModel
    skip_validation: bool
    handle_validation: Literal["raise", "return_value", "return_none"]
    tools: Any
    operative: Any
    response_format: Any
    actions: bool
    reason: bool
    call_params: AlcallParams
    action_strategy: Literal["sequential", "concurrent"]
    verbose_action: bool
    field_models: list[Any]
    include_token_usage_to_model: bool
    clear_messages: bool
    stream_persist: bool
    persist_dir: str
    snapshot_dir: str
    middle: Any
    engine: Engine | str


#: FuzzyMatchKeysParams is frozen: one default instance serves every call.
_FUZZY_DEFAULT = FuzzyMatchKeysParams()


#: the boolean keywords of operate(), in the order prepare checks them
_FLAG_NAMES = ("invoke_actions", "skip_validation", "actions", "reason", "verbose_action",
               "include_token_usage_to_model", "clear_messages", "stream_persist")
_BOOL = {bool}
#: values an Instruct keeps as they are in instruction, guidance and context
_PLAIN = frozenset({str, type(None)})


class Prepared(NamedTuple):
    """What D1 hands on: each a field of the operation context (``reason``
    as the Instruct holds it: ``True``, ``False`` or ``None``)."""

    instruction: Any
    chat_param: ChatParam
    parse_param: ParseParam | None
    action_param: ActionParam | None
    handle_validation: str
    invoke_actions: bool
    skip_validation: bool
    clear_messages: bool
    operative: None
    middle: Any
    field_models: list[Any] | None
    reason: bool | None


_P = ParamSpec("_P")


def _as_mapping(prepared: Callable[_P, Prepared]) -> Callable[_P, dict[str, Any]]:
    """``prepared``'s signature and docstring, returning its :class:`Prepared` as a dict."""

    @functools.wraps(prepared)
    def prepare_operate_kw(*args: _P.args, **kwargs: _P.kwargs) -> dict[str, Any]:
        return prepared(*args, **kwargs)._asdict()

    return prepare_operate_kw


def _check_keywords(kwargs: dict[str, Any], instruct: Any, handle_validation: str) -> None:
    """Refuse a removed or misspelled keyword, ``suppress_errors``, a
    misspelled key of an ``instruct`` mapping and an unknown policy."""
    if kwargs:  # request options, or a removed or misspelled keyword
        for name, replacement in REMOVED_KEYWORDS.items():
            if name in kwargs:
                raise RemovedKeywordError(name, replacement)
        if "suppress_errors" in kwargs:
            # Not a provider option: sent on, it would read as a switch it is not.
            raise ArgumentTypeError(
                "suppress_errors is not an operate() keyword: operate() always turns a tool failure into an"
                " error payload (ADR-0022 D1); use branch.act(..., suppress_errors=False) to have it raise"
            )
        for name in kwargs:
            suggestion = misspelled_keyword(name)
            if suggestion is not None:
                raise MisspelledKeywordError(name, suggestion)
    if isinstance(instruct, dict):  # an Instruct ignores unknown keys
        for name in instruct:
            suggestion = near_miss(str(name), Instruct.model_fields)
            if suggestion is not None:
                raise MisspelledKeywordError(str(name), suggestion, where="Instruct")
    if handle_validation not in HANDLE_VALIDATION_VALUES:
        raise ConfigurationError(
            f"handle_validation must be one of {HANDLE_VALIDATION_VALUES}, got {handle_validation!r}"
        )


class _Instructed(NamedTuple):
    """What the call's instruction says, from an ``instruct`` or the plain keywords."""

    instruction: Any
    guidance: Any
    context: Any
    reason: bool | None
    actions: bool | None
    strategy: str | None


def _instructed(instruct: Instruct | dict[str, Any] | None, instruction: Any, guidance: Any, context: Any,
                reason: bool) -> _Instructed:
    """The instruction, guidance, context, reason, actions and strategy the
    call asks for; a caller ``Instruct`` is copied, never changed."""
    if instruct is None and {type(instruction), type(guidance), type(context)} <= _PLAIN:
        # What Instruct(instruction=, guidance=, context=) would hold: it
        # keeps a str or None as it is, so none is built.
        return _Instructed(instruction, guidance, context, True if reason else None, None, None)
    if isinstance(instruct, Instruct):
        instruct = instruct.model_copy()
    elif instruct is not None and not isinstance(instruct, dict):
        raise ArgumentTypeError(f"instruct must be an Instruct or a mapping, got {type(instruct).__name__}")
    if isinstance(instruct, Instruct):  # an Instruct built or changed without validation
        check_flags({f"Instruct.{name}": getattr(instruct, name) for name in ("reason", "actions")
                     if getattr(instruct, name) is not None})
    else:
        instruct = _validated_instruct(instruct if instruct is not None else
                                       {"instruction": instruction, "guidance": guidance, "context": context})
    if reason:
        instruct.reason = True
    return _Instructed(instruct.instruction, instruct.guidance, instruct.context,
                       instruct.reason, instruct.actions, instruct.action_strategy)


def _validated_instruct(fields: dict[str, Any]) -> Instruct:
    """An :class:`Instruct` from ``fields`` (an ``instruct`` mapping or the plain
    keywords); a value of the wrong type is an :class:`ArgumentTypeError` naming
    the keyword and the type it needs (the value itself is not repeated: it may
    be a secret)."""
    try:
        return Instruct.model_validate(fields)
    except ValidationError as exc:
        faults = "; ".join(
            f"{'.'.join(map(str, e['loc']))}: {e['msg']} (got {type(e.get('input')).__name__})"
            for e in exc.errors(include_url=False))
        raise ArgumentTypeError(f"operate() instruction keywords of the wrong type: {faults}") from None


def _check_middle(middle: Any) -> None:
    """Refuse a ``middle=`` that cannot be called, before the model is asked."""
    if middle is not None and not callable(middle):
        raise ArgumentTypeError(
            f"middle must be an async callable (a Middle: middle(branch, instruction, chat_param, ...)),"
            f" got {type(middle).__name__}")


def _shared_action_params() -> dict[tuple[str, bool], ActionParam]:
    return {(strategy, verbose): ActionParam(action_call_params=DEFAULT_ACTION_CALL_PARAMS, tools=None,
                                             strategy=strategy, suppress_errors=True, verbose_action=verbose)
            for strategy in ACTION_STRATEGIES for verbose in (False, True)}


def _action_param(action_strategy: str | None, instructed: str | None, call_params: AlcallParams | None,
                  tools: Any, verbose_action: bool) -> ActionParam:
    """How the requests run; a strategy ``act()`` does not know is refused
    here, before the model is asked, not after."""
    strategy = action_strategy or instructed or "concurrent"
    if call_params is None and tools is None and type(strategy) is str:  # the usual call: a shared ActionParam
        shared = _SHARED_ACTION_PARAMS.get((strategy, verbose_action))
        if shared is not None:
            return shared
    if strategy not in ACTION_STRATEGIES:
        raise ConfigurationError(f"action_strategy must be one of {ACTION_STRATEGIES}, got {strategy!r}")
    return ActionParam(
        action_call_params=call_params or DEFAULT_ACTION_CALL_PARAMS,
        tools=tools,
        strategy=strategy,
        suppress_errors=True,
        verbose_action=verbose_action,
    )


def _prepared(
    branch: BranchLike,
    *,
    instruct: Instruct | dict[str, Any] | None = None,
    instruction: Any = None,
    guidance: Any = None,
    context: Any = None,
    sender: Any = None,
    recipient: Any = None,
    progression: Any = None,
    chat_model: iModel | None = None,
    invoke_actions: bool = True,
    tool_schemas: list[dict[str, Any]] | None = None,
    images: list[Any] | None = None,
    image_detail: Literal["low", "high", "auto"] | None = None,
    parse_model: iModel | None = None,
    skip_validation: bool = False,
    handle_validation: str = "return_value",
    tools: Any = None,
    operative: Operative | None = None,
    response_format: type[BaseModel] | None = None,
    actions: bool = False,
    reason: bool = False,
    call_params: AlcallParams | None = None,
    action_strategy: str | None = "concurrent",
    verbose_action: bool = False,
    field_models: list[Any] | None = None,
    include_token_usage_to_model: bool = False,
    clear_messages: bool = False,
    stream_persist: bool = False,
    persist_dir: str | None = None,
    snapshot_dir: str | None = None,
    middle: Any = None,
    **kwargs: Any,
) -> Prepared:
    """Normalize the public call into typed parameters (ADR-0022 D1).

    Returns the mapping ``{"instruction", "chat_param", "parse_param",
    "action_param", "handle_validation", "invoke_actions", "skip_validation",
    "clear_messages", "operative": None, "middle", "field_models", "reason"}``
    (the prepare phase takes the same values as a :class:`Prepared` and
    sets them on the operation context).

    Shipped semantics reproduced exactly, seams included:

    - ``chat_model`` defaults to ``branch.chat_model``; ``parse_model``
      defaults to the *selected chat model*, not to ``branch.parse_model``.
    - A caller ``Instruct`` is copied, never mutated.
    - ``action_strategy or instruct.action_strategy or "concurrent"``: at the
      ``Branch.operate`` boundary ``action_strategy`` defaults to the truthy
      ``"concurrent"``, which shadows ``Instruct.action_strategy``.
    - A caller ``operative`` is discarded (``"operative": None``).
    - ``ActionParam.suppress_errors`` is always ``True``.

    Raises:
        RemovedKeywordError (a TypeError): ``request_model``,
            ``operative_model`` or ``imodel`` was passed.
        MisspelledKeywordError (a TypeError): a remaining keyword is a
            near miss of an ``operate()`` keyword (``handle_validaton``), see
            :func:`misspelled_keyword`; nothing is sent. Other remaining
            keywords are request options (ADR-0022 D1).
        ConfigurationError: ``reason=True``, ``actions=True`` or a
            ``field_models`` entry would replace a field of the caller's
            ``response_format`` of another type (``reason: str`` with
            ``reason=True``), see :func:`lionops.operative.field_clashes`.
        TypeError: a ``field_models`` entry is neither FieldModel nor Spec,
            or a boolean keyword (``invoke_actions``, ``actions``,
            ``skip_validation``, ``reason``, ...) is not a bool.
        ConfigurationError (a ValueError): ``handle_validation`` is not one of
            ``"raise"``, ``"return_value"``, ``"return_none"`` (a deliberate
            difference: the shipped code let an unknown policy fall through to
            the action phase).
        ConfigurationError (a ValueError): with actions on, the strategy
            (``action_strategy``, else the Instruct's) is neither
            ``"sequential"`` nor ``"concurrent"``: refused here, before the
            model is asked, rather than by ``act()`` after the model call.
        ArgumentTypeError (a TypeError): ``instruct`` is a mapping that is not a
            valid Instruct, or ``instruction``/``guidance``/``context`` is of a type it
            cannot hold; ``middle`` is not callable.
        ArgumentTypeError (a TypeError): ``response_format`` is none of a
            model class or instance, a dataclass, a ``TypedDict`` or a JSON
            schema dict (see :mod:`lionops._formats`).
    """
    _check_keywords(kwargs, instruct, handle_validation)
    _check_middle(middle)
    # A dataclass or TypedDict becomes its model; any other non-model value is refused.
    response_format = check_response_format(response_format)
    # field_models entries are checked here so a bad entry fails in prepare.
    fields_dict = to_fields_dict(field_models) if field_models else None
    flags = (invoke_actions, skip_validation, actions, reason, verbose_action,
             include_token_usage_to_model, clear_messages, stream_persist)
    if set(map(type, flags)) != _BOOL:  # the message names the first that is not
        check_flags(dict(zip(_FLAG_NAMES, flags, strict=True)))

    chat_model = chat_model or branch.chat_model
    parse_model = parse_model or chat_model

    instructed = _instructed(instruct, instruction, guidance, context, reason)
    instruction, guidance, context = instructed.instruction, instructed.guidance, instructed.context
    instr_reason = instructed.reason
    with_actions = bool(invoke_actions and (instructed.actions or actions))

    if instr_reason or with_actions or fields_dict:  # only added fields can clash
        clashes = field_clashes(
            type(response_format) if isinstance(response_format, BaseModel) else response_format,
            reason=bool(instr_reason), actions=with_actions, fields=fields_dict,
        )
        if clashes:
            raise ConfigurationError("; ".join(clashes))

    use_run_param = (
        bool(getattr(chat_model, "is_cli", False))
        or stream_persist
        or persist_dir is not None
        or snapshot_dir is not None
    )
    param_kw: dict[str, Any] = dict(
        guidance=guidance,
        context=context,
        sender=sender or branch.user or "user",
        recipient=recipient or branch.id,
        response_format=response_format,
        progression=progression,
        tool_schemas=tool_schemas,
        images=images,
        image_detail=image_detail,
        include_token_usage_to_model=include_token_usage_to_model,
        imodel=chat_model,
        imodel_kw=dict(kwargs),
    )
    chat_param: ChatParam
    if use_run_param:
        param_kw["stream_persist"] = stream_persist
        if persist_dir is not None:
            param_kw["persist_dir"] = persist_dir
        if snapshot_dir is not None:
            param_kw["snapshot_dir"] = snapshot_dir
        chat_param = RunParam(**param_kw)
    else:  # every field named: filled without the frozen __init__'s setattr per field
        chat_param = ChatParam.of_fields(param_kw)

    parse_param = None
    if response_format is not None and not skip_validation:
        parse_param = ParseParam.of_fields({
            "response_format": response_format,
            "fuzzy_match_params": _FUZZY_DEFAULT,
            "handle_validation": handle_validation,
            "alcall_params": DEFAULT_PARSE_CALL_PARAMS,
            "imodel": parse_model,
            "imodel_kw": {},
        })

    action_param = None
    if with_actions:
        action_param = _action_param(action_strategy, instructed.strategy, call_params, tools, verbose_action)

    return Prepared(instruction, chat_param, parse_param, action_param, handle_validation,
                    invoke_actions, skip_validation, clear_messages, None, middle, field_models, instr_reason)


#: (strategy, verbose_action) -> the ActionParam of a call without call_params and tools (frozen, shared)
_SHARED_ACTION_PARAMS = _shared_action_params()

prepare_operate_kw = _as_mapping(_prepared)

#: the named keywords of :func:`_prepared` (the rest are request options)
_PREPARED_KEYWORDS = frozenset(inspect.signature(_prepared).parameters) - {"branch", "kwargs"}


#: how many call configurations a branch keeps prepared (the oldest goes first)
PREPARED_PER_BRANCH = 16
#: types whose values are immutable and compared by value; ``bool`` and
#: ``int`` are told apart by the key's types (``True == 1``)
_BY_VALUE: frozenset[type] = frozenset({str, int, float, bool, type(None), types.FunctionType})
#: the value types found :func:`_keyable` so far
_KEYABLE: set[type] = set(_BY_VALUE)


def _keyable(t: type) -> bool:
    """Whether a keyword value of exactly type ``t`` may key the prepared
    cache: an immutable value (:data:`_BY_VALUE`: a subclass never is, it may
    hold state of its own), or a class whose metaclass keeps ``type``'s
    identity hash and equality (a model class, a dataclass)."""
    if t in _BY_VALUE:
        return True
    return issubclass(t, type) and t.__hash__ is type.__hash__ and t.__eq__ is type.__eq__


def prepared_key(kwargs: dict[str, Any]) -> tuple[Any, ...] | None:
    """The cache key of a call's keywords, or ``None`` when one of them is
    not :func:`_keyable` (a list, a dict, an ``Instruct``, an ``iModel``, the
    caller's own subclass of ``str``: anything that can change after the call
    or compare equal to something else). The key holds the values themselves
    and their types, so it keeps them alive and ``True`` never serves ``1``.

    A plain ``instruction`` (a ``str`` or ``None``, with no ``instruct`` and a
    plain ``guidance`` and ``context``) is handed on as it is
    (:func:`_instructed`), so it is no part of the key: a call that only asks
    something else reuses the configuration."""
    plain = (kwargs.get("instruct") is None and type(kwargs.get("guidance")) in _PLAIN
             and type(kwargs.get("context")) in _PLAIN and type(kwargs.get("instruction")) in _PLAIN)
    if plain and "instruction" in kwargs:
        kwargs = kwargs.copy()
        del kwargs["instruction"]
    kinds = tuple(map(type, kwargs.values()))
    if not _KEYABLE.issuperset(kinds) and not all(map(_learn_keyable, kinds)):
        return None
    items = tuple(kwargs.items())
    if float in kinds:  # -0.0 == 0.0 with one hash, yet the request writes them apart
        items = tuple((k, (v, math.copysign(1.0, v))) if type(v) is float else (k, v) for k, v in items)
    return items, kinds, plain


def _learn_keyable(t: type) -> bool:
    """:func:`_keyable`, remembered in :data:`_KEYABLE` when true."""
    if t in _KEYABLE:
        return True
    if _keyable(t):
        _KEYABLE.add(t)
        return True
    return False


class PreparedEntry:
    """One call configuration's :class:`Prepared` and what it read of the
    branch; ``schema``: the schema phase's result on it when that reads
    nothing else (no actions: see :mod:`lionops.pipeline.schema`)."""

    __slots__ = ("prepared", "plain", "chat_model", "parse_model", "user", "id", "is_cli", "extras", "schema")

    def __init__(self, prepared: Prepared, plain: bool, branch: BranchLike, extras: dict[str, Any] | None) -> None:
        self.prepared = prepared
        #: the instruction is no part of the key (:func:`prepared_key`)
        self.plain = plain
        self.chat_model = branch.chat_model
        self.parse_model = branch.parse_model
        self.user = branch.user
        self.id = branch.id
        self.is_cli = bool(getattr(branch.chat_model, "is_cli", False))
        self.extras = extras  # the request options, a copy of its own (``None``: none)
        self.schema: tuple[Any, ...] | None = None

    def holds_for(self, branch: BranchLike) -> bool:
        """Whether the branch still holds what the entry was prepared from and
        its parameters still hold their request options (a Middle handed them
        could change the mappings inside)."""
        p = self.prepared
        return (branch.chat_model is self.chat_model and branch.parse_model is self.parse_model
                and branch.user is self.user and branch.id is self.id
                and bool(getattr(self.chat_model, "is_cli", False)) is self.is_cli
                and (p.chat_param.imodel_kw == self.extras if self.extras else not p.chat_param.imodel_kw)
                and (p.parse_param is None or not p.parse_param.imodel_kw))


def _prepared_cached(branch: BranchLike, kwargs: dict[str, Any]) -> tuple[Prepared, PreparedEntry | None]:
    """:func:`_prepared` of ``kwargs``, reused from the branch's cache when
    the call's keywords are the same immutable values and classes as an
    earlier call's (:func:`prepared_key`) and the branch still holds what
    that call read (:meth:`PreparedEntry.holds_for`).

    A configuration is kept from its second call on: the first is
    remembered by the hash of its key alone, so a branch that makes one
    call (a server's branch per request) holds nothing more than before."""
    seen = getattr(branch, "_prepared_seen", None)
    key = prepared_key(kwargs) if seen is not None else None
    if key is None:  # a branch without the cache, or keywords that cannot key it
        return _prepared(branch, **kwargs), None
    cache: dict[Any, PreparedEntry] | None = getattr(branch, "_prepared", None)
    entry = cache.get(key) if cache is not None else None
    if entry is not None and entry.holds_for(branch):
        return entry.prepared, entry
    p = _prepared(branch, **kwargs)
    h = hash(key)
    if entry is None and seen != h:  # the first call of this configuration
        branch._prepared_seen = h  # type: ignore[attr-defined]
        return p, None
    if cache is None:
        cache = branch._prepared = {}  # type: ignore[attr-defined]
    elif entry is None and len(cache) >= PREPARED_PER_BRANCH:
        del cache[next(iter(cache))]
    extras = {k: v for k, v in kwargs.items() if k not in _PREPARED_KEYWORDS} or None
    entry = cache[key] = PreparedEntry(p, key[-1], branch, extras)
    return p, entry


async def phase(ctx: OperationContext) -> None:
    """D1: normalize the public keywords (when given) into typed parameters
    (a resumption has none: it continues a prepared operation)."""
    if ctx.call_kwargs is None:
        return
    kwargs = ctx.call_kwargs
    p, entry = _prepared_cached(ctx.branch, kwargs)
    ctx.prepared_entry = entry
    # a plain instruction is handed on as it is (:func:`prepared_key`): this call's own
    ctx.instruction = kwargs.get("instruction") if entry is not None and entry.plain else p.instruction
    ctx.chat_param = p.chat_param
    ctx.parse_param = p.parse_param
    ctx.action_param = p.action_param
    ctx.handle_validation = p.handle_validation
    ctx.invoke_actions = p.invoke_actions
    ctx.skip_validation = p.skip_validation
    ctx.clear_messages = p.clear_messages
    ctx.operative = p.operative
    ctx.middle = p.middle
    ctx.field_models = p.field_models
    ctx.reason = bool(p.reason)
