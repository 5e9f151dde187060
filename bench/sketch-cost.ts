/**
 * What the step checks cost on the CPU per step: the direction sketch (256
 * buckets), the verified allreduce's per-chunk sketches (64 buckets, 4 chunks)
 * and, for comparison in the same run, the plain L2 norm the guard already
 * took. Prints one JSON line per size (ms per call, mean of 10).
 *
 * Usage: npx tsx bench/sketch-cost.ts
 */
import { sketch, stepSeed } from '../src/collectives/robust/sketch.ts';
import { chunkSketches, ringChunks } from '../src/collectives/robust/verified.ts';
for (const n of [100_000, 1_000_000]) {
  const x = Float32Array.from({ length: n }, (_, i) => Math.sin(i));
  const c = ringChunks(n, 4);
  for (let w = 0; w < 3; w++) {
    sketch(x, 256, stepSeed(1, w));
    chunkSketches(x, c, 64, w);
  }
  let t = performance.now();
  for (let i = 0; i < 10; i++) sketch(x, 256, stepSeed(1, i));
  const a = (performance.now() - t) / 10;
  t = performance.now();
  for (let i = 0; i < 10; i++) chunkSketches(x, c, 64, i);
  const b = (performance.now() - t) / 10;
  let s = 0;
  t = performance.now();
  for (let i = 0; i < 10; i++) for (let j = 0; j < n; j++) s += x[j] * x[j];
  const d = (performance.now() - t) / 10;
  console.log(
    JSON.stringify({
      n,
      directionSketchMs: +a.toFixed(2),
      verifySketchesMs: +b.toFixed(2),
      l2NormMs: +d.toFixed(2),
      s: s > 0,
    }),
  );
}
