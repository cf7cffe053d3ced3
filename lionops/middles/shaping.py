"""Request shaping for API Middles: the response format a request asks for.

A pydantic response format is rendered from its *request* model (never
``action_responses``, ADR-0022 D2) and asked for the way the endpoint's
``structured_output`` says: a native ``response_format`` (strict only where
strict mode keeps the schema's meaning), JSON mode with the schema in the
prompt, or the prompt alone. Pure: no IO.
"""

from __future__ import annotations

import json
import re
import weakref
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from .._frozen import freeze
from ..operative import request_type_of

__all__ = ["request_model_of", "per_request_model", "request_schema", "strict_json_schema", "structured_options"]

#: request model class -> (its pydantic core schema when the values were
#: made, {key: value}); see :func:`per_request_model`.
_PER_MODEL: weakref.WeakKeyDictionary[type, tuple[Any, dict[str, Any]]] = weakref.WeakKeyDictionary()


def request_model_of(response_format: Any) -> type[BaseModel] | None:
    """The *request* model class behind ``response_format`` (a model class, a
    generated response type or a model instance), else ``None``."""
    target = request_type_of(response_format)
    if isinstance(target, type) and issubclass(target, BaseModel):
        return target
    if isinstance(target, BaseModel):
        return type(target)
    return None


def per_request_model(model: type[BaseModel], key: str, build: Callable[[type[BaseModel]], Any]) -> Any:
    """``build(model)``, made once per model class and ``key`` and shared by
    every call (so it must not be changed: schemas are read-only containers).

    Made again after the class is rebuilt (``model_rebuild()`` changes its
    core schema); a class that is not complete yet is not cached.
    """
    core = getattr(model, "__pydantic_core_schema__", None)
    entry = _PER_MODEL.get(model)
    if entry is None or entry[0] is not core:
        entry = (core, {})
        if getattr(model, "__pydantic_complete__", False):
            _PER_MODEL[model] = entry
    values = entry[1]
    if key not in values:
        values[key] = build(model)
    return values[key]


def request_schema(response_format: Any) -> dict[str, Any] | None:
    """JSON schema the model is shown: the *request* model (no ``action_responses``).

    For a model class it is generated once per class and shared: a read-only
    mapping (:class:`lionops._frozen.FrozenDict`; ``thaw`` it to change a copy).
    A dict schema is returned as given.
    """
    model = request_model_of(response_format)
    if model is not None:
        return per_request_model(model, "schema", lambda m: freeze(m.model_json_schema()))  # type: ignore[no-any-return]
    target = request_type_of(response_format)
    if isinstance(target, dict):
        return target
    return None


def _admits_null(node: Any) -> bool:
    if not isinstance(node, dict):
        return False
    kind = node.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    return any(_admits_null(n) for n in node.get("anyOf", ()))


def _strictify(node: Any) -> bool:
    """Make ``node`` (in place) a strict-mode schema; ``False`` when it cannot be one."""
    if isinstance(node, list):
        return all(_strictify(n) for n in node)
    if not isinstance(node, dict):
        return True
    if "oneOf" in node or "allOf" in node or "patternProperties" in node:
        return False
    is_object = node.get("type") == "object" or "properties" in node
    if is_object:
        extra = node.get("additionalProperties")
        props = node.get("properties")
        if extra not in (None, False) or not props:
            return False  # a free-form object (dict[str, Any]) cannot be strict
        required = list(node.get("required", []))
        for name, prop in props.items():
            if name in required:
                continue
            # An optional field may become required only if null means "left out".
            if not (isinstance(prop, dict) and prop.get("default", ...) is None and _admits_null(prop)):
                return False
            prop.pop("default", None)
            required.append(name)
        node["required"] = required
        node["additionalProperties"] = False
    for key in ("properties", "$defs", "definitions"):
        if key in node and not all(_strictify(v) for v in node[key].values()):
            return False
    for key in ("items", "anyOf", "prefixItems"):
        if key in node and not _strictify(node[key]):
            return False
    return True


def strict_json_schema(schema: dict[str, Any]) -> dict[str, Any] | None:
    """A strict-mode copy of ``schema``, or ``None`` when strict mode would change its meaning.

    Strict mode requires every property and no free-form objects. An
    optional field whose default is ``None`` and whose type admits null is
    made required-and-nullable (the same meaning). Any other optional field
    (``tags: list = []``), a ``dict[str, Any]`` (the action request
    ``arguments``), ``oneOf``/``allOf`` or ``patternProperties`` makes the
    schema non-strict, so leaving out an optional field never becomes fatal
    (a schema is strict only where strictness cannot reject a valid answer).
    """
    copy = json.loads(json.dumps(schema))
    return copy if _strictify(copy) else None


def _json_schema_option(schema: dict[str, Any]) -> dict[str, Any]:
    """The ``json_schema`` response format of ``schema``, strict when strict mode keeps its meaning."""
    strict = strict_json_schema(schema)
    spec = {"name": _schema_name(schema), "schema": strict or schema, "strict": strict is not None}
    return {"type": "json_schema", "json_schema": spec}


def _schema_name(schema: dict[str, Any]) -> str:
    name = re.sub(r"[^a-zA-Z0-9_-]", "_", str(schema.get("title") or "response"))
    return name[:64] or "response"


def structured_options(endpoint: Any, response_format: Any) -> tuple[dict[str, Any], bool]:
    """Request options asking for ``response_format``, and whether the
    schema must also go into the prompt.

    For a pydantic model the *request* model is rendered (never
    ``action_responses``, ADR-0022 D2). In ``"json_schema"`` mode the
    answer is ``{"response_format": {"type": "json_schema", "json_schema":
    {"name", "schema", "strict"}}}`` with ``strict`` true only when
    :func:`strict_json_schema` allows it; ``"json_object"`` asks for JSON
    mode and puts the schema in the prompt; ``"prompt"`` only puts it in
    the prompt. A dict that already is a ``response_format``
    (``{"type": "json_schema" | "json_object" | "text", ...}``) is sent as is.

    ``endpoint.structured_output`` says how the format is asked for
    (``"json_schema"`` when the endpoint has no such setting).
    """
    if isinstance(response_format, dict) and response_format.get("type") in ("json_schema", "json_object", "text"):
        return {"response_format": response_format}, False
    schema = request_schema(response_format)
    if schema is None:
        return {}, False
    mode = getattr(endpoint, "structured_output", "json_schema")
    if mode == "prompt":
        return {}, True
    if mode == "json_object":
        return {"response_format": {"type": "json_object"}}, True
    model = request_model_of(response_format)
    if model is None:
        return {"response_format": _json_schema_option(schema)}, False
    # Built once per request model (the strict conversion walks and copies the schema).
    option = per_request_model(model, "json_schema_option", lambda m: freeze(_json_schema_option(schema)))
    return {"response_format": option}, False
