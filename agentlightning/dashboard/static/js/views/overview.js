// Overview: "is my training working?" — rollouts by status, throughput, reward over time and per resources
// version (recent rollouts here; the whole run from the server's aggregates), the drift rate of recent rollouts'
// token ids, runners alive, why rollouts fail, grouped and counted, and a GRPO run's health (views/health.js).

import { timeChart, barList } from "../charts.js";
import { h, replace, setText } from "../dom.js";
import { formatClock, formatCount, formatPercent, formatScore, formatTime } from "../format.js";
import { ROLLOUT_STATUSES, TERMINAL_STATUSES, buildHash, rolloutHash } from "../router.js";
import {
  groupFailures,
  isBookkeeping,
  rewardByVersion,
  rewardSeries,
  runnerSummary,
  throughput,
  withoutBookkeeping,
} from "../stats.js";
import { link } from "./common.js";
import { DRIFT_SAMPLE, driftSection } from "./drift.js";
import { healthRecordId, healthSection } from "./health.js";
import { wholeRunSection } from "./whole_run.js";

export const RECENT_FINISHED = 200;
const MOVING_WINDOW = 20;

export function createOverview({ api, facts }) {
  const tiles = new Map();
  const statusRow = h(
    "div",
    { class: "tiles", id: "status-tiles" },
    ROLLOUT_STATUSES.map((status) => {
      const count = h("span", { class: "tile-count" }, "…");
      const tile = h(
        "a",
        { class: `tile status-${status}`, href: buildHash("/rollouts", { status }), dataset: { status } },
        h("span", { class: "tile-label" }, status),
        count,
      );
      tiles.set(status, count);
      return tile;
    }),
  );
  const totals = h("div", { class: "kpis" });
  const throughputSlot = h("div", { class: "chart-slot", id: "throughput-chart" });
  const rewardSlot = h("div", { class: "chart-slot", id: "reward-chart" });
  const versionSlot = h("div", { class: "chart-slot", id: "reward-by-version" });
  const failureSlot = h("div", { id: "failure-reasons" });
  const wholeRun = wholeRunSection();
  const drift = driftSection();
  const health = healthSection();
  const runnersSlot = h("div", { id: "runner-summary" });
  const problems = h("div", { class: "view-problems" });
  const element = h(
    "div",
    { class: "view overview" },
    h("h1", null, "Overview"),
    problems,
    statusRow,
    totals,
    health.element,
    wholeRun.element,
    drift.element,
    h(
      "div",
      { class: "grid-2" },
      h("section", { class: "panel" }, h("h2", null, "Throughput"), h("p", { class: "hint" }, `Rollouts finished per interval (last ${RECENT_FINISHED} finished).`), throughputSlot),
      h("section", { class: "panel" }, h("h2", null, "Reward"), h("p", { class: "hint" }, `Final reward of each finished rollout and its moving average over ${MOVING_WINDOW}.`), rewardSlot),
      h("section", { class: "panel" }, h("h2", null, "Reward per resources version"), h("p", { class: "hint" }, "Mean final reward of recent rollouts, by the resources they ran with."), versionSlot),
      h("section", { class: "panel" }, h("h2", null, "Runners"), runnersSlot),
    ),
    h("section", { class: "panel" }, h("h2", null, "Failure reasons"), h("p", { class: "hint" }, `Among the last ${RECENT_FINISHED} finished rollouts.`), failureSlot),
  );

  let lastSignature = "";
  const bookkeeping = new Map(); // bookkeeping rollouts seen among the finished ones: id -> status

  async function refresh(signal) {
    const counts = await Promise.all(
      ROLLOUT_STATUSES.map((status) => api.rollouts({ status_in: status, limit: 0 }, { signal }).then((page) => page.total)),
    );
    // The whole run is drawn when the server's aggregates arrive (reading a long run takes it a few requests),
    // without holding up the rest of the page.
    const olderServer = (error) => {
      if (error.name === "ApiError" && error.status === 404) return null; // a store server older than this page
      throw error;
    };
    const wholeRunDrawn = Promise.all([
      api.progress({ buckets: 60 }, { signal }).catch(olderServer).then((progress) => wholeRun.render(progress)),
      api.drift({ rollouts: DRIFT_SAMPLE }, { signal }).catch(olderServer).then((answer) => drift.render(answer)),
    ]);
    try {
      const [recent, workers, versions] = await Promise.all([
        api.rollouts(
          { status_in: TERMINAL_STATUSES, sort_by: "end_time", sort_order: "desc", limit: RECENT_FINISHED },
          { signal },
        ),
        api.workers({ limit: 1000 }, { signal }),
        api.resources({ sort_by: "create_time", sort_order: "asc", limit: 200 }, { signal }),
      ]);
      for (const rollout of recent.items) if (isBookkeeping(rollout)) bookkeeping.set(rollout.rollout_id, rollout.status);
      const finished = recent.items.filter((rollout) => !isBookkeeping(rollout));
      const byStatus = Object.fromEntries(ROLLOUT_STATUSES.map((status, index) => [status, counts[index]]));
      renderCounts(withoutBookkeeping(byStatus, bookkeeping));
      renderRunners(workers.items);
      renderThroughput(finished);
      await renderHealth(recent.items, signal);
      const rolloutFacts = await facts.getAll(finished, signal);
      const signature = JSON.stringify([finished.map((r) => [r.rollout_id, r.status]), rolloutFacts.map((f) => f?.reward)]);
      if (signature !== lastSignature) {
        lastSignature = signature;
        renderRewards(finished, rolloutFacts, versions.items);
        renderFailures(finished, rolloutFacts);
      }
    } catch (error) {
      await wholeRunDrawn.catch(() => null); // one failure to report, not an unhandled second one
      throw error;
    }
    await wholeRunDrawn;
  }

  async function renderHealth(rollouts, signal) {
    const id = healthRecordId(rollouts);
    if (!id) return health.render(null);
    const record = await api.rollout(id, { signal }).catch((error) => {
      if (error.name === "ApiError" && error.status === 404) return null; // the record was removed
      throw error;
    });
    health.render(record?.metadata?.grpo_health ?? null);
  }

  function renderCounts(byStatus) {
    for (const [status, node] of tiles) setText(node, formatCount(byStatus[status]));
    const total = Object.values(byStatus).reduce((sum, value) => sum + value, 0);
    const finished = byStatus.succeeded + byStatus.failed + byStatus.cancelled;
    const active = byStatus.preparing + byStatus.running;
    const waiting = byStatus.queuing + byStatus.requeuing;
    replace(
      totals,
      kpi("Rollouts", formatCount(total)),
      kpi("Success rate", finished ? formatPercent((100 * byStatus.succeeded) / finished) : "—", `${formatCount(byStatus.succeeded)} of ${formatCount(finished)} finished`),
      kpi("In progress", formatCount(active)),
      kpi("Waiting", formatCount(waiting)),
    );
  }

  function renderRunners(workers) {
    const summary = runnerSummary(workers);
    replace(
      runnersSlot,
      h(
        "div",
        { class: "kpis compact" },
        kpi("Alive", formatCount(summary.alive), "heartbeat within a minute"),
        kpi("Busy", formatCount(summary.busy)),
        kpi("Idle", formatCount(summary.idle)),
        kpi("Stale", formatCount(summary.stale + summary.never), "no recent heartbeat"),
      ),
      link("#/runners", "All runners →"),
    );
  }

  let throughputSignature = "";
  function renderThroughput(recent) {
    const ends = recent.map((rollout) => rollout.end_time);
    const signature = JSON.stringify(ends);
    if (signature === throughputSignature) return; // keep the chart (and its hover read-out) when nothing finished
    throughputSignature = signature;
    const { width, buckets } = throughput(ends);
    const perMinute = width ? 60 / width : 1;
    replace(
      throughputSlot,
      timeChart({
        label: "Rollouts finished over time",
        series: [{ name: "finished", className: "series-throughput", style: "bars", points: buckets.map((bucket) => ({ x: bucket.start, y: bucket.count })) }],
        barWidth: width,
        xFormat: (value, long, span) => (long ? formatTime(value) : formatClock(value, span < 600)),
        yFormat: (value) => formatCount(Math.round(value)),
        yInteger: true,
        empty: "No rollout has finished yet.",
      }),
      buckets.length ? h("p", { class: "hint" }, `Bucket: ${width} s · latest rate ≈ ${formatScore(buckets[buckets.length - 1].count * perMinute)} per minute`) : null,
    );
  }

  function renderRewards(recent, rolloutFacts, versions) {
    const points = [];
    recent.forEach((rollout, index) => {
      const reward = rolloutFacts[index]?.reward;
      if (typeof reward === "number") points.push({ time: rollout.end_time, reward, rolloutId: rollout.rollout_id, resourcesId: rollout.resources_id, step: rollout.metadata?.grpo?.step });
    });
    const series = rewardSeries(points, MOVING_WINDOW);
    replace(
      rewardSlot,
      timeChart({
        label: "Reward over time",
        series: [
          { name: "reward", className: "series-reward-points", style: "dots", points: series.map((p) => ({ x: p.time, y: p.reward, label: p.rolloutId })) },
          { name: `moving average (${MOVING_WINDOW})`, className: "series-reward-average", style: "line", points: series.map((p) => ({ x: p.time, y: p.average })) },
        ],
        xFormat: (value, long, span) => (long ? formatTime(value) : formatClock(value, span < 600)),
        yFormat: formatScore,
        empty: "No finished rollout has a reward yet.",
      }),
      series.length
        ? h("p", { class: "hint", id: "reward-latest" }, `Latest moving average: ${formatScore(series[series.length - 1].average)} over ${formatCount(Math.min(series.length, MOVING_WINDOW))} rollouts`)
        : null,
    );
    const order = versions.map((version) => version.resources_id);
    const groups = rewardByVersion(points, order);
    replace(
      versionSlot,
      barList({
        label: "Mean reward per resources version",
        bars: groups.map((group) => ({
          label: `${group.resourcesId === "none" ? "(no resources)" : group.resourcesId}${group.step === null ? "" : ` · GRPO step ${group.step}`}`,
          value: group.mean,
          note: `${formatCount(group.count)} rollout${group.count === 1 ? "" : "s"}`,
          title: group.order < order.length ? `version ${group.order + 1} of ${order.length}` : null,
        })),
        format: formatScore,
        empty: "No rewarded rollout yet.",
      }),
    );
  }

  function renderFailures(recent, rolloutFacts) {
    const failures = [];
    recent.forEach((rollout, index) => {
      if (rollout.status === "failed" || rollout.status === "cancelled") failures.push({ rollout, exception: rolloutFacts[index]?.exception ?? null });
    });
    const groups = groupFailures(failures);
    if (!groups.length) {
      replace(failureSlot, h("p", { class: "muted" }, "No failed rollout among them."));
      return;
    }
    replace(
      failureSlot,
      h(
        "table",
        { class: "data failures" },
        h("thead", null, h("tr", null, h("th", null, "Reason"), h("th", { class: "num" }, "Rollouts"), h("th", null, "Examples"))),
        h(
          "tbody",
          null,
          groups.map((group) =>
            h(
              "tr",
              null,
              h("td", { class: "reason" }, group.reason),
              h("td", { class: "num" }, formatCount(group.count)),
              h("td", null, group.rolloutIds.slice(0, 3).map((id) => [link(rolloutHash(id), id), " "])),
            ),
          ),
        ),
      ),
    );
  }

  return { element, refresh, update() {}, dispose() {}, problems };
}

function kpi(label, value, hint) {
  return h("div", { class: "kpi", title: hint || null }, h("span", { class: "kpi-value" }, value), h("span", { class: "kpi-label" }, label));
}

