// The span tree of an attempt as a waterfall: one row per span, indented under its parent, with a bar placed on
// the attempt's time axis. Rows are built once per change of the span list (2,000 spans stay well under a
// second); selecting a row shows every attribute of that span in the side panel.

import { h, replace } from "../dom.js";
import { formatDuration, formatScore } from "../format.js";
import { KIND_LABELS, buildTree, exceptionsOf, flatten, isError, llmCall, llmWrappers, nodeKey, rewardOf, spanKind, timeBounds } from "../spans.js";

export function createWaterfall({ onSelect }) {
  const collapsed = new Set();
  let tree = { roots: [], nodes: new Map() };
  let bounds = { start: 0, end: 1 };
  let wrappers = new Set();
  let selectedKey = null;
  let filterText = "";
  const rowsByKey = new Map();

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
  const rows = h("div", { class: "wf-rows", role: "tree", "aria-label": "Spans" });
  const axis = h("div", { class: "wf-axis" });
  const element = h("div", { class: "waterfall" }, h("div", { class: "wf-toolbar" }, filterInput, expandAll, collapseAll, counter), axis, rows);

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
    row.searchText_ = null;
    row.node_ = node;
    rowsByKey.set(key, row);
    return row;
  }

  function searchText(row) {
    if (row.searchText_ === null) {
      const span = row.node_.span;
      const values = Object.entries(span.attributes || {}).map(([key, value]) => `${key}=${typeof value === "string" ? value : JSON.stringify(value)}`);
      row.searchText_ = `${span.name}\n${values.join("\n")}`.toLowerCase();
    }
    return row.searchText_;
  }

  function applyFilter() {
    let shown = 0;
    for (const row of rowsByKey.values()) {
      const visible = !filterText || searchText(row).includes(filterText);
      row.hidden = !visible;
      if (visible) shown += 1;
    }
    counter.textContent = filterText ? `${shown} of ${rowsByKey.size} rows match` : `${tree.nodes.size} spans`;
  }

  function renderAxis() {
    const total = bounds.end - bounds.start;
    replace(axis, h("span", { class: "wf-axis-label" }, "0"), h("span", { class: "wf-axis-label end" }, formatDuration(total)));
  }

  function render() {
    rowsByKey.clear();
    const fragment = document.createDocumentFragment();
    for (const node of flatten(tree.roots, collapsed)) fragment.append(createRow(node));
    rows.replaceChildren(fragment);
    renderAxis();
    applyFilter();
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
    if (node) onSelect(node, tree);
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
      if (selectedKey && tree.nodes.has(selectedKey)) onSelect(tree.nodes.get(selectedKey), tree);
    },
    select,
    get tree() {
      return tree;
    },
  };
}
