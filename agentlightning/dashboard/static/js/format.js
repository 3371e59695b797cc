// Formatting numbers, times and durations for people. Pure functions.

import { serverNow } from "./clock.js";

const pad = (value) => String(value).padStart(2, "0");

/** Local date and time of a Unix timestamp in seconds ("2026-11-02 14:03:22"), or "—". */
export function formatTime(seconds) {
  if (typeof seconds !== "number" || !Number.isFinite(seconds)) return "—";
  const date = new Date(seconds * 1000);
  return (
    `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())} ` +
    `${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}`
  );
}

/** Only the clock time (for chart axes). */
export function formatClock(seconds, withSeconds = false) {
  const date = new Date(seconds * 1000);
  const base = `${pad(date.getHours())}:${pad(date.getMinutes())}`;
  return withSeconds ? `${base}:${pad(date.getSeconds())}` : base;
}

/** A duration in seconds as "850 ms", "12.3 s", "4 min 05 s", "2 h 03 min". */
export function formatDuration(seconds) {
  if (typeof seconds !== "number" || !Number.isFinite(seconds) || seconds < 0) return "—";
  if (seconds < 1) return `${Math.round(seconds * 1000)} ms`;
  if (seconds < 60) return `${seconds < 10 ? seconds.toFixed(2) : seconds.toFixed(1)} s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min ${pad(Math.floor(seconds % 60))} s`;
  return `${Math.floor(seconds / 3600)} h ${pad(Math.floor((seconds % 3600) / 60))} min`;
}

/** How long ago a timestamp was ("just now", "42 s ago", "3 min ago"). */
export function formatAge(seconds, now = serverNow()) {
  if (typeof seconds !== "number" || !Number.isFinite(seconds)) return "never";
  const age = Math.max(0, now - seconds);
  if (age < 2) return "just now";
  if (age < 90) return `${Math.round(age)} s ago`;
  if (age < 5400) return `${Math.round(age / 60)} min ago`;
  if (age < 48 * 3600) return `${Math.round(age / 3600)} h ago`;
  return `${Math.round(age / 86400)} days ago`;
}

export function formatCount(value) {
  if (typeof value !== "number" || !Number.isFinite(value)) return "—";
  return value.toLocaleString("en-US");
}

/** A reward or other score: up to 4 significant decimals, no trailing zeros. */
export function formatScore(value) {
  if (typeof value !== "number" || !Number.isFinite(value)) return "—";
  if (Math.abs(value) >= 1000) return value.toFixed(0);
  return String(Number(value.toPrecision(4)));
}

export function formatPercent(value) {
  if (typeof value !== "number" || !Number.isFinite(value)) return "—";
  return `${value.toFixed(value < 10 ? 1 : 0)}%`;
}

export function formatBytes(bytes) {
  if (typeof bytes !== "number" || !Number.isFinite(bytes)) return "—";
  const units = ["B", "KB", "MB", "GB", "TB"];
  let value = bytes;
  let unit = 0;
  while (Math.abs(value) >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${value.toFixed(unit === 0 ? 0 : 1)} ${units[unit]}`;
}

/** Any value as display text: strings as they are, everything else as (pretty) JSON. */
export function toText(value, pretty = true) {
  if (typeof value === "string") return value;
  if (value === undefined) return "";
  try {
    return JSON.stringify(value, null, pretty ? 2 : 0) ?? String(value);
  } catch {
    return String(value);
  }
}

/** A one-line preview of a value, at most `limit` characters. */
export function preview(value, limit = 80) {
  const text = toText(value, false).replace(/\s+/g, " ").trim();
  return text.length > limit ? `${text.slice(0, limit - 1)}…` : text;
}

/** Datetime-local input value ("2026-11-02T14:03") of a timestamp, and back. */
export function toLocalInput(seconds) {
  if (typeof seconds !== "number" || !Number.isFinite(seconds)) return "";
  const date = new Date(seconds * 1000);
  return (
    `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}T` +
    `${pad(date.getHours())}:${pad(date.getMinutes())}`
  );
}

export function fromLocalInput(text) {
  if (!text) return null;
  const millis = new Date(text).getTime();
  return Number.isFinite(millis) ? millis / 1000 : null;
}
