"""From finished rollouts to VERL training rows: token ids, masks, rewards, padding and truncation.

Pure Python (no verl, no torch at import): the rules live here as functions over plain lists, so they are tested
against hand-computed values without a GPU. `VerlBatch.to_tensors()` imports torch and `VerlBatch.to_data_proto()`
imports verl, each only when called.

Two aggregation levels (config `agentlightning.trace_aggregator.level`):

- `transition`: one row per LLM call (triplet). The prompt is the call's prompt ids, the response its completion
  ids; every response token is trained.
- `trajectory`: the calls of one rollout are merged into one row while each call's prompt starts with the previous
  call's prompt + completion (exact token-prefix match). The tokens a later prompt adds (tool results, user turns)
  become part of the response with response mask 0 (context, not trained); completions have mask 1. When a prompt
  does not extend the previous context (the chat template re-rendered history differently, or the agent dropped
  turns), a new row starts at that call; nothing is spliced lossily.

Every row of a rollout carries the rollout's outcome (`RolloutTrace.final_reward`: the daemon gives its last reward
span, see `agentlightning.adapter.rewards`; when it is None, the last non-None triplet reward, else
`reward_fillna_value`), placed on the last trained response token of the row (`token_level_scores`). Prompts are
left-padded and responses right-padded to the configured lengths; a prompt longer than its limit keeps its last
tokens and flags the row in `is_drop_mask` (the trainer removes such rows after computing advantages, so group
statistics still see them); a response longer than its limit is cut at the end and counted.

A rollout whose triplets lack token ids cannot be trained without guessing a tokenization, so it is skipped and
counted (`training/n_rollouts_missing_token_ids`); when that leaves nothing to train on, `MissingTokenIdsError`
says how to get token ids recorded.

The sampler's log-prob of each generated token (recorded by the LLM proxy, `RolloutTrace.logprobs`) follows the
token into `rollout_log_probs` (verl's key for rollout correction), 0 on the tokens the model did not generate and on
calls without recorded log-probs; `rollout_log_probs_mask` says which positions hold one
(`training/rollout_log_probs_share`: trained tokens with one). With `skip_single_row_groups`, rows alone in their
group (data id) are left out (`training/n_triplets_single_row_group`): group-normalised advantages need two.
"""

from __future__ import annotations

import logging
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Optional

from agentlightning.types import Triplet

__all__ = [
    "AggregationLevel",
    "MissingTokenIdsError",
    "RolloutTrace",
    "TrainingRow",
    "VerlBatch",
    "add_rollout_log_probs",
    "build_batch",
    "fill_missing_rollout_log_probs",
    "final_reward",
    "left_pad",
    "right_pad",
    "rows_to_keep",
    "token_ids_of",
    "trajectory_rows",
    "transition_rows",
    "turn_log_probs",
]

logger = logging.getLogger(__name__)

AggregationLevel = Literal["transition", "trajectory"]
LEVELS: tuple[str, ...] = ("transition", "trajectory")

_HOW_TO_GET_IDS = (
    "Token ids are recorded when the agent's model calls go through the LLM proxy to a server that returns them "
    "(vLLM with return_token_ids, or `agl serve`), or when client-side tracing captures `prompt_token_ids` / "
    "`response_token_ids`; text is never re-tokenized."
)


class MissingTokenIdsError(ValueError):
    """A rollout (or a whole batch) has no usable prompt/response token ids to train on."""


@dataclass
class RolloutTrace:
    """What the trainer needs of one finished rollout: its ids, its triplets and its final reward.

    `data_id` groups the rollouts of one dataset sample (GRPO normalises advantages within a group).
    """

    rollout_id: str
    data_id: str
    triplets: list[Triplet]
    final_reward: Optional[float] = None
    logprobs: Optional[list[Optional[Sequence[float]]]] = None  # per triplet: the sampler's log-prob of each token


@dataclass
class TrainingRow:
    """One unpadded training row: prompt ids, response ids and the response mask (1 = trained, 0 = context)."""

    prompt_ids: list[int]
    response_ids: list[int]
    response_mask: list[int]
    reward: float
    rollout_id: str
    data_id: str
    turn_indices: list[int]
    rollout_log_probs: list[Optional[float]] = field(default_factory=list)  # per response id (None: not recorded)


def _id_list(value: Any) -> Optional[list[int]]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        return None
    ids: list[int] = []
    for item in value:  # pyright: ignore[reportUnknownVariableType]
        if isinstance(item, bool) or not isinstance(item, int) or item < 0:
            return None
        ids.append(item)
    return ids


def token_ids_of(triplet: Triplet, rollout_id: str, turn: int) -> tuple[list[int], list[int]]:
    """The (prompt ids, response ids) of a triplet (`prompt["token_ids"]`, `response["token_ids"]`).

    Raises:
        MissingTokenIdsError: a side has no ids, an empty list, or something other than non-negative integers.
    """
    sides: list[list[int]] = []
    for side, part in (("prompt", triplet.prompt), ("response", triplet.response)):
        raw = part.get("token_ids") if isinstance(part, Mapping) else None
        ids = _id_list(raw)
        if not ids:
            problem = "has no token ids" if raw is None or raw == [] else f"has invalid token ids {str(raw)[:80]}"
            raise MissingTokenIdsError(f"Rollout {rollout_id}, LLM call {turn}: the {side} {problem}")
        sides.append(ids)
    return sides[0], sides[1]


def final_reward(triplets: Sequence[Triplet]) -> Optional[float]:
    """The rollout's reward: the last non-None triplet reward (None when no call got one)."""
    for triplet in reversed(triplets):
        if triplet.reward is not None:
            return float(triplet.reward)
    return None


def left_pad(ids: Sequence[int], length: int, pad: int) -> tuple[list[int], list[int]]:
    """`ids` padded on the left to `length` (must fit), with its attention mask."""
    if len(ids) > length:
        raise ValueError(f"{len(ids)} ids do not fit in {length}")
    padding = length - len(ids)
    return [pad] * padding + list(ids), [0] * padding + [1] * len(ids)


def right_pad(ids: Sequence[int], length: int, pad: int) -> tuple[list[int], list[int]]:
    """`ids` padded on the right to `length` (must fit), with its attention mask."""
    if len(ids) > length:
        raise ValueError(f"{len(ids)} ids do not fit in {length}")
    padding = length - len(ids)
    return list(ids) + [pad] * padding, [1] * len(ids) + [0] * padding


def transition_rows(
    trace: RolloutTrace, turns: Sequence[tuple[list[int], list[int]]], reward: float
) -> list[TrainingRow]:
    """One row per LLM call; every response token is trained."""
    return [
        TrainingRow(list(prompt), list(response), [1] * len(response), reward, trace.rollout_id, trace.data_id, [i])
        for i, (prompt, response) in enumerate(turns)
    ]


def trajectory_rows(
    trace: RolloutTrace, turns: Sequence[tuple[list[int], list[int]]], reward: float
) -> list[TrainingRow]:
    """Calls merged into rows while each prompt extends the previous prompt + response (see the module docstring)."""
    rows: list[TrainingRow] = []
    context: list[int] = []
    for index, (prompt, response) in enumerate(turns):
        current = rows[-1] if rows else None
        if current is not None and len(prompt) >= len(context) and prompt[: len(context)] == context:
            added = prompt[len(context) :]
            current.response_ids += added + response
            current.response_mask += [0] * len(added) + [1] * len(response)
            current.turn_indices.append(index)
        else:
            rows.append(
                TrainingRow(
                    list(prompt), list(response), [1] * len(response), reward, trace.rollout_id, trace.data_id, [index]
                )
            )
        context = list(prompt) + list(response)
    return rows


@dataclass
class VerlBatch:
    """Padded training rows as nested lists, in the layout VERL's PPO trainer expects.

    Shapes: `prompts` (B, P) left-padded; `responses`, `response_mask`, `token_level_scores` (B, R) right-padded;
    `input_ids`, `attention_mask`, `position_ids` (B, P + R). `uid` is the data id (GRPO's group key).
    """

    prompts: list[list[int]] = field(default_factory=list)
    responses: list[list[int]] = field(default_factory=list)
    input_ids: list[list[int]] = field(default_factory=list)
    attention_mask: list[list[int]] = field(default_factory=list)
    position_ids: list[list[int]] = field(default_factory=list)
    response_mask: list[list[int]] = field(default_factory=list)
    token_level_scores: list[list[float]] = field(default_factory=list)
    is_drop_mask: list[bool] = field(default_factory=list)
    rollout_log_probs: list[list[float]] = field(default_factory=list)
    rollout_log_probs_mask: list[list[int]] = field(default_factory=list)
    uid: list[str] = field(default_factory=list)
    rollout_ids: list[str] = field(default_factory=list)
    turn_indices: list[list[int]] = field(default_factory=list)
    metrics: dict[str, float] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.prompts)

    @property
    def has_rollout_log_probs(self) -> bool:
        """True when some row holds a sampler log-prob."""
        return any(any(row) for row in self.rollout_log_probs_mask)

    def to_tensors(self, device: Any = None) -> dict[str, Any]:
        """The tensor part as torch tensors (int64 ids and masks, bool drop mask, float32 scores), with float32
        `rollout_log_probs` and their int64 `rollout_log_probs_mask` when some row has sampler log-probs."""
        import torch

        long = {
            name: torch.tensor(getattr(self, name), dtype=torch.long, device=device)
            for name in ("prompts", "responses", "input_ids", "attention_mask", "position_ids", "response_mask")
        }
        tensors = {
            **long,
            "token_level_scores": torch.tensor(self.token_level_scores, dtype=torch.float32, device=device),
            "is_drop_mask": torch.tensor(self.is_drop_mask, dtype=torch.bool, device=device),
        }
        if self.has_rollout_log_probs:
            tensors["rollout_log_probs"] = torch.tensor(self.rollout_log_probs, dtype=torch.float32, device=device)
            tensors["rollout_log_probs_mask"] = torch.tensor(
                self.rollout_log_probs_mask, dtype=torch.long, device=device
            )
        return tensors

    def to_data_proto(self, device: Any = None) -> Any:
        """A `verl.DataProto` with the tensors above and non-tensor `uid`, `data_id_list`, `rollout_id_list`,
        `turn_index_list` (needs the `verl` extra)."""
        import numpy as np
        from tensordict import TensorDict  # type: ignore[import-not-found]
        from verl import DataProto  # type: ignore[import-not-found]

        tensors = TensorDict(self.to_tensors(device), batch_size=len(self))  # type: ignore[reportUnknownVariableType]
        turns = np.empty(len(self), dtype=object)
        turns[:] = [list(t) for t in self.turn_indices]
        non_tensor = {
            "uid": np.array(self.uid, dtype=object),
            "data_id_list": np.array(self.uid, dtype=object),
            "rollout_id_list": np.array(self.rollout_ids, dtype=object),
            "turn_index_list": turns,
        }
        return DataProto(batch=tensors, non_tensor_batch=non_tensor)  # type: ignore[reportUnknownVariableType]


def build_batch(
    rollouts: Sequence[RolloutTrace],
    *,
    max_prompt_length: int,
    max_response_length: int,
    pad_token_id: int,
    level: AggregationLevel = "transition",
    reward_fillna_value: float = 0.0,
    skip_single_row_groups: bool = False,
) -> VerlBatch:
    """Turn finished rollouts into one padded batch (see the module docstring for the rules).

    Metrics (VERL names): `training/reward` (mean final reward over rollouts with a usable reward),
    `training/n_rollouts`, `training/n_rollouts_w_trace`, `training/n_rollouts_w_reward`,
    `training/n_rollouts_missing_token_ids`, `training/n_rollouts_bad_reward`, `training/n_triplets` (rows),
    `training/n_truncated_triplets`, `training/n_triplets_prompt_too_long`, `training/n_triplets_single_row_group`,
    `training/rollout_log_probs_share`, and for the trajectory level `training/n_unmerged_rollouts` (rollouts that
    needed more than one row).

    Raises:
        ValueError: bad lengths or level.
        MissingTokenIdsError: rollouts had triplets but none of them had token ids.
    """
    if level not in LEVELS:
        raise ValueError(f"trace_aggregator.level must be one of {LEVELS}, got {level!r}")
    for name, value in (("max_prompt_length", max_prompt_length), ("max_response_length", max_response_length)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if not math.isfinite(reward_fillna_value):
        raise ValueError(f"reward_fillna_value must be finite, got {reward_fillna_value}")

    rows: list[TrainingRow] = []
    rewards: list[float] = []
    with_trace = with_reward = missing_ids = bad_reward = unmerged = 0
    missing_examples: list[str] = []
    for trace in rollouts:
        if not trace.triplets:
            logger.warning("Rollout %s has no LLM calls (triplets); nothing to train on", trace.rollout_id)
            continue
        with_trace += 1
        try:
            turns = [token_ids_of(t, trace.rollout_id, i) for i, t in enumerate(trace.triplets)]
        except MissingTokenIdsError as exc:
            missing_ids += 1
            if len(missing_examples) < 3:
                missing_examples.append(str(exc))
            continue
        reward = trace.final_reward if trace.final_reward is not None else final_reward(trace.triplets)
        if reward is not None and not math.isfinite(reward):
            bad_reward += 1
            logger.warning("Rollout %s has a non-finite reward (%s); skipped", trace.rollout_id, reward)
            continue
        if reward is not None:
            with_reward += 1
            rewards.append(reward)
        value = reward if reward is not None else reward_fillna_value
        made = transition_rows(trace, turns, value) if level == "transition" else trajectory_rows(trace, turns, value)
        add_rollout_log_probs(made, turns, turn_log_probs(trace))
        unmerged += int(len(made) > 1)
        rows.extend(made)

    if missing_ids:
        logger.warning(
            "%d of %d rollouts skipped because LLM calls lack token ids, e.g. %s. %s",
            missing_ids,
            with_trace,
            "; ".join(missing_examples),
            _HOW_TO_GET_IDS,
        )
    if not rows and missing_ids:
        raise MissingTokenIdsError(
            f"No rollout of this batch can be trained: {missing_ids} rollouts have LLM calls without token ids "
            f"(e.g. {missing_examples[0]}). {_HOW_TO_GET_IDS}"
        )

    lone = 0
    if skip_single_row_groups:
        rows, lone = _without_single_row_groups(rows)
    batch = VerlBatch()
    truncated = too_long = 0
    trained = with_log_probs = 0
    for row in rows:
        prompt = row.prompt_ids
        drop = len(prompt) > max_prompt_length
        if drop:
            too_long += 1
            prompt = prompt[-max_prompt_length:]
        response, mask = row.response_ids, row.response_mask
        if len(response) > max_response_length:
            truncated += 1
            response, mask = response[:max_response_length], mask[:max_response_length]
        prompt_ids, prompt_attention = left_pad(prompt, max_prompt_length, pad_token_id)
        response_ids, response_attention = right_pad(response, max_response_length, pad_token_id)
        response_mask = mask + [0] * (max_response_length - len(mask))
        log_probs = (row.rollout_log_probs or [None] * len(row.response_ids))[: len(response)]
        log_probs = log_probs + [None] * (max_response_length - len(log_probs))
        trained += sum(response_mask)
        with_log_probs += sum(
            1 for bit, value in zip(response_mask, log_probs, strict=True) if bit and value is not None
        )
        attention = prompt_attention + response_attention
        positions: list[int] = []
        running = 0
        for bit in attention:
            running += bit
            positions.append(max(running - 1, 0))
        scores = [0.0] * max_response_length
        last_trained = max(i for i, bit in enumerate(response_mask) if bit)  # the first completion is never empty
        scores[last_trained] = row.reward
        batch.prompts.append(prompt_ids)
        batch.responses.append(response_ids)
        batch.input_ids.append(prompt_ids + response_ids)
        batch.attention_mask.append(attention)
        batch.position_ids.append(positions)
        batch.response_mask.append(response_mask)
        batch.token_level_scores.append(scores)
        batch.is_drop_mask.append(drop)
        batch.rollout_log_probs.append([0.0 if value is None else value for value in log_probs])
        batch.rollout_log_probs_mask.append([0 if value is None else 1 for value in log_probs])
        batch.uid.append(row.data_id)
        batch.rollout_ids.append(row.rollout_id)
        batch.turn_indices.append(list(row.turn_indices))

    batch.metrics = {
        "training/reward": sum(rewards) / len(rewards) if rewards else 0.0,
        "training/n_rollouts": float(len(rollouts)),
        "training/n_rollouts_w_trace": float(with_trace),
        "training/n_rollouts_w_reward": float(with_reward),
        "training/n_rollouts_missing_token_ids": float(missing_ids),
        "training/n_rollouts_bad_reward": float(bad_reward),
        "training/n_triplets": float(len(batch)),
        "training/n_truncated_triplets": float(truncated),
        "training/n_triplets_prompt_too_long": float(too_long),
        "training/n_triplets_single_row_group": float(lone),
        "training/rollout_log_probs_share": with_log_probs / trained if trained else 0.0,
    }
    if level == "trajectory":
        batch.metrics["training/n_unmerged_rollouts"] = float(unmerged)
    return batch


def turn_log_probs(trace: RolloutTrace) -> list[Optional[Sequence[float]]]:
    """The sampler's log-probs of each call of `trace`: `trace.logprobs` (from the proxy's spans), else those its
    triplet carries (`response["logprobs"]`, OpenAI's `content` entries); None where a call has none covering every
    token."""
    from agentlightning.algorithm.grpo.rollouts.proxy_calls import logprob_values

    given = list(trace.logprobs or [])
    result: list[Optional[Sequence[float]]] = []
    for index, triplet in enumerate(trace.triplets):
        response = triplet.response.get("token_ids") or []
        values = given[index] if index < len(given) else None
        if values is None:
            values = logprob_values(triplet.response.get("logprobs"), len(response))
        result.append(list(values) if values is not None and len(values) == len(response) else None)
    return result


def add_rollout_log_probs(
    rows: Sequence[TrainingRow],
    turns: Sequence[tuple[list[int], list[int]]],
    log_probs: Sequence[Optional[Sequence[float]]],
) -> None:
    """Lay each call's sampler log-probs out like its row's response ids: on the call's generated tokens, None on
    the context between calls and on calls without log-probs (rows as `transition_rows` / `trajectory_rows` made
    them from `turns`)."""
    for row in rows:
        values: list[Optional[float]] = []
        context: Optional[list[int]] = None
        for turn in row.turn_indices:
            prompt, response = turns[turn]
            if context is not None:
                values.extend([None] * (len(prompt) - len(context)))
            call = log_probs[turn] if turn < len(log_probs) else None
            values.extend(list(call) if call is not None else [None] * len(response))
            context = list(prompt) + list(response)
        row.rollout_log_probs = values


def _without_single_row_groups(rows: list[TrainingRow]) -> tuple[list[TrainingRow], int]:
    """`rows` without those alone in their group (data id), and how many those were."""
    sizes: dict[str, int] = {}
    for row in rows:
        sizes[row.data_id] = sizes.get(row.data_id, 0) + 1
    kept = [row for row in rows if sizes[row.data_id] > 1]
    return kept, len(rows) - len(kept)


def fill_missing_rollout_log_probs(rollout_log_probs: Any, present: Any, old_log_probs: Any) -> Any:
    """`rollout_log_probs` (a tensor) with the positions `present` marks 0 replaced by `old_log_probs`: a token
    whose sampler log-prob was not recorded gets importance weight 1 in verl's rollout correction instead of a ratio
    against 0."""
    return rollout_log_probs.where(present.bool(), old_log_probs.to(rollout_log_probs.dtype))


def rows_to_keep(is_drop_mask: Sequence[bool], multiple: int, rng: Optional[random.Random] = None) -> list[int]:
    """Indices of the rows to train on: rows not flagged for dropping, randomly thinned to a multiple of `multiple`
    (the PPO mini-batch size), in their original order."""
    if multiple < 1:
        raise ValueError(f"multiple must be at least 1, got {multiple}")
    kept = [index for index, drop in enumerate(is_drop_mask) if not drop]
    excess = len(kept) % multiple
    if excess:
        removed = set((rng or random).sample(kept, excess))
        kept = [index for index in kept if index not in removed]
    return kept
