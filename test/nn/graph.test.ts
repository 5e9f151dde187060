/**
 * The autodiff core end to end, on a model with a user-written forward:
 * residual blocks (a tensor feeding two ops), a weight used twice (tied),
 * ReLUs the planner folds into Linear epilogues, a tanh that backpropagates in
 * place. The GPU gradients of the whole model are compared with the CPU
 * executor over the UNFUSED graph (f64 oracles, plain summation), and the
 * CPU gradients with finite differences of the CPU loss.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ErrorCode } from '../../src/core/errors.ts';
import { createOptimizer, GraphModel, layoutOf, trainStep } from '../../src/engine/index.ts';
import { acquireGpu } from '../../src/gpu/device.ts';
import type { Gpu } from '../../src/gpu/gpu.ts';
import { runCpu } from '../../src/nn/cpu.ts';
import { crossEntropy } from '../../src/nn/loss.ts';
import { compilePlan } from '../../src/nn/plan.ts';
import { seededUniform } from '../../src/nn/random.ts';
import { F, Graph, Linear, Module, Parameter, ReLU, Sequential, type Tensor } from '../../src/nn/index.ts';

class Block extends Module {
  fc = new Linear(8, 8);
  forward(x: Tensor): Tensor {
    return F.add(x, F.relu(this.fc.call(x)));
  }
}

class Net extends Module {
  inp = new Linear(6, 8);
  blocks = [new Block(), new Block()];
  tied = new Parameter([8, 8], (out, r) => out.forEach((_, i) => (out[i] = (2 * r.uniform() - 1) * 0.3)));
  head = new Sequential(new Linear(8, 8), new ReLU(), new Linear(8, 3));
  forward(x: Tensor): Tensor {
    let h = this.inp.call(x);
    for (const b of this.blocks) h = b.call(h);
    // The same weight twice: its gradient is the sum of both uses.
    h = F.linear(F.tanh(F.linear(h, this.tied)), this.tied);
    return this.head.call(h);
  }
}

const invalid = expect.objectContaining({ code: ErrorCode.InvalidArgument });

describe('autodiff core', () => {
  let gpu: Gpu;
  beforeAll(async () => {
    gpu = await acquireGpu();
  });
  afterAll(() => gpu?.destroy());

  it('names parameters by module path, as a PyTorch state dict', () => {
    const net = new Net();
    net.nameTree();
    expect(net.namedParameters().map(([n, p]) => [n, [...p.shape]])).toEqual([
      ['inp.weight', [8, 6]],
      ['inp.bias', [8]],
      ['blocks.0.fc.weight', [8, 8]],
      ['blocks.0.fc.bias', [8]],
      ['blocks.1.fc.weight', [8, 8]],
      ['blocks.1.fc.bias', [8]],
      ['tied', [8, 8]],
      ['head.0.weight', [8, 8]],
      ['head.0.bias', [8]],
      ['head.2.weight', [3, 8]],
      ['head.2.bias', [3]],
    ]);
    expect(net.blocks[1].fc.path).toBe('blocks.1.fc');
  });

  it('folds single-use ReLUs into the Linear before them and plans no buffer for them', () => {
    const net = new Net();
    net.nameTree();
    const g = new Graph();
    const out = net.call(g.input([4, 6]));
    expect(g.nodes.filter((n) => n.op.name === 'relu').length).toBe(3);
    const named = net.namedParameters();
    const { layout, flatLength } = layoutOf(named);
    const [params, grads] = [gpu.storage(flatLength), gpu.storage(flatLength)];
    const plan = compilePlan(gpu, g.nodes, [out], {
      params,
      grads,
      entry: (p) => layout[named.findIndex(([, q]) => q === p)],
    });
    expect(plan.nodes.filter((n) => n.op.name === 'relu').length).toBe(0);
    expect(plan.nodes.filter((n) => n.op.name === 'linear' && n.attrs.relu).length).toBe(3);
    for (const b of [...plan.buffers, params, grads]) b.destroy();
  });

  it('GPU gradients of the whole model equal the CPU executor’s, which equal finite differences', async () => {
    const net = new Net();
    const model = new GraphModel(gpu, {
      identity: { name: 'net', options: {} },
      module: net,
      inputShape: [6],
      classes: 3,
      seed: 7,
    });
    const batch = 5;
    const u = seededUniform(21);
    const x = Float32Array.from({ length: batch * 6 }, () => 2 * u() - 1);
    const labels = [0, 2, 1, 1, 0];
    const loss = await model.forwardBackward(x, labels);
    const [flatP, flatG] = [await model.readParams(), await model.readGrads()];

    // CPU: the unfused graph, parameters from the model's buffer.
    const g = new Graph();
    const input = g.input([batch, 6]);
    const out = net.call(input);
    const named = new Map(net.namedParameters().map(([n, p]) => [p, n]));
    const entry = (p: Parameter) => model.layout.find((e) => e.name === named.get(p))!;
    const given = new Map<Tensor, Float64Array>([[input, Float64Array.from(x)]]);
    for (const t of g.paramTensors)
      given.set(
        t,
        Float64Array.from(flatP.subarray(entry(t.param!).offset, entry(t.param!).offset + entry(t.param!).length)),
      );
    const cpuLoss = (values: Map<Tensor, Float64Array>) =>
      crossEntropy.cpu(runCpu(g.nodes, values).values.get(out)!, labels, batch, 3).loss;
    const fwd = runCpu(g.nodes, given);
    const head = crossEntropy.cpu(fwd.values.get(out)!, labels, batch, 3);
    const cpu = runCpu(g.nodes, given, [out, head.dOutput]);
    expect(Math.abs(loss - head.loss)).toBeLessThan(1e-5);

    let worst = 0;
    let total = 0;
    for (const t of g.paramTensors) {
      const e = entry(t.param!);
      const want = cpu.grads.get(t)!;
      for (let i = 0; i < e.length; i++) {
        worst = Math.max(worst, Math.abs(flatG[e.offset + i] - want[i]));
        total += Math.abs(want[i]);
      }
      // Finite differences of the f64 CPU loss at three entries of each tensor.
      for (const i of [0, Math.floor(e.length / 2), e.length - 1]) {
        const bump = (d: number) =>
          new Map([...given].map(([k, v]) => [k, k === t ? v.map((w, j) => (j === i ? w + d : w)) : v]));
        const fd = (cpuLoss(bump(1e-6)) - cpuLoss(bump(-1e-6))) / 2e-6;
        expect(Math.abs(fd - want[i]), `${e.name}[${i}]: numeric ${fd}, analytic ${want[i]}`).toBeLessThan(
          1e-6 + 1e-4 * Math.abs(fd),
        );
      }
    }
    expect(total).toBeGreaterThan(0.05); // the comparison has something in it
    expect(worst).toBeLessThan(2e-6);
    model.destroy();
  });

  it('creates no GPU buffer in a training step after warm-up, and learns', async () => {
    const model = new GraphModel(gpu, {
      identity: { name: 'net', options: {} },
      module: new Net(),
      inputShape: [6],
      classes: 3,
      seed: 3,
    });
    const opt = createOptimizer(model, { kind: 'adamw', lr: 0.01 });
    const u = seededUniform(5);
    const x = Float32Array.from({ length: 16 * 6 }, () => 2 * u() - 1);
    const y = Array.from({ length: 16 }, (_, i) => (x[i * 6] > 0 ? 1 : 0) + (x[i * 6 + 1] > 0.5 ? 1 : 0));
    const first = await trainStep(model, opt, x, y);
    const before = gpu.allocations;
    let last = first;
    for (let i = 0; i < 30; i++) last = await trainStep(model, opt, x, y);
    await model.evaluate(x, y, 16);
    expect(gpu.allocations).toBe(before);
    expect(last).toBeLessThan(first * 0.5);
    model.destroy();
    opt.destroy();
  });

  it('a wrong shape names the layer and both shapes', () => {
    class Bad extends Module {
      a = new Linear(6, 8);
      blocks = [new Block(), new Sequential(new Linear(9, 3))];
      forward(x: Tensor): Tensor {
        return this.blocks.reduce((h, b) => b.call(h), this.a.call(x));
      }
    }
    expect(
      () =>
        new GraphModel(gpu, {
          identity: { name: 'bad', options: {} },
          module: new Bad(),
          inputShape: [6],
          classes: 3,
          seed: 1,
        }),
    ).toThrow(
      /layer blocks\.1\.0 \(linear\): x's last dimension 8 must equal the weight's in-features 9 \(x \[1, 8\], weight \[3, 9\]\)/,
    );
    expect(
      () =>
        new GraphModel(gpu, {
          identity: { name: 'bad', options: {} },
          module: new Block(),
          inputShape: [8],
          classes: 3,
          seed: 1,
        }),
    ).toThrow(/forward returned \[1, 8\].*must return \[batch, …, 3\]/);
    class Empty extends Module {
      forward(x: Tensor): Tensor {
        return F.relu(x);
      }
    }
    expect(
      () =>
        new GraphModel(gpu, {
          identity: { name: 'empty', options: {} },
          module: new Empty(),
          inputShape: [3],
          classes: 3,
          seed: 1,
        }),
    ).toThrow(invalid);
  });
});
