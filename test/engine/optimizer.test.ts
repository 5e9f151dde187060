/** Optimizer state export/import: a restored optimizer continues exactly where the original was. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ErrorCode } from '../../src/core/errors.ts';
import { acquireGpu } from '../../src/gpu/device.ts';
import type { Gpu } from '../../src/gpu/gpu.ts';
import { createModel, createOptimizer } from '../../src/engine/index.ts';
import { seededUniform } from '../../src/engine/random.ts';

describe('optimizer state', () => {
  let gpu: Gpu;
  beforeAll(async () => {
    gpu = await acquireGpu();
  });
  afterAll(() => gpu?.destroy());

  for (const kind of ['sgd', 'adamw'] as const) {
    it(`${kind}: export, import into a fresh optimizer, and continue identically`, async () => {
      const spec = { kind: 'mlp' as const, hidden: [8], inputSize: 10, classes: 3, seed: 2 };
      const u = seededUniform(77);
      const batches = Array.from({ length: 4 }, () => ({
        x: Float32Array.from({ length: 40 }, () => u()),
        y: [0, 1, 2, 1],
      }));
      const a = createModel(gpu, spec);
      const oa = createOptimizer(a, { kind, lr: 0.05 });
      for (const b of batches.slice(0, 2)) {
        await a.forwardBackward(b.x, b.y);
        oa.step();
      }
      const state = await oa.exportState();
      expect(state.step).toEqual(new Float32Array([2]));
      expect(Object.keys(state).sort()).toEqual(kind === 'sgd' ? ['step', 'velocity'] : ['m', 'step', 'v']);

      const b = createModel(gpu, spec);
      b.writeParams(await a.readParams());
      const ob = createOptimizer(b, { kind, lr: 0.05 });
      ob.importState(state);
      expect(ob.stepCount).toBe(2);
      for (const batch of batches.slice(2)) {
        for (const [m, o] of [
          [a, oa],
          [b, ob],
        ] as const) {
          await m.forwardBackward(batch.x, batch.y);
          o.step();
        }
      }
      expect(await b.readParams()).toEqual(await a.readParams());
      expect(() => ob.importState({ ...state, [kind === 'sgd' ? 'velocity' : 'm']: new Float32Array(3) })).toThrow(
        expect.objectContaining({ code: ErrorCode.InvalidArgument }),
      );
      for (const x of [a, b, oa, ob]) x.destroy();
    });
  }

  for (const kind of ['sgd', 'adamw'] as const) {
    it(`${kind}: a step's new hyperparameters go ahead of the recorded work (no submit of their own), and back-to-back steps still each see their own`, async () => {
      const spec = { kind: 'mlp' as const, hidden: [8], inputSize: 10, classes: 3, seed: 3 };
      const x = Float32Array.from({ length: 40 }, seededUniform(5));
      const y = [0, 1, 2, 1];
      const run = async (flushBetween: boolean) => {
        const model = createModel(gpu, spec);
        const opt = createOptimizer(model, { kind, lr: 0.05 });
        await model.forwardBackward(x, y);
        const submits = gpu.submits;
        // A schedule's rate, passed every step as trainLocal does: SGD rewrites its uniform too.
        opt.step(0.05);
        expect(gpu.submits, 'the uniform write submitted the recorded work').toBe(submits);
        if (flushBetween) gpu.flush();
        // The first update is still unsubmitted without the flush: this write must wait behind it.
        opt.step(0.01);
        opt.step(0.02);
        const params = await model.readParams();
        opt.destroy();
        model.destroy();
        return params;
      };
      expect(await run(false)).toEqual(await run(true));
    });
  }

  it('destroying a model right after a step leaves the device usable (recorded work is flushed first)', async () => {
    const model = createModel(gpu, { kind: 'mlp', hidden: [4], inputSize: 4, classes: 2 });
    const opt = createOptimizer(model, { kind: 'adamw' });
    await model.forwardBackward(new Float32Array(8), [0, 1]);
    opt.step();
    opt.destroy();
    model.destroy();
    await gpu.sync();
    expect(gpu.alive).toBe(true);
  });

  it('step(lr) changes the learning rate: lr 0 leaves SGD parameters unchanged', async () => {
    const model = createModel(gpu, { kind: 'mlp', hidden: [4], inputSize: 4, classes: 2 });
    const opt = createOptimizer(model, { kind: 'sgd', lr: 0.5, momentum: 0 });
    await model.forwardBackward(new Float32Array([1, 2, 3, 4, 4, 3, 2, 1]), [0, 1]);
    const before = await model.readParams();
    opt.step(0);
    expect(await model.readParams()).toEqual(before);
    opt.step(0.5);
    expect(await model.readParams()).not.toEqual(before);
    model.destroy();
    opt.destroy();
  });
});
