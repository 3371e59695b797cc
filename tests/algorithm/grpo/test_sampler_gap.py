"""The sampler/trainer gap: truncated importance weights and gap metrics against hand-computed values, when the
correction applies, and the update that measures and applies it."""

from __future__ import annotations

import contextlib
import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from agentlightning.algorithm.grpo.config import GRPOConfig  # noqa: E402
from agentlightning.algorithm.grpo.learning.loss import Sample, clipped_policy_loss, make_batch  # noqa: E402
from agentlightning.algorithm.grpo.learning.sampler_gap import (  # noqa: E402
    SamplerDescription,
    correction_needed,
    describe_sampler,
    gap_totals,
    tis_weights,
)

UNIFORM = -math.log(4)  # the log-prob of any token under `_BiasModel` before training


def test_tis_weights_are_the_capped_ratio_where_a_sampler_log_prob_was_recorded() -> None:
    train = torch.tensor([[-1.0, -2.0, -0.5, -0.7]])
    sampler = torch.tensor([[-1.5, -1.0, 0.0, -0.9]])
    present = torch.tensor([[1.0, 1.0, 0.0, 1.0]])
    weights = tis_weights(train, sampler, present, cap=1.2)
    # exp(0.5) = 1.6487 -> capped at 1.2; exp(-1) = 0.3679; no sampler log-prob -> 1; exp(0.2) = 1.2214 -> 1.2
    assert weights[0].tolist() == pytest.approx([1.2, math.exp(-1.0), 1.0, 1.2])


def test_tis_weights_carry_no_gradient() -> None:
    train = torch.tensor([[-1.0, -2.0]], requires_grad=True)
    weights = tis_weights(train, torch.tensor([[-1.2, -2.0]]), torch.ones(1, 2), cap=2.0)
    assert not weights.requires_grad


def test_gap_metrics_cover_trained_tokens_with_a_sampler_log_prob() -> None:
    train = torch.tensor([[-1.0, -2.0, -0.5, -0.7]])
    sampler = torch.tensor([[-1.3, -1.0, -9.0, 0.0]])
    present = torch.tensor([[1.0, 1.0, 1.0, 0.0]])
    trained = torch.tensor([[1.0, 1.0, 0.0, 1.0]])  # the third token is not trained: its gap of 8.5 is ignored
    totals = gap_totals(train, sampler, present, trained, cap=2.0)
    metrics = totals.metrics(corrected=True)
    assert metrics["sampler_gap_mean"] == pytest.approx((0.3 + 1.0) / 2)
    assert metrics["sampler_gap_max"] == pytest.approx(1.0)
    assert metrics["sampler_logprob_share"] == pytest.approx(2 / 3)
    assert metrics["tis_weight_mean"] == pytest.approx((math.exp(0.3) + math.exp(-1.0)) / 2)
    assert metrics["tis_clipped_share"] == 0.0
    assert metrics["sampler_correction"] == 1.0


def test_gap_metrics_without_any_sampler_log_prob_are_zero_and_count_the_trained_tokens() -> None:
    totals = gap_totals(torch.zeros(1, 3), None, None, torch.ones(1, 3), cap=2.0)
    assert totals.metrics(corrected=False) == {
        "sampler_gap_mean": 0.0,
        "sampler_gap_max": 0.0,
        "sampler_logprob_share": 0.0,
        "sampler_correction": 0.0,
    }


@pytest.mark.parametrize(
    ("sampler", "expected"),
    [
        (SamplerDescription("in_process", "float32", "float32"), False),  # the trainer's weights, the same dtype
        (SamplerDescription("in_process", "bfloat16", "float32"), True),  # bf16 serving
        (SamplerDescription("in_process", "bfloat16", "bfloat16"), True),  # bf16 copy vs fp32 master + autocast
        (SamplerDescription("in_process", "float32", "bfloat16"), True),  # the trainer autocasts, the engine not
        (SamplerDescription("vllm", None, "float32"), True),
        (SamplerDescription("remote", None, "float32"), True),
    ],
)
def test_auto_corrects_unless_the_sampler_is_the_trainers_float32_weights(
    sampler: SamplerDescription, expected: bool
) -> None:
    assert correction_needed("auto", sampler) is expected


def test_on_and_off_override_the_rule() -> None:
    own = SamplerDescription("in_process", "float32", "float32")
    vllm = SamplerDescription("vllm", None, "float32")
    assert correction_needed("on", own) and not correction_needed("off", vllm)


def test_the_samplers_description_follows_the_serving(tmp_path: Path) -> None:
    from agentlightning.algorithm.grpo.serving.inference_server import LocalServing, RemoteServing
    from agentlightning.algorithm.grpo.serving.vllm import VllmServing
    from agentlightning.inference.tiny import build_tiny_engine

    local = describe_sampler(LocalServing(build_tiny_engine(seed=0)), None)
    assert (local.kind, local.engine_dtype, local.trainer_dtype) == ("in_process", "float32", "float32")
    vllm = VllmServing(tmp_path, tmp_path / "published", lora=True, url="http://127.0.0.1:9")
    assert describe_sampler(vllm, torch.bfloat16) == SamplerDescription("vllm", None, "bfloat16")
    remote = RemoteServing("http://127.0.0.1:9", tmp_path)
    assert describe_sampler(remote, None).kind == "remote"


def test_sampler_correction_and_tis_cap_are_validated() -> None:
    with pytest.raises(ValueError, match="sampler_correction must be"):
        GRPOConfig(sampler_correction="sometimes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="tis_cap must be a finite number of at least 1"):
        GRPOConfig(tis_cap=0.5)


def test_the_loss_weights_each_tokens_policy_term() -> None:
    zeros = torch.zeros(1, 2)
    weights = torch.tensor([[2.0, 0.5]])
    loss, _ = clipped_policy_loss(
        zeros, zeros, torch.tensor([[1.0, 1.0]]), torch.ones(1, 2), clip_epsilon=0.2, token_weights=weights
    )
    assert float(loss) == pytest.approx(-(2.0 + 0.5) / 2)


def test_a_batch_carries_sampler_log_probs_where_recorded() -> None:
    sample = Sample([5], [7, 3, 9], 1.0, loss_mask=[1, 0, 1], sampler_log_probs=[-0.5, None, -0.25])
    batch = make_batch([sample, Sample([5, 6], [8], 1.0)], pad_token_id=0)
    assert batch.sampler_log_probs is not None and batch.sampler_mask is not None
    assert batch.sampler_log_probs.tolist() == [[-0.5, 0.0, -0.25], [0.0, 0.0, 0.0]]
    assert batch.sampler_mask.tolist() == [[1.0, 0.0, 1.0], [0.0, 0.0, 0.0]]


def test_a_batch_without_sampler_log_probs_has_none() -> None:
    batch = make_batch([Sample([5], [7], 1.0)], pad_token_id=0)
    assert batch.sampler_log_probs is None and batch.sampler_mask is None


class _BiasModel(torch.nn.Module):
    """Next-token logits are a learnable bias over a vocabulary of 4 (zero: every token has log-prob -log 4)."""

    def __init__(self) -> None:
        super().__init__()
        self.bias = torch.nn.Parameter(torch.zeros(4))

    def forward(self, input_ids: Any, **_: Any) -> Any:
        return SimpleNamespace(logits=self.bias.expand(*input_ids.shape, 4))


class _Policy:
    def __init__(self) -> None:
        self.model = _BiasModel()
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.0)
        self.pad_token_id = 0
        self.device = torch.device("cpu")

    def claim_weights(self) -> None:
        return None

    def autocast(self) -> Any:
        return contextlib.nullcontext()


def _gap_samples() -> list[Sample]:
    return [
        Sample([1], [2, 3], 1.0, sampler_log_probs=[UNIFORM - 0.3, None]),  # the sampler was less sure: weight e^0.3
        Sample([1], [2], -1.0, sampler_log_probs=[UNIFORM + 1.0]),  # more sure: weight e^-1
    ]


def _update(samples: list[Sample], correct: bool, **settings: Any) -> dict[str, float]:
    from agentlightning.algorithm.grpo.learning.update import apply_update

    config = GRPOConfig(micro_batch_size=1, **settings)  # micro-batches of one row: the totals add up across them
    return apply_update(_Policy(), samples, config, sampler_correction=correct)  # type: ignore[arg-type]


def test_the_update_reports_the_gap_over_trained_tokens() -> None:
    metrics = _update(_gap_samples(), correct=False)
    assert metrics["sampler_gap_mean"] == pytest.approx(0.65, abs=1e-5)
    assert metrics["sampler_gap_max"] == pytest.approx(1.0, abs=1e-5)
    assert metrics["sampler_logprob_share"] == pytest.approx(2 / 3)
    assert metrics["sampler_correction"] == 0.0 and "tis_weight_mean" not in metrics
    assert metrics["loss"] == pytest.approx(-(1.0 + 1.0 - 1.0) / 3, abs=1e-6)  # unweighted: -mean advantage


def test_the_corrected_update_weights_each_token_by_its_truncated_ratio() -> None:
    metrics = _update(_gap_samples(), correct=True)
    expected = -(math.exp(0.3) + 1.0 - math.exp(-1.0)) / 3
    assert metrics["loss"] == pytest.approx(expected, abs=1e-5)
    assert metrics["tis_weight_mean"] == pytest.approx((math.exp(0.3) + math.exp(-1.0)) / 2, abs=1e-5)
    assert metrics["tis_clipped_share"] == 0.0


def test_weights_above_the_cap_are_clipped_and_counted() -> None:
    metrics = _update(_gap_samples(), correct=True, tis_cap=1.2)
    assert metrics["loss"] == pytest.approx(-(1.2 + 1.0 - math.exp(-1.0)) / 3, abs=1e-5)
    assert metrics["tis_clipped_share"] == pytest.approx(0.5)


def test_samples_without_sampler_log_probs_are_trained_unweighted_and_counted() -> None:
    samples = [*_gap_samples(), Sample([1], [3], 1.0)]
    metrics = _update(samples, correct=True)
    assert metrics["samples_without_sampler_logprobs"] == 1.0
    assert metrics["loss"] == pytest.approx(-(math.exp(0.3) + 1.0 - math.exp(-1.0) + 1.0) / 4, abs=1e-5)
