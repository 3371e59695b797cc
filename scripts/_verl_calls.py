"""Our side of scripts/verl_api.py: what `agentlightning/algorithm/verl/*.py` calls in verl, read from its source."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any, Optional

from _verl_sources import assignment_targets, attribute_chain

OURS = Path(__file__).resolve().parents[1] / "agentlightning" / "algorithm" / "verl"


def _call_shape(call: ast.Call) -> Optional[dict[str, Any]]:
    """Positional count and keyword names of a call; None when it unpacks (*args / **kwargs: not checkable)."""
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        return None
    return {"positional": len(call.args), "keywords": sorted(k.arg for k in call.keywords if k.arg)}


def _merge_shapes(entry: dict[str, Any], shape: Optional[dict[str, Any]]) -> None:
    if shape is None:
        return
    calls = entry.setdefault("calls", [])
    if shape not in calls:
        calls.append(shape)
        calls.sort(key=lambda s: (s["positional"], s["keywords"]))


class _ConfigKeys(ast.NodeVisitor):
    """Configuration keys read in one function: chains rooted at `config` / `self.config` (or a local bound to such a
    chain); `.get("k")` and `OmegaConf.select(config, "a.b", default=...)` are optional reads."""

    METHODS = {"get", "pop", "items", "keys", "values"}

    def __init__(self, required: set[str], optional: set[str]) -> None:
        self.required, self.optional = required, optional
        self.bound: dict[str, list[str]] = {}

    def _path(self, node: ast.AST) -> Optional[list[str]]:
        chain = attribute_chain(node)
        if not chain:
            return None
        if chain[:2] == ["self", "config"]:
            return chain[2:]
        if chain[0] == "config":
            return chain[1:]
        if chain[0] in self.bound:
            return self.bound[chain[0]] + chain[1:]
        return None

    def _record(self, path: list[str], optional: bool) -> None:
        if not path or path[0] == "agentlightning":  # our own section (config.yaml)
            return
        (self.optional if optional else self.required).add(".".join(path))

    def visit_Assign(self, node: ast.Assign) -> None:
        path = self._path(node.value)
        if path is not None and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            self.bound[node.targets[0].id] = path
            self._record(path, False)
            return
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in self.METHODS:
            path = self._path(func.value)
            if path is not None:
                self._record(path, False)
                if func.attr in ("get", "pop") and node.args and isinstance(node.args[0], ast.Constant):
                    self._record([*path, str(node.args[0].value)], True)
                for arg in node.args[1:]:
                    self.visit(arg)
                return
        chain = attribute_chain(func)
        if chain == ["OmegaConf", "select"] and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant):
            base = self._path(node.args[0])
            if base is not None:
                self._record([*base, *str(node.args[1].value).split(".")], True)
                return
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        path = self._path(node)
        if path is not None and isinstance(node.ctx, ast.Load):
            self._record(path, False)
            return
        self.generic_visit(node)


def extract(directory: Path = OURS) -> dict[str, Any]:
    """What the modules in `directory` use from verl (see the module docstring)."""
    imports: dict[tuple[str, str], dict[str, Any]] = {}
    members: dict[tuple[str, str], dict[str, Any]] = {}
    required: set[str] = set()
    optional: set[str] = set()
    for path in sorted(directory.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        aliases: dict[str, tuple[str, str]] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "verl":
                for name in node.names:
                    aliases[name.asname or name.name] = (node.module, name.name)
                    imports.setdefault((node.module, name.name), {"module": node.module, "name": name.name})
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in aliases:
                _merge_shapes(imports[aliases[node.func.id]], _call_shape(node))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and path.name != "batch.py":
                _ConfigKeys(required, optional).visit(node)
        for node in ast.walk(tree):
            if not isinstance(node, ast.ClassDef):
                continue
            bases = [aliases[b.id] for b in node.bases if isinstance(b, ast.Name) and b.id in aliases]
            if not bases:
                continue
            owner = ".".join(bases[0])
            own = {n.name for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
            for inner in ast.walk(node):
                for target in assignment_targets(inner):
                    chain = attribute_chain(target)
                    if chain and len(chain) == 2 and chain[0] == "self":
                        own.add(chain[1])
            calls: dict[int, ast.Call] = {
                id(inner.func): inner for inner in ast.walk(node) if isinstance(inner, ast.Call)
            }
            for inner in ast.walk(node):
                chain = attribute_chain(inner) if isinstance(inner, ast.Attribute) else None
                if not chain or len(chain) != 2 or chain[0] != "self" or chain[1] in own:
                    continue
                entry = members.setdefault((owner, chain[1]), {"class": owner, "name": chain[1]})
                call = calls.get(id(inner))
                if call is not None:
                    _merge_shapes(entry, _call_shape(call))
    return {
        "imports": [imports[key] for key in sorted(imports)],
        "members": [members[key] for key in sorted(members)],
        "config": {"required": sorted(required - {"get"}), "optional": sorted(optional - required)},
    }
