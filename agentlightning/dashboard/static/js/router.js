// Routes live in the URL fragment ("#/rollouts?status=failed&page=2"), so filters survive a reload and can be
// shared. Parsing is forgiving: whatever is malformed is dropped and reported, never thrown.

export const ROLLOUT_STATUSES = ["queuing", "preparing", "running", "requeuing", "succeeded", "failed", "cancelled"];
export const TERMINAL_STATUSES = ["succeeded", "failed", "cancelled"];
export const ROLLOUT_MODES = ["train", "val", "test"];
export const ROLLOUT_SORT_FIELDS = ["start_time", "end_time", "rollout_id", "status", "mode", "resources_id"];
export const PAGE_SIZES = [25, 50, 100, 200];
export const DEFAULT_PAGE_SIZE = 50;

function safeDecode(text) {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

function safeParams(query) {
  try {
    return new URLSearchParams(query);
  } catch {
    return new URLSearchParams();
  }
}

/** {view, id, params} of a location hash. Unknown paths give view "notfound". */
export function parseRoute(hash) {
  const text = (hash || "").replace(/^#/, "");
  const queryAt = text.indexOf("?");
  const path = queryAt === -1 ? text : text.slice(0, queryAt);
  const params = safeParams(queryAt === -1 ? "" : text.slice(queryAt + 1));
  const parts = path.split("/").filter(Boolean);
  if (parts.length === 0 || (parts.length === 1 && parts[0] === "overview")) return { view: "overview", id: null, params };
  if (parts[0] === "rollouts" && parts.length === 1) return { view: "rollouts", id: null, params };
  if (parts[0] === "rollouts" && parts.length === 2) return { view: "rollout", id: safeDecode(parts[1]), params };
  if (parts[0] === "resources" && parts.length === 1) return { view: "resources", id: null, params };
  if (parts[0] === "runners" && parts.length === 1) return { view: "runners", id: null, params };
  return { view: "notfound", id: null, params, path };
}

/** The hash of a view with parameters (null/empty values and defaults are left out). */
export function buildHash(path, params) {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params || {})) {
    if (value === null || value === undefined || value === "" || (Array.isArray(value) && value.length === 0)) continue;
    search.set(key, Array.isArray(value) ? value.join(",") : String(value));
  }
  const query = search.toString();
  return `#${path}${query ? `?${query}` : ""}`;
}

export const rolloutHash = (rolloutId, params) => buildHash(`/rollouts/${encodeURIComponent(rolloutId)}`, params);

function parseTime(text) {
  if (!/^\d{9,11}(\.\d+)?$/.test(text)) return null;
  const value = Number(text);
  return Number.isFinite(value) ? value : null;
}

/**
 * The rollout table's state from URL parameters: {filters, problems}. Each invalid parameter is left out and
 * named in `problems` ("status=bogus is not a rollout status").
 */
export function parseRolloutFilters(params) {
  const problems = [];
  const filters = {
    status: [],
    mode: null,
    q: "",
    from: null,
    to: null,
    sort: "start_time",
    order: "desc",
    page: 1,
    size: DEFAULT_PAGE_SIZE,
  };
  const status = params.get("status");
  if (status !== null && status !== "") {
    for (const item of status.split(",")) {
      if (ROLLOUT_STATUSES.includes(item)) {
        if (!filters.status.includes(item)) filters.status.push(item);
      } else problems.push(`status=${item} is not a rollout status`);
    }
  }
  const mode = params.get("mode");
  if (mode !== null && mode !== "") {
    if (ROLLOUT_MODES.includes(mode)) filters.mode = mode;
    else problems.push(`mode=${mode} is not one of ${ROLLOUT_MODES.join(", ")}`);
  }
  const q = params.get("q");
  if (q) {
    if (q.length <= 200) filters.q = q;
    else problems.push("q is longer than 200 characters");
  }
  for (const bound of ["from", "to"]) {
    const text = params.get(bound);
    if (text === null || text === "") continue;
    const value = parseTime(text);
    if (value === null) problems.push(`${bound}=${text} is not a Unix time in seconds`);
    else filters[bound] = value;
  }
  if (filters.from !== null && filters.to !== null && filters.from > filters.to) {
    problems.push("from is after to; the time range is ignored");
    filters.from = null;
    filters.to = null;
  }
  const sort = params.get("sort");
  if (sort !== null && sort !== "") {
    if (ROLLOUT_SORT_FIELDS.includes(sort)) filters.sort = sort;
    else problems.push(`sort=${sort} is not a sortable column`);
  }
  const order = params.get("order");
  if (order !== null && order !== "") {
    if (order === "asc" || order === "desc") filters.order = order;
    else problems.push(`order=${order} must be asc or desc`);
  }
  const page = params.get("page");
  if (page !== null && page !== "") {
    if (/^\d{1,7}$/.test(page) && Number(page) >= 1) filters.page = Number(page);
    else problems.push(`page=${page} is not a page number`);
  }
  const size = params.get("size");
  if (size !== null && size !== "") {
    if (PAGE_SIZES.includes(Number(size))) filters.size = Number(size);
    else problems.push(`size=${size} must be one of ${PAGE_SIZES.join(", ")}`);
  }
  if ((filters.from !== null || filters.to !== null) && filters.sort !== "start_time") {
    problems.push(`with a time range the table is sorted by start time (sort=${filters.sort} ignored)`);
    filters.sort = "start_time";
  }
  return { filters, problems };
}

/** URL parameters of a filter state (defaults are left out, so URLs stay short). */
export function rolloutFilterParams(filters) {
  return {
    status: filters.status.length ? filters.status : null,
    mode: filters.mode,
    q: filters.q || null,
    from: filters.from,
    to: filters.to,
    sort: filters.sort !== "start_time" ? filters.sort : null,
    order: filters.order !== "desc" ? filters.order : null,
    page: filters.page > 1 ? filters.page : null,
    size: filters.size !== DEFAULT_PAGE_SIZE ? filters.size : null,
  };
}
