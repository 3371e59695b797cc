"""Import an example's module from its folder (examples are scripts, not packages)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def load(example: str, module: str) -> ModuleType:
    """`examples/<example>/<module>.py`, registered as `<example>_<module>` (two examples may both have train.py).

    The example's folder goes on sys.path so its own imports (its agent module) work, in runner processes too.
    """
    folder = EXAMPLES / example
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
    name = f"{example}_{module}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, folder / f"{module}.py")
    assert spec is not None and spec.loader is not None
    loaded = importlib.util.module_from_spec(spec)
    sys.modules[name] = loaded
    spec.loader.exec_module(loaded)
    return loaded
