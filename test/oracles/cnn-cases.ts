/**
 * The whole CNN (src/engine/cnn.ts) as oracle cases: the model of conv2d,
 * max-pool and linear ops, whose kernels are checked one by one in their ops'
 * files (test/nn/ops/conv2d.cases.ts, maxpool.cases.ts). Runtime-agnostic:
 * they join the shared list (cases.ts) that runs under Node and Deno.
 */
import { mixSeed, mulberry32 } from '../../src/data/random.ts';
import { Cnn } from '../../src/engine/cnn.ts';
import type { CnnSpec } from '../../src/engine/model.ts';
import { checkModel } from '../nn/model-check.ts';
import type { ComparedCase } from './comparisons.ts';

/**
 * The whole CNN, GPU against the CPU executor over its unfused graph (f64 op
 * oracles): loss and every element of the flat gradient buffer after one
 * forward/backward, with and without the hidden dense layer. Gradients are
 * O(0.1) sums of a few thousand products, so 5e-6 absolute leaves ~10x
 * margin over the errors measured (4e-7).
 */
function cnnCase(spec: Partial<CnnSpec>, batch: number, seed: number): ComparedCase {
  return {
    name: `cnn forward+backward channels ${spec.channels} hidden ${spec.hidden ?? 0} batch ${batch}`,
    async run(gpu) {
      const model = new Cnn(gpu, { ...spec, seed });
      try {
        const random = mulberry32(mixSeed(seed, 9));
        const x = Float32Array.from({ length: batch * model.inputSize }, () => random());
        const labels = Array.from({ length: batch }, (_, i) => (i * 3 + seed) % model.classes);
        const c = await checkModel(model, x, labels);
        return [
          { what: 'loss', maxError: Math.abs(c.loss - c.cpuLoss), tolerance: 1e-5, count: 1 },
          { what: 'flat gradient', maxError: c.gradError, tolerance: 5e-6, count: model.flatLength },
          // A gradient of zeros would match a broken reference trivially.
          { what: 'gradient mass', maxError: c.gradMass > 1e-2 ? 0 : 1, tolerance: 0, count: 1 },
        ];
      } finally {
        model.destroy();
      }
    },
  };
}

export const CNN_CASES: ComparedCase[] = [
  cnnCase({ channels: [3, 5], hidden: 0 }, 3, 31),
  cnnCase({ channels: [4, 6], hidden: 7 }, 2, 32),
];
