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
from pathlib import Path
from typing import Any, Optional

ROOT = Path(__file__).resolve().parents[1]
OURS = ROOT / "agentlightning" / "algorithm" / "verl"
MANIFEST = Path(__file__).with_name("verl_api.json")
CACHE = Path.home() / ".cache" / "agentlightning" / "verl"
REQUIREMENT = "verl>=0.9.1,<0.10"
GENERATED_CONFIG = "verl/trainer/config/_generated_ppo_trainer.yaml"


if str(Path(__file__).resolve().parent) not in sys.path:  # its two halves lie beside it, however it is loaded
    sys.path.insert(0, str(Path(__file__).resolve().parent))

from _verl_calls import extract  # noqa: E402
from _verl_sources import (  # noqa: E402
    Found,
    Report,
    Signature,
    Sources,
    attribute_chain,
    check_call,
    constructor_signature,
    find,
    function_signature,
    member_definition,
)


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
            check_shapes(where, function_signature(found.node, bound=False), entry.get("calls", []))
        elif isinstance(found.node, ast.ClassDef):
            check_shapes(where, constructor_signature(sources, found), entry.get("calls", []))
    for entry in [*manifest["members"], *manifest.get("manual", {}).get("members", [])]:
        report.checked += 1
        where = f"{entry['class']}.{entry['name']}"
        owner = locate(entry["class"])
        if owner is None or not isinstance(owner.node, ast.ClassDef):
            report.problems.append(f"{entry['class']}: no such class in verl {sources.version}")
            continue
        if entry["name"] == "__init__":
            check_shapes(where, constructor_signature(sources, owner), entry.get("calls", []))
            continue
        member = member_definition(sources, owner, entry["name"])
        if member is None:
            report.problems.append(f"{where}: no such member in verl {sources.version} (nor in its verl bases)")
            continue
        if isinstance(member, (ast.FunctionDef, ast.AsyncFunctionDef)):
            decorators = {(attribute_chain(d) or [""])[-1] for d in member.decorator_list}
            if "property" not in decorators:
                check_shapes(where, function_signature(member, bound=True), entry.get("calls", []))
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
