"""Rebuilding a recorded call from its cassette alone (``python -m lionops replay``).

Nothing is imported or executed from the cassette: the branch gets its
recorded history, stand-in tools with the recorded schemas (their outputs
come from the recording), a gate repeating the recorded authorization
decisions, and a response model made from the recorded JSON schema. A CLI
agent's model gets the recorded executable name, which is never started
(replay serves its runs); persistence keywords are dropped, so a rebuilt
replay writes no files.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, create_model

from .._text import summarize
from ..branch import Branch
from ..governance import Defer, Deny
from ..imodel import PROVIDERS, iModel
from ..tools import _KEYWORDS, Tool, ToolInvocation, _field_name
from .cassette import CassetteError, CliExchange, Operation
from .run import LOCAL_KEYWORDS

__all__ = ["rebuild", "rebuild_run", "model_from_schema"]

_SCALARS: dict[str, Any] = {"string": str, "integer": int, "number": float, "boolean": bool, "null": type(None)}


class _Builder:
    def __init__(self, root: dict[str, Any]) -> None:
        defs = root.get("$defs", {})
        self.defs: dict[str, Any] = defs if isinstance(defs, dict) else {}
        self.built: dict[str, type[BaseModel]] = {}
        self.building: set[str] = set()

    def model(self, name: str, node: dict[str, Any], extra: str | None = None) -> type[BaseModel]:
        required = set(node.get("required", []))
        properties = node.get("properties") or {}
        taken = set(properties)
        fields: dict[str, Any] = {}
        renamed: dict[str, str] = {}
        for pname, prop in properties.items():
            meta = {k: prop[k] for k in ("title", "description") if k in prop}
            default = ... if pname in required else prop.get("default", None)
            # a name pydantic does not take as a field name (``_id``, ``model_config``,
            # ``copy``) is held under a free one, with the recorded name as its alias,
            # as a derived tool's argument model holds it
            fname = _field_name(pname, taken)
            taken.add(fname)
            if fname != pname:
                meta["alias"] = renamed[fname] = pname
            fields[fname] = (self.type(prop), Field(default, **meta))
        config = ConfigDict(serialize_by_alias=True)
        if extra:
            config["extra"] = extra  # type: ignore[typeddict-item]
        model: type[BaseModel] = create_model(node.get("title") or name, __doc__=node.get("description"),
                                              __config__=config, **fields)
        if renamed:
            _KEYWORDS[model] = renamed  # a rebuilt tool's validated arguments carry the recorded names
        return model

    def type(self, prop: dict[str, Any]) -> Any:
        if not isinstance(prop, dict):
            raise CassetteError(f"a schema is a JSON object, got {type(prop).__name__}")
        if "$ref" in prop:
            ref = prop["$ref"]
            name = ref.rsplit("/", 1)[-1] if isinstance(ref, str) else None
            if name not in self.defs:
                raise CassetteError(f"schema reference {summarize(ref, 80)!r} names no definition")
            if name not in self.built:
                if name in self.building:
                    raise CassetteError(f"schema definition {name!r} refers to itself; it cannot be rebuilt")
                self.building.add(name)
                self.built[name] = self.model(name, self.defs[name])
            return self.built[name]
        if "anyOf" in prop:
            return Union[tuple(self.type(p) for p in prop["anyOf"])]  # noqa: UP007
        if "enum" in prop:
            return Literal[tuple(prop["enum"])]
        if "const" in prop:
            return Literal[prop["const"]]
        kind = prop.get("type")
        if isinstance(kind, list):
            return Union[tuple(self.type({**prop, "type": k}) for k in kind)]  # noqa: UP007
        if kind in _SCALARS:
            return _SCALARS[kind]
        if kind == "array":
            return list[self.type(prop["items"])] if "items" in prop else list  # type: ignore[misc]
        if kind == "object":
            if prop.get("properties"):
                return self.model(prop.get("title", "Object"), prop)
            extra = prop.get("additionalProperties")
            return dict[str, self.type(extra)] if isinstance(extra, dict) and extra else dict  # type: ignore[misc]
        return Any


def model_from_schema(schema: dict[str, Any], name: str = "Model", *, extra: str | None = None) -> type[BaseModel]:
    """A pydantic model whose JSON schema is ``schema`` (objects, scalars,
    arrays, unions, enums, ``$defs`` references, titles, descriptions,
    defaults). Other keywords are not rebuilt; callers compare the schemas."""
    return _Builder(schema).model(name, schema, extra)


def _stub(**kwargs: Any) -> Any:
    raise CassetteError("a rebuilt tool has no function; its output comes from the recording")


@dataclass(slots=True, repr=False)
class RecordedTool(Tool):
    """A stand-in tool with a recorded schema; its arguments are validated
    against that schema, its outputs are served by the replay."""

    recorded_schema: dict[str, Any] = field(default_factory=dict)

    @property
    def schema(self) -> dict[str, Any]:
        return self.recorded_schema

    @classmethod
    def of(cls, schema: dict[str, Any]) -> RecordedTool:
        fn = schema.get("function")
        name = fn.get("name") if isinstance(fn, dict) else None
        if not isinstance(fn, dict) or not isinstance(name, str) or not name.isidentifier():
            raise CassetteError(f"a recorded tool needs a name that is an identifier, got {summarize(name, 80)!r}")
        tool = cls(_stub, name=fn.get("name", ""), description=fn.get("description", ""), recorded_schema=schema)
        params = fn.get("parameters") or {}
        extra = "forbid" if params.get("additionalProperties") is False else "allow"
        tool.arguments_model = model_from_schema(params, f"{tool.name}_arguments", extra=extra)
        return tool


def _gate(op: Operation) -> Any:
    decisions: dict[tuple[int | None, str | None], bool] = {
        (c.index, c.function): c.decision == "allowed" for c in op.tool_calls
                 if c.decision in ("allowed", "denied")}
    # a deferred call is "denied" among the tool calls (it did not run); the
    # trace's record says it waited, so the stand-in defers it again
    actions = op.trace_obj().actions
    deferred: dict[tuple[int | None, str | None], str] = {
        (a.index, a.function): a.reason or "deferred when recorded" for a in actions if a.decision == "deferred"}
    # what a denial told the model (a gate's ``Deny(reason=...)``) is in its
    # recorded payload: the stand-in tells it again, so the result is the same
    told: dict[tuple[int | None, str | None], str] = {
        (a.index, a.function): a.output["reason"] for a in actions
        if a.decision in ("denied", "timed_out") and isinstance(a.output, dict)
        and isinstance(a.output.get("reason"), str)}

    def recorded_decision(invocation: ToolInvocation) -> bool | Defer | Deny:
        key = (invocation.index, invocation.function)
        if key in deferred:
            return Defer(reason=deferred[key])
        if key in told and not decisions.get(key, False):
            return Deny(by="the recording", reason=told[key])
        return decisions.get(key, False)

    return recorded_decision


def _response_format(op: Operation) -> Any:
    fmt = op.call.response_format
    if fmt is None:
        return None
    schema = fmt["schema"]
    if fmt.get("name") is None:
        return schema
    model = model_from_schema(schema, fmt["name"])
    if model.model_json_schema() != schema:
        raise CassetteError(
            f"the response model {fmt['name']!r} cannot be rebuilt exactly from its recorded schema; "
            "replay this cassette from code with lionops.replay.replay(path, branch, **keywords)"
        )
    return model


def _model(op: Operation) -> iModel:
    """The recorded model; a CLI agent's executable is the recorded command's
    name (never started: replay serves its runs)."""
    call = op.call
    endpoint = dict(call.endpoint)
    if PROVIDERS.get((call.provider or "").lower(), "").startswith("lionops.endpoints.cli:"):
        command = next((e.command[:1] for e in op.exchanges if isinstance(e, CliExchange)), None)
        options = {k: v for k, v in endpoint.items() if k in ("timeout", "args", "system")}
        return iModel(provider=call.provider, model=call.model, cli_command=command, **options)
    options = {k: v for k, v in endpoint.items() if k in ("structured_output", "stream", "timeout", "max_retries")}
    return iModel(provider=call.provider, model=call.model, base_url=call.base_url, api_key=None, **options)


def rebuild(op: Operation, *, operation: int = 0) -> tuple[Branch, dict[str, Any]]:
    """A branch and ``operate`` keywords reproducing the recorded call of ``op``.

    Raises:
        CassetteError: the operation used a custom middle, its response
            model cannot be rebuilt exactly, or what it records cannot make a
            branch (a tool name that is not an identifier, a schema that
            refers to itself or to nothing, history or settings of the wrong
            shape).
    """
    try:
        return _rebuild(op)
    except CassetteError as exc:
        raise CassetteError(f"operation {operation} cannot be rebuilt from the cassette: {exc}") from None
    except RecursionError:
        raise CassetteError(f"operation {operation} cannot be rebuilt: its schemas nest too deep") from None
    except Exception as exc:  # noqa: BLE001 - whatever pydantic or typing refuses to build from recorded data
        raise CassetteError(f"operation {operation} cannot be rebuilt from the cassette: "
                            f"{type(exc).__name__}: {summarize(exc, 200)}") from None


def rebuild_run(ops: list[Operation], *, operation: int = 0) -> tuple[Branch, dict[str, Any]]:
    """A branch and ``run`` keywords (operate's, with ``actions``) reproducing
    a recorded run whose rounds are ``ops``: as :func:`rebuild` of its first
    round, with a gate repeating each round's recorded decisions in its round.

    Raises:
        CassetteError: as :func:`rebuild`.
    """
    gates = [_gate(op) for op in ops]

    def recorded_decision(invocation: ToolInvocation) -> bool | Defer:
        # the round now running: the rounds before it each left one trace on the branch
        done = len(branch.traces) - base
        answer: bool | Defer = gates[done](invocation) if 0 <= done < len(gates) else False
        return answer

    try:
        branch, kw = _rebuild(ops[0], gate=recorded_decision)
    except CassetteError as exc:
        raise CassetteError(f"the run from operation {operation} cannot be rebuilt from the cassette: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - as rebuild()
        raise CassetteError(f"the run from operation {operation} cannot be rebuilt from the cassette: "
                            f"{type(exc).__name__}: {summarize(exc, 200)}") from None
    base = len(branch.traces)
    return branch, kw


def _rebuild(op: Operation, gate: Any = None) -> tuple[Branch, dict[str, Any]]:
    call = op.call
    if call.middle not in ("communicate", "run_and_collect", None):
        raise CassetteError(f"the operation used a custom middle {call.middle!r}; replay it from code")
    branch = Branch(chat_model=_model(op), tools=[RecordedTool.of(s) for s in call.registered_tools])
    for msg in call.history:
        branch.messages.add(msg["role"], msg["content"], metadata=dict(msg.get("metadata") or {}))
    branch.gate(gate or _gate(op))
    # Persistence keywords are left out: a rebuilt replay writes no files.
    kw: dict[str, Any] = {**{k: v for k, v in call.keywords.items() if k not in LOCAL_KEYWORDS}, **call.options}
    fmt = _response_format(op)
    if fmt is not None:
        kw["response_format"] = fmt
    return branch, kw
