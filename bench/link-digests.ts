/**
 * What the verified allreduce's checks after the sum cost one rank per step (link-digests.ts,
 * verify-verdicts.ts), on a gradient of `--floats` (10.8M: the transformer bench's) cut into the
 * ring chunks of `--size` ranks, against what verification without link digests sketches.
 *
 *  - copies: the contribution, and what it sent and received in reduce-scatter ((size-1)/size of the
 *    gradient each), into buffers kept from step to step (step-checks.ts);
 *  - sha256: the sum's hash (it reveals the seed) and the hash of what it sent (WebCrypto);
 *  - sketches: one pass per chunk under the revealed seed (link-digests.ts's stepSketches): its
 *    contribution's sketch and masses, the sum's, and what it sent and received (64 buckets);
 *  - signatures: one over its verdict block, and checking the others';
 *  - verifier_sketches: what verification without digests sketches, each alone: the contribution's
 *    chunk sketches (verified.ts's chunkSketches) and the sum's (verified.ts's wrongChunks).
 *
 * added = copies + sha256 + sketches - verifier_sketches: the link digests' own cost. Each figure is
 * the median of `--runs`, in CPU milliseconds of the process (WebCrypto's threads included; less
 * distorted by a loaded machine than wall time) and in wall milliseconds. Prints one JSON line.
 *
 * Usage: npx tsx bench/link-digests.ts [--floats 10800000] [--size 4] [--runs 3]   (or deno run -A)
 */
import { chunkHashes, receives, sends, stepSketches } from '../src/collectives/robust/link-digests.ts';
import { median } from '../src/core/stats.ts';
import { chunkSketches, ringChunks, wrongChunks } from '../src/collectives/robust/verified.ts';
import {
  importPublicKey,
  newSigningKeys,
  sign,
  verify,
  type SigningKeys,
} from '../src/distributed/session/ring-keys.ts';
import { verdictWords } from '../src/distributed/robust/verify-verdicts.ts';
import { opt } from './args.ts';

const floats = Number(opt('floats', '10800000'));
const size = Number(opt('size', '4'));
const runs = Number(opt('runs', '3'));
const K = 64;
const rank = 1;
const SEED = 7;

const gradient = Float32Array.from({ length: floats }, (_, i) => Math.sin(i) * 1e-3);
const reduced = Float32Array.from(gradient, (v) => 4 * v);
const chunks = ringChunks(floats, size, undefined, 0, 0);
const contribution = new Float32Array(floats);
const sent = new Float32Array(floats);
const received = new Float32Array(floats);
const keys = (await newSigningKeys()) as SigningKeys;
const publicKey = (await importPublicKey(keys.publicText))!;
const block = new Uint8Array(4 * verdictWords(chunks.length, K));
const published = Array.from({ length: size }, () => chunkSketches(gradient, chunks, K, SEED));

/** CPU time of the whole process in ms (every thread), or wall time where the runtime has no counter. */
function cpuNow(): number {
  const usage = (globalThis as { process?: { cpuUsage?: () => { user: number; system: number } } }).process?.cpuUsage;
  if (!usage) return performance.now();
  const { user, system } = usage();
  return (user + system) / 1000;
}

const figures = new Map<string, { cpu: number[]; wall: number[] }>();
async function timed(name: string, f: () => unknown | Promise<unknown>): Promise<void> {
  const cpu = cpuNow();
  const wall = performance.now();
  await f();
  const entry = figures.get(name) ?? { cpu: [], wall: [] };
  entry.cpu.push(cpuNow() - cpu);
  entry.wall.push(performance.now() - wall);
  figures.set(name, entry);
}

for (let i = 0; i < runs; i++) {
  await timed('copies', () => {
    contribution.set(gradient);
    for (const c of chunks) {
      if (sends(c, rank)) sent.set(gradient.subarray(c.offset, c.offset + c.count), c.offset);
      if (receives(c, rank, size)) received.set(gradient.subarray(c.offset, c.offset + c.count), c.offset);
    }
  });
  await timed('sha256', () =>
    Promise.all([chunkHashes(reduced, chunks, (c) => c.count > 0), chunkHashes(sent, chunks, (c) => sends(c, rank))]),
  );
  await timed('sketches', () => stepSketches({ contribution, reduced, sent, received }, chunks, K, SEED, rank, size));
  await timed('signatures', async () => {
    // One signature over this rank's verdict block; the others' blocks checked as they arrive.
    const signature = new Uint8Array(await sign(keys, block));
    for (let r = 1; r < size; r++) await verify(publicKey, signature, block);
  });
  await timed('own_sketches', () => chunkSketches(contribution, chunks, K, SEED));
  await timed('sum_sketches', () => wrongChunks(reduced, chunks, published, K, SEED, 1));
}

const out: Record<string, number | string> = { bench: 'link-digests', floats, size, runs };
for (const kind of ['cpu', 'wall'] as const) {
  const m = (name: string) => median(figures.get(name)![kind]);
  const verifier = m('own_sketches') + m('sum_sketches');
  const added = m('copies') + m('sha256') + m('sketches') - verifier;
  for (const name of figures.keys()) out[`${kind}_${name}_ms`] = Number(m(name).toFixed(1));
  out[`${kind}_verifier_sketches_ms`] = Number(verifier.toFixed(1));
  out[`${kind}_added_ms`] = Number(added.toFixed(1));
  out[`${kind}_added_to_verifier_sketches`] = Number((added / verifier).toFixed(2));
}
console.log(JSON.stringify(out));
