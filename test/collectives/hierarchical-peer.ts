/**
 * One rank of a local WebRTC ring for hierarchical-webrtc.test.ts: the hierarchical allreduce
 * over real data channels. Runs under Node (tsx) and under Deno alike. Every rank can compute
 * every rank's input (seeded), so each checks its own results against the float64 reference and
 * prints one JSON line with checksums, which the test compares across ranks (bitwise equal).
 */
import process from 'node:process';
import { parseArgs } from 'node:util';
import { joinLocalRing } from '../../src/comm/local-ring.node.ts';
import { allreduce } from '../../src/collectives/index.ts';
import type { RankGroups, ReduceOp, Tensor } from '../../src/collectives/codecs/types.ts';
import type { RingEvent } from '../../src/core/events.ts';
import { detectRuntime } from '../../src/core/runtime.ts';
import { input, reference, tolerance, valuesOf, type Kind } from './reference.ts';

const { values } = parseArgs({
  options: { dir: { type: 'string' }, rank: { type: 'string' }, size: { type: 'string' } },
});
const rank = Number(values.rank);
const size = Number(values.size);
const out = (o: object) => process.stdout.write(JSON.stringify({ rank, runtime: detectRuntime(), ...o }) + '\n');

function checksum(t: Tensor): string {
  const b = new Uint8Array(t.buffer, t.byteOffset, t.byteLength);
  let h = 0x811c9dc5;
  for (let i = 0; i < b.length; i++) h = Math.imul(h ^ b[i], 0x01000193) >>> 0;
  return h.toString(16);
}

/** The cases: name, dtype, op, length, groups, forced or 'auto', segment size. */
const CASES: [string, Kind, ReduceOp, number, RankGroups, string, number][] = [
  [
    'interleaved hosts f32 sum',
    'float32',
    'sum',
    100_003,
    [
      [0, 2],
      [1, 3],
    ],
    'hierarchical',
    8192,
  ],
  ['a lone rank, fp16 average', 'fp16', 'average', 4999, [[0, 1, 2], [3]], 'hierarchical', 2048],
  ['shorter than the ranks, int32 max', 'int32', 'max', 3, 2, 'hierarchical', 1 << 20],
  ['auto with 2 per host, f32 sum', 'float32', 'sum', 1_000_001, 2, 'auto', 1 << 18],
];

// Generous: tests share two cores with other tests, and a starved peer must not look dead.
const comm = await joinLocalRing({ dir: values.dir!, rank, size, peerTimeoutMs: 8000, heartbeatMs: 250 });
const phases = new Set<string>();
comm.events.on((e: RingEvent) => e.type === 'phase-begin' && phases.add(e.phase));
const sums: Record<string, string> = {};
/** The phases each case ran (which algorithm 'auto' chose shows here). */
const ran: Record<string, string[]> = {};
try {
  for (const [name, kind, op, count, groups, algorithm, segmentBytes] of CASES) {
    const inputs = Array.from({ length: size }, (_, r) => input(kind, op, count, r));
    const compression = kind === 'fp16' ? 'fp16' : 'none';
    phases.clear();
    const got = await allreduce(comm, inputs[rank], { name, op, groups, algorithm, segmentBytes, compression });
    const ref = reference(op, inputs);
    const v = valuesOf(got);
    for (let i = 0; i < count; i++)
      if (!(Math.abs(v[i] - ref[i]) <= tolerance(kind, op, inputs, i, ref[i])))
        throw new Error(`${name}: element ${i} is ${v[i]}, reference ${ref[i]}`);
    sums[name] = checksum(got);
    ran[name] = [...phases];
  }
  out({ ok: true, sums, ran });
} catch (e) {
  out({ ok: false, error: (e as Error).message });
}
await comm.close();
process.exit(0);
