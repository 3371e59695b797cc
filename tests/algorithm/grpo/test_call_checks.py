"""What the proxy recorded of each call decides how GRPO trains it: the sampler's log-probs follow the call's tokens
into the sample, calls sampled otherwise or served by another agent's adapter leave the loss (counted), and calls
cut by the length limit are masked or given the truncation reward."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Optional

import pytest

from agentlightning.algorithm.grpo.config import GRPOConfig
from agentlightning.algorithm.grpo.learning.samples import build_samples
from agentlightning.algorithm.grpo.rollouts.call_checks import ServedBy
from agentlightning.algorithm.grpo.rollouts.proxy_calls import ProxyCall, ProxyCallIndex, call_record, index_proxy_calls
from agentlightning.algorithm.grpo.rollouts.reading import RolloutData, SkipCounts
from agentlightning.llm_proxy.record import CallRecord
from agentlightning.types import Triplet

SYSTEM = [1, 2, 3]
FIRST_PROMPT, FIRST_RESPONSE = [*SYSTEM, 10], [20, 21]
TOOL = [30, 31]


def _call(prompt: list[int], response: list[int], response_id: str) -> Triplet:
    return Triplet(
        prompt={"token_ids": prompt}, response={"token_ids": response}, metadata={"response_id": response_id}
    )


def _record(response_id: str, prompt: list[int], response: list[int], **fields: Any) -> ProxyCall:
    fields.setdefault("served_model", "policy")
    return ProxyCall(response_id=response_id, prompt_ids=tuple(prompt), response_ids=tuple(response), **fields)


def _rollout(
    name: str,
    reward: float,
    answer: int,
    first: Optional[dict[str, Any]] = None,
    second: Optional[dict[str, Any]] = None,
) -> RolloutData:
    """Two calls of one conversation (a tool call, the tool's result, the answer) and the proxy's records of them."""
    second_prompt = [*FIRST_PROMPT, *FIRST_RESPONSE, *TOOL]
    calls = [_call(FIRST_PROMPT, FIRST_RESPONSE, f"{name}-1"), _call(second_prompt, [answer], f"{name}-2")]
    records = [
        _record(f"{name}-1", FIRST_PROMPT, FIRST_RESPONSE, **{"logprobs": (-0.1, -0.2), **(first or {})}),
        _record(f"{name}-2", second_prompt, [answer], **{"logprobs": (-0.3,), **(second or {})}),
    ]
    rollout: Any = SimpleNamespace(status="succeeded", rollout_id=name)
    return RolloutData(rollout, reward, calls, proxy_calls=ProxyCallIndex(records))


def _build(data: list[RolloutData], skips: Optional[SkipCounts] = None, **settings: Any) -> Any:
    config = GRPOConfig(group_size=2, tasks_per_step=1, **settings)
    return build_samples(data, [0] * len(data), [7], skips if skips is not None else SkipCounts(), config)


def test_sampler_log_probs_follow_the_generated_tokens_of_a_stitched_conversation() -> None:
    built = _build([_rollout("a", 1.0, 40), _rollout("b", 0.0, 41)])
    sample = built.samples[0]
    assert sample.response_ids == [20, 21, 30, 31, 40]
    assert sample.sampler_log_probs == [-0.1, -0.2, None, None, -0.3]  # nothing on the tool's result


def test_transition_samples_carry_their_calls_sampler_log_probs() -> None:
    built = _build([_rollout("a", 1.0, 40), _rollout("b", 0.0, 41)], aggregation="transition")
    assert [s.sampler_log_probs for s in built.samples[:2]] == [[-0.1, -0.2], [-0.3]]


def test_a_call_without_recorded_log_probs_has_none_in_its_sample() -> None:
    built = _build([_rollout("a", 1.0, 40, second={"logprobs": None}), _rollout("b", 0.0, 41)])
    assert built.samples[0].sampler_log_probs == [-0.1, -0.2, None, None, None]


def test_a_call_sampled_at_another_temperature_leaves_the_loss_and_is_counted() -> None:
    skips = SkipCounts()
    built = _build([_rollout("a", 1.0, 40, second={"temperature": 0.3}), _rollout("b", 0.0, 41)], skips)
    assert built.samples[0].loss_mask == [1, 1, 0, 0, 0]  # the first call is still trained, the answer not
    assert built.samples[1].loss_mask == [1, 1, 0, 0, 1]
    assert skips.calls_other_sampling == 1


def test_a_call_with_top_p_is_left_out_and_a_rollout_left_without_trained_calls_makes_no_sample() -> None:
    skips = SkipCounts()
    odd = {"top_p": 0.9}
    built = _build([_rollout("a", 1.0, 40, first=odd, second=odd), _rollout("b", 0.0, 41)], skips)
    assert [s.rollout_id for s in built.samples] == ["b"]
    assert skips.calls_other_sampling == 2


def test_a_call_that_hit_the_length_limit_is_masked_by_default() -> None:
    skips = SkipCounts()
    built = _build([_rollout("a", 1.0, 40, first={"finish_reason": "length"}), _rollout("b", 0.0, 41)], skips)
    assert built.samples[0].loss_mask == [0, 0, 0, 0, 1]
    assert skips.calls_hit_length_limit == 1
    assert built.truncation_rate == pytest.approx(1 / 4)


def test_a_truncated_call_can_give_its_rollout_the_failure_reward_instead() -> None:
    cut = {"finish_reason": "length"}
    data = [_rollout("a", 1.0, 40, second=cut), _rollout("b", 0.0, 41), _rollout("c", 0.5, 42)]
    config = GRPOConfig(group_size=3, tasks_per_step=1, truncated="failure_reward", truncation_reward=-1.0)
    built = build_samples(data, [0, 0, 0], [7], SkipCounts(), config)
    by_rollout = {s.rollout_id: s for s in built.samples}
    assert by_rollout["a"].advantage < 0 < by_rollout["c"].advantage  # "a" now has the lowest reward, -1
    assert by_rollout["a"].loss_mask == [1, 1, 0, 0, 1]  # trained, with the failure's advantage
    assert built.rewards == [1.0, 0.0, 0.5]  # the step's reward mean reports what the rollouts got


def test_a_truncated_call_can_be_kept_and_still_shows_in_the_truncation_rate() -> None:
    skips = SkipCounts()
    data = [_rollout("a", 1.0, 40, first={"finish_reason": "length"}), _rollout("b", 0.0, 41)]
    built = _build(data, skips, truncated="keep")
    assert built.samples[0].loss_mask == [1, 1, 0, 0, 1]
    assert skips.calls_hit_length_limit == 0 and built.truncation_rate == pytest.approx(1 / 4)


def test_truncated_and_its_reward_are_validated() -> None:
    with pytest.raises(ValueError, match="truncated must be 'mask', 'failure_reward' or 'keep'"):
        GRPOConfig(truncated="drop")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="truncation_reward must be a finite number"):
        GRPOConfig(truncation_reward=float("nan"))


def _agent_build(served_model: str, served: ServedBy, skips: SkipCounts) -> Any:
    data = [
        _rollout("a", 1.0, 40, first={"served_model": served_model}, second={"served_model": "solver@step-3"}),
        _rollout("b", 0.0, 41, first={"served_model": "solver@step-3"}, second={"served_model": "solver@step-3"}),
    ]
    config = GRPOConfig(group_size=2, tasks_per_step=1)
    return build_samples(data, [0, 0], [7], skips, config, agent="solver", served=served)


def test_a_call_served_by_another_agents_adapter_is_left_out_and_counted() -> None:
    skips = SkipCounts()
    built = _agent_build("reviewer@step-3", ServedBy("policy"), skips)
    assert built.samples[0].loss_mask == [0, 0, 0, 0, 1]
    assert skips.calls_other_adapter == 1


def test_the_base_model_serves_an_agent_only_before_its_first_adapter() -> None:
    before, after = SkipCounts(), SkipCounts()
    _agent_build("policy", ServedBy("policy", base_allowed=True), before)
    _agent_build("policy", ServedBy("policy", base_allowed=False), after)
    assert (before.calls_other_adapter, after.calls_other_adapter) == (0, 1)


def _proxy_span(finish_reason: str = "stop", **request: Any) -> Any:
    body = {"model": "solver@step-2", "messages": [], "temperature": 0.7, **request}
    record = CallRecord("ro-1", "at-1", "chat", body, "http://up", False, requested_model="solver")
    entries = [{"token": "a", "logprob": -0.5, "bytes": [], "top_logprobs": []}] * 2
    choice = {
        "index": 0,
        "message": {"role": "assistant", "content": "ab"},
        "finish_reason": finish_reason,
        "token_ids": [20, 21],
        "logprobs": {"content": entries},
    }
    record.finish(response={"id": "resp-1", "prompt_token_ids": [1, 2], "choices": [choice]}, status_code=200)
    return record.to_span(1)


def test_the_proxys_span_gives_the_calls_log_probs_adapter_sampling_and_finish_reason() -> None:
    record = call_record(_proxy_span("length", top_k=5))
    assert record == ProxyCall(
        response_id="resp-1",
        prompt_ids=(1, 2),
        response_ids=(20, 21),
        logprobs=(-0.5, -0.5),
        finish_reason="length",
        requested_model="solver",
        served_model="solver@step-2",
        temperature=0.7,
        top_p=None,
        top_k=5,
    )


def test_a_trained_call_finds_its_proxy_record_by_response_id_or_by_its_ids() -> None:
    index = index_proxy_calls([_proxy_span()])
    by_id = index.lookup(_call([9], [9], "resp-1"))
    by_ids = index.lookup(_call([1, 2], [20, 21], "client-side-id"))
    assert by_id is not None and by_ids is by_id
    assert index.lookup(_call([1, 2], [20, 22], "other")) is None


def test_log_probs_that_do_not_cover_every_token_are_not_used() -> None:
    span = _proxy_span()
    attributes = dict(span.attributes)
    attributes["logprobs.content"] = '[{"token": "a", "logprob": -0.5}]'  # one entry for two tokens
    record = call_record(span.model_copy(update={"attributes": attributes}))
    assert record is not None and record.logprobs is None


def test_grpos_proxy_asks_for_the_samplers_log_probs_on_every_call() -> None:
    from agentlightning.algorithm.grpo.serving.routing import start_proxy
    from agentlightning.store import InMemoryLightningStore

    serving: Any = SimpleNamespace(model_name="policy", endpoint="http://127.0.0.1:9/v1")
    proxy, own = start_proxy(None, InMemoryLightningStore(), serving, None, {})
    try:
        assert own and proxy.request_logprobs
    finally:
        proxy.stop()
