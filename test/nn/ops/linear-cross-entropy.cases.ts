/**
 * linearCrossEntropy, the head fused with its loss in row chunks (src/nn/ops/linear-cross-entropy):
 * gradchecks (one chunk, and several with `chunkRows`), and the op on the GPU against the unfused
 * linear + crossEntropy on the same GPU and against the f64 reference: the loss and the gradients of
 * h, W and b, through the planner, over chunk counts from 1 to 4.
 */
import type { Gpu } from '../../../src/gpu/gpu.ts';
import type { GradcheckInput } from '../../../src/nn/gradcheck.ts';
import { crossEntropy } from '../../../src/nn/ops/cross-entropy/index.ts';
import { linear } from '../../../src/nn/ops/linear/index.ts';
import { linearCrossEntropy, linearCrossEntropyOp } from '../../../src/nn/ops/linear-cross-entropy/index.ts';
import { linearCrossEntropyRef } from '../../../src/nn/ops/linear-cross-entropy/reference.ts';
import { compilePlan, recordSteps } from '../../../src/nn/plan.ts';
import { Graph, type Tensor } from '../../../src/nn/tensor.ts';
import { draws, type OracleCase, relErr } from '../../oracles/oracle-case.ts';
import type { OpCase } from '../op-cases.ts';

const s = (...shape: number[]): GradcheckInput => ({ shape });

/** Targets for `rows` rows over `classes`, every `ignoreEvery`-th one ignored (−1 as u32). */
function targets(rows: number, classes: number, ignoreEvery: number, shape = [rows]): GradcheckInput {
  const data = Array.from({ length: rows }, (_, i) =>
    i % ignoreEvery === ignoreEvery - 1 ? 0xffffffff : (i * 7) % classes,
  );
  return { shape, dtype: 'u32', data };
}

export const CASES: OpCase[] = [
  {
    op: linearCrossEntropyOp,
    label: 'h[2,5,6] W[7,6] targets[2,5] b[7], a third ignored, one chunk',
    inputs: [s(2, 5, 6), s(7, 6), targets(10, 7, 3, [2, 5]), s(7)],
  },
  {
    op: linearCrossEntropyOp,
    label: 'h[130,6] W[9,6] targets[130] b[9], chunks of 64 (64, 64, 2)',
    inputs: [s(130, 6), s(9, 6), targets(130, 9, 5), s(9)],
    attrs: { chunkRows: 64 },
  },
  {
    op: linearCrossEntropyOp,
    label: 'h[128,8] W[5,8] targets[128], no bias, chunks of 64',
    inputs: [s(128, 8), s(5, 8), targets(128, 5, 100)],
    attrs: { chunkRows: 64 },
  },
];

const { rand, randInts } = draws('linear-cross-entropy');

interface HeadRun {
  loss: number;
  dh: Float32Array;
  dw: Float32Array;
  db: Float32Array;
}

/** Plans `loss(h, W, targets, b)` through the planner, runs forward and backward with ∂/∂loss = `upstream`, reads the loss and gradients. */
async function runHead(
  gpu: Gpu,
  data: { h: Float32Array; w: Float32Array; b: Float32Array; targets: Uint32Array },
  shape: { rows: number; width: number; classes: number },
  upstream: number,
  loss: (h: Tensor, w: Tensor, t: Tensor, b: Tensor) => Tensor,
): Promise<HeadRun> {
  const g = new Graph();
  const h = g.input([shape.rows, shape.width], { requiresGrad: true });
  const w = g.input([shape.classes, shape.width], { requiresGrad: true });
  const t = g.input([shape.rows], { dtype: 'u32' });
  const b = g.input([shape.classes], { requiresGrad: true });
  const out = loss(h, w, t, b);
  const plan = compilePlan(gpu, g.nodes, [out], {
    params: gpu.dummy,
    grads: gpu.dummy,
    entry: () => ({ offset: 0, length: 0 }),
  });
  try {
    const put = (x: Tensor, v: Float32Array | Uint32Array) => gpu.write(plan.value(x).buffer, v, plan.value(x).offset);
    [put(h, data.h), put(w, data.w), put(t, data.targets), put(b, data.b)];
    const seed = plan.grad(out)!;
    gpu.write(seed.buffer, Float32Array.of(upstream), seed.offset);
    recordSteps(gpu, [...plan.forward, ...plan.backward]);
    const read = (r: { buffer: GPUBuffer; offset?: number }, n: number) =>
      gpu.readF32(r.buffer, (r.offset ?? 0) / 4, n);
    const v = plan.value(out);
    return {
      loss: (await read(v, 1))[0],
      dh: await read(plan.grad(h)!, shape.rows * shape.width),
      dw: await read(plan.grad(w)!, shape.classes * shape.width),
      db: await read(plan.grad(b)!, shape.classes),
    };
  } finally {
    for (const buf of plan.buffers) buf.destroy();
  }
}

const worst = (
  a: HeadRun,
  want: { loss: number; dh: ArrayLike<number>; dw: ArrayLike<number>; db: ArrayLike<number> },
) => Math.max(relErr([a.loss], [want.loss]), relErr(a.dh, want.dh), relErr(a.dw, want.dw), relErr(a.db, want.db));

/**
 * [rows, width, classes, chunkRows, fraction ignored]: 3 chunks, 4 chunks, 2 chunks of wide rows, one chunk.
 * The row passes' loops at GPT-2's 50,257 classes are cross_entropy.wgsl's, checked at that width in
 * cross-entropy.cases.ts; here that width cost about a minute under SwiftShader for no new path.
 */
export const ORACLE_CASES: OracleCase[] = [
  [130, 32, 27, 64, 0.3],
  [200, 32, 1000, 64, 0.1],
  [66, 4, 8000, 64, 0.2],
  [96, 24, 300, 0, 0],
].map(([rows, width, classes, chunkRows, ignored]) => ({
  name: `linearCrossEntropy rows=${rows} width=${width} classes=${classes} chunkRows=${chunkRows || 'auto'} ignored≈${ignored * 100}%`,
  run: async (gpu) => {
    const shape = { rows, width, classes };
    const drop = rand(rows, 0.5, 0.5);
    const data = {
      h: rand(rows * width, 2),
      w: rand(classes * width, 0.5),
      b: rand(classes, 0.5),
      targets: Uint32Array.from(randInts(rows, classes), (v, i) => (drop[i] < ignored ? 0xffffffff : v)),
    };
    const upstream = 0.75;
    const attrs = chunkRows ? { chunkRows } : {};
    const fused = await runHead(gpu, data, shape, upstream, (h, w, t, b) => linearCrossEntropy(h, w, t, b, attrs));
    const unfused = await runHead(gpu, data, shape, upstream, (h, w, t, b) => crossEntropy(linear(h, w, b), t));
    const signed = Array.from(data.targets, (v) => (v === 0xffffffff ? -1 : v));
    const want = linearCrossEntropyRef(data.h, data.w, data.b, signed, shape, upstream);
    // Against the unfused path (the same f32 kernels, sums in another order) and against f64.
    return { maxAbsErr: Math.max(worst(fused, unfused), worst(fused, want)), tol: 2e-5 };
  },
}));
