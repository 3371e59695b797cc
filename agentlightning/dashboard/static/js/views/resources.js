// Resources: every version (prompt templates, model endpoints) and the difference between any two. Prompt
// templates are compared line by line with the changed words marked; other resources as their JSON.

import { diffLines, diffSummary } from "../diff.js";
import { h, replace } from "../dom.js";
import { formatCount, formatTime, toText } from "../format.js";
import { buildHash } from "../router.js";
import { isSecretKey } from "../spans.js";
import { keyValueTable, pager } from "./common.js";

const PAGE_SIZE = 50;

function describe(resource) {
  if (!resource || typeof resource !== "object") return "unknown";
  if (resource.resource_type === "prompt_template") return `prompt template (${resource.engine})`;
  if (resource.resource_type === "llm" || resource.resource_type === "proxy_llm") return `${resource.resource_type} ${resource.model}`;
  return String(resource.resource_type ?? "resource");
}

/** A resource as comparable text: a template's text, anything else as JSON with credentials masked. */
export function resourceText(resource) {
  if (resource && resource.resource_type === "prompt_template" && typeof resource.template === "string") return resource.template;
  const masked = JSON.parse(JSON.stringify(resource ?? null), (key, value) => (isSecretKey(key) && value ? "•••••••• (hidden)" : value));
  return toText(masked);
}

function wordSpans(words, side) {
  return words
    .filter((part) => part.op === "equal" || part.op === (side === "old" ? "delete" : "insert"))
    .map((part) => (part.op === "equal" ? part.value : h("mark", { class: side === "old" ? "del-word" : "ins-word" }, part.value)));
}

/** A side-by-side diff of two texts as a table (old | new). */
export function diffTable(oldText, newText) {
  const rows = diffLines(oldText, newText);
  const summary = diffSummary(rows);
  let oldLine = 0;
  let newLine = 0;
  const body = rows.map((row) => {
    const oldNumber = row.old !== null ? (oldLine += 1) : "";
    const newNumber = row.new !== null ? (newLine += 1) : "";
    const oldCell = row.op === "change" ? wordSpans(row.words, "old") : row.old ?? "";
    const newCell = row.op === "change" ? wordSpans(row.words, "new") : row.new ?? "";
    return h(
      "tr",
      { class: `diff-${row.op}` },
      h("td", { class: "ln" }, String(oldNumber)),
      h("td", { class: "code old" }, oldCell),
      h("td", { class: "ln" }, String(newNumber)),
      h("td", { class: "code new" }, newCell),
    );
  });
  return h(
    "div",
    { class: "diff" },
    h(
      "p",
      { class: "diff-summary" },
      summary.added + summary.removed + summary.changed === 0
        ? "identical"
        : `${summary.changed} changed, ${summary.added} added, ${summary.removed} removed line${summary.added + summary.removed + summary.changed === 1 ? "" : "s"}`,
    ),
    h("table", { class: "diff-table" }, h("tbody", null, body)),
  );
}

export function createResources({ api, navigate, route }) {
  let params = route.params;
  let page = 1;
  const listSlot = h("div", { id: "resources-list" });
  const compareSlot = h("div", { id: "resources-compare" });
  const contentSlot = h("div", { id: "resources-content" });
  const element = h(
    "div",
    { class: "view resources-view" },
    h("h1", null, "Resources"),
    h("p", { class: "hint" }, "Each version is the set of resources (prompt templates, model endpoints) rollouts ran with. Pick two to compare."),
    h("section", { class: "panel" }, h("h2", null, "Versions"), listSlot),
    h("section", { class: "panel" }, h("h2", null, "Compare"), compareSlot),
    contentSlot,
  );
  let signature = "";
  let versions = [];
  let total = 0;

  const choose = (changes) => {
    const next = Object.fromEntries(params.entries());
    Object.assign(next, changes);
    navigate(buildHash("/resources", next), { replace: true });
  };

  async function refresh(signal) {
    const listing = await api.resources({ sort_by: "create_time", sort_order: "desc", limit: PAGE_SIZE, offset: (page - 1) * PAGE_SIZE }, { signal });
    versions = listing.items;
    total = listing.total;
    const wantedA = params.get("a");
    const wantedB = params.get("b");
    const fetchMissing = async (id) => {
      if (!id || versions.some((version) => version.resources_id === id)) return null;
      return api.resourcesById(id, { signal });
    };
    const [extraA, extraB] = await Promise.all([fetchMissing(wantedA), fetchMissing(wantedB)]);
    const next = JSON.stringify([versions.map((v) => [v.resources_id, v.update_time]), total, wantedA, wantedB, extraA?.update_time, extraB?.update_time, page]);
    if (next === signature) return;
    signature = next;
    render(extraA, extraB);
  }

  function render(extraA, extraB) {
    if (!versions.length) {
      replace(listSlot, h("p", { class: "empty" }, "No resources have been added to this store yet."));
      replace(compareSlot);
      replace(contentSlot);
      return;
    }
    const all = [...versions, ...[extraA, extraB].filter(Boolean)];
    const byId = new Map(all.map((version) => [version.resources_id, version]));
    const latestId = page === 1 ? versions[0].resources_id : null;
    const b = byId.get(params.get("b")) ?? versions[0];
    const a = byId.get(params.get("a")) ?? versions.find((version) => version.resources_id !== b.resources_id) ?? b;
    replace(
      listSlot,
      h(
        "table",
        { class: "data" },
        h("thead", null, h("tr", null, ["Resources id", "Version", "Created", "Updated", "Resources", "Compare"].map((label) => h("th", { scope: "col" }, label)))),
        h(
          "tbody",
          null,
          versions.map((version) =>
            h(
              "tr",
              { dataset: { resourcesId: version.resources_id }, class: version.resources_id === a.resources_id || version.resources_id === b.resources_id ? "chosen" : null },
              h("td", { class: "mono" }, version.resources_id, version.resources_id === latestId ? h("span", { class: "badge latest-badge" }, "latest") : null),
              h("td", null, String(version.version)),
              h("td", null, formatTime(version.create_time)),
              h("td", null, formatTime(version.update_time)),
              h("td", null, Object.entries(version.resources || {}).map(([name, resource]) => h("div", null, h("strong", null, name), ` — ${describe(resource)}`))),
              h(
                "td",
                { class: "compare-buttons" },
                h("button", { type: "button", class: version.resources_id === a.resources_id ? "selected" : null, on: { click: () => choose({ a: version.resources_id }) } }, "A"),
                h("button", { type: "button", class: version.resources_id === b.resources_id ? "selected" : null, on: { click: () => choose({ b: version.resources_id }) } }, "B"),
              ),
            ),
          ),
        ),
      ),
      total > PAGE_SIZE ? pager({ total, page, size: PAGE_SIZE, go: (target) => { page = target; signature = ""; choose({}); } }) : null,
    );
    const names = [...new Set([...Object.keys(a.resources || {}), ...Object.keys(b.resources || {})])].sort();
    replace(
      compareSlot,
      h("p", null, "A ", h("span", { class: "mono" }, a.resources_id), ` (${formatTime(a.create_time)}) → B `, h("span", { class: "mono" }, b.resources_id), ` (${formatTime(b.create_time)})`),
      a.resources_id === b.resources_id ? h("p", { class: "muted" }, "Only one version: nothing to compare yet.") : null,
      names.map((name) => {
        const before = a.resources?.[name];
        const after = b.resources?.[name];
        const state = before === undefined ? " (added in B)" : after === undefined ? " (removed in B)" : "";
        return h("div", { class: "resource-diff", dataset: { name } }, h("h3", null, name, h("span", { class: "muted" }, ` ${describe(after ?? before)}${state}`)), diffTable(before === undefined ? "" : resourceText(before), after === undefined ? "" : resourceText(after)));
      }),
    );
    replace(
      contentSlot,
      h(
        "section",
        { class: "panel" },
        h("h2", null, "Version B in full"),
        keyValueTable(Object.entries(b.resources || {}).map(([name, resource]) => [name, resourceText(resource)])),
        h("p", { class: "hint" }, `${formatCount(total)} version${total === 1 ? "" : "s"} in this store.`),
      ),
    );
  }

  return {
    element,
    refresh,
    update(next) {
      params = next.params;
      signature = "";
      return true;
    },
    dispose() {},
  };
}
