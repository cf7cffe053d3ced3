"""``response_format`` values other than a pydantic model: dataclasses and
``TypedDict`` classes through pydantic's ``TypeAdapter`` (ADR-0022 D2).

A dataclass or ``TypedDict`` is turned, once per class, into a pydantic model
with the same fields, types and defaults (:func:`model_of_format`); the
pipeline runs on that model, so every exit, the mismatch policy and the
validation are those of a model. A result of the model is turned back into
the caller's type with ``TypeAdapter(format).validate_python``
(:func:`caller_value`): a dataclass instance, or a ``dict`` for a
``TypedDict``. A result that also carries fields lionops added
(``reason=True``, ``actions=True``, ``field_models``) stays the model, which
holds them.

A ``dict`` is taken only when it is a JSON schema, or a provider's own
``response_format`` option (ADR-0022 D2 passes it to the adapter); any other
value is an :class:`~lionops.errors.ArgumentTypeError` before a request.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import typing
from typing import Any

from pydantic import BaseModel, PydanticUserError, TypeAdapter, create_model, model_validator
from pydantic.fields import FieldInfo
from typing_extensions import is_typeddict

from ._classcache import class_cache
from .errors import ArgumentTypeError

__all__ = ["check_response_format", "model_stands_for", "model_of_format", "caller_value", "format_of"]

#: Attribute of a generated model: the dataclass or TypedDict it stands for.
_FORMAT_ATTR = "__lionops_format__"

#: JSON Schema keywords one of which a dict schema has (or a provider option's keys).
_SCHEMA_KEYS = frozenset({
    "type", "properties", "$ref", "$defs", "definitions", "anyOf", "oneOf", "allOf", "enum", "const",
    "items", "json_schema", "schema",
})

#: keys of a format's class cache: its generated model, its TypeAdapter
_MODEL_KEY, _ADAPTER_KEY = "format_model", "format_adapter"
_LOCK = threading.Lock()

_HELP = ("response_format takes a pydantic model class (or instance), a dataclass, a TypedDict, "
         "or a JSON schema dict")


def _is_dataclass_type(value: Any) -> bool:
    return isinstance(value, type) and dataclasses.is_dataclass(value)


def check_response_format(value: Any) -> Any:
    """``value`` as the pipeline takes it: a model class or instance, a JSON
    schema dict and ``None`` unchanged; a dataclass (class or instance) or
    ``TypedDict`` as its generated model (:func:`model_of_format`).

    Raises:
        ArgumentTypeError: any other value (a ``str``, an ``int``, a ``dict``
            that is not a JSON schema, a class that is none of these).
    """
    if value is None or isinstance(value, BaseModel) or (isinstance(value, type) and issubclass(value, BaseModel)):
        return value
    if isinstance(value, dict):
        if _is_schema(value):
            return value
        raise ArgumentTypeError(
            f"{_HELP}; got a dict that is not a JSON schema (keys {sorted(map(str, value))[:8]}). "
            "Describe the answer with a pydantic model, a dataclass or a TypedDict, or pass its JSON schema "
            "({'type': 'object', 'properties': {...}})"
        )
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = type(value)
    if _is_dataclass_type(value) or is_typeddict(value):
        return model_of_format(value)
    shown = value.__name__ if isinstance(value, type) else f"{type(value).__name__} {str(value)[:60]!r}"
    raise ArgumentTypeError(
        f"{_HELP}; got {shown}. Wrap the answer in a model: class Answer(BaseModel): value: ..."
    )


def _is_schema(value: dict[Any, Any]) -> bool:
    if not _SCHEMA_KEYS.intersection(k for k in value if isinstance(k, str)):
        return False
    try:
        json.dumps(value)
    except (TypeError, ValueError):  # a Python type or object as a value: not JSON
        return False
    return True


def model_stands_for(value: Any) -> bool:
    """Whether ``value`` is a dataclass (class or instance) or a ``TypedDict``,
    which :func:`check_response_format` turns into a generated model."""
    return dataclasses.is_dataclass(value) or is_typeddict(value)


def model_of_format(fmt: type) -> type[BaseModel]:
    """The pydantic model of a dataclass or ``TypedDict`` (made once per class):
    the same field names, annotations and defaults, so it validates as
    ``TypeAdapter(fmt)`` does, and names the same JSON schema properties."""
    # kept on ``fmt`` (the model names it): it goes when ``fmt`` goes
    cache = class_cache(fmt)
    with _LOCK:
        model = cache.get(_MODEL_KEY)
        if model is None:
            model = cache[_MODEL_KEY] = _build(fmt)
    return model


def _build(fmt: type) -> type[BaseModel]:
    hints = typing.get_type_hints(fmt, include_extras=True)
    fields: dict[str, Any] = {}
    if _is_dataclass_type(fmt):
        for f in dataclasses.fields(fmt):
            if not f.init:
                continue
            info: FieldInfo
            if f.default is not dataclasses.MISSING:
                info = FieldInfo(default=f.default)
            elif f.default_factory is not dataclasses.MISSING:
                info = FieldInfo(default_factory=f.default_factory)
            else:
                info = FieldInfo()
            fields[f.name] = (hints.get(f.name, Any), info)
    else:  # a TypedDict: keys it does not require may be left out
        required = getattr(fmt, "__required_keys__", frozenset(hints))
        for name, hint in hints.items():
            needed = name in required
            while typing.get_origin(hint) in (typing.Required, typing.NotRequired):
                # read from the annotation too: under postponed annotations the class may not have
                needed = typing.get_origin(hint) is typing.Required
                hint = typing.get_args(hint)[0]
            fields[name] = (hint, FieldInfo() if needed else FieldInfo(default=None))
    names = tuple(fields)

    def as_format(self: BaseModel) -> BaseModel:
        """The caller's own checks (a dataclass's ``__post_init__``) run too: a
        value they refuse does not validate, so it is a mismatch like any other."""
        adapter = _adapter(fmt)
        if adapter is not None:
            adapter.validate_python({n: getattr(self, n) for n in names if n in self.model_fields_set
                                     or not is_typeddict(fmt)})
        return self

    validators: dict[str, Any] = {"lionops_as_format": model_validator(mode="after")(as_format)}
    model: type[BaseModel] = create_model(fmt.__name__, __doc__=fmt.__doc__, __module__=fmt.__module__,
                                          __validators__=validators, **fields)
    setattr(model, _FORMAT_ATTR, fmt)
    return model


def format_of(model: Any) -> type | None:
    """The dataclass or ``TypedDict`` a generated model stands for, else ``None``."""
    return typing.cast("type | None", vars(model).get(_FORMAT_ATTR)) if isinstance(model, type) else None


def caller_value(result: Any) -> Any:
    """``result`` in the caller's type when it is an instance of a generated
    model, or of its response type without added fields (a dataclass
    instance, a ``dict`` for a ``TypedDict``); any other value (a mismatch, a
    model that holds added fields) unchanged."""
    if not isinstance(result, BaseModel):
        return result
    base: type[BaseModel] | None = None
    fmt: type | None = None
    for klass in type(result).__mro__:  # format_of of each class, inline: once per call of every operation
        fmt = klass.__dict__.get(_FORMAT_ATTR)
        if fmt is not None:
            base = klass
            break
    if base is None or fmt is None:
        return result
    if set(type(result).__pydantic_fields__) != set(base.__pydantic_fields__):  # reason, action fields...: kept
        return result
    data = {name: getattr(result, name) for name in base.model_fields
            if not is_typeddict(fmt) or name in result.model_fields_set}
    adapter = _adapter(fmt)
    # typing.TypedDict before Python 3.12 has no TypeAdapter: its values were validated by the model
    return dict(data) if adapter is None else adapter.validate_python(data)


def _adapter(fmt: type) -> TypeAdapter[Any] | None:
    """``TypeAdapter(fmt)``, made once per format and kept on it; ``None`` when pydantic has none."""
    cache = class_cache(fmt)
    try:
        return cache[_ADAPTER_KEY]  # type: ignore[no-any-return]
    except KeyError:
        pass
    try:
        adapter: TypeAdapter[Any] | None = TypeAdapter(fmt)
    except PydanticUserError:
        adapter = None
    cache[_ADAPTER_KEY] = adapter
    return adapter
