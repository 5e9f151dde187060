/**
 * f16-mixed training under Deno (lavapipe has 'shader-f16'), for test/deno/f16-mixed.test.ts: an
 * MLP whose loss scale starts far too high (2^24: the seeded loss gradient passes f16's range at
 * the first f16 cast, an injected overflow), then trains on. Prints one JSON line: per step the
 * scale it ran with, the scale after, whether the weights moved, and the loss; the scaler's count
 * of skipped steps; and the first loss of the same model in f32 and in f16-mixed.
 */
import { acquireGpu } from '../../src/gpu/device.ts';
import { createModel, createOptimizer, trainStep } from '../../src/engine/index.ts';
import { seededUniform } from '../../src/engine/random.ts';
import type { Model } from '../../src/engine/model.ts';

const gpu = await acquireGpu();
const u = seededUniform(5);
const batch = 16;
const x = Float32Array.from({ length: batch * 784 }, () => u());
const labels = Array.from({ length: batch }, (_, i) => i % 10);
const mlp = (): Model => createModel(gpu, 'mlp', { hidden: [32], seed: 3 });

const steps: { scale: number; scaleAfter: number; moved: boolean; loss: number }[] = [];
const model = mlp();
model.useMixedPrecision!({ initialScale: 2 ** 24, growthInterval: 3 });
const scaler = model.lossScaler!;
const optimizer = createOptimizer(model, { kind: 'sgd', lr: 0.05, momentum: 0.9, weightDecay: 0 });
for (let i = 0; i < 16; i++) {
  const before = await model.readParams();
  const scale = scaler.scale;
  const loss = await trainStep(model, optimizer, x, labels);
  const after = await model.readParams();
  steps.push({ scale, scaleAfter: scaler.scale, moved: after.some((v, j) => v !== before[j]), loss });
}
const skipped = scaler.skipped;
optimizer.destroy();
model.destroy();

// The same weights' first loss in f32 and in f16-mixed.
const first = async (mixed: boolean): Promise<number> => {
  const m = mlp();
  if (mixed) m.useMixedPrecision!();
  try {
    return await m.forwardBackward(x, labels);
  } finally {
    m.destroy();
  }
};
const firstLoss = { f32: await first(false), f16Mixed: await first(true) };

// On a binding limit of 256 KiB the first layer's weight [128, 784] (401 KB) stays on the f32 path (sliced) while
// the second layer [10, 128] takes f16: the gradients still match f32's (the f32 layer must keep x for its backward).
const gradients = async (g: typeof gpu, mixed: boolean): Promise<Float32Array> => {
  const m = createModel(g, 'mlp', { hidden: [128], seed: 3 });
  if (mixed) m.useMixedPrecision!({ initialScale: 1 });
  try {
    await m.forwardBackward(x, labels);
    return await m.readGrads();
  } finally {
    m.destroy();
  }
};
const small = await acquireGpu({ maxBindingBytes: 256 * 1024 });
const [want, got] = [await gradients(gpu, false), await gradients(small, true)];
small.destroy();
let scale = 1e-6;
for (const v of want) scale = Math.max(scale, Math.abs(v));
const mixedLayersGradError = Math.max(...got.map((v, i) => Math.abs(v - want[i]))) / scale;
const report = { adapter: gpu.info.description, hasShaderF16: gpu.hasShaderF16, steps, skipped, firstLoss };
console.log(JSON.stringify({ ...report, mixedLayersGradError }));
gpu.destroy();
