/**
 * One rank of bench/raw-tcp-ring.ts: after a warm-up, `--runs` rounds of one plain TCP stream (rank 0
 * to rank 1, the others idle) and a plain TCP ring (every rank to its right at once), turn about,
 * reading this process's CPU time (JavaScript and the kernel on its behalf) around each. Prints one
 * JSON line: per kind, rank 0's seconds (the ring's slowest link) and this rank's CPU ms, per run.
 */
import process from 'node:process';
import { joinRingFromArgs } from '../src/comm/local-ring-peer.node.ts';
import { rawTcpRing, rawTcpStream } from '../src/cli/commands/bench-raw-tcp.node.ts';

const { values, rank, comm } = await joinRingFromArgs({ bytes: { type: 'string' }, runs: { type: 'string' } });
const bytes = Number(values.bytes);
const runs = Number(values.runs);
const timeoutMs = 120_000;
const kinds = { stream: rawTcpStream, ring: rawTcpRing };
type Run = { seconds: number | null; cpu_ms: number };
const out: Record<keyof typeof kinds, Run[]> = { stream: [], ring: [] };
// Warm up: the loopback's windows open, the loops get compiled.
await rawTcpRing(comm, Math.min(bytes, 16 << 20), timeoutMs);
for (let i = 0; i < runs; i++) {
  for (const kind of ['stream', 'ring'] as const) {
    const cpu0 = process.cpuUsage();
    const seconds = await kinds[kind](comm, bytes, timeoutMs);
    const cpu = process.cpuUsage(cpu0);
    out[kind].push({ seconds, cpu_ms: (cpu.user + cpu.system) / 1000 });
  }
}
process.stdout.write(JSON.stringify({ rank, out }) + '\n');
await comm.close();
process.exit();
