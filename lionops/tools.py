"""Tools, tool schemas and the branch's action manager.

A :class:`Tool` wraps a plain sync or async callable. Its JSON schema comes
from the signature and docstring through pydantic; arguments are validated
against that schema (unknown keys rejected) before the call.
"""

from __future__ import annotations

import ast
import functools
import inspect
import json
import operator
import sys
import types
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio.to_thread
import docstring_parser
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PydanticInvalidForJsonSchema,
    PydanticUndefinedAnnotation,
    PydanticUserError,
    ValidationError,
    create_model,
)
from pydantic.fields import FieldInfo
from pydantic_core import SchemaError

from ._frozen import FrozenDict, freeze, thaw
from ._text import summarize
from .errors import ArgumentTypeError, ConfigurationError, ToolArgumentsError, ToolNotOfferedError, UnknownToolError
from .runtime import current_runtime

__all__ = [
    "Tool", "ToolInvocation", "ActionManager", "ToolArgumentsError", "UnknownToolError",
    "ToolNotOfferedError", "FrozenArguments", "ToolSchema",
]



def _first_paragraph(doc: str | None) -> str:
    if not doc:
        return ""
    return inspect.cleandoc(doc).partition("\n\n")[0].replace("\n", " ").strip()


def _unwrapped(func: Any) -> Any:
    """The function a ``functools.partial`` wraps, however deep partials nest;
    any other callable as it is."""
    while isinstance(func, functools.partial):
        func = func.func
    return func


def _doc_of(func: Any) -> str | None:
    """The docstring that describes ``func`` to the model: a partial's
    function's (never ``functools.partial``'s own), a function's or class's
    own, a callable object's class's, else its ``__call__``'s."""
    func = _unwrapped(func)
    doc = func.__doc__  # every object has one (None when its class has no docstring)
    if not doc and not inspect.isroutine(func) and not inspect.isclass(func):
        doc = type(func).__call__.__doc__
    return doc if isinstance(doc, str) else None


def _param_docs(doc: str | None) -> dict[str, str]:
    """Parameter descriptions from a docstring in Google, NumPy, Sphinx (reST) or
    Epydoc style (read by docstring_parser), each on one line."""
    if not doc:
        return {}
    try:
        params = docstring_parser.parse(doc).params
    except docstring_parser.ParseError:  # no style reads it: no descriptions
        return {}
    return {p.arg_name: " ".join(p.description.split()) for p in params if p.description}


def _home(func: Any) -> tuple[dict[str, Any], str]:
    """The namespace and module name the annotations of ``func`` were written in
    (through wrappers, partials and bound methods; a class's ``__init__``, a
    callable object's ``__call__``)."""
    target = inspect.unwrap(func)
    while isinstance(target, functools.partial):
        target = inspect.unwrap(target.func)
    target = getattr(target, "__func__", target)
    if inspect.isclass(target):
        init = target.__init__
        if not isinstance(init, types.FunctionType):  # a NamedTuple, a class with only __new__: its module
            module = target.__module__
            return getattr(sys.modules.get(module), "__dict__", {}), module
        target = init
    elif not isinstance(target, types.FunctionType):
        target = type(target).__call__
    # no module (``exec`` with globals that have no ``__name__``): one no import can give
    return getattr(target, "__globals__", {}), getattr(target, "__module__", None) or "<no module>"


def _annotation(ann: Any, namespace: dict[str, Any]) -> Any:
    """``ann`` evaluated in the function's own globals, again while it is a string
    (a quoted annotation under ``from __future__ import annotations`` is the
    string of a string); the string as it is when a name in it is not defined
    there (pydantic resolves it in the function's module, if it can, when the
    arguments are first validated)."""
    for _ in range(_QUOTES):
        if not isinstance(ann, str):
            break
        try:
            ann = eval(ann, namespace)  # noqa: S307 - the function's own annotation, as Python would
        except Exception:  # noqa: BLE001 - a name only known locally or under TYPE_CHECKING
            break
    return ann


#: How many times a string annotation is evaluated again while it is a string (a
#: name bound to its own name, ``X = "X"``, would otherwise never end).
_QUOTES = 3


def _type_checking_names(module: str) -> frozenset[str]:
    """The names ``module`` imports only under ``if TYPE_CHECKING:`` (never defined when it runs)."""
    try:
        tree = ast.parse(inspect.getsource(sys.modules[module]))
    except Exception:  # noqa: BLE001 - no module or no source: nothing known
        return frozenset()
    names: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.If):
            continue
        test = node.test
        if (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
                isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"):
            for inner in node.body:
                for stmt in ast.walk(inner):
                    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                        names.update((a.asname or a.name).split(".")[0] for a in stmt.names)
    return frozenset(names)


def _unresolvable(name: str, module: str, unresolved: dict[str, str]) -> None:
    """Refuse a tool whose annotation names a type its module imports only under
    ``TYPE_CHECKING``, or one its globals do not define when its module is not
    imported: no call could ever validate its arguments."""
    guarded = _type_checking_names(module)
    for pname, text in unresolved.items():
        if module not in sys.modules:  # made by exec in a namespace of its own: nothing resolves it later
            raise ConfigurationError(
                f"tool {name!r}: parameter {pname!r} is annotated with {text!r}, which the function's globals do "
                f"not define; its module {module!r} is not imported, so it cannot be resolved later")
        try:
            used = {n.id for n in ast.walk(ast.parse(text, mode="eval")) if isinstance(n, ast.Name)}
        except SyntaxError:
            continue
        hidden = sorted(used & guarded)
        if hidden:
            raise ConfigurationError(
                f"tool {name!r}: parameter {pname!r} is annotated with {', '.join(hidden)}, which its module "
                "imports only under TYPE_CHECKING, so its arguments cannot be validated; import it at run time")


def _field_name(pname: str, taken: set[str]) -> str:
    """``pname`` when pydantic takes it as a field name, else a free safe name (the
    parameter's name becomes its alias)."""
    if not pname.startswith(("_", "model_")) and not hasattr(BaseModel, pname):
        return pname
    n = 0
    while f"arg{n}_" in taken:
        n += 1
    return f"arg{n}_"


def _arguments_model(func: Callable[..., Any], name: str) -> tuple[type[BaseModel], tuple[str, ...]]:
    """The argument model of ``func`` and the names of its positional-only parameters, in order."""
    try:
        sig = inspect.signature(func)
    except (TypeError, ValueError) as exc:  # a builtin or C type without a readable signature
        raise ConfigurationError(f"tool {name!r}: its signature cannot be read: {exc}") from None
    docs = _param_docs(_doc_of(func))
    namespace, module = _home(func)
    taken = set(sig.parameters)
    defs: dict[str, Any] = {}
    unresolved: dict[str, str] = {}
    renamed: dict[str, str] = {}
    positional: list[str] = []
    extra: Literal["allow", "forbid"] = "forbid"
    extras: Any = Any
    for pname, p in sig.parameters.items():
        if p.kind is inspect.Parameter.VAR_POSITIONAL:
            continue
        # a name the module does not define stays a string, which pydantic resolves if it can
        ann = Any if p.annotation is inspect.Parameter.empty else _annotation(p.annotation, namespace)
        if isinstance(ann, str):
            unresolved[pname] = ann
        if p.kind is inspect.Parameter.VAR_KEYWORD:
            extra = "allow"
            extras = ann
            continue
        if p.kind is inspect.Parameter.POSITIONAL_ONLY:
            positional.append(pname)
        fname = _field_name(pname, taken)
        taken.add(fname)
        # a docstring description first; with none of its own, one in the Field
        # default or in ``Annotated[..., Field(description=...)]`` is kept
        spec: dict[str, Any] = {"description": docs[pname]} if pname in docs else {}
        if fname != pname:
            spec["alias"] = renamed[fname] = pname
        if isinstance(p.default, FieldInfo):  # ``n: int = Field(3, ...)``: the field's own spec
            field_info = FieldInfo.merge_field_infos(p.default, **spec)
        else:
            field_info = Field(... if p.default is inspect.Parameter.empty else p.default, **spec)
        defs[fname] = (ann, field_info)
    model_name = "".join(part.capitalize() for part in name.split("_")) + "Arguments"
    config = ConfigDict(extra=extra, arbitrary_types_allowed=True)
    try:
        if extra == "forbid":
            model = create_model(model_name, __config__=config, __module__=module, **defs)
        else:  # ``**kwargs``: every extra argument is validated as its annotation
            base = types.new_class(model_name, (BaseModel,), exec_body=lambda ns: ns.update(
                __annotations__={"__pydantic_extra__": dict[str, extras]}, __module__=module,
                # the schema still says any extra key may be given, as for an untyped **kwargs
                model_config=ConfigDict(extra=extra, arbitrary_types_allowed=True,
                                        json_schema_extra={"additionalProperties": True})))
            model = create_model(model_name, __base__=base, __module__=module, **defs)
    except Exception as exc:  # noqa: BLE001 - annotations no model can be built of
        raise ConfigurationError(f"tool {name!r}: its signature cannot be validated: {summarize(exc, 300)}") from None
    if unresolved:
        _unresolvable(name, module, unresolved)
    _KEYWORDS[model] = renamed
    return model, tuple(positional)


#: callable -> (the attributes its argument model is derived from, name ->
#: (argument model, docstring description, is_async)). A Tool made again from
#: the same function (``Branch(tools=[f])`` per request) reuses what was
#: derived; a function whose code, defaults, annotations, signature or
#: docstring were replaced since is derived anew.
_DERIVED: weakref.WeakKeyDictionary[Any, tuple[tuple[Any, ...], dict[str, tuple[Any, str, bool, tuple[str, ...]]]]] = (
    weakref.WeakKeyDictionary()
)
#: argument model -> its JSON schema as the ``parameters`` of a tool schema.
_PARAMETERS: weakref.WeakKeyDictionary[type[BaseModel], dict[str, Any]] = weakref.WeakKeyDictionary()
#: derived argument model -> field name -> the parameter's own name, for the
#: parameters pydantic cannot take as field names (``model_config``, ``_x``...).
_KEYWORDS: weakref.WeakKeyDictionary[type[BaseModel], dict[str, str]] = weakref.WeakKeyDictionary()
#: argument model -> (name, description) -> the offered schema (:attr:`Tool.offered_schema`).
_OFFERED: weakref.WeakKeyDictionary[type[BaseModel], dict[tuple[str, str], ToolSchema]] = weakref.WeakKeyDictionary()


class ToolSchema(FrozenDict):
    """A tool's schema as a call offers it: a read-only ``dict`` shared by
    every call, with its ``json.dumps`` text made once (``json``)."""

    __slots__ = ("_json",)
    _refusal = "an offered tool schema is shared and read-only; Tool.schema gives a copy to change"

    def __init__(self, data: Any = ()) -> None:
        dict.__init__(self, data)
        self._json = json.dumps(self)

    @property
    def json(self) -> str:
        return self._json


_DERIVATION_ATTRS = ("__code__", "__defaults__", "__kwdefaults__", "__annotations__", "__doc__")


def _derivation_inputs(func: Any) -> tuple[Any, ...]:
    """What a function's argument model and description are derived from."""
    if type(func) is types.FunctionType:  # the common case, read directly
        extra = func.__dict__
        return (func.__code__, func.__defaults__, func.__kwdefaults__, func.__annotations__, func.__doc__,
                extra.get("__signature__"), extra.get("__wrapped__"))
    return (*(getattr(func, a, None) for a in _DERIVATION_ATTRS),
            getattr(func, "__signature__", None), getattr(func, "__wrapped__", None))


#: (module, qualname) -> (source fingerprint, name -> derived): a plain function's
#: derivation kept across imports of its module. Temporal's workflow sandbox
#: imports a workflow's module anew for every run, so the same source gives a new
#: function object each time; one entry per module and qualname, replaced when
#: the fingerprint differs.
_BY_SOURCE: dict[tuple[str, str], tuple[tuple[Any, ...], dict[str, tuple[Any, str, bool, tuple[str, ...]]]]] = {}

#: default values compared by value across imports (immutable, no identity of their own)
_PLAIN_DEFAULTS = frozenset({type(None), bool, int, float, complex, str, bytes})


def _source_fingerprint(func: Any) -> tuple[Any, ...] | None:
    """What a plain function's derivation depends on, comparable across imports of
    its module: its code object (compared by content: bytecode, constants, names,
    line numbers), plain default values, its docstring and its parameters'
    annotations evaluated in its globals (classes compared by identity, so a
    class made again by the import is a different annotation). ``None`` when one
    of them cannot be compared so (a non-plain default, an annotation that does
    not evaluate, a ``__signature__`` or ``__wrapped__``): such a function is
    derived per function object."""
    if type(func) is not types.FunctionType:
        return None
    extra = func.__dict__
    if extra.get("__signature__") is not None or extra.get("__wrapped__") is not None:
        return None
    defaults = func.__defaults__ or ()
    kwdefaults = func.__kwdefaults__ or {}
    if not all(type(d) in _PLAIN_DEFAULTS for d in (*defaults, *kwdefaults.values())):
        return None
    namespace = func.__globals__
    annotations = []
    for pname, ann in func.__annotations__.items():
        if pname == "return":
            continue
        resolved = _annotation(ann, namespace)
        if isinstance(resolved, str):  # resolved later by pydantic, in the module as it is then
            return None
        annotations.append((pname, resolved))
    # defaults by type and repr: ``0.0`` and ``-0.0`` are equal but not the same default
    return (func.__code__, tuple((type(d), repr(d)) for d in defaults),
            tuple((k, type(v), repr(v)) for k, v in kwdefaults.items()), func.__doc__, tuple(annotations))


def _same_source(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - an annotation whose == raises: not the same
        return False


def _derive(func: Any, name: str) -> tuple[Any, str, bool, tuple[str, ...]]:
    """(argument model, docstring description, is_async, positional-only names) of
    ``func`` under ``name``, built once per function (and, for a plain function,
    once per source: see ``_BY_SOURCE``)."""
    inputs = _derivation_inputs(func)
    try:
        entry = _DERIVED.get(func)
        if entry is None or not all(map(operator.is_, entry[0], inputs)):
            entry = _DERIVED[func] = (inputs, _by_source(func))
    except TypeError:  # neither hashable nor weakly referable: derived for this Tool only
        entry = (inputs, {})
    derived = entry[1].get(name)
    if derived is None:
        model, positional = _arguments_model(func, name)
        derived = entry[1][name] = (
            model,
            _first_paragraph(_doc_of(func)),
            # a callable object's own __call__ method, when it is a coroutine function
            inspect.iscoroutinefunction(func) or (
                not inspect.isclass(func) and inspect.iscoroutinefunction(func.__call__)),
            positional,
        )
    return derived


def _by_source(func: Any) -> dict[str, tuple[Any, str, bool, tuple[str, ...]]]:
    """The derivations (by tool name) shared by every import of ``func``'s source."""
    fingerprint = _source_fingerprint(func)
    if fingerprint is None:
        return {}
    key = (func.__module__ or "<no module>", func.__qualname__)
    known = _BY_SOURCE.get(key)
    if known is not None and _same_source(known[0], fingerprint):
        return known[1]
    derived: dict[str, tuple[Any, str, bool, tuple[str, ...]]] = {}
    _BY_SOURCE[key] = (fingerprint, derived)
    return derived


def _undefined(model: type[BaseModel], name: str, exc: PydanticUserError) -> Exception:
    """What to raise for tool ``name`` when pydantic raised ``exc`` for its argument
    model: a :class:`ConfigurationError` naming the type an annotation names but
    the function's module does not define, else ``exc`` itself."""
    try:
        model.model_rebuild(raise_errors=True)
    except PydanticUndefinedAnnotation as undefined:
        return ConfigurationError(
            f"tool {name!r}: an argument is annotated with {undefined.name!r}, which module "
            f"{model.__module__!r} does not define, so its arguments cannot be validated; define or import it there")
    return exc


def _parameters_of(model: type[BaseModel], name: str) -> dict[str, Any]:
    """The JSON schema of an argument model without titles, generated once per model.

    Raises:
        ConfigurationError: an annotation names a type that is still not
            defined, or an argument's type has no JSON schema (a plain class):
            the model could not be told what to send.
    """
    params = _PARAMETERS.get(model)
    if params is None:
        try:
            params = model.model_json_schema()
        except PydanticInvalidForJsonSchema as exc:
            raise ConfigurationError(
                f"tool {name!r}: an argument's type has no JSON schema, so the tool cannot be offered to a "
                f"model ({exc.message})") from None
        except PydanticUserError as exc:
            raise _undefined(model, name, exc) from None
        params.pop("title", None)
        for prop in params.get("properties", {}).values():
            if isinstance(prop, dict):
                prop.pop("title", None)
        _PARAMETERS[model] = params
    return params


#: result types that are never awaitable (the usual results of a sync tool,
#: told apart without the ``isawaitable`` ABC check)
_NEVER_AWAITABLE = frozenset({str, int, float, bool, type(None), dict, list, tuple})


@dataclass(slots=True)
class Tool:
    """A callable the model may request by name.

    Args:
        func: a sync or async callable.
        name: the function name shown to the model (default ``func.__name__``).
        description: default: the first paragraph of the docstring.
        blocking: run a sync callable in a worker thread (for code that
            blocks on I/O); by default sync callables run inline, which is
            cheapest for quick functions but cannot be interrupted.
        timeout: seconds one call (each attempt) may take; past it the call
            is cut and recorded ``timed_out``. A sync callable with a timeout
            runs in a worker thread that the timeout abandons (as a blocking
            gate check is abandoned): its late result is ignored. ``None``
            (default): the ActionParam's ``retry_timeout`` applies, if any.
        retries: attempts after the first one, for a failure whose type is in
            ``retry_on``; only for a tool declared ``idempotent`` (running it
            twice does no harm), else ``ConfigurationError``. Each failed
            attempt is logged (``tool_attempt``); waits grow from
            ``retry_delay`` by ``retry_backoff`` (tenacity, the injectable clock).
        retry_on: exception types that are retried (default: any ``Exception``;
            cancellation never is).
        idempotent: the tool may safely run more than once for one request.
    """

    func: Callable[..., Any]
    name: str = ""
    description: str = ""
    blocking: bool = False
    timeout: float | None = None
    retries: int = 0
    retry_on: tuple[type[BaseException], ...] = (Exception,)
    idempotent: bool = False
    retry_delay: float = 0.1
    retry_backoff: float = 2.0
    arguments_model: type[BaseModel] = field(init=False, repr=False)
    is_async: bool = field(init=False, repr=False)
    #: the positional-only parameters, passed positionally in this order
    positional: tuple[str, ...] = field(init=False, repr=False, default=())
    #: what :attr:`offered_schema` last returned, with the argument model, name
    #: and description it was made for (read again only while all three are the same)
    _offered: tuple[Any, ...] | None = field(init=False, repr=False, compare=False, default=None)
    #: the argument model :meth:`validate_arguments` last read, with its field -> parameter renames
    _renames: tuple[Any, dict[str, str] | None] = field(init=False, repr=False, compare=False, default=(None, None))

    def __post_init__(self) -> None:
        if not callable(self.func):
            raise ArgumentTypeError(f"Tool needs a callable, got {type(self.func).__name__}")
        self.name = self.name or getattr(_unwrapped(self.func), "__name__", "")
        if not isinstance(self.name, str):
            raise ArgumentTypeError(f"tool name must be a str, got {type(self.name).__name__}")
        if not self.name or not self.name.isidentifier():
            raise ConfigurationError(f"tool name must be an identifier, got {self.name!r}")
        self.arguments_model, description, self.is_async, self.positional = _derive(self.func, self.name)
        self.description = self.description or description
        self._check_bounds()

    def _check_bounds(self) -> None:
        """ConfigurationError/TypeError for bounds that cannot hold."""
        if self.timeout is not None and (isinstance(self.timeout, bool) or not isinstance(self.timeout, (int, float))
                                         or not self.timeout > 0):
            raise ConfigurationError(f"tool {self.name!r}: timeout must be a number > 0 or None, got {self.timeout!r}")
        if isinstance(self.retries, bool) or not isinstance(self.retries, int) or self.retries < 0:
            raise ConfigurationError(f"tool {self.name!r}: retries must be an int >= 0, got {self.retries!r}")
        if self.retries and not self.idempotent:
            raise ConfigurationError(f"tool {self.name!r}: retries need idempotent=True (a retried call runs again)")
        if not isinstance(self.retry_on, tuple) or not all(
                isinstance(t, type) and issubclass(t, Exception) for t in self.retry_on):
            raise ArgumentTypeError(f"tool {self.name!r}: retry_on must hold Exception subclasses")
        if self.retry_delay < 0 or self.retry_backoff < 0:
            raise ConfigurationError(f"tool {self.name!r}: retry_delay and retry_backoff must be >= 0")

    @property
    def schema(self) -> dict[str, Any]:
        """OpenAI-style function schema: ``{"type": "function", "function": {...}}``.

        The arguments' JSON schema is generated once per argument model (so
        once per function); every call returns a fresh copy, so callers may
        change what they get.
        """
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": thaw(_parameters_of(self.arguments_model, self.name)),
            },
        }

    @property
    def offered_schema(self) -> ToolSchema:
        """:attr:`schema` as offered in a call: read-only and shared, made once
        per argument model, name and description, with its JSON text."""
        model, name, description = self.arguments_model, self.name, self.description
        last = self._offered
        if last is not None and last[0] is model and last[1] is name and last[2] is description:
            return last[3]  # type: ignore[no-any-return]
        per_model = _OFFERED.get(model)
        if per_model is None:
            per_model = _OFFERED[model] = {}
        key = (name, description)
        offered = per_model.get(key)
        if offered is None:
            offered = per_model[key] = ToolSchema(freeze(self.schema))
        self._offered = (model, name, description, offered)
        return offered

    def validate_arguments(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Validate ``arguments`` against the signature.

        Returns the validated keyword arguments.

        Raises:
            ToolArgumentsError: missing, unknown or ill-typed arguments.
        """
        arguments_model = self.arguments_model
        try:
            model = arguments_model.model_validate(arguments)
        except ValidationError as exc:
            raise ToolArgumentsError(self.name, exc) from None
        except PydanticUserError as exc:  # an annotation still names a type its module does not define
            raise _undefined(self.arguments_model, self.name, exc) from None
        except (TypeError, SchemaError) as exc:  # a constraint pydantic can build but not apply to its type
            raise ConfigurationError(
                f"tool {self.name!r}: its arguments cannot be validated: {summarize(exc, 300)}") from None
        # the field values, in field order (pydantic keeps them, and only them, in
        # __dict__), under the parameters' own names
        last, names = self._renames
        if last is not arguments_model:
            names = _KEYWORDS.get(arguments_model)
            self._renames = (arguments_model, names)
        data = {names.get(k, k): v for k, v in model.__dict__.items()} if names else dict(model.__dict__)
        if model.__pydantic_extra__:  # model_extra, read without its property
            data.update(model.__pydantic_extra__)
        return data

    async def invoke(self, arguments: dict[str, Any]) -> Any:
        """Validate ``arguments`` and call the function (``blocking`` sync ones in a
        thread), or through the runtime's ``tool_runner`` when one is installed
        (:func:`lionops.runtime.use_runtime`)."""
        return await self._call(self.validate_arguments(arguments))

    async def _call(self, kwargs: dict[str, Any]) -> Any:
        """:meth:`invoke` with already validated keyword arguments."""
        runner = current_runtime().tool_runner
        if runner is not None:
            return await runner(self, kwargs)
        args: list[Any] = []
        if self.positional:  # positional-only parameters go positionally, in order (validation gave each)
            kwargs = dict(kwargs)
            args = [kwargs.pop(pname) for pname in self.positional]
        if self.is_async:
            return await self.func(*args, **kwargs)
        if self.blocking or self.timeout is not None:  # a timeout abandons the thread it cannot cancel
            result = await anyio.to_thread.run_sync(lambda: self.func(*args, **kwargs),
                                                    abandon_on_cancel=self.timeout is not None)
        else:
            result = self.func(*args, **kwargs)
        if type(result) not in _NEVER_AWAITABLE and inspect.isawaitable(result):
            result = await result
        return result

    def __repr__(self) -> str:
        return f"Tool(name={self.name!r})"


class FrozenArguments(FrozenDict):
    """A ``dict`` that refuses changes: the arguments a gate is shown.

    It is a real dict (``json.dumps``, ``==``, ``isinstance(..., dict)`` work),
    but every mutating method raises ``TypeError``, so a gate cannot change
    what the tool will receive (and a gate that tries, raises, and denies).
    """

    __slots__ = ()
    _refusal = "the arguments of a ToolInvocation are read-only"


@dataclass(frozen=True, slots=True)
class ToolInvocation:
    """What ``branch.authorize`` is asked about before any invocation (ADR-0022 D4).

    ``function``: the requested name; ``arguments``: the *validated* keyword
    arguments the tool will be called with if every gate allows (after
    pydantic's conversion, e.g. ``"false"`` -> ``False``; read-only; a deep
    copy, so changing a nested list or dict changes neither the tool's
    arguments nor the record);
    ``tool``: the registered Tool; ``branch_id``: the asking branch;
    ``index``: position in the request list; ``offered``: the names of the
    tools offered in this call (only those can run); ``raw_arguments``: the
    arguments object as the model wrote it (decoded from JSON text, before
    validation: ``"false"`` is still a string), for auditing only; ``call_id``:
    the provider's id of a native tool call, when known. ``server`` and
    ``annotations``: an MCP tool's server name and hints (``None`` for a function).
    """

    function: str
    arguments: FrozenArguments | dict[str, Any]
    tool: Tool | None = None
    branch_id: str | None = None
    index: int | None = None
    offered: frozenset[str] = frozenset()
    raw_arguments: Any = None
    call_id: str | None = None

    @property
    def server(self) -> str | None:
        """The name of the MCP server of the tool (:mod:`lionops.mcp`); ``None`` for a function."""
        return getattr(self.tool, "server", None)

    @property
    def annotations(self) -> Any:
        """The MCP tool's annotations (``lionops.mcp.ToolAnnotations``: read_only,
        destructive, idempotent, open_world); ``None`` for a function."""
        return getattr(self.tool, "annotations", None)


class ActionManager:
    """The branch's registered tools (``branch.acts``)."""

    __slots__ = ("_tools",)

    def __init__(self) -> None:
        self._tools: dict[str, Tool] = {}

    def register(self, tools: Any, *, update: bool = False) -> list[Tool]:
        """Register a callable, a Tool, or a list of them.

        Raises:
            ConfigurationError (a ValueError): a tool of that name exists and
                ``update`` is false.
            ArgumentTypeError (a TypeError): an entry is neither callable nor a Tool.
        """
        items = tools if isinstance(tools, (list, tuple)) else [tools]
        added: list[Tool] = []
        for item in items:
            tool = item if isinstance(item, Tool) else Tool(item)
            if tool.name in self._tools and not update:
                raise ConfigurationError(f"a tool named {tool.name!r} is already registered")
            self._tools[tool.name] = tool
            added.append(tool)
        return added

    def get(self, name: Any) -> Tool | None:
        return self._tools.get(name) if isinstance(name, str) else None

    @property
    def names(self) -> list[str]:
        return list(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    def select(self, tools: Any = True) -> list[Tool]:
        """The registered tools a ``tools=`` selector names (ADR-0022 D2).

        ``tools``: ``True``/``None`` for all; a name, Tool or callable; or a
        list, tuple, set or any other iterable of those (a str is one name).
        Raises :class:`~lionops.errors.UnknownToolError` (a ``ValueError``) for a
        name that is not registered, naming the closest registered tools, and
        :class:`~lionops.errors.ArgumentTypeError` for ``False`` or bytes (``[]``
        selects none). A tool named twice is selected once.
        """
        if tools is True or tools is None:
            return list(self._tools.values())
        if tools is False or isinstance(tools, (bytes, bytearray)):
            raise ArgumentTypeError(
                f"a tools= selector names tools by name (str), Tool or function, got {type(tools).__name__}"
                f" {summarize(tools, 60, use_repr=True)}; pass True or None for every registered tool, [] for none")
        if isinstance(tools, (list, tuple)):
            items = tools
        elif isinstance(tools, (str, Tool)) or callable(tools) or not isinstance(tools, Iterable):
            items = [tools]
        else:  # a set, dict keys, a generator...
            items = list(tools)
        selected: dict[str, Tool] = {}  # a tool named twice is offered once
        for item in items:
            name = item if isinstance(item, str) else getattr(item, "name", None) or getattr(item, "__name__", None)
            tool = self._tools.get(name) if isinstance(name, str) else None
            if tool is None:
                raise UnknownToolError(item if name is None else name, self._tools, selector=True)
            selected.setdefault(tool.name, tool)
        return list(selected.values())

    def get_tool_schema(self, tools: Any = True) -> dict[str, list[dict[str, Any]]]:
        """Schemas of the selected tools (see :meth:`select`) as ``{"tools": [...]}``."""
        return {"tools": [t.schema for t in self.select(tools)]}

    def __repr__(self) -> str:
        return f"ActionManager(tools={list(self._tools)})"
