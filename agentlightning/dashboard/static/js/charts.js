// Small SVG charts (time series and bars), written for this dashboard instead of vendoring a charting library:
// they need a few hundred lines, render as DOM the tests can read, and set no inline script or style.

import { h, svg } from "./dom.js";

const WIDTH = 640;
const MARGIN = { top: 12, right: 16, bottom: 26, left: 52 };

/** About `count` round tick values covering [min, max]; with `integer`, whole numbers only (counts). */
export function niceTicks(min, max, count = 4, integer = false) {
  if (!Number.isFinite(min) || !Number.isFinite(max)) return [];
  if (min === max) return [min];
  const raw = integer ? Math.max(1, (max - min) / count) : (max - min) / count;
  const magnitude = 10 ** Math.floor(Math.log10(raw));
  const step =
    [1, 2, 2.5, 5, 10]
      .map((factor) => factor * magnitude)
      .find((value) => value >= raw && (!integer || Number.isInteger(value))) ?? raw;
  const ticks = [];
  for (let value = Math.ceil(min / step) * step; value <= max + step * 1e-9; value += step) {
    ticks.push(Number(value.toPrecision(12)));
  }
  return ticks;
}

function extent(values, fallback) {
  const finite = values.filter(Number.isFinite);
  if (!finite.length) return fallback;
  let low = Math.min(...finite);
  let high = Math.max(...finite);
  if (low === high) {
    const pad = Math.abs(low) > 0 ? Math.abs(low) * 0.1 : 1;
    low -= pad;
    high += pad;
  }
  return [low, high];
}

function scale(domain, range) {
  const [d0, d1] = domain;
  const [r0, r1] = range;
  return (value) => r0 + ((value - d0) / (d1 - d0 || 1)) * (r1 - r0);
}

function frame(height, label) {
  const root = svg("svg", {
    viewBox: `0 0 ${WIDTH} ${height}`,
    class: "chart-svg",
    role: "img",
    "aria-label": label,
  });
  return root;
}

function axes(root, x, y, xTicks, yTicks, xFormat, yFormat, height) {
  const plotBottom = height - MARGIN.bottom;
  const group = svg("g", { class: "chart-axes" });
  for (const tick of yTicks) {
    const position = y(tick);
    group.append(
      svg("line", { x1: MARGIN.left, x2: WIDTH - MARGIN.right, y1: position, y2: position, class: "chart-grid" }),
      svg("text", { x: MARGIN.left - 6, y: position + 4, "text-anchor": "end", class: "chart-tick" }, yFormat(tick)),
    );
  }
  let previous = null;
  for (const tick of xTicks) {
    const text = xFormat(tick);
    if (text === previous) continue; // ticks closer than the label's resolution
    previous = text;
    const position = x(tick);
    const anchor = position > WIDTH - MARGIN.right - 30 ? "end" : position < MARGIN.left + 30 ? "start" : "middle";
    group.append(svg("text", { x: position, y: plotBottom + 17, "text-anchor": anchor, class: "chart-tick" }, text));
  }
  group.append(svg("line", { x1: MARGIN.left, x2: WIDTH - MARGIN.right, y1: plotBottom, y2: plotBottom, class: "chart-axis" }));
  root.append(group);
}

/**
 * A time-series chart. `series`: [{name, className, points: [{x, y, label?}], style: "line" | "dots" | "bars"}].
 * Returns a <figure> with a legend and a hover read-out; `empty` is shown when there is no point at all.
 * `yInteger` / `xInteger`: the values are counts (or positions), so that axis has whole-number ticks only.
 */
export function timeChart({ series, xFormat, yFormat, height = 200, label, empty, yDomain, barWidth, yInteger = false, xInteger = false, xPad = 30 }) {
  const figure = h("figure", { class: "chart", "aria-label": label });
  const allPoints = series.flatMap((item) => item.points);
  figure.dataset.points = String(allPoints.length);
  if (!allPoints.length) {
    figure.append(h("p", { class: "chart-empty" }, empty || "No data yet."));
    return figure;
  }
  const xs = allPoints.map((point) => point.x);
  let x0 = Math.min(...xs);
  let x1 = Math.max(...xs) + (barWidth || 0);
  if (x1 - x0 < 1e-9) {
    x0 -= xPad; // a single instant: show a minute around it (or `xPad` on either side)
    x1 += xPad;
  }
  const span = x1 - x0;
  const [y0, y1] = yDomain ?? extent([...allPoints.map((point) => point.y), ...(series.some((s) => s.style === "bars") ? [0] : [])], [0, 1]);
  const x = scale([x0, x1], [MARGIN.left, WIDTH - MARGIN.right]);
  const y = scale([y0, y1], [height - MARGIN.bottom, MARGIN.top]);
  const root = frame(height, label);
  const xLabel = (value, long) => xFormat(value, long, span);
  axes(root, x, y, niceTicks(x0, x1, 5, xInteger).filter((t) => t >= x0 && t <= x1), niceTicks(y0, y1, 4, yInteger), xLabel, yFormat, height);
  for (const item of series) {
    const group = svg("g", { class: `chart-series ${item.className || ""}` });
    const points = [...item.points].sort((a, b) => a.x - b.x);
    if (item.style === "bars") {
      const width = Math.max(1, x(x0 + (barWidth || 1)) - x(x0) - 1);
      for (const point of points) {
        const top = y(Math.max(point.y, 0));
        group.append(svg("rect", { x: x(point.x), y: top, width, height: Math.max(0, y(0) - top), class: "chart-bar" }));
      }
    } else if (item.style === "dots") {
      for (const point of points) group.append(svg("circle", { cx: x(point.x), cy: y(point.y), r: 2.5, class: "chart-dot" }));
    } else if (points.length === 1) {
      // a line of one point has no length and would draw nothing: show the point itself
      group.append(svg("circle", { cx: x(points[0].x), cy: y(points[0].y), r: 4, class: "chart-dot chart-single-point" }));
    } else {
      const path = points.map((point, index) => `${index ? "L" : "M"}${x(point.x).toFixed(1)},${y(point.y).toFixed(1)}`).join("");
      group.append(svg("path", { d: path, class: "chart-line" }));
    }
    root.append(group);
  }
  const cursor = svg("line", { y1: MARGIN.top, y2: height - MARGIN.bottom, class: "chart-cursor", visibility: "hidden" });
  root.append(cursor);
  const readout = h("div", { class: "chart-readout", hidden: true });
  root.addEventListener("mousemove", (event) => {
    const box = root.getBoundingClientRect();
    const px = ((event.clientX - box.left) / box.width) * WIDTH;
    const target = x0 + ((px - MARGIN.left) / (WIDTH - MARGIN.left - MARGIN.right)) * (x1 - x0);
    const lines = [];
    let nearestX = null;
    for (const item of series) {
      let best = null;
      for (const point of item.points) if (!best || Math.abs(point.x - target) < Math.abs(best.x - target)) best = point;
      if (!best) continue;
      nearestX = nearestX ?? best.x;
      lines.push(`${item.name}: ${yFormat(best.y)}${best.label ? ` (${best.label})` : ""}`);
    }
    if (nearestX === null) return;
    cursor.setAttribute("x1", x(nearestX));
    cursor.setAttribute("x2", x(nearestX));
    cursor.setAttribute("visibility", "visible");
    readout.textContent = `${xLabel(nearestX, true)} — ${lines.join(" · ")}`;
    readout.hidden = false;
  });
  root.addEventListener("mouseleave", () => {
    cursor.setAttribute("visibility", "hidden");
    readout.hidden = true;
  });
  figure.append(root, legend(series), readout);
  return figure;
}

function legend(series) {
  return h(
    "div",
    { class: "chart-legend" },
    series.map((item) => h("span", { class: `chart-key ${item.className || ""}` }, h("i", { class: "chart-swatch" }), item.name)),
  );
}

/** Horizontal bars: [{label, value, note, className}], one row each, scaled to the largest absolute value. */
export function barList({ bars, format, label, empty }) {
  const list = h("div", { class: "bar-list", role: "list", "aria-label": label });
  list.dataset.points = String(bars.length);
  if (!bars.length) {
    list.append(h("p", { class: "chart-empty" }, empty || "No data yet."));
    return list;
  }
  const largest = Math.max(...bars.map((bar) => Math.abs(bar.value)), 1e-12);
  for (const bar of bars) {
    const share = Math.max(0, Math.min(100, (100 * Math.abs(bar.value)) / largest));
    list.append(
      h(
        "div",
        { class: `bar-row ${bar.className || ""}`, role: "listitem", title: bar.title || null },
        h("span", { class: "bar-label", title: bar.label }, bar.label),
        h("span", { class: "bar-track" }, h("span", { class: "bar-fill", style: { width: `${share.toFixed(2)}%` } })),
        h("span", { class: "bar-value" }, format(bar.value)),
        h("span", { class: "bar-note" }, bar.note || ""),
      ),
    );
  }
  return list;
}
