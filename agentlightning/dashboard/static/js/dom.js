// Building DOM nodes safely. Every value becomes a text node or a checked attribute: nothing here parses markup,
// so data from spans, inputs and prompts can never turn into elements or scripts.

const SVG_NS = "http://www.w3.org/2000/svg";
const ALLOWED_ATTRIBUTES = new Set([
  "id", "role", "type", "name", "value", "placeholder", "min", "max", "step", "for", "tabindex", "colspan",
  "autocomplete", "spellcheck", "scope", "hidden", "checked", "disabled", "selected", "multiple", "rel",
]);

function appendChildren(node, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) appendChildren(node, child);
    else if (child instanceof Node) node.appendChild(child);
    else node.appendChild(document.createTextNode(String(child)));
  }
}

function setAttribute(node, key, value) {
  if (value === null || value === undefined || value === false) return;
  if (key === "href") {
    const href = String(value);
    if (!href.startsWith("#")) throw new Error(`only in-page links are allowed, got ${href.slice(0, 40)}`);
    node.setAttribute("href", href);
  } else if (key.startsWith("aria-") || key.startsWith("data-") || ALLOWED_ATTRIBUTES.has(key) || key === "title") {
    node.setAttribute(key, value === true ? "" : String(value));
  } else {
    throw new Error(`attribute ${key} is not allowed`);
  }
}

/**
 * h("div", {class: "x", title: "...", on: {click}, style: {width: "3%"}, dataset: {id}}, ...children)
 * Strings and numbers among the children become text nodes.
 */
export function h(tag, props, ...children) {
  const node = document.createElement(tag);
  applyProps(node, props);
  appendChildren(node, children);
  return node;
}

function applyProps(node, props) {
  if (!props) return;
  for (const [key, value] of Object.entries(props)) {
    if (key === "class") {
      if (value) node.className = Array.isArray(value) ? value.filter(Boolean).join(" ") : value;
    } else if (key === "on") {
      for (const [event, handler] of Object.entries(value)) node.addEventListener(event, handler);
    } else if (key === "style") {
      for (const [property, styleValue] of Object.entries(value)) node.style.setProperty(property, styleValue);
    } else if (key === "dataset") {
      for (const [name, dataValue] of Object.entries(value)) node.dataset[name] = String(dataValue);
    } else if (key === "text") {
      node.textContent = value === null || value === undefined ? "" : String(value);
    } else if (key === "prop") {
      Object.assign(node, value);
    } else {
      setAttribute(node, key, value);
    }
  }
}

/** An SVG element; attribute values are set with setAttribute, children as for h(). */
export function svg(tag, attributes, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [key, value] of Object.entries(attributes || {})) {
    if (key === "class") node.setAttribute("class", value);
    else if (key === "on") for (const [event, handler] of Object.entries(value)) node.addEventListener(event, handler);
    else if (value !== null && value !== undefined) node.setAttribute(key, String(value));
  }
  appendChildren(node, children);
  return node;
}

/** Replace the text of `node` only when it changed (keeps selections and avoids layout work). */
export function setText(node, text) {
  const value = text === null || text === undefined ? "" : String(text);
  if (node.textContent !== value) node.textContent = value;
}

export function replace(node, ...children) {
  const fragment = document.createDocumentFragment();
  appendChildren(fragment, children);
  node.replaceChildren(fragment);
  return node;
}

/**
 * Make `container`'s children match `items`, reusing the node of every key seen before (in the new order):
 * a refresh then keeps focus, open details and the scroll position. `create(item)` builds a node,
 * `update(node, item)` refreshes one.
 */
export function reconcile(container, items, keyOf, create, update) {
  const existing = new Map();
  for (const child of Array.from(container.children)) {
    if (child.dataset.key !== undefined) existing.set(child.dataset.key, child);
  }
  let cursor = container.firstElementChild;
  const seen = new Set();
  for (const item of items) {
    const key = String(keyOf(item));
    seen.add(key);
    let node = existing.get(key);
    if (node) update(node, item);
    else {
      node = create(item);
      node.dataset.key = key;
    }
    if (node !== cursor) container.insertBefore(node, cursor);
    else cursor = cursor.nextElementSibling;
  }
  for (const [key, node] of existing) if (!seen.has(key)) node.remove();
}
