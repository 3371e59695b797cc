// The whole run on the Overview: the mean final reward of every finished rollout per time bucket and per resources
// version, one line per mode (train, val, test), from aggregates the store server computes
// (agentlightning/dashboard/progress.py): a run of thousands of rollouts shows its whole curve without the page
// reading them. For rewards of 0 or 1 the mean is the accuracy.

import { timeChart } from "../charts.js";
import { h, replace } from "../dom.js";
import { formatClock, formatCount, formatPercent, formatScore, formatTime } from "../format.js";
import { seriesByMode, versionPositions } from "../stats.js";

const modeClass = (mode) => `series-mode series-mode-${String(mode).replace(/[^a-z_]/gi, "")}`;

function lines(seriesList) {
  return seriesList.flatMap(({ mode, points }) => [
    { name: `${mode} (mean reward)`, className: modeClass(mode), style: "line", points },
    { name: `${mode} points`, className: `${modeClass(mode)} series-hidden-key`, style: "dots", points },
  ]);
}

export function wholeRunSection() {
  const summary = h("p", { class: "hint", id: "whole-run-summary" });
  const timeSlot = h("div", { class: "chart-slot", id: "whole-run-chart" });
  const versionSlot = h("div", { class: "chart-slot", id: "whole-run-versions" });
  const versionTitle = h("h3", { id: "whole-run-versions-title" }, "Mean reward per resources version");
  const element = h(
    "section",
    { class: "panel whole-run", id: "whole-run" },
    h("h2", null, "Whole run"),
    summary,
    h(
      "div",
      { class: "grid-2" },
      h("div", null, h("h3", null, "Mean reward over time"), timeSlot),
      h("div", null, versionTitle, versionSlot),
    ),
  );
  let signature = "";

  /** Show the server's aggregates (`progress`: its answer, or null when the server has none to give). */
  function render(progress) {
    const next = JSON.stringify(progress);
    if (next === signature) return; // keep the charts (and their hover read-outs) when nothing changed
    signature = next;
    if (progress === null) {
      replace(summary, "This store server does not compute whole-run figures (it is older than this page); the charts below cover the recent rollouts.");
      replace(timeSlot);
      replace(versionSlot);
      return;
    }
    const totals = progress.totals;
    const reading = progress.complete ? "" : ` Reading the run: ${formatCount(totals.count)} of ${formatCount(progress.finished)} finished rollouts so far…`;
    replace(
      summary,
      totals.count
        ? `${formatCount(totals.count)} finished rollouts · ${formatCount(totals.rewarded)} with a reward · mean reward ${formatScore(totals.mean_reward)} · reward above 0: ${totals.positive_share === null ? "—" : formatPercent(100 * totals.positive_share)} (the accuracy when rewards are 0 or 1).${reading}`
        : `No rollout has finished yet.${reading}`,
    );
    const width = progress.bucket_seconds ?? 60;
    replace(
      timeSlot,
      timeChart({
        label: "Mean reward per time bucket over the whole run",
        series: lines(seriesByMode(progress.buckets, (bucket) => bucket.start)),
        xFormat: (value, long, span) => (long ? formatTime(value) : formatClock(value, span < 600)),
        yFormat: formatScore,
        empty: "No finished rollout has a reward yet.",
      }),
      progress.buckets.length ? h("p", { class: "hint" }, `Bucket: ${width} s (by end time).`) : null,
    );
    if (progress.steps?.length) {
      renderSteps(progress.steps);
      return;
    }
    replace(versionTitle, "Mean reward per resources version");
    const positions = versionPositions(progress.versions);
    const ids = new Map([...positions.entries()].map(([id, position]) => [position, id]));
    replace(
      versionSlot,
      timeChart({
        label: "Mean reward per resources version over the whole run",
        series: lines(seriesByMode(progress.versions, (version) => positions.get(version.resources_id ?? "none"))),
        xFormat: (value, long) => (long ? `version ${value}: ${ids.get(value) ?? "?"}` : `v${value}`),
        yFormat: formatScore,
        xInteger: true,
        xPad: 0.5,
        empty: "No finished rollout has a reward yet.",
      }),
      positions.size ? h("p", { class: "hint" }, `${formatCount(positions.size)} version${positions.size === 1 ? "" : "s"}, in the order their first rollout finished.`) : null,
    );
  }

  /** A GRPO run: the mean reward per training step (evaluations at the step whose weights they ran with). */
  function renderSteps(steps) {
    replace(versionTitle, "Mean reward per GRPO step");
    const count = new Set(steps.map((group) => group.step)).size;
    replace(
      versionSlot,
      timeChart({
        label: "Mean reward per GRPO step over the whole run",
        series: lines(seriesByMode(steps, (group) => group.step)),
        xFormat: (value, long) => (long ? `GRPO step ${value}` : `step ${value}`),
        yFormat: formatScore,
        xInteger: true,
        xPad: 0.5,
        empty: "No finished rollout has a reward yet.",
      }),
      h("p", { class: "hint" }, `${formatCount(count)} step${count === 1 ? "" : "s"}; evaluations (val) are shown at the step whose weights they ran with.`),
    );
  }

  return { element, render };
}
