"""One error tree: every exception lionops exports derives from LionopsError,
keeps the built-in type it always had, and stays importable from its old home."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import lionops
from lionops import errors
from lionops.errors import LionopsError

#: Exceptions of lionops that are not LionopsErrors (none).
_OUTSIDE_THE_TREE: set[tuple[str, str]] = set()


def _public_exceptions() -> list[tuple[str, str, type]]:
    found = []
    for info in pkgutil.walk_packages(lionops.__path__, "lionops."):
        try:
            module = importlib.import_module(info.name)
        except ImportError:  # an optional extra that is not installed
            continue
        for name in getattr(module, "__all__", ()):
            obj = getattr(module, name, None)
            if isinstance(obj, type) and issubclass(obj, BaseException) and obj.__module__.startswith("lionops"):
                found.append((info.name, name, obj))
    return found


def test_every_public_exception_is_a_lionops_error():
    found = _public_exceptions()
    assert len(found) > 30
    outside = [(m, n) for m, n, cls in found if not issubclass(cls, LionopsError) and (m, n) not in _OUTSIDE_THE_TREE]
    assert outside == []


def test_the_tree_is_written_in_one_module_and_drawn_in_its_docstring():
    for name in errors.__all__:
        cls = getattr(errors, name)
        assert cls.__module__ == "lionops.errors"
        assert issubclass(cls, LionopsError)
        assert name in (errors.__doc__ or ""), f"{name} is not drawn in the tree of lionops.errors"


@pytest.mark.parametrize(("path", "name", "builtin"), [
    ("lionops.tools", "UnknownToolError", LookupError),
    ("lionops.tools", "ToolNotOfferedError", LookupError),
    ("lionops.tools", "ToolArgumentsError", ValueError),
    ("lionops.pipeline.act", "RequestLimitError", ValueError),
    ("lionops.pipeline.act", "InvalidActionRequest", ValueError),
    ("lionops.pipeline.act", "ToolOutputError", TypeError),
    ("lionops.endpoints.cli", "CLIError", RuntimeError),
    ("lionops.endpoints.cli", "CLITimeoutError", TimeoutError),
    ("lionops.replay", "CassetteError", ValueError),
    ("lionops.replay", "CassetteNotFoundError", FileNotFoundError),
    ("lionops.replay", "ReplayDivergence", AssertionError),
])
def test_old_import_paths_and_builtin_bases_are_kept(path, name, builtin):
    cls = getattr(importlib.import_module(path), name)
    assert cls is getattr(errors, name)
    assert issubclass(cls, builtin) and issubclass(cls, LionopsError)


def test_messages_and_signatures_are_unchanged():
    assert str(errors.UnknownToolError("nope", ["b", "a"])) == "unknown function 'nope'; registered tools: ['a', 'b']"
    assert str(errors.ToolNotOfferedError("t", ["x"], replaced=True)) == (
        "'t' was registered anew after it was offered in this call; offered tools: ['x']")
    assert str(errors.ToolArgumentsError("t", "bad")) == "invalid arguments for 't': bad"
    err = errors.CLIStreamError("corrupt", line=3, preview="{", provider="codex", stderr_tail="boom")
    assert (err.line, err.provider, str(err)) == (3, "codex", "corrupt; stderr tail: 'boom'")
    assert errors.CassetteError("x").problems == ["x"]
    assert str(errors.ReplayDivergence("m", kind="result", operation=2)) == "operation 2: m"
