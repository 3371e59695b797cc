// The LLM calls of an attempt read as a conversation: the prompt messages, the response and its tool calls,
// tokens and whether token ids were captured, with rewards and exceptions shown where they happened. Each call says
// whether its token ids extend an earlier call of its conversation (continuity.js), and a line on top sums it up.

import { continuityOf } from "../continuity.js";
import { h } from "../dom.js";
import { formatCount, formatDuration, formatScore, toText } from "../format.js";
import { agentNameOf, callGroups, exceptionsOf, llmCall, llmWrappers, rewardOf, spanKind } from "../spans.js";
import { foldedText } from "./common.js";
import { exceptionBlock } from "./span_details.js";

function message(item, className) {
  const role = item.role || "message";
  return h(
    "div",
    { class: `msg role-${role.replace(/[^a-z_]/gi, "")} ${className}` },
    h("span", { class: "msg-role" }, role, item.toolCallId ? ` (result of ${item.toolCallId})` : ""),
    item.content !== "" && item.content !== null && item.content !== undefined ? foldedText(toText(item.content), { limit: 3000 }) : null,
    item.toolCalls.length
      ? h(
          "ul",
          { class: "tool-calls" },
          item.toolCalls.map((call) => h("li", null, h("span", { class: "tool-name" }, `→ ${call.name}`), foldedText(toText(call.arguments), { limit: 1000, className: "tool-args" }), call.id ? h("span", { class: "muted" }, ` ${call.id}`) : null)),
        )
      : null,
  );
}

const parentIn = (tree) => (child) => (child.span.parent_id ? tree.nodes.get(`${child.span.trace_id ?? ""}/${child.span.parent_id}`) : null);

function groupAgent(group, tree) {
  for (const member of group.nodes) {
    const agent = agentNameOf(member, parentIn(tree));
    if (agent) return agent;
  }
  return null;
}

function sourcesNote(group) {
  if (group.nodes.length < 2) return null;
  const sources = group.sources.length > 1 ? `the ${group.sources.join(" and the ")}` : `${group.nodes.length} ${group.sources[0]} spans`;
  return h("p", { class: "llm-sources muted" }, `One call, recorded by ${sources}: shown once, from ${group.sources.includes("LLM proxy") ? "the LLM proxy's record" : "its first span"}.`);
}

function callCard(group, tree, index, note) {
  const span = group.record.span;
  const call = llmCall(span);
  const agent = groupAgent(group, tree);
  const duration = typeof span.end_time === "number" && typeof span.start_time === "number" ? formatDuration(span.end_time - span.start_time) : "—";
  const tokens =
    call.totalTokens !== null || call.promptTokens !== null
      ? `${call.promptTokens ?? "?"} prompt + ${call.completionTokens ?? "?"} completion = ${call.totalTokens ?? "?"} tokens`
      : "token counts not recorded";
  return h(
    "article",
    { class: `llm-call${call.error ? " failed" : ""}`, dataset: { spanId: span.span_id, spanIds: group.nodes.map((node) => node.span.span_id).join(" ") } },
    h(
      "header",
      null,
      h("strong", null, `LLM call ${index}`),
      agent ? h("span", { class: "agent-name" }, ` · agent ${agent}`) : null,
      h("span", null, ` · ${call.model ?? "unknown model"} · ${duration}`),
      call.finishReason ? h("span", null, ` · finish: ${call.finishReason}`) : null,
    ),
    h(
      "p",
      { class: "llm-meta" },
      h("span", null, tokens),
      " · ",
      h(
        "span",
        { class: call.tokenIdsCaptured ? "ok-text token-ids" : "warn-text token-ids" },
        call.tokenIdsCaptured ? `token ids captured (${formatCount(call.promptTokenIds)} prompt / ${formatCount(call.responseTokenIds)} response)` : "no token ids captured",
      ),
    ),
    sourcesNote(group),
    note ? h("p", { class: `continuity-note continuity-${note.kind}` }, note.text) : null,
    call.tools.length
      ? h("details", { class: "tools-offered" }, h("summary", null, `${call.tools.length} tool${call.tools.length === 1 ? "" : "s"} offered: ${call.tools.map((tool) => tool.name).join(", ")}`), call.tools.map((tool) => h("div", { class: "tool" }, h("strong", null, tool.name), tool.description ? h("p", null, String(tool.description)) : null, tool.parameters ? foldedText(toText(tool.parameters), { limit: 800 }) : null)))
      : null,
    h("div", { class: "messages prompt" }, call.prompt.length ? call.prompt.map((item) => message(item, "in")) : h("p", { class: "muted" }, "The prompt was not recorded.")),
    h("div", { class: "messages response" }, call.response.length ? call.response.map((item) => message(item, "out")) : h("p", { class: "muted" }, call.error ? "" : "No response was recorded.")),
    call.error ? h("p", { class: "error-note" }, `The call failed: ${call.error}`) : null,
  );
}

/**
 * The conversation of the spans in `tree` (an object from buildTree). A call recorded by both the client and the LLM
 * proxy (`callGroups`) is one card, where the first of its spans started, showing the proxy's record.
 */
export function renderConversation(tree) {
  const wrappers = llmWrappers(tree);
  const found = [...tree.nodes.values()].filter(
    (node) => !wrappers.has(node) && (["llm", "reward", "exception"].includes(spanKind(node.span)) || exceptionsOf(node.span).length),
  );
  found.sort((a, b) => (a.span.start_time ?? 0) - (b.span.start_time ?? 0) || (a.span.sequence_id ?? 0) - (b.span.sequence_id ?? 0));
  const groups = new Map(callGroups(found.filter((node) => spanKind(node.span) === "llm")).map((group) => [group.nodes[0], group]));
  const nodes = found.filter((node) => spanKind(node.span) !== "llm" || groups.has(node));
  if (!groups.size) {
    return h("div", { class: "conversation" }, h("p", { class: "empty" }, "This attempt has no LLM call."), nodes.map(itemFor(tree, new Map(), groups)));
  }
  const calls = [...groups.entries()].map(([node, group]) => ({ node, span: group.record.span, attemptId: node.span.attempt_id ?? "", agentName: groupAgent(group, tree) }));
  const continuity = continuityOf(calls);
  const summary = continuity.summaries.map((line) => h("p", { class: `continuity-summary${line.drifted ? " warn-text" : ""}` }, line.text));
  return h("div", { class: "conversation" }, summary, nodes.map(itemFor(tree, continuity.notes, groups)));
}

function itemFor(tree, notes, groups) {
  let calls = 0;
  return (node) => {
    const kind = spanKind(node.span);
    if (kind === "llm") {
      calls += 1;
      return callCard(groups.get(node), tree, calls, notes.get(node));
    }
    if (kind === "reward") {
      const reward = rewardOf(node.span);
      const extra = reward.dimensions.length > 1 ? ` (${reward.dimensions.map((d) => `${d.name} ${formatScore(d.value)}`).join(", ")})` : "";
      return h("div", { class: "reward-event" }, `★ Reward ${formatScore(reward.value)}${extra}`);
    }
    return h("div", { class: "exception-event" }, exceptionsOf(node.span).map(exceptionBlock));
  };
}
