/**
 * Runs the data-parallel equivalence experiment under the current runtime
 * (Deno, spawned by equivalence.test.ts) and prints one JSON line. For each
 * N it trains one rank at batch N·B and N ranks at batch B (real trainer, real
 * ring-allreduce over memory links, each rank its own model on the real WebGPU
 * adapter) and reports how far apart the final weights are.
 *
 * Then the same with uneven shares: 3 ranks share a global batch of 3·B+1 by
 * measured speed (--balance speed) while one of them computes 4x slower (the
 * test-only slow fault), against one rank at 3·B+1.
 *
 * Usage: deno run -A test/distributed/equivalence-run.ts STEPS BATCH N [N …]
 */
import { createMemoryRing } from '../../src/comm/rings.ts';
import type { TrainingCheckpoint } from '../../src/checkpoint/checkpoint.ts';
import { makeImageDataset } from '../../src/data/dataset.ts';
import { loadMnist } from '../../src/data/mnist.node.ts';
import { faultHook, parseFault } from '../support/chaos/faults.ts';
import { trainDistributed, type DistributedTrainConfig } from '../../src/distributed/train/trainer.ts';
import { acquireGpu } from '../../src/gpu/device.ts';

const [steps, batch, ...ns] = (globalThis as unknown as { Deno: { args: string[] } }).Deno.args.map(Number);
const gpu = await acquireGpu();
const mnist = await loadMnist();
// 960 examples divide evenly by 1, 2 and 4 ranks and by the batches used.
const n = 960;
const px = 784;
const train = makeImageDataset({
  images: mnist.train.images.slice(0, n * px),
  labels: mnist.train.labels.slice(0, n),
  height: 28,
  width: 28,
  classes: 10,
});
const test = makeImageDataset({
  images: mnist.test.images.slice(0, 200 * px),
  labels: mnist.test.labels.slice(0, 200),
  height: 28,
  width: 28,
  classes: 10,
});

function config(b: number, s = steps, lr = 0.1): DistributedTrainConfig {
  return { model: 'mlp', optimizer: 'sgd', epochs: 1, batch: b, lr, momentum: 0, weightDecay: 0, seed: 7, steps: s };
}

async function trainRing(size: number, cfg: DistributedTrainConfig, slowRank = -1) {
  const comms = createMemoryRing(size);
  let final: TrainingCheckpoint | undefined;
  // Each rank's examples per step, step by step (its share of the global batch).
  const shares: number[][] = comms.map(() => []);
  comms.forEach((c) =>
    c.events.on((e) => void (e.type === 'train-step' && e.rank === c.rank && shares[c.rank].push(e.samples))),
  );
  const slow = parseFault('slow:4x');
  const results = await Promise.all(
    comms.map((comm) =>
      trainDistributed({
        gpu,
        comm,
        train,
        test,
        config: cfg,
        onCheckpoint: (c) => void (final = c),
        transformGradients: comm.rank === slowRank ? faultHook(slow, () => comm) : undefined,
      }),
    ),
  );
  comms.forEach((c) => c.close());
  const params = Float32Array.from(Object.values(final!.params).flatMap((t) => Array.from(t.data)));
  return { params, steps: results.map((r) => r.steps), accuracies: results.map((r) => r.testAccuracy), shares };
}

function maxRelativeDifference(a: Float32Array, b: Float32Array): number {
  if (a.length !== b.length) return Infinity;
  let worst = 0;
  // Relative to the weight's own size, floored so weights near zero compare absolutely.
  for (let i = 0; i < a.length; i++) worst = Math.max(worst, Math.abs(a[i] - b[i]) / Math.max(Math.abs(b[i]), 1e-2));
  return worst;
}

// The starting weights: one step at a vanishing learning rate.
const initial = (await trainRing(1, config(batch, 1, 1e-12))).params;
const out = [];
for (const size of ns) {
  const single = await trainRing(1, config(size * batch));
  const ring = await trainRing(size, config(batch));
  out.push({
    size,
    steps: ring.steps,
    movedFromInitial: maxRelativeDifference(single.params, initial),
    maxRelDiff: maxRelativeDifference(ring.params, single.params),
    accuracies: ring.accuracies,
  });
}
const global = 3 * batch + 1;
const single = await trainRing(1, config(global));
const balanced = await trainRing(3, { ...config(batch), globalBatch: global, balance: 'speed' }, 1);
const uneven = {
  global,
  steps: balanced.steps,
  movedFromInitial: maxRelativeDifference(single.params, initial),
  maxRelDiff: maxRelativeDifference(balanced.params, single.params),
  accuracies: balanced.accuracies,
  // Rank 1 (the slow one) first and last.
  firstShares: balanced.shares.map((s) => s[0]),
  lastShares: balanced.shares.map((s) => s.at(-1)),
};
console.log(JSON.stringify({ runtime: gpu.info.runtime, adapter: gpu.info.description, results: out, uneven }));
gpu.destroy();
