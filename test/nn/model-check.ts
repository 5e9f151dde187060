/**
 * A whole GraphModel against the CPU executor (src/nn/cpu.ts) over its
 * UNFUSED graph with f64 oracles: the loss and every element of the flat
 * gradient after one forwardBackward; and, on request, the CPU gradient
 * against central finite differences of the CPU loss at a few entries per
 * tensor. Runtime-agnostic (oracle cases use it under Node and Deno).
 */
import type { GraphModel } from '../../src/engine/graph-model.ts';
import { runCpu } from '../../src/nn/cpu.ts';
import { Graph, type Parameter, type Tensor } from '../../src/nn/tensor.ts';

export interface ModelCheck {
  loss: number;
  cpuLoss: number;
  /** max |GPU − CPU| over the flat gradient. */
  gradError: number;
  /** Σ |CPU gradient| (so a check is known to compare something). */
  gradMass: number;
  /** Worst |numeric − analytic| / (1e-6 + 1e-4·|numeric|) over the probed entries (≤ 1 passes); 0 when not probed. */
  numeric: number;
}

export async function checkModel(
  model: GraphModel,
  x: Float32Array,
  labels: number[],
  probes = 0,
): Promise<ModelCheck> {
  const batch = x.length / model.inputSize;
  const loss = await model.forwardBackward(x, labels);
  const [flatP, flatG] = [await model.readParams(), await model.readGrads()];
  const g = new Graph();
  const input = g.input([batch, ...model.inputShape], { dtype: model.inputDType });
  const out = model.module.call(input);
  const names = new Map(model.module.namedParameters().map(([n, p]) => [p, n]));
  const entry = (p: Parameter) => model.layout.find((e) => e.name === names.get(p))!;
  const given = new Map<Tensor, Float64Array>([[input, Float64Array.from(x)]]);
  for (const t of g.paramTensors) {
    const e = entry(t.param!);
    given.set(t, Float64Array.from(flatP.subarray(e.offset, e.offset + e.length)));
  }
  const rows = out.size / model.classes;
  const cpuLoss = (values: Map<Tensor, Float64Array>) =>
    model.loss.cpu(runCpu(g.nodes, values).values.get(out)!, labels, rows, model.classes).loss;
  const head = model.loss.cpu(runCpu(g.nodes, given).values.get(out)!, labels, rows, model.classes);
  const cpu = runCpu(g.nodes, given, [out, head.dOutput]);
  let gradError = 0;
  let gradMass = 0;
  let numeric = 0;
  for (const t of g.paramTensors) {
    const e = entry(t.param!);
    const want = cpu.grads.get(t) ?? new Float64Array(e.length);
    for (let i = 0; i < e.length; i++) {
      gradError = Math.max(gradError, Math.abs(flatG[e.offset + i] - want[i]));
      gradMass += Math.abs(want[i]);
    }
    for (let k = 0; k < probes; k++) {
      const i = Math.floor(((k + 0.5) * e.length) / probes);
      const bump = (d: number) =>
        new Map([...given].map(([key, v]) => [key, key === t ? v.map((w, j) => (j === i ? w + d : w)) : v]));
      const fd = (cpuLoss(bump(1e-6)) - cpuLoss(bump(-1e-6))) / 2e-6;
      numeric = Math.max(numeric, Math.abs(fd - want[i]) / (1e-6 + 1e-4 * Math.abs(fd)));
    }
  }
  return { loss, cpuLoss: head.loss, gradError, gradMass, numeric };
}
