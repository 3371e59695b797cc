"""Dynamic sampling stops drawing extra tasks once the training reward saturated (`saturation_reward`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentlightning.algorithm.grpo import GRPOConfig
from agentlightning.algorithm.grpo.sampling.saturation import reward_saturated


def _history(*rewards: Any) -> list[dict[str, Any]]:
    return [{"step": i + 1, "reward_mean": reward} for i, reward in enumerate(rewards)]


def test_the_reward_saturates_when_the_recent_steps_mean_reaches_the_threshold() -> None:
    assert reward_saturated(_history(0.1, 0.8, 1.0, 0.9), 0.9, 3)  # (0.8 + 1.0 + 0.9) / 3 = 0.9
    assert not reward_saturated(_history(1.0, 0.8, 1.0, 0.85), 0.9, 3)  # 0.883...


def test_too_few_steps_are_not_saturated() -> None:
    assert not reward_saturated(_history(1.0, 1.0), 0.9, 3)
    assert not reward_saturated([], 0.9, 1)


def test_a_step_without_a_reward_in_the_window_is_not_saturated() -> None:
    assert not reward_saturated(_history(1.0, None, 1.0), 0.9, 3)
    assert reward_saturated(_history(None, 1.0, 1.0, 1.0), 0.9, 3)


def test_an_interrupted_entry_is_passed_over() -> None:
    history = [*_history(1.0, 1.0), {"step": 3, "interrupted": True, "samples": 4}]
    assert reward_saturated(history, 0.9, 2)


def test_no_threshold_never_saturates() -> None:
    assert not reward_saturated(_history(1.0, 1.0, 1.0), None, 2)


def test_the_saturation_default_is_a_mean_reward_of_0_9_over_5_steps() -> None:
    config = GRPOConfig()
    assert (config.saturation_reward, config.saturation_window) == (0.9, 5)


@pytest.mark.parametrize(("name", "value"), [("saturation_reward", float("nan")), ("saturation_window", 0)])
def test_a_bad_saturation_setting_is_rejected_with_its_name(name: str, value: object) -> None:
    with pytest.raises(ValueError, match=name):
        GRPOConfig(**{name: value})  # type: ignore[arg-type]


def test_a_step_after_saturated_steps_samples_no_extra_tasks(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    import agentlightning as agl
    from agentlightning.algorithm.grpo import GRPO
    from agentlightning.inference.tiny import build_tiny_engine

    from .agents import quirky_agent

    algorithm = GRPO(  # every group is all 1.0: the first step spends its budget, the second sees the reward saturated
        engine=build_tiny_engine(seed=0),
        output_dir=tmp_path / "run",
        group_size=2,
        tasks_per_step=1,
        informative_groups=1,
        max_tasks_per_step=3,
        saturation_reward=0.9,
        saturation_window=1,
        max_steps=2,
        learning_rate=3e-2,
    )
    trainer = agl.Trainer(algorithm=algorithm, n_runners=2, strategy="cs", progress="off")
    trainer.fit(quirky_agent, [{"id": i, "kind": "constant"} for i in range(4)])
    assert [(e["tasks"], e["reward_saturated"]) for e in algorithm.history] == [(3, False), (1, True)]
    assert algorithm.group_sampling.to_dict() == {"steps": 2, "tasks": 4, "extra_tasks": 2, "steps_short": 1}
