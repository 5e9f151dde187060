/**
 * A few training steps of a transformer with a vocabulary-sized embedding and
 * head (GPT-2's 50,257 by default), on seeded random tokens, under whichever
 * runtime runs it: the head [vocab, width] and the embedding pass one binding
 * on lavapipe (128 MiB), so this runs the sliced kernels inside a model. One
 * JSON line: parameters, each step's loss and wall time, the binding limit.
 *
 *   deno run -A bench/vocab-step.ts --layers 1 --width 768 --heads 12 --context 128 --vocab 50257 --steps 2
 */
import { createModel, createOptimizer } from '../src/engine/index.ts';
import { seededUniform } from '../src/engine/random.ts';
import { acquireGpu } from '../src/gpu/device.ts';
import { opt } from './args.ts';

const [layers, width, heads, context, vocab, steps, batch] = [
  'layers',
  'width',
  'heads',
  'context',
  'vocab',
  'steps',
  'batch',
].map((k, i) => Number(opt(k, ['1', '768', '12', '128', '50257', '2', '1'][i])));
const gpu = await acquireGpu();
const model = createModel(gpu, { kind: 'transformer', seed: 1, layers, width, heads, context, vocab });
const optimizer = createOptimizer(model, { kind: 'adamw', lr: 1e-4 });
const u = seededUniform(3);
const ids = () => Float32Array.from({ length: batch * context }, () => Math.floor(u() * vocab));
const losses: number[] = [];
const seconds: number[] = [];
for (let s = 0; s < steps; s++) {
  const x = ids();
  const t0 = performance.now();
  losses.push(await model.forwardBackward(x, Array.from(ids()), batch));
  optimizer.step();
  await gpu.sync();
  seconds.push((performance.now() - t0) / 1000);
}
console.log(
  JSON.stringify({
    layers,
    width,
    heads,
    context,
    vocab,
    batch,
    params: model.paramCount,
    losses,
    seconds,
    ln_vocab: Math.log(vocab),
    runtime: gpu.info.runtime,
    adapter: gpu.info.description,
    maxStorageBufferBindingSize: gpu.limits.maxStorageBufferBindingSize,
  }),
);
gpu.destroy();
