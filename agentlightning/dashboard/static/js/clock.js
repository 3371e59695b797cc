// The store server's clock as seen from the page. Times in the store (heartbeats, start and end times) are taken
// on the server's clock; measured against the browser's, a machine whose clock is off shows live runners as stale
// or running attempts with negative durations. Every answer of the store server carries its clock
// (`X-AGL-Server-Time`); the offset comes from the answer with the shortest round trip among the recent ones (the
// server read its clock somewhere between sending and receiving, so a short trip leaves the least doubt).

const SAMPLES = 8;
const samples = []; // [{roundTrip, offset}] of the latest answers, oldest first
let offset = 0;

/** Learn from one answer: the server's time (seconds) and when the request left and the answer came (ms). */
export function observeServerTime(serverSeconds, sentMs, receivedMs) {
  if (!Number.isFinite(serverSeconds) || !Number.isFinite(sentMs) || !Number.isFinite(receivedMs) || receivedMs < sentMs) return;
  samples.push({ roundTrip: receivedMs - sentMs, offset: serverSeconds - (sentMs + receivedMs) / 2000 });
  if (samples.length > SAMPLES) samples.shift();
  offset = samples.reduce((best, sample) => (sample.roundTrip < best.roundTrip ? sample : best)).offset;
}

/** Seconds the server's clock is ahead of the browser's (0 until an answer said otherwise). */
export const clockOffset = () => offset;

/** The server's current time, in seconds since the epoch. */
export const serverNow = () => Date.now() / 1000 + offset;
