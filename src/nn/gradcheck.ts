/**
 * gradcheck for one op, in the spirit of torch.autograd.gradcheck, in three
 * comparisons on seeded random inputs:
 *
 *   forward   the GPU output against the op's f64 CPU oracle;
 *   backward  the GPU input gradients (for a random ∂loss/∂output) against
 *             the oracle's backward;
 *   numeric   the oracle's backward against central finite differences of
 *             the oracle's forward, in f64 (differences of f32 GPU results
 *             would drown in rounding), at up to `probes` elements per input.
 *
 * The GPU run goes through the real planner (compilePlan), so it also checks
 * that the op's plan honours the backward contract (it overwrites gradIn).
 * Instead of one op it takes a function of the input tensors too (a
 * composition of ops, such as RMSNorm written with the primitives): then the
 * f64 side runs every recorded op's oracle in turn.
 */
import type { Gpu } from '../gpu/gpu.ts';
import { seededUniform } from './random.ts';
import { runCpu } from './cpu.ts';
import type { Op } from './op.ts';
import { compilePlan, recordSteps } from './plan.ts';
import { type DType, Graph, type Shape, sizeOf, type Tensor } from './tensor.ts';

export interface GradcheckInput {
  shape: Shape;
  dtype?: DType;
  /** Values (default: seeded uniform in [-1, 1]; u32 inputs must give them). */
  data?: ArrayLike<number>;
}

export interface GradcheckResult {
  /** max |gpu − cpu| / max(1, max |cpu|) over the output. */
  forward: number;
  /** The same over every input gradient. */
  backward: number;
  /** max |analytic − numeric| / max(1e-2, |numeric|) over the probed elements. */
  numeric: number;
}

function relErr(got: ArrayLike<number>, want: ArrayLike<number>): number {
  let scale = 1;
  for (let i = 0; i < want.length; i++) scale = Math.max(scale, Math.abs(want[i]));
  let err = got.length === want.length ? 0 : Infinity;
  for (let i = 0; i < want.length; i++) err = Math.max(err, Math.abs(got[i] - want[i]) / scale);
  return Number.isNaN(err) ? Infinity : err;
}

export async function gradcheck<A extends Record<string, unknown>>(
  gpu: Gpu,
  op: Op<A> | ((inputs: Tensor[]) => Tensor),
  inputs: GradcheckInput[],
  attrs: A,
  options: { seed?: number; probes?: number; step?: number } = {},
): Promise<GradcheckResult> {
  const u = seededUniform(options.seed ?? 1);
  const random = (n: number) => Float64Array.from({ length: n }, () => 2 * u() - 1);
  const graph = new Graph();
  const tensors = inputs.map((i) =>
    graph.input(i.shape, { dtype: i.dtype ?? 'f32', requiresGrad: (i.dtype ?? 'f32') === 'f32' }),
  );
  const data = inputs.map((i) => (i.data ? Float64Array.from(i.data) : random(sizeOf(i.shape))));
  const out = typeof op === 'function' ? op(tensors) : graph.record(op, tensors, attrs);
  const dOut = random(out.size);

  const plan = compilePlan(gpu, graph.nodes, [out], {
    params: gpu.dummy,
    grads: gpu.dummy,
    entry: () => ({ offset: 0, length: 0 }),
  });
  try {
    tensors.forEach((t, i) => {
      const v = plan.value(t);
      gpu.write(v.buffer, t.dtype === 'u32' ? Uint32Array.from(data[i]) : Float32Array.from(data[i]), v.offset);
    });
    const seed = plan.grad(out);
    if (seed) gpu.write(seed.buffer, Float32Array.from(dOut), seed.offset);
    recordSteps(gpu, [...plan.forward, ...plan.backward]);
    const read = async (r: { buffer: GPUBuffer; offset?: number }, n: number) =>
      gpu.readF32(r.buffer, (r.offset ?? 0) / 4, n);
    const gpuOut = await read(plan.value(out), out.size);
    const gpuGrads = await Promise.all(tensors.map((t) => (plan.grad(t) ? read(plan.grad(t)!, t.size) : null)));

    const given = new Map(
      tensors.map((t, i) => [t, Float64Array.from(t.dtype === 'f32' ? Float32Array.from(data[i]) : data[i])]),
    );
    const cpu = runCpu(plan.nodes, given, [out, Float64Array.from(Float32Array.from(dOut))]);
    const forward = relErr(gpuOut, cpu.values.get(out)!);
    let backward = 0;
    tensors.forEach((t, i) => {
      if (gpuGrads[i])
        backward = Math.max(backward, relErr(gpuGrads[i]!, cpu.grads.get(t) ?? new Float64Array(t.size)));
    });

    // Numeric: d/dx_j Σ out·dOut by central differences of the f64 oracle.
    const h = options.step ?? 1e-6;
    const probes = options.probes ?? 12;
    const objective = (values: Map<(typeof tensors)[number], Float64Array>) => {
      const y = runCpu(plan.nodes, values).values.get(out)!;
      let s = 0;
      for (let j = 0; j < y.length; j++) s += y[j] * dOut[j];
      return s;
    };
    let numeric = 0;
    tensors.forEach((t, i) => {
      if (t.dtype !== 'f32') return;
      const analytic = cpu.grads.get(t) ?? new Float64Array(t.size);
      for (let p = 0; p < Math.min(probes, t.size); p++) {
        const j = Math.floor(u() * t.size);
        const bumped = (delta: number) =>
          new Map([...given].map(([k, v]) => [k, k === t ? v.map((x, m) => (m === j ? x + delta : x)) : v]));
        const fd = (objective(bumped(h)) - objective(bumped(-h))) / (2 * h);
        numeric = Math.max(numeric, Math.abs(analytic[j] - fd) / Math.max(1e-2, Math.abs(fd)));
      }
    });
    return { forward, backward, numeric };
  } finally {
    for (const b of plan.buffers) b.destroy();
  }
}
