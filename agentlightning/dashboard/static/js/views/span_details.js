// Everything about one span, for the side panel of the waterfall: identity, timing, status, its reward, its LLM
// call summary, exceptions with their traceback, then every attribute, event, link and resource attribute.

import { h } from "../dom.js";
import { formatCount, formatDuration, formatScore, formatTime } from "../format.js";
import { KIND_LABELS, exceptionsOf, isError, llmCall, rewardOf, spanKind } from "../spans.js";
import { foldedText, keyValueTable } from "./common.js";

export function exceptionBlock(exception) {
  return h(
    "div",
    { class: "exception" },
    h("p", { class: "exception-title" }, exception.message ? `${exception.type}: ${exception.message}` : exception.type),
    exception.stacktrace ? foldedText(exception.stacktrace, { className: "traceback", limit: 4000 }) : h("p", { class: "muted" }, "No traceback was recorded."),
  );
}

function sortedEntries(object) {
  return Object.entries(object || {}).sort(([a], [b]) => a.localeCompare(b));
}

export function spanDetails(span, { openConversation } = {}) {
  const kind = spanKind(span);
  const start = span.start_time;
  const end = span.end_time;
  const parts = [
    h("h3", { class: "span-title" }, h("span", { class: `kind-tag kind-${kind}` }, KIND_LABELS[kind]), " ", String(span.name ?? "")),
    keyValueTable([
      ["status", `${span.status?.status_code ?? "UNSET"}${span.status?.description ? ` — ${span.status.description}` : ""}`],
      ["start", formatTime(start)],
      ["duration", typeof start === "number" && typeof end === "number" ? formatDuration(end - start) : "—"],
      ["sequence id", String(span.sequence_id)],
      ["span id", span.span_id],
      ["parent id", span.parent_id ?? "—"],
      ["trace id", span.trace_id],
      ["attempt id", span.attempt_id],
    ]),
  ];
  const reward = rewardOf(span);
  if (reward) {
    parts.push(
      h(
        "div",
        { class: "reward-callout" },
        h("strong", null, `Reward ${formatScore(reward.value)}`),
        reward.dimensions.length > 1 ? h("span", null, ` (${reward.dimensions.map((d) => `${d.name} ${formatScore(d.value)}`).join(", ")})`) : null,
      ),
    );
  }
  if (kind === "llm") {
    const call = llmCall(span);
    parts.push(
      h(
        "div",
        { class: "llm-callout" },
        h("p", null, `${call.model ?? "unknown model"} · ${call.promptTokens ?? "?"} prompt + ${call.completionTokens ?? "?"} completion tokens`),
        h(
          "p",
          { class: call.tokenIdsCaptured ? "ok-text" : "warn-text" },
          call.tokenIdsCaptured
            ? `Token ids captured: ${formatCount(call.promptTokenIds)} prompt / ${formatCount(call.responseTokenIds)} response`
            : "No token ids captured for this call (training on it needs them)",
        ),
        openConversation ? h("button", { type: "button", class: "link-button", on: { click: openConversation } }, "Show as conversation") : null,
      ),
    );
  }
  const exceptions = exceptionsOf(span);
  if (exceptions.length) parts.push(h("h4", null, "Exceptions"), exceptions.map(exceptionBlock));
  else if (isError(span)) parts.push(h("p", { class: "error-note" }, `Failed: ${span.status?.description ?? "no description"}`));
  parts.push(h("h4", null, `Attributes (${Object.keys(span.attributes || {}).length})`), keyValueTable(sortedEntries(span.attributes), { empty: "No attributes." }));
  if (Array.isArray(span.events) && span.events.length) {
    parts.push(
      h("h4", null, `Events (${span.events.length})`),
      span.events.map((event) =>
        h("div", { class: "event" }, h("p", { class: "event-title" }, `${event.name} · ${formatTime(event.timestamp)}`), keyValueTable(sortedEntries(event.attributes))),
      ),
    );
  }
  if (Array.isArray(span.links) && span.links.length) {
    parts.push(
      h("h4", null, `Links (${span.links.length})`),
      keyValueTable(span.links.map((item, index) => [`link ${index + 1}`, { context: item.context, attributes: item.attributes }])),
    );
  }
  parts.push(h("h4", null, "Resource"), keyValueTable(sortedEntries(span.resource?.attributes), { empty: "No resource attributes." }));
  const extra = sortedEntries(span).filter(
    ([key]) =>
      ![
        "rollout_id", "attempt_id", "sequence_id", "trace_id", "span_id", "parent_id", "name", "status", "attributes",
        "events", "links", "start_time", "end_time", "context", "parent", "resource",
      ].includes(key),
  );
  if (extra.length) parts.push(h("h4", null, "Other fields"), keyValueTable(extra));
  return h("div", { class: "span-details" }, parts);
}
