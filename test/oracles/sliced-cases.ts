/**
 * Kernels that slice an operand bigger than one binding (`Gpu.maxBindingBytes`):
 * each case runs the same work on the shared Gpu (whole bindings) and on a
 * second Gpu over the same device created with a small `maxBindingBytes`, and
 * counts the values whose bits differ (the tolerance is 0). Each also checks
 * that the small limit did split the work, and compares with the f64
 * reference, so a case fails if both runs are wrong alike.
 */
import { type Dispatch, Gpu } from '../../src/gpu/gpu.ts';
import { planMatmul, type MatmulOptions } from '../../src/gpu/kernels/matmul.ts';
import { planMatmulAnySize, planMatmulSteps } from '../../src/gpu/kernels/matmul-slices.ts';
import { planAdd, planAxpy, planScale } from '../../src/gpu/kernels/elementwise.ts';
import { optimizerFields, planOptimizerUpdate } from '../../src/gpu/kernels/optimizers.ts';
import { ADAMW_OPTIMIZER, SGD_OPTIMIZER } from '../../src/optimizers/index.ts';
import { planEmbeddingBackward, planEmbeddingForward } from '../../src/nn/ops/embedding/kernel.ts';
import { embeddingBackwardRef, embeddingRef } from '../../src/nn/ops/embedding/reference.ts';
import { draws, type OracleCase, plus, relErr, scoped } from './oracle-case.ts';
import * as ref from './reference.ts';

const { rand, randInts } = draws('sliced');

/** Values whose bits differ between two runs (NaN payloads included). */
function bitsDiffer(a: Float32Array, b: Float32Array): number {
  const [x, y] = [new Uint32Array(a.buffer, a.byteOffset, a.length), new Uint32Array(b.buffer, b.byteOffset, b.length)];
  let n = Math.abs(x.length - y.length);
  for (let i = 0; i < Math.min(x.length, y.length); i++) if (x[i] !== y[i]) n++;
  return n;
}

/**
 * `device` for a second Gpu that must not end it: destroying that Gpu frees its own buffers only.
 */
function borrowed(device: GPUDevice): GPUDevice {
  return new Proxy(device, {
    get(target, key) {
      if (key === 'destroy') return () => {};
      const value: unknown = Reflect.get(target, key, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

/**
 * Runs `work` on `gpu` and on a Gpu limited to `maxBindingBytes`; returns both outputs and the dispatch counts.
 * The limit is the Gpu's, not the device's (kernels plan their slices against `Gpu.maxBindingBytes`), so the
 * second Gpu shares the first one's device and takes its compiled pipelines from it: the same shaders with the same
 * constants, which a software adapter takes seconds each to compile (Dawn's SwiftShader, for a matmul).
 */
async function both<T extends Float32Array[]>(
  gpu: Gpu,
  maxBindingBytes: number,
  work: (g: Gpu) => Promise<{ out: T; dispatches: number }>,
  maxDispatchMacs?: number,
) {
  const sliced = new Gpu(borrowed(gpu.device), gpu.info, { maxBindingBytes, maxDispatchMacs, stepParts: false });
  sliced.pipeline = (key, options) => gpu.pipeline(key, options);
  try {
    return { whole: await work(gpu), sliced: await work(sliced) };
  } finally {
    sliced.destroy();
  }
}

/** A case's result: differing bits (tolerance 0), or Infinity when the limit did not split the work or the reference disagrees. */
function verdict(
  r: { whole: { out: Float32Array[]; dispatches: number }; sliced: { out: Float32Array[]; dispatches: number } },
  slicesAtLeast: number,
  refErr: number,
  refTol: number,
) {
  if (r.whole.dispatches >= r.sliced.dispatches || r.sliced.dispatches < slicesAtLeast || !(refErr <= refTol))
    return { maxAbsErr: Infinity, tol: 0 };
  return { maxAbsErr: r.whole.out.reduce((n, o, i) => n + bitsDiffer(o, r.sliced.out[i]), 0), tol: 0 };
}

const count = (d: Dispatch | Dispatch[]) => (Array.isArray(d) ? d.length : 1);

const n = 5000;
const p0 = rand(n);
const grads = [rand(n), rand(n, 0.01), rand(n)];

const optimizerCases: OracleCase[] = [
  {
    name: 'sliced: SGD over 256-word bindings (20 slices) = one dispatch, bit for bit, 3 steps n=5000',
    run: async (gpu) => {
      const h = { lr: 0.1, momentum: 0.9, weightDecay: 0.01 };
      const r = await both(gpu, 1024, (g) =>
        scoped(g, async (t) => {
          const [pb, gb, vb] = [t(g.upload(p0)), t(g.storage(n)), t(g.storage(n))];
          const uniform = t(g.uniform(optimizerFields(SGD_OPTIMIZER.uniform(h, 1))));
          const d = planOptimizerUpdate(g, SGD_OPTIMIZER, { uniform, param: pb, grad: gb, state: [vb] }, n);
          for (const grad of grads) {
            g.write(gb, grad);
            g.record(d);
          }
          return { out: [await g.readF32(pb, 0, n), await g.readF32(vb, 0, n)], dispatches: count(d) };
        }),
      );
      const p = Float64Array.from(p0);
      const v = new Float64Array(n);
      for (const grad of grads) ref.sgdRef(p, grad, v, h.lr, h.momentum, h.weightDecay);
      return verdict(r, 20, ref.maxAbsDiff(r.sliced.out[0], p), 1e-5);
    },
  },
  {
    name: 'sliced: AdamW over 256-word bindings (20 slices) = one dispatch, bit for bit, 3 steps n=5000',
    run: async (gpu) => {
      const h = { lr: 0.01, beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: 0.05 };
      const settings = { lr: h.lr, betas: [h.beta1, h.beta2], eps: h.eps, weightDecay: h.weightDecay } as const;
      const r = await both(gpu, 1024, (g) =>
        scoped(g, async (t) => {
          const [pb, gb, mb, vb] = [t(g.upload(p0)), t(g.storage(n)), t(g.storage(n)), t(g.storage(n))];
          const uniformAt = (step: number) => optimizerFields(ADAMW_OPTIMIZER.uniform(settings, step));
          const u = t(g.uniform(uniformAt(1)));
          const d = planOptimizerUpdate(g, ADAMW_OPTIMIZER, { uniform: u, param: pb, grad: gb, state: [mb, vb] }, n);
          for (let s = 1; s <= grads.length; s++) {
            g.write(gb, grads[s - 1]);
            g.writeUniform(u, uniformAt(s));
            g.record(d);
          }
          return {
            out: [await g.readF32(pb, 0, n), await g.readF32(mb, 0, n), await g.readF32(vb, 0, n)],
            dispatches: count(d),
          };
        }),
      );
      const p = Float64Array.from(p0);
      const [m, v] = [new Float64Array(n), new Float64Array(n)];
      grads.forEach((grad, i) => ref.adamwRef(p, grad, m, v, i + 1, h.lr, h.beta1, h.beta2, h.eps, h.weightDecay));
      return verdict(r, 20, ref.maxAbsDiff(r.sliced.out[0], p), 1e-5);
    },
  },
];

/** [rows, vocab, dim, accumulate, dispatches when sliced (forward and backward)]: three slices, the last one short; the sort (1 + 21 or 45 passes) is shared by the slices, each of which clears (unless accumulating), sums its runs and joins them. */
const embeddingShapes: [number, number, number, boolean, number][] = [
  [40, 701, 12, false, 34],
  [300, 701, 12, true, 55],
];

const embeddingCases: OracleCase[] = embeddingShapes.map(([rows, vocab, dim, accumulate, atLeast]) => ({
  name: `sliced: embedding gather+scatter over 16 KiB bindings = whole, bit for bit, rows=${rows} vocab=${vocab} dim=${dim}${accumulate ? ' (accumulate)' : ''}`,
  run: async (gpu) => {
    const ids = randInts(rows, vocab);
    const [w, dy, dw0] = [rand(vocab * dim), rand(rows * dim), rand(vocab * dim)];
    const s = { rows, vocab, dim };
    const r = await both(gpu, 16384, (g) =>
      scoped(g, async (t) => {
        const idb = t(g.upload(ids));
        const [out, dw] = [t(g.storage(rows * dim)), t(accumulate ? g.upload(dw0) : g.storage(vocab * dim))];
        const forward = planEmbeddingForward(g, s, idb, t(g.upload(w)), out);
        const backward = planEmbeddingBackward(g, s, idb, t(g.upload(dy)), dw, accumulate, (words, l) =>
          t(g.storage(words, l)),
        );
        g.record([...forward, ...backward]);
        return {
          out: [await g.readF32(out, 0, rows * dim), await g.readF32(dw, 0, vocab * dim)],
          dispatches: forward.length + backward.length,
        };
      }),
    );
    const dwWant = embeddingBackwardRef(ids, dy, rows, vocab, dim);
    const err = Math.max(
      relErr(r.sliced.out[0], embeddingRef(ids, w, rows, dim)),
      relErr(r.sliced.out[1], accumulate ? plus(dwWant, dw0) : dwWant),
    );
    return verdict(r, atLeast, err, 2e-6 * Math.sqrt(rows));
  },
}));

interface MatmulSliceCase {
  what: string;
  shape: MatmulOptions;
  bias?: boolean;
  /** Bytes one binding may hold on the sliced Gpu. */
  limit: number;
  /** Dispatches the sliced plan makes (slices, and the sums of K slices). */
  dispatches: number;
  /** Through planMatmulSteps (keeps its split over K) rather than planMatmulAnySize. */
  steps?: boolean;
  /** Only rounding may differ from the unsliced plan (K sliced where the unsliced plan sums K in one pass). */
  rounding?: boolean;
  /** The sliced Gpu's most multiply-adds per dispatch (parts that fit are cut further by work). */
  maxDispatchMacs?: number;
}

const matmulSliceCases: MatmulSliceCase[] = [
  { what: 'rows of C (C too big, A·B)', shape: { m: 300, n: 100, k: 40 }, limit: 32768, dispatches: 5 },
  {
    what: 'rows of C (C too big, Aᵀ·B as dW = dyᵀ·x)',
    shape: { m: 300, n: 100, k: 20, transA: true },
    limit: 32768,
    dispatches: 5,
    steps: true,
  },
  {
    what: 'columns of C (B stored N×K too big, A·Bᵀ + bias + ReLU as a head)',
    shape: { m: 20, n: 300, k: 40, transB: true, relu: true },
    bias: true,
    limit: 32768,
    dispatches: 2,
  },
  {
    what: 'K (B stored K×N too big, A·B as dx = dy·W)',
    shape: { m: 20, n: 40, k: 300 },
    limit: 32768,
    dispatches: 3,
    rounding: true,
  },
  {
    what: "K in the unsliced plan's chunks (Aᵀ·B, both too big)",
    shape: { m: 64, n: 64, k: 1024, transA: true },
    limit: 65536,
    dispatches: 5,
    steps: true,
  },
  {
    what: 'rows, then columns of C (A, B stored N×K and C too big, as a head at a big batch)',
    shape: { m: 300, n: 256, k: 100, transB: true },
    bias: true,
    limit: 65536,
    dispatches: 10,
  },
  {
    what: 'rows, then K, with fewer rows so that the partial products fit (Aᵀ·B as dW = dyᵀ·x at a big batch)',
    shape: { m: 512, n: 256, k: 256, transA: true },
    limit: 262144,
    dispatches: 12,
    steps: true,
    rounding: true,
  },
  {
    what: 'columns of C, then rows and columns by work (at most 2^15 multiply-adds a dispatch, a head h·Wᵀ)',
    shape: { m: 128, n: 192, k: 200, transB: true },
    limit: 131072,
    dispatches: 6,
    maxDispatchMacs: 2 ** 15,
  },
  {
    what: 'K, then rows and columns by work (at most 2^15 multiply-adds a dispatch, dh = dy·W)',
    shape: { m: 128, n: 128, k: 300 },
    limit: 131072,
    dispatches: 10,
    rounding: true,
    maxDispatchMacs: 2 ** 15,
  },
  {
    what: 'rows, then K (A and B stored K×N too big, as dx = dy·W at a big batch)',
    shape: { m: 200, n: 100, k: 1024 },
    limit: 262144,
    dispatches: 12,
    rounding: true,
  },
];

const matmulCases: OracleCase[] = matmulSliceCases.map((c) => ({
  name: `sliced: matmul over ${c.limit / 1024} KiB bindings, split along ${c.what} = whole${c.rounding ? ' to rounding' : ', bit for bit'}`,
  run: async (gpu) => {
    const { m, n, k, transA, transB } = c.shape;
    const [a, b, bias] = [rand(m * k), rand(k * n), rand(n)];
    const r = await both(
      gpu,
      c.limit,
      (g) =>
        scoped(g, async (t) => {
          const sliced = g !== gpu;
          const o = { ...c.shape, bias: c.bias ? t(g.upload(bias)) : undefined, variant: 'tiled' as const };
          const [ab, bb, cb] = [t(g.upload(a)), t(g.upload(b)), t(g.storage(m * n))];
          const scratch = (words: number, l: string) => t(g.storage(words, l));
          const d = c.steps
            ? planMatmulSteps(g, ab, bb, cb, o, scratch)
            : sliced
              ? planMatmulAnySize(g, ab, bb, cb, o, scratch)
              : [planMatmul(g, ab, bb, cb, o)];
          g.record(d);
          return { out: [await g.readF32(cb, 0, m * n)], dispatches: d.length };
        }),
      c.maxDispatchMacs,
    );
    const want = ref.matmulRef(a, b, m, n, k, transA, transB).map((v, i) => {
      const x = v + (c.bias ? bias[i % n] : 0);
      return c.shape.relu ? Math.max(x, 0) : x;
    });
    const err = relErr(r.sliced.out[0], want);
    const tol = 2e-7 * k + 2e-6;
    if (r.sliced.dispatches !== c.dispatches) return { maxAbsErr: Infinity, tol: 0 };
    if (c.rounding) return { maxAbsErr: Math.max(err, relErr(r.sliced.out[0], r.whole.out[0])), tol };
    return verdict(r, c.dispatches, err, tol);
  },
}));

/** The add that sums a tied weight's two gradient parts (GPT-2's wte is past one binding on lavapipe). */
const elementwiseCases: OracleCase[] = [
  {
    name: 'sliced: add, axpy, scale over 256-word bindings (20 slices each) = one dispatch, bit for bit, n=5000',
    run: async (gpu) => {
      const [a, d0] = [rand(n), rand(n)];
      const r = await both(gpu, 1024, (g) =>
        scoped(g, async (t) => {
          const [ab, db] = [t(g.upload(a)), t(g.upload(d0))];
          const d = [...planAdd(g, ab, db, n), ...planAxpy(g, -0.25, ab, db, n), ...planScale(g, 3, db, n)];
          g.record(d);
          return { out: [await g.readF32(db, 0, n)], dispatches: d.length };
        }),
      );
      return verdict(
        r,
        60,
        ref.maxAbsDiff(
          r.sliced.out[0],
          Array.from(d0, (v, i) => 3 * (v + a[i] - 0.25 * a[i])),
        ),
        2e-6,
      );
    },
  },
];

export const SLICED_CASES: OracleCase[] = [...optimizerCases, ...elementwiseCases, ...embeddingCases, ...matmulCases];
