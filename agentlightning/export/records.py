"""What one rollout becomes in an export: its calls as SFT or RL records (whole conversations or single calls).

Pure functions over `ExportedRollout` (a rollout's identifiers, final reward and selected LLM calls with exact token
ids); no store access. A *conversation* is a run of calls whose prompt ids extend each other, stitched by
`agentlightning.adapter.trajectory.stitch_calls`: one token sequence whose mask covers only the tokens the model
generated. Its messages are those of its last call (that call's prompt holds the whole history) followed by the
last completion. Every record of a kind has the same columns (see `SFT_COLUMNS`, `RL_COLUMNS`), so JSON Lines and
Parquet exports load into the same table.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Optional

from agentlightning.adapter.messages import openai_tool_calls
from agentlightning.adapter.trajectory import StitchedSequence, StitchReport, call_ids, stitch_calls
from agentlightning.types import Triplet

__all__ = [
    "RL_COLUMNS",
    "SFT_COLUMNS",
    "ExportedRollout",
    "Unit",
    "call_ids",
    "chat_messages",
    "group_key",
    "rl_records",
    "sft_records",
    "tools_json",
]

Unit = Literal["conversation", "call"]

Record = dict[str, Any]

# Columns of every record, in order; the Parquet schemas (writers.py) follow them.
_COMMON = ["rollout_id", "attempt_id", "resources_id", "agent_name", "reward", "group", "calls", "drifted_calls"]
SFT_COLUMNS = ["messages", "tools", "input_ids", "assistant_masks", "prompt_length", *_COMMON]
RL_COLUMNS = ["messages", "tools", "prompt_ids", "response_ids", "loss_mask", "call_rewards", *_COMMON]


@dataclass
class ExportedRollout:
    """A finished rollout as the export reads it: identifiers, final reward, group key and selected calls."""

    rollout_id: str
    attempt_id: Optional[str]
    resources_id: Optional[str]
    reward: Optional[float]
    group: str
    calls: list[Triplet] = field(default_factory=list)
    _stitched: Optional[StitchReport] = field(default=None, repr=False)

    @property
    def stitched(self) -> StitchReport:
        """The calls joined into conversations (computed once)."""
        if self._stitched is None:
            self._stitched = stitch_calls([call_ids(call) for call in self.calls])
        return self._stitched


def group_key(metadata: Optional[Mapping[str, Any]], task_input: Any) -> str:
    """The group a rollout belongs to for preference pairs and RL baselines.

    GRPO's rollouts carry `metadata["grpo"]` (step or evaluation label, resources version, sampling round and the
    task's position: the rollouts enqueued together for one task); any other rollout is grouped with those of an
    identical task input.
    """
    grpo = (metadata or {}).get("grpo")
    if isinstance(grpo, Mapping):
        return "grpo:" + json.dumps(grpo, sort_keys=True, default=str, separators=(",", ":"))
    text = json.dumps(task_input, sort_keys=True, default=str, separators=(",", ":"))
    return "input:" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def _content(entry: Mapping[str, Any]) -> Optional[str]:
    content = entry.get("content")
    if content is None and entry.get("content_parts") is not None:
        content = entry["content_parts"]
    if content is None or isinstance(content, str):
        return content
    return json.dumps(content, ensure_ascii=False)


def _message(entry: Mapping[str, Any], default_role: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": str(entry.get("role") or default_role), "content": _content(entry)}
    calls = openai_tool_calls(entry.get("tool_calls"))
    if calls:
        message["tool_calls"] = calls
    elif message["content"] is None:
        message["content"] = ""
    if entry.get("tool_call_id") is not None:
        message["tool_call_id"] = str(entry["tool_call_id"])
    if entry.get("name"):
        message["name"] = str(entry["name"])
    return message


def chat_messages(call: Triplet) -> list[dict[str, Any]]:
    """The call's prompt messages and its completion as OpenAI chat messages (content as text; tool calls in
    OpenAI's shape); [] when the call's messages were not recorded."""
    prompt = call.prompt.get("raw_content") if isinstance(call.prompt, dict) else None
    response = call.response.get("raw_content") if isinstance(call.response, dict) else None
    messages = [_message(entry, "user") for entry in prompt or [] if isinstance(entry, Mapping)]
    completion = [_message(entry, "assistant") for entry in response or [] if isinstance(entry, Mapping)]
    if not completion:
        return []  # a prompt without the answer is no training example
    return messages + completion[:1]


def tools_json(call: Triplet) -> Optional[str]:
    """The tools offered to the call as JSON text (TRL reads a JSON `tools` column), None when none were offered."""
    tools = call.prompt.get("tools") if isinstance(call.prompt, dict) else None
    return json.dumps(tools, ensure_ascii=False) if tools else None


def _common(rollout: ExportedRollout, last_call: Triplet, calls: int) -> Record:
    return {
        "rollout_id": rollout.rollout_id,
        "attempt_id": rollout.attempt_id,
        "resources_id": rollout.resources_id,
        "agent_name": call_ids(last_call).agent_name,
        "reward": rollout.reward,
        "group": rollout.group,
        "calls": calls,
        "drifted_calls": rollout.stitched.drifted,
    }


def _units(rollout: ExportedRollout, unit: Unit) -> list[tuple[StitchedSequence, list[Triplet]]]:
    """The sequences to export with the calls each holds: the stitched conversations, or one per call."""
    if unit == "conversation":
        return [(seq, [rollout.calls[i] for i in seq.calls]) for seq in rollout.stitched.sequences]
    units: list[tuple[StitchedSequence, list[Triplet]]] = []
    for position, call in enumerate(rollout.calls):
        ids = call_ids(call)
        single = StitchedSequence(prompt_ids=list(ids.prompt_ids), agent_name=ids.agent_name)
        single.calls.append(position)
        single.response_ids.extend(ids.response_ids)
        single.loss_mask.extend([1] * len(ids.response_ids))
        single.segments.append((0, len(ids.response_ids)))
        units.append((single, [call]))
    return units


def _records(
    rollout: ExportedRollout, unit: Unit, columns: Callable[[StitchedSequence, list[Triplet]], Record]
) -> list[Record]:
    """One record per unit: the chat messages and tools of its last call, `columns(sequence, calls)`, the ids."""
    records: list[Record] = []
    for sequence, calls in _units(rollout, unit):
        last = calls[-1]
        records.append(
            {
                "messages": chat_messages(last),
                "tools": tools_json(last),
                **columns(sequence, calls),
                **_common(rollout, last, len(calls)),
            }
        )
    return records


def _sft_columns(sequence: StitchedSequence, calls: list[Triplet]) -> Record:
    return {
        "input_ids": sequence.ids(),
        "assistant_masks": [0] * len(sequence.prompt_ids) + list(sequence.loss_mask),
        "prompt_length": len(sequence.prompt_ids),
    }


def _rl_columns(sequence: StitchedSequence, calls: list[Triplet]) -> Record:
    return {
        "prompt_ids": list(sequence.prompt_ids),
        "response_ids": list(sequence.response_ids),
        "loss_mask": list(sequence.loss_mask),
        "call_rewards": [call.reward for call in calls],
    }


def sft_records(rollout: ExportedRollout, unit: Unit = "conversation") -> list[Record]:
    """One record per conversation (or call): `messages`, and the exact `input_ids` with `assistant_masks` (1 on the
    tokens the model generated), the columns TRL's SFTTrainer trains on as they are."""
    return _records(rollout, unit, _sft_columns)


def rl_records(rollout: ExportedRollout, unit: Unit = "conversation") -> list[Record]:
    """One record per conversation (or call): `prompt_ids`, `response_ids` (everything after the first prompt) with
    `loss_mask`, the rollout's `reward` and `group`, and the reward the adapter attributed to each call."""
    return _records(rollout, unit, _rl_columns)
