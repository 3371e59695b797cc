"""The policy's served weights and its atomic Hugging Face checkpoints (full fine-tune and LoRA)."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from agentlightning.algorithm.grpo.config import GRPOConfig  # noqa: E402
from agentlightning.algorithm.grpo.learning.checkpoint import find_latest, load_checkpoint, save_checkpoint  # noqa: E402
from agentlightning.algorithm.grpo.learning.loss import Sample  # noqa: E402
from agentlightning.algorithm.grpo.learning.policy import Policy  # noqa: E402
from agentlightning.algorithm.grpo.learning.update import apply_update  # noqa: E402
from agentlightning.inference.tiny import build_tiny_engine  # noqa: E402


def _policy(**settings: object) -> Policy:
    return Policy.from_engine(build_tiny_engine(seed=0), GRPOConfig.from_kwargs(learning_rate=1e-2, **settings))


def _train_once(policy: Policy) -> None:
    samples = [Sample([2, 10, 11], [12, 13], 1.0), Sample([2, 10, 11], [14], -1.0)]
    apply_update(policy, samples, policy.config)


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_update_changes_the_served_weights_and_the_engine_takes_them() -> None:
    engine = build_tiny_engine(seed=0)
    policy = Policy.from_engine(engine, GRPOConfig(learning_rate=1e-2))
    before = policy.inference_state_dict()
    _train_once(policy)
    after = policy.inference_state_dict()
    assert not _same(before, after)
    engine.load_weights(after, "v1")
    assert engine.weights_version == "v1"
    assert torch.equal(engine.model.state_dict()["model.norm.weight"], after["model.norm.weight"])


def test_lora_served_weights_have_the_plain_model_keys_with_the_adapter_merged() -> None:
    engine = build_tiny_engine(seed=0)
    policy = Policy.from_engine(engine, GRPOConfig(learning_rate=1e-2, lora_rank=4))
    assert set(policy.inference_state_dict()) == set(engine.model.state_dict())
    _train_once(policy)
    merged = policy.inference_state_dict()
    engine.load_weights(merged, "lora-1")
    key = "model.layers.0.self_attn.q_proj.weight"
    assert not torch.equal(merged[key], build_tiny_engine(seed=0).model.state_dict()[key])


@pytest.mark.parametrize("lora_rank", [None, 4])
def test_checkpoint_round_trip_restores_weights_optimizer_and_rng(tmp_path: Path, lora_rank: object) -> None:
    policy = _policy(lora_rank=lora_rank)
    _train_once(policy)
    torch.manual_seed(123)
    save_checkpoint(tmp_path, policy, 7, {"history": [{"step": 7}]})
    expected_next = torch.rand(3)
    saved = policy.inference_state_dict()

    fresh = _policy(lora_rank=lora_rank)
    loaded = load_checkpoint(find_latest(tmp_path), fresh)  # type: ignore[arg-type]
    assert loaded.step == 7 and loaded.state["history"] == [{"step": 7}]
    assert _same(fresh.inference_state_dict(), saved)
    assert torch.equal(torch.rand(3), expected_next)
    assert fresh.optimizer.state_dict()["state"].keys() == policy.optimizer.state_dict()["state"].keys()


def test_full_checkpoint_is_a_standard_transformers_folder(tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM

    policy = _policy()
    path = save_checkpoint(tmp_path, policy, 1, {})
    model = AutoModelForCausalLM.from_pretrained(str(path / "model"))
    assert torch.equal(model.state_dict()["model.norm.weight"], policy.model.state_dict()["model.norm.weight"])


def test_lora_checkpoint_is_a_peft_adapter_that_merges(tmp_path: Path) -> None:
    from peft import PeftModel

    policy = _policy(lora_rank=4)
    _train_once(policy)
    path = save_checkpoint(tmp_path, policy, 1, {})
    base = build_tiny_engine(seed=0).model
    merged = PeftModel.from_pretrained(base, str(path / "model")).merge_and_unload()
    key = "model.layers.0.self_attn.q_proj.weight"
    assert torch.allclose(merged.state_dict()[key], policy.inference_state_dict()[key], atol=1e-6)


def test_killed_save_leaves_the_previous_checkpoint_as_latest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    policy = _policy()
    first = save_checkpoint(tmp_path, policy, 1, {})

    def killed(*_: object, **__: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(torch, "save", killed)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(tmp_path, policy, 2, {})
    assert find_latest(tmp_path) == first
    assert [p.name for p in (tmp_path / "checkpoints").iterdir() if p.is_dir()] == ["step-000001"]


def test_latest_pointing_at_a_missing_folder_falls_back_to_the_newest_complete(tmp_path: Path) -> None:
    policy = _policy()
    first = save_checkpoint(tmp_path, policy, 1, {})
    (tmp_path / "checkpoints" / "latest").write_text("step-000009\n")
    assert find_latest(tmp_path) == first


def test_old_checkpoints_are_pruned(tmp_path: Path) -> None:
    policy = _policy()
    for step in (1, 2, 3):
        save_checkpoint(tmp_path, policy, step, {}, keep=2)
    names = sorted(p.name for p in (tmp_path / "checkpoints").iterdir() if p.is_dir())
    assert names == ["step-000002", "step-000003"]


def test_lora_merged_save_is_a_plain_transformers_folder_with_the_adapter_merged(tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM

    policy = _policy(lora_rank=4)
    _train_once(policy)
    policy.save_merged(tmp_path / "merged")
    saved = AutoModelForCausalLM.from_pretrained(str(tmp_path / "merged")).state_dict()
    served = policy.inference_state_dict()
    assert set(saved) == set(served)
    assert all(torch.allclose(saved[key], served[key], atol=1e-6) for key in served)


def test_lora_merged_save_leaves_the_adapter_unmerged(tmp_path: Path) -> None:
    policy = _policy(lora_rank=4)
    _train_once(policy)
    before = {k: v.clone() for k, v in policy.model.state_dict().items()}
    policy.save_merged(tmp_path / "merged")
    after = policy.model.state_dict()  # merging and unmerging again rounds: equal to float precision
    assert after.keys() == before.keys() and all(torch.allclose(after[k], before[k], atol=1e-6) for k in before)


def test_merged_weights_are_views_of_the_policy_not_copies() -> None:
    policy = _policy(lora_rank=4)
    key = "model.norm.weight"
    with policy.merged_weights() as weights:
        assert weights[key].data_ptr() == policy.model.get_base_model().state_dict()[key].data_ptr()
