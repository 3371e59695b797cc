"""The sections of `GRPOConfig`, one per concern; each validates its own settings when built.

A section is a frozen dataclass whose field names are the flat setting names (`GRPOConfig(group_size=4)` and
`GRPOConfig(schedule=ScheduleSettings(group_size=4))` are the same run; `summary.json` records the flat names).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, Optional, Union

from agentlightning.algorithm.failures import check_failure_reward
from agentlightning.utils.device import validate_device_name, validate_precision

from .checks import (
    finite_number,
    non_negative_number,
    one_of,
    optional_positive_int,
    positive_int,
    positive_number,
)

__all__ = [
    "CheckpointSettings",
    "ComputeSettings",
    "LoraSettings",
    "LossSettings",
    "OptimizerSettings",
    "RewardSettings",
    "SampleSettings",
    "SamplerSettings",
    "ScheduleSettings",
]

LossAggregation = Literal["token", "sequence"]
LossNormaliser = Union[Literal["tokens", "constant"], float]
SampleAggregation = Literal["trajectory", "transition"]
Credit = Literal["final", "turn"]
SamplerCorrection = Literal["auto", "on", "off"]
TruncatedCalls = Literal["mask", "failure_reward", "keep"]


@dataclass(frozen=True)
class ScheduleSettings:
    """What a step samples and how long the run lasts.

    Args:
        group_size: rollouts per training task and step (the group whose rewards are normalised together).
        tasks_per_step: training tasks per step (each enqueued `group_size` times).
        max_steps: stop after this many updates (None: run until `max_minutes` or the data runs out).
        max_minutes: stop starting new steps after this many minutes of training (None: no time limit).
        epochs: passes over the training data (ignored when `max_steps` or `max_minutes` bounds the run: the data
            is then cycled).
        informative_groups: groups with varying rewards each step trains on: while fewer were found, fresh tasks
            are sampled (up to `max_tasks_per_step`). None: `tasks_per_step`; 0: never sample more.
        max_tasks_per_step: the most tasks one step may sample while looking for informative groups (None:
            4 x `tasks_per_step`).
        saturation_reward: once the mean training reward of the last `saturation_window` steps is at least this,
            steps sample no extra tasks (the reward saturated: nearly every group is all right, and looking for
            informative ones costs more than it gives); they resume when it falls below. None: never stop. The
            default fits rewards where 1 is best.
        saturation_window: the steps `saturation_reward` averages over.
        rollout_timeout: seconds to wait for one step's rollouts; unfinished ones are cancelled and counted.
        seed: seeds the task order, torch (LoRA initialisation) when the policy is built, and the sampling of the
            in-process inference engine (requests that carry no seed of their own).
    """

    group_size: int = 8
    tasks_per_step: int = 2
    max_steps: Optional[int] = None
    max_minutes: Optional[float] = None
    epochs: int = 1
    informative_groups: Optional[int] = None
    max_tasks_per_step: Optional[int] = None
    saturation_reward: Optional[float] = 0.9
    saturation_window: int = 5
    rollout_timeout: float = 600.0
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("group_size", "tasks_per_step", "epochs", "saturation_window"):
            positive_int(name, getattr(self, name))
        if self.group_size < 2:
            raise ValueError("group_size must be at least 2: advantages compare the rollouts of one task")
        optional_positive_int("max_steps", self.max_steps)
        if self.max_minutes is not None and not (math.isfinite(self.max_minutes) and self.max_minutes > 0):
            raise ValueError(f"max_minutes must be a positive number or None, got {self.max_minutes!r}")
        positive_number("rollout_timeout", self.rollout_timeout)
        if self.saturation_reward is not None and not finite_number(self.saturation_reward):
            raise ValueError(f"saturation_reward must be a finite number or None, got {self.saturation_reward!r}")
        groups = self.informative_groups
        if groups is not None and (isinstance(groups, bool) or not isinstance(groups, int) or groups < 0):
            raise ValueError(f"informative_groups must be a non-negative integer or None, got {groups!r}")
        optional_positive_int("max_tasks_per_step", self.max_tasks_per_step)
        if self.max_tasks_per_step is not None and self.max_tasks_per_step < self.tasks_per_step:
            raise ValueError(
                f"max_tasks_per_step ({self.max_tasks_per_step}) must be at least tasks_per_step "
                f"({self.tasks_per_step})"
            )

    @property
    def target_informative_groups(self) -> int:
        """Informative groups a step looks for (0: take what the first batch of tasks gives)."""
        return self.tasks_per_step if self.informative_groups is None else self.informative_groups

    @property
    def task_budget_per_step(self) -> int:
        """The most tasks one step samples."""
        return self.max_tasks_per_step if self.max_tasks_per_step is not None else 4 * self.tasks_per_step


@dataclass(frozen=True)
class OptimizerSettings:
    """AdamW's settings.

    Args:
        learning_rate: the learning rate (None: `LORA_LEARNING_RATE`, 3e-4, with `lora_rank`, else
            `FULL_FINE_TUNE_LEARNING_RATE`, 1e-5; see `GRPOConfig.effective_learning_rate`). LoRA typically wants
            1e-4..5e-4, a full fine-tune 1e-6..3e-5.
        weight_decay: the weight decay.
        max_grad_norm: gradient clipping norm (None: no clipping).
    """

    learning_rate: Optional[float] = None
    weight_decay: float = 0.0
    max_grad_norm: Optional[float] = 1.0

    def __post_init__(self) -> None:
        if self.learning_rate is not None:
            positive_number("learning_rate", self.learning_rate)
        non_negative_number("weight_decay", self.weight_decay)
        if self.max_grad_norm is not None and not self.max_grad_norm > 0:
            raise ValueError(f"max_grad_norm must be positive or None, got {self.max_grad_norm!r}")


@dataclass(frozen=True)
class LossSettings:
    """The clipped policy-gradient loss.

    Args:
        clip_epsilon: the PPO clipping range of the probability ratio.
        kl_coef: weight of the KL penalty to the reference (initial) policy; 0 disables it and the reference model.
        ppo_epochs: optimisation passes over each step's batch (1: the ratio is exactly 1 and the loss is the plain
            policy gradient; >1 needs the old log-probabilities, computed before the first pass).
        loss_aggregation: "token" (mean over all response tokens of the batch) or "sequence" (mean per sequence,
            then over sequences, as in the GRPO paper).
        loss_normaliser: what the summed loss of an update is divided by. "tokens": the response tokens the update
            trains on ("token" aggregation) or its samples ("sequence"), so the step size depends on how many
            completions the step kept. "constant" (as in Dr. GRPO): `max_response_tokens` x `group_size` x
            `tasks_per_step` ("token") or `group_size` x `tasks_per_step` ("sequence"), the same every step. A
            positive number: that divisor, whatever the aggregation.
    """

    clip_epsilon: float = 0.2
    kl_coef: float = 0.0
    ppo_epochs: int = 1
    loss_aggregation: LossAggregation = "token"
    loss_normaliser: LossNormaliser = "tokens"

    def __post_init__(self) -> None:
        positive_int("ppo_epochs", self.ppo_epochs)
        non_negative_number("kl_coef", self.kl_coef)
        non_negative_number("clip_epsilon", self.clip_epsilon)
        one_of("loss_aggregation", self.loss_aggregation, ("token", "sequence"))
        value = self.loss_normaliser
        if not ((isinstance(value, str) and value in ("tokens", "constant")) or (finite_number(value) and value > 0)):
            raise ValueError(f"loss_normaliser must be 'tokens', 'constant' or a positive number, got {value!r}")


@dataclass(frozen=True)
class RewardSettings:
    """How rollouts' rewards become advantages, and the rewards of failed or truncated rollouts.

    Args:
        credit: "final" (every call of a rollout gets its final reward's advantage) or "turn" (each call's return,
            the rewards attributed to it and to later calls, is compared with the same turn of the group).
        scale_rewards: divide the group-centred rewards by the group's standard deviation.
        min_reward_std: groups whose reward standard deviation is at most this carry no signal and are skipped.
        failure_reward: the outcome of a rollout in which the agent's own code raised (not a timeout, a dead
            runner or the store: `agentlightning.algorithm.failures`); such rollouts are then trained on and counted
            as `rollouts_failed_scored`. None (default): failed rollouts are left out (`rollouts_failed`).
        truncated: what happens to calls that stopped on the length limit (`finish_reason` "length"): "mask" (their
            tokens leave the loss), "failure_reward" (their rollout is rewarded `truncation_reward`) or "keep"
            (trained as they are: for agents whose `max_tokens` is the intended answer length). Masked or penalised
            calls are counted in `skips.calls_hit_length_limit`; the step's `truncation_rate` is all such calls per
            call the proxy recorded.
        truncation_reward: the reward of a rollout with a truncated call under `truncated="failure_reward"`.
        failed_group_reward: None (default): a group whose rewards do not vary is skipped, whatever they are. A
            number: a group whose rewards are all at most this (every rollout failed; 0.0 for 0/1 rewards) is
            trained with `failed_group_advantage` on every rollout (negative reinforcement: it lowers what the model
            did on that task, so that it tries something else; counted as `failed_groups`). Against a policy that
            settles on one action (one tool for every question): the questions it now gets wrong all score 0, and
            without this nothing in the update pushes back.
        failed_group_advantage: the (negative) advantage of every rollout of a failed group; the failures of a
            group of 4 with one success get -0.58, of one with two -1.0.
    """

    credit: Credit = "final"
    scale_rewards: bool = True
    min_reward_std: float = 1e-6
    failure_reward: Optional[float] = None
    truncated: TruncatedCalls = "mask"
    truncation_reward: float = 0.0
    failed_group_reward: Optional[float] = None
    failed_group_advantage: float = -0.5

    def __post_init__(self) -> None:
        non_negative_number("min_reward_std", self.min_reward_std)
        one_of("credit", self.credit, ("final", "turn"))
        object.__setattr__(self, "failure_reward", check_failure_reward(self.failure_reward))
        one_of("truncated", self.truncated, ("mask", "failure_reward", "keep"))
        if not finite_number(self.truncation_reward):
            raise ValueError(f"truncation_reward must be a finite number, got {self.truncation_reward!r}")
        if self.failed_group_reward is not None and not finite_number(self.failed_group_reward):
            raise ValueError(f"failed_group_reward must be a finite number or None, got {self.failed_group_reward!r}")
        if not (finite_number(self.failed_group_advantage) and self.failed_group_advantage < 0):
            raise ValueError(
                f"failed_group_advantage must be a negative finite number, got {self.failed_group_advantage!r}"
            )


@dataclass(frozen=True)
class SampleSettings:
    """How a step's calls become training samples, and how many go through one forward/backward pass.

    Args:
        aggregation: "trajectory" (the calls of one conversation whose prompts extend each other exactly are one
            sample, the loss masked to the model's own tokens) or "transition" (one sample per LLM call). Calls that
            do not extend their conversation are trained one by one either way and counted as drift.
        max_response_tokens: response ids longer than this are truncated for training (counted).
        micro_batch_size: at most this many sequences per forward/backward pass (gradients are accumulated over
            the batch, so the update is the same whatever the split, up to float rounding).
        micro_batch_tokens: at most this many positions computed per forward/backward pass: rows x longest, where
            an opening all the rows share (the system prompt and worked examples every call starts with) counts
            once, since it runs once; bounds memory when multi-turn sequences are long.
    """

    aggregation: SampleAggregation = "trajectory"
    max_response_tokens: int = 512
    micro_batch_size: int = 8
    micro_batch_tokens: int = 4096

    def __post_init__(self) -> None:
        for name in ("micro_batch_size", "max_response_tokens", "micro_batch_tokens"):
            positive_int(name, getattr(self, name))
        one_of("aggregation", self.aggregation, ("trajectory", "transition"))


@dataclass(frozen=True)
class LoraSettings:
    """The LoRA adapter trained instead of the whole model.

    Args:
        lora_rank: train a LoRA adapter of this rank (None: full fine-tune; needs peft).
        lora_alpha: LoRA scaling numerator (default 2 x rank).
        lora_target_modules: module names LoRA adapts (None: every linear projection of the attention and MLP).
    """

    lora_rank: Optional[int] = None
    lora_alpha: Optional[int] = None
    lora_target_modules: Optional[list[str]] = None

    def __post_init__(self) -> None:
        optional_positive_int("lora_rank", self.lora_rank)
        optional_positive_int("lora_alpha", self.lora_alpha)


@dataclass(frozen=True)
class SamplerSettings:
    """How the agents sample, and the correction for the sampler/trainer mismatch.

    Args:
        temperature: sampling temperature agents receive in the ProxyLLM's sampling parameters; the training
            log-probabilities are computed at it too, so it must be positive (0 would make every group's rollouts
            identical). Agents must sample with it and without top_p/top_k: each step counts the calls that did not
            (`sampling_mismatches`). Evaluations are greedy regardless.
        sampler_correction: truncated importance sampling of the sampler/trainer mismatch: "auto" (on unless the
            sampler is the in-process engine holding float32 weights while the trainer computes in float32; vLLM,
            a server by URL and bfloat16 serving or training get it), "on" or "off". Each trained token with a
            recorded sampler log-prob is weighted by the detached `min(exp(log p_train - log p_sampler), tis_cap)`;
            the gap itself is measured every step either way (`sampler_gap_mean`, `sampler_gap_max`).
        tis_cap: the cap C of the truncated importance weights (at least 1).
    """

    temperature: float = 1.0
    sampler_correction: SamplerCorrection = "auto"
    tis_cap: float = 2.0

    def __post_init__(self) -> None:
        if isinstance(self.temperature, (int, float)) and self.temperature == 0:
            raise ValueError(
                "temperature must be positive for training: at 0 (greedy) every rollout of a group gives the same "
                "answer, so no group carries a learning signal (evaluations are greedy anyway)"
            )
        positive_number("temperature", self.temperature)
        one_of("sampler_correction", self.sampler_correction, ("auto", "on", "off"))
        if not (finite_number(self.tis_cap) and self.tis_cap >= 1):
            raise ValueError(f"tis_cap must be a finite number of at least 1, got {self.tis_cap!r}")


@dataclass(frozen=True)
class ComputeSettings:
    """Where the policy trains and in which precision.

    Args:
        device: where the policy, its optimizer and (when GRPO loads it) the inference engine live: "auto" (CUDA
            when available, else the CPU), "cpu", "cuda", "cuda:N". On CUDA with bfloat16 support the forward passes
            autocast to bfloat16 (parameters and optimizer state stay float32).
        precision: "auto" (bfloat16 autocast on CUDA with bfloat16 support, else float32), "float32" (never
            autocast) or "bfloat16" (autocast on any device, the CPU included, and the inference engine GRPO builds
            holds bfloat16 weights; parameters and optimizer state stay float32). On CPUs without native bfloat16
            (AVX512-BF16/AMX) "bfloat16" is emulated and slower than float32.
    """

    device: str = "auto"
    precision: str = "auto"

    def __post_init__(self) -> None:
        validate_device_name(self.device)
        validate_precision(self.precision)


@dataclass(frozen=True)
class CheckpointSettings:
    """How often a run saves a checkpoint, and how many it keeps.

    Args:
        checkpoint_every: save a checkpoint every this many steps (also at the end and on Ctrl-C).
        keep_checkpoints: checkpoints kept on disk (older ones are deleted).
    """

    checkpoint_every: int = 10
    keep_checkpoints: int = 2

    def __post_init__(self) -> None:
        positive_int("checkpoint_every", self.checkpoint_every)
        positive_int("keep_checkpoints", self.keep_checkpoints)
