"""Rollouts and triplets into VERL training rows: ids, masks, rewards, padding, truncation (no verl, no GPU)."""

from __future__ import annotations

import random
import subprocess
import sys

import pytest

from agentlightning.algorithm.verl.batch import (
    MissingTokenIdsError,
    RolloutTrace,
    build_batch,
    final_reward,
    left_pad,
    right_pad,
    rows_to_keep,
)
from agentlightning.types import Triplet

PAD = 0


def call(prompt: list[int], response: list[int], reward: float | None = None) -> Triplet:
    return Triplet(prompt={"token_ids": prompt}, response={"token_ids": response}, reward=reward)


def rollout(rollout_id: str, *triplets: Triplet, data_id: str = "d1") -> RolloutTrace:
    return RolloutTrace(rollout_id=rollout_id, data_id=data_id, triplets=list(triplets))


def test_padding_helpers_pad_prompts_left_and_responses_right() -> None:
    assert left_pad([5, 6], 4, PAD) == ([0, 0, 5, 6], [0, 0, 1, 1])
    assert right_pad([5, 6], 4, PAD) == ([5, 6, 0, 0], [1, 1, 0, 0])
    with pytest.raises(ValueError):
        left_pad([1, 2, 3], 2, PAD)


def test_transition_level_makes_one_row_per_call_with_the_final_reward_on_the_last_response_token() -> None:
    batch = build_batch(
        [rollout("r1", call([11, 12], [21, 22]), call([11, 12, 21, 22, 13], [23], reward=1.0))],
        max_prompt_length=5,
        max_response_length=3,
        pad_token_id=PAD,
    )
    assert batch.prompts == [[0, 0, 0, 11, 12], [11, 12, 21, 22, 13]]
    assert batch.responses == [[21, 22, 0], [23, 0, 0]]
    assert batch.input_ids == [[0, 0, 0, 11, 12, 21, 22, 0], [11, 12, 21, 22, 13, 23, 0, 0]]
    assert batch.attention_mask == [[0, 0, 0, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1, 0, 0]]
    assert batch.position_ids == [[0, 0, 0, 0, 1, 2, 3, 3], [0, 1, 2, 3, 4, 5, 5, 5]]
    assert batch.response_mask == [[1, 1, 0], [1, 0, 0]]
    # Both calls share the rollout's final reward (the last non-None one), at their last response token.
    assert batch.token_level_scores == [[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]]
    assert batch.is_drop_mask == [False, False]
    assert batch.uid == ["d1", "d1"]
    assert batch.rollout_ids == ["r1", "r1"]
    assert batch.turn_indices == [[0], [1]]
    assert batch.metrics["training/n_triplets"] == 2
    assert batch.metrics["training/reward"] == 1.0


def test_trajectory_level_merges_calls_whose_prompt_extends_the_previous_context() -> None:
    # Call 2's prompt = call 1's prompt + completion + a tool result [31, 32]; the tool result is context (mask 0).
    batch = build_batch(
        [rollout("r1", call([11, 12], [21, 22]), call([11, 12, 21, 22, 31, 32], [23, 24], reward=0.5))],
        max_prompt_length=3,
        max_response_length=8,
        pad_token_id=PAD,
        level="trajectory",
    )
    assert batch.prompts == [[0, 11, 12]]
    assert batch.responses == [[21, 22, 31, 32, 23, 24, 0, 0]]
    assert batch.response_mask == [[1, 1, 0, 0, 1, 1, 0, 0]]
    assert batch.token_level_scores == [[0.0, 0.0, 0.0, 0.0, 0.0, 0.5, 0.0, 0.0]]
    assert batch.turn_indices == [[0, 1]]
    assert batch.metrics["training/n_unmerged_rollouts"] == 0


def test_trajectory_level_merges_a_call_whose_prompt_adds_nothing() -> None:
    batch = build_batch(
        [rollout("r1", call([1], [2]), call([1, 2], [3], reward=1.0))],
        max_prompt_length=1,
        max_response_length=3,
        pad_token_id=PAD,
        level="trajectory",
    )
    assert batch.responses == [[2, 3, 0]]
    assert batch.response_mask == [[1, 1, 0]]


def test_trajectory_level_starts_a_new_row_when_the_prefix_does_not_match() -> None:
    # The second prompt re-tokenized the history ([21, 99] instead of [21, 22]): no lossy splice, a new row.
    batch = build_batch(
        [rollout("r1", call([11], [21, 22]), call([11, 21, 99, 31], [23], reward=1.0))],
        max_prompt_length=4,
        max_response_length=2,
        pad_token_id=PAD,
        level="trajectory",
    )
    assert batch.prompts == [[0, 0, 0, 11], [11, 21, 99, 31]]
    assert batch.responses == [[21, 22], [23, 0]]
    assert batch.response_mask == [[1, 1], [1, 0]]
    assert batch.token_level_scores == [[0.0, 1.0], [1.0, 0.0]]
    assert batch.turn_indices == [[0], [1]]
    assert batch.metrics["training/n_unmerged_rollouts"] == 1


def test_reward_sits_on_the_last_trained_token_when_truncation_ends_in_context() -> None:
    # Merged response [21, 31, 32, 23] cut to 3 tokens ends inside the tool result: the reward goes on token 21.
    batch = build_batch(
        [rollout("r1", call([11], [21]), call([11, 21, 31, 32], [23], reward=2.0))],
        max_prompt_length=1,
        max_response_length=3,
        pad_token_id=PAD,
        level="trajectory",
    )
    assert batch.responses == [[21, 31, 32]]
    assert batch.response_mask == [[1, 0, 0]]
    assert batch.token_level_scores == [[2.0, 0.0, 0.0]]
    assert batch.metrics["training/n_truncated_triplets"] == 1


def test_long_responses_are_cut_at_the_end_and_counted() -> None:
    batch = build_batch(
        [rollout("r1", call([1], [2, 3, 4, 5], reward=1.0))], max_prompt_length=1, max_response_length=2, pad_token_id=9
    )
    assert batch.responses == [[2, 3]]
    assert batch.token_level_scores == [[0.0, 1.0]]
    assert batch.metrics["training/n_truncated_triplets"] == 1


def test_long_prompts_keep_their_last_tokens_and_are_flagged_for_dropping() -> None:
    batch = build_batch(
        [rollout("r1", call([1, 2, 3, 4], [5], reward=1.0)), rollout("r2", call([6], [7], reward=0.0))],
        max_prompt_length=2,
        max_response_length=1,
        pad_token_id=PAD,
    )
    assert batch.prompts == [[3, 4], [0, 6]]
    assert batch.is_drop_mask == [True, False]
    assert batch.metrics["training/n_triplets_prompt_too_long"] == 1


def test_missing_reward_is_filled_and_not_counted_as_rewarded() -> None:
    batch = build_batch(
        [rollout("r1", call([1], [2])), rollout("r2", call([3], [4], reward=1.0))],
        max_prompt_length=1,
        max_response_length=1,
        pad_token_id=PAD,
        reward_fillna_value=-1.0,
    )
    assert batch.token_level_scores == [[-1.0], [1.0]]
    assert batch.metrics["training/n_rollouts_w_reward"] == 1
    assert batch.metrics["training/reward"] == 1.0


def test_an_explicit_final_reward_wins_over_triplet_rewards() -> None:
    trace = RolloutTrace("r1", "d1", [call([1], [2], reward=0.2)], final_reward=0.9)
    batch = build_batch([trace], max_prompt_length=1, max_response_length=1, pad_token_id=PAD)
    assert batch.token_level_scores == [[0.9]]


def test_final_reward_is_the_last_non_none_reward() -> None:
    assert final_reward([call([1], [2], 0.1), call([1], [2], 0.7), call([1], [2])]) == 0.7
    assert final_reward([call([1], [2])]) is None


def test_non_finite_rewards_skip_the_rollout_and_are_counted() -> None:
    batch = build_batch(
        [rollout("r1", call([1], [2], reward=float("nan"))), rollout("r2", call([3], [4], reward=1.0))],
        max_prompt_length=1,
        max_response_length=1,
        pad_token_id=PAD,
    )
    assert batch.rollout_ids == ["r2"]
    assert batch.metrics["training/n_rollouts_bad_reward"] == 1


def test_rollouts_without_token_ids_are_skipped_and_counted(caplog: pytest.LogCaptureFixture) -> None:
    no_ids = RolloutTrace("r1", "d1", [Triplet(prompt={"text": "hi"}, response={"token_ids": []}, reward=1.0)])
    batch = build_batch(
        [no_ids, rollout("r2", call([3], [4], reward=1.0))], max_prompt_length=1, max_response_length=1, pad_token_id=0
    )
    assert batch.rollout_ids == ["r2"]
    assert batch.metrics["training/n_rollouts_missing_token_ids"] == 1
    assert "Rollout r1, LLM call 0: the prompt has no token ids" in caplog.text


def test_a_batch_without_any_token_ids_is_a_clear_error() -> None:
    no_ids = RolloutTrace("r1", "d1", [Triplet(prompt={"token_ids": [1]}, response={}, reward=1.0)])
    with pytest.raises(MissingTokenIdsError, match=r"the response has no token ids.*LLM proxy"):
        build_batch([no_ids], max_prompt_length=1, max_response_length=1, pad_token_id=PAD)


def test_invalid_token_ids_are_named() -> None:
    bad = RolloutTrace("r1", "d1", [Triplet(prompt={"token_ids": [1, "x"]}, response={"token_ids": [2]})])
    with pytest.raises(MissingTokenIdsError, match="invalid token ids"):
        build_batch([bad], max_prompt_length=1, max_response_length=1, pad_token_id=PAD)


def test_rollouts_without_triplets_count_as_rollouts_but_not_as_traced() -> None:
    batch = build_batch(
        [rollout("r1"), rollout("r2", call([1], [2], reward=1.0))],
        max_prompt_length=1,
        max_response_length=1,
        pad_token_id=0,
    )
    assert batch.metrics["training/n_rollouts"] == 2
    assert batch.metrics["training/n_rollouts_w_trace"] == 1


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"level": "episode"}, "trace_aggregator.level"),
        ({"max_prompt_length": 0}, "max_prompt_length"),
        ({"max_response_length": 1.5}, "max_response_length"),
    ],
)
def test_bad_settings_are_rejected(kwargs: dict[str, object], message: str) -> None:
    settings: dict[str, object] = {"max_prompt_length": 1, "max_response_length": 1, "pad_token_id": 0, **kwargs}
    with pytest.raises(ValueError, match=message):
        build_batch([rollout("r1", call([1], [2]))], **settings)  # type: ignore[arg-type]


def test_rows_to_keep_drops_flagged_rows_then_thins_to_a_multiple() -> None:
    assert rows_to_keep([False, True, False, False], 3) == [0, 2, 3]
    kept = rows_to_keep([False] * 5, 2, random.Random(0))
    assert len(kept) == 4 and kept == sorted(kept) and set(kept) <= set(range(5))
    with pytest.raises(ValueError):
        rows_to_keep([False], 0)


def test_tensors_have_the_expected_dtypes_and_values() -> None:
    torch = pytest.importorskip("torch")
    batch = build_batch(
        [rollout("r1", call([1], [2, 3], reward=1.0))], max_prompt_length=2, max_response_length=2, pad_token_id=0
    )
    tensors = batch.to_tensors()
    assert tensors["input_ids"].dtype == torch.long
    assert tensors["input_ids"].tolist() == [[0, 1, 2, 3]]
    assert tensors["token_level_scores"].tolist() == [[0.0, 1.0]]
    assert tensors["is_drop_mask"].tolist() == [False]


def test_the_conversion_does_not_import_verl() -> None:
    code = (
        "import sys; from agentlightning.algorithm.verl.batch import RolloutTrace, build_batch; "
        "from agentlightning.types import Triplet; "
        "t = Triplet(prompt={'token_ids': [1]}, response={'token_ids': [2]}, reward=1.0); "
        "build_batch([RolloutTrace('r', 'd', [t])], max_prompt_length=1, max_response_length=1, pad_token_id=0); "
        "print('verl' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


def test_rollout_log_probs_lie_on_generated_tokens_with_zero_on_context_and_padding() -> None:
    trace = RolloutTrace(
        "r1",
        "d1",
        [call([11], [21, 22]), call([11, 21, 22, 31], [23], reward=1.0)],
        logprobs=[[-0.5, -0.25], [-0.125]],
    )
    batch = build_batch([trace], max_prompt_length=1, max_response_length=6, pad_token_id=PAD, level="trajectory")
    assert batch.rollout_log_probs == [[-0.5, -0.25, 0.0, -0.125, 0.0, 0.0]]
    assert batch.rollout_log_probs_mask == [[1, 1, 0, 1, 0, 0]]
    assert batch.metrics["training/rollout_log_probs_share"] == 1.0


def test_a_call_without_recorded_log_probs_gets_zero_and_is_not_marked() -> None:
    trace = RolloutTrace("r1", "d1", [call([1], [2, 3]), call([4], [5], reward=1.0)], logprobs=[None, [-0.5]])
    batch = build_batch([trace], max_prompt_length=1, max_response_length=2, pad_token_id=PAD)
    assert batch.rollout_log_probs == [[0.0, 0.0], [-0.5, 0.0]]
    assert batch.rollout_log_probs_mask == [[0, 0], [1, 0]]
    assert batch.metrics["training/rollout_log_probs_share"] == pytest.approx(1 / 3)


def test_a_triplets_own_openai_logprobs_are_used_when_the_trace_has_none() -> None:
    triplet = Triplet(
        prompt={"token_ids": [1]},
        response={"token_ids": [2], "logprobs": [{"token": "x", "logprob": -0.75}]},
        reward=1.0,
    )
    batch = build_batch([rollout("r1", triplet)], max_prompt_length=1, max_response_length=1, pad_token_id=PAD)
    assert batch.rollout_log_probs == [[-0.75]] and batch.rollout_log_probs_mask == [[1]]


def test_rows_alone_in_their_group_are_skipped_and_counted_when_asked() -> None:
    traces = [
        rollout("r1", call([1], [2], reward=1.0), data_id="a"),
        rollout("r2", call([1], [3], reward=0.0), data_id="a"),
        rollout("r3", call([4], [5], reward=1.0), data_id="b"),  # its group has one row: no advantage to compare
    ]
    kept = build_batch(
        traces, max_prompt_length=1, max_response_length=1, pad_token_id=PAD, skip_single_row_groups=True
    )
    assert kept.uid == ["a", "a"]
    assert kept.metrics["training/n_triplets_single_row_group"] == 1
    everything = build_batch(traces, max_prompt_length=1, max_response_length=1, pad_token_id=PAD)
    assert everything.uid == ["a", "a", "b"]


def test_tensors_carry_rollout_log_probs_only_when_some_were_recorded() -> None:
    torch = pytest.importorskip("torch")
    with_lp = RolloutTrace("r1", "d1", [call([1], [2, 3], reward=1.0)], logprobs=[[-0.5, -1.5]])
    tensors = build_batch([with_lp], max_prompt_length=1, max_response_length=3, pad_token_id=PAD).to_tensors()
    assert tensors["rollout_log_probs"].dtype == torch.float32
    assert tensors["rollout_log_probs"].tolist() == [[-0.5, -1.5, 0.0]]
    assert tensors["rollout_log_probs_mask"].tolist() == [[1, 1, 0]]
    without = build_batch(
        [rollout("r1", call([1], [2], reward=1.0))], max_prompt_length=1, max_response_length=1, pad_token_id=PAD
    )
    assert "rollout_log_probs" not in without.to_tensors()


def test_missing_rollout_log_probs_are_filled_with_the_old_ones_for_a_weight_of_one() -> None:
    torch = pytest.importorskip("torch")
    from agentlightning.algorithm.verl.batch import fill_missing_rollout_log_probs

    filled = fill_missing_rollout_log_probs(
        torch.tensor([[-0.5, 0.0, 0.0]]), torch.tensor([[1, 0, 0]]), torch.tensor([[-0.4, -2.0, -3.0]])
    )
    assert filled.tolist() == [[-0.5, -2.0, -3.0]]
