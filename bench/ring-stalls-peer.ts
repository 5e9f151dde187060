/**
 * One rank of bench/ring-stalls.ts (Node or Deno; Linux: it reads /proc). Each round times a 64 MiB
 * ring allreduce and then the exchange bench allreduce holds it to (measure.ts), noting when every
 * segment or piece arrived, how late this event loop's 10 ms ticks came, and the network namespace's
 * UDP receive-buffer drops. Prints one JSON line per round.
 */
import process from 'node:process';
import type { Communicator } from '../src/comm/interface.ts';
import { joinRingFromArgs } from '../src/comm/local-ring-peer.node.ts';
import { allreduceInPlace } from '../src/collectives/allreduce.ts';
import { barrier } from '../src/collectives/barrier.ts';
import { streamBytes } from '../src/collectives/measure.ts';
import { now } from '../src/core/events.ts';
import { udpReceiveDrops } from '../src/cli/commands/bench-udp-drops.node.ts';

/** A gap this long between two arrivals is a stall: a retransmission timeout, or a process without CPU. */
const STALL_MS = 250;

const { values, rank, comm } = await joinRingFromArgs({ bytes: { type: 'string' }, rounds: { type: 'string' } });
const bytes = Number(values.bytes);
const count = bytes / 4;
const data = new Float32Array(count).map((_, i) => ((i * 7919 + rank * 31) % 1000) / 1000 - 0.5);
const timeoutMs = 120_000;
const opts = { name: 'stalls', timeoutMs, op: 'average' as const, chunkBytes: bytes };

/** Runs `body` while noting arrival times (`arrived` is called by it) and the event loop's ticks; the round's figures. */
async function watched(body: (arrived: () => void) => Promise<void>) {
  const arrivals: number[] = [];
  let lastTick = now();
  let lateTick = 0;
  const ticker = setInterval(() => {
    lateTick = Math.max(lateTick, now() - lastTick);
    lastTick = now();
  }, 10);
  const drops = udpReceiveDrops();
  const t0 = now();
  await body(() => arrivals.push(now()));
  const seconds = (now() - t0) / 1000;
  clearInterval(ticker);
  const gaps = arrivals.slice(1).map((t, i) => t - arrivals[i]);
  const stalls = gaps.filter((g) => g >= STALL_MS).map((g) => Math.round(g));
  const after = udpReceiveDrops();
  return { seconds, stalls_ms: stalls, longest_tick_ms: Math.round(lateTick), udp_receive_drops: after! - drops! };
}

/** `comm`, with each message it hands to streamBytes noted as it arrives. */
function noting(c: Communicator, arrived: () => void): Communicator {
  return {
    send: (p: number, t: Parameters<Communicator['send']>[1], m: Uint8Array) => c.send(p, t, m),
    recv: (p: number, t: Parameters<Communicator['recv']>[1], ms?: number) =>
      c.recv(p, t, ms).then((m) => (arrived(), m)),
    release: (p: number, m: Uint8Array) => c.release?.(p, m),
  } as unknown as Communicator;
}

await allreduceInPlace(comm, data.subarray(0, Math.min(count, 16 << 20)), { ...opts, chunkBytes: undefined });
for (let round = 0; round < Number(values.rounds ?? 6); round++) {
  await barrier(comm, { timeoutMs });
  const ring = await watched(async (arrived) => {
    const off = comm.events.on((e) => e.type === 'chunk-recv' && e.rank === rank && arrived());
    await allreduceInPlace(comm, data, opts);
    off();
  });
  await barrier(comm, { timeoutMs });
  const id = comm.nextId();
  const other = 1 - rank;
  const exchange = await watched(async (arrived) => {
    await streamBytes(noting(comm, arrived), id, bytes, other, other, timeoutMs);
    await comm.send(other, { id, step: 1, chunk: 0 }, new Uint8Array(1));
    await comm.recv(other, { id, step: 1, chunk: 0 }, timeoutMs);
  });
  process.stdout.write(JSON.stringify({ rank, round, ring, exchange }) + '\n');
}
process.stdout.write('{"done":true}\n');
await comm.close();
process.exit();
