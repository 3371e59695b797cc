"""`GRPOConfig`: every knob of a GRPO run, in sections by concern (`sections.py`), validated when built.

Each setting has one name, readable and settable flat (`config.group_size`, as `GRPO(group_size=...)` and
`summary.json` name it) or through its section (`config.schedule.group_size`); the flat attributes are
`_InSection` descriptors over the sections, declared in the order `to_dict` writes them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Generic, Optional, TypeVar, Union

from .sections import (
    CheckpointSettings,
    ComputeSettings,
    Credit,
    LoraSettings,
    LossAggregation,
    LossNormaliser,
    LossSettings,
    OptimizerSettings,
    RewardSettings,
    SampleAggregation,
    SamplerCorrection,
    SamplerSettings,
    SampleSettings,
    ScheduleSettings,
    TruncatedCalls,
)

__all__ = ["FULL_FINE_TUNE_LEARNING_RATE", "LORA_LEARNING_RATE", "GRPOConfig"]

LORA_LEARNING_RATE = 3e-4
"""The learning rate of a LoRA run that sets none (what the arithmetic and calculator examples train with)."""
FULL_FINE_TUNE_LEARNING_RATE = 1e-5
"""The learning rate of a full fine-tune that sets none."""

Section = Union[
    ScheduleSettings,
    OptimizerSettings,
    LossSettings,
    RewardSettings,
    SampleSettings,
    LoraSettings,
    SamplerSettings,
    ComputeSettings,
    CheckpointSettings,
]
SECTIONS: dict[str, type[Section]] = {
    "schedule": ScheduleSettings,
    "optimizer": OptimizerSettings,
    "loss": LossSettings,
    "rewards": RewardSettings,
    "samples": SampleSettings,
    "lora": LoraSettings,
    "sampler": SamplerSettings,
    "compute": ComputeSettings,
    "checkpoints": CheckpointSettings,
}
"""`GRPOConfig`'s sections: attribute name -> class."""

T = TypeVar("T")


class _InSection(Generic[T]):
    """A flat setting (`config.group_size`): read from its section, written by replacing the section (validated)."""

    def __init__(self, section: str) -> None:
        self.section = section
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, config: Optional[GRPOConfig], owner: type) -> T:
        if config is None:  # on the class: the default, as a dataclass field reads (`GRPOConfig.saturation_reward`)
            return getattr(SECTIONS[self.section], self.name)
        return getattr(getattr(config, self.section), self.name)

    def __set__(self, config: GRPOConfig, value: T) -> None:
        setattr(config, self.section, replace(getattr(config, self.section), **{self.name: value}))


@dataclass(init=False)
class GRPOConfig:
    """Settings of a GRPO run (see docs/algorithms.md for guidance), in sections by concern.

    Built from flat settings (`GRPOConfig(group_size=4, learning_rate=1e-4)`), from sections
    (`GRPOConfig(schedule=ScheduleSettings(group_size=4))`) or both (a flat setting then overrides its section's
    field). Each section documents its settings: `schedule` (`ScheduleSettings`: group size, tasks per step, how
    long the run lasts, extra tasks for informative groups, the rollout timeout, the seed), `optimizer`
    (`OptimizerSettings`), `loss` (`LossSettings`: clipping, KL, PPO epochs, aggregation and normaliser), `rewards`
    (`RewardSettings`: credit, reward scaling, failed and truncated rollouts), `samples` (`SampleSettings`:
    trajectory or transition samples, response length, micro-batches), `lora` (`LoraSettings`), `sampler`
    (`SamplerSettings`: temperature and the sampler/trainer correction), `compute` (`ComputeSettings`: device and
    precision) and `checkpoints` (`CheckpointSettings`). A bad value is a ValueError naming the setting; an unknown
    name a TypeError.
    """

    schedule: ScheduleSettings
    optimizer: OptimizerSettings
    loss: LossSettings
    rewards: RewardSettings
    samples: SampleSettings
    lora: LoraSettings
    sampler: SamplerSettings
    compute: ComputeSettings
    checkpoints: CheckpointSettings

    group_size = _InSection[int]("schedule")
    tasks_per_step = _InSection[int]("schedule")
    max_steps = _InSection[Optional[int]]("schedule")
    max_minutes = _InSection[Optional[float]]("schedule")
    epochs = _InSection[int]("schedule")
    learning_rate = _InSection[Optional[float]]("optimizer")
    weight_decay = _InSection[float]("optimizer")
    max_grad_norm = _InSection[Optional[float]]("optimizer")
    clip_epsilon = _InSection[float]("loss")
    kl_coef = _InSection[float]("loss")
    ppo_epochs = _InSection[int]("loss")
    micro_batch_size = _InSection[int]("samples")
    micro_batch_tokens = _InSection[int]("samples")
    loss_aggregation = _InSection[LossAggregation]("loss")
    loss_normaliser = _InSection[LossNormaliser]("loss")
    scale_rewards = _InSection[bool]("rewards")
    min_reward_std = _InSection[float]("rewards")
    lora_rank = _InSection[Optional[int]]("lora")
    lora_alpha = _InSection[Optional[int]]("lora")
    lora_target_modules = _InSection[Optional[list[str]]]("lora")
    temperature = _InSection[float]("sampler")
    max_response_tokens = _InSection[int]("samples")
    aggregation = _InSection[SampleAggregation]("samples")
    credit = _InSection[Credit]("rewards")
    failure_reward = _InSection[Optional[float]]("rewards")
    informative_groups = _InSection[Optional[int]]("schedule")
    max_tasks_per_step = _InSection[Optional[int]]("schedule")
    saturation_reward = _InSection[Optional[float]]("schedule")
    saturation_window = _InSection[int]("schedule")
    checkpoint_every = _InSection[int]("checkpoints")
    keep_checkpoints = _InSection[int]("checkpoints")
    rollout_timeout = _InSection[float]("schedule")
    seed = _InSection[int]("schedule")
    device = _InSection[str]("compute")
    precision = _InSection[str]("compute")
    sampler_correction = _InSection[SamplerCorrection]("sampler")
    tis_cap = _InSection[float]("sampler")
    truncated = _InSection[TruncatedCalls]("rewards")
    truncation_reward = _InSection[float]("rewards")
    failed_group_reward = _InSection[Optional[float]]("rewards")
    failed_group_advantage = _InSection[float]("rewards")

    def __init__(
        self,
        *,
        schedule: Optional[ScheduleSettings] = None,
        optimizer: Optional[OptimizerSettings] = None,
        loss: Optional[LossSettings] = None,
        rewards: Optional[RewardSettings] = None,
        samples: Optional[SampleSettings] = None,
        lora: Optional[LoraSettings] = None,
        sampler: Optional[SamplerSettings] = None,
        compute: Optional[ComputeSettings] = None,
        checkpoints: Optional[CheckpointSettings] = None,
        **settings: Any,
    ) -> None:
        given: dict[str, Optional[Section]] = {
            "schedule": schedule,
            "optimizer": optimizer,
            "loss": loss,
            "rewards": rewards,
            "samples": samples,
            "lora": lora,
            "sampler": sampler,
            "compute": compute,
            "checkpoints": checkpoints,
        }
        unknown = sorted(set(settings) - set(FLAT_SETTINGS))
        if unknown:
            raise TypeError(f"Unknown GRPO setting(s) {unknown}; known: {sorted(FLAT_SETTINGS)} and {list(SECTIONS)}")
        for name, kind in SECTIONS.items():
            section = given[name]
            if section is not None and not isinstance(section, kind):
                raise TypeError(f"{name} must be a {kind.__name__}, got {section!r}")
            own = {setting: settings[setting] for setting in _fields_of(kind) if setting in settings}
            setattr(self, name, kind(**own) if section is None else replace(section, **own) if own else section)

    @property
    def effective_learning_rate(self) -> float:
        """`learning_rate`, or when it is None the default for the kind of run (LoRA or full fine-tune)."""
        if self.optimizer.learning_rate is not None:
            return float(self.optimizer.learning_rate)
        return LORA_LEARNING_RATE if self.lora.lora_rank is not None else FULL_FINE_TUNE_LEARNING_RATE

    @property
    def target_informative_groups(self) -> int:
        """Informative groups a step looks for (0: take what the first batch of tasks gives)."""
        return self.schedule.target_informative_groups

    @property
    def task_budget_per_step(self) -> int:
        """The most tasks one step samples."""
        return self.schedule.task_budget_per_step

    @classmethod
    def from_kwargs(cls, base: Optional[GRPOConfig] = None, **overrides: Any) -> GRPOConfig:
        """`base` (or the defaults) with `overrides` (flat settings or sections) applied; an unknown name is a
        TypeError naming it."""
        sections = {name: getattr(base, name) for name in SECTIONS} if base is not None else {}
        return cls(**{**sections, **overrides})

    def to_dict(self) -> dict[str, Any]:
        """The flat settings as given, plus `effective_learning_rate` (the learning rate the optimizer uses)."""
        values: dict[str, Any] = {}
        for name in SECTIONS:
            values.update(asdict(getattr(self, name)))
        return {
            **{name: values[name] for name in FLAT_SETTINGS},
            "effective_learning_rate": self.effective_learning_rate,
        }


def _fields_of(kind: type[Section]) -> list[str]:
    return [field.name for field in fields(kind)]


FLAT_SETTINGS: dict[str, str] = {
    name: attribute.section for name, attribute in vars(GRPOConfig).items() if isinstance(attribute, _InSection)
}
"""Every flat setting name -> its section, in the order `to_dict` writes them."""
