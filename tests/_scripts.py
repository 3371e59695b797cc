"""Import a script file (an example, a benchmark, a tool under scripts/) as a module: they are not packages."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[1]


def load_script(path: Path, name: str, *, on_path: bool = False) -> ModuleType:
    """The module of the file `path`, registered in `sys.modules` as `name` (loaded once; later calls reuse it).

    Args:
        path: the script's file.
        name: its module name; unique per file, since two scripts may share a file name (train.py).
        on_path: put the script's folder on `sys.path` first, so its own sibling imports work (in runner
            processes too).
    """
    if on_path and str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path} as a module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module
