"""The import rules of the house: no cycle among lionops modules, and the
layers of docs/architecture.md (a module imports only its own layer or
lower ones).

Every module of ``lionops`` is read with ``ast``: imports at module level and
inside functions count, and so do ``importlib.import_module("...")`` calls
with a literal name; only imports under ``if TYPE_CHECKING:`` are exempt.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import lionops

ROOT = Path(lionops.__file__).resolve().parent


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


MODULES = _modules()


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _resolve(name: str) -> str | None:
    """The lionops module ``name`` denotes (a package or a module), or ``None``."""
    while name:
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


def _targets(module: str, path: Path) -> set[str]:  # noqa: C901 - one visitor over every import form
    """The lionops modules ``module`` imports (TYPE_CHECKING blocks exempt)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()

    def base_of(level: int, name: str | None) -> str:
        parts = package.split(".")
        if level > 1:
            parts = parts[: len(parts) - (level - 1)]
        base = ".".join(parts)
        return f"{base}.{name}" if name else base

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = base_of(node.level, node.module) if node.level else (node.module or "")
            for alias in node.names:
                found.add(f"{base}.{alias.name}")  # a submodule, or a name of ``base``
        elif (isinstance(node, ast.Call) and isinstance(node.func, (ast.Attribute, ast.Name))
              and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id) == "import_module"
              and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            target = node.args[0].value
            if target.startswith("."):
                given = node.args[1] if len(node.args) > 1 else None
                anchor = given.value if isinstance(given, ast.Constant) else package
                dots = len(target) - len(target.lstrip("."))
                parts = str(anchor).split(".")
                if dots > 1:
                    parts = parts[: len(parts) - (dots - 1)]
                target = ".".join(parts) + "." + target.lstrip(".")
            found.add(target)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    out = set()
    for name in found:
        target = _resolve(name) if name.startswith("lionops") else None
        if target is not None and target != module:
            out.add(target)
    return out


GRAPH = {m: _targets(m, p) for m, p in MODULES.items()}


#: The layers, lowest first, each with the folders of lionops/ that hold it
#: (see docs/architecture.md). A module's layer is its folder's; a module
#: directly in lionops/ is base, except the ones in FLAT. Every folder must be
#: placed here, so a new package is put in a layer on purpose.
LAYERS: dict[str, tuple[str, ...]] = {
    "base": (),
    "observability": ("observability",),
    "engine": ("engine",),
    "endpoints": ("endpoints",),
    "middles": ("middles",),
    "pipeline": ("pipeline",),
    "facade": (),
    "outer": ("cli", "replay", "temporal", "mcp", "testing"),
}

#: Modules directly in lionops/ that are not base: the facade, the model
#: (which builds endpoints), the ``python -m lionops`` entry and the package.
FLAT = {"lionops.branch": "facade", "lionops.operate": "facade", "lionops.imodel": "middles",
        "lionops.__main__": "outer", "lionops": "surface"}

#: Modules whose layer is not their folder's: the machine definition is data
#: (parsed TOML, no engine code), read by the trace records and diagrams.
MOVED = {"lionops.engine.definition": "base"}

_FOLDER_LAYER = {folder: layer for layer, folders in LAYERS.items() for folder in folders}


def _layer(module: str) -> str:
    """The layer of a module: its folder's (see docs/architecture.md)."""
    if module in MOVED:
        return MOVED[module]
    if module in FLAT:
        return FLAT[module]
    parts = module.split(".")
    if len(parts) > 1 and (ROOT / parts[1]).is_dir():
        return _FOLDER_LAYER[parts[1]]
    return "base"  # layers 0 and 1: runtime, errors, records


#: layer -> the layers it may import (its own included).
ALLOWED = {
    "base": {"base"},
    "observability": {"base", "observability"},
    "engine": {"base", "observability", "engine"},
    "endpoints": {"base", "observability", "endpoints"},
    "middles": {"base", "observability", "endpoints", "middles"},
    "pipeline": {"base", "observability", "engine", "endpoints", "middles", "pipeline"},
    "facade": {"base", "observability", "engine", "endpoints", "middles", "pipeline", "facade"},
    "outer": {"base", "observability", "engine", "endpoints", "middles", "pipeline", "facade", "outer", "surface"},
    # the package: the pinned public surface, which no module of lionops imports
    "surface": {"base", "observability", "engine", "endpoints", "middles", "pipeline", "facade", "outer"},
}


def test_every_folder_is_in_one_layer() -> None:
    folders = sorted(p.name for p in ROOT.iterdir() if (p / "__init__.py").is_file())
    placed = [folder for folder in folders if folder in _FOLDER_LAYER]
    assert placed == folders, f"put each package of lionops/ in a layer of LAYERS: {set(folders) - set(placed)}"
    assert len(_FOLDER_LAYER) == sum(len(f) for f in LAYERS.values())  # no folder in two layers
    assert all(m in MODULES for m in [*FLAT, *MOVED])


def test_observability_is_one_layer() -> None:
    for module, targets in GRAPH.items():
        if module.startswith("lionops.observability"):
            assert _layer(module) == "observability"
            bad = {t for t in targets if _layer(t) not in ("base", "observability")}
            assert not bad, (module, bad)


def _edge_ok(src: str, dst: str) -> bool:
    return _layer(dst) in ALLOWED[_layer(src)]


def test_every_module_is_read() -> None:
    assert "lionops.branch" in GRAPH and len(GRAPH) > 40


def test_no_import_cycle() -> None:
    # Tarjan's strongly connected components over the import graph.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    cycles: list[list[str]] = []
    counter = [0]

    def strong(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(GRAPH.get(v, ())):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    import sys
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(GRAPH):
        if v not in index:
            strong(v)
    assert cycles == [], cycles


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_layer_rules(module: str) -> None:
    bad = sorted(dst for dst in GRAPH[module] if not _edge_ok(module, dst))
    assert bad == [], f"{module} ({_layer(module)}) imports {bad}"


def test_core_never_imports_the_outer_layers() -> None:
    outer = {m for m in GRAPH if _layer(m) == "outer"}
    for module, targets in GRAPH.items():
        if _layer(module) not in ("outer", "surface"):
            assert not targets & outer, (module, targets & outer)


def test_engine_imports_nothing_of_the_operation() -> None:
    for module, targets in GRAPH.items():
        if module.startswith("lionops.engine"):
            assert all(_layer(t) in ("base", "observability", "engine") for t in targets), (module, targets)
            assert not targets & {"lionops.models", "lionops.branch", "lionops.params", "lionops.operative"}, module


def test_endpoints_never_import_middles_or_pipeline() -> None:
    for module, targets in GRAPH.items():
        if _layer(module) == "endpoints":
            bad = {t for t in targets if _layer(t) in ("middles", "pipeline")}
            assert not bad, (module, bad)


#: Modules that import by a computed name, which the graph above cannot see,
#: and why each is safe: the CLI package loads its own submodules on first
#: use (so ``import lionops`` loads no process code), and the provider
#: registry imports an endpoint class (or a provider package,
#: ``lionops.endpoints.<name>``) when a model of that provider is first built.
#: (The Temporal codec imports nothing: a class named in a payload is looked
#: up among the registered types.)
COMPUTED_IMPORTS = {"lionops.endpoints.cli", "lionops.endpoints.registry"}


def _computes_an_import(path: Path) -> bool:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and isinstance(node.func, (ast.Attribute, ast.Name)):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id
            if name in ("import_module", "__import__") and not (
                    node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
                return True
    return False


def test_imports_by_computed_name_are_only_the_known_ones() -> None:
    assert {m for m, p in MODULES.items() if _computes_an_import(p)} == COMPUTED_IMPORTS


def test_only_the_outer_layers_import_the_package_itself() -> None:
    assert [m for m, targets in GRAPH.items() if "lionops" in targets and _layer(m) != "outer"] == []


def test_operate_keywords_are_one_list() -> None:
    import inspect

    from lionops.pipeline.prepare import OperateKwargs, prepare_operate_kw

    params = inspect.signature(prepare_operate_kw).parameters
    keywords = [n for n, p in params.items() if p.kind is inspect.Parameter.KEYWORD_ONLY]
    assert [*keywords, "engine"] == list(OperateKwargs.__annotations__)


def test_pipeline_never_imports_the_facade() -> None:
    for module, targets in GRAPH.items():
        if module.startswith("lionops.pipeline"):
            assert not {t for t in targets if t in ("lionops.branch", "lionops.operate")}, module


def test_the_reader_sees_every_kind_of_import(tmp_path: Path) -> None:
    source = tmp_path / "fake.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "import importlib\n"
        "from .models import ActionRecord\n"
        "if TYPE_CHECKING:\n"
        "    from .branch import Branch\n"
        "def later():\n"
        "    from .operate import operate\n"
        "    return importlib.import_module('.replay', 'lionops'), importlib.import_module('lionops.cli')\n",
        encoding="utf-8",
    )
    assert _targets("lionops.fake", source) == {
        "lionops.models", "lionops.operate", "lionops.replay", "lionops.cli",
    }


def test_no_module_runs_source_it_generates() -> None:
    """The machine runs one way, in code that coverage, mutation testing, a
    debugger and grep all see: no lionops module calls ``exec``."""
    found = [
        f"{module}:{node.lineno}"
        for module, path in MODULES.items()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "exec"
    ]
    assert found == []
