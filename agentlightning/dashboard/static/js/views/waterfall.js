// The span tree of an attempt as a waterfall: one row per span, indented under its parent, with a bar placed on
// the attempt's time axis. Only the rows in view are in the DOM (rows have a fixed height and the list scrolls),
// so a rollout with thousands of spans lays out as fast as one with twenty. Selecting a row shows every attribute
// of that span in the side panel.

import { h, replace } from "../dom.js";

const ROW_HEIGHT = 26;
const OVERSCAN = 12;
const DEFAULT_WINDOW = 30; // rows built while the list is not laid out yet (a hidden tab)
import { formatDuration, formatScore } from "../format.js";
import { KIND_LABELS, buildTree, exceptionsOf, flatten, isError, llmCall, llmWrappers, nodeKey, rewardOf, spanKind, timeBounds } from "../spans.js";

export function createWaterfall({ onSelect }) {
  const collapsed = new Set();
  let tree = { roots: [], nodes: new Map() };
  let bounds = { start: 0, end: 1 };
  let wrappers = new Set();
  let selectedKey = null;
  let filterText = "";
  const rowsByKey = new Map(); // rows built so far (only those scrolled into view are built)
  let order = []; // the nodes listed, in display order (collapsed subtrees and filtered-out rows left out)
  let indexByKey = new Map();

  const filterInput = h("input", {
    type: "search",
    placeholder: "Filter spans by name or attribute value…",
    "aria-label": "Filter spans",
    on: {
      input: () => {
        filterText = filterInput.value.trim().toLowerCase();
        applyFilter();
      },
    },
  });
  const expandAll = h("button", { type: "button", on: { click: () => { collapsed.clear(); render(); } } }, "Expand all");
  const collapseAll = h(
    "button",
    { type: "button", on: { click: () => { for (const node of tree.nodes.values()) if (node.children.length) collapsed.add(nodeKey(node)); render(); } } },
    "Collapse all",
  );
  const counter = h("span", { class: "muted" });
  const rows = h("div", { class: "wf-window" });
  const viewport = h("div", { class: "wf-rows", role: "tree", "aria-label": "Spans", on: { scroll: () => schedule() } }, rows);
  const axis = h("div", { class: "wf-axis" });
  const element = h("div", { class: "waterfall" }, h("div", { class: "wf-toolbar" }, filterInput, expandAll, collapseAll, counter), axis, viewport);
  let frame = null;
  new ResizeObserver(() => schedule()).observe(viewport); // a tab shown, a window resized: fill the new space
  const schedule = () => {
    if (frame === null) frame = requestAnimationFrame(() => {
      frame = null;
      paintWindow();
    });
  };

  function badges(node, kind) {
    const span = node.span;
    const parts = [];
    if (kind === "reward") {
      const reward = rewardOf(span);
      parts.push(h("span", { class: "badge reward-badge" }, `★ ${formatScore(reward.value)}`));
    }
    if (kind === "llm") {
      const call = llmCall(span);
      if (call.totalTokens !== null) parts.push(h("span", { class: "badge token-badge" }, `${call.totalTokens} tok`));
      if (!call.tokenIdsCaptured && !wrappers.has(node)) parts.push(h("span", { class: "badge warn-badge", title: "No token ids were captured for this call" }, "no ids"));
    }
    if (isError(span) || exceptionsOf(span).length) parts.push(h("span", { class: "badge error-badge" }, "error"));
    return parts;
  }

  function createRow(node) {
    const span = node.span;
    const kind = spanKind(span);
    const key = nodeKey(node);
    const hasChildren = node.children.length > 0;
    const toggle = hasChildren
      ? h(
          "button",
          {
            type: "button",
            class: "wf-toggle",
            "aria-label": collapsed.has(key) ? "Expand" : "Collapse",
            on: {
              click: (event) => {
                event.stopPropagation();
                if (collapsed.has(key)) collapsed.delete(key);
                else collapsed.add(key);
                render();
              },
            },
          },
          collapsed.has(key) ? "▸" : "▾",
        )
      : h("span", { class: "wf-toggle-space" });
    const total = bounds.end - bounds.start;
    const start = typeof span.start_time === "number" ? span.start_time : bounds.start;
    const end = typeof span.end_time === "number" ? span.end_time : start;
    const left = (100 * (start - bounds.start)) / total;
    const width = Math.max(0.3, (100 * (end - start)) / total);
    const row = h(
      "div",
      {
        class: `wf-row kind-${kind}${selectedKey === key ? " selected" : ""}${node.orphan ? " orphan" : ""}`,
        role: "treeitem",
        tabindex: "0",
        "aria-level": node.depth + 1,
        "aria-expanded": hasChildren ? String(!collapsed.has(key)) : null,
        "aria-selected": selectedKey === key ? "true" : "false",
        dataset: { key, kind },
        on: {
          click: () => select(key),
          keydown: (event) => {
            if (event.key === "Enter" || event.key === " ") {
              event.preventDefault();
              select(key);
            }
          },
        },
      },
      h(
        "span",
        { class: "wf-label", style: { "padding-left": `${Math.min(node.depth, 40) * 14}px` } },
        toggle,
        h("span", { class: `kind-tag kind-${kind}` }, KIND_LABELS[kind]),
        h("span", { class: "wf-name" }, String(span.name ?? "")),
        node.orphan ? h("span", { class: "badge muted-badge", title: "Its parent span was not captured" }, "orphan") : null,
        badges(node, kind),
      ),
      h("span", { class: "wf-duration" }, formatDuration(end - start)),
      h("span", { class: "wf-track" }, h("span", { class: "wf-bar", style: { left: `${left.toFixed(3)}%`, width: `${Math.min(width, 100 - left).toFixed(3)}%` } })),
    );
    rowsByKey.set(key, row);
    return row;
  }

  const searchTexts = new WeakMap();
  function searchText(node) {
    if (!searchTexts.has(node)) {
      const span = node.span;
      const values = Object.entries(span.attributes || {}).map(([key, value]) => `${key}=${typeof value === "string" ? value : JSON.stringify(value)}`);
      searchTexts.set(node, `${span.name}\n${values.join("\n")}`.toLowerCase());
    }
    return searchTexts.get(node);
  }

  function applyFilter() {
    const all = flatten(tree.roots, filterText ? new Set() : collapsed);
    order = filterText ? all.filter((node) => searchText(node).includes(filterText)) : all;
    indexByKey = new Map(order.map((node, index) => [nodeKey(node), index]));
    counter.textContent = filterText ? `${order.length} of ${tree.nodes.size} spans match` : `${tree.nodes.size} spans`;
    rows.style.setProperty("height", `${order.length * ROW_HEIGHT}px`);
    paintWindow();
  }

  function paintWindow() {
    const height = viewport.clientHeight || DEFAULT_WINDOW * ROW_HEIGHT;
    const first = Math.max(0, Math.floor(viewport.scrollTop / ROW_HEIGHT) - OVERSCAN);
    const last = Math.min(order.length, Math.ceil((viewport.scrollTop + height) / ROW_HEIGHT) + OVERSCAN);
    const fragment = document.createDocumentFragment();
    for (let index = first; index < last; index += 1) {
      const node = order[index];
      const key = nodeKey(node);
      let row = rowsByKey.get(key);
      if (!row) row = createRow(node);
      row.style.setProperty("top", `${index * ROW_HEIGHT}px`);
      fragment.append(row);
    }
    rows.replaceChildren(fragment);
  }

  function renderAxis() {
    const total = bounds.end - bounds.start;
    replace(axis, h("span", { class: "wf-axis-label" }, "0"), h("span", { class: "wf-axis-label end" }, formatDuration(total)));
  }

  function render() {
    rowsByKey.clear();
    renderAxis();
    applyFilter();
  }

  function scrollTo(key) {
    const index = indexByKey.get(key);
    if (index === undefined) return;
    const top = index * ROW_HEIGHT;
    if (top < viewport.scrollTop || top + ROW_HEIGHT > viewport.scrollTop + viewport.clientHeight) {
      viewport.scrollTop = Math.max(0, top - viewport.clientHeight / 2);
    }
    paintWindow();
  }

  function select(key) {
    if (selectedKey && rowsByKey.has(selectedKey)) {
      rowsByKey.get(selectedKey).classList.remove("selected");
      rowsByKey.get(selectedKey).setAttribute("aria-selected", "false");
    }
    selectedKey = key;
    const row = rowsByKey.get(key);
    if (row) {
      row.classList.add("selected");
      row.setAttribute("aria-selected", "true");
    }
    const node = tree.nodes.get(key);
    if (node) {
      scrollTo(key);
      onSelect(node, tree);
    }
  }

  return {
    element,
    /** Show `spans`; keeps collapsed rows, the filter and the selection. */
    setSpans(spans, wantedKey) {
      tree = buildTree(spans);
      wrappers = llmWrappers(tree);
      bounds = timeBounds(spans);
      if (wantedKey !== undefined) selectedKey = wantedKey;
      render();
      if (selectedKey && tree.nodes.has(selectedKey)) {
        scrollTo(selectedKey);
        onSelect(tree.nodes.get(selectedKey), tree);
      }
    },
    select,
    get tree() {
      return tree;
    },
  };
}
