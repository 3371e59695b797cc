// The store's public REST API (/v1/agl), read-only. Every request goes through `get`, which adds the API key as
// an Authorization header (never in the URL), applies a timeout and turns failures into three kinds of error the
// page reacts to differently: the server cannot be reached, the key is missing or wrong, or the request failed.
// Each answer's server time feeds the page's view of the server's clock (clock.js).

import { observeServerTime } from "./clock.js";

export class ApiError extends Error {
  constructor(status, errorType, detail) {
    super(detail || `HTTP ${status}`);
    this.name = "ApiError";
    this.status = status;
    this.errorType = errorType || "HTTPError";
  }
}

/** 401/403: the server wants a (different) API key. */
export class AuthError extends ApiError {
  constructor(status, errorType, detail) {
    super(status, errorType, detail);
    this.name = "AuthError";
  }
}

/** No answer from the store server (connection refused, timeout, or a relay that could not reach it). */
export class UnreachableError extends Error {
  constructor(message) {
    super(message);
    this.name = "UnreachableError";
  }
}

export const isAbort = (error) => error && error.name === "AbortError";

/** The query string of `params`: arrays repeat the key, null/undefined/"" are left out. */
export function queryString(params) {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params || {})) {
    if (value === null || value === undefined || value === "") continue;
    if (Array.isArray(value)) for (const item of value) search.append(key, String(item));
    else search.append(key, String(value));
  }
  const text = search.toString();
  return text ? `?${text}` : "";
}

const segment = (value) => encodeURIComponent(String(value));

function combine(signal, timeoutMs) {
  const timeout = AbortSignal.timeout(timeoutMs);
  return signal ? AbortSignal.any([signal, timeout]) : timeout;
}

async function errorFrom(response) {
  let body = null;
  try {
    body = await response.json();
  } catch {
    body = null;
  }
  const detail = body && typeof body.detail === "string" ? body.detail : `${response.status} ${response.statusText}`;
  const errorType = body && typeof body.error_type === "string" ? body.error_type : null;
  if (response.status === 401 || response.status === 403) return new AuthError(response.status, errorType, detail);
  if ([502, 503, 504].includes(response.status)) return new UnreachableError(detail);
  return new ApiError(response.status, errorType, detail);
}

/**
 * An API client. `getKey()` returns the current key (or null); `observe(outcome)` hears about every answer:
 * "ok", "unreachable" or "auth", so the page can show the connection state in one place.
 */
export function createApi({ base = new URL("v1/agl", document.baseURI).href, getKey, observe, timeoutMs = 20000 }) {
  const root = base.replace(/\/+$/, "");

  async function get(path, params, { signal } = {}) {
    const headers = { Accept: "application/json" };
    const key = getKey ? getKey() : null;
    if (key) headers.Authorization = `Bearer ${key}`;
    let response;
    const sentAt = Date.now();
    try {
      response = await fetch(root + path + queryString(params), {
        method: "GET",
        headers,
        cache: "no-store",
        credentials: "omit",
        signal: combine(signal, timeoutMs),
      });
    } catch (error) {
      if (signal && signal.aborted) throw error;
      const reason = error && error.name === "TimeoutError" ? "the request timed out" : "the connection failed";
      const failure = new UnreachableError(`Cannot reach the store server (${reason})`);
      observe?.("unreachable", failure);
      throw failure;
    }
    observeServerTime(Number.parseFloat(response.headers.get("x-agl-server-time") ?? ""), sentAt, Date.now());
    if (!response.ok) {
      const failure = await errorFrom(response);
      observe?.(failure instanceof AuthError ? "auth" : failure instanceof UnreachableError ? "unreachable" : "ok", failure);
      throw failure;
    }
    const data = await response.json();
    observe?.("ok", null);
    return data;
  }

  return {
    get,
    health: (options) => get("/health", null, options),
    statistics: (options) => get("/statistics", null, options),
    rollouts: (params, options) => get("/rollouts", params, options),
    rollout: (rolloutId, options) => get(`/rollouts/${segment(rolloutId)}`, null, options),
    attempts: (rolloutId, params, options) => get(`/rollouts/${segment(rolloutId)}/attempts`, params, options),
    spans: (params, options) => get("/spans", params, options),
    resources: (params, options) => get("/resources", params, options),
    resourcesById: (resourcesId, options) => get(`/resources/${segment(resourcesId)}`, null, options),
    workers: (params, options) => get("/workers", params, options),
    /** Whole-run aggregates the store server computes (agentlightning/dashboard/progress.py); 404 on older servers. */
    progress: (params, options) => get("/dashboard/progress", params, options),
    /** The drift rate of the newest finished rollouts (agentlightning/dashboard/drift.py); 404 on older servers. */
    drift: (params, options) => get("/dashboard/drift", params, options),
  };
}
