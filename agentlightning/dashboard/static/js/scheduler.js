// Live refresh: one loop calls the visible view's refresh every few seconds. When the store server cannot be
// reached it backs off and probes /health until the server answers again; when the API key is refused it stops
// until a new key is entered, so a wrong key never causes a stream of failing requests.

import { AuthError, UnreachableError, isAbort } from "./api.js";

export const BACKOFF_SECONDS = [1, 2, 4, 8, 15, 30];

/** The delay before retry number `failures` (1-based) of an unreachable server. */
export function backoffSeconds(failures) {
  return BACKOFF_SECONDS[Math.min(Math.max(failures, 1), BACKOFF_SECONDS.length) - 1];
}

/** Connection state shared by the page: "connecting", "live", "offline" or "auth". */
export function createConnection() {
  const listeners = new Set();
  const connection = {
    state: "connecting",
    error: null,
    lastSuccess: null,
    retryAt: null,
    set(state, error = null) {
      const changed = state !== connection.state || error?.message !== connection.error?.message;
      connection.state = state;
      connection.error = error;
      if (state === "live") connection.lastSuccess = Date.now();
      if (changed) for (const listener of listeners) listener(connection);
    },
    observe(outcome, error) {
      if (outcome === "ok") connection.set("live");
      else if (outcome === "auth") connection.set("auth", error);
      else if (outcome === "unreachable") connection.set("offline", error);
    },
    subscribe(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  };
  return connection;
}

/**
 * createScheduler({tick, probe, connection, intervalSeconds}) -> {start, refreshNow, setInterval, setPaused}.
 * `tick(signal)` refreshes the visible view; `probe(signal)` checks that the server answers (health).
 */
export function createScheduler({ tick, probe, connection, intervalSeconds = 5, onSchedule }) {
  let timer = null;
  let controller = null;
  let failures = 0;
  let paused = false;
  let interval = intervalSeconds;
  let running = false;

  function schedule(seconds) {
    clearTimeout(timer);
    timer = null;
    connection.retryAt = seconds === null ? null : Date.now() + seconds * 1000;
    onSchedule?.(connection.retryAt);
    if (seconds !== null) timer = setTimeout(run, seconds * 1000);
  }

  async function run() {
    clearTimeout(timer);
    timer = null;
    if (connection.state === "auth") {
      schedule(null); // wait for a new key: refreshNow() is called when one is entered
      return;
    }
    if (document.hidden) {
      schedule(null); // resumed by the visibilitychange listener
      return;
    }
    controller?.abort();
    const current = new AbortController();
    controller = current;
    running = true;
    try {
      if (connection.state === "offline") await probe(current.signal);
      await tick(current.signal);
      if (current.signal.aborted) return;
      failures = 0;
      schedule(paused ? null : interval);
    } catch (error) {
      if (current.signal.aborted || isAbort(error)) return;
      if (error instanceof AuthError) schedule(null);
      else if (error instanceof UnreachableError) {
        failures += 1;
        schedule(backoffSeconds(failures));
      } else {
        schedule(paused ? null : interval); // shown by the view; keep refreshing
      }
    } finally {
      if (controller === current) running = false;
    }
  }

  document.addEventListener("visibilitychange", () => {
    if (!document.hidden && timer === null && !running && !paused) run();
  });

  return {
    start: () => run(),
    /** Refresh now (a view change, a new key, the refresh button); aborts a refresh in flight. */
    refreshNow: () => run(),
    setInterval(seconds) {
      interval = seconds;
      if (!paused && connection.state === "live") schedule(interval);
    },
    setPaused(value) {
      paused = value;
      if (paused) schedule(null);
      else run();
    },
    get paused() {
      return paused;
    },
  };
}
