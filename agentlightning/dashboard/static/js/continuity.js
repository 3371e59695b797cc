// Token continuity of an attempt's LLM calls: which calls extend an earlier call of their conversation exactly (one
// training sequence), which start a conversation, and which drifted (they continue a conversation, but their prompt
// ids do not extend it, so the call is trained alone and counted as drift). The rules are those of
// agentlightning/adapter/trajectory.py `stitch_calls`, which builds the training samples; a test runs both on the
// same calls and compares them. Pure functions over id lists and spans.

import { formatCount, formatPercent } from "./format.js";

const isTokenId = (value) => Number.isInteger(value);

/**
 * A span attribute as a list of token ids: an array of integers, or its JSON text (as `token_id_list` in
 * agentlightning/adapter/attributes.py reads it); null when it is neither.
 */
export function tokenIdList(value) {
  let parsed = value;
  if (typeof value === "string") {
    const text = value.trim();
    if (!text.startsWith("[")) return null;
    try {
      parsed = JSON.parse(text);
    } catch {
      return null;
    }
  }
  return Array.isArray(parsed) && parsed.every(isTokenId) ? parsed : null;
}

function append(target, items, map = (item) => item) {
  for (const item of items) target.push(map(item)); // not push(...items): a long prompt is more arguments than a call takes
}

function commonPrefix(a, b) {
  const limit = Math.min(a.length, b.length);
  let index = 0;
  while (index < limit && a[index] === b[index]) index += 1;
  return index;
}

/**
 * Stitch `calls` ({promptIds, responseIds, agentName}, in the order they were made) into sequences.
 *
 * Returns {calls, continuations, drifted, driftRate, sequences, outcomes}. `sequences` are as trajectory.py's
 * StitchedSequence ({promptIds, responseIds, lossMask, calls, segments, agentName}); `outcomes[i]` says what
 * happened to call i: {kind: "new" | "extends" | "drifted", sequence (index into sequences)}, with, for "extends",
 * `after` (the position of the sequence's previous call) and `first` (its first call), and for "drifted", `from`
 * (the newest call of the conversation it continued without extending), `first` (that conversation's first call)
 * and `divergesAt` (the first prompt token that differs from that conversation's ids), and for "new", `repeats`
 * (the first call of the newest conversation that began with this very prompt: a retry or a resample; else null).
 */
export function stitchCalls(calls) {
  const sequences = [];
  const outcomes = [];
  let continuations = 0;
  let drifted = 0;
  calls.forEach((call, position) => {
    const prompt = Array.from(call.promptIds);
    const response = Array.from(call.responseIds);
    const agent = call.agentName ?? null;
    let outcome = null;
    let repeats = null; // the newest call of the same agent that sent this very prompt (a retry or a resample)
    for (let index = sequences.length - 1; index >= 0; index -= 1) {
      const sequence = sequences[index];
      if (sequence.agentName !== agent) continue;
      const full = sequence.promptIds.concat(sequence.responseIds);
      const common = commonPrefix(prompt, full);
      if (prompt.length >= full.length && common === full.length) {
        const previous = sequence.calls[sequence.calls.length - 1];
        const environment = prompt.slice(full.length);
        append(sequence.responseIds, environment);
        append(sequence.lossMask, environment, () => 0);
        const start = sequence.responseIds.length;
        append(sequence.responseIds, response);
        append(sequence.lossMask, response, () => 1);
        sequence.calls.push(position);
        sequence.segments.push([start, sequence.responseIds.length]);
        outcome = { kind: "extends", sequence: index, after: previous, first: sequence.calls[0] };
        break;
      }
      const first = sequence.promptIds.length;
      if (!outcome && prompt.length > first && common >= first) {
        // the newest conversation it continued names the note; the search goes on for one it extends
        outcome = { kind: "drifted", from: sequence.calls[sequence.calls.length - 1], first: sequence.calls[0], divergesAt: common };
      }
      if (repeats === null && prompt.length === first && common >= first) repeats = sequence.calls[0];
    }
    if (outcome && outcome.kind === "extends") {
      continuations += 1;
      outcomes.push(outcome);
      return;
    }
    if (outcome) {
      continuations += 1;
      drifted += 1;
    }
    sequences.push({
      promptIds: prompt,
      responseIds: response,
      lossMask: response.map(() => 1),
      calls: [position],
      segments: [[0, response.length]],
      agentName: agent,
    });
    outcomes.push({ ...(outcome ?? { kind: "new", repeats }), sequence: sequences.length - 1 });
  });
  return { calls: calls.length, continuations, drifted, driftRate: continuations ? drifted / continuations : 0, sequences, outcomes };
}

const plural = (count, word) => `${formatCount(count)} ${word}${count === 1 ? "" : "s"}`;

function callList(numbers) {
  if (numbers.length === 1) return `LLM call ${numbers[0]}`;
  return `LLM calls ${numbers.slice(0, -1).join(", ")} and ${numbers[numbers.length - 1]}`;
}

function noteFor(outcome, result, number) {
  const calls = result.sequences[outcome.sequence].calls.map(number);
  if (outcome.kind === "extends") {
    return { kind: "extends", text: `Continues LLM call ${number(outcome.after)} exactly: one training sequence (${callList(calls)}).` };
  }
  if (outcome.kind === "drifted") {
    return {
      kind: "drifted",
      text:
        `Does not extend LLM call ${number(outcome.from)}'s token ids (its prompt departs from them at token ${formatCount(outcome.divergesAt + 1)}): ` +
        "trained alone, counted as drift.",
    };
  }
  const later = calls.length > 1 ? ` ${callList(calls.slice(1))} continue${calls.length > 2 ? "" : "s"} it.` : "";
  const start =
    outcome.repeats !== null && outcome.repeats !== undefined
      ? `Sends LLM call ${number(outcome.repeats)}'s prompt again (a retry or a resample)`
      : "Starts a conversation";
  return { kind: "new", text: `${start}: a training sequence of its own, not drift.${later}` };
}

function summaryOf(result, without, attemptId, several) {
  const where = several ? `Attempt ${attemptId}: ` : "";
  const missing = without ? ` ${plural(without, "call")} without token ids take${without === 1 ? "s" : ""} no part.` : "";
  if (!result.calls) {
    return { drifted: 0, text: `${where}Token continuity: no LLM call carries prompt and response token ids, so it cannot be checked.${missing}` };
  }
  const rate = result.continuations ? `drift rate ${formatPercent(100 * result.driftRate)}` : "drift rate — (no call continues an earlier one)";
  return {
    drifted: result.drifted,
    text:
      `${where}Token continuity: ${plural(result.calls, "LLM call")} with token ids · ${formatCount(result.continuations)} continue${result.continuations === 1 ? "s" : ""} a conversation · ` +
      `${formatCount(result.drifted)} drifted · ${rate}.${missing}`,
  };
}

/**
 * Notes on the LLM calls of a conversation: `calls` are {span, attemptId, agentName} (or {node, ...} with the span
 * in node.span), in the order shown, numbered from 1. Calls of each attempt are stitched separately, and only calls
 * with prompt and response token ids take part. Returns {notes: Map(item key -> {kind, text}), summaries: [{text,
 * drifted}]} where the key is `item.node ?? item.span`.
 */
export function continuityOf(calls) {
  const byAttempt = new Map();
  calls.forEach((item, index) => {
    const span = item.span ?? item.node?.span;
    const attributes = span?.attributes ?? {};
    const promptIds = tokenIdList(attributes.prompt_token_ids);
    const responseIds = tokenIdList(attributes.response_token_ids);
    const group = byAttempt.get(item.attemptId ?? "") ?? { members: [], without: [] };
    byAttempt.set(item.attemptId ?? "", group);
    const entry = { key: item.node ?? item.span, number: index + 1 };
    if (promptIds && promptIds.length && responseIds && responseIds.length) group.members.push({ ...entry, call: { promptIds, responseIds, agentName: item.agentName ?? null } });
    else group.without.push(entry);
  });
  const notes = new Map();
  const summaries = [];
  for (const [attemptId, group] of byAttempt) {
    const result = stitchCalls(group.members.map((member) => member.call));
    const number = (position) => group.members[position].number;
    result.outcomes.forEach((outcome, position) => notes.set(group.members[position].key, noteFor(outcome, result, number)));
    for (const entry of group.without) {
      notes.set(entry.key, { kind: "no-ids", text: "No prompt and response token ids: this call takes no part in the continuity check (and cannot be trained)." });
    }
    summaries.push(summaryOf(result, group.without.length, attemptId, byAttempt.size > 1));
  }
  return { notes, summaries };
}
