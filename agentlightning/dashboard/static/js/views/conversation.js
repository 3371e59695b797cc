// The LLM calls of an attempt read as a conversation: the prompt messages, the response and its tool calls,
// tokens and whether token ids were captured, with rewards and exceptions shown where they happened. Each call says
// whether its token ids extend an earlier call of its conversation (continuity.js), and a line on top sums it up.

import { continuityOf } from "../continuity.js";
import { h } from "../dom.js";
import { formatCount, formatDuration, formatScore, toText } from "../format.js";
import { agentNameOf, exceptionsOf, llmCall, llmWrappers, rewardOf, spanKind } from "../spans.js";
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

function callCard(node, tree, index, note) {
  const span = node.span;
  const call = llmCall(span);
  const agent = agentNameOf(node, parentIn(tree));
  const duration = typeof span.end_time === "number" && typeof span.start_time === "number" ? formatDuration(span.end_time - span.start_time) : "—";
  const tokens =
    call.totalTokens !== null || call.promptTokens !== null
      ? `${call.promptTokens ?? "?"} prompt + ${call.completionTokens ?? "?"} completion = ${call.totalTokens ?? "?"} tokens`
      : "token counts not recorded";
  return h(
    "article",
    { class: `llm-call${call.error ? " failed" : ""}`, dataset: { spanId: span.span_id } },
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
    note ? h("p", { class: `continuity-note continuity-${note.kind}` }, note.text) : null,
    call.tools.length
      ? h("details", { class: "tools-offered" }, h("summary", null, `${call.tools.length} tool${call.tools.length === 1 ? "" : "s"} offered: ${call.tools.map((tool) => tool.name).join(", ")}`), call.tools.map((tool) => h("div", { class: "tool" }, h("strong", null, tool.name), tool.description ? h("p", null, String(tool.description)) : null, tool.parameters ? foldedText(toText(tool.parameters), { limit: 800 }) : null)))
      : null,
    h("div", { class: "messages prompt" }, call.prompt.length ? call.prompt.map((item) => message(item, "in")) : h("p", { class: "muted" }, "The prompt was not recorded.")),
    h("div", { class: "messages response" }, call.response.length ? call.response.map((item) => message(item, "out")) : h("p", { class: "muted" }, call.error ? "" : "No response was recorded.")),
    call.error ? h("p", { class: "error-note" }, `The call failed: ${call.error}`) : null,
  );
}

/** The conversation of the spans in `tree` (an object from buildTree). */
export function renderConversation(tree) {
  const wrappers = llmWrappers(tree);
  const nodes = [...tree.nodes.values()].filter(
    (node) => !wrappers.has(node) && (["llm", "reward", "exception"].includes(spanKind(node.span)) || exceptionsOf(node.span).length),
  );
  nodes.sort((a, b) => (a.span.start_time ?? 0) - (b.span.start_time ?? 0) || (a.span.sequence_id ?? 0) - (b.span.sequence_id ?? 0));
  const calls = nodes.filter((node) => spanKind(node.span) === "llm");
  if (!calls.length) {
    return h("div", { class: "conversation" }, h("p", { class: "empty" }, "This attempt has no LLM call."), nodes.map(itemFor(tree, new Map())));
  }
  const parentOf = parentIn(tree);
  const continuity = continuityOf(calls.map((node) => ({ node, attemptId: node.span.attempt_id ?? "", agentName: agentNameOf(node, parentOf) })));
  const summary = continuity.summaries.map((line) => h("p", { class: `continuity-summary${line.drifted ? " warn-text" : ""}` }, line.text));
  return h("div", { class: "conversation" }, summary, nodes.map(itemFor(tree, continuity.notes)));
}

function itemFor(tree, notes) {
  let calls = 0;
  return (node) => {
    const kind = spanKind(node.span);
    if (kind === "llm") {
      calls += 1;
      return callCard(node, tree, calls, notes.get(node));
    }
    if (kind === "reward") {
      const reward = rewardOf(node.span);
      const extra = reward.dimensions.length > 1 ? ` (${reward.dimensions.map((d) => `${d.name} ${formatScore(d.value)}`).join(", ")})` : "";
      return h("div", { class: "reward-event" }, `★ Reward ${formatScore(reward.value)}${extra}`);
    }
    return h("div", { class: "exception-event" }, exceptionsOf(node.span).map(exceptionBlock));
  };
}
