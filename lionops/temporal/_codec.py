"""What crosses a Temporal boundary (workflow ⇄ activity, client ⇄ workflow).

Payloads are JSON. ``operate()`` keywords are JSON values, pydantic model
instances and pydantic model classes (a ``response_format``); classes travel
as ``module:qualname`` references. Results travel tagged by kind, so the
workflow gets back the same Python type the adapter returned.

Data stays data: a reference is only ever looked up among the registered
types (:func:`register_type`: the classes this process encoded, the response
models and tool argument models of its durable branches), never imported, so
no value a sender chooses turns into code on the receiver. A mapping of user
data whose keys look like this codec's markers travels wrapped and arrives
unchanged.
"""

from __future__ import annotations

import base64
from typing import Any

from pydantic import BaseModel

from ..messages import Message, MessageLog, to_jsonable
from ..models import RawOutput
from .errors import DurableArgumentError

__all__ = [
    "class_ref", "resolve_class", "register_type", "encode_value", "decode_value", "encode_kwargs", "decode_kwargs",
    "encode_result", "decode_result", "restore_messages", "WORKER_OWNED",
]

#: Keywords of ``Branch.operate`` that name worker-side parts: a durable
#: branch owns its model and adapter, so a workflow may not pass them.
WORKER_OWNED = ("chat_model", "parse_model", "middle", "engine")

_CLASS = "$lionops_class"
_MODEL = "$lionops_model"
_BYTES = "$lionops_bytes"
#: wraps a user mapping whose keys start with the marker prefix: its keys are data
_DATA = "$lionops_data"
_PREFIX = "$lionops_"

#: ``module:qualname`` -> the class: the only classes a reference can name.
_TYPES: dict[str, type[BaseModel]] = {}


def register_type(cls: type[BaseModel]) -> str:
    """Allow ``cls`` to be rebuilt from its reference in this process; its reference.

    Raises DurableArgumentError for a class that is not a pydantic model or
    one defined inside a function (its name is not unique). A class defined
    again under the same ``module:qualname`` (a module reloaded) replaces the
    one registered before.
    """
    if not (isinstance(cls, type) and issubclass(cls, BaseModel)):
        raise DurableArgumentError(f"only pydantic model classes cross to a Temporal activity, got {cls!r}")
    ref = f"{cls.__module__}:{cls.__qualname__}"
    if "<locals>" in cls.__qualname__:
        raise DurableArgumentError(
            f"{cls.__qualname__} is defined inside a function: a class that crosses to a Temporal "
            "activity must be defined at module level of an importable module"
        )
    _TYPES[ref] = cls
    return ref


def class_ref(cls: type) -> str:
    """``module:qualname`` of a pydantic model class, registered; raises DurableArgumentError otherwise."""
    return register_type(cls)


def resolve_class(ref: str) -> type[BaseModel]:
    """The registered class named ``ref``; DurableArgumentError for any other name (nothing is imported)."""
    cls = _TYPES.get(ref) if isinstance(ref, str) else None
    if cls is None:
        raise DurableArgumentError(
            f"{str(ref)[:200]!r} is not a registered type: list response models in "
            "DurableBranch(..., response_models=[...])"
        )
    return cls


def encode_value(value: Any, where: str = "value") -> Any:
    """``value`` as JSON data (see the module docstring); raises DurableArgumentError."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, type) and issubclass(value, BaseModel):
        return {_CLASS: class_ref(value)}
    if isinstance(value, BaseModel):
        return {_MODEL: class_ref(type(value)), "data": value.model_dump(mode="json")}
    if isinstance(value, (bytes, bytearray)):
        return {_BYTES: base64.b64encode(bytes(value)).decode()}
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise DurableArgumentError(f"{where}: mapping keys must be strings to cross to an activity, got {k!r}")
            out[k] = encode_value(v, f"{where}[{k!r}]")
        if any(k.startswith(_PREFIX) for k in out):  # user keys that look like markers stay data
            return {_DATA: out}
        return out
    if isinstance(value, (list, tuple)):
        return [encode_value(v, f"{where}[{i}]") for i, v in enumerate(value)]
    raise DurableArgumentError(
        f"{where}: a {type(value).__name__} cannot cross to a Temporal activity; pass JSON data, "
        "pydantic model instances or importable pydantic model classes"
    )


def decode_value(value: Any) -> Any:
    """The value :func:`encode_value` encoded. A class or model is rebuilt only
    from a registered type (DurableArgumentError otherwise); nothing is imported."""
    if isinstance(value, list):
        return [decode_value(v) for v in value]
    if not isinstance(value, dict):
        return value
    if len(value) == 1 and _DATA in value and isinstance(value[_DATA], dict):
        return {k: decode_value(v) for k, v in value[_DATA].items()}
    if _CLASS in value and len(value) == 1:
        return resolve_class(value[_CLASS])
    if _MODEL in value and set(value) == {_MODEL, "data"}:
        return resolve_class(value[_MODEL]).model_validate(value["data"])
    if _BYTES in value and len(value) == 1 and isinstance(value[_BYTES], str):
        return base64.b64decode(value[_BYTES])
    return {k: decode_value(v) for k, v in value.items()}


def encode_kwargs(kwargs: dict[str, Any], *, drop: tuple[str, ...] = ()) -> dict[str, Any]:
    """``operate()`` keywords as JSON; ``drop`` names keywords left out."""
    return {k: encode_value(v, f"keyword {k!r}") for k, v in kwargs.items() if k not in drop}


def decode_kwargs(data: dict[str, Any]) -> dict[str, Any]:
    return {k: decode_value(v) for k, v in data.items()}


def encode_result(result: Any) -> dict[str, Any]:
    """An adapter result tagged by kind: none, raw (a RawOutput), text, model, json."""
    if result is None:
        return {"kind": "none"}
    if isinstance(result, RawOutput):
        return {"kind": "raw", "text": str(result), "reason": result.reason, "detail": result.detail}
    if isinstance(result, str):
        return {"kind": "text", "value": result}
    if isinstance(result, BaseModel):
        cls = type(result)
        return {"kind": "model", "name": cls.__qualname__, "ref": f"{cls.__module__}:{cls.__qualname__}",
                "data": result.model_dump(mode="json")}
    return {"kind": "json", "value": to_jsonable(result)}


def decode_result(data: dict[str, Any], candidates: tuple[Any, ...] = ()) -> Any:
    """Rebuild an :func:`encode_result` value. A model is validated into the
    first candidate class of its name (the workflow's own response types),
    else into the registered class of its reference; a dict when neither
    exists (nothing is imported)."""
    kind = data.get("kind")
    if kind == "none":
        return None
    if kind == "raw":
        return RawOutput(data["text"], reason=data.get("reason"), detail=data.get("detail"))
    if kind == "text":
        return data["value"]
    if kind == "model":
        for cls in candidates:
            if isinstance(cls, type) and issubclass(cls, BaseModel) and cls.__qualname__ == data["name"]:
                return cls.model_validate(data["data"])
        cls = _TYPES.get(data.get("ref"))  # type: ignore[arg-type]
        if cls is not None:
            return cls.model_validate(data["data"])
        return data["data"]
    return data.get("value")


def restore_messages(log: MessageLog, messages: list[dict[str, Any]], *, keep_ids: bool = True) -> list[Message]:
    """Append ``Message.to_dict()`` records to ``log`` (ids renumbered unless ``keep_ids``)."""
    out = []
    for m in messages:
        kw: dict[str, Any] = {
            "sender": m.get("sender"), "recipient": m.get("recipient"),
            "metadata": dict(m.get("metadata") or {}), "timestamp": m.get("timestamp"),
        }
        if keep_ids and m.get("id") is not None:
            kw["id"] = m["id"]
        if kw["timestamp"] is None:
            del kw["timestamp"]
        out.append(log.add(m["role"], m.get("content"), **kw))
    return out
