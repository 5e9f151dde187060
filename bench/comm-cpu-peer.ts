/**
 * One rank of bench/simulator-check.ts's link measurement (Deno or Node; it
 * reads /proc/self/stat). Two ranks over a real WebRTC link run the library's
 * own ring allreduce, first of one float (a message's cost: latency and CPU),
 * then of `--bytes` (the per-byte cost), then an allgather of one float (one
 * message: what a collective costs beyond its messages), and report for each
 * the wall seconds and this process's CPU seconds per call.
 */
import { readFileSync } from 'node:fs';
import process from 'node:process';
import { allgather } from '../src/collectives/allgather.ts';
import { allreduce } from '../src/collectives/allreduce.ts';
import { barrier } from '../src/collectives/barrier.ts';
import { joinRingFromArgs } from '../src/comm/local-ring-peer.node.ts';
import { now } from '../src/core/events.ts';

function cpuSeconds(): number {
  const text = readFileSync('/proc/self/stat', 'utf8');
  const f = text.slice(text.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) / 100; // utime + stime, every thread; USER_HZ is 100
}

const { values, rank, comm } = await joinRingFromArgs(
  { bytes: { type: 'string' }, small: { type: 'string' }, large: { type: 'string' } },
  () => ({ peerTimeoutMs: 30_000 }),
);
const phases: Record<string, { bytes: number; iterations: number; wall_s: number; cpu_s: number }> = {};
for (const [phase, bytes, iterations] of [
  ['warmup', Number(values.bytes), 3],
  ['small', 4, Number(values.small ?? 300)],
  ['large', Number(values.bytes), Number(values.large ?? 20)],
  ['gather', 4, Number(values.small ?? 300)],
] as const) {
  const data = new Float32Array(Math.max(1, Math.floor(bytes / 4))).fill(rank + 1);
  await barrier(comm, { timeoutMs: 60_000 });
  const [t0, c0] = [now(), cpuSeconds()];
  // The ring, as the trainer's gradient allreduce takes it (auto would pick recursive doubling for the small one).
  for (let i = 0; i < iterations; i++) {
    if (phase === 'gather') await allgather(comm, data, { name: `${phase}-${i}`, timeoutMs: 60_000 });
    else await allreduce(comm, data, { name: `${phase}-${i}`, algorithm: 'ring', timeoutMs: 60_000 });
  }
  const [t1, c1] = [now(), cpuSeconds()];
  phases[phase] = { bytes, iterations, wall_s: (t1 - t0) / 1000 / iterations, cpu_s: (c1 - c0) / iterations };
}
process.stdout.write(
  JSON.stringify({
    rank,
    runtime: typeof (globalThis as { Deno?: unknown }).Deno === 'object' ? 'deno' : 'node',
    phases,
  }) + '\n',
);
await barrier(comm, { timeoutMs: 60_000 });
await comm.close();
process.exit();
