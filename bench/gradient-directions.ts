/**
 * How honest gradients look to the direction rule (src/distributed/robust/direction.ts),
 * and how a sign-flipped ×F gradient looks. Trains N ranks for real (trainer,
 * ring-allreduce over memory links, each rank its own model on the real WebGPU
 * adapter, the guard off so nothing is dropped), records every rank's gradient
 * sketch at every step, and computes what the rule computes:
 *
 *   normRatio  = |g_r| / median over ranks of |g|
 *   alignment  = <S(g_r), m> / |m| / median |g|  (m: the coordinate-wise median of all ranks' sketches)
 *
 * For the attack it replaces rank 0's sketch by -F × its own at the same step
 * (counterfactual: training itself stays honest) and recomputes both numbers
 * for every rank, so the honest ranks' figures under attack are measured too.
 * Prints one JSON line per model: percentiles and extremes.
 *
 * --raw PREFIX also writes PREFIX.MODEL.json: every step's per-rank norms and
 * sketches, so other rules can be tried offline on the same honest run.
 *
 * --doubt RATIO,COSINE,NAMED_AFTER,CLIP trains with the doubt rule on (src/distributed/robust/doubt.ts;
 * the norm rule too) instead of with every check off: what the rule costs an honest run
 * (its accuracy on --test-examples, default 200; the contributions it left out and clipped,
 * counted offline by bench/doubt-replay.ts from --raw; a rank it named ends the run with an error).
 *
 * Usage: deno run -A bench/gradient-directions.ts [--models mlp,cnn] [--ranks 4] [--batch 8] [--steps 300] [--factor 20]
 * [--buckets 256] [--seed 11] [--raw PREFIX]
 *        [--doubt 6,0.1,2,6] [--test-examples 200]
 */
import { createMemoryRing } from '../src/comm/rings.ts';
import { makeImageDataset } from '../src/data/dataset.ts';
import { loadMnist } from '../src/data/mnist.node.ts';
import { sketch, stepSeed } from '../src/collectives/robust/sketch.ts';
import { directionStats, type DirectionStats } from '../src/distributed/robust/direction.ts';
import { l2Norm } from '../src/distributed/robust/guard.ts';
import { trainDistributed } from '../src/distributed/train/trainer.ts';
import { acquireGpu } from '../src/gpu/device.ts';
import { opt } from './args.ts';
import { percentiles } from './percentiles.ts';

declare const Deno: { writeTextFile(path: string, text: string): Promise<void> };

const models = opt('models', 'mlp,cnn').split(',');
const ranks = Number(opt('ranks', '4'));
const batch = Number(opt('batch', '8'));
const steps = Number(opt('steps', '300'));
const factor = Number(opt('factor', '20'));
const buckets = Number(opt('buckets', '256'));
const seed = Number(opt('seed', '11'));
const testExamples = Number(opt('test-examples', '200'));
const doubtFlag = opt('doubt', '');
const [ratio, cosine, namedAfter, clipRatio] = doubtFlag.split(',').map(Number);
const guard = doubtFlag
  ? { direction: false as const, doubt: { ratio, cosine, namedAfter, clipRatio } }
  : (false as const);

const gpu = await acquireGpu();
const mnist = await loadMnist();
const px = 784;
const train = makeImageDataset({
  images: mnist.train.images,
  labels: mnist.train.labels,
  height: 28,
  width: 28,
  classes: 10,
});
const test = makeImageDataset({
  images: mnist.test.images.slice(0, testExamples * px),
  labels: mnist.test.labels.slice(0, testExamples),
  height: 28,
  width: 28,
  classes: 10,
});

for (const model of models) {
  // step -> per-rank sketch and norm
  const seen = new Map<number, { s: Float64Array; n: number }[]>();
  const comms = createMemoryRing(ranks);
  const t0 = performance.now();
  const results = await Promise.all(
    comms.map((comm, rank) =>
      trainDistributed({
        gpu,
        comm,
        train,
        test,
        config: {
          model,
          optimizer: 'sgd',
          epochs: 1,
          batch,
          lr: 0.05,
          momentum: 0.9,
          weightDecay: 0,
          seed,
          steps,
          guard,
        },
        transformGradients: (g, step) => {
          const row = seen.get(step) ?? [];
          row[rank] = { s: sketch(g, buckets, stepSeed(seed, step)), n: l2Norm(g) };
          seen.set(step, row);
        },
      }),
    ),
  );
  comms.forEach((c) => c.close());
  // Per step (in order): honest figures of every rank, and the attack's (rank 0 flipped) of every rank.
  const honestRows: DirectionStats[][] = [];
  const attackRows: DirectionStats[][] = [];
  for (const step of [...seen.keys()].sort((a, b) => a - b)) {
    const row = seen.get(step)!;
    honestRows.push(
      directionStats(
        row.map((x) => x.s),
        row.map((x) => x.n),
      ),
    );
    const bad = row.map((x, r) => (r === 0 ? { s: x.s.map((v) => -factor * v), n: factor * x.n } : x));
    attackRows.push(
      directionStats(
        bad.map((x) => x.s),
        bad.map((x) => x.n),
      ),
    );
  }
  /** Sums of each rank's alignment over every window of w consecutive steps. */
  const windowSums = (rows: DirectionStats[][], w: number, pick: (rank: number) => boolean): number[] => {
    const out: number[] = [];
    for (let t = w - 1; t < rows.length; t++) {
      for (let r = 0; r < ranks; r++) {
        if (!pick(r)) continue;
        let sum = 0;
        for (let i = t - w + 1; i <= t; i++) sum += rows[i][r].alignment;
        out.push(sum);
      }
    }
    return out;
  };
  const entries: [string, number[]][] = [
    ['honestNormRatio', honestRows.flatMap((row) => row.map((x) => x.normRatio))],
    ['attackerNormRatio', attackRows.map((row) => row[0].normRatio)],
  ];
  for (const w of [1, 2, 3, 5]) {
    entries.push([`honestAlignmentSum${w}`, windowSums(honestRows, w, () => true)]);
    entries.push([`honestUnderAttackAlignmentSum${w}`, windowSums(attackRows, w, (r) => r !== 0)]);
    entries.push([`attackerAlignmentSum${w}`, windowSums(attackRows, w, (r) => r === 0)]);
  }
  const summary = Object.fromEntries(entries.map(([k, v]) => [k, percentiles(v, [0, 0.01, 0.1, 0.5, 0.9, 0.99, 1])]));
  // --raw FILE: every step's figures, for trying other rules offline.
  const raw = opt('raw', '');
  if (raw) {
    const order = [...seen.keys()].sort((a, b) => a - b);
    const round = (v: number) => Number(v.toPrecision(5));
    const norms = order.map((t) => seen.get(t)!.map((x) => x.n));
    const sketches = order.map((t) => seen.get(t)!.map((x) => Array.from(x.s, round)));
    await Deno.writeTextFile(`${raw}.${model}.json`, JSON.stringify({ model, ranks, batch, seed, norms, sketches }));
  }
  console.log(
    JSON.stringify({
      model,
      ranks,
      batch,
      steps: seen.size,
      factor,
      buckets,
      doubt: doubtFlag || null,
      testExamples,
      seconds: (performance.now() - t0) / 1000,
      testAccuracy: results[0].testAccuracy,
      adapter: gpu.info.description,
      ...summary,
    }),
  );
}
gpu.destroy();
