// A GRPO run's health on the Overview: the warnings that hold now (what is wrong, what to try), the end-of-run
// verdict, and each recent step's record (informative groups, entropy, tool choice, truncation, sampler gap, reward
// per kind of task). GRPO keeps the record in one bookkeeping rollout of the run, which every rollout it enqueues
// names in its metadata (`grpo.health_record`; agentlightning/algorithm/grpo/health_store.py). Hidden for runs
// without one.

import { h, replace } from "../dom.js";
import { formatPercent, formatScore } from "../format.js";

export const HEALTH_STEPS_SHOWN = 20;

const share = (value) => (typeof value === "number" ? formatPercent(100 * value) : "—");

/** The id of the health record the first of `rollouts` that names one names (newest first), or null. */
export function healthRecordId(rollouts) {
  for (const rollout of rollouts ?? []) {
    const id = rollout?.metadata?.grpo?.health_record;
    if (typeof id === "string" && id) return id;
  }
  return null;
}

/** The record's newest `limit` steps, newest first, as display strings per column. */
export function healthRows(record, limit = HEALTH_STEPS_SHOWN) {
  const steps = Array.isArray(record?.steps) ? record.steps : [];
  return steps
    .slice(-limit)
    .reverse()
    .map((step) => {
      const tools = step.tool_calls;
      const strata = step.reward_by_stratum && typeof step.reward_by_stratum === "object" ? Object.entries(step.reward_by_stratum) : [];
      return {
        step: String(step.step ?? "—"),
        reward: formatScore(step.reward_mean),
        informative: share(step.informative_share),
        entropy: formatScore(step.entropy),
        tools: tools && tools.top_tool ? `${tools.top_tool} ${share(tools.top_share)} · valid ${share(tools.validity)}` : "—",
        truncated: share(step.truncation_rate),
        gap: formatScore(step.sampler_gap_mean),
        strata: strata.length ? strata.map(([key, value]) => `${key} ${formatScore(value)}`).join(", ") : "—",
        warnings: Array.isArray(step.warnings) ? step.warnings.join(", ") : "",
      };
    });
}

const COLUMNS = [
  ["step", "Step"],
  ["reward", "Reward"],
  ["informative", "Informative groups"],
  ["entropy", "Entropy"],
  ["tools", "Top tool · valid calls"],
  ["truncated", "Truncated"],
  ["gap", "Sampler gap"],
  ["strata", "Reward per kind"],
  ["warnings", "Warnings"],
];

export function healthSection() {
  const warnings = h("div", { id: "health-warnings" });
  const verdict = h("div", { id: "health-verdict" });
  const table = h("div", { id: "health-steps" });
  const element = h(
    "section",
    { class: "panel health", id: "health" },
    h("h2", null, "Training health (GRPO)"),
    h("p", { class: "hint" }, `What each recent step of the GRPO run recorded (newest first, last ${HEALTH_STEPS_SHOWN}) and the warnings that hold now.`),
    warnings,
    verdict,
    table,
  );
  element.hidden = true;
  let signature = "";

  /** Show the run's health `record` (the bookkeeping rollout's `grpo_health`), or hide the panel for null. */
  function render(record) {
    const { updated, ...shown } = record ?? {};
    const next = JSON.stringify(record ? shown : null);
    if (next === signature) return;
    signature = next;
    element.hidden = !record;
    const active = Array.isArray(record?.warnings) ? record.warnings : [];
    element.classList.toggle("flagged", active.length > 0);
    if (!record) return;
    replace(
      warnings,
      active.length
        ? active.map((w) => h("p", { class: "warn-text health-warning", dataset: { code: String(w.code) } }, h("strong", null, `${w.code}: `), `${w.message} `, h("span", { class: "muted" }, w.fix)))
        : h("p", { class: "ok-text" }, "No known failure pattern at the last step."),
    );
    replace(verdict, record.verdict && record.verdict.message ? h("p", { class: record.verdict.direction === "up" ? "ok-text" : "warn-text" }, record.verdict.message) : null);
    const rows = healthRows(record);
    replace(
      table,
      rows.length
        ? h(
            "table",
            { class: "data health-steps" },
            h("thead", null, h("tr", null, COLUMNS.map(([, label]) => h("th", null, label)))),
            h("tbody", null, rows.map((row) => h("tr", null, COLUMNS.map(([key]) => h("td", { class: key === "warnings" && row.warnings ? "warn-text" : null }, row[key]))))),
          )
        : h("p", { class: "muted" }, "No step has finished yet."),
    );
  }

  return { element, render };
}
