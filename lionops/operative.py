"""The request/response Operative and its factories (ADR-0022 D2).

An :class:`Operative` holds one set of field specs and materializes two
related pydantic models: the *request* model (what the model may produce,
without ``request_exclude``) and the *response* model (a subclass of the
request model with every field). Both subclass ``base_type`` when one is
given, so a response instance passes the caller's outer instance check.

Generated *types* are cached per distinct configuration for the life of the
process; an Operative itself is cheap and per call, so per-call state never
lives on a shared object. A type pydantic cannot complete (an annotation of
the base or of a field's model names a type not defined yet) is refused with
a :class:`~lionops.errors.ConfigurationError` and never cached: once the name
is defined and the model rebuilt (``Model.model_rebuild()``), the next call
builds it anew.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any, Literal

from pydantic import BaseModel, PydanticUndefinedAnnotation, create_model

from ._classcache import class_cache
from .errors import ConfigurationError
from .fields import Spec, default_field, to_fields_dict

__all__ = [
    "Operative", "Step", "request_type_of", "request_exclude_of", "operative_for", "shared_operative", "field_clashes",
]

#: The fields ``reason=True`` and ``actions=True`` add to the caller's model.
GENERATED_FIELDS: dict[str, tuple[str, ...]] = {
    "reason": ("reason",),
    "actions": ("action_required", "action_requests", "action_responses"),
}

#: the generated types of configurations without a caller model (those of a caller
#: model are kept on it: :func:`lionops._classcache.class_cache`)
_TYPE_CACHE: dict[tuple[Any, ...], tuple[type[BaseModel], type[BaseModel]]] = {}
_TYPE_LOCK = threading.Lock()

#: Attribute names set on generated response types.
_REQUEST_TYPE_ATTR = "__lionops_request_type__"
_REQUEST_EXCLUDE_ATTR = "__lionops_request_exclude__"


def request_type_of(response_format: Any) -> Any:
    """The request model to render for the provider (never ``action_responses``).

    For a generated response type this is its request model (without
    ``action_responses``); anything else is returned unchanged.
    """
    if isinstance(response_format, type):
        return getattr(response_format, _REQUEST_TYPE_ATTR, response_format)
    return response_format


def request_exclude_of(response_format: Any) -> frozenset[str]:
    """Field names the model must never supply (``{"action_responses"}`` with actions)."""
    if isinstance(response_format, type):
        return getattr(response_format, _REQUEST_EXCLUDE_ATTR, frozenset())
    return frozenset()


#: model class -> (its field map, (reason, actions) -> clashes): field_clashes
#: without named fields, worked out once per class and flags.
_CLASHES: weakref.WeakKeyDictionary[type, tuple[Any, dict[tuple[bool, bool], tuple[str, ...]]]] = (
    weakref.WeakKeyDictionary()
)


def field_clashes(
    base_type: Any,
    *,
    reason: bool = False,
    actions: bool = False,
    fields: dict[str, Spec] | None = None,
) -> list[str]:
    """Where a generated model would silently replace a field.

    ``reason=True`` adds ``reason``; ``actions=True`` adds ``action_required``,
    ``action_requests`` and ``action_responses``; each named field spec adds
    its name. A clash is a field so added where one of that name (or alias)
    already exists with another type: one of ``base_type`` (the generated
    subclass would replace the caller's field), or a generated one that a
    named spec would replace. A field of the very type the added one has (a
    generated model passed back in) replaces nothing.

    Returns one sentence per clash, empty when there is none (a pure check;
    without ``fields`` worked out once per model class and flags, for a
    model class pydantic has completed: the fields of one that is not
    complete yet may change when it is rebuilt).
    """
    if fields or not isinstance(base_type, type):
        return _field_clashes(base_type, reason, actions, fields)
    model_fields = getattr(base_type, "__pydantic_fields__", None)
    try:
        entry = _CLASHES.get(base_type)
        if entry is None or entry[0] is not model_fields:
            if not getattr(base_type, "__pydantic_complete__", False):  # checked only before an entry is made
                return _field_clashes(base_type, reason, actions, None)
            entry = _CLASHES[base_type] = (model_fields, {})
    except TypeError:  # a class that cannot be weakly referenced
        return _field_clashes(base_type, reason, actions, fields)
    key = (bool(reason), bool(actions))
    if key not in entry[1]:
        entry[1][key] = tuple(_field_clashes(base_type, reason, actions, None))
    return list(entry[1][key])


def _field_clashes(base_type: Any, reason: bool, actions: bool, fields: dict[str, Spec] | None) -> list[str]:
    own: dict[str, Any] = {}
    model_fields = getattr(base_type, "model_fields", None) if isinstance(base_type, type) else None
    for fname, info in (model_fields or {}).items():
        for key in (fname, info.alias, info.validation_alias):
            if isinstance(key, str):
                own.setdefault(key, (fname, info.annotation))
    generated: list[tuple[str, Spec, str]] = []
    if reason:
        generated += [(n, default_field(n), "reason=True") for n in GENERATED_FIELDS["reason"]]
    if actions:
        generated += [(n, default_field(n), "actions=True") for n in GENERATED_FIELDS["actions"]]
    named = [(spec.name or key, spec, "field_models") for key, spec in (fields or {}).items()]
    out = []
    owner = getattr(base_type, "__name__", "the model")
    for name, spec, source in generated + named:
        if name in own and own[name][1] != spec.annotation:
            fname, annotation = own[name]
            shown = getattr(annotation, "__name__", None) or repr(annotation)
            out.append(
                f"{source} adds the field {name!r}, but {owner} already has a field {fname!r} ({shown}); "
                f"the generated field would replace it. Rename the field, or leave out {source}"
            )
    by_name = {name: (spec, source) for name, spec, source in generated}
    for name, spec, _ in named:
        if name in by_name and by_name[name][0].annotation != spec.annotation:
            out.append(
                f"field_models adds the field {name!r}, which {by_name[name][1]} also adds with another "
                f"type; the field spec would replace it. Rename the field, or leave out {by_name[name][1]}"
            )
    return out


def _materialize(
    name: str,
    base_type: type[BaseModel] | None,
    fields: tuple[Spec, ...],
    request_exclude: frozenset[str],
) -> tuple[type[BaseModel], type[BaseModel]]:
    # kept on the caller's model (the generated types subclass it): they go when it goes
    types = _TYPE_CACHE if base_type is None else class_cache(base_type)
    key = ("types", name, tuple(s.key() for s in fields), request_exclude)
    cached = types.get(key)
    if cached is not None:
        return cached
    with _TYPE_LOCK:
        cached = types.get(key)
        if cached is not None:
            return cached
        req_defs = {s.name: s.field_definition() for s in fields if s.name not in request_exclude}
        # Made in the caller's model's module, so a name its annotations leave
        # to be resolved later is looked up there, never among lionops' own.
        module = base_type.__module__ if base_type is not None else __name__
        request_cls = create_model(  # type: ignore[call-overload,arg-type]
            f"{name}Request", __base__=base_type or BaseModel, __module__=module, **req_defs
        )
        resp_defs = {s.name: s.field_definition() for s in fields if s.name in request_exclude}
        response_cls = create_model(  # type: ignore[call-overload]
            f"{name}Response", __base__=request_cls, __module__=module, **resp_defs
        )
        if not response_cls.__pydantic_complete__:  # never cached: built anew once the names are defined
            _refuse_incomplete(response_cls, name, base_type, fields)
        setattr(response_cls, _REQUEST_TYPE_ATTR, request_cls)
        setattr(response_cls, _REQUEST_EXCLUDE_ATTR, request_exclude)
        setattr(request_cls, _REQUEST_EXCLUDE_ATTR, request_exclude)
        types[key] = (request_cls, response_cls)
        return request_cls, response_cls


def _refuse_incomplete(
    response_cls: type[BaseModel], name: str, base_type: type[BaseModel] | None, fields: tuple[Spec, ...]
) -> None:
    """Raise :class:`ConfigurationError` for a generated type pydantic could
    not complete, naming the caller's model that is not fully defined (the
    base, else a field's model; else a model one of them uses, which the
    generated type cannot complete from the namespaces it is built in) and
    the name it lacks.

    Rebuilding the generated type (in the namespaces it was built in, and no
    other) tells which name is not defined; should it succeed (the name was
    defined meanwhile), the type is complete and nothing is raised.
    """
    try:
        response_cls.model_rebuild(raise_errors=True, _types_namespace={})
    except PydanticUndefinedAnnotation as exc:
        missing = exc.name
        owners = [t for t in (base_type, *(s.base_type for s in fields))
                  if not getattr(t, "__pydantic_complete__", True)]
        if owners:
            owner = owners[0].__name__
            raise ConfigurationError(
                f"{owner} is not fully defined: it names {missing!r}, which is not defined where it is named, "
                f"so the response model of {name} cannot be built; define {missing}, then call "
                f"{owner}.model_rebuild()"
            ) from None
        # a model the base or a field uses (complete itself), or a field typed by a name
        raise ConfigurationError(
            f"the response model of {name} cannot be built: {missing!r} is named by a model it uses, or by a "
            f"field typed by a name, and is not defined where it is named; define {missing} in the module that "
            f"names it, or call model_rebuild() on the model that names it where {missing} is defined"
        ) from None


class Operative:
    """Request/response model pair built from one field map (ADR-0022 D2).

    Attributes:
        name: ``name``, else the base type's name, else ``"Operative"``.
        base_type: the caller's model class or ``None``.
        fields: ``{name: Spec}`` in field order.
        request_exclude: fields left out of the request model.
        max_retries: inherited default 3; ``operate()`` never loops over the
            Middle (D2), so this only informs parsers.
        response_model: the current response instance (per Operative).

    An Operative :func:`shared_operative` returns is shared by every call of
    its configuration: :meth:`for_result` gives the call its own copy before
    anything is written.
    """

    __slots__ = (
        "name", "adapter", "base_type", "fields", "request_exclude",
        "max_retries", "auto_retry_parse", "response_model", "_types", "_shared",
    )

    def __init__(
        self,
        name: str | None = None,
        adapter: Literal["pydantic"] = "pydantic",
        *,
        base_type: type[BaseModel] | None = None,
        fields: dict[str, Spec] | None = None,
        request_exclude: set[str] | frozenset[str] | None = None,
        max_retries: int = 3,
        auto_retry_parse: bool = True,
    ) -> None:
        if adapter != "pydantic":
            raise ConfigurationError(f"Unsupported adapter: {adapter!r} (only 'pydantic' ships)")
        self.name = name or (base_type.__name__ if base_type else "Operative")
        self.adapter = adapter
        self.base_type = base_type
        self.fields = dict(fields or {})
        self.request_exclude = frozenset(request_exclude or ())
        self.max_retries = max_retries
        self.auto_retry_parse = auto_retry_parse
        self.response_model: BaseModel | None = None
        self._types: tuple[type[BaseModel], type[BaseModel]] | None = None
        self._shared = False

    def _materialized(self) -> tuple[type[BaseModel], type[BaseModel]]:
        if self._types is None:
            self._types = _materialize(
                self.name, self.base_type, tuple(self.fields.values()), self.request_exclude
            )
        return self._types

    @property
    def request_type(self) -> type[BaseModel]:
        """The model the provider is asked for (no request-excluded fields)."""
        return self._materialized()[0]

    @property
    def response_type(self) -> type[BaseModel]:
        """The superset model the caller gets back (subclass of ``request_type``)."""
        return self._materialized()[1]

    def update_response_model(self, data: dict[str, Any]) -> BaseModel:
        """Merge ``data`` into ``response_model`` and return the updated model.

        An instance of ``response_type`` is updated in place (the original
        result object is kept, ADR-0022 D4); any other model is re-validated
        into ``response_type`` with its fields plus ``data``.

        Raises:
            ValueError: no ``response_model`` is set.
        """
        current = self.response_model
        if current is None:
            raise ConfigurationError("Operative.response_model is not set")
        rtype = self.response_type
        if isinstance(current, rtype):
            for key, value in data.items():
                setattr(current, key, value)
            return current
        merged = {**dict(current), **data}
        self.response_model = rtype.model_validate(merged)
        return self.response_model

    def fresh(self) -> Operative:
        """A new Operative with the same configuration and materialized types
        and no ``response_model`` (per-call state stays per call)."""
        new = Operative.__new__(Operative)
        new.name, new.adapter, new.base_type = self.name, self.adapter, self.base_type
        new.fields, new.request_exclude = self.fields, self.request_exclude
        new.max_retries, new.auto_retry_parse = self.max_retries, self.auto_retry_parse
        new._types = self._types
        new.response_model = None
        new._shared = False
        return new

    def for_result(self, result: BaseModel) -> Operative:
        """This Operative with ``response_model`` set to ``result``; a shared
        one (:func:`shared_operative`) is never written to: the result goes
        on a :meth:`fresh` copy, which is returned."""
        operative = self.fresh() if self._shared else self
        operative.response_model = result
        return operative

    def __repr__(self) -> str:
        return (
            f"Operative(name={self.name!r}, base_type={getattr(self.base_type, '__name__', None)}, "
            f"fields={list(self.fields)}, request_exclude={sorted(self.request_exclude)})"
        )


class Step:
    """Factories for Operatives (ADR-0022 D2)."""

    @staticmethod
    def request_operative(
        *,
        name: str | None = None,
        operative_name: str | None = None,
        adapter: Literal["pydantic"] = "pydantic",
        reason: bool = False,
        actions: bool = False,
        fields: dict[str, Spec] | None = None,
        field_models: list[Any] | None = None,
        max_retries: int = 3,
        auto_retry_parse: bool = True,
        base_type: type[BaseModel] | None = None,
        **kwargs: Any,
    ) -> Operative:
        """Build an Operative: ``reason`` adds ``reason``; ``actions`` adds
        ``action_required``, ``action_requests``, ``action_responses`` and sets
        ``request_exclude={"action_responses"}``; named ``fields`` are added by
        name. A named field may stand in for a generated one of the same type;
        any field that would replace one of another type is refused.

        Raises:
            TypeError: an entry of ``field_models`` is neither FieldModel nor Spec.
            ConfigurationError: a generated or named field would replace a
                field of ``base_type`` of another type (:func:`field_clashes`).
        """
        name = name or operative_name
        if field_models and not fields:
            fields = to_fields_dict(field_models)
        clashes = field_clashes(base_type, reason=reason, actions=actions, fields=fields)
        if clashes:
            raise ConfigurationError("; ".join(clashes))
        specs: dict[str, Spec] = {}
        if reason:
            specs["reason"] = default_field("reason")
        if actions:
            for key in ("action_required", "action_requests", "action_responses"):
                specs[key] = default_field(key)
        for key, spec in (fields or {}).items():
            if not spec.name:
                spec = Spec(spec.base_type, name=key, default=spec.default,
                            description=spec.description, nullable=spec.nullable,
                            listable=spec.listable)
            specs[spec.name] = spec  # type: ignore[index]
        return Operative(
            name=name,
            adapter=adapter,
            base_type=base_type,
            fields=specs,
            request_exclude={"action_responses"} if actions else set(),
            max_retries=max_retries,
            auto_retry_parse=auto_retry_parse,
        )

    @staticmethod
    def respond_operative(
        operative: Operative, additional_fields: dict[str, Spec] | None = None
    ) -> Operative:
        """Materialize the response model; with ``additional_fields``, a new
        Operative carrying them too.

        Raises:
            ConfigurationError: the base type or a field's model is not fully
                defined (an annotation names a type not defined yet); define
                it, call ``model_rebuild()`` on that model, and call again.
        """
        if additional_fields:
            specs = dict(operative.fields)
            for key, spec in additional_fields.items():
                specs[spec.name or key] = spec if spec.name else Spec(
                    spec.base_type, name=key, default=spec.default,
                    description=spec.description, nullable=spec.nullable,
                    listable=spec.listable,
                )
            operative = Operative(
                name=operative.name, adapter=operative.adapter,
                base_type=operative.base_type, fields=specs,
                request_exclude=operative.request_exclude,
                max_retries=operative.max_retries,
                auto_retry_parse=operative.auto_retry_parse,
            )
        operative.response_type  # noqa: B018 - materialize (cached)
        return operative


#: the shared Operatives of configurations without a caller model (see _TYPE_CACHE)
_TEMPLATES: dict[tuple[Any, bool, bool], Operative] = {}


def shared_operative(base_type: type[BaseModel] | None, *, reason: bool, actions: bool) -> Operative:
    """The one Operative of a configuration without named fields, built once
    per process and shared by every call (ADR-0022 D2): read its types and
    fields; per-call state goes on :meth:`Operative.for_result`'s copy."""
    # kept on the caller's model (its types subclass it): it goes when the model goes
    templates = _TEMPLATES if base_type is None else class_cache(base_type)
    key = ("operative", bool(reason), bool(actions))
    template = templates.get(key)
    if template is None:
        template = Step.respond_operative(
            Step.request_operative(base_type=base_type, reason=bool(reason), actions=bool(actions))
        )
        template._shared = True
        templates[key] = template
    return template


def operative_for(
    base_type: type[BaseModel] | None,
    *,
    reason: bool,
    actions: bool,
    fields: dict[str, Spec] | None = None,
) -> Operative:
    """An Operative of the call's own (ADR-0022 D2).

    Equal to ``Step.respond_operative(Step.request_operative(base_type=...,
    reason=..., actions=..., fields=...))``; without named fields a
    :meth:`Operative.fresh` copy of :func:`shared_operative`.
    """
    if fields:
        return Step.respond_operative(
            Step.request_operative(base_type=base_type, reason=reason, actions=actions, fields=fields)
        )
    return shared_operative(base_type, reason=reason, actions=actions).fresh()
