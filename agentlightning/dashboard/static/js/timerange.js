// Time-range filtering of rollouts through the query API, which has filters for status, mode and id but none
// for time. A rollout's start_time is its creation time, so the rollouts matching the other filters, listed in
// creation order (the API's default order), have non-decreasing start times: those inside [from, to] form one
// contiguous block of positions. Two binary searches with one-item probes find it (about 2·log2(n) small
// requests, each cheap for every backend), and pages are then read from inside the block.

/** The first index in [low, high) for which `predicate(index)` is true (high when none); predicate is monotonic. */
export async function firstIndex(low, high, predicate) {
  let lo = low;
  let hi = high;
  while (lo < hi) {
    const middle = Math.floor((lo + hi) / 2);
    if (await predicate(middle)) hi = middle;
    else lo = middle + 1;
  }
  return lo;
}

/**
 * The block [start, end) of positions whose start time lies in [from, to] (either bound may be null), among
 * `total` items; `startTimeAt(index)` reads the start time of the item at a position.
 */
export async function locateTimeBlock(total, from, to, startTimeAt) {
  const memo = new Map();
  const timeAt = async (index) => {
    if (!memo.has(index)) memo.set(index, await startTimeAt(index));
    return memo.get(index);
  };
  const start = from === null ? 0 : await firstIndex(0, total, async (index) => (await timeAt(index)) >= from);
  const end = to === null ? total : await firstIndex(start, total, async (index) => (await timeAt(index)) > to);
  return { start, end };
}

/**
 * The window {offset, limit, reverse} of page `page` (1-based, `size` items) inside a block, newest first when
 * `order` is "desc".
 */
export function pageWindow(block, page, size, order) {
  const count = Math.max(0, block.end - block.start);
  const skip = (page - 1) * size;
  if (skip >= count) return { offset: block.start, limit: 0, reverse: false };
  if (order === "desc") {
    const end = block.end - skip;
    const begin = Math.max(block.start, end - size);
    return { offset: begin, limit: end - begin, reverse: true };
  }
  return { offset: block.start + skip, limit: Math.min(size, count - skip), reverse: false };
}
