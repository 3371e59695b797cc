"""verl's side of scripts/verl_api.py: its sources read from a wheel or a directory (never imported), where a name
is defined (following re-exports and base classes), and how a definition can be called."""

from __future__ import annotations

import ast
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Union


def attribute_chain(node: ast.AST) -> Optional[list[str]]:
    """`a.b.c` as ["a", "b", "c"] (`self.config.x` as ["self", "config", "x"]); None for anything else."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return [node.id, *reversed(parts)]
    return None


class Sources:
    """verl's Python files and configuration, from a wheel (zip) or a directory holding the `verl` package."""

    def __init__(self, location: Path) -> None:
        self.location = location
        self._files: dict[str, bytes] = {}
        self.version = "unknown"
        if location.is_file():
            with zipfile.ZipFile(location) as wheel:
                for name in wheel.namelist():
                    if name.startswith("verl/") and name.endswith((".py", ".yaml")):
                        self._files[name] = wheel.read(name)
                    if name.endswith(".dist-info/METADATA"):
                        self.version = _version(wheel.read(name).decode("utf-8", "replace"))
        else:
            package = location / "verl" if (location / "verl").is_dir() else location
            if package.name != "verl" or not (package / "__init__.py").exists():
                raise SystemExit(f"{location} holds no verl package")
            for file in package.rglob("*"):
                if file.suffix in (".py", ".yaml"):
                    self._files["verl/" + file.relative_to(package).as_posix()] = file.read_bytes()
            for metadata in package.parent.glob("verl-*.dist-info/METADATA"):
                self.version = _version(metadata.read_text(encoding="utf-8", errors="replace"))
        self._trees: dict[str, Optional[ast.Module]] = {}

    def text(self, name: str) -> Optional[str]:
        data = self._files.get(name)
        return None if data is None else data.decode("utf-8", "replace")

    def module(self, dotted: str) -> Optional[ast.Module]:
        if dotted not in self._trees:
            base = dotted.replace(".", "/")
            text = self.text(base + ".py") or self.text(base + "/__init__.py")
            self._trees[dotted] = ast.parse(text) if text is not None else None
        return self._trees[dotted]

    def is_package(self, dotted: str) -> bool:
        return dotted.replace(".", "/") + "/__init__.py" in self._files


def _version(metadata: str) -> str:
    for line in metadata.splitlines():
        if line.startswith("Version:"):
            return line.split(":", 1)[1].strip()
    return "unknown"


Definition = Union[ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Assign, ast.AnnAssign]


@dataclass
class Found:
    node: Definition
    module: str


@dataclass
class Report:
    problems: list[str] = field(default_factory=list)
    checked: int = 0


def _absolute(module: str, node: ast.ImportFrom, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    parts = module.split(".")
    base = parts if is_package else parts[:-1]
    base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
    return ".".join([*base, *([node.module] if node.module else [])])


def find(sources: Sources, module: str, name: str, depth: int = 0) -> Optional[Found]:
    """The definition of `name` in `module`, following re-exports (`from .x import name`)."""
    tree = sources.module(module)
    if tree is None or depth > 8:
        return None
    found: Optional[Found] = None
    for node in tree.body:
        if (
            (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name)
            or (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets))
            or (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name)
        ):
            found = Found(node, module)
    if found is not None:
        return found
    stars: list[str] = []
    for node in ast.walk(tree):  # re-exports, also inside try/if blocks
        if isinstance(node, ast.ImportFrom):
            origin = _absolute(module, node, sources.is_package(module))
            for alias in node.names:
                if alias.name == "*":
                    stars.append(origin)
                elif (alias.asname or alias.name) == name:
                    return find(sources, origin, alias.name, depth + 1)
    for origin in stars:  # `from .x import *` exports what x's __all__ lists (or its public names)
        exported = _all(sources.module(origin))
        if exported is None or name in exported:
            found = find(sources, origin, name, depth + 1)
            if found is not None:
                return found
    return None


def _all(tree: Optional[ast.Module]) -> Optional[set[str]]:
    """The names a module's literal `__all__` lists (None without one)."""
    for node in tree.body if tree is not None else []:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            try:
                return {str(n) for n in ast.literal_eval(node.value)}
            except ValueError:
                return None
    return None


def assignment_targets(node: ast.AST) -> list[ast.expr]:
    """The assignment targets of `node`, tuples unpacked (`self.a, self.b = ...`)."""
    if isinstance(node, ast.Assign):
        raw = list(node.targets)
    elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
        raw = [node.target]
    else:
        return []
    flat: list[ast.expr] = []
    while raw:
        target = raw.pop()
        if isinstance(target, (ast.Tuple, ast.List)):
            raw.extend(target.elts)
        else:
            flat.append(target)
    return flat


def _is_dataclass(node: ast.ClassDef) -> bool:
    return any(
        (attribute_chain(d.func) if isinstance(d, ast.Call) else attribute_chain(d))
        in (["dataclass"], ["dataclasses", "dataclass"])
        for d in node.decorator_list
    )


def _bases(sources: Sources, found: Found) -> Iterator[Found]:
    """`found` (a class) and its verl base classes, nearest first."""
    seen: set[int] = set()
    queue = [found]
    while queue:
        current = queue.pop(0)
        if id(current.node) in seen or not isinstance(current.node, ast.ClassDef):
            continue
        seen.add(id(current.node))
        yield current
        for base in current.node.bases:
            chain = attribute_chain(base)
            if chain is None or chain[0] == "object":
                continue
            if len(chain) == 1:
                parent = find(sources, current.module, chain[0])
            else:  # `module.Class`: the module as this module imported it
                parent = find(sources, _imported_module(sources, current.module, chain[0]), chain[-1])
            if parent is not None:
                queue.append(parent)


def _imported_module(sources: Sources, module: str, alias: str) -> str:
    """The module that `alias` names in `module` (`import verl.x as alias`, `from verl import x as alias`)."""
    tree = sources.module(module)
    for node in ast.walk(tree) if tree is not None else []:
        if isinstance(node, ast.Import):
            for name in node.names:
                if (name.asname or name.name.split(".")[0]) == alias:
                    return name.name if name.asname else alias
        elif isinstance(node, ast.ImportFrom):
            for name in node.names:
                if (name.asname or name.name) == alias:
                    return f"{_absolute(module, node, sources.is_package(module))}.{name.name}"
    return alias


def member_definition(sources: Sources, owner: Found, name: str) -> Optional[Definition]:
    for cls in _bases(sources, owner):
        assert isinstance(cls.node, ast.ClassDef)
        for node in cls.node.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
                return node
            if any(isinstance(t, ast.Name) and t.id == name for t in assignment_targets(node)):
                return node  # type: ignore[return-value]
        for node in ast.walk(cls.node):
            for target in assignment_targets(node):
                chain = attribute_chain(target)
                if chain and len(chain) == 2 and chain[0] in ("self", "instance") and chain[1] == name:
                    return node  # type: ignore[return-value]
    return None


@dataclass
class Signature:
    positional: list[str]  # parameters that can be given by position (after self/cls)
    keyword: set[str]  # parameters that can be given by keyword
    required: list[str]  # parameters without a default
    varargs: bool
    varkw: bool


def function_signature(function: Union[ast.FunctionDef, ast.AsyncFunctionDef], bound: bool) -> Signature:
    """How `function` can be called; `bound`: as a method (its first parameter, self or cls, is given)."""
    args = function.args
    params = [*args.posonlyargs, *args.args]
    decorators = {
        (attribute_chain(d.func if isinstance(d, ast.Call) else d) or [""])[-1] for d in function.decorator_list
    }
    skip = 1 if bound and "staticmethod" not in decorators and params else 0
    first_default = len(params) - len(args.defaults)
    positional = [a.arg for a in params[skip:]]
    required = [a.arg for index, a in enumerate(params) if skip <= index < first_default]
    required += [a.arg for a, default in zip(args.kwonlyargs, args.kw_defaults, strict=True) if default is None]
    keyword = {a.arg for a in args.args[max(0, skip - len(args.posonlyargs)) :]} | {a.arg for a in args.kwonlyargs}
    return Signature(positional, keyword, required, args.vararg is not None, args.kwarg is not None)


def _dataclass_signature(sources: Sources, owner: Found) -> Signature:
    fields: list[str] = []
    required: list[str] = []
    for cls in reversed(list(_bases(sources, owner))):
        assert isinstance(cls.node, ast.ClassDef)
        for node in cls.node.body:
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                fields.append(node.target.id)
                if node.value is None:
                    required.append(node.target.id)
    return Signature(fields, set(fields), required, False, False)


def constructor_signature(sources: Sources, owner: Found) -> Optional[Signature]:
    init = member_definition(sources, owner, "__init__")
    if isinstance(init, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return function_signature(init, bound=True)
    if isinstance(owner.node, ast.ClassDef) and _is_dataclass(owner.node):
        return _dataclass_signature(sources, owner)
    return Signature([], set(), [], False, False)  # object.__init__


def check_call(signature: Signature, shape: dict[str, Any]) -> list[str]:
    """What is wrong with calling `signature` with `shape` ([] when nothing is)."""
    problems: list[str] = []
    count, keywords = shape["positional"], list(shape["keywords"])
    if count > len(signature.positional) and not signature.varargs:
        problems.append(f"{count} positional arguments, it takes {len(signature.positional)}")
    unknown = [k for k in keywords if k not in signature.keyword]
    if unknown and not signature.varkw:
        problems.append(f"keyword(s) {unknown} it does not take")
    given = set(signature.positional[:count]) | set(keywords)
    missing = [name for name in signature.required if name not in given]
    if missing and not signature.varargs:
        problems.append(f"required parameter(s) {missing} left out")
    return problems
