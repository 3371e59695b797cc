"""The package's layers: no module imports one of a higher layer, and no modules import each other in a circle.

The graph is read from the source with `ast`: every `import` and `from ... import` counts, at module level or inside
a function, and so does `importlib.import_module("literal")`; imports under `if TYPE_CHECKING:` do not (they never
run). Each top-level package or module of `agentlightning/` has a layer (LAYERS, drawn in docs/architecture.md); a
module may import its own layer and the layers below it. A higher layer that must plug into a lower one does so
through an extension point (`agentlightning/utils/extensions.py`) that the package root fills in.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "agentlightning"

LAYERS: dict[str, int] = {
    # 0: the ground: models, constants, environment, logging and helpers that know nothing of Agent Lightning's parts
    "types": 0,
    "utils": 0,
    "semconv": 0,
    "env_var": 0,
    "logging": 0,
    "version": 0,
    # 1: the store and the local inference engine
    "store": 1,
    "inference": 1,
    # 2: span capture: tracers, the span writer and the OpenTelemetry router
    "tracer": 2,
    # 3: what records into a tracer: emitters (and their 0.2 path `reward`), the LLM proxy, framework instrumentation
    "emitter": 3,
    "reward": 3,
    "llm_proxy": 3,
    "instrumentation": 3,
    # 4: running agents and reading their spans
    "litagent": 4,
    "runner": 4,
    "adapter": 4,
    # 5: learning from rollouts and placing the processes
    "algorithm": 5,
    "execution": 5,
    # 6: what composes them
    "trainer": 6,
    "export": 6,
    # 7: the web dashboard; 8: the server process assembled from the store API, dashboard, OTLP intake and metrics
    "dashboard": 7,
    "server": 8,
    # 9: the package root (the public facade, which fills in the extension points); 10: the command line
    "": 9,
    "cli": 10,
    "__main__": 10,
}
"""Layer of each top-level name under `agentlightning/` ("" is `agentlightning/__init__.py`)."""

GRPO = f"{PACKAGE}.algorithm.grpo"
GRPO_LAYERS: dict[str, int] = {
    # 0: the run's settings
    "config": 0,
    # 1: collecting rollouts: through the store, read back, what the proxy recorded of each call
    "rollouts": 1,
    # 2: learning from them: advantages, samples, loss, update, the policy and its checkpoints
    "learning": 2,
    # 3: serving the policy to the agents; a step's tasks and sampling rounds (each uses learning, neither the other)
    "serving": 3,
    "sampling": 3,
    # 4: what a run records and reports
    "reporting": 4,
    # 5: the run loop (with what it trains: one policy or one adapter per agent) and the public faces (the package,
    # the run outputs, the live view)
    "grpo": 5,
    "trained": 5,
    "report": 5,
    "live": 5,
    "": 5,
}
"""Layer of each part of `agentlightning/algorithm/grpo/` (a subpackage or a top module; "" is its `__init__.py`)."""

ALLOWED_UPWARD: frozenset[tuple[str, str]] = frozenset()
"""(importer, imported) module pairs allowed to run up a layer, each for a documented reason. None today."""

ALLOWED_TYPE_CIRCLES: list[list[str]] = [
    # The 0.2 API types each by the other: `LitAgent.get_runner() -> Runner` and `Runner` runs a `LitAgent` (the
    # runner imports the agent; the agent names the runner for type checkers only).
    ["agentlightning.litagent.litagent", "agentlightning.runner.base"],
]
"""Circles that exist only through `if TYPE_CHECKING:` imports and stay, each for the reason given."""


# ------------------------------------------------------------------------------------------------ the graph, pure
def module_name(relative: Path) -> str:
    """`agentlightning/store/__init__.py` -> `agentlightning.store`; `agentlightning/store/base.py` -> `...base`."""
    parts = list(relative.with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_nodes(node: ast.AST, type_checking: bool) -> Iterator[ast.AST]:
    """Import statements and `import_module` calls under `node`; `if TYPE_CHECKING:` bodies only if `type_checking`."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child.test) and not type_checking:
            for statement in child.orelse:
                yield from _import_nodes_of(statement, type_checking)
            continue
        yield from _import_nodes_of(child, type_checking)


def _import_nodes_of(node: ast.AST, type_checking: bool) -> Iterator[ast.AST]:
    if isinstance(node, (ast.Import, ast.ImportFrom)) or (isinstance(node, ast.Call) and _is_import_module(node)):
        yield node
    yield from _import_nodes(node, type_checking)


def _is_import_module(call: ast.Call) -> bool:
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    return (
        name == "import_module"
        and len(call.args) >= 1
        and isinstance(call.args[0], ast.Constant)
        and isinstance(call.args[0].value, str)
    )


def imported_modules(
    source: str, module: str, is_package: bool, known: Iterable[str], *, type_checking: bool = False
) -> set[str]:
    """The modules of `known` that `module` (whose source is `source`) imports when it runs (and, with
    `type_checking`, for type checkers only).

    `from a import b` is an import of `a.b` when that is a module, else of `a`. Relative imports are resolved against
    `module` (a package resolves against itself).
    """
    known = set(known)
    found: set[str] = set()
    for node in _import_nodes(ast.parse(source), type_checking):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module or ""
            for alias in node.names:
                submodule = f"{origin}.{alias.name}"
                targets.append(submodule if submodule in known else origin)
        elif isinstance(node, ast.Call):
            argument = node.args[0]
            assert isinstance(argument, ast.Constant)
            targets = [str(argument.value)]
        for target in targets:
            # `import a.b.c` loads a.b.c; a name not in the package (a third-party import) is not an edge
            while target and target not in known:
                target = target.rpartition(".")[0] if target.startswith(PACKAGE + ".") else ""
            if target and target != module:
                found.add(target)
    return found


def top_level(module: str) -> str:
    """`agentlightning.store.http.client` -> `store`; the package root itself -> ""."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def grpo_part(module: str) -> str:
    """`agentlightning.algorithm.grpo.learning.samples` -> `learning`; the GRPO package itself -> ""."""
    rest = module[len(GRPO) :].lstrip(".")
    return rest.split(".")[0]


def grpo_upward_imports(graph: Mapping[str, set[str]], layers: Mapping[str, int]) -> list[tuple[str, str]]:
    """(importer, imported) pairs inside the GRPO package where the imported part is in a higher layer."""
    inside = lambda module: module == GRPO or module.startswith(GRPO + ".")  # noqa: E731
    return sorted(
        (importer, imported)
        for importer, targets in graph.items()
        if inside(importer)
        for imported in targets
        if inside(imported) and layers[grpo_part(imported)] > layers[grpo_part(importer)]
    )


def upward_imports(graph: Mapping[str, set[str]], layers: Mapping[str, int]) -> list[tuple[str, str]]:
    """(importer, imported) pairs where the imported module is in a higher layer than the importer."""
    return sorted(
        (importer, imported)
        for importer, targets in graph.items()
        for imported in targets
        if layers[top_level(imported)] > layers[top_level(importer)]
    )


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            advanced = False
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = counter
                    counter += 1
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph.get(successor, ())))))
                    advanced = True
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def package_graph(root: Path = ROOT, *, type_checking: bool = False) -> dict[str, set[str]]:
    """The run-time import graph of every module of `agentlightning/` (with `type_checking`, also the imports under
    `if TYPE_CHECKING:`)."""
    files = {module_name(path.relative_to(root)): path for path in sorted((root / PACKAGE).rglob("*.py"))}
    return {
        module: imported_modules(
            path.read_text(encoding="utf-8"), module, path.name == "__init__.py", files, type_checking=type_checking
        )
        for module, path in files.items()
    }


# ------------------------------------------------------------------------------------------- the rules, unit-tested
KNOWN = {"agentlightning", "agentlightning.store", "agentlightning.store.base", "agentlightning.tracer"}


def test_type_checking_imports_are_not_edges() -> None:
    source = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from agentlightning.tracer import X\n"
    assert imported_modules(source, "agentlightning.store.base", False, KNOWN) == set()
    found = imported_modules(source, "agentlightning.store.base", False, KNOWN, type_checking=True)
    assert found == {"agentlightning.tracer"}


def test_function_level_and_import_module_calls_are_edges() -> None:
    source = "def f():\n    from agentlightning.tracer import X\n    importlib.import_module('agentlightning')\n"
    found = imported_modules(source, "agentlightning.store.base", False, KNOWN)
    assert found == {"agentlightning.tracer", "agentlightning"}


def test_relative_imports_resolve_against_the_importing_module() -> None:
    assert imported_modules("from . import base\n", "agentlightning.store", True, KNOWN) == {
        "agentlightning.store.base"
    }
    assert imported_modules("from .. import tracer\n", "agentlightning.store.base", False, KNOWN) == {
        "agentlightning.tracer"
    }


def test_an_import_of_a_higher_layer_is_reported() -> None:
    graph = {"agentlightning.store.base": {"agentlightning.tracer"}, "agentlightning.tracer": set()}
    assert upward_imports(graph, LAYERS) == [("agentlightning.store.base", "agentlightning.tracer")]


def test_an_import_of_a_higher_part_of_grpo_is_reported() -> None:
    graph = {f"{GRPO}.learning.samples": {f"{GRPO}.serving.base", f"{GRPO}.rollouts.reading", f"{PACKAGE}.types"}}
    assert grpo_upward_imports(graph, GRPO_LAYERS) == [(f"{GRPO}.learning.samples", f"{GRPO}.serving.base")]


def test_a_circle_is_reported_once_with_its_members() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]


# ---------------------------------------------------------------------------------------------- the package itself
@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return package_graph()


def test_every_top_level_name_has_a_layer(graph: dict[str, set[str]]) -> None:
    missing = sorted({top_level(module) for module in graph} - set(LAYERS))
    assert not missing, f"give these a layer in LAYERS (and docs/architecture.md): {missing}"


def test_no_module_imports_a_higher_layer(graph: dict[str, set[str]]) -> None:
    upward = [pair for pair in upward_imports(graph, LAYERS) if pair not in ALLOWED_UPWARD]
    lines = [
        f"{importer} (layer {LAYERS[top_level(importer)]}) imports {imported} (layer {LAYERS[top_level(imported)]})"
        for importer, imported in upward
    ]
    assert not lines, "imports running up a layer:\n" + "\n".join(lines)


def test_every_part_of_grpo_has_a_layer(graph: dict[str, set[str]]) -> None:
    parts = {grpo_part(module) for module in graph if module == GRPO or module.startswith(GRPO + ".")}
    missing = sorted(parts - set(GRPO_LAYERS))
    assert not missing, f"give these parts of the GRPO package a layer in GRPO_LAYERS: {missing}"


def test_no_part_of_grpo_imports_a_higher_part() -> None:
    """Inside GRPO too, also for type checkers: collecting rollouts knows nothing of learning, learning nothing of
    serving or of the sampling rounds, and only the run loop sees everything."""
    upward = grpo_upward_imports(package_graph(type_checking=True), GRPO_LAYERS)
    lines = [
        f"{importer} ({grpo_part(importer) or 'grpo'}) imports {imported} ({grpo_part(imported) or 'grpo'})"
        for importer, imported in upward
    ]
    assert not lines, "imports running up a layer of the GRPO package:\n" + "\n".join(lines)


def test_no_modules_import_each_other_in_a_circle(graph: dict[str, set[str]]) -> None:
    found = cycles(graph)
    assert not found, "import circles:\n" + "\n".join(" <-> ".join(component) for component in found)


def test_no_circles_even_through_type_checking_imports() -> None:
    """A circle of type-only imports is still two modules that cannot be understood apart (the scheduler and the
    engine, the policy and its shared base once were); the remaining ones are listed with their reason."""
    found = [
        component for component in cycles(package_graph(type_checking=True)) if component not in ALLOWED_TYPE_CIRCLES
    ]
    assert not found, "import circles through TYPE_CHECKING imports:\n" + "\n".join(
        " <-> ".join(component) for component in found
    )


# ------------------------------------------------------------------------------------------- third-party clients
HTTP_CLIENT_LIBRARIES = {"httpx", "requests", "urllib3", "pycurl"}
"""HTTP client libraries the package must not send with: it sends with aiohttp (and, for the store over http://, its
own `store/http/client/lite.py`, kept on the figures of `benchmarks/store_http_libraries.py`)."""


def test_the_package_sends_http_with_one_client_library() -> None:
    found = []
    for path in sorted((ROOT / PACKAGE).rglob("*.py")):
        for node in _import_nodes(ast.parse(path.read_text(encoding="utf-8")), type_checking=True):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            found += [f"{path.relative_to(ROOT)}: {n}" for n in names if n.split(".")[0] in HTTP_CLIENT_LIBRARIES]
    assert found == []
