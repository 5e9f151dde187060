/**
 * The transformer trained through its head fused with the loss (linearCrossEntropy, in row chunks)
 * against the same model through its logits and the loss head: the same loss and gradients, for
 * the classic model (untied head with bias) and GPT-2's (head tied to the embedding), with ignored
 * targets; and the shape rule that picks the fused path.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GraphModel } from '../../src/engine/graph-model.ts';
import { resolveTransformerSpec, sequenceCrossEntropy, TransformerModule } from '../../src/engine/transformer.ts';
import { acquireGpu } from '../../src/gpu/device.ts';
import type { Gpu } from '../../src/gpu/gpu.ts';
import { fusedHeadPays } from '../../src/nn/ops/linear-cross-entropy/kernel.ts';
import { seededUniform } from '../../src/nn/random.ts';
import { relErr } from '../oracles/oracle-case.ts';

/** The first test compiles every kernel of the model on a software adapter: minutes on 2 shared cores. */
const COLD = { timeout: 240_000 };

const SPEC = { vocab: 40, context: 24, layers: 1, width: 16, heads: 2, seed: 3 };

/** A transformer as a GraphModel, training through the fused head or not; `fusedTraces` counts the fused traces. */
function model(
  gpu: Gpu,
  arch: 'classic' | 'gpt2',
  fused: boolean,
  vocab = SPEC.vocab,
): { m: GraphModel; fusedTraces: () => number } {
  const s = resolveTransformerSpec({ ...SPEC, vocab, arch });
  const module = new TransformerModule(s);
  let traces = 0;
  const m = new GraphModel(gpu, {
    identity: { name: 'transformer', options: {} },
    module,
    inputShape: [s.context],
    inputDType: 'u32',
    classes: s.vocab,
    seed: s.seed,
    loss: sequenceCrossEntropy,
    fusedLoss: fused ? (ids, targets) => (traces++, module.forwardLoss(ids, targets)) : undefined,
  });
  return { m, fusedTraces: () => traces };
}

describe('transformer with the head fused into the loss', () => {
  let gpu: Gpu;
  beforeAll(async () => {
    gpu = await acquireGpu();
  });
  afterAll(() => gpu?.destroy());

  for (const arch of ['classic', 'gpt2'] as const) {
    it(`${arch}: gives the loss and gradients of the unfused head`, COLD, async () => {
      const batch = 6; // 144 rows: 3 chunks of at most 64 rows once the binding limit is lowered below
      const u = seededUniform(7);
      const x = Float32Array.from({ length: batch * SPEC.context }, () => Math.floor(u() * SPEC.vocab));
      const y = Array.from(x, (_, i) => (i % 5 === 4 ? -1 : Math.floor(u() * SPEC.vocab)));
      const plain = model(gpu, arch, false);
      const fused = model(gpu, arch, true);
      try {
        const lossPlain = await plain.m.forwardBackward(x, y, batch);
        const lossFused = await fused.m.forwardBackward(x, y, batch);
        expect(fused.fusedTraces()).toBeGreaterThan(0);
        expect(Math.abs(lossFused - lossPlain)).toBeLessThan(1e-5 * Math.abs(lossPlain));
        const [gp, gf] = [await plain.m.readGrads(), await fused.m.readGrads()];
        expect(relErr(gf, gp)).toBeLessThan(1e-5);
        // Evaluation keeps the logits path, and agrees with training's loss on the same batch.
        const evaluated = await fused.m.evaluate(x, y);
        expect(Math.abs(evaluated.loss - lossPlain)).toBeLessThan(1e-5 * Math.abs(lossPlain));
      } finally {
        plain.m.destroy();
        fused.m.destroy();
      }
    });
  }

  it('runs several chunks when a chunk holds fewer rows (a lower binding limit)', COLD, async () => {
    const vocab = 1000;
    // 64 rows of logits per chunk: 144 rows in 3 chunks (the unfused head could not bind its logits here).
    const small = await acquireGpu({ maxBindingBytes: 64 * vocab * 4 });
    const batch = 6;
    const x = Float32Array.from({ length: batch * SPEC.context }, (_, i) => (i * 11) % vocab);
    const y = Array.from(x, (_, i) => (i % 7 === 6 ? -1 : (i * 5 + 1) % vocab));
    const plain = model(gpu, 'classic', false, vocab);
    const fused = model(small, 'classic', true, vocab);
    try {
      const lossPlain = await plain.m.forwardBackward(x, y, batch);
      const lossFused = await fused.m.forwardBackward(x, y, batch);
      expect(Math.abs(lossFused - lossPlain)).toBeLessThan(1e-5 * Math.abs(lossPlain));
      expect(relErr(await fused.m.readGrads(), await plain.m.readGrads())).toBeLessThan(1e-5);
    } finally {
      plain.m.destroy();
      fused.m.destroy();
      small.destroy();
    }
  });

  it('is chosen by shape: GPT-2 at 8 × 1,024 tokens, not the words workload or characters', () => {
    expect(fusedHeadPays(8 * 1024, 50257)).toBe(true);
    expect(fusedHeadPays(256 * 32, 27)).toBe(false);
    expect(fusedHeadPays(8 * 1024, 85)).toBe(false);
  });
});
