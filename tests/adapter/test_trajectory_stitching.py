"""Stitching a rollout's LLM calls into multi-turn token sequences, and counting the calls that drifted."""

from __future__ import annotations

from agentlightning.adapter.trajectory import CallIds, stitch_calls

SYSTEM = [1, 2, 3]


def test_a_call_extending_the_previous_call_joins_its_sequence() -> None:
    first = CallIds([*SYSTEM, 10], [20, 21])
    second = CallIds([*SYSTEM, 10, 20, 21, 30, 31], [40])  # tool result 30 31, then the answer 40
    report = stitch_calls([first, second])
    assert len(report.sequences) == 1
    sequence = report.sequences[0]
    assert sequence.prompt_ids == [*SYSTEM, 10]
    assert sequence.response_ids == [20, 21, 30, 31, 40]
    assert sequence.loss_mask == [1, 1, 0, 0, 1]
    assert sequence.calls == [0, 1]
    assert sequence.segments == [(0, 2), (4, 5)]
    assert (report.continuations, report.drifted, report.drift_rate) == (1, 0, 0.0)


def test_three_turns_join_into_one_sequence() -> None:
    calls = [CallIds([1, 2], [3]), CallIds([1, 2, 3, 4], [5]), CallIds([1, 2, 3, 4, 5, 6, 7], [8, 9])]
    report = stitch_calls(calls)
    assert [s.response_ids for s in report.sequences] == [[3, 4, 5, 6, 7, 8, 9]]
    assert report.sequences[0].loss_mask == [1, 0, 1, 0, 0, 1, 1]
    assert report.continuations == 2 and report.drifted == 0


def test_a_retokenized_history_is_drift_and_gets_its_own_sequence() -> None:
    first = CallIds([*SYSTEM, 10], [20, 21])
    # the template re-rendered the assistant turn: 20 21 came back as 22
    second = CallIds([*SYSTEM, 10, 22, 30], [40])
    report = stitch_calls([first, second])
    assert [s.calls for s in report.sequences] == [[0], [1]]
    assert report.sequences[1].prompt_ids == [*SYSTEM, 10, 22, 30]
    assert report.sequences[1].loss_mask == [1]
    assert (report.continuations, report.drifted, report.drift_rate) == (1, 1, 1.0)


def test_a_different_conversation_is_not_drift() -> None:
    report = stitch_calls([CallIds([*SYSTEM, 10], [20]), CallIds([7, 7, 7], [8])])
    assert len(report.sequences) == 2
    assert (report.continuations, report.drifted) == (0, 0)


def test_the_same_prompt_sent_again_is_a_retry_not_drift() -> None:
    report = stitch_calls([CallIds(SYSTEM, [20]), CallIds(SYSTEM, [21])])
    assert len(report.sequences) == 2
    assert (report.continuations, report.drifted) == (0, 0)


def test_interleaved_agents_each_keep_their_own_sequence() -> None:
    calls = [
        CallIds([1, 10], [11], agent_name="solver"),
        CallIds([2, 20], [21], agent_name="reviewer"),
        CallIds([1, 10, 11, 12], [13], agent_name="solver"),
        CallIds([2, 20, 21, 22], [23], agent_name="reviewer"),
    ]
    report = stitch_calls(calls)
    assert [(s.agent_name, s.calls) for s in report.sequences] == [("solver", [0, 2]), ("reviewer", [1, 3])]
    assert report.drifted == 0


def test_a_call_of_another_agent_never_extends_a_sequence() -> None:
    report = stitch_calls([CallIds([1], [2], agent_name="a"), CallIds([1, 2, 3], [4], agent_name="b")])
    assert len(report.sequences) == 2
    assert report.continuations == 0


def test_a_call_without_earlier_calls_is_neither_continuation_nor_drift() -> None:
    report = stitch_calls([CallIds([1, 2], [3])])
    assert (report.calls, report.continuations, report.drifted, report.drift_rate) == (1, 0, 0, 0.0)


def test_a_call_extends_the_newest_sequence_it_matches() -> None:
    # two conversations with the same start; the third call continues the second one
    calls = [CallIds([1], [2]), CallIds([1], [3]), CallIds([1, 3, 9], [4])]
    report = stitch_calls(calls)
    assert [s.calls for s in report.sequences] == [[0], [1, 2]]
    assert report.drifted == 0
