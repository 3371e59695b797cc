"""Histories that are not append-only: a rollout's calls as a forest of lineages (compaction, sub-agents), and the
calls that fit no lineage."""

from __future__ import annotations

from agentlightning.adapter.trajectory import CallIds, stitch_calls

SYSTEM = [1, 2, 3]
QUESTION = [10, 11]
SUMMARISE = [90, 91]  # the agent's "summarise the conversation so far" turn
HELPER = [5, 5, 5]  # a sub-agent's system prompt


def _compacting_calls() -> list[CallIds]:
    """Two tool turns, the summary call (response 60 61), then two turns of the conversation rebuilt from the
    system prompt and the summary (re-rendered as a user turn: 70 60 61)."""
    first = CallIds([*SYSTEM, *QUESTION], [20])
    second = CallIds([*SYSTEM, *QUESTION, 20, 30], [21])
    summary = CallIds([*SYSTEM, *QUESTION, 20, 30, 21, 31, *SUMMARISE], [60, 61])
    resumed = CallIds([*SYSTEM, 70, 60, 61], [22])
    answer = CallIds([*SYSTEM, 70, 60, 61, 22, 32], [40])
    return [first, second, summary, resumed, answer]


def test_a_summary_call_extends_the_lineage_it_summarises_and_its_summary_is_trained() -> None:
    report = stitch_calls(_compacting_calls())
    old = report.sequences[0]
    assert old.calls == [0, 1, 2]
    assert old.response_ids[-2:] == [60, 61] and old.loss_mask[-2:] == [1, 1]
    assert old.segments[-1] == (len(old.response_ids) - 2, len(old.response_ids))


def test_the_conversation_resumed_from_a_summary_roots_a_fresh_lineage() -> None:
    report = stitch_calls(_compacting_calls())
    assert [(s.calls, s.root) for s in report.sequences] == [([0, 1, 2], "fresh"), ([3, 4], "fresh")]
    assert report.lineages == 2
    assert (report.continuations, report.drifted) == (3, 0)


def test_a_sub_agents_fresh_conversation_is_its_own_lineage_and_the_caller_keeps_its_own() -> None:
    calls = [
        CallIds([*SYSTEM, *QUESTION], [20]),  # the main agent hands a sub-question over
        CallIds([*HELPER, 12], [50]),  # the sub-agent's conversation
        CallIds([*HELPER, 12, 50, 33], [51]),
        CallIds([*SYSTEM, *QUESTION, 20, 34], [40]),  # the main agent, with the sub-agent's answer (34)
    ]
    report = stitch_calls(calls)
    assert [(s.calls, s.root) for s in report.sequences] == [([0, 3], "fresh"), ([1, 2], "fresh")]
    assert (report.lineages, report.drifted) == (2, 0)


def test_a_compaction_that_keeps_the_first_prompt_fits_no_lineage_and_roots_one_of_its_own() -> None:
    calls = [
        CallIds([*SYSTEM, *QUESTION], [20]),
        CallIds([*SYSTEM, *QUESTION, 20, 30], [21]),
        CallIds([*SYSTEM, *QUESTION, 70, 60, 61], [22]),  # question kept, the turns after it replaced
        CallIds([*SYSTEM, *QUESTION, 70, 60, 61, 22, 32], [40]),
    ]
    report = stitch_calls(calls)
    assert [(s.calls, s.root) for s in report.sequences] == [([0, 1], "fresh"), ([2, 3], "drift")]
    assert (report.lineages, report.continuations, report.drifted) == (2, 3, 1)


def test_every_generated_token_lies_in_exactly_one_lineage() -> None:
    calls = _compacting_calls()
    report = stitch_calls(calls)
    assert sum(s.generated_tokens for s in report.sequences) == sum(len(c.response_ids) for c in calls)
    assert sorted(call for s in report.sequences for call in s.calls) == list(range(len(calls)))


def test_an_append_only_history_is_one_fresh_lineage() -> None:
    calls = [CallIds([1, 2], [3]), CallIds([1, 2, 3, 4], [5]), CallIds([1, 2, 3, 4, 5, 6], [7, 8])]
    report = stitch_calls(calls)
    assert [(s.calls, s.root, s.generated_tokens) for s in report.sequences] == [([0, 1, 2], "fresh", 4)]
    assert report.lineages == 1
