"""Every exception lionops raises on purpose is a LionopsError: no ``raise`` of
a built-in exception type in ``lionops/`` unless it is listed below with the
reason it must stay built-in (a Python protocol, a pydantic validator, an
internal signal that is caught and converted before it reaches a caller)."""

from __future__ import annotations

import ast
import builtins
from pathlib import Path

import lionops

ROOT = Path(lionops.__file__).parent

BUILTIN_EXCEPTIONS = frozenset(
    name for name in dir(builtins)
    if isinstance(getattr(builtins, name), type) and issubclass(getattr(builtins, name), BaseException)
)

_PYDANTIC = "raised in a pydantic validator: reported as a ValidationError, never raised as itself"

#: ``(path under lionops/, enclosing function) -> reason`` for each deliberate built-in raise.
DELIBERATE: dict[tuple[str, str], str] = {
    ("_alcall.py", "_retried"): "unreachable (tenacity re-raises the last attempt's error)",
    ("cli/demo.py", "<module>"): "SystemExit: the process exit status of `python -m lionops.cli.demo`",
    ("endpoints/cli/__init__.py", "__getattr__"): "module __getattr__ must raise AttributeError (PEP 562)",
    ("endpoints/openai/__init__.py", "__getattr__"): "module __getattr__ must raise AttributeError (PEP 562)",
    ("endpoints/anthropic/__init__.py", "__getattr__"): "module __getattr__ must raise AttributeError (PEP 562)",
    ("endpoints/openai_responses/__init__.py", "__getattr__"): "module __getattr__ must raise AttributeError (PEP 562)",
    ("endpoints/google/__init__.py", "__getattr__"): "module __getattr__ must raise AttributeError (PEP 562)",
    ("endpoints/_native.py", "feed"): "NotImplementedError: an abstract method",
    ("endpoints/_native.py", "result"): "NotImplementedError: an abstract method",
    ("endpoints/_native.py", "_path"): "NotImplementedError: an abstract method",
    ("endpoints/_native.py", "_build"): "NotImplementedError: an abstract method",
    ("endpoints/cli/collect.py", "handle"): "NotImplementedError: an abstract method",
    ("endpoints/cli/process.py", "argv"): "NotImplementedError: an abstract method",
    ("replay/transport.py", "describe"): "NotImplementedError: an abstract method",
    ("endpoints/openai/stream.py", "add"): "caught by fold_chunk and raised as EndpointResponseError",
    ("endpoints/openai/stream.py", "add_call"): "caught by fold_chunk and raised as EndpointResponseError",
    ("endpoints/openai/stream.py", "_join_arguments"): "caught by fold_chunk and raised as EndpointResponseError",
    ("endpoints/openai/response.py", "list_of"): "caught by its callers and raised as EndpointResponseError",
    ("endpoints/openai/response.py", "text_of"): "caught by its callers and raised as EndpointResponseError",
    ("mcp/__init__.py", "<module>"): "ImportError: the optional extra is missing, the signal an import gives",
    ("middles/parsing.py", "attempt"): "a failed parse-model attempt: retried by alcall, then the answer is None",
    ("models.py", "decode_arguments"): _PYDANTIC,
    ("pipeline/act.py", "_retried"): "unreachable (tenacity re-raises the last attempt's error)",
    ("replay/cassette.py", "_one_record_per_request"): _PYDANTIC,
    ("replay/cassette.py", "_runs_add_up"): _PYDANTIC,
    ("replay/cassette.py", "_says_what_it_is"): _PYDANTIC,
    ("replay/cassette.py", "_known_version"): _PYDANTIC,
    ("replay/cassette.py", "_bounded_patterns"): _PYDANTIC,
    ("testing/openai_server.py", "write"): "ends the server's own handler thread; never reaches a caller",
}


def _bare_builtin_raises() -> list[tuple[str, str, int, str]]:
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        stack: list[tuple[ast.AST, str]] = [(tree, "<module>")]
        while stack:
            node, where = stack.pop()
            for child in ast.iter_child_nodes(node):
                inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else where
                if isinstance(child, ast.Raise) and child.exc is not None:
                    exc = child.exc.func if isinstance(child.exc, ast.Call) else child.exc
                    if isinstance(exc, ast.Name) and exc.id in BUILTIN_EXCEPTIONS:
                        found.append((rel, where, child.lineno, exc.id))
                stack.append((child, inner))
    return found


def test_no_builtin_exception_is_raised_unless_listed_with_a_reason():
    unlisted = [f"lionops/{rel}:{line} raises {name} in {where}()"
                for rel, where, line, name in _bare_builtin_raises() if (rel, where) not in DELIBERATE]
    assert unlisted == [], "raise a lionops.errors type instead (or list it in DELIBERATE with the reason)"


def test_every_listed_exception_still_exists():
    present = {(rel, where) for rel, where, _, _ in _bare_builtin_raises()}
    assert sorted(set(DELIBERATE) - present) == []
