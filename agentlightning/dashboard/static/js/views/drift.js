// The run's drift rate on the Overview: among the newest finished rollouts with LLM calls, how many calls continued
// a conversation without extending its token ids exactly (they train alone, on sequences the model never produced
// as such). The store server computes it with the stitcher training uses (agentlightning/dashboard/drift.py); a
// rate above 0 is flagged, with the rollouts to look at.

import { h, replace } from "../dom.js";
import { formatCount, formatPercent } from "../format.js";
import { rolloutHash } from "../router.js";
import { link } from "./common.js";

export const DRIFT_SAMPLE = 100;

const plural = (count, word) => `${formatCount(count)} ${word}${count === 1 ? "" : "s"}`;

function basis(drift) {
  const sources = Object.entries(drift.sources ?? {})
    .map(([source, count]) => `${formatCount(count)} from ${source === "proxy" ? "the LLM proxy's spans" : "client-side spans"}`)
    .join(", ");
  return (
    `Based on the newest ${plural(drift.rollouts, "finished rollout")} with LLM calls carrying token ids ` +
    `(${plural(drift.calls, "call")}${sources ? `; ${sources}` : ""}), among ${plural(drift.scanned, "finished rollout")} looked at.`
  );
}

export function driftSection() {
  const value = h("span", { class: "kpi-value", id: "drift-rate" }, "…");
  const summary = h("p", { class: "hint", id: "drift-summary" });
  const flag = h("div", { id: "drift-flag" });
  const element = h(
    "section",
    { class: "panel drift", id: "drift" },
    h("h2", null, "Token continuity (drift)"),
    h("div", { class: "kpis compact" }, h("div", { class: "kpi" }, value, h("span", { class: "kpi-label" }, "drift rate"))),
    summary,
    flag,
  );
  let signature = "";

  /** Show the server's answer (`drift`), or null when the server does not compute it. */
  function render(drift) {
    const { seconds, span_reads: reads, ...shown } = drift ?? {}; // what a request cost changes every time
    const next = JSON.stringify(drift === null ? null : shown);
    if (next === signature) return;
    signature = next;
    element.classList.toggle("flagged", Boolean(drift && drift.drifted));
    if (drift === null) {
      replace(value, "—");
      replace(summary, "This store server does not measure the drift rate (it is older than this page).");
      replace(flag);
      return;
    }
    const reading = drift.complete ? "" : ` Reading: ${plural(drift.pending, "rollout")} still to read…`;
    if (!drift.rollouts) {
      replace(value, "—");
      replace(summary, `No finished rollout has LLM calls with prompt and response token ids yet.${reading}`);
      replace(flag);
      return;
    }
    replace(value, drift.drift_rate === null ? "—" : formatPercent(100 * drift.drift_rate));
    const counts = drift.continuations
      ? `${formatCount(drift.drifted)} of ${plural(drift.continuations, "call")} that continued a conversation drifted, in ${formatCount(drift.rollouts_drifted)} of ${plural(drift.rollouts, "rollout")}. `
      : "No call continued an earlier one (one call per conversation): nothing can drift. ";
    replace(summary, counts, basis(drift), reading);
    if (!drift.drifted) {
      replace(flag, h("p", { class: "ok-text" }, drift.continuations ? "Every continuation extends its conversation's token ids exactly: each conversation trains as one sequence." : ""));
      return;
    }
    replace(
      flag,
      h(
        "p",
        { class: "warn-text drift-warning" },
        "Calls drifted: their prompt ids do not extend the conversation they continue (a chat template that re-renders the history, a retokenized tool call), so each trains alone, on a token sequence the model never produced as such. Open a rollout's Conversation to see which call and where its ids depart.",
      ),
      h(
        "p",
        { class: "drifted-rollouts" },
        "Drifted: ",
        drift.drifted_rollouts.map((item) => [
          link(rolloutHash(item.rollout_id, { tab: "conversation" }), item.rollout_id),
          ` (${formatCount(item.drifted)} of ${formatCount(item.continuations)}) `,
        ]),
      ),
    );
  }

  return { element, render };
}
