/**
 * The state check's digest read a slice at a time (state-agreement.ts) is the digest it always
 * was: the SHA-256 of each part's name and length and the SHA-256 of its whole values, the weights
 * first, then the optimizer's parts by name. Computed here from whole read-backs, as it was
 * before, against a real model and AdamW on the software adapter, whatever the slice.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHash } from 'node:crypto';
import { acquireGpu } from '../../src/gpu/device.ts';
import type { Gpu } from '../../src/gpu/gpu.ts';
import { createModel, createOptimizer } from '../../src/engine/index.ts';
import { seededUniform } from '../../src/engine/random.ts';
import type { Model } from '../../src/engine/model.ts';
import type { Optimizer } from '../../src/engine/optimizer.ts';
import { hex, readStateDigest, stateDigest } from '../../src/distributed/robust/state-agreement.ts';

/** The digest as it was defined before it was read in slices: every part whole, hashed in one go. */
function wholeDigest(params: Float32Array, state: Record<string, Float32Array>): string {
  const sha = (b: Uint8Array) => createHash('sha256').update(b).digest();
  const bytes = (f: Float32Array) => new Uint8Array(f.buffer, f.byteOffset, f.byteLength);
  const part = (name: string, values: Float32Array) => [Buffer.from(`${name}:${values.length}\n`), sha(bytes(values))];
  const parts = [
    part('params', params),
    ...Object.keys(state)
      .sort()
      .map((k) => part(`optim/${k}`, state[k])),
  ];
  return createHash('sha256').update(Buffer.concat(parts.flat())).digest('hex');
}

describe('the state digest, a slice at a time', () => {
  let gpu: Gpu;
  let model: Model;
  let optimizer: Optimizer;
  beforeAll(async () => {
    gpu = await acquireGpu();
    model = createModel(gpu, { kind: 'mlp', hidden: [24], inputSize: 30, classes: 5, seed: 3 });
    optimizer = createOptimizer(model, { kind: 'adamw', lr: 0.01 });
    const u = seededUniform(9);
    for (let s = 0; s < 2; s++) {
      await model.forwardBackward(
        Float32Array.from({ length: 4 * 30 }, () => u()),
        [0, 3, 4, 1],
      );
      optimizer.step();
    }
  });
  afterAll(() => {
    optimizer?.destroy();
    model?.destroy();
    gpu?.destroy();
  });

  it('equals the whole-part digest for slices that divide the parts, that do not, and that hold a part whole', async () => {
    const expected = wholeDigest(await model.readParams(), await optimizer.exportState());
    // A real model's moments are not zeros after two steps: the parts differ, so an order or a part mixed up shows.
    expect(Array.from((await optimizer.exportState()).m).some((x) => x !== 0)).toBe(true);
    expect(model.flatLength % 7).not.toBe(0);
    for (const slice of [7, 64, model.flatLength, 1 << 24])
      expect(hex(await readStateDigest(model, optimizer, slice)), `slices of ${slice} floats`).toBe(expected);
    expect(hex(await stateDigest(await model.readParams(), await optimizer.exportState()))).toBe(expected);
  });

  it('reads a model or optimizer that has no slices whole, to the same digest', async () => {
    const expected = hex(await readStateDigest(model, optimizer, 100));
    const wholeModel = { readParams: () => model.readParams(), flatLength: model.flatLength };
    const wholeOptimizer = { exportState: () => optimizer.exportState() };
    expect(hex(await readStateDigest(wholeModel, wholeOptimizer, 100))).toBe(expected);
  });

  it('changes with one bit of a moment, read in slices', async () => {
    const before = hex(await readStateDigest(model, optimizer, 50));
    const state = await optimizer.exportState();
    const v = state.v.slice();
    new Uint32Array(v.buffer)[model.flatLength - 1] ^= 1;
    optimizer.importState({ ...state, v });
    expect(hex(await readStateDigest(model, optimizer, 50))).not.toBe(before);
    optimizer.importState(state);
    expect(hex(await readStateDigest(model, optimizer, 50))).toBe(before);
  });
});
