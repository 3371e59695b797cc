"""The dashboard's pure JavaScript functions (diff, statistics, time ranges, span reading, URL parsing), run in
Chromium against hand-computed answers."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from .conftest import ServedRun, open_page


@pytest.fixture(scope="module")
def js(browser: Any, run: ServedRun) -> Iterator[Any]:
    """Calls into the dashboard's modules from one page shared by this file (pure functions keep no state)."""
    page = next(pages := open_page(browser))
    view = page.open(f"{run.url}/#/not-a-view")  # a page that asks the store nothing
    view.wait_for_selector("main h1")

    def call(module: str, body: str, arg: Any = None) -> Any:
        script = f"async (arg) => {{ const m = await import('/dashboard/js/{module}.js'); {body} }}"
        return view.evaluate(script, arg)

    yield call
    next(pages, None)  # closes the page and checks its console


def test_line_diff_pairs_changed_lines_and_marks_words(js: Any) -> None:
    rows = js("diff", "return m.diffLines(arg[0], arg[1]);", ["a\nhello world\nc", "a\nhello brave world\nc\nd"])
    assert [row["op"] for row in rows] == ["equal", "change", "equal", "insert"]
    inserted = [part["value"] for part in rows[1]["words"] if part["op"] == "insert"]
    assert "".join(inserted).strip() == "brave"
    assert js("diff", "return m.diffSummary(m.diffLines('x\\ny', 'x\\ny'));") == {
        "added": 0,
        "removed": 0,
        "changed": 0,
        "unchanged": 2,
    }


def test_edit_scripts_rebuild_both_texts(js: Any) -> None:
    failures = js(
        "diff",
        """
        let seed = 7;
        const random = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
        const failures = [];
        for (let trial = 0; trial < 300; trial += 1) {
          const a = Array.from({length: Math.floor(random() * 12)}, () => 'abc'[Math.floor(random() * 3)]);
          const b = Array.from({length: Math.floor(random() * 12)}, () => 'abc'[Math.floor(random() * 3)]);
          const script = m.diffSequences(a, b);
          const left = script.filter(s => s.op !== 'insert').map(s => s.value);
          const right = script.filter(s => s.op !== 'delete').map(s => s.value);
          if (left.join('') !== a.join('') || right.join('') !== b.join('')) failures.push([a, b]);
        }
        return failures;
        """,
    )
    assert failures == []


def test_a_huge_diff_gives_up_gracefully(js: Any) -> None:
    ops = js(
        "diff",
        "const a = Array.from({length: 300}, (_, i) => 'a' + i); const b = Array.from({length: 300}, (_, i) => 'b' + i);"
        "return m.diffSequences(a, b, 10).map(s => s.op);",
    )
    assert ops.count("delete") == 300 and ops.count("insert") == 300


def test_throughput_buckets_are_contiguous(js: Any) -> None:
    result = js("stats", "return m.throughput([100, 101, 130, null, 170], 10);")
    assert result["width"] == 10
    assert [bucket["count"] for bucket in result["buckets"]] == [2, 0, 0, 1, 0, 0, 0, 1]
    assert result["buckets"][0]["start"] == 100


def test_moving_average_and_reward_per_version(js: Any) -> None:
    assert js("stats", "return m.movingAverage([1, 2, 3, 4], 2);") == [1, 1.5, 2.5, 3.5]
    groups = js(
        "stats",
        "return m.rewardByVersion([{reward: 1, resourcesId: 'b'}, {reward: 0, resourcesId: 'b'}, {reward: 0.5, resourcesId: 'a'},"
        "{reward: 0.2, resourcesId: null}], ['a', 'b']);",
    )
    assert [(group["resourcesId"], group["mean"], group["count"]) for group in groups] == [
        ("a", 0.5, 1),
        ("b", 0.5, 2),
        ("none", 0.2, 1),
    ]


def test_reward_per_version_names_the_grpo_step_its_rollouts_trained(js: Any) -> None:
    groups = js(
        "stats",
        "return m.rewardByVersion([{reward: 1, resourcesId: 'a', step: 2}, {reward: 0, resourcesId: 'a', step: 1},"
        "{reward: 1, resourcesId: 'b'}], ['a', 'b']);",
    )
    assert [(group["resourcesId"], group["step"]) for group in groups] == [("a", 1), ("b", None)]


def test_failures_are_grouped_by_reason(js: Any) -> None:
    groups = js(
        "stats",
        """return m.groupFailures([
          {rollout: {rollout_id: 'r1', status: 'failed', attempt: {status: 'failed'}}, exception: {type: 'KeyError', message: "'x'\\nmore"}},
          {rollout: {rollout_id: 'r2', status: 'failed', attempt: {status: 'failed'}}, exception: {type: 'KeyError', message: "'x'"}},
          {rollout: {rollout_id: 'r3', status: 'failed', attempt: {status: 'timeout'}}, exception: null},
          {rollout: {rollout_id: 'r4', status: 'failed', attempt: {status: 'failed'}}, exception: null},
        ]);""",
    )
    assert [(group["reason"], group["count"]) for group in groups] == [
        ("KeyError: 'x'", 2),
        ("Attempt timed out", 1),
        ("Failed without a recorded exception", 1),
    ]


@pytest.mark.parametrize(
    ("stats", "cpu", "memory"),
    [
        ({"cpu": {"percent": 12.5}, "memory": {"percent": 40}}, 12.5, 40),
        ({"cpu_percent": 3, "mem_used_mb": 512, "mem_total_mb": 2048}, 3, 25),
        ({"system": {"cpu_usage": 80}, "memory_percent": 10.0}, 80, 10),
        ({"gpu": [{"util": 3}]}, None, None),
        (None, None, None),
    ],
)
def test_system_use_is_found_whatever_the_snapshot_layout(js: Any, stats: Any, cpu: Any, memory: Any) -> None:
    usage = js("stats", "return m.systemUsage(arg);", stats)
    assert usage["cpuPercent"] == cpu
    assert usage["memoryPercent"] == memory


def test_memory_figures_are_scaled_to_bytes_by_the_unit_their_key_names(js: Any) -> None:
    snapshot = {  # as agentlightning.utils.system_snapshot writes it: megabytes
        "memory_total_mb": 24000.0,
        "memory_used_mb": 4300.0,
        "memory_percent": 17.9,
        "gpus": [{"memory_used_mb": 1.0, "memory_total_mb": 2.0}],
    }
    usage = js("stats", "return m.systemUsage(arg);", snapshot)
    assert (usage["memoryUsed"], usage["memoryTotal"]) == (4300 * 1024**2, 24000 * 1024**2)
    assert js("format", "return m.formatBytes(arg);", usage["memoryUsed"]) == "4.2 GB"
    assert js("stats", "return m.systemUsage(arg).memoryUsed;", {"mem_used": 1024}) == 1024  # no unit: bytes


def test_heartbeat_health(js: Any) -> None:
    assert js(
        "stats",
        "return [m.heartbeatHealth({last_heartbeat_time: 990}, 1000), m.heartbeatHealth({last_heartbeat_time: 900}, 1000), m.heartbeatHealth({}, 1000)];",
    ) == [
        "alive",
        "stale",
        "never",
    ]


def test_a_worker_whose_runner_said_it_stopped_is_stopped_not_alive_or_idle(js: Any) -> None:
    stopped = {"status": "idle", "last_heartbeat_time": 999, "heartbeat_stats": {"stopped_at": 999}}
    running = {"status": "idle", "last_heartbeat_time": 999, "heartbeat_stats": {"cpu_percent": 1}}
    health = js("stats", "return m.heartbeatHealth(arg, 1000);", stopped)
    summary = js("stats", "return m.runnerSummary(arg, 1000);", [stopped, running])
    assert health == "stopped"
    assert (summary["stopped"], summary["alive"], summary["idle"]) == (1, 1, 1)


def test_time_block_is_found_by_binary_search(js: Any) -> None:
    result = js(
        "timerange",
        """
        const times = [1, 2, 2, 3, 5, 8, 8, 8, 13, 21];
        let probes = 0;
        const at = async (i) => { probes += 1; return times[i]; };
        const cases = [[2, 8], [4, 9], [null, 2], [14, null], [0, 0], [30, 40]];
        const blocks = [];
        for (const [from, to] of cases) blocks.push(await m.locateTimeBlock(times.length, from, to, at));
        return {blocks, probes};
        """,
    )
    assert [(block["start"], block["end"]) for block in result["blocks"]] == [
        (1, 8),
        (4, 8),
        (0, 3),
        (9, 10),
        (0, 0),
        (10, 10),
    ]
    assert result["probes"] <= 6 * 2 * 4


def test_page_windows_inside_a_block(js: Any) -> None:
    windows = js(
        "timerange",
        "const b = {start: 10, end: 35}; return [m.pageWindow(b, 1, 10, 'asc'), m.pageWindow(b, 3, 10, 'asc'),"
        "m.pageWindow(b, 1, 10, 'desc'), m.pageWindow(b, 3, 10, 'desc'), m.pageWindow(b, 4, 10, 'desc')];",
    )
    assert [(w["offset"], w["limit"], w["reverse"]) for w in windows] == [
        (10, 10, False),
        (30, 5, False),
        (25, 10, True),
        (10, 5, True),
        (10, 0, False),
    ]


def test_rewards_are_read_from_every_encoding(js: Any) -> None:
    values = js(
        "spans",
        """return [
          m.rewardOf({name: 'agentlightning.reward', attributes: {reward: 0.5}}),
          m.rewardOf({name: 'agentlightning.annotation', attributes: {'agentlightning.reward.0.name': 'acc', 'agentlightning.reward.0.value': 1, 'agentlightning.reward.1.name': 'len', 'agentlightning.reward.1.value': 0.2}}),
          m.rewardOf({name: 'agentops_reward_operation.task', attributes: {'agentops.task.output': '{"type": "reward", "value": 0.7}'}}),
          m.rewardOf({name: 'compute_reward', attributes: {'output.value': '1'}}),
          m.finalReward([{sequence_id: 2, name: 'agentlightning.reward', attributes: {reward: 1}}, {sequence_id: 1, name: 'agentlightning.reward', attributes: {reward: 0}}]),
        ];""",
    )
    assert values[0] == {"value": 0.5, "dimensions": [{"name": "primary", "value": 0.5}]}
    assert values[1]["value"] == 1 and [d["name"] for d in values[1]["dimensions"]] == ["acc", "len"]
    assert values[2]["value"] == 0.7
    assert values[3] is None
    assert values[4] == 1


def test_exceptions_come_from_spans_events_and_metadata(js: Any) -> None:
    found = js(
        "spans",
        """return [
          m.exceptionsOf({name: 'agentlightning.exception', attributes: {'exception.type': 'ValueError', 'exception.message': 'bad', 'exception.stacktrace': 'tb'}, events: []}),
          m.exceptionsOf({name: 'llm', attributes: {}, events: [{name: 'exception', attributes: {'exception.type': 'TimeoutError', 'exception.message': 'slow'}}]}),
          m.exceptionFromMetadata({traceback: 'Traceback...\\nKeyError: boom'}),
          m.exceptionFromMetadata({error: {type: 'OSError', message: 'disk'}}),
          m.exceptionFromMetadata({note: 1}),
        ];""",
    )
    assert found[0] == [{"type": "ValueError", "message": "bad", "stacktrace": "tb"}]
    assert found[1][0]["type"] == "TimeoutError"
    assert (found[2]["type"], found[2]["message"]) == ("KeyError", "boom")
    assert (found[3]["type"], found[3]["message"]) == ("OSError", "disk")
    assert found[4] is None


def test_llm_calls_are_read_from_openinference_attributes(js: Any) -> None:
    call = js(
        "spans",
        """return m.llmCall({name: 'ChatOpenAI', attributes: {
          'openinference.span.kind': 'LLM', 'llm.model_name': 'm',
          'llm.input_messages.0.message.role': 'user', 'llm.input_messages.0.message.content': 'hi',
          'llm.output_messages.0.message.role': 'assistant',
          'llm.output_messages.0.message.tool_calls.0.tool_call.function.name': 'search',
          'llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments': '{"q": 1}',
          'llm.token_count.prompt': 5, 'llm.token_count.completion': 2, 'llm.token_count.total': 7}});""",
    )
    assert call["model"] == "m"
    assert call["prompt"][0]["content"] == "hi"
    assert call["response"][0]["toolCalls"] == [{"id": "", "name": "search", "arguments": '{"q": 1}'}]
    assert (call["promptTokens"], call["completionTokens"], call["totalTokens"]) == (5, 2, 7)
    assert call["tokenIdsCaptured"] is False


def test_span_trees_survive_cycles_and_missing_parents(js: Any) -> None:
    result = js(
        "spans",
        """
        const s = (id, parent) => ({trace_id: 't', span_id: id, parent_id: parent, start_time: 1, sequence_id: 1, attributes: {}});
        const tree = m.buildTree([s('a', null), s('b', 'a'), s('c', 'missing'), s('x', 'y'), s('y', 'x')]);
        return {roots: tree.roots.map(n => [n.span.span_id, n.orphan]), rows: m.flatten(tree.roots).map(n => n.span.span_id)};
        """,
    )
    assert ["a", False] in result["roots"] and ["c", True] in result["roots"]
    assert result["rows"][:2] == ["a", "b"]


def test_url_filters_are_validated(js: Any) -> None:
    parsed = js(
        "router",
        "return m.parseRolloutFilters(new URLSearchParams(arg));",
        "status=failed,nope,failed&mode=val&page=2&size=25&from=1700000000&to=1600000000",
    )
    assert parsed["filters"]["status"] == ["failed"]
    assert parsed["filters"]["mode"] == "val"
    assert (parsed["filters"]["page"], parsed["filters"]["size"]) == (2, 25)
    assert parsed["filters"]["from"] is None and parsed["filters"]["to"] is None
    assert any("status=nope" in problem for problem in parsed["problems"])
    assert any("from is after to" in problem for problem in parsed["problems"])
    assert js("router", "return m.parseRoute('#/rollouts/ro%2Fa%20b?tab=x');")["id"] == "ro/a b"
    assert js("router", "return m.parseRoute('#/rollouts/%E0%A4%A').id;") == "%E0%A4%A"


def test_query_strings_repeat_lists_and_skip_empty_values(js: Any) -> None:
    assert (
        js("api", "return m.queryString({status_in: ['a', 'b'], q: '', none: null, limit: 0});")
        == "?status_in=a&status_in=b&limit=0"
    )


def test_bookkeeping_rollouts_are_recognised_and_left_out_of_the_counts(js: Any) -> None:
    checkpoint = {
        "rollout_id": "ro-1",
        "status": "succeeded",
        "metadata": {"agentlightning.bookkeeping": "apo_checkpoint"},
    }
    work = {"rollout_id": "ro-2", "status": "succeeded", "metadata": {}}
    assert js(
        "stats", "return [m.isBookkeeping(arg[0]), m.isBookkeeping(arg[1]), m.isBookkeeping({})];", [checkpoint, work]
    ) == [
        True,
        False,
        False,
    ]
    counts = js(
        "stats",
        "return m.withoutBookkeeping(arg, new Map([['ro-1', 'succeeded']]));",
        {"succeeded": 3, "failed": 1},
    )
    assert counts == {"succeeded": 2, "failed": 1}


def test_the_runners_error_reads_as_its_exception_type_and_message(js: Any) -> None:
    found = js(
        "spans",
        """return [
          m.exceptionFromMetadata({error: 'ValueError: no answer in the reply', error_type: 'ValueError', traceback: 'tb'}),
          m.exceptionFromMetadata({error: 'the agent ran past its 5 s timeout', error_type: 'AgentTimeout'}),
          m.exceptionFromMetadata({error: 'KeyError', error_type: 'KeyError'}),
          m.exceptionFromMetadata({error: 'asyncio.TimeoutError: slow'}),
          m.exceptionFromMetadata({error: 'Note: not an exception name'}),
        ];""",
    )
    assert found[0] == {"type": "ValueError", "message": "no answer in the reply", "stacktrace": "tb"}
    assert (found[1]["type"], found[1]["message"]) == ("AgentTimeout", "the agent ran past its 5 s timeout")
    assert (found[2]["type"], found[2]["message"]) == ("KeyError", "")
    assert (found[3]["type"], found[3]["message"]) == ("asyncio.TimeoutError", "slow")
    assert (found[4]["type"], found[4]["message"]) == ("Error", "Note: not an exception name")
    reason = js("stats", "return m.failureReason({status: 'failed', attempt: {status: 'failed'}}, arg);", found[0])
    assert reason == "ValueError: no answer in the reply"


def test_facts_the_runner_recorded_need_no_span_query(js: Any) -> None:
    facts = js(
        "facts",
        """
        const attempt = (status, metadata) => ({attempt_id: 'at-1', status, metadata});
        return [
          m.recordedFacts({status: 'succeeded', attempt: attempt('succeeded', {final_reward: 0.75})}),
          m.recordedFacts({status: 'succeeded', attempt: attempt('succeeded', {final_reward: null})}),
          m.recordedFacts({status: 'failed', attempt: attempt('failed', {final_reward: null, error: 'ValueError: x', error_type: 'ValueError'})}),
          m.recordedFacts({status: 'failed', attempt: attempt('timeout', {final_reward: null})}),
          m.recordedFacts({status: 'failed', attempt: attempt('failed', {final_reward: null})}),
          m.recordedFacts({status: 'succeeded', attempt: attempt('succeeded', {})}),
        ];
        """,
    )
    assert facts[0] == {"reward": 0.75, "exception": None}
    assert facts[1] == {"reward": None, "exception": None}
    assert facts[2]["exception"]["type"] == "ValueError" and facts[2]["reward"] is None
    assert facts[3] == {"reward": None, "exception": None}  # a timeout needs no exception
    assert facts[4] is None and facts[5] is None  # a failure without its reason, a rollout no runner finished


def test_count_axes_have_whole_number_ticks(js: Any) -> None:
    assert js("charts", "return m.niceTicks(0, 1, 4, true);") == [0, 1]
    assert js("charts", "return m.niceTicks(0, 7, 4, true);") == [0, 2, 4, 6]
    assert js("charts", "return m.niceTicks(0, 1, 4);") == [0, 0.25, 0.5, 0.75, 1]


def test_whole_run_groups_become_one_series_per_mode(js: Any) -> None:
    result = js(
        "stats",
        """
        const groups = [
          {start: 60, mode: 'val', count: 4, rewarded: 4, mean_reward: 0.5},
          {start: 0, mode: 'train', count: 8, rewarded: 8, mean_reward: 0.25},
          {start: 60, mode: 'train', count: 8, rewarded: 0, mean_reward: null},
          {start: 120, mode: 'train', count: 8, rewarded: 6, mean_reward: 0.75},
        ];
        const versions = [
          {resources_id: 'rs-2', mode: 'train', first_end_time: 50},
          {resources_id: 'rs-1', mode: 'val', first_end_time: 20},
          {resources_id: 'rs-1', mode: 'train', first_end_time: 10},
        ];
        return {series: m.seriesByMode(groups, (g) => g.start), positions: [...m.versionPositions(versions)]};
        """,
    )
    assert [(item["mode"], [(p["x"], p["y"]) for p in item["points"]]) for item in result["series"]] == [
        ("train", [(0, 0.25), (120, 0.75)]),
        ("val", [(60, 0.5)]),
    ]
    assert result["positions"] == [["rs-1", 1], ["rs-2", 2]]


def test_a_framework_llm_span_around_an_unparented_sdk_call_is_its_wrapper(js: Any) -> None:
    """Traces recorded before LangChain's SDK spans were parented: the SDK span is a root of its own trace."""
    result = js(
        "spans",
        """
        const span = (trace, id, parent, start, end, attributes) =>
          ({trace_id: trace, span_id: id, parent_id: parent, start_time: start, end_time: end, sequence_id: start, attributes});
        const chat = {'openinference.span.kind': 'LLM'};
        const sdk = {'openinference.span.kind': 'LLM', prompt_token_ids: [1, 2], response_token_ids: [3]};
        const tree = m.buildTree([
          span('a', 'graph', null, 0, 100, {}),
          span('a', 'chat1', 'graph', 10, 20, chat), span('b', 'sdk1', null, 11, 19, sdk),
          span('a', 'chat2', 'graph', 30, 40, chat), span('c', 'sdk2', null, 31, 39, sdk),
          span('a', 'lonely', 'graph', 50, 60, chat),
        ]);
        return [...m.llmWrappers(tree)].map((node) => node.span.span_id).sort();
        """,
    )
    assert result == ["chat1", "chat2"]  # "lonely" made a call that was not captured: it stays a call


def test_a_call_in_a_named_langgraph_graph_names_the_graph_and_the_node(js: Any) -> None:
    names = js(
        "spans",
        """
        const span = (id, parent, name, attributes) => ({trace_id: 't', span_id: id, parent_id: parent, name, start_time: 1, attributes});
        const tree = m.buildTree([
          span('g', null, 'calculator', {}), span('n', 'g', 'agent', {'agent.name': 'agent', 'langgraph.node': 'agent'}),
          span('c', 'n', 'ChatOpenAI', {}),
          span('g2', null, 'LangGraph', {}), span('n2', 'g2', 'coder', {'agent.name': 'coder', 'langgraph.node': 'coder'}),
          span('c2', 'n2', 'ChatOpenAI', {}),
        ]);
        const parentOf = (node) => node.span.parent_id ? tree.nodes.get(`t/${node.span.parent_id}`) : null;
        return [m.agentNameOf(tree.nodes.get('t/c'), parentOf), m.agentNameOf(tree.nodes.get('t/c2'), parentOf)];
        """,
    )
    assert names == ["calculator \u203a agent", "coder"]  # graph, a right-pointing angle quote, node


def test_a_call_under_an_opentelemetry_genai_invoke_agent_span_names_that_agent(js: Any) -> None:
    names = js(
        "spans",
        """
        const span = (id, parent, name, attributes) => ({trace_id: 't', span_id: id, parent_id: parent, name, start_time: 1, attributes});
        const tree = m.buildTree([
          span('a', null, 'invoke_agent solver', {'gen_ai.operation.name': 'invoke_agent'}), span('c', 'a', 'openai.chat.completion', {}),
          span('b', null, 'invoke_agent', {'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'critic'}),
          span('c2', 'b', 'openai.chat.completion', {}),
        ]);
        const parentOf = (node) => node.span.parent_id ? tree.nodes.get(`t/${node.span.parent_id}`) : null;
        return [m.agentNameOf(tree.nodes.get('t/c'), parentOf), m.agentNameOf(tree.nodes.get('t/c2'), parentOf), m.spanKind(tree.nodes.get('t/a').span)];
        """,
    )
    assert names == ["solver", "critic", "agent"]


_ONE_CALL_TWICE = """
const spans = await import('/dashboard/js/spans.js');
const ids = (n) => ({prompt_token_ids: [n, n], response_token_ids: [n + 1]});
const client = (id, start, extra) => ({trace_id: 'c', span_id: id, parent_id: 'agent', name: 'openai.chat.completion', start_time: start, end_time: start + 1,
  resource: {attributes: {'service.name': 'agent'}}, attributes: {'gen_ai.prompt.0.role': 'user', 'gen_ai.prompt.0.content': 'hi', ...ids(start), ...extra}});
const proxy = (id, start, extra) => ({trace_id: 'p' + id, span_id: id, parent_id: null, name: 'openai.chat.completion', start_time: start + 0.2, end_time: start + 0.5,
  resource: {attributes: {'service.name': 'agentlightning.llm_proxy'}}, attributes: {'gen_ai.prompt.0.role': 'user', 'gen_ai.prompt.0.content': 'hi', 'gen_ai.request.model': 'from-proxy', ...ids(start), ...extra}});
const tree = spans.buildTree([
  {trace_id: 'c', span_id: 'agent', parent_id: null, name: 'solve', start_time: 0, end_time: 20, attributes: {'agent.name': 'solver'}},
  client('c1', 1, {'gen_ai.response.id': 'r1'}), proxy('p1', 1, {'gen_ai.response.id': 'r1'}),
  client('c2', 5, {'agentlightning.llm.proxy_span_id': 'p2'}), proxy('p2', 5, {}),
]);
const pane = m.renderConversation(tree);
const cards = [...pane.querySelectorAll('.llm-call')];
return {cards: cards.length, ids: cards.map((card) => card.dataset.spanIds), text: pane.textContent};
"""


def test_a_call_recorded_by_the_client_and_the_proxy_is_listed_once_with_both_sources(js: Any) -> None:
    result = js("views/conversation", _ONE_CALL_TWICE)
    assert result["cards"] == 2 and result["ids"] == ["c1 p1", "c2 p2"]
    assert result["text"].count("recorded by the client and the LLM proxy") == 2
    assert "agent solver" in result["text"] and "from-proxy" in result["text"]  # the agent's place, the proxy's record
    assert "prompt again" not in result["text"]
