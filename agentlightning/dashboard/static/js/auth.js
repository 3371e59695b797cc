// The API key: entered once in a dialog, kept for this browser tab (or, if asked, this browser), and sent only
// in the Authorization header. It never appears in a URL, so it does not end up in history or server logs.

import { h } from "./dom.js";

const STORAGE_KEY = "agl.dashboard.apiKey";

function storageOrNull(kind) {
  try {
    return window[kind];
  } catch {
    return null; // storage disabled by the browser
  }
}

export function createKeyStore() {
  const session = storageOrNull("sessionStorage");
  const local = storageOrNull("localStorage");
  let memory = null;
  return {
    get() {
      return memory ?? session?.getItem(STORAGE_KEY) ?? local?.getItem(STORAGE_KEY) ?? null;
    },
    set(key, remember) {
      memory = key;
      session?.setItem(STORAGE_KEY, key);
      if (remember) local?.setItem(STORAGE_KEY, key);
      else local?.removeItem(STORAGE_KEY);
    },
    clear() {
      memory = null;
      session?.removeItem(STORAGE_KEY);
      local?.removeItem(STORAGE_KEY);
    },
  };
}

/** A modal dialog asking for the key; `onSave(key, remember)` is called with a non-empty key. */
export function createKeyDialog({ onSave, onForget }) {
  const message = h("p", { class: "dialog-message", id: "key-message" });
  const input = h("input", { type: "password", name: "api-key", autocomplete: "off", "aria-describedby": "key-message", id: "api-key-input" });
  const remember = h("input", { type: "checkbox", name: "remember" });
  const error = h("p", { class: "error-note", hidden: true });
  const form = h(
    "form",
    {
      on: {
        submit: (event) => {
          event.preventDefault();
          const key = input.value.trim();
          if (!key) {
            error.textContent = "Enter the key the store server was started with (--api-key or AGL_STORE_API_KEY).";
            error.hidden = false;
            return;
          }
          error.hidden = true;
          dialog.close();
          input.value = "";
          onSave(key, remember.checked);
        },
      },
    },
    h("h2", null, "API key"),
    message,
    h("label", { class: "field" }, "Key ", input),
    h("label", { class: "checkbox" }, remember, " Remember on this browser (otherwise only for this tab)"),
    error,
    h(
      "div",
      { class: "dialog-buttons" },
      h("button", { type: "submit", class: "primary" }, "Use this key"),
      h("button", { type: "button", on: { click: () => { onForget(); dialog.close(); } } }, "Forget saved key"),
      h("button", { type: "button", on: { click: () => dialog.close() } }, "Close"),
    ),
  );
  const dialog = h("dialog", { class: "key-dialog", id: "key-dialog", "aria-label": "API key" }, form);
  return {
    element: dialog,
    open(text) {
      message.textContent = text;
      if (!dialog.open) dialog.showModal();
      input.focus();
    },
  };
}
