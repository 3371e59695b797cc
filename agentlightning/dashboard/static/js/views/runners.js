// Runners: each worker's status, the rollout it is on, how long since its last heartbeat (ticking every
// second between refreshes), and CPU/memory from the system snapshot it sends with its heartbeats.

import { h, reconcile, replace, setText } from "../dom.js";
import { formatAge, formatBytes, formatCount, formatPercent, formatTime } from "../format.js";
import { rolloutHash } from "../router.js";
import { flattenStats, heartbeatHealth, runnerSummary, systemUsage } from "../stats.js";
import { keyValueTable, statusBadge } from "./common.js";
import { serverNow } from "../clock.js";

function meter(percent) {
  if (percent === null) return h("span", { class: "muted" }, "—");
  const clamped = Math.max(0, Math.min(100, percent));
  return h(
    "span",
    { class: "meter", title: formatPercent(percent) },
    h("span", { class: "meter-track" }, h("span", { class: `meter-fill${clamped > 90 ? " high" : ""}`, style: { width: `${clamped.toFixed(1)}%` } })),
    h("span", { class: "meter-text" }, formatPercent(percent)),
  );
}

export function createRunners({ api }) {
  const summary = h("p", { class: "summary", id: "runner-counts" });
  const body = h("tbody", { id: "runner-rows" });
  const empty = h("p", { class: "empty", hidden: true }, "No runner has registered with this store yet. Runners appear here after their first heartbeat or claim.");
  const element = h(
    "div",
    { class: "view runners-view" },
    h("h1", null, "Runners"),
    summary,
    h(
      "div",
      { class: "table-scroll" },
      h(
        "table",
        { class: "data runners", id: "runner-table" },
        h("thead", null, h("tr", null, ["Runner", "Status", "Current rollout", "Heartbeat", "Last claim", "CPU", "Memory", "Snapshot"].map((label) => h("th", { scope: "col" }, label)))),
        body,
      ),
    ),
    empty,
  );
  let workers = [];
  const ticker = setInterval(() => tick(), 1000);

  function tick() {
    const now = serverNow();
    for (const row of body.children) {
      const worker = row.worker_;
      if (!worker) continue;
      setText(row.ageCell_, formatAge(worker.last_heartbeat_time, now));
      row.dataset.health = heartbeatHealth(worker, now);
    }
  }

  function createRow(worker) {
    const row = h("tr", { class: "runner-row" });
    row.cells_ = {};
    for (const key of ["id", "status", "rollout", "heartbeat", "claim", "cpu", "memory", "stats"]) {
      row.cells_[key] = h("td", { class: `col-${key}` });
      row.append(row.cells_[key]);
    }
    row.ageCell_ = h("span", { class: "age" });
    updateRow(row, worker);
    return row;
  }

  function updateRow(row, worker) {
    const cells = row.cells_;
    const previous = row.worker_;
    row.worker_ = worker;
    setText(cells.id, worker.worker_id);
    const shownStatus = heartbeatHealth(worker) === "stopped" ? "stopped" : worker.status;
    if (cells.status.dataset.value !== shownStatus) {
      cells.status.dataset.value = shownStatus;
      replace(cells.status, statusBadge(shownStatus));
    }
    if (!previous || previous.current_rollout_id !== worker.current_rollout_id || previous.current_attempt_id !== worker.current_attempt_id) {
      replace(
        cells.rollout,
        worker.current_rollout_id
          ? [h("a", { href: rolloutHash(worker.current_rollout_id), class: "mono" }, worker.current_rollout_id), worker.current_attempt_id ? h("span", { class: "muted" }, ` ${worker.current_attempt_id}`) : null]
          : h("span", { class: "muted" }, "—"),
      );
    }
    const now = serverNow();
    row.dataset.health = heartbeatHealth(worker, now);
    setText(row.ageCell_, formatAge(worker.last_heartbeat_time, now));
    if (!cells.heartbeat.firstChild) cells.heartbeat.append(row.ageCell_, h("span", { class: "stale-note" }, " stale"));
    cells.heartbeat.title = formatTime(worker.last_heartbeat_time);
    setText(cells.claim, worker.last_dequeue_time ? formatAge(worker.last_dequeue_time, now) : "never");
    const statsKey = JSON.stringify(worker.heartbeat_stats ?? null);
    if (cells.stats.dataset.value !== statsKey) {
      cells.stats.dataset.value = statsKey;
      const usage = systemUsage(worker.heartbeat_stats);
      replace(cells.cpu, meter(usage.cpuPercent));
      replace(
        cells.memory,
        meter(usage.memoryPercent),
        usage.memoryUsed !== null && usage.memoryTotal !== null && usage.memoryTotal > 1024 ? h("span", { class: "muted" }, ` ${formatBytes(usage.memoryUsed)} of ${formatBytes(usage.memoryTotal)}`) : null,
      );
      const flat = Object.entries(flattenStats(worker.heartbeat_stats ?? {}));
      if (!flat.length) replace(cells.stats, h("span", { class: "muted" }, "none"));
      else {
        // The <details> stays (open or closed, as the reader left it); only its contents follow the heartbeats.
        let details = cells.stats.querySelector("details");
        if (!details) {
          details = h("details", null, h("summary"), h("div"));
          replace(cells.stats, details);
        }
        setText(details.firstChild, `${flat.length} values`);
        replace(details.lastChild, keyValueTable(flat));
      }
    }
  }

  async function refresh(signal) {
    const page = await api.workers({ sort_by: "worker_id", limit: 1000 }, { signal });
    workers = page.items;
    const counts = runnerSummary(workers);
    setText(
      summary,
      `${formatCount(counts.total)} runner${counts.total === 1 ? "" : "s"} · ${formatCount(counts.alive)} alive · ${formatCount(counts.busy)} busy · ${formatCount(counts.idle)} idle · ${formatCount(counts.stopped)} stopped · ${formatCount(counts.stale + counts.never)} without a recent heartbeat`,
    );
    empty.hidden = workers.length > 0;
    reconcile(body, workers, (worker) => worker.worker_id, createRow, updateRow);
  }

  return { element, refresh, update: () => true, dispose: () => clearInterval(ticker) };
}
