/**
 * One way to build each thing: createModel takes an nn.Module, a model
 * factory or a built-in name, and each form builds the model the older ways
 * built (same layout, same initial weights); optim.AdamW and optim.SGD are
 * the optimizers createOptimizer's kinds look up, and step alike. What a form
 * needs and does not get is refused, naming it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  acquireGpu,
  createModel,
  type Gpu,
  type Model,
  type ModelFactory,
  nn,
  optim,
  type Tensor,
} from '../../src/index.ts';

class Net extends nn.Module {
  fc1 = new nn.Linear(2, 8);
  fc2 = new nn.Linear(8, 3);
  forward(x: Tensor): Tensor {
    return this.fc2.call(nn.F.relu(this.fc1.call(x)));
  }
}

const factory: ModelFactory = (api) => ({
  module: new (class Net extends api.Module {
    fc1 = new api.Linear(2, 8);
    fc2 = new api.Linear(8, 3);
    forward(x: Tensor): Tensor {
      return this.fc2.call(api.F.relu(this.fc1.call(x)));
    }
  })(),
  inputShape: [2],
  classes: 3,
});

const X = new Float32Array([1, 0, 0, 1, 0.5, 0.5, -1, 0.2]);
const LABELS = [0, 1, 2, 1];

async function trained(model: Model, opt: optim.Optimizer, steps: number): Promise<Float32Array> {
  for (let i = 0; i < steps; i++) {
    await model.forwardBackward(X, LABELS);
    opt.step();
  }
  return model.readParams();
}

describe('createModel', () => {
  let gpu: Gpu;
  const made: Model[] = [];
  const keep = <M extends Model>(m: M): M => (made.push(m), m);
  beforeAll(async () => {
    gpu = await acquireGpu();
  });
  afterAll(() => {
    for (const m of made) m.destroy();
    gpu.destroy();
  });

  it('builds a module and the same module from a factory alike: name, layout and initial weights', async () => {
    const fromModule = keep(createModel(gpu, new Net(), { inputShape: [2], classes: 3, seed: 3 }));
    const fromFactory = keep(createModel(gpu, factory, { name: 'Net', seed: 3 }));
    expect(fromModule.identity).toEqual({ name: 'Net', options: {} });
    expect(fromFactory.identity.name).toBe('Net');
    expect(fromModule.layoutHash).toBe(fromFactory.layoutHash);
    const [a, b] = await Promise.all([fromModule.readParams(), fromFactory.readParams()]);
    expect(a.some((v) => v !== 0)).toBe(true);
    expect(Array.from(a)).toEqual(Array.from(b));
    const other = keep(createModel(gpu, new Net(), { inputShape: [2], classes: 3, seed: 4 }));
    expect(Array.from(await other.readParams())).not.toEqual(Array.from(a));
  });

  it("types a factory's options and a built-in's by what they read", () => {
    const wide: ModelFactory<{ width?: number }> = (api, o) => ({
      module: new api.Linear(2, o.width ?? 3),
      inputShape: [2],
      classes: o.width ?? 3,
    });
    const m = createModel(gpu, wide, { options: { width: 4 } });
    expect(m.classes).toBe(4);
    m.destroy();
    // @ts-expect-error width is a number
    expect(() => createModel(gpu, wide, { options: { width: 'x' } })).toThrow();
    const typeOnly = () =>
      // @ts-expect-error an mlp has no width
      createModel(gpu, 'mlp', { width: 4 });
    expect(typeOnly).toBeTypeOf('function');
  });

  it('builds a built-in by name as the spec form does', async () => {
    const byName = keep(createModel(gpu, 'mlp', { inputSize: 2, hidden: [8], classes: 3, seed: 2 }));
    const bySpec = keep(createModel(gpu, { kind: 'mlp', inputSize: 2, hidden: [8], classes: 3, seed: 2 }));
    expect(byName.identity.name).toBe('mlp');
    expect(byName.layoutHash).toBe(bySpec.layoutHash);
    expect(Array.from(await byName.readParams())).toEqual(Array.from(await bySpec.readParams()));
  });

  it('refuses what a form needs and did not get, naming it', () => {
    expect(() => createModel(gpu, new Net(), { inputShape: [2] } as never)).toThrow(/options\.classes missing/);
    expect(() => createModel(gpu, new Net(), undefined as never)).toThrow(
      /options\.inputShape and options\.classes missing/,
    );
    expect(() => createModel(gpu, new Net(), { inputShape: [0], classes: 3 })).toThrow(
      /inputShape must be positive integers/,
    );
    const anonymous = [(api: typeof nn) => ({ module: new api.Linear(2, 3), inputShape: [2], classes: 3 })][0];
    expect(anonymous.name).toBe('');
    expect(() => createModel(gpu, anonymous)).toThrow(/pass options\.name/);
    expect(() => createModel(gpu, Net as never, { inputShape: [2], classes: 3 })).toThrow(
      /Net is a module class; pass an instance, createModel\(gpu, new Net\(\), options\)/,
    );
    expect(() => createModel(gpu, { forward() {} } as never)).toThrow(/must be an nn\.Module, a model factory/);
    expect(() => createModel(gpu, 'rnn' as never)).toThrow(/unknown model kind "rnn"/);
  });
});

describe('optim.AdamW and optim.SGD', () => {
  let gpu: Gpu;
  beforeAll(async () => {
    gpu = await acquireGpu();
  });
  afterAll(() => gpu.destroy());

  for (const [kind, make, options] of [
    ['adamw', (m: Model) => new optim.AdamW(m, { lr: 0.05, weightDecay: 0.1 }), { lr: 0.05, weightDecay: 0.1 }],
    ['sgd', (m: Model) => new optim.SGD(m, { lr: 0.1, momentum: 0.5 }), { lr: 0.1, momentum: 0.5 }],
  ] as const) {
    it(`${kind}: the object steps exactly as createOptimizer's kind '${kind}' (its lookup) does`, async () => {
      expect(optim.OPTIMIZERS[kind]).toBe(kind === 'adamw' ? optim.AdamW : optim.SGD);
      const a = createModel(gpu, new Net(), { inputShape: [2], classes: 3, seed: 5 });
      const b = createModel(gpu, new Net(), { inputShape: [2], classes: 3, seed: 5 });
      const oa = make(a);
      const ob = optim.createOptimizer(b, { kind, ...options });
      expect(oa).toBeInstanceOf(optim.OPTIMIZERS[kind]);
      expect(oa.kind).toBe(kind);
      expect(oa.spec).toEqual(ob.spec);
      const before = await a.readParams();
      const [pa, pb] = [await trained(a, oa, 3), await trained(b, ob, 3)];
      expect(Array.from(pa)).toEqual(Array.from(pb));
      expect(Array.from(pa)).not.toEqual(Array.from(before));
      for (const o of [oa, ob]) o.destroy();
      for (const m of [a, b]) m.destroy();
    });
  }

  it('refuses an option the optimizer does not read, and a missing model', () => {
    const m = createModel(gpu, new Net(), { inputShape: [2], classes: 3 });
    expect(() => new optim.AdamW(m, { lr: 0.01, momentum: 0.9 } as never)).toThrow(
      /optim\.AdamW takes lr, betas, eps, weightDecay; it does not read momentum/,
    );
    expect(() => new optim.SGD(m, { betas: [0.9, 0.99] } as never)).toThrow(/it does not read betas/);
    expect(() => new optim.SGD(m, { lr: -1 })).toThrow(/lr must be a number/);
    expect(() => new optim.AdamW({ lr: 0.01 } as never)).toThrow(/the first argument must be a model/);
    // The CLI gives every optimizer its momentum flag; the lookup keeps only what the named one reads.
    const cli = optim.createOptimizer(m, { kind: 'adamw', lr: 0.01, momentum: 0.9 });
    expect(cli.spec.lr).toBe(0.01);
    cli.destroy();
    m.destroy();
  });
});
