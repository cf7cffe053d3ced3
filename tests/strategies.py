"""Hypothesis strategies for hostile action-request payloads and model results.

Every generated request carries the label the safety invariants are checked
against, decided by how the strategy built it (not by re-running lionops'
own checks):

- ``"shape"``: no ADR-0022 D4 shape (not a mapping or model, or a mapping
  without ``function``/``arguments`` after the alias table): ``act()`` must
  raise ValueError before anything is authorized or invoked;
- ``"invalid"``: a valid shape whose content cannot be invoked (unknown or
  non-string function, non-object arguments, arguments that do not fit the
  signature): an error payload, never authorized, never invoked;
- ``"valid"``: a registered tool with arguments that fit its signature; it is
  authorized, then invoked exactly once when the gate allows it.

The tools the labels refer to are :func:`make_tools`'s ``echo``, ``add`` and
``ping``; the gate of :class:`Recorder` denies ``add`` when ``a % 7 == 0``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from lionops import ActionRequestModel

__all__ = [
    "Labeled", "Recorder", "make_tools", "labeled_request", "labeled_requests",
    "model_result", "hostile_value", "deep_json",
]


@dataclass(frozen=True)
class Labeled:
    """One request payload and what the invariants expect of it."""

    payload: Any
    kind: str  # "shape" | "invalid" | "valid"
    function: str | None = None
    arguments: dict[str, Any] | None = None  # the decoded arguments of a valid request

    def __repr__(self) -> str:  # shrunk examples print readably
        text = repr(self.payload)
        return f"Labeled({self.kind}, {text[:120]}{'...' if len(text) > 120 else ''})"


@dataclass
class Recorder:
    """What the tools and the gate observed (real functions, no mocks)."""

    invoked: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    asked: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def gate(self, inv: Any) -> bool:
        self.asked.append((inv.function, dict(inv.arguments)))
        return not (inv.function == "add" and inv.arguments.get("a", 1) % 7 == 0)


def make_tools(rec: Recorder) -> list[Any]:
    """``echo(text: str)``, ``add(a: int, b: int)``, ``ping()``: each records
    its call and checks it got arguments of its signature's types."""

    def echo(text: str) -> str:
        """Echo."""
        assert type(text) is str
        rec.invoked.append(("echo", {"text": text}))
        return text

    async def add(a: int, b: int) -> int:
        """Add."""
        assert type(a) is int and type(b) is int
        rec.invoked.append(("add", {"a": a, "b": b}))
        return a + b

    def ping() -> str:
        """Ping."""
        rec.invoked.append(("ping", {}))
        return "pong"

    return [echo, add, ping]


def expected_output(function: str, arguments: dict[str, Any]) -> Any:
    """What a valid, allowed request's tool returns."""
    if function == "echo":
        return arguments["text"]
    if function == "add":
        return arguments["a"] + arguments["b"]
    return "pong"


def allowed(function: str, arguments: dict[str, Any]) -> bool:
    """The :class:`Recorder` gate's decision."""
    return not (function == "add" and arguments["a"] % 7 == 0)


def deep_json(depth: int) -> str:
    """A JSON text nested ``depth`` levels deep (defeats recursive decoders)."""
    return "[" * depth + "]" * depth


# ------------------------------------------------------------------ pieces

json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=12),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)),
    max_leaves=8,
)
#: Anything a model or a careless adapter can put where a request belongs.
hostile_value = st.one_of(
    json_values,
    st.lists(st.lists(json_scalars, max_size=2), max_size=2),
    st.sampled_from([deep_json(5000), "{", "null", "[]", '"{}"', float("nan"), b"bytes"]),
)

_valid_args = {
    "echo": st.fixed_dictionaries({"text": st.text(max_size=20)}),
    "add": st.fixed_dictionaries({"a": st.integers(-50, 50), "b": st.integers(-50, 50)}),
    "ping": st.just({}),
}
_not_int = st.sampled_from(["x", "", "1.5", "one", 1.5, None, [1], {"v": 1}])
_not_str = st.one_of(st.integers(), st.none(), st.lists(st.text(max_size=2), max_size=1), st.just({"k": 1}))
_bad_args = {
    "echo": st.one_of(st.just({}), st.fixed_dictionaries({"text": _not_str}),
                      st.fixed_dictionaries({"text": st.text(max_size=3), "extra": json_scalars})),
    "add": st.one_of(st.just({"a": 1}), st.fixed_dictionaries({"a": _not_int, "b": st.integers()}),
                     st.fixed_dictionaries({"a": st.integers(), "b": st.integers(), "c": json_scalars}),
                     st.just({"_": {"a": 1, "b": 2}})),
    "ping": st.fixed_dictionaries({"x": json_scalars}),
}
unknown_function = st.one_of(
    st.sampled_from(["execute_python", "Echo", "echo ", "ad", "", "x" * 10_000]),
    st.text(max_size=8).filter(lambda s: s not in _valid_args),
)
non_string_function = st.one_of(st.none(), st.integers(), st.lists(st.just("echo"), max_size=1),
                                st.just({"name": "echo"}))
non_object_arguments = st.one_of(
    st.lists(json_scalars, max_size=3), st.integers(), st.floats(allow_nan=False), st.booleans(),
    st.sampled_from(['["Paris"]', "42", '"text"', "{", "not json", deep_json(5000),
                     json.dumps(json.dumps(["x"])), json.dumps(json.dumps(json.dumps({"a": 1})))]),
)


def _encode(args: dict[str, Any], how: str) -> Any:
    if how == "json":
        return json.dumps(args)
    if how == "double":
        return json.dumps(json.dumps(args))
    return args


def _envelope(function: Any, arguments: Any, keys: tuple[str, str], extra: dict[str, Any]) -> dict[str, Any]:
    out = {keys[0]: function, keys[1]: arguments}
    for k, v in extra.items():
        out.setdefault(k, v)
    return out


_keys = st.sampled_from([("function", "arguments"), ("name", "arguments"), ("function", "parameters"),
                         ("name", "args"), ("function", "input")])
_extra_keys = st.dictionaries(st.sampled_from(["id", "type", "reason", "metadata"]), json_scalars, max_size=2)


@st.composite
def _valid(draw: st.DrawFn) -> Labeled:
    function = draw(st.sampled_from(sorted(_valid_args)))
    args = draw(_valid_args[function])
    how = draw(st.sampled_from(["dict", "dict", "json", "double", "model"]))
    if how == "model":
        return Labeled(ActionRequestModel(function=function, arguments=args), "valid", function, args)
    payload = _envelope(function, _encode(args, how), draw(_keys), draw(_extra_keys))
    return Labeled(payload, "valid", function, args)


@st.composite
def _invalid(draw: st.DrawFn) -> Labeled:
    what = draw(st.sampled_from(["unknown", "function_type", "arguments_type", "signature", "marked"]))
    if what == "marked":  # a native tool call an adapter could not decode
        model = ActionRequestModel(function="echo", arguments={"text": "x"}, invalid="arguments cut off")
        return Labeled(model, "invalid")
    function: Any = draw(st.sampled_from(sorted(_valid_args)))
    arguments: Any = draw(_valid_args[function])
    if what == "unknown":
        function = draw(unknown_function)
    elif what == "function_type":
        function = draw(non_string_function)
    elif what == "arguments_type":
        arguments = draw(non_object_arguments)
    else:
        arguments = _encode(draw(_bad_args[function]), draw(st.sampled_from(["dict", "json"])))
    return Labeled(_envelope(function, arguments, draw(_keys), draw(_extra_keys)), "invalid")


@st.composite
def _shape(draw: st.DrawFn) -> Labeled:
    what = draw(st.sampled_from(["value", "no_arguments", "no_function", "empty"]))
    if what == "value":
        value = draw(hostile_value)
        if isinstance(value, dict):  # a dict here must still lack a key
            value = {k: v for k, v in value.items() if k not in ("function", "name")}
        return Labeled(value, "shape")
    if what == "no_arguments":
        return Labeled({"function": draw(st.sampled_from(sorted(_valid_args))), "argument": {}}, "shape")
    if what == "no_function":
        return Labeled({"arguments": {}, "func": "echo"}, "shape")
    return Labeled({}, "shape")


#: One labeled request; ``shape`` errors are rarer so most lists dispatch.
labeled_request = st.one_of(_valid(), _valid(), _invalid(), _invalid(), _shape())
labeled_requests = st.lists(labeled_request, max_size=8)


@st.composite
def model_result(draw: st.DrawFn) -> tuple[Any, list[Labeled] | None]:
    """What a Middle may return, and the requests ``act()`` will see in it
    (``None``: the gate finds no requests; nothing may run)."""
    what = draw(st.sampled_from(["text", "none", "scalar", "list", "no_requests",
                                 "requests", "requests", "one_request", "requests_not_list"]))
    if what == "text":
        return draw(st.text(max_size=30)), None
    if what == "none":
        return None, None
    if what == "scalar":
        return draw(st.one_of(st.integers(), st.floats(allow_nan=False), st.booleans())), None
    if what == "list":  # a bare list of requests is not a result with action_requests
        return [r.payload for r in draw(labeled_requests)], None
    if what == "no_requests":
        return draw(st.sampled_from([{}, {"answer": 1}, {"action_requests": None}])), None
    if what == "one_request":  # a single request, not in a list (D4 accepts one)
        req = draw(labeled_request.filter(lambda r: r.payload is not None and not isinstance(r.payload, list)))
        return {"action_requests": req.payload}, [req]
    if what == "requests_not_list":
        value = draw(st.one_of(st.text(max_size=10), st.integers(), st.booleans()))
        return {"action_requests": value}, [Labeled(value, "shape")]
    reqs = draw(labeled_requests)
    return {"answer": 1, "action_requests": [r.payload for r in reqs]}, reqs
