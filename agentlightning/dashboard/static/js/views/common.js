// Pieces shared by the views: status badges, long values folded with a way to see all, attribute tables,
// error notes and pagers. All text goes in as text.

import { ApiError, AuthError, UnreachableError } from "../api.js";
import { h } from "../dom.js";
import { formatCount, toText } from "../format.js";
import { isSecretKey } from "../spans.js";

export const TRUNCATE_AT = 2000;

export function statusBadge(status) {
  const known = status ? String(status) : "unknown";
  return h("span", { class: `badge status-${known.replace(/[^a-z_]/g, "")}` }, known);
}

/**
 * Text in a <pre>, folded to `limit` characters with a button that shows the rest (and folds it again):
 * huge attributes stay cheap to render until someone asks for them.
 */
export function foldedText(value, { limit = TRUNCATE_AT, className = "" } = {}) {
  const text = toText(value);
  const pre = h("pre", { class: `value ${className}` });
  if (text.length <= limit) {
    pre.textContent = text;
    return pre;
  }
  let open = false;
  const button = h("button", { type: "button", class: "link-button show-all" });
  const render = () => {
    pre.textContent = open ? text : `${text.slice(0, limit)}…`;
    button.textContent = open ? "Show less" : `Show all ${formatCount(text.length)} characters`;
  };
  button.addEventListener("click", () => {
    open = !open;
    render();
  });
  render();
  return h("div", { class: "folded" }, pre, button);
}

/** A secret shown as dots, revealed only on demand (an API key inside a resource, say). */
function maskedValue(value) {
  const text = toText(value);
  const span = h("span", { class: "masked" }, "•••••••• (hidden)");
  const button = h("button", { type: "button", class: "link-button" }, "Reveal");
  button.addEventListener("click", () => {
    span.textContent = text;
    button.remove();
  });
  return h("span", null, span, " ", button);
}

/** A two-column table of [key, value] rows; credentials are masked, long values folded. */
export function keyValueTable(entries, { empty = "None." } = {}) {
  if (!entries.length) return h("p", { class: "muted" }, empty);
  return h(
    "table",
    { class: "kv" },
    h(
      "tbody",
      null,
      entries.map(([key, value]) =>
        h(
          "tr",
          null,
          h("th", { scope: "row" }, key),
          h("td", null, isSecretKey(key) && value ? maskedValue(value) : foldedText(value, { limit: 600 })),
        ),
      ),
    ),
  );
}

/** A short explanation of a failed request, for inline display in a view. */
export function errorNote(error, what) {
  let message;
  if (error instanceof UnreachableError) message = `${what}: the store server cannot be reached right now.`;
  else if (error instanceof AuthError) message = `${what}: the store server needs a valid API key.`;
  else if (error instanceof ApiError) message = `${what}: ${error.message} (HTTP ${error.status})`;
  else message = `${what}: ${error && error.message ? error.message : String(error)}`;
  return h("p", { class: "error-note", role: "alert" }, message);
}

export const link = (hash, ...children) => h("a", { href: hash }, ...children);

export function section(title, ...children) {
  return h("section", { class: "panel" }, h("h2", null, title), ...children);
}

/** "1–50 of 100,000" with first/previous/next/last buttons; `go(page)` is called with a valid page. */
export function pager({ total, page, size, go }) {
  const pages = Math.max(1, Math.ceil(total / size));
  const first = total === 0 ? 0 : (page - 1) * size + 1;
  const last = Math.min(total, page * size);
  const button = (label, target, disabled, title) =>
    h("button", { type: "button", disabled: disabled || null, title, on: { click: () => go(target) } }, label);
  return h(
    "nav",
    { class: "pager", "aria-label": "Pages" },
    h("span", { class: "pager-range" }, `${formatCount(first)}–${formatCount(last)} of ${formatCount(total)}`),
    button("«", 1, page <= 1, "First page"),
    button("‹", page - 1, page <= 1, "Previous page"),
    h("span", { class: "pager-page" }, `page ${formatCount(Math.min(page, pages))} of ${formatCount(pages)}`),
    button("›", page + 1, page >= pages, "Next page"),
    button("»", pages, page >= pages, "Last page"),
  );
}
