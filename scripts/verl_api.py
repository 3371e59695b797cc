"""The part of verl's API that Agent Lightning's VERL integration calls, and a check of it against a verl release.

    python scripts/verl_api.py --write            # regenerate scripts/verl_api.json from agentlightning/algorithm/verl
    python scripts/verl_api.py --check WHEEL|DIR  # check it against a verl wheel or an unpacked/installed `verl` dir
    python scripts/verl_api.py --check installed  # against the installed verl (found without importing it)
    python scripts/verl_api.py --download         # fetch the newest verl the `verl` extra allows into the cache, check

Why a list and a static check: verl cannot be imported without its GPU stack (torch with CUDA, vLLM, Ray), and its
sources are not ours to vendor. Both sides are therefore read as source code (Python's `ast`): our calls are
extracted from `agentlightning/algorithm/verl/*.py` (imported names and how they are called, the members our
subclasses use from verl's base classes, the configuration keys we read), verl's definitions from the release.
`verl_api.json` is the extracted list, checked in so that a change of what we call shows in review; the test suite
fails when it is stale (`--write` refreshes it). A few uses extraction cannot see (members of objects verl's trainer
creates, keywords forwarded through our trainer class) are listed by hand under "manual" and kept by `--write`.

The check reports every name that a module does not define, every call whose positional count or keywords the
definition does not accept (or that leaves a required parameter out), every member our subclasses use that the verl
base classes do not define (as a method, a class attribute or `self.<name> = ...`), and every configuration key we
read without a default that verl's generated `ppo_trainer` configuration (with our config.yaml on top) lacks.
"""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Union

ROOT = Path(__file__).resolve().parents[1]
OURS = ROOT / "agentlightning" / "algorithm" / "verl"
MANIFEST = Path(__file__).with_name("verl_api.json")
CACHE = Path.home() / ".cache" / "agentlightning" / "verl"
REQUIREMENT = "verl>=0.9.1,<0.10"
GENERATED_CONFIG = "verl/trainer/config/_generated_ppo_trainer.yaml"


# ---------------------------------------------------------------------------------------------- our side: extraction
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


def _chain(node: ast.AST) -> Optional[list[str]]:
    """`a.b.c` as ["a", "b", "c"] (`self.config.x` as ["self", "config", "x"]); None for anything else."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return [node.id, *reversed(parts)]
    return None


class _ConfigKeys(ast.NodeVisitor):
    """Configuration keys read in one function: chains rooted at `config` / `self.config` (or a local bound to such a
    chain); `.get("k")` and `OmegaConf.select(config, "a.b", default=...)` are optional reads."""

    METHODS = {"get", "pop", "items", "keys", "values"}

    def __init__(self, required: set[str], optional: set[str]) -> None:
        self.required, self.optional = required, optional
        self.bound: dict[str, list[str]] = {}

    def _path(self, node: ast.AST) -> Optional[list[str]]:
        chain = _chain(node)
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
        chain = _chain(func)
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
                for target in _targets(inner):
                    chain = _chain(target)
                    if chain and len(chain) == 2 and chain[0] == "self":
                        own.add(chain[1])
            calls: dict[int, ast.Call] = {
                id(inner.func): inner for inner in ast.walk(node) if isinstance(inner, ast.Call)
            }
            for inner in ast.walk(node):
                chain = _chain(inner) if isinstance(inner, ast.Attribute) else None
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


# -------------------------------------------------------------------------------------------- verl side: sources
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


def _targets(node: ast.AST) -> list[ast.expr]:
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
        (_chain(d.func) if isinstance(d, ast.Call) else _chain(d)) in (["dataclass"], ["dataclasses", "dataclass"])
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
            chain = _chain(base)
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


def _member(sources: Sources, owner: Found, name: str) -> Optional[Definition]:
    for cls in _bases(sources, owner):
        assert isinstance(cls.node, ast.ClassDef)
        for node in cls.node.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
                return node
            if any(isinstance(t, ast.Name) and t.id == name for t in _targets(node)):
                return node  # type: ignore[return-value]
        for node in ast.walk(cls.node):
            for target in _targets(node):
                chain = _chain(target)
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


def _signature(function: Union[ast.FunctionDef, ast.AsyncFunctionDef], bound: bool) -> Signature:
    """How `function` can be called; `bound`: as a method (its first parameter, self or cls, is given)."""
    args = function.args
    params = [*args.posonlyargs, *args.args]
    decorators = {(_chain(d.func if isinstance(d, ast.Call) else d) or [""])[-1] for d in function.decorator_list}
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


def _constructor(sources: Sources, owner: Found) -> Optional[Signature]:
    init = _member(sources, owner, "__init__")
    if isinstance(init, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return _signature(init, bound=True)
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


def _nested(config: dict[str, Any], path: str) -> bool:
    node: Any = config
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def _deep_merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in top.items():
        merged[key] = (
            _deep_merge(merged[key], value) if isinstance(value, dict) and isinstance(merged.get(key), dict) else value
        )
    return merged


def check(sources: Sources, manifest: dict[str, Any]) -> Report:
    """Every problem of `manifest`'s uses against `sources` (see the module docstring)."""
    report = Report()

    def locate(dotted: str) -> Optional[Found]:
        module, _, name = dotted.rpartition(".")
        return find(sources, module, name)

    def check_shapes(where: str, signature: Optional[Signature], calls: list[dict[str, Any]]) -> None:
        if signature is None:
            return
        for shape in calls:
            for problem in check_call(signature, shape):
                report.problems.append(f"{where} called with {shape}: {problem}")

    for entry in manifest["imports"]:
        report.checked += 1
        where = f"{entry['module']}.{entry['name']}"
        found = find(sources, entry["module"], entry["name"])
        if found is None:
            report.problems.append(f"{where}: not defined in verl {sources.version}")
            continue
        if isinstance(found.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            check_shapes(where, _signature(found.node, bound=False), entry.get("calls", []))
        elif isinstance(found.node, ast.ClassDef):
            check_shapes(where, _constructor(sources, found), entry.get("calls", []))
    for entry in [*manifest["members"], *manifest.get("manual", {}).get("members", [])]:
        report.checked += 1
        where = f"{entry['class']}.{entry['name']}"
        owner = locate(entry["class"])
        if owner is None or not isinstance(owner.node, ast.ClassDef):
            report.problems.append(f"{entry['class']}: no such class in verl {sources.version}")
            continue
        if entry["name"] == "__init__":
            check_shapes(where, _constructor(sources, owner), entry.get("calls", []))
            continue
        member = _member(sources, owner, entry["name"])
        if member is None:
            report.problems.append(f"{where}: no such member in verl {sources.version} (nor in its verl bases)")
            continue
        if isinstance(member, (ast.FunctionDef, ast.AsyncFunctionDef)):
            decorators = {(_chain(d) or [""])[-1] for d in member.decorator_list}
            if "property" not in decorators:
                check_shapes(where, _signature(member, bound=True), entry.get("calls", []))
    config = manifest["config"]
    generated = sources.text(GENERATED_CONFIG)
    defaults = manifest.get("manual", {}).get("config_defaults", [])
    for name in defaults:
        report.checked += 1
        if sources.text(f"verl/trainer/config/{name}.yaml") is None:
            report.problems.append(f"config.yaml's defaults: verl has no trainer config {name!r}")
    if generated is None:
        report.problems.append(f"{GENERATED_CONFIG}: missing (cannot check the configuration keys)")
    else:
        import yaml

        ours = yaml.safe_load((OURS / "config.yaml").read_text(encoding="utf-8")) or {}
        merged = _deep_merge(yaml.safe_load(generated) or {}, {k: v for k, v in ours.items() if k != "defaults"})
        for key in config["required"]:
            report.checked += 1
            if not _nested(merged, key):
                report.problems.append(f"configuration key {key}: read without a default, absent from verl's config")
    return report


# ----------------------------------------------------------------------------------------------------------- CLI
def write() -> dict[str, Any]:
    extracted = extract()
    previous = json.loads(MANIFEST.read_text()) if MANIFEST.exists() else {}
    manifest = {"requirement": REQUIREMENT, **extracted, "manual": previous.get("manual", {})}
    MANIFEST.write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def installed_location() -> Optional[Path]:
    """The installed verl package's directory, found without importing it (None when verl is not installed)."""
    import importlib.util

    spec = importlib.util.find_spec("verl")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def cached_wheel() -> Optional[Path]:
    wheels = sorted(CACHE.glob("verl-*.whl")) if CACHE.is_dir() else []
    return wheels[-1] if wheels else None


def download() -> Path:
    CACHE.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        REQUIREMENT,
        "-d",
        str(CACHE),
    ]
    subprocess.run(command, check=True)
    wheel = cached_wheel()
    if wheel is None:
        raise SystemExit(f"pip downloaded no verl wheel into {CACHE}")
    return wheel


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--write", action="store_true", help=f"regenerate {MANIFEST.name} from our sources")
    group.add_argument("--check", metavar="WHEEL|DIR|installed", help="check the list against this verl")
    group.add_argument("--download", action="store_true", help=f"download {REQUIREMENT} into {CACHE} and check")
    args = parser.parse_args(argv)
    if args.write:
        manifest = write()
        print(
            f"{MANIFEST}: {len(manifest['imports'])} imports, {len(manifest['members'])} members, "
            f"{len(manifest['config']['required'])} configuration keys"
        )
        return 0
    if args.download:
        location = download()
    elif args.check == "installed":
        found = installed_location()
        if found is None:
            print("verl is not installed", file=sys.stderr)
            return 2
        location = found
    else:
        location = Path(args.check)
    sources = Sources(location)
    report = check(sources, json.loads(MANIFEST.read_text()))
    for problem in report.problems:
        print(f"MISSING {problem}")
    print(f"verl {sources.version} ({location}): {report.checked} uses checked, {len(report.problems)} problems")
    return 1 if report.problems else 0


if __name__ == "__main__":
    sys.exit(main())
