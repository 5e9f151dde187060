/**
 * What signed link digests cost one rank per verified step (link-digests.ts, verify-verdicts.ts), on
 * a gradient of `--floats` (10.8M: the transformer bench's) cut into the ring chunks of `--size`
 * ranks: keeping copies of its contribution and of what it sent and received in reduce-scatter
 * ((size-1)/size of the gradient each), hashing the sum (for the revealed seed) and both (SHA-256,
 * WebCrypto), sketching both (64 buckets per chunk), then signing the verdict block that carries them
 * and checking the others' signatures. Beside it, in the same run, what the verified allreduce spent
 * per step before: the per-chunk sketches of the rank's own contribution (verified.ts's chunkSketches,
 * now taken after the sum). Prints one JSON line (median of `--runs`).
 *
 * Usage: npx tsx bench/link-digests.ts [--floats 10800000] [--size 4] [--runs 3]   (or deno run -A)
 */
import {
  chunkHashes,
  chunkSketchesWhere,
  digestWords,
  receives,
  sends,
} from '../src/collectives/robust/link-digests.ts';
import { median } from '../src/core/stats.ts';
import { chunkSketches, ringChunks } from '../src/collectives/robust/verified.ts';
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

const gradient = Float32Array.from({ length: floats }, (_, i) => Math.sin(i) * 1e-3);
const chunks = ringChunks(floats, size, undefined, 0, 0);
const contribution = new Float32Array(floats);
const sent = new Float32Array(floats);
const received = new Float32Array(floats);
const keys = (await newSigningKeys()) as SigningKeys;
const publicKey = (await importPublicKey(keys.publicText))!;
const block = new Uint8Array(4 * verdictWords(chunks.length, K));

async function timed(f: () => unknown | Promise<unknown>): Promise<number> {
  const t = performance.now();
  await f();
  return performance.now() - t;
}

const copyMs: number[] = [];
const hashMs: number[] = [];
const sketchMs: number[] = [];
const signMs: number[] = [];
const ownSketchMs: number[] = [];
for (let i = 0; i < runs; i++) {
  const out = (c: (typeof chunks)[number]) => sends(c, rank);
  const got = (c: (typeof chunks)[number]) => receives(c, rank, size);
  copyMs.push(
    await timed(() => {
      contribution.set(gradient);
      for (const c of chunks) {
        if (out(c)) sent.set(gradient.subarray(c.offset, c.offset + c.count), c.offset);
        if (got(c)) received.set(gradient.subarray(c.offset, c.offset + c.count), c.offset);
      }
    }),
  );
  hashMs.push(
    await timed(() =>
      Promise.all([
        chunkHashes(gradient, chunks, () => true),
        chunkHashes(sent, chunks, out),
        chunkHashes(received, chunks, got),
      ]),
    ),
  );
  sketchMs.push(
    await timed(() => {
      chunkSketchesWhere(sent, chunks, K, 7, out);
      chunkSketchesWhere(received, chunks, K, 7, got);
    }),
  );
  signMs.push(
    await timed(async () => {
      // One signature over this rank's verdict block; the others' blocks checked as they arrive.
      const signature = new Uint8Array(await sign(keys, block));
      for (let r = 1; r < size; r++) await verify(publicKey, signature, block);
    }),
  );
  ownSketchMs.push(await timed(() => chunkSketches(gradient, chunks, K, 7)));
}
const digestMs = median(copyMs) + median(hashMs) + median(sketchMs);
console.log(
  JSON.stringify({
    bench: 'link-digests',
    floats,
    size,
    runs,
    copy_ms: Number(median(copyMs).toFixed(1)),
    sha256_ms: Number(median(hashMs).toFixed(1)),
    sketch_ms: Number(median(sketchMs).toFixed(1)),
    signatures_ms: Number(median(signMs).toFixed(2)),
    digest_ms: Number(digestMs.toFixed(1)),
    verify_sketches_ms: Number(median(ownSketchMs).toFixed(1)),
    ratio_to_verify_sketches: Number((digestMs / median(ownSketchMs)).toFixed(2)),
  }),
);
