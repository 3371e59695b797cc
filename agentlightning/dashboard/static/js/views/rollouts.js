// Rollouts: a table with server-side filtering (status, mode, time range, id search), sorting and pagination,
// all through the query API, so it stays fast with 100,000 rollouts. The filters live in the URL; a refresh
// updates rows in place, so scroll position and focus survive.

import { isAbort } from "../api.js";
import { h, reconcile, replace, setText } from "../dom.js";
import { formatAge, formatCount, formatDuration, formatScore, formatTime, fromLocalInput, preview, toLocalInput } from "../format.js";
import {
  PAGE_SIZES,
  ROLLOUT_MODES,
  ROLLOUT_STATUSES,
  TERMINAL_STATUSES,
  buildHash,
  parseRolloutFilters,
  rolloutFilterParams,
  rolloutHash,
} from "../router.js";
import { markPainted } from "../perf.js";
import { locateTimeBlock, pageWindow } from "../timerange.js";
import { pager, statusBadge } from "./common.js";
import { serverNow } from "../clock.js";

const COLUMNS = [
  { key: "rollout_id", label: "Rollout", sort: "rollout_id" },
  { key: "status", label: "Status", sort: "status" },
  { key: "mode", label: "Mode", sort: "mode" },
  { key: "attempt", label: "Attempt" },
  { key: "worker", label: "Runner" },
  { key: "start_time", label: "Started", sort: "start_time" },
  { key: "duration", label: "Duration", sort: "end_time", sortTitle: "Sort by end time" },
  { key: "resources_id", label: "Resources", sort: "resources_id" },
  { key: "reward", label: "Reward", numeric: true },
  { key: "input", label: "Input" },
];

const PRESETS = [
  ["15 min", 15 * 60],
  ["1 h", 3600],
  ["24 h", 86400],
];

export function createRollouts({ api, facts, navigate, route }) {
  let { filters, problems } = parseRolloutFilters(route.params);
  let block = null; // cached time-range block: {key, total, start, end}

  const problemBox = h("div", { class: "view-problems", id: "url-problems" });
  const summary = h("p", { class: "summary", id: "rollout-summary", "aria-live": "polite" }, "Loading…");
  const statusBoxes = ROLLOUT_STATUSES.map((status) =>
    h("input", { type: "checkbox", value: status, name: "status", on: { change: () => apply({ status: checkedStatuses(), page: 1 }) } }),
  );
  const modeSelect = h(
    "select",
    { name: "mode", "aria-label": "Mode", on: { change: () => apply({ mode: modeSelect.value || null, page: 1 }) } },
    h("option", { value: "" }, "any mode"),
    ROLLOUT_MODES.map((mode) => h("option", { value: mode }, mode)),
  );
  let searchTimer = null;
  const search = h("input", {
    type: "search",
    name: "q",
    placeholder: "Rollout id contains…",
    "aria-label": "Search rollout ids",
    autocomplete: "off",
    spellcheck: "false",
    on: {
      input: () => {
        clearTimeout(searchTimer);
        searchTimer = setTimeout(() => apply({ q: search.value.trim().slice(0, 200), page: 1 }, true), 300);
      },
    },
  });
  const fromInput = h("input", { type: "datetime-local", name: "from", "aria-label": "Started from", on: { change: () => applyRange() } });
  const toInput = h("input", { type: "datetime-local", name: "to", "aria-label": "Started until", on: { change: () => applyRange() } });
  const sizeSelect = h(
    "select",
    { name: "size", "aria-label": "Rows per page", on: { change: () => apply({ size: Number(sizeSelect.value), page: 1 }) } },
    PAGE_SIZES.map((size) => h("option", { value: size }, `${size} per page`)),
  );
  const filterBar = h(
    "form",
    { class: "filters", role: "search", on: { submit: (event) => event.preventDefault() } },
    h("fieldset", { class: "status-filter" }, h("legend", null, "Status"), statusBoxes.map((box) => h("label", { class: `chip status-${box.value}` }, box, box.value))),
    h(
      "div",
      { class: "filter-row" },
      search,
      modeSelect,
      h(
        "span",
        { class: "time-range" },
        h("label", null, "from ", fromInput),
        h("label", null, "to ", toInput),
        PRESETS.map(([label, seconds]) =>
          h("button", { type: "button", class: "preset", on: { click: () => apply({ from: Math.floor(serverNow() - seconds), to: null, page: 1 }) } }, `last ${label}`),
        ),
        h("button", { type: "button", class: "preset", on: { click: () => apply({ from: null, to: null, page: 1 }) } }, "any time"),
      ),
      sizeSelect,
    ),
  );
  const headRow = h("tr");
  const body = h("tbody", { id: "rollout-rows" });
  const emptyRow = h("p", { class: "empty", hidden: true }, "No rollout matches these filters.");
  const pagerSlot = h("div", { class: "pager-slot" });
  const errorSlot = h("div", { class: "error-slot" });
  const table = h("table", { class: "data rollouts", id: "rollout-table" }, h("thead", null, headRow), body);
  const element = h(
    "div",
    { class: "view rollouts-view" },
    h("h1", null, "Rollouts"),
    problemBox,
    filterBar,
    summary,
    errorSlot,
    h("div", { class: "table-scroll" }, table),
    emptyRow,
    pagerSlot,
  );

  function checkedStatuses() {
    return statusBoxes.filter((box) => box.checked).map((box) => box.value);
  }

  function applyRange() {
    apply({ from: fromLocalInput(fromInput.value), to: fromLocalInput(toInput.value), page: 1 });
  }

  function apply(changes, replaceHistory = false) {
    const next = { ...filters, ...changes };
    if (next.from !== null && next.to !== null && next.from > next.to) [next.from, next.to] = [next.to, next.from];
    if ((next.from !== null || next.to !== null) && next.sort !== "start_time") next.sort = "start_time";
    navigate(buildHash("/rollouts", rolloutFilterParams(next)), { replace: replaceHistory });
  }

  function renderControls() {
    for (const box of statusBoxes) box.checked = filters.status.includes(box.value);
    modeSelect.value = filters.mode ?? "";
    if (document.activeElement !== search) search.value = filters.q;
    fromInput.value = toLocalInput(filters.from);
    toInput.value = toLocalInput(filters.to);
    sizeSelect.value = String(filters.size);
    const timeRange = filters.from !== null || filters.to !== null;
    replace(
      headRow,
      COLUMNS.map((column) => {
        if (!column.sort) return h("th", { scope: "col", class: column.numeric ? "num" : null }, column.label);
        const active = filters.sort === column.sort;
        const disabled = timeRange && column.sort !== "start_time";
        const nextOrder = active && filters.order === "desc" ? "asc" : "desc";
        return h(
          "th",
          { scope: "col", "aria-sort": active ? (filters.order === "asc" ? "ascending" : "descending") : "none" },
          h(
            "button",
            {
              type: "button",
              class: `sort ${active ? `sorted-${filters.order}` : ""}`,
              disabled: disabled || null,
              title: disabled ? "With a time range, rollouts are sorted by start time" : column.sortTitle || `Sort by ${column.label.toLowerCase()}`,
              on: { click: () => apply({ sort: column.sort, order: nextOrder, page: 1 }) },
            },
            column.label,
            active ? (filters.order === "asc" ? " ▲" : " ▼") : "",
          ),
        );
      }),
    );
    replace(problemBox, problems.length ? h("p", { class: "notice", role: "status" }, `Ignored in the URL: ${problems.join("; ")}.`) : null);
  }

  function baseQuery() {
    return {
      status_in: filters.status.length ? filters.status : null,
      mode_in: filters.mode,
      rollout_id_contains: filters.q || null,
    };
  }

  async function timeRangePage(signal) {
    const base = baseQuery();
    const first = await api.rollouts({ ...base, limit: 1 }, { signal });
    const total = first.total;
    const startAt = async (index) => {
      const page = await api.rollouts({ ...base, limit: 1, offset: index }, { signal });
      return page.items.length ? page.items[0].start_time : Infinity;
    };
    const key = JSON.stringify([base, filters.from, filters.to]);
    if (!block || block.key !== key || !(await blockStillValid(block, total, startAt))) {
      const found = await locateTimeBlock(total, filters.from, filters.to, startAt);
      block = { key, total, ...found };
    } else if (block.total !== total) {
      const found = await locateTimeBlock(total, null, filters.to, async (index) => (index < block.start ? -Infinity : startAt(index)));
      block = { ...block, total, end: Math.max(found.end, block.start) };
    }
    const window = pageWindow(block, filters.page, filters.size, filters.order);
    let items = [];
    if (window.limit > 0) items = (await api.rollouts({ ...base, limit: window.limit, offset: window.offset }, { signal })).items;
    if (window.reverse) items = [...items].reverse();
    return { items, total: block.end - block.start };
  }

  async function blockStillValid(cached, total, startAt) {
    if (total < cached.total) return false; // rollouts were deleted: positions moved
    if (filters.from === null || cached.start === 0) return true;
    const before = await startAt(cached.start - 1);
    return before < filters.from;
  }

  async function refresh(signal) {
    const timeRange = filters.from !== null || filters.to !== null;
    let page;
    try {
      page = timeRange
        ? await timeRangePage(signal)
        : await api.rollouts(
            { ...baseQuery(), sort_by: filters.sort, sort_order: filters.order, limit: filters.size, offset: (filters.page - 1) * filters.size },
            { signal },
          );
      replace(errorSlot);
    } catch (error) {
      if (!isAbort(error) && error.name === "ApiError") {
        replace(errorSlot, h("p", { class: "error-note", role: "alert" }, `The store refused this query: ${error.message}`));
        return;
      }
      throw error;
    }
    renderRows(page.items);
    markPainted("agl:rollouts-painted");
    const pages = Math.max(1, Math.ceil(page.total / filters.size));
    setText(summary, `${formatCount(page.total)} rollout${page.total === 1 ? "" : "s"}${describeFilters()}`);
    emptyRow.hidden = page.items.length > 0;
    replace(
      pagerSlot,
      pager({ total: page.total, page: Math.min(filters.page, pages), size: filters.size, go: (target) => apply({ page: Math.max(1, Math.min(target, pages)) }) }),
    );
    if (filters.page > pages && page.total > 0) {
      problems = [...problems, `page ${filters.page} is past the last page (${pages})`];
      renderControls();
    }
    const finished = page.items.filter((rollout) => TERMINAL_STATUSES.includes(rollout.status));
    await facts
      .getAll(finished, signal, (rollout, rolloutFacts) => updateReward(rollout, rolloutFacts))
      .catch((error) => {
        if (error.name !== "ApiError") throw error; // a refused span query leaves "…" in its cell
      });
  }

  function describeFilters() {
    const parts = [];
    if (filters.status.length) parts.push(filters.status.join(" or "));
    if (filters.mode) parts.push(`mode ${filters.mode}`);
    if (filters.q) parts.push(`id contains “${filters.q}”`);
    if (filters.from !== null) parts.push(`started from ${formatTime(filters.from)}`);
    if (filters.to !== null) parts.push(`started until ${formatTime(filters.to)}`);
    return parts.length ? ` (${parts.join(", ")})` : "";
  }

  function createRow(rollout) {
    const cells = {};
    const row = h("tr", { class: "rollout-row" });
    for (const column of COLUMNS) {
      const cell = h("td", { class: `col-${column.key}${column.numeric ? " num" : ""}` });
      cells[column.key] = cell;
      row.append(cell);
    }
    row.cells_ = cells;
    const anchor = h("a", { href: rolloutHash(rollout.rollout_id), class: "mono" });
    cells.rollout_id.append(anchor);
    updateRow(row, rollout);
    return row;
  }

  function updateRow(row, rollout) {
    const cells = row.cells_;
    const anchor = cells.rollout_id.firstChild;
    setText(anchor, rollout.rollout_id);
    if (cells.status.dataset.value !== rollout.status) {
      cells.status.dataset.value = rollout.status;
      replace(cells.status, statusBadge(rollout.status));
    }
    setText(cells.mode, rollout.mode ?? "—");
    const attempt = rollout.attempt;
    setText(cells.attempt, attempt ? `#${attempt.sequence_id} ${attempt.status}` : "none yet");
    setText(cells.worker, attempt?.worker_id ?? "—");
    setText(cells.start_time, formatTime(rollout.start_time));
    cells.start_time.title = formatAge(rollout.start_time);
    const end = rollout.end_time ?? (TERMINAL_STATUSES.includes(rollout.status) ? null : serverNow());
    const waiting = rollout.status === "queuing" || rollout.status === "requeuing";
    const duration = end === null ? "—" : formatDuration(end - rollout.start_time);
    setText(cells.duration, rollout.end_time || end === null ? duration : waiting ? `waiting ${duration}` : `${duration} …`);
    setText(cells.resources_id, rollout.resources_id ?? "—");
    const text = preview(rollout.input, 60);
    setText(cells.input, text);
    cells.input.title = preview(rollout.input, 500);
    rewardCell(row, rollout, facts.peek(rollout));
  }

  function updateReward(rollout, rolloutFacts) {
    const row = Array.from(body.children).find((node) => node.dataset.key === rollout.rollout_id);
    if (row) rewardCell(row, rollout, rolloutFacts);
  }

  function rewardCell(row, rollout, rolloutFacts) {
    const cell = row.cells_.reward;
    if (!TERMINAL_STATUSES.includes(rollout.status)) setText(cell, "");
    else if (rolloutFacts === undefined) setText(cell, "…");
    else setText(cell, rolloutFacts.reward === null ? "—" : formatScore(rolloutFacts.reward));
  }

  function renderRows(items) {
    reconcile(body, items, (rollout) => rollout.rollout_id, createRow, updateRow);
  }

  renderControls();
  return {
    element,
    refresh,
    update(next) {
      ({ filters, problems } = parseRolloutFilters(next.params));
      renderControls();
    },
    dispose() {
      clearTimeout(searchTimer);
    },
  };
}
