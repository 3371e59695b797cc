// Performance marks a benchmark can read (benchmarks/dashboard_load.py): the first time a view has painted its
// main content after the page loaded. Marks are cheap and visible in the browser's performance tools.

const marked = new Set();

/** Mark `name` once per page load, after the browser had a chance to paint what was just rendered. */
export function markPainted(name) {
  if (marked.has(name)) return;
  marked.add(name);
  requestAnimationFrame(() => setTimeout(() => performance.mark(name), 0));
}
