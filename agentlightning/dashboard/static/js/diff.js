// Differences between two texts (prompt templates, resources as JSON): Myers' O(ND) shortest edit script over
// lines, then over words inside each changed line. Pure functions.

/**
 * The shortest edit script turning `a` into `b` (arrays of comparable items) as
 * [{op: "equal"|"delete"|"insert", value}]. Past `maxEdits` differences it gives up on finding the shortest one
 * and reports all of `a` deleted and all of `b` inserted (still a correct script).
 */
export function diffSequences(a, b, maxEdits = 4000) {
  const n = a.length;
  const m = b.length;
  let prefix = 0;
  while (prefix < n && prefix < m && a[prefix] === b[prefix]) prefix += 1;
  let suffix = 0;
  while (suffix < n - prefix && suffix < m - prefix && a[n - 1 - suffix] === b[m - 1 - suffix]) suffix += 1;
  const head = a.slice(0, prefix).map((value) => ({ op: "equal", value }));
  const tail = a.slice(n - suffix).map((value) => ({ op: "equal", value }));
  const middle = myers(a.slice(prefix, n - suffix), b.slice(prefix, m - suffix), maxEdits);
  return [...head, ...middle, ...tail];
}

function myers(a, b, maxEdits) {
  const n = a.length;
  const m = b.length;
  if (n === 0) return b.map((value) => ({ op: "insert", value }));
  if (m === 0) return a.map((value) => ({ op: "delete", value }));
  const max = Math.min(n + m, maxEdits);
  const offset = max + 1;
  let v = new Int32Array(2 * max + 3);
  const trace = [];
  for (let d = 0; d <= max; d += 1) {
    trace.push(v.slice());
    const next = v;
    for (let k = -d; k <= d; k += 2) {
      let x;
      if (k === -d || (k !== d && next[offset + k - 1] < next[offset + k + 1])) x = next[offset + k + 1];
      else x = next[offset + k - 1] + 1;
      let y = x - k;
      while (x < n && y < m && a[x] === b[y]) {
        x += 1;
        y += 1;
      }
      next[offset + k] = x;
      if (x >= n && y >= m) return backtrack(trace, a, b, offset, d);
    }
    v = next;
  }
  return [...a.map((value) => ({ op: "delete", value })), ...b.map((value) => ({ op: "insert", value }))];
}

function backtrack(trace, a, b, offset, finalD) {
  const script = [];
  let x = a.length;
  let y = b.length;
  for (let d = finalD; d > 0; d -= 1) {
    const v = trace[d];
    const k = x - y;
    const fromInsert = k === -d || (k !== d && v[offset + k - 1] < v[offset + k + 1]);
    const previousK = fromInsert ? k + 1 : k - 1;
    const previousX = v[offset + previousK];
    const previousY = previousX - previousK;
    while (x > previousX && y > previousY) {
      script.push({ op: "equal", value: a[x - 1] });
      x -= 1;
      y -= 1;
    }
    if (fromInsert) script.push({ op: "insert", value: b[y - 1] });
    else script.push({ op: "delete", value: a[x - 1] });
    x = previousX;
    y = previousY;
  }
  while (x > 0 && y > 0) {
    script.push({ op: "equal", value: a[x - 1] });
    x -= 1;
    y -= 1;
  }
  return script.reverse();
}

const splitLines = (text) => (text === "" ? [] : String(text).split("\n"));
const splitWords = (text) => String(text).split(/(\s+|[^\w\s])/u).filter((part) => part !== "");

/**
 * A line diff of two texts: [{op, old, new, words?}] where a changed line that pairs with a line of the other
 * text carries `words`, the word-level script between the two.
 */
export function diffLines(oldText, newText) {
  const script = diffSequences(splitLines(oldText), splitLines(newText));
  const rows = [];
  let index = 0;
  while (index < script.length) {
    if (script[index].op === "equal") {
      rows.push({ op: "equal", old: script[index].value, new: script[index].value });
      index += 1;
      continue;
    }
    const deleted = [];
    const inserted = [];
    while (index < script.length && script[index].op !== "equal") {
      (script[index].op === "delete" ? deleted : inserted).push(script[index].value);
      index += 1;
    }
    const paired = Math.min(deleted.length, inserted.length);
    for (let i = 0; i < paired; i += 1) {
      rows.push({ op: "change", old: deleted[i], new: inserted[i], words: diffSequences(splitWords(deleted[i]), splitWords(inserted[i]), 500) });
    }
    for (const line of deleted.slice(paired)) rows.push({ op: "delete", old: line, new: null });
    for (const line of inserted.slice(paired)) rows.push({ op: "insert", old: null, new: line });
  }
  return rows;
}

/** Counts of a line diff: {added, removed, changed, unchanged}. */
export function diffSummary(rows) {
  const summary = { added: 0, removed: 0, changed: 0, unchanged: 0 };
  for (const row of rows) {
    if (row.op === "insert") summary.added += 1;
    else if (row.op === "delete") summary.removed += 1;
    else if (row.op === "change") summary.changed += 1;
    else summary.unchanged += 1;
  }
  return summary;
}
