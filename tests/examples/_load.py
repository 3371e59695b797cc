"""Import an example's module from its folder (examples are scripts, not packages)."""

from __future__ import annotations

from types import ModuleType

from tests._scripts import REPO, load_script

EXAMPLES = REPO / "examples"


def load(example: str, module: str) -> ModuleType:
    """`examples/<example>/<module>.py`, registered as `<example>_<module>` (two examples may both have train.py).

    The example's folder goes on sys.path so its own imports (its agent module) work, in runner processes too.
    """
    return load_script(EXAMPLES / example / f"{module}.py", f"{example}_{module}", on_path=True)
