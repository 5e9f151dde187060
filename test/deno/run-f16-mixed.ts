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
import { GraphModel } from '../../src/engine/graph-model.ts';
import { resolveTransformerSpec, sequenceCrossEntropy, TransformerModule } from '../../src/engine/transformer.ts';
import { planningGpu } from '../../src/gpu/planning-device.ts';
import type { Gpu } from '../../src/gpu/gpu.ts';

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
const transformer = await transformerCases();
console.log(JSON.stringify({ ...report, mixedLayersGradError, transformer, planBytes: planBytes() }));
gpu.destroy();

/** The largest difference from `want`, over want's largest magnitude. */
function relMax(got: Float32Array, want: Float32Array): number {
  let [err, scale] = [0, 1e-30];
  want.forEach((v, i) => ((err = Math.max(err, Math.abs(got[i] - v))), (scale = Math.max(scale, Math.abs(v)))));
  return got.every(Number.isFinite) ? err / scale : Infinity;
}

/** A small GPT-2-style transformer as a GraphModel (GELU, attention, layer norms, residuals), fused head or not. */
function tinyTransformer(g: Gpu, fused: boolean, { context = 24, width = 32, layers = 2 } = {}): GraphModel {
  const spec = resolveTransformerSpec({ vocab: 40, context, layers, width, heads: 2, seed: 3, arch: 'gpt2' });
  const module = new TransformerModule(spec);
  return new GraphModel(g, {
    ...{ identity: { name: 'transformer', options: {} }, module, inputShape: [spec.context], inputDType: 'u32' },
    ...{ classes: spec.vocab, seed: spec.seed, loss: sequenceCrossEntropy },
    fusedLoss: fused ? (ids, targets) => module.forwardLoss(ids, targets) : undefined,
  });
}

/**
 * f16-mixed through the whole transformer (its saved activations kept as f16 between forward and
 * backward, src/nn/f16-spill.ts), through the head fused with its loss, and split into micro-batches:
 * each one's gradients against f32's (to f16 rounding) or the unsplit step's (to f32 rounding).
 */
async function transformerCases() {
  const batch = 4;
  const v = seededUniform(11);
  const ids = Float32Array.from({ length: batch * 24 }, () => Math.floor(v() * 40));
  const targets = Array.from(ids, (_, i) => (i % 7 === 6 ? -1 : Math.floor(v() * 40)));
  const run = async (fused: boolean, mixed: boolean, microBatch?: number) => {
    const m = tinyTransformer(gpu, fused);
    if (mixed) m.useMixedPrecision({ initialScale: 2 ** 10 });
    m.setMicroBatch(microBatch);
    try {
      const loss = await m.forwardBackward(ids, targets, batch);
      const clean = mixed ? await m.lossScaler!.endStep() : true;
      return { loss, clean, grads: await m.readGrads() };
    } finally {
      m.destroy();
    }
  };
  const f32 = await run(false, false);
  const [mixed, fused, micro] = [await run(false, true), await run(true, true), await run(false, true, 2)];
  return {
    clean: [mixed.clean, fused.clean, micro.clean],
    lossError: Math.abs(mixed.loss - f32.loss) / f32.loss,
    gradError: relMax(mixed.grads, f32.grads),
    fusedGradError: relMax(fused.grads, f32.grads),
    fusedLossError: Math.abs(fused.loss - f32.loss) / f32.loss,
    microGradError: relMax(micro.grads, mixed.grads),
  };
}

/**
 * The training step's planned bytes (planning only) of a transformer of 8 layers at context 384 (the tiled
 * attention), in f32 and f16-mixed: the saved activations of every layer are f16 at backward's start.
 */
function planBytes(): { f32: number; f16Mixed: number } {
  const bytes = (mixed: boolean) => {
    const planner = planningGpu(gpu);
    const m = tinyTransformer(planner, false, { context: 384, width: 64, layers: 8 });
    const before = planner.pool.createdBytes;
    if (mixed) m.useMixedPrecision();
    m.planTrainingStep(8);
    return planner.pool.createdBytes - before;
  };
  return { f32: bytes(false), f16Mixed: bytes(true) };
}
