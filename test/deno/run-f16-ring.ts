/**
 * f16-mixed in a ring under Deno (lavapipe has 'shader-f16'), for test/deno/f16-mixed.test.ts: two
 * memory-linked ranks train an MLP at the job's precision. One training example holds a value past
 * f16's range, so the step that draws it overflows on the one rank that holds it: every rank must
 * skip that step, keep the same loss scale and end at the same weights. And a clean f16-mixed ring
 * ends near the f32 ring's weights (the ring sums unscaled gradients). With two backward passes a step,
 * the step whose either pass draws it is skipped once, at its last pass. A job that lets peers mix
 * precisions trains an f32 rank beside an f16-mixed one, both skipping what the f16-mixed one overflowed.
 * Prints one JSON line.
 */
import { createMemoryRing } from '../../src/comm/rings.ts';
import { makeImageDataset } from '../../src/data/dataset.ts';
import { trainDistributed, type DistributedTrainConfig } from '../../src/distributed/train/trainer.ts';
import { seededUniform } from '../../src/engine/random.ts';
import { acquireGpu } from '../../src/gpu/device.ts';

const gpu = await acquireGpu();
const u = seededUniform(9);
const count = 64;
const images = Float32Array.from({ length: count * 784 }, () => u());
const labels = Array.from({ length: count }, (_, i) => i % 10);
const data = (poisoned: boolean) => {
  const x = images.slice();
  // Past f16's 65504: the first linear layer's cast of x overflows wherever this example is drawn.
  if (poisoned) x[5 * 784 + 400] = 1e5;
  const part = { images: x, labels, height: 28, width: 28, classes: 10 };
  return { train: makeImageDataset(part), test: makeImageDataset(part) };
};

const job: DistributedTrainConfig = {
  ...{ model: 'mlp', optimizer: 'sgd', epochs: 1, steps: 8, batch: 8, lr: 0.05, momentum: 0.9, weightDecay: 0 },
  ...{ seed: 2, guard: { direction: false, doubt: false }, precision: 'f16-mixed' },
};

/** Two ranks train `config` (or each its own): each rank's skipped steps and loss scales, and its final weights. */
async function trainTwo(config: DistributedTrainConfig | DistributedTrainConfig[], poisoned: boolean) {
  const configs = Array.isArray(config) ? config : [config, config];
  const { train, test } = data(poisoned);
  const comms = createMemoryRing(2);
  const ranks = comms.map(() => ({
    skipped: [] as number[],
    scales: [] as number[],
    params: new Float32Array() as Float32Array,
  }));
  comms.forEach((c, r) =>
    c.events.on((e) => {
      if (e.type !== 'train-step' || e.rank !== r) return;
      if (e.skipped) ranks[r].skipped.push(e.step);
      ranks[r].scales.push(e.lossScale ?? NaN);
    }),
  );
  await Promise.all(
    comms.map((comm, r) =>
      trainDistributed({
        ...{ gpu, comm, train, test, config: configs[r] },
        onWeights: (w) => void (ranks[r].params = w.params),
      }),
    ),
  );
  comms.forEach((c) => c.close());
  return ranks;
}

const same = (a: Float32Array, b: Float32Array) => a.length > 0 && a.every((v, i) => Object.is(v, b[i]));
const overflow = async (config: Partial<DistributedTrainConfig>, precisions?: ('f32' | 'f16-mixed')[]) => {
  const configs = (precisions ?? ['f16-mixed', 'f16-mixed']).map((precision) => ({ ...job, ...config, precision }));
  const [a, b] = await trainTwo(configs, true);
  const finite = a.params.every(Number.isFinite);
  return {
    skipped: [a.skipped, b.skipped],
    scales: [a.scales, b.scales],
    sameWeights: same(a.params, b.params),
    finite,
  };
};
const buckets = await overflow({ overlap: true });
const whole = await overflow({ overlap: false });
// Two backward passes a step (summed, then reduced whole): a step is skipped when either pass drew the example.
const passesPerStep = 2;
const passes = await overflow({ backwardPassesPerStep: passesPerStep });
// A job that lets peers mix precisions: one f32 rank beside one f16-mixed rank, then the other way round, to just
// past the first step that draws the example. It overflows where the example falls to the f16-mixed rank, and both
// ranks skip it.
const mixedSteps = whole.skipped[0][0] + 1;
const mixed = [
  await overflow({ mixPrecisions: true, steps: mixedSteps }, ['f32', 'f16-mixed']),
  await overflow({ mixPrecisions: true, steps: mixedSteps }, ['f16-mixed', 'f32']),
];
const [f16] = await trainTwo(job, false);
const [f32] = await trainTwo({ ...job, precision: 'f32' }, false);
let [err, scale] = [0, 1e-30];
f32.params.forEach(
  (v, i) => ((err = Math.max(err, Math.abs(f16.params[i] - v))), (scale = Math.max(scale, Math.abs(v)))),
);
const clean = { skipped: f16.skipped, weightError: err / scale, differs: !same(f16.params, f32.params) };
console.log(JSON.stringify({ adapter: gpu.info.description, buckets, whole, passes, passesPerStep, mixed, clean }));
gpu.destroy();
