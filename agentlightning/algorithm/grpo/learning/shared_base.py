"""One copy of the model for a policy and the inference engine that serves it in the same process.

`Policy.from_engine(engine, config, share_base=True)` builds the policy on the engine's own parameter tensors instead
of a copy of them: the main job (SmolLM2-135M in float32) then holds its weights once, about 540 MB less. The engine
serves whatever those tensors hold, so `SharedBase` keeps one rule about their content:

- while generation runs they hold the served weights (the policy's weights with its LoRA delta merged in; a full
  fine-tune trains them directly) under the engine's `weights_version`;
- before an update reads them, or a checkpoint replaces them, `claim()` holds generation off (running sequences
  finish first, new requests wait: `InferenceEngine.paused()`, kept entered by a helper thread until `serve`) and
  unmerges LoRA, so the update trains base + adapter as it would on a copy;
- `serve(version)` (the publish) merges the new delta in, names the new version and lets generation resume.

No request therefore runs on unmerged or half-updated weights, nor on weights labelled with another version.

Rounding. A LoRA round (merged at one publish, unmerged before the next update, with the same A and B) adds the
float32 delta `d` and subtracts it again. Where `W` and `fl(W + d)` lie in the same binade (between the same two powers
of two) the subtraction gives `W` back exactly; elsewhere an element may move by one unit in the last place of
`max(|W|, |W + d|)`. After `N` publishes an element of the frozen base is therefore within `N * 2**-23 *
max(|W|, |W + d|)` of its initial value (relative 1.2e-7 per publish at most; `rounding_bound`), and most elements
do not move at all (tests/algorithm/grpo/test_shared_base.py measures both). A full fine-tune has no rounding of its
own: the optimizer writes the served tensors directly.

Sharing needs the engine's model in float32 on the policy's device (`can_share`); a bfloat16 engine (precision
"bfloat16"), an engine on another device, a server in another process and vLLM keep their own copy.
"""

from __future__ import annotations

import copy
import logging
import threading
from typing import TYPE_CHECKING, Any, Optional, Protocol

from agentlightning.utils.device import resolve_device

if TYPE_CHECKING:
    from agentlightning.inference.engine import InferenceEngine

    from ..config import GRPOConfig

__all__ = ["SharedBase", "SharingPolicy", "can_share", "model_on_same_tensors", "rounding_bound", "why_not_shared"]

logger = logging.getLogger(__name__)


class SharingPolicy(Protocol):
    """What `SharedBase` uses of its policy (`Policy`): the trained model and whether its LoRA delta is merged in."""

    model: Any
    lora: bool

    @property
    def lora_merged(self) -> bool: ...


FLOAT32_UNIT = 2.0**-23
"""The spacing of float32 numbers in [1, 2): one unit in the last place, relative."""


def why_not_shared(engine: InferenceEngine, config: GRPOConfig) -> Optional[str]:
    """Why a policy trained with `config` cannot use the tensors of `engine`'s model (None when it can)."""
    import torch

    device = resolve_device(config.device)
    for name, parameter in engine.model.named_parameters():
        if parameter.dtype != torch.float32:
            return f"the engine holds {name} in {parameter.dtype}, the policy trains float32"
        if parameter.device != device:
            return f"the engine holds {name} on {parameter.device}, the policy trains on {device}"
    return None


def can_share(engine: InferenceEngine, config: GRPOConfig) -> bool:
    """Whether a policy trained with `config` can use the tensors of `engine`'s model (float32, same device)."""
    return why_not_shared(engine, config) is None


def model_on_same_tensors(model: Any) -> Any:
    """A copy of `model` (modules, configuration, buffers) whose parameters are `model`'s own parameter objects."""
    memo: dict[int, Any] = {id(parameter): parameter for parameter in model.parameters()}
    return copy.deepcopy(model, memo)


def rounding_bound(initial: Any, merged: Any, publishes: int) -> Any:
    """The largest distance, per element, of a base weight from `initial` after `publishes` LoRA rounds whose first
    merged values were `merged` (see the module docstring): one unit in the last place of the larger of the two per
    round (the last factor covers how far the magnitudes themselves may have moved meanwhile)."""
    import torch

    larger = torch.maximum(initial.abs(), merged.abs())
    return publishes * FLOAT32_UNIT * larger * (1.0 + publishes * FLOAT32_UNIT)


class _GenerationHold:
    """`engine.paused()` entered by a helper thread and left when `release()` is called, from any thread."""

    def __init__(self, engine: InferenceEngine) -> None:
        self._entered = threading.Event()
        self._leave = threading.Event()
        self._error: Optional[BaseException] = None
        self._thread = threading.Thread(target=self._hold, args=(engine,), name="agl-shared-weights", daemon=True)
        self._thread.start()
        self._entered.wait()
        if self._error is not None:
            self._thread.join()
            raise self._error

    def _hold(self, engine: InferenceEngine) -> None:
        try:
            with engine.paused():
                self._entered.set()
                self._leave.wait()
        except BaseException as exc:  # handed to the thread that asked for the hold
            self._error = exc
            self._entered.set()

    def release(self) -> None:
        self._leave.set()
        self._thread.join()


class SharedBase:
    """The link between a policy and the engine that serves the policy's own tensors (see the module docstring).

    Made by `Policy.from_engine(..., share_base=True)`; `LocalServing.publish` calls `serve`, `Policy.claim_weights`
    calls `claim`. Every method may be called from any thread.
    """

    def __init__(self, engine: InferenceEngine, policy: SharingPolicy) -> None:
        served = {parameter.data_ptr() for parameter in engine.model.parameters()}
        trained = {parameter.data_ptr() for parameter in _base_parameters(policy)}
        if served != trained:
            raise ValueError("SharedBase needs a policy built on the engine's own tensors (Policy.from_engine)")
        self.engine = engine
        self.policy = policy
        self._lock = threading.Lock()
        self._hold: Optional[_GenerationHold] = None
        self.serve(engine.weights_version)  # merges the fresh adapter (a zero delta): the rule holds from the start

    @property
    def claimed(self) -> bool:
        """True from `claim` to `serve`: generation is held off and the tensors hold the training view."""
        return self._hold is not None

    def claim(self) -> None:
        """Hold generation off and unmerge LoRA, until the next `serve` (nothing more if already claimed)."""
        with self._lock:
            if self._hold is None:
                self._hold = _GenerationHold(self.engine)
            if self.policy.lora_merged:
                self.policy.model.unmerge_adapter()

    def serve(self, version: str) -> None:
        """Serve the policy's current weights (LoRA merged in) as `version`, and let generation resume."""
        with self._lock:
            if self._hold is None:
                self._hold = _GenerationHold(self.engine)
            hold, self._hold = self._hold, None
            try:
                self._merge()
                self.engine.weights_updated(version)
            finally:
                hold.release()

    def resume(self) -> None:
        """Let generation resume on the policy's current weights without a new version, if it is held off (a run
        that stops between an update and its publish: its engine must not stay paused)."""
        with self._lock:
            hold, self._hold = self._hold, None
            if hold is None:
                return
            try:
                self._merge()
                logger.warning(
                    "Generation resumes on weights updated after version %s was published (the run stopped before "
                    "publishing them)",
                    self.engine.weights_version,
                )
            finally:
                hold.release()

    def _merge(self) -> None:
        if self.policy.lora and not self.policy.lora_merged:
            self.policy.model.merge_adapter()


def _base_parameters(policy: SharingPolicy) -> list[Any]:
    """The policy's parameters that are not LoRA's (the model's own)."""
    return [parameter for name, parameter in policy.model.named_parameters() if "lora_" not in name]
