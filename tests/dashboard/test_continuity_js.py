"""The dashboard's token-continuity check (static/js/continuity.js) gives what `stitch_calls`
(agentlightning/adapter/trajectory.py) gives on the same calls: the cases of tests/adapter/test_trajectory_stitching.py
and random ones, run in Chromium and compared field by field; and the notes it writes on each call."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any, Optional

import pytest

from agentlightning.adapter.trajectory import CallIds, stitch_calls

from .conftest import ServedRun, open_page

SYSTEM = [1, 2, 3]
Call = tuple[list[int], list[int], Optional[str]]

CASES: dict[str, list[Call]] = {
    "extends the previous call": [([*SYSTEM, 10], [20, 21], None), ([*SYSTEM, 10, 20, 21, 30, 31], [40], None)],
    "three turns": [([1, 2], [3], None), ([1, 2, 3, 4], [5], None), ([1, 2, 3, 4, 5, 6, 7], [8, 9], None)],
    "retokenized history drifts": [([*SYSTEM, 10], [20, 21], None), ([*SYSTEM, 10, 22, 30], [40], None)],
    "a different conversation": [([*SYSTEM, 10], [20], None), ([7, 7, 7], [8], None)],
    "the same prompt again": [(SYSTEM, [20], None), (SYSTEM, [21], None)],
    "interleaved agents": [
        ([1, 10], [11], "solver"),
        ([2, 20], [21], "reviewer"),
        ([1, 10, 11, 12], [13], "solver"),
        ([2, 20, 21, 22], [23], "reviewer"),
    ],
    "another agent never extends": [([1], [2], "a"), ([1, 2, 3], [4], "b")],
    "a single call": [([1, 2], [3], None)],
    "the newest matching sequence wins": [([1], [2], None), ([1], [3], None), ([1, 3, 9], [4], None)],
}


@pytest.fixture(scope="module")
def continuity(browser: Any, run: ServedRun) -> Iterator[Any]:
    """Calls into continuity.js from one page shared by this file."""
    page = next(pages := open_page(browser))
    view = page.open(f"{run.url}/#/not-a-view")
    view.wait_for_selector("main h1")

    def call(body: str, arg: Any = None) -> Any:
        return view.evaluate(f"async (arg) => {{ const m = await import('/dashboard/js/continuity.js'); {body} }}", arg)

    yield call
    next(pages, None)


def js_stitch(continuity: Any, cases: list[list[Call]]) -> list[dict[str, Any]]:
    return continuity(
        "return arg.map((calls) => m.stitchCalls(calls.map(([p, r, a]) => ({promptIds: p, responseIds: r, agentName: a}))));",
        cases,
    )


def python_stitch(calls: list[Call]) -> dict[str, Any]:
    report = stitch_calls([CallIds(prompt, response, agent) for prompt, response, agent in calls])
    return {
        "calls": report.calls,
        "continuations": report.continuations,
        "drifted": report.drifted,
        "driftRate": report.drift_rate,
        "sequences": [
            {
                "promptIds": s.prompt_ids,
                "responseIds": s.response_ids,
                "lossMask": s.loss_mask,
                "calls": s.calls,
                "segments": [list(segment) for segment in s.segments],
                "agentName": s.agent_name,
            }
            for s in report.sequences
        ],
    }


def comparable(result: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in result.items() if key != "outcomes"}


def test_the_stitching_cases_give_what_the_training_stitcher_gives(continuity: Any) -> None:
    results = js_stitch(continuity, list(CASES.values()))
    for (name, calls), result in zip(CASES.items(), results, strict=True):
        assert comparable(result) == python_stitch(calls), name


def test_random_calls_give_what_the_training_stitcher_gives(continuity: Any) -> None:
    generator = random.Random(20)
    cases: list[list[Call]] = []
    for _ in range(400):
        calls: list[Call] = []
        for _ in range(generator.randint(1, 6)):
            agent = generator.choice([None, "a", "b"])
            earlier = [c for c in calls if c[2] == agent]
            if earlier and generator.random() < 0.7:  # continue an earlier call, exactly or not
                prompt, response, _ = generator.choice(earlier)
                history = prompt + response
                cut = generator.randint(0, len(history))
                tail = [generator.randint(0, 3) for _ in range(generator.randint(0, 3))]
                prompt = history[:cut] + tail if generator.random() < 0.5 else history + tail
            else:
                prompt = [generator.randint(0, 3) for _ in range(generator.randint(1, 4))]
            calls.append((prompt, [generator.randint(0, 3) for _ in range(generator.randint(1, 3))], agent))
        cases.append(calls)
    results = js_stitch(continuity, cases)
    mismatches = [
        calls for calls, result in zip(cases, results, strict=True) if comparable(result) != python_stitch(calls)
    ]
    assert mismatches == []
    assert sum(result["drifted"] for result in results) > 20  # the cases do drift


def test_each_call_says_what_it_continues(continuity: Any) -> None:
    outcomes = continuity(
        "return m.stitchCalls(arg.map(([p, r]) => ({promptIds: p, responseIds: r}))).outcomes;",
        [([1, 2], [3]), ([1, 2, 3, 4], [5]), ([1, 2, 3, 9], [6]), ([1, 2], [7]), ([8], [9])],
    )
    assert outcomes == [
        {"kind": "new", "repeats": None, "sequence": 0},
        {"kind": "extends", "sequence": 0, "after": 0, "first": 0},
        {"kind": "drifted", "from": 1, "first": 0, "divergesAt": 3, "sequence": 1},
        {"kind": "new", "repeats": 0, "sequence": 2},
        {"kind": "new", "repeats": None, "sequence": 3},
    ]


def test_token_ids_are_read_from_lists_or_their_json_text(continuity: Any) -> None:
    values = [[1, 2], "[3, 4]", "1, 2", [1.5], "nonsense", None, []]
    read = continuity("return arg.map(m.tokenIdList);", values)
    assert read == [[1, 2], [3, 4], None, None, None, None, []]


def test_the_notes_number_calls_as_shown_and_leave_out_calls_without_ids(continuity: Any) -> None:
    result = continuity(
        """
        const span = (p, r) => ({attributes: p === null ? {} : {prompt_token_ids: p, response_token_ids: r}});
        const items = [span([1, 2], [3]), span(null), span([1, 2, 3, 4], [5]), span([1, 2, 9], [6])]
          .map((s) => ({span: s, attemptId: 'at-1', agentName: null}));
        const {notes, summaries} = m.continuityOf(items);
        return {notes: items.map((item) => notes.get(item.span)), summaries};
        """
    )
    notes = result["notes"]
    assert [note["kind"] for note in notes] == ["new", "no-ids", "extends", "drifted"]
    assert (
        notes[0]["text"] == "Starts a conversation: a training sequence of its own, not drift. LLM call 3 continues it."
    )
    assert notes[2]["text"] == "Continues LLM call 1 exactly: one training sequence (LLM calls 1 and 3)."
    assert notes[3]["text"].startswith(
        "Does not extend LLM call 3's token ids (its prompt departs from them at token 3)"
    )
    assert notes[3]["text"].endswith("trained alone, counted as drift.")
    assert "takes no part" in notes[1]["text"]
    [summary] = result["summaries"]
    assert summary["drifted"] == 1
    assert summary["text"] == (
        "Token continuity: 3 LLM calls with token ids · 2 continue a conversation · 1 drifted · drift rate 50%."
        " 1 call without token ids takes no part."
    )


def test_a_tool_result_longer_than_a_call_takes_arguments_still_stitches(continuity: Any) -> None:
    result = continuity(
        """
        const long = Array.from({length: 300000}, (_, i) => i % 50000);
        const {continuations, drifted, sequences} = m.stitchCalls([
          {promptIds: [7], responseIds: [1]}, {promptIds: [7, 1, ...long], responseIds: [3]}]);
        return [continuations, drifted, sequences.length, sequences[0].responseIds.length];
        """
    )
    assert result == [1, 0, 1, 300002]
