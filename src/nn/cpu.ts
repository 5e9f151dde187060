/**
 * Runs a recorded graph on the CPU in f64 with the ops' oracles, forward and
 * reverse-mode backward: the reference the GPU plan is checked against, and
 * the function finite differences are taken of (gradcheck). Gradients of a
 * tensor used by several ops are summed here plainly, so a planner bug in
 * accumulation shows up as a difference.
 */
import type { Node, Tensor } from './tensor.ts';

export interface CpuRun {
  values: Map<Tensor, Float64Array>;
  grads: Map<Tensor, Float64Array>;
}

/** Forward over `nodes` from `given` (inputs and parameters); with `seed`, backward from output tensor seed[0] with ∂loss/∂output seed[1]. */
export function runCpu(nodes: Node[], given: Map<Tensor, Float64Array>, seed?: [Tensor, Float64Array]): CpuRun {
  const values = new Map(given);
  const get = (t: Tensor): Float64Array => {
    const v = values.get(t);
    if (!v) throw new Error(`runCpu: no value for ${t}`);
    return v;
  };
  for (const n of nodes)
    values.set(
      n.output,
      n.op.cpu.forward(
        n.inputs.map(get),
        n.inputs.map((t) => [...t.shape]),
        n.attrs,
      ),
    );
  const grads = new Map<Tensor, Float64Array>();
  if (!seed) return { values, grads };
  grads.set(seed[0], Float64Array.from(seed[1]));
  for (let i = nodes.length - 1; i >= 0; i--) {
    const n = nodes[i];
    const dOut = grads.get(n.output);
    if (!dOut) continue;
    const dIns = n.op.cpu.backward(
      n.inputs.map(get),
      n.inputs.map((t) => [...t.shape]),
      n.attrs,
      get(n.output),
      dOut,
    );
    n.inputs.forEach((t, k) => {
      const d = dIns[k];
      if (!d) return;
      const acc = grads.get(t);
      if (acc) for (let j = 0; j < d.length; j++) acc[j] += d[j];
      else grads.set(t, Float64Array.from(d));
    });
  }
  return { values, grads };
}
