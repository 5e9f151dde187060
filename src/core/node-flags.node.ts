/**
 * Flags for the Node processes ringtrain starts itself (`run -np` workers, local rings, benchmarks).
 *
 * Node 20 (V8 11.3) has `ArrayBuffer.prototype.transfer` only behind --harmony-rab-gsab-transfer;
 * Node 21 and later ship it. With it a WebRTC link drops each received message's memory as soon
 * as its receiver gives it back, and reuses its send buffers (comm/webrtc-buffers.ts); without it
 * the arrays `@roamhq/wrtc` delivers wait for the collector, and a 64 MiB allreduce's peak was
 * 1.6-2.2x the tensor against 1.25x with the flag (docs/COLLECTIVES.md, "The allreduce's own peak").
 */
export function nodeRuntimeFlags(): string[] {
  // The children run this process's Node (process.execPath), so what this one lacks they lack.
  const shipped = typeof (ArrayBuffer.prototype as { transfer?: unknown }).transfer === 'function';
  return shipped ? [] : ['--harmony-rab-gsab-transfer'];
}
