// Per-rollout facts the rollout list does not carry as columns: the final reward and, for failures, the exception.
// The runner records both in the latest attempt's metadata (`final_reward`; `error`, `error_type`, `traceback`), so
// for rollouts it ran they are read from the rollout itself, without a request. For others (rollouts written by
// other clients) each rollout costs one small filtered span query (reward and annotation spans only); answers are
// cached per attempt and status, so a refresh asks only about rollouts that finished since the last one, and at
// most `concurrency` queries run at once.

import { isAbort } from "./api.js";
import { ANNOTATION_SPAN, EXCEPTION_SPAN, exceptionFromMetadata, exceptionsOf, finalReward, rewardOf } from "./spans.js";

const isNumber = (value) => typeof value === "number" && Number.isFinite(value);

/**
 * The facts recorded in the latest attempt's metadata: {reward, exception}, or null when a span query is needed
 * (no `final_reward` in the metadata, or a failure without a recorded reason).
 */
export function recordedFacts(rollout) {
  const metadata = rollout?.attempt?.metadata;
  if (!metadata || typeof metadata !== "object" || !Object.hasOwn(metadata, "final_reward")) return null;
  const exception = exceptionFromMetadata(metadata);
  if (rollout.status === "failed" && !exception && rollout.attempt.status === "failed") return null;
  return { reward: isNumber(metadata.final_reward) ? metadata.final_reward : null, exception };
}

const factsKey = (rollout) => `${rollout.rollout_id}/${rollout.attempt?.attempt_id ?? "-"}/${rollout.status}`;

export function createFactsCache(api, { concurrency = 6, maxEntries = 5000 } = {}) {
  const cache = new Map();
  const pending = new Map();
  const queue = [];
  let active = 0;

  function pump() {
    while (active < concurrency && queue.length) {
      const job = queue.shift();
      active += 1;
      job().finally(() => {
        active -= 1;
        pump();
      });
    }
  }

  async function load(rollout, signal) {
    const attemptId = rollout.attempt?.attempt_id ?? "latest";
    const rewardPage = await api.spans(
      {
        rollout_id: rollout.rollout_id,
        attempt_id: attemptId,
        name: ANNOTATION_SPAN,
        name_contains: "reward",
        filter_logic: "or",
        limit: 500,
      },
      { signal },
    );
    const rewardSpans = rewardPage.items.filter((span) => rewardOf(span));
    let exception = exceptionFromMetadata(rollout.attempt?.metadata);
    if (!exception && rollout.status === "failed") {
      const exceptionPage = await api.spans(
        { rollout_id: rollout.rollout_id, attempt_id: attemptId, name: EXCEPTION_SPAN, limit: 5, sort_order: "desc" },
        { signal },
      );
      exception = exceptionPage.items.flatMap(exceptionsOf)[0] ?? null;
    }
    return { reward: finalReward(rewardSpans), exception };
  }

  return {
    /** The facts of a rollout when known without a request (recorded or cached), else undefined. */
    peek: (rollout) => recordedFacts(rollout) ?? cache.get(factsKey(rollout)),
    /** Facts of a rollout (recorded, cached, or one query queued behind the others). */
    get(rollout, signal) {
      const recorded = recordedFacts(rollout);
      if (recorded) return Promise.resolve(recorded);
      const key = factsKey(rollout);
      if (cache.has(key)) return Promise.resolve(cache.get(key));
      if (pending.has(key)) return pending.get(key);
      const promise = new Promise((resolve, reject) => {
        queue.push(() =>
          load(rollout, signal)
            .then((facts) => {
              if (cache.size >= maxEntries) cache.delete(cache.keys().next().value);
              cache.set(key, facts);
              resolve(facts);
            })
            .catch(reject)
            .finally(() => pending.delete(key)),
        );
      });
      pending.set(key, promise);
      pump();
      return promise;
    },
    /** Facts of many rollouts; calls `onEach(rollout, facts)` as each arrives. Errors other than aborts propagate. */
    async getAll(rollouts, signal, onEach) {
      const results = await Promise.allSettled(
        rollouts.map((rollout) =>
          this.get(rollout, signal).then((facts) => {
            onEach?.(rollout, facts);
            return facts;
          }),
        ),
      );
      const failure = results.find((result) => result.status === "rejected" && !isAbort(result.reason));
      if (failure) throw failure.reason;
      return results.map((result) => (result.status === "fulfilled" ? result.value : undefined));
    },
  };
}
