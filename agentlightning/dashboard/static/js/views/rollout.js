// Rollout detail: why did this rollout end the way it did? Its attempts on a timeline (who ran them, why each
// ended), the span tree of the selected attempt as a waterfall with every attribute, the LLM calls as a
// conversation, rewards and exceptions. Spans are read in pages and, while the rollout runs, only new ones are
// fetched on each refresh.

import { isAbort } from "../api.js";
import { h, replace, setText } from "../dom.js";
import { formatAge, formatDuration, formatScore, formatTime } from "../format.js";
import { markPainted } from "../perf.js";
import { TERMINAL_STATUSES, buildHash, rolloutHash } from "../router.js";
import { EXCEPTION_SPAN, exceptionFromMetadata, exceptionsOf, finalReward, nodeKey, rewardOf } from "../spans.js";
import { foldedText, keyValueTable, link, statusBadge } from "./common.js";
import { renderConversation } from "./conversation.js";
import { exceptionBlock, spanDetails } from "./span_details.js";
import { createWaterfall } from "./waterfall.js";
import { serverNow } from "../clock.js";

const FIRST_PAGE = 250; // enough for most rollouts; larger ones show these first, then the rest
const SPAN_PAGE = 2000;
const PARALLEL_PAGES = 4;

export function createRolloutDetail({ api, navigate, route }) {
  const rolloutId = route.id;
  let params = route.params;
  let rollout = null;
  let attempts = [];
  let spans = [];
  let spansFor = null; // the attempt id (or "all") the loaded spans belong to
  let spanSignature = "";
  let conversationStale = false;
  let shownSpan = null;
  let infoSignature = "";
  let timelineSignature = "";
  const attemptExceptions = new Map(); // attempt id -> exceptions (only for finished attempts)

  const header = h("div", { class: "detail-header" });
  const infoSlot = h("div", { class: "detail-info" });
  const timeline = h("div", { class: "attempt-timeline", id: "attempt-timeline" });
  const rewardSlot = h("div", { class: "reward-summary", id: "reward-summary" });
  const exceptionSlot = h("div", { class: "exception-summary", id: "exception-summary" });
  const detailsPanel = h("aside", { class: "span-panel", id: "span-panel", "aria-label": "Span details" }, h("p", { class: "muted" }, "Select a span to see all its attributes."));
  const waterfall = createWaterfall({ onSelect: (node) => showSpan(node) });
  const traceTab = h("button", { type: "button", role: "tab", class: "tab", on: { click: () => setTab("trace") } }, "Trace");
  const conversationTab = h("button", { type: "button", role: "tab", class: "tab", on: { click: () => setTab("conversation") } }, "Conversation");
  const tracePane = h("div", { class: "trace-pane", id: "trace-pane" }, waterfall.element, detailsPanel);
  const conversationPane = h("div", { class: "conversation-pane", id: "conversation-pane" });
  const spanStatus = h("p", { class: "muted", id: "span-status" });
  const spansSection = h(
    "section",
    { class: "panel spans-panel" },
    h("div", { class: "tabs", role: "tablist" }, traceTab, conversationTab, spanStatus),
    tracePane,
    conversationPane,
  );
  const notFound = h("div", { class: "not-found", hidden: true });
  const element = h(
    "div",
    { class: "view rollout-view" },
    h("p", { class: "crumbs" }, link("#/rollouts", "← Rollouts")),
    notFound,
    header,
    infoSlot,
    h("section", { class: "panel" }, h("h2", null, "Attempts"), timeline, exceptionSlot),
    rewardSlot,
    spansSection,
  );

  const tab = () => (params.get("tab") === "conversation" ? "conversation" : "trace");
  const wantedAttempt = () => params.get("attempt");

  function setParams(changes) {
    const next = Object.fromEntries(params.entries());
    for (const [key, value] of Object.entries(changes)) {
      if (value === null) delete next[key];
      else next[key] = value;
    }
    navigate(rolloutHash(rolloutId, next), { replace: true });
  }

  function setTab(name) {
    setParams({ tab: name === "trace" ? null : name });
  }

  function renderTabs() {
    const current = tab();
    traceTab.setAttribute("aria-selected", String(current === "trace"));
    conversationTab.setAttribute("aria-selected", String(current === "conversation"));
    tracePane.hidden = current !== "trace";
    conversationPane.hidden = current !== "conversation";
    if (current === "conversation" && conversationStale) {
      conversationStale = false;
      replace(conversationPane, renderConversation(waterfall.tree));
    }
  }

  function showSpan(node) {
    const key = nodeKey(node);
    if (key !== shownSpan) {
      shownSpan = key; // spans never change once stored: a refresh keeps the panel (and what is unfolded in it)
      replace(detailsPanel, spanDetails(node.span, { openConversation: () => setTab("conversation") }));
    }
    if (params.get("span") !== node.span.span_id) setParams({ span: node.span.span_id });
  }

  function selectedAttemptId() {
    const wanted = wantedAttempt();
    if (wanted === "all") return "all";
    if (wanted && attempts.some((attempt) => attempt.attempt_id === wanted)) return wanted;
    return attempts.length ? attempts[attempts.length - 1].attempt_id : null;
  }

  function spanQuery(attemptId, offset, limit = SPAN_PAGE) {
    const query = { rollout_id: rolloutId, sort_by: "sequence_id", sort_order: "asc", limit, offset };
    if (attemptId !== "all") query.attempt_id = attemptId;
    return query;
  }

  /**
   * Read the spans of `attemptId` not read yet; `prefetched` is the first page when it was already asked for.
   * When more pages follow, `onPartial()` shows what has arrived first, so a large rollout appears at once.
   */
  async function loadSpans(attemptId, signal, prefetched = null, onPartial = null) {
    if (spansFor !== attemptId) {
      spans = [];
      spansFor = attemptId;
    }
    const first = prefetched ?? (await api.spans(spanQuery(attemptId, spans.length), { signal }));
    if (first.total < spans.length) {
      spans = []; // spans were removed (retention): read them again from the start
      return loadSpans(attemptId, signal);
    }
    const offsets = [];
    for (let offset = spans.length + first.items.length; first.items.length && offset < first.total; offset += SPAN_PAGE) {
      offsets.push(offset);
    }
    if (offsets.length && onPartial) {
      spans = spans.concat(first.items);
      setText(spanStatus, `${spans.length} of ${first.total} spans loaded…`);
      onPartial();
      first.items = [];
    }
    const rest = [];
    for (let index = 0; index < offsets.length; index += PARALLEL_PAGES) {
      const pages = await Promise.all(offsets.slice(index, index + PARALLEL_PAGES).map((offset) => api.spans(spanQuery(attemptId, offset), { signal })));
      rest.push(...pages.flatMap((page) => page.items));
    }
    spans = spans.concat(first.items, rest);
    setText(spanStatus, `${spans.length} of ${Math.max(first.total, spans.length)} spans loaded`);
  }

  async function loadAttemptExceptions(signal) {
    const ended = attempts.filter((attempt) => ["failed", "timeout", "unresponsive"].includes(attempt.status) && !attemptExceptions.has(attempt.attempt_id));
    await Promise.all(
      ended.map(async (attempt) => {
        const fromMetadata = exceptionFromMetadata(attempt.metadata);
        const page = await api.spans({ rollout_id: rolloutId, attempt_id: attempt.attempt_id, name: EXCEPTION_SPAN, limit: 5 }, { signal });
        const found = page.items.flatMap(exceptionsOf);
        attemptExceptions.set(attempt.attempt_id, fromMetadata ? [fromMetadata, ...found] : found);
      }),
    );
  }

  async function refresh(signal) {
    // The rollout, its attempts and (on the first load) its spans are asked for together; the spans of the
    // latest attempt are the usual target, and are read again below if another attempt turns out to be meant.
    const wanted = wantedAttempt();
    const guess = wanted ?? (spansFor === null ? "latest" : null);
    const [answer, attemptPage, prefetched] = await Promise.all([
      api.rollout(rolloutId, { signal }),
      api.attempts(rolloutId, { sort_by: "sequence_id", sort_order: "asc", limit: 500 }, { signal }),
      guess !== null && spansFor !== guess ? api.spans(spanQuery(guess, 0, FIRST_PAGE), { signal }) : null,
    ]);
    if (answer === null) {
      notFound.hidden = false;
      replace(notFound, h("h1", null, "Rollout not found"), h("p", null, `The store has no rollout with id “${rolloutId}”. It may have been removed by retention.`));
      for (const node of [header, infoSlot, spansSection, rewardSlot]) node.hidden = true;
      timeline.parentElement.hidden = true;
      return;
    }
    rollout = answer;
    attempts = attemptPage.items;
    await loadAttemptExceptions(signal);
    renderHeader();
    renderTimeline();
    const attemptId = selectedAttemptId();
    if (attemptId === null) {
      spansSection.hidden = true;
      replace(rewardSlot);
      return;
    }
    spansSection.hidden = false;
    const latestId = attempts.length ? attempts[attempts.length - 1].attempt_id : null;
    const usable =
      prefetched &&
      (guess === attemptId || (guess === "latest" && attemptId === latestId && prefetched.items.every((span) => span.attempt_id === attemptId)));
    await loadSpans(attemptId, signal, usable && spansFor !== attemptId ? prefetched : null, () => renderSpans(false));
    renderSpans(true);
  }

  function renderSpans(complete) {
    const last = spans[spans.length - 1];
    const signature = `${spansFor}/${spans.length}/${last ? last.sequence_id : ""}`;
    if (signature !== spanSignature) {
      spanSignature = signature;
      const wantedSpan = params.get("span");
      const match = wantedSpan ? spans.find((span) => span.span_id === wantedSpan) : null;
      waterfall.setSpans(spans, match ? `${match.trace_id ?? ""}/${match.span_id ?? ""}` : undefined);
      conversationStale = true; // rendered when its tab is shown: it can be large
      renderRewards();
    }
    renderTabs();
    markPainted(complete ? "agl:rollout-painted" : "agl:rollout-first-spans");
  }

  function renderHeader() {
    const end = rollout.end_time ?? (TERMINAL_STATUSES.includes(rollout.status) ? null : serverNow());
    replace(
      header,
      h("h1", null, "Rollout ", h("span", { class: "mono" }, rollout.rollout_id), " ", statusBadge(rollout.status)),
      h(
        "p",
        { class: "detail-meta" },
        `mode ${rollout.mode ?? "—"} · started ${formatTime(rollout.start_time)} (${formatAge(rollout.start_time)})`,
        rollout.end_time ? ` · ended ${formatTime(rollout.end_time)}` : "",
        end !== null ? ` · ${formatDuration(end - rollout.start_time)}${rollout.end_time ? "" : " so far"}` : "",
        " · resources ",
        rollout.resources_id ? link(buildHash("/resources", { b: rollout.resources_id }), rollout.resources_id) : "—",
      ),
    );
    const config = rollout.config || {};
    const signature = JSON.stringify([rollout.input, config, rollout.metadata]);
    if (signature === infoSignature) return; // unchanged: keep what the reader unfolded or selected
    infoSignature = signature;
    replace(
      infoSlot,
      h(
        "div",
        { class: "grid-2" },
        h("section", { class: "panel" }, h("h2", null, "Input"), foldedText(rollout.input, { limit: 3000 })),
        h(
          "section",
          { class: "panel" },
          h("h2", null, "Configuration"),
          keyValueTable([
            ["timeout", config.timeout_seconds != null ? `${config.timeout_seconds} s` : "none"],
            ["unresponsive after", config.unresponsive_seconds != null ? `${config.unresponsive_seconds} s without heartbeat` : "never"],
            ["max attempts", String(config.max_attempts ?? 1)],
            ["retried on", (config.retry_condition || []).join(", ") || "never"],
          ]),
          h("h2", null, "Metadata"),
          keyValueTable(Object.entries(rollout.metadata || {}), { empty: "No metadata." }),
        ),
      ),
    );
  }

  function endReason(attempt) {
    const config = rollout.config || {};
    const exceptions = attemptExceptions.get(attempt.attempt_id) || [];
    if (attempt.status === "failed") {
      if (exceptions.length) return `${exceptions[0].type}${exceptions[0].message ? `: ${exceptions[0].message.split("\n")[0]}` : ""}`;
      return "failed without a recorded exception";
    }
    if (attempt.status === "timeout") return `exceeded the ${config.timeout_seconds ?? "?"} s timeout`;
    if (attempt.status === "unresponsive") return `no heartbeat for ${config.unresponsive_seconds ?? "?"} s`;
    if (attempt.status === "succeeded") return "finished";
    const beat = attempt.last_heartbeat_time ? `last heartbeat ${formatAge(attempt.last_heartbeat_time)}` : "no heartbeat yet";
    return `${attempt.status === "preparing" ? "being prepared" : "running"}, ${beat}`;
  }

  function renderTimeline() {
    if (!attempts.length) {
      replace(timeline, h("p", { class: "empty" }, rollout.status === "queuing" ? "No attempt yet: the rollout is waiting in the queue." : "This rollout has no attempt."));
      replace(exceptionSlot);
      return;
    }
    const active = attempts.some((attempt) => attempt.end_time === null || attempt.end_time === undefined);
    const signature = JSON.stringify([attempts, rollout.end_time, selectedAttemptId(), [...attemptExceptions.keys()]]);
    if (!active && signature === timelineSignature) return;
    timelineSignature = signature;
    const now = serverNow();
    const start = Math.min(rollout.start_time, ...attempts.map((attempt) => attempt.start_time));
    const end = Math.max(rollout.end_time ?? 0, ...attempts.map((attempt) => attempt.end_time ?? now), start + 1e-3);
    const selected = selectedAttemptId();
    const rows = attempts.map((attempt) => {
      const left = (100 * (attempt.start_time - start)) / (end - start);
      const stop = attempt.end_time ?? now;
      const width = Math.max(0.5, (100 * (stop - attempt.start_time)) / (end - start));
      return h(
        "button",
        {
          type: "button",
          class: `attempt-row${selected === attempt.attempt_id ? " selected" : ""}`,
          "aria-pressed": String(selected === attempt.attempt_id),
          dataset: { attemptId: attempt.attempt_id, status: attempt.status },
          on: { click: () => setParams({ attempt: attempt.attempt_id, span: null }) },
        },
        h("span", { class: "attempt-label" }, `#${attempt.sequence_id}`),
        h("span", { class: "attempt-track" }, h("span", { class: `attempt-bar status-${attempt.status}`, style: { left: `${left.toFixed(2)}%`, width: `${Math.min(width, 100 - left).toFixed(2)}%` } })),
        h(
          "span",
          { class: "attempt-text" },
          statusBadge(attempt.status),
          ` ${attempt.worker_id ? `runner ${attempt.worker_id}` : "no runner"} · ${formatDuration(stop - attempt.start_time)}${attempt.end_time ? "" : " so far"} · `,
          h("span", { class: "attempt-reason" }, endReason(attempt)),
        ),
      );
    });
    replace(
      timeline,
      rows,
      attempts.length > 1
        ? h("button", { type: "button", class: `link-button${selected === "all" ? " selected" : ""}`, on: { click: () => setParams({ attempt: "all", span: null }) } }, "Show the spans of all attempts")
        : null,
    );
    const failures = attempts.filter((attempt) => (attemptExceptions.get(attempt.attempt_id) || []).length);
    replace(
      exceptionSlot,
      failures.map((attempt) =>
        h("div", { class: "attempt-exception" }, h("h3", null, `Attempt #${attempt.sequence_id} ${attempt.status}`), attemptExceptions.get(attempt.attempt_id).map(exceptionBlock)),
      ),
    );
  }

  function renderRewards() {
    const rewards = spans.filter((span) => rewardOf(span));
    const final = finalReward(rewards);
    replace(
      rewardSlot,
      h(
        "section",
        { class: `panel reward-panel${rewards.length ? " has-reward" : ""}` },
        h("h2", null, "Reward"),
        rewards.length
          ? [
              h("p", { class: "final-reward" }, `Final reward ${formatScore(final)}`, h("span", { class: "muted" }, ` (${rewards.length} reward span${rewards.length === 1 ? "" : "s"}${spansFor === "all" ? " across attempts" : " in this attempt"})`)),
              h(
                "ul",
                { class: "reward-list" },
                rewards.map((span) =>
                  h(
                    "li",
                    null,
                    h("button", { type: "button", class: "link-button", on: { click: () => { setTab("trace"); waterfall.select(nodeKey({ span })); } } }, `★ ${formatScore(rewardOf(span).value)}`),
                    ` at ${formatTime(span.start_time)} · ${rewardOf(span).dimensions.map((d) => `${d.name} ${formatScore(d.value)}`).join(", ")}`,
                  ),
                ),
              ),
            ]
          : h("p", { class: "muted" }, "No reward recorded in these spans."),
      ),
    );
  }

  renderTabs();
  return {
    element,
    refresh: async (signal) => {
      try {
        await refresh(signal);
      } catch (error) {
        if (!isAbort(error) && error.name === "ApiError") {
          replace(notFound, h("p", { class: "error-note", role: "alert" }, `Cannot show this rollout: ${error.message}`));
          notFound.hidden = false;
          return;
        }
        throw error;
      }
    },
    update(next) {
      const attemptChanged = next.params.get("attempt") !== params.get("attempt");
      params = next.params;
      renderTabs();
      if (attemptChanged) spanSignature = "";
      return attemptChanged; // the caller refreshes when the data to show changed
    },
    sameTarget: (next) => next.view === "rollout" && next.id === rolloutId,
    dispose() {},
  };
}
