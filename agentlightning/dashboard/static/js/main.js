// The dashboard's shell: navigation, connection state, the API key, live refresh, and mounting the view the URL
// names. Views are created once per page and updated in place while the user changes filters.

import { AuthError, UnreachableError, createApi } from "./api.js";
import { createKeyDialog, createKeyStore } from "./auth.js";
import { h, replace, setText } from "./dom.js";
import { formatAge } from "./format.js";
import { createFactsCache } from "./facts.js";
import { parseRoute } from "./router.js";
import { createConnection, createScheduler } from "./scheduler.js";
import { createOverview } from "./views/overview.js";
import { createResources } from "./views/resources.js";
import { createRolloutDetail } from "./views/rollout.js";
import { createRollouts } from "./views/rollouts.js";
import { createRunners } from "./views/runners.js";

const VIEWS = {
  overview: createOverview,
  rollouts: createRollouts,
  rollout: createRolloutDetail,
  resources: createResources,
  runners: createRunners,
  notfound: createNotFound,
};
const INTERVALS = [2, 5, 10, 30];
const NAV = [
  ["overview", "#/", "Overview"],
  ["rollouts", "#/rollouts", "Rollouts"],
  ["resources", "#/resources", "Resources"],
  ["runners", "#/runners", "Runners"],
];

function createNotFound({ route }) {
  const element = h(
    "div",
    { class: "view" },
    h("h1", null, "Page not found"),
    h("p", null, `Nothing lives at “${route.path ?? ""}”. `, h("a", { href: "#/" }, "Go to the overview"), "."),
  );
  return { element, refresh: async () => {}, update: () => false, dispose() {} };
}

function boot() {
  const authHint = document.querySelector('meta[name="agl-auth"]')?.getAttribute("content") ?? "probe";
  const keys = createKeyStore();
  const connection = createConnection();
  const api = createApi({ getKey: () => keys.get(), observe: (outcome, error) => connection.observe(outcome, error) });
  const facts = createFactsCache(api);
  let lastUpdated = null;
  let refreshes = 0;
  let keyWasRejected = false;
  let current = null;

  const navLinks = NAV.map(([name, href, label]) => h("a", { href, dataset: { view: name } }, label));
  const pill = h("span", { class: "pill", id: "connection-state", role: "status", "aria-live": "polite" }, "Connecting…");
  const intervalSelect = h(
    "select",
    { "aria-label": "Refresh interval", on: { change: () => scheduler.setInterval(Number(intervalSelect.value)) } },
    INTERVALS.map((seconds) => h("option", { value: seconds }, `every ${seconds} s`)),
  );
  intervalSelect.value = "5";
  const pauseButton = h("button", { type: "button", id: "pause-button", on: { click: () => togglePause() } }, "Pause");
  const refreshButton = h("button", { type: "button", id: "refresh-button", on: { click: () => scheduler.refreshNow() } }, "Refresh");
  const keyButton = h("button", { type: "button", id: "key-button", on: { click: () => askForKey() } }, "API key");
  const banner = h("div", { class: "banner", id: "banner", hidden: true, role: "alert" });
  const main = h("main", { id: "main" });
  const dialog = createKeyDialog({
    onSave(key, remember) {
      keys.set(key, remember);
      keyWasRejected = false;
      connection.set("connecting");
      scheduler.refreshNow();
    },
    onForget() {
      keys.clear();
    },
  });
  document.body.append(
    h(
      "header",
      { class: "topbar" },
      h("a", { class: "brand", href: "#/" }, h("span", { class: "brand-mark" }, "⚡"), "Agent Lightning"),
      h("nav", { class: "main-nav", "aria-label": "Views" }, navLinks),
      h("div", { class: "live-controls" }, pill, intervalSelect, pauseButton, refreshButton, keyButton),
    ),
    banner,
    main,
    dialog.element,
  );

  function askForKey() {
    const text = keyWasRejected
      ? "The store server rejected the API key. Enter the right one."
      : "This store server requires an API key. It is sent as an Authorization header, never in the URL.";
    dialog.open(text);
  }

  function togglePause() {
    scheduler.setPaused(!scheduler.paused);
    setText(pauseButton, scheduler.paused ? "Resume" : "Pause");
    renderState();
  }

  function renderState() {
    const state = connection.state;
    pill.className = `pill state-${scheduler.paused && state === "live" ? "paused" : state}`;
    if (state === "live") {
      setText(pill, scheduler.paused ? "Paused" : `Live · updated ${lastUpdated ? formatAge(lastUpdated / 1000) : "now"}`);
    } else if (state === "offline") {
      const seconds = connection.retryAt ? Math.max(0, Math.ceil((connection.retryAt - Date.now()) / 1000)) : null;
      setText(pill, seconds === null ? "Offline" : `Offline · retry in ${seconds} s`);
    } else if (state === "auth") setText(pill, "API key needed");
    else setText(pill, "Connecting…");
  }

  function renderBanner() {
    const state = connection.state;
    if (state === "offline") {
      banner.hidden = false;
      banner.className = "banner offline";
      replace(
        banner,
        h("strong", null, "The store server cannot be reached. "),
        `${connection.error?.message ?? ""}. The dashboard keeps trying and recovers by itself when the server is back. `,
        h("button", { type: "button", class: "link-button", on: { click: () => scheduler.refreshNow() } }, "Retry now"),
      );
    } else if (state === "auth") {
      banner.hidden = false;
      banner.className = "banner auth";
      replace(
        banner,
        h("strong", null, keyWasRejected ? "The API key was rejected. " : "An API key is needed. "),
        keyWasRejected ? `${connection.error?.message ?? ""} Nothing more is requested until a new key is entered. ` : "This store server only answers requests that carry its key. ",
        h("button", { type: "button", class: "link-button", on: { click: () => askForKey() } }, "Enter API key"),
      );
    } else {
      banner.hidden = true;
      replace(banner);
    }
  }

  connection.subscribe(() => {
    if (connection.state === "auth") {
      keyWasRejected = Boolean(keys.get()) || keyWasRejected;
      if (keys.get()) keys.clear(); // a refused key is never sent again
      askForKey();
    }
    renderBanner();
    renderState();
  });

  const scheduler = createScheduler({
    connection,
    intervalSeconds: 5,
    probe: (signal) => api.health({ signal }),
    tick: async (signal) => {
      try {
        await current.view.refresh(signal);
      } catch (error) {
        if (error instanceof AuthError || error instanceof UnreachableError || signal.aborted) throw error;
        if (error && error.name === "ApiError") {
          console.warn("The store answered with an error:", error.message);
          throw error;
        }
        console.error("The dashboard failed to refresh this view:", error);
        throw error;
      }
      lastUpdated = Date.now();
      refreshes += 1;
      document.body.dataset.refreshes = String(refreshes); // lets tests and scripts wait for a complete view
      renderState();
    },
    onSchedule: () => renderState(),
  });
  setInterval(renderState, 1000);

  function navigate(hash, { replace: replaceEntry = false } = {}) {
    if (location.hash === hash) return;
    if (replaceEntry) location.replace(hash);
    else location.hash = hash;
  }

  function route() {
    const next = parseRoute(location.hash);
    for (const anchor of navLinks) {
      const active = anchor.dataset.view === next.view || (anchor.dataset.view === "rollouts" && next.view === "rollout");
      if (active) anchor.setAttribute("aria-current", "page");
      else anchor.removeAttribute("aria-current");
    }
    const reusable = current && current.route.view === next.view && (current.view.sameTarget ? current.view.sameTarget(next) : next.view !== "rollout");
    if (reusable) {
      current.route = next;
      const needsRefresh = current.view.update(next);
      if (needsRefresh !== false) scheduler.refreshNow();
      return;
    }
    current?.view.dispose();
    const view = VIEWS[next.view]({ api, facts, navigate, route: next, connection });
    current = { route: next, view };
    replace(main, view.element);
    window.scrollTo(0, 0);
    document.title = `${NAV.find(([name]) => name === next.view)?.[2] ?? (next.view === "rollout" ? `Rollout ${next.id}` : "Dashboard")} · Agent Lightning`;
    scheduler.refreshNow();
  }

  window.addEventListener("hashchange", route);
  if (authHint === "required" && !keys.get()) connection.set("auth");
  route();
}

boot();
