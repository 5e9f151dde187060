/**
 * One rank of bench/link-cpu.ts (Node only: it reads /proc). Ranks 0 and 1
 * stream to each other over a real WebRTC link, first one way, then both ways,
 * and each reports the CPU seconds every thread of its process spent per phase.
 */
import { readdirSync, readFileSync } from 'node:fs';
import process from 'node:process';
import { parseArgs } from 'node:util';
import { joinLocalRing } from '../src/comm/local-ring.node.ts';
import { barrier } from '../src/collectives/barrier.ts';
import { streamBytes } from '../src/collectives/measure.ts';
import { now } from '../src/core/events.ts';

const { values } = parseArgs({
  options: { dir: { type: 'string' }, rank: { type: 'string' }, size: { type: 'string' }, bytes: { type: 'string' } },
});
const rank = Number(values.rank);
const bytes = Number(values.bytes);
const TICKS = 100; // USER_HZ on Linux

/** CPU seconds so far of each thread of this process, grouped by thread name. */
function threadSeconds(): Map<string, number> {
  const out = new Map<string, number>();
  for (const tid of readdirSync('/proc/self/task')) {
    try {
      const name = readFileSync(`/proc/self/task/${tid}/comm`, 'utf8').trim();
      const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const secs = (Number(fields[11]) + Number(fields[12])) / TICKS; // utime + stime
      // The main thread is the one whose tid is the pid.
      const key = Number(tid) === process.pid ? 'main (JS)' : name;
      out.set(key, (out.get(key) ?? 0) + secs);
    } catch {
      // the thread ended between readdir and read
    }
  }
  return out;
}

function diff(a: Map<string, number>, b: Map<string, number>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, v] of b) {
    const d = v - (a.get(k) ?? 0);
    if (d >= 0.01) out[k] = Math.round(d * 100) / 100;
  }
  return out;
}

const comm = await joinLocalRing({
  dir: values.dir!,
  rank,
  size: Number(values.size),
  connectTimeoutMs: 60_000,
  peerTimeoutMs: 20_000,
});
const other = 1 - rank;
const phases: Record<string, { seconds: number; cpu: Record<string, number> }> = {};
for (const [phase, send, recv] of [
  ['warmup', rank === 0, rank === 1],
  ['one_way', rank === 0, rank === 1],
  ['both_ways', true, true],
] as const) {
  await barrier(comm, { timeoutMs: 60_000 });
  const before = threadSeconds();
  const t0 = now();
  await streamBytes(comm, comm.nextId(), bytes, send ? other : null, recv ? other : null, 120_000);
  await barrier(comm, { timeoutMs: 60_000 });
  phases[phase] = { seconds: Math.round(now() - t0) / 1000, cpu: diff(before, threadSeconds()) };
}
process.stdout.write(JSON.stringify({ rank, phases }) + '\n');
await comm.close();
process.exit();
