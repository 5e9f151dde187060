/**
 * One rank of bench/allreduce-cpu.ts: times `--calls` back-to-back round trips
 * (ranks 0 and 1 only) and allreduces of `--bytes`, one algorithm at a time,
 * and reads this process's CPU time (every thread: JavaScript, libwebrtc and the
 * kernel on its behalf) around each. Prints one JSON line.
 */
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { join } from 'node:path';
import process from 'node:process';
import { joinRingFromArgs } from '../src/comm/local-ring-peer.node.ts';
import { allreduce, allreduceInPlace } from '../src/collectives/allreduce.ts';
import { barrier } from '../src/collectives/barrier.ts';
import { roundTrip } from '../src/collectives/measure.ts';
import type { Algorithm } from '../src/collectives/codecs/types.ts';

const { values, rank, comm } = await joinRingFromArgs({
  bytes: { type: 'string' },
  calls: { type: 'string' },
  algorithms: { type: 'string' },
  'in-place': { type: 'boolean' },
  'cpu-prof': { type: 'string' },
});
const bytes = Number(values.bytes);
const calls = Number(values.calls);
const timeoutMs = 60_000;
const data = Float32Array.from(
  { length: Math.floor(bytes / 4) },
  (_, i) => ((i * 7919 + rank * 31) % 1000) / 1000 - 0.5,
);

const kinds = ['round-trip', ...String(values.algorithms).split(',')];
const reduce = values['in-place'] ? allreduceInPlace : allreduce;
const call = (kind: string) =>
  kind === 'round-trip'
    ? roundTrip(comm, bytes, timeoutMs)
    : reduce(comm, data, { name: `cpu-${kind}`, algorithm: kind as Algorithm, timeoutMs });
// With --cpu-prof DIR, each kind's timed calls (and only they) are profiled into DIR/rank-R-KIND.cpuprofile.
const profileDir = typeof values['cpu-prof'] === 'string' ? values['cpu-prof'] : null;
const inspector = profileDir ? new Session() : null;
inspector?.connect();
await inspector?.post('Profiler.enable');
// Warm up: links open their windows, every allreduce is negotiated once (later calls hit the cache).
for (const kind of kinds) await call(kind);
const out: Record<string, { wall_ms: number; cpu_ms: number }> = {};
for (const kind of kinds) {
  await barrier(comm, { timeoutMs });
  await inspector?.post('Profiler.start');
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  for (let i = 0; i < calls; i++) await call(kind);
  const wall = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  if (inspector) {
    const { profile } = await inspector.post('Profiler.stop');
    writeFileSync(join(profileDir!, `rank-${rank}-${kind}.cpuprofile`), JSON.stringify(profile));
  }
  out[kind] = { wall_ms: wall / calls, cpu_ms: (cpu.user + cpu.system) / 1000 / calls };
}
process.stdout.write(JSON.stringify({ rank, out }) + '\n');
await comm.close();
process.exit();
