import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { acquireGpu } from '../../src/gpu/device.ts';
import type { Gpu } from '../../src/gpu/gpu.ts';
import { Mlp as OldMlp } from '../../src/engine/mlp-hand.ts';
import { Cnn as OldCnn } from '../../src/engine/cnn-hand.ts';
import { Mlp } from '../../src/engine/mlp.ts';
import { Cnn } from '../../src/engine/cnn.ts';
import type { Model } from '../../src/engine/model.ts';
import { seededUniform } from '../../src/nn/random.ts';

/** Our tensors by name, Linear weights transposed back to the old [in, out]. */
async function tensors(m: Model, transposeDense: boolean): Promise<Record<string, Float32Array>> {
  const flat = await m.readParams();
  const out: Record<string, Float32Array> = {};
  for (const e of m.layout) {
    let v = flat.slice(e.offset, e.offset + e.length);
    if (transposeDense && e.name.startsWith('dense') && e.name.endsWith('weight')) {
      const [r, c] = e.shape;
      const t = new Float32Array(v.length);
      for (let i = 0; i < r; i++) for (let j = 0; j < c; j++) t[j * r + i] = v[i * c + j];
      v = t;
    }
    out[e.name] = v;
  }
  return out;
}

describe('old hand-wired vs graph models', () => {
  let gpu: Gpu;
  beforeAll(async () => {
    gpu = await acquireGpu();
  });
  afterAll(() => gpu?.destroy());
  for (const [what, mk] of [
    ['mlp relu', (g: Gpu, old: boolean) => (old ? new OldMlp(g, { kind: 'mlp', seed: 3, hidden: [32, 16] }) : new Mlp(g, { kind: 'mlp', seed: 3, hidden: [32, 16] }))],
    ['mlp tanh', (g: Gpu, old: boolean) => (old ? new OldMlp(g, { kind: 'mlp', seed: 3, hidden: [12], activation: 'tanh' }) : new Mlp(g, { kind: 'mlp', seed: 3, hidden: [12], activation: 'tanh' }))],
    ['cnn', (g: Gpu, old: boolean) => (old ? new OldCnn(g, { seed: 2 }) : new Cnn(g, { seed: 2 }))],
    ['cnn hidden', (g: Gpu, old: boolean) => (old ? new OldCnn(g, { seed: 2, channels: [4, 8], hidden: 16 }) : new Cnn(g, { seed: 2, channels: [4, 8], hidden: 16 }))],
  ] as const) {
    it(what, async () => {
      const a = mk(gpu, true);
      const b = mk(gpu, false);
      const ta = await tensors(a, false);
      const tb = await tensors(b, true);
      expect(Object.keys(tb)).toEqual(Object.keys(ta));
      for (const k of Object.keys(ta)) expect(tb[k], k).toEqual(ta[k]);
      const u = seededUniform(5);
      const x = Float32Array.from({ length: 8 * 784 }, () => u());
      const y = Array.from({ length: 8 }, (_, i) => i % 10);
      const la = await a.forwardBackward(x, y);
      const lb = await b.forwardBackward(x, y);
      expect(Math.abs(la - lb)).toBeLessThan(1e-5);
      const ga = await tensors({ ...a, readParams: () => a.readGrads(), layout: a.layout } as unknown as Model, false);
      const gb = await tensors({ ...b, readParams: () => b.readGrads(), layout: b.layout } as unknown as Model, true);
      let err = 0;
      for (const k of Object.keys(ga)) for (let i = 0; i < ga[k].length; i++) err = Math.max(err, Math.abs(ga[k][i] - gb[k][i]));
      console.log(what, la, lb, err);
      expect(err).toBeLessThan(1e-5);
      a.destroy();
      b.destroy();
    });
  }
});
