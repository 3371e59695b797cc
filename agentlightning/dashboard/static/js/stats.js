// Aggregations behind the overview: throughput, reward moving averages, rewards per resources version, failure
// reasons and runner health. Pure functions, checked in tests against hand-computed values.

import { serverNow } from "./clock.js";

const isNumber = (value) => typeof value === "number" && Number.isFinite(value);

const NICE_BUCKETS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400];

/** A bucket width (seconds) that cuts `spanSeconds` into about `target` buckets. */
export function bucketSeconds(spanSeconds, target = 30) {
  const wanted = Math.max(spanSeconds, 1) / target;
  return NICE_BUCKETS.find((width) => width >= wanted) ?? NICE_BUCKETS[NICE_BUCKETS.length - 1];
}

/**
 * Finished rollouts per bucket of end time: {width, buckets: [{start, count}]}, contiguous (empty buckets
 * included) from the first to the last end time.
 */
export function throughput(endTimes, target = 30) {
  const times = endTimes.filter(isNumber).sort((a, b) => a - b);
  if (!times.length) return { width: 0, buckets: [] };
  const width = bucketSeconds(times[times.length - 1] - times[0], target);
  const first = Math.floor(times[0] / width) * width;
  const count = Math.floor((times[times.length - 1] - first) / width) + 1;
  const buckets = Array.from({ length: count }, (_, index) => ({ start: first + index * width, count: 0 }));
  for (const time of times) buckets[Math.floor((time - first) / width)].count += 1;
  return { width, buckets };
}

/** Trailing moving average of `values` over `window` points (shorter at the start). */
export function movingAverage(values, window) {
  const result = [];
  let sum = 0;
  for (let index = 0; index < values.length; index += 1) {
    sum += values[index];
    if (index >= window) sum -= values[index - window];
    result.push(sum / Math.min(index + 1, window));
  }
  return result;
}

/** Reward points {time, reward, rolloutId} ordered by time, with the moving average as `average`. */
export function rewardSeries(points, window = 20) {
  const ordered = points.filter((point) => isNumber(point.time) && isNumber(point.reward)).sort((a, b) => a.time - b.time);
  const averages = movingAverage(
    ordered.map((point) => point.reward),
    window,
  );
  return ordered.map((point, index) => ({ ...point, average: averages[index] }));
}

/**
 * Mean reward per resources version: [{resourcesId, mean, count, order}], in the order of `versions`
 * (a list of resources ids, oldest first); ids not in `versions` come last, "none" for rollouts without one. A
 * group's `step` is the first GRPO step among its points' `step`s (null when none has one).
 */
export function rewardByVersion(points, versions = []) {
  const groups = new Map();
  for (const point of points) {
    if (!isNumber(point.reward)) continue;
    const key = point.resourcesId ?? "none";
    const group = groups.get(key) ?? { resourcesId: key, sum: 0, count: 0, step: null };
    group.sum += point.reward;
    group.count += 1;
    if (Number.isInteger(point.step)) group.step = group.step === null ? point.step : Math.min(group.step, point.step);
    groups.set(key, group);
  }
  const rank = (id) => {
    const index = versions.indexOf(id);
    return index === -1 ? versions.length + (id === "none" ? 1 : 0) : index;
  };
  return [...groups.values()]
    .map((group) => ({ resourcesId: group.resourcesId, mean: group.sum / group.count, count: group.count, order: rank(group.resourcesId), step: group.step }))
    .sort((a, b) => a.order - b.order || a.resourcesId.localeCompare(b.resourcesId));
}

/** Why a rollout failed, as a short reason that groups well ("ValueError: bad input", "Attempt timed out"). */
export function failureReason(rollout, exception) {
  const attemptStatus = rollout?.attempt?.status;
  if (rollout?.status === "cancelled") return "Cancelled";
  if (exception) {
    const firstLine = String(exception.message ?? "").split("\n")[0].trim();
    const message = firstLine.length > 120 ? `${firstLine.slice(0, 119)}…` : firstLine;
    return message ? `${exception.type}: ${message}` : exception.type;
  }
  if (attemptStatus === "timeout") return "Attempt timed out";
  if (attemptStatus === "unresponsive") return "Runner stopped sending heartbeats (unresponsive)";
  if (!rollout?.attempt) return "Failed before any attempt ran";
  return "Failed without a recorded exception";
}

/** [{reason, count, rolloutIds}] sorted by count (then reason), from [{rollout, exception}]. */
export function groupFailures(failures) {
  const groups = new Map();
  for (const { rollout, exception } of failures) {
    const reason = failureReason(rollout, exception);
    const group = groups.get(reason) ?? { reason, count: 0, rolloutIds: [] };
    group.count += 1;
    group.rolloutIds.push(rollout.rollout_id);
    groups.set(reason, group);
  }
  return [...groups.values()].sort((a, b) => b.count - a.count || a.reason.localeCompare(b.reason));
}

export const STALE_HEARTBEAT_SECONDS = 60;

/** A worker's health: "stopped" (its runner said so in its last heartbeat), "alive", "stale" (no heartbeat for a
 * minute, on the store server's clock) or "never" (no heartbeat yet). */
export function heartbeatHealth(worker, now = serverNow(), staleAfter = STALE_HEARTBEAT_SECONDS) {
  if (isNumber(worker?.heartbeat_stats?.stopped_at)) return "stopped";
  const last = worker?.last_heartbeat_time;
  if (!isNumber(last)) return "never";
  return now - last > staleAfter ? "stale" : "alive";
}

/** Counts of workers by status and heartbeat health. */
export function runnerSummary(workers, now = serverNow()) {
  const summary = { total: workers.length, alive: 0, stale: 0, never: 0, stopped: 0, busy: 0, idle: 0, unknown: 0 };
  for (const worker of workers) {
    const health = heartbeatHealth(worker, now);
    summary[health] += 1;
    if (health === "stopped") continue; // its last status ("idle") no longer describes it
    const status = ["busy", "idle"].includes(worker.status) ? worker.status : "unknown";
    summary[status] += 1;
  }
  return summary;
}

/** Nested stats flattened to {"a.b": value}. */
export function flattenStats(value, prefix = "", out = {}) {
  if (value && typeof value === "object" && !Array.isArray(value)) {
    for (const [key, item] of Object.entries(value)) flattenStats(item, prefix ? `${prefix}.${key}` : key, out);
  } else if (prefix) out[prefix] = value;
  return out;
}

function findEntry(flat, patterns) {
  for (const pattern of patterns) {
    for (const [key, value] of Object.entries(flat)) if (pattern.test(key) && isNumber(value)) return [key, value];
  }
  return null;
}

function findNumber(flat, patterns) {
  return findEntry(flat, patterns)?.[1] ?? null;
}

const SIZE_UNITS = [
  [/(^|[._])(kb|kib)$/i, 1024],
  [/(^|[._])(mb|mib)$/i, 1024 ** 2],
  [/(^|[._])(gb|gib)$/i, 1024 ** 3],
];

/** A memory figure in bytes: its key's unit suffix (`_kb`, `_mb`, `_gb`, as `system_snapshot()` writes
 * `memory_used_mb`) says how to scale it; a key without one is in bytes. */
function findBytes(flat, patterns) {
  const entry = findEntry(flat, patterns);
  if (entry === null) return null;
  const [key, value] = entry;
  const unit = SIZE_UNITS.find(([pattern]) => pattern.test(key));
  return unit ? value * unit[1] : value;
}

/**
 * CPU and memory use from a heartbeat's system snapshot, whatever its exact layout:
 * {cpuPercent, memoryPercent, memoryUsed, memoryTotal, gpuPercent} (null when absent; memory in bytes).
 */
export function systemUsage(stats) {
  const flat = flattenStats(stats ?? {});
  const cpuPercent = findNumber(flat, [/cpu.*percent/i, /cpu.*(usage|util)/i]);
  let memoryPercent = findNumber(flat, [/mem.*percent/i, /mem.*(usage|util)/i]);
  const memoryUsed = findBytes(flat, [/^(?!gpu).*mem.*used/i, /rss/i]);
  const memoryTotal = findBytes(flat, [/^(?!gpu).*mem.*total/i]);
  if (memoryPercent === null && memoryUsed !== null && memoryTotal) memoryPercent = (100 * memoryUsed) / memoryTotal;
  const gpuPercent = findNumber(flat, [/gpu.*(percent|util)/i]);
  return { cpuPercent, memoryPercent, memoryUsed, memoryTotal, gpuPercent };
}

// Bookkeeping rollouts (an algorithm's records kept as rollouts, e.g. APO's checkpoint) are not work: their
// metadata holds this key, and the overview leaves them out of its counts and charts.
export const BOOKKEEPING_KEY = "agentlightning.bookkeeping";

export function isBookkeeping(rollout) {
  return Boolean(rollout && rollout.metadata && rollout.metadata[BOOKKEEPING_KEY]);
}

// Status counts without the bookkeeping rollouts seen so far (`known`: rollout id -> status).
export function withoutBookkeeping(byStatus, known) {
  const result = { ...byStatus };
  for (const status of known.values()) {
    if (status in result) result[status] = Math.max(0, result[status] - 1);
  }
  return result;
}

const MODE_ORDER = ["train", "val", "test", "none"];

/**
 * The server's whole-run groups (time buckets or resources versions, each with a `mode`) as one series per mode:
 * [{mode, points: [{x: xOf(group, index), y: mean_reward, label}]}], train first; groups without a reward are
 * left out (they have no mean).
 */
export function seriesByMode(groups, xOf) {
  const byMode = new Map();
  groups.forEach((group, index) => {
    if (!isNumber(group.mean_reward)) return;
    const mode = group.mode ?? "none";
    if (!byMode.has(mode)) byMode.set(mode, []);
    byMode.get(mode).push({ x: xOf(group, index), y: group.mean_reward, label: `${group.rewarded} rewarded of ${group.count}` });
  });
  const rank = (mode) => (MODE_ORDER.includes(mode) ? MODE_ORDER.indexOf(mode) : MODE_ORDER.length);
  return [...byMode.entries()].sort((a, b) => rank(a[0]) - rank(b[0]) || a[0].localeCompare(b[0])).map(([mode, points]) => ({ mode, points }));
}

/** Resources versions in the order their first rollout finished: resources id -> position (1, 2, ...). */
export function versionPositions(versions) {
  const firsts = new Map();
  for (const version of versions) {
    const id = version.resources_id ?? "none";
    firsts.set(id, Math.min(firsts.get(id) ?? Infinity, version.first_end_time ?? Infinity));
  }
  const ordered = [...firsts.entries()].sort((a, b) => a[1] - b[1] || a[0].localeCompare(b[0]));
  return new Map(ordered.map(([id], index) => [id, index + 1]));
}
