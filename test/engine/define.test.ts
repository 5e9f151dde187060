/**
 * Models users bring: a factory in a file outside the repository (with a
 * LayerNorm and GELU in it) is loaded, registered, built by createModel and
 * trained; bad files, bad definitions and a peer with another model are
 * refused with errors naming the thing.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkSameModel, createModel, createOptimizer, registerModel, trainStep } from '../../src/engine/index.ts';
import { loadModelFile } from '../../src/engine/model-file.node.ts';
import { acquireGpu } from '../../src/gpu/device.ts';
import type { Gpu } from '../../src/gpu/gpu.ts';
import { seededUniform } from '../../src/nn/random.ts';

const MODEL_FILE = `// A residual MLP with a layer norm and GELU, as a user would write it.
export default function model(nn: any, options: { width?: number }) {
  const width = options.width ?? 16;
  class Net extends nn.Module {
    inp = new nn.Linear(8, width);
    norm = new nn.LayerNorm(width);
    fc = new nn.Linear(width, width);
    head = new nn.Linear(width, 3);
    forward(x: any) {
      const h = this.inp.call(x);
      return this.head.call(nn.F.add(h, nn.F.gelu(this.fc.call(this.norm.call(h)))));
    }
  }
  return { module: new Net(), inputShape: [8], classes: 3 };
}
`;

describe('models from a factory', () => {
  let gpu: Gpu;
  let dir: string;
  beforeAll(async () => {
    gpu = await acquireGpu();
    dir = mkdtempSync(join(tmpdir(), 'ringtrain-model-'));
  });
  afterAll(() => {
    gpu?.destroy();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('loads a model file from outside the repository, builds it by name and trains it', async () => {
    const path = join(dir, 'my-model.ts');
    writeFileSync(path, MODEL_FILE);
    const { name } = await loadModelFile(path);
    expect(name).toMatch(/^my-model@[0-9a-f]{8}$/);
    const model = createModel(gpu, { kind: name, seed: 2, width: 12 } as never);
    expect(model.identity).toEqual({ name, options: { width: 12 } });
    expect(model.layout.map((e) => e.name)).toEqual([
      'inp.weight',
      'inp.bias',
      'norm.weight',
      'norm.bias',
      'fc.weight',
      'fc.bias',
      'head.weight',
      'head.bias',
    ]);
    const twin = createModel(gpu, { kind: name, seed: 2, width: 12 } as never);
    expect(twin.layoutHash).toBe(model.layoutHash);
    expect(await twin.readParams()).toEqual(await model.readParams());
    const opt = createOptimizer(model, { kind: 'adamw', lr: 0.02 });
    const u = seededUniform(8);
    const x = Float32Array.from({ length: 32 * 8 }, () => 2 * u() - 1);
    const y = Array.from({ length: 32 }, (_, i) => (x[i * 8] > 0.3 ? 2 : x[i * 8 + 1] > 0 ? 1 : 0));
    const first = await trainStep(model, opt, x, y);
    let last = first;
    for (let i = 0; i < 30; i++) last = await trainStep(model, opt, x, y);
    expect(last).toBeLessThan(first * 0.5);
    // Another peer with other options builds another layout, and is refused naming both.
    const other = createModel(gpu, { kind: name, seed: 2, width: 8 } as never);
    expect(() => checkSameModel(other, { name: model.identity.name, layoutHash: model.layoutHash })).toThrow(
      new RegExp(
        `${name} \\(layout hash ${other.layoutHash}\\) but the job's is ${name} \\(layout hash ${model.layoutHash}\\)`,
      ),
    );
    expect(() => checkSameModel(twin, { name: model.identity.name, layoutHash: model.layoutHash })).not.toThrow();
    for (const m of [model, twin, other]) m.destroy();
    opt.destroy();
  });

  it('refuses a file without a factory, a bad definition, and a reserved name', async () => {
    const empty = join(dir, 'nothing.ts');
    writeFileSync(empty, 'export const width = 3;\n');
    await expect(loadModelFile(empty)).rejects.toThrow(
      /nothing\.ts exports no model factory: add `export default function model\(nn, options\)/,
    );
    await expect(loadModelFile(join(dir, 'missing.ts'))).rejects.toThrow(/cannot read model file/);
    registerModel('bad-def', () => ({ module: {} as never, inputShape: [4], classes: 2 }));
    expect(() => createModel(gpu, { kind: 'bad-def' } as never)).toThrow(/model bad-def: module is not an nn.Module/);
    registerModel('bad-shape', (nn) => ({
      module: new nn.Sequential(new nn.Linear(4, 2)),
      inputShape: [0],
      classes: 2,
    }));
    expect(() => createModel(gpu, { kind: 'bad-shape' } as never)).toThrow(/inputShape must be positive integers/);
    expect(() => registerModel('cnn', () => ({}) as never)).toThrow(/other than mlp, cnn, transformer/);
  });

  it('refuses options the factory never reads, naming them and the ones it does', async () => {
    const path = join(dir, 'spelt.ts');
    writeFileSync(path, MODEL_FILE);
    const { name } = await loadModelFile(path);
    expect(() => createModel(gpu, { kind: name, seed: 2, widht: 12 } as never)).toThrow(
      new RegExp(`model ${name} never read the option "widht" \\(it read "width"\\): check the spelling`),
    );
    registerModel('no-options', (nn) => ({
      module: new nn.Sequential(new nn.Linear(4, 2)),
      inputShape: [4],
      classes: 2,
    }));
    expect(() => createModel(gpu, { kind: 'no-options', depth: 2 } as never)).toThrow(
      /never read the option "depth" \(it reads no options\)/,
    );
    // A factory that spreads its options reads them all.
    registerModel('spreads', (nn, options: Record<string, unknown>) => {
      const { ...all } = options;
      return { module: new nn.Sequential(new nn.Linear(4, Number(all.out ?? 2))), inputShape: [4], classes: 2 };
    });
    createModel(gpu, { kind: 'spreads', out: 2, note: 'kept' } as never).destroy();
  });
});
