/**
 * Train and eval modes: `train()` / `eval()` set `training` on a module tree;
 * a GraphModel trains with Dropout's mask on and predicts and evaluates with
 * it off (eval mode), whatever mode the module was left in. Evaluations are
 * then repeatable, equal to an f64 CPU forward of the model without dropout,
 * and differ from the training loss on the same batch.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOptimizer, GraphModel, trainStep } from '../../src/engine/index.ts';
import { acquireGpu } from '../../src/gpu/device.ts';
import type { Gpu } from '../../src/gpu/gpu.ts';
import { runCpu } from '../../src/nn/cpu.ts';
import { Dropout, F, Graph, Linear, Module, ReLU, Sequential, type Tensor } from '../../src/nn/index.ts';
import { seededUniform } from '../../src/nn/random.ts';

class Net extends Module {
  fc1 = new Linear(6, 16);
  drop = new Dropout(0.5, 7);
  head = new Sequential(new Linear(16, 16), new ReLU(), new Dropout(0.5, 9), new Linear(16, 4));
  forward(x: Tensor): Tensor {
    return this.head.call(this.drop.call(F.relu(this.fc1.call(x))));
  }
}

/** The same computation with no dropout at all, in f64 on the CPU, from the model's weights. */
async function cpuForwardWithoutDropout(model: GraphModel, x: Float32Array, batch: number): Promise<Float64Array> {
  const flat = await model.readParams();
  const entry = (name: string) => model.layout.find((e) => e.name === name)!;
  const w = (name: string) =>
    Float64Array.from(flat.subarray(entry(name).offset, entry(name).offset + entry(name).length));
  const dense = (h: Float64Array, inF: number, outF: number, prefix: string, relu: boolean) => {
    const [W, b] = [w(`${prefix}.weight`), w(`${prefix}.bias`)];
    const out = new Float64Array(batch * outF);
    for (let n = 0; n < batch; n++) {
      for (let o = 0; o < outF; o++) {
        let s = b[o];
        for (let i = 0; i < inF; i++) s += W[o * inF + i] * h[n * inF + i];
        out[n * outF + o] = relu ? Math.max(0, s) : s;
      }
    }
    return out;
  };
  let h = dense(Float64Array.from(x), 6, 16, 'fc1', true);
  h = dense(h, 16, 16, 'head.0', true);
  return dense(h, 16, 4, 'head.3', false);
}

describe('train and eval modes', () => {
  let gpu: Gpu;
  beforeAll(async () => {
    gpu = await acquireGpu();
  });
  afterAll(() => gpu?.destroy());

  const u = seededUniform(11);
  const batch = 32;
  const x = Float32Array.from({ length: batch * 6 }, () => 2 * u() - 1);
  const y = Array.from({ length: batch }, (_, i) => (x[i * 6] > 0 ? 1 : 0) + (x[i * 6 + 1] > 0 ? 2 : 0));

  it('train() and eval() set the mode on every module below, as in PyTorch', () => {
    const net = new Net();
    expect(net.modules().every((m) => m.training)).toBe(true);
    expect(net.eval()).toBe(net);
    expect(net.modules().map((m) => m.training)).toEqual([false, false, false, false, false, false, false, false]);
    expect(net.head.layers[2].training).toBe(false);
    net.train();
    expect(net.modules().every((m) => m.training)).toBe(true);
    net.train(false);
    expect(net.drop.training).toBe(false);
  });

  it('evaluate and predict run without dropout: repeatable, equal to the forward without dropout, unlike training', async () => {
    const model = new GraphModel(gpu, {
      identity: { name: 'drop-net', options: {} },
      module: new Net(),
      inputShape: [6],
      classes: 4,
      seed: 3,
    });
    const opt = createOptimizer(model, { kind: 'sgd', lr: 0.05 });
    for (let i = 0; i < 3; i++) await trainStep(model, opt, x, y);

    const a = await model.evaluate(x, y, batch);
    const b = await model.evaluate(x, y, batch);
    expect(b.loss).toBe(a.loss);
    expect(b.accuracy).toBe(a.accuracy);

    const logits = await model.predict(x);
    expect(await model.predict(x)).toEqual(logits);
    const want = await cpuForwardWithoutDropout(model, x, batch);
    let worst = 0;
    for (let i = 0; i < want.length; i++) worst = Math.max(worst, Math.abs(logits[i] - want[i]));
    expect(worst).toBeLessThan(1e-5);

    // The eval-mode graph on the CPU executor (the ops' f64 oracles) agrees too.
    const g = new Graph();
    const input = g.input([batch, 6]);
    model.module.eval();
    const out = model.module.call(input);
    model.module.train();
    const given = new Map<Tensor, Float64Array>([[input, Float64Array.from(x)]]);
    const flat = await model.readParams();
    for (const t of g.paramTensors) {
      const e = model.layout.find((l) => l.name === t.param!.name)!;
      given.set(t, Float64Array.from(flat.subarray(e.offset, e.offset + e.length)));
    }
    const cpu = runCpu(g.nodes, given).values.get(out)!;
    for (let i = 0; i < want.length; i++) expect(cpu[i]).toBeCloseTo(want[i], 9);

    // Training on the same batch with the same weights applies the masks: another loss.
    const trainLoss = await model.forwardBackward(x, y);
    expect(Math.abs(trainLoss - a.loss)).toBeGreaterThan(1e-3);
    // ...and evaluation after more training steps is still the mask-free forward.
    expect((await model.evaluate(x, y, batch)).loss).toBe(a.loss);
    model.destroy();
    opt.destroy();
  });

  it('the mode is the call’s: a module left in eval mode still trains with dropout, and its flags are kept', async () => {
    const net = new Net();
    const model = new GraphModel(gpu, {
      identity: { name: 'drop-net', options: {} },
      module: net,
      inputShape: [6],
      classes: 4,
      seed: 3,
    });
    net.eval();
    const trainLoss = await model.forwardBackward(x, y);
    const evalLoss = (await model.evaluate(x, y, batch)).loss;
    expect(Math.abs(trainLoss - evalLoss)).toBeGreaterThan(1e-3);
    expect(net.modules().every((m) => !m.training)).toBe(true);
    model.destroy();
  });

  it('a model without dropout plans a batch size once for both modes', async () => {
    class Plain extends Module {
      fc = new Linear(6, 4);
      forward(t: Tensor): Tensor {
        return this.fc.call(t);
      }
    }
    const model = new GraphModel(gpu, {
      identity: { name: 'plain', options: {} },
      module: new Plain(),
      inputShape: [6],
      classes: 4,
      seed: 1,
    });
    await model.forwardBackward(x, y);
    const before = gpu.allocations;
    await model.evaluate(x, y, batch);
    await model.predict(x);
    expect(gpu.allocations).toBe(before);
    model.destroy();
  });
});
