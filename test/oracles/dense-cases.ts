/**
 * Oracle cases for the GPU layer's kernels (src/gpu/kernels: matmul, bias,
 * row and column sums, elementwise, f16, the fused softmax
 * cross-entropy) and the whole MLP: each runs on the GPU over seeded random
 * inputs and compares with the CPU reference. (An op's kernels are checked in
 * the op's own test/nn/ops/<op>.cases.ts.) The module is runtime-agnostic:
 * vitest runs it under Node, test/deno/run-oracles.ts under Deno.
 *
 * Tolerances (absolute, on inputs in [-1, 1]): f32 sums of K products carry
 * ~K·2⁻²⁴ relative error each, so matmul allows 2e-7·K + 2e-6 and column sums 2e-6·rows;
 * pointwise ops 1e-5 (GPU exp/tanh are not correctly rounded); f16 one ULP.
 */
import type { Gpu } from '../../src/gpu/gpu.ts';
import { planAddBias, planBiasGrad, planBiasGradSteps } from '../../src/gpu/kernels/bias.ts';
import { planAdd, planAxpy, planScale } from '../../src/gpu/kernels/elementwise.ts';
import { packedWords, planPackF16, planUnpackF16 } from '../../src/gpu/kernels/f16.ts';
import { matmulSplitK, planMatmul, type MatmulVariant } from '../../src/gpu/kernels/matmul.ts';
import { planMatmulSteps } from '../../src/gpu/kernels/matmul-slices.ts';
import { planSum } from '../../src/gpu/kernels/reduce.ts';
import { planColumnSum, planSumTree } from '../../src/gpu/kernels/reduce-rows.ts';
import type { Reduction } from '../../src/gpu/kernels/common.ts';
import { planSoftmaxXent } from '../../src/gpu/kernels/softmax-xent.ts';
import { Mlp } from '../../src/engine/mlp.ts';
import type { Activation } from '../../src/nn/ops/activation/kernel.ts';
import { seededUniform } from '../../src/engine/random.ts';
import { checkModel } from '../nn/model-check.ts';
import { type OracleCase, perReduction, scoped } from './oracle-case.ts';
import * as ref from './reference.ts';

let seedCounter = 1;
function rand(n: number, scale = 1, seed = seedCounter++): Float32Array {
  const u = seededUniform(seed * 7919);
  return Float32Array.from({ length: n }, () => (2 * u() - 1) * scale);
}
function randLabels(n: number, classes: number, seed = seedCounter++): Uint32Array {
  const u = seededUniform(seed * 104729);
  return Uint32Array.from({ length: n }, () => Math.floor(u() * classes));
}

const matmulShapes: [number, number, number][] = [
  [1, 1, 1],
  [7, 33, 129],
  [33, 7, 1],
  [129, 1, 7],
  [65, 129, 33],
  [129, 513, 33],
  [513, 7, 129],
];
const variants: [boolean, boolean][] = [
  [false, false],
  [true, false],
  [false, true],
  [true, true],
];

const matmulCases: OracleCase[] = matmulShapes.flatMap(([m, n, k]) =>
  variants.map(([ta, tb]) => ({
    name: `matmul tiled ${ta ? 'Aᵀ' : 'A'}·${tb ? 'Bᵀ' : 'B'} m=${m} n=${n} k=${k}`,
    run: (gpu: Gpu) =>
      scoped(gpu, async (t) => {
        const A = rand(m * k);
        const B = rand(k * n);
        const c = t(gpu.storage(m * n));
        gpu.record(
          planMatmul(gpu, t(gpu.upload(A)), t(gpu.upload(B)), c, { m, n, k, transA: ta, transB: tb, variant: 'tiled' }),
        );
        return {
          maxAbsErr: ref.maxAbsDiff(await gpu.readF32(c, 0, m * n), ref.matmulRef(A, B, m, n, k, ta, tb)),
          tol: 2e-7 * k + 2e-6,
        };
      }),
  })),
);

/** The direct (no workgroup memory) kernel on vec4-aligned shapes, including partial 32×64 tiles. */
const directShapes: [number, number, number][] = [
  [1, 4, 4],
  [4, 8, 36],
  [7, 36, 132],
  [36, 516, 20],
  [129, 12, 512],
];

/**
 * One kernel variant over `shapes`, in A·B, Aᵀ·B and A·Bᵀ (those `fits` allows),
 * with the fused bias + ReLU epilogue checked on odd m.
 */
function variantCases(
  variant: 'direct' | 'wide' | 'blocked',
  shapes: [number, number, number][],
  fits: (m: number, k: number, transA: boolean) => boolean,
): OracleCase[] {
  return shapes.flatMap(([m, n, k]) =>
    (
      [
        [false, false],
        [true, false],
        [false, true],
      ] as [boolean, boolean][]
    )
      .filter(([ta]) => fits(m, k, ta))
      .map(([ta, tb]) => ({
        name: `matmul ${variant} ${ta ? 'Aᵀ' : 'A'}·${tb ? 'Bᵀ' : 'B'} m=${m} n=${n} k=${k}`,
        run: (gpu: Gpu) =>
          scoped(gpu, async (t) => {
            const A = rand(m * k);
            const B = rand(k * n);
            const bias = rand(n);
            const c = t(gpu.storage(m * n));
            const relu = m % 2 === 1; // odd m: also check the fused epilogue
            gpu.record(
              planMatmul(gpu, t(gpu.upload(A)), t(gpu.upload(B)), c, {
                m,
                n,
                k,
                transA: ta,
                transB: tb,
                variant,
                bias: relu ? t(gpu.upload(bias)) : undefined,
                relu,
              }),
            );
            const want = ref.matmulRef(A, B, m, n, k, ta, tb).map((v, i) => (relu ? Math.max(0, v + bias[i % n]) : v));
            return { maxAbsErr: ref.maxAbsDiff(await gpu.readF32(c, 0, m * n), want), tol: 2e-7 * k + 2e-6 };
          }),
      })),
  );
}
const directCases = variantCases('direct', directShapes, (m, _k, ta) => !ta || m % 4 === 0);

/**
 * The wide kernel (32×32 per invocation): whole blocks, edge blocks shifted
 * back inside the matrix (m, n not multiples of the block), several workgroups
 * in both directions, all three transposes, and the fused epilogue on odd m.
 */
const wideShapes: [number, number, number][] = [
  [32, 32, 4],
  [33, 36, 132],
  [36, 260, 20],
  [71, 516, 36],
  [132, 292, 9],
];
const wideCases = variantCases('wide', wideShapes, (m, k, ta) => (ta ? m % 4 === 0 : k % 4 === 0));

/**
 * The register-blocked kernel of hardware adapters (128×128 tiles, 8×8 per
 * invocation, vec4 loads), forced here on the software adapter: one whole tile,
 * partial tiles in both directions, all three transposes, the epilogue on odd m.
 */
const blockedShapes: [number, number, number][] = [
  [128, 128, 8],
  [33, 132, 20],
  [136, 36, 12],
];
const blockedCases = variantCases('blocked', blockedShapes, (m, k, ta) => (ta ? m % 4 === 0 : k % 4 === 0));

const fusedMatmulCases: OracleCase[] = [
  [7, 33, 129],
  [70, 130, 9],
].map(([m, n, k]) => ({
  name: `matmul + bias + relu m=${m} n=${n} k=${k}`,
  run: (gpu) =>
    scoped(gpu, async (t) => {
      const A = rand(m * k);
      const B = rand(k * n);
      const bias = rand(n);
      const c = t(gpu.storage(m * n));
      gpu.record(
        planMatmul(gpu, t(gpu.upload(A)), t(gpu.upload(B)), c, {
          m,
          n,
          k,
          bias: t(gpu.upload(bias)),
          relu: true,
          variant: 'tiled',
        }),
      );
      const want = ref.matmulRef(A, B, m, n, k).map((v, i) => Math.max(0, v + bias[i % n]));
      return { maxAbsErr: ref.maxAbsDiff(await gpu.readF32(c, 0, m * n), want), tol: 2e-7 * k + 2e-6 };
    }),
}));

const biasCases: OracleCase[] = [
  [1, 1],
  [7, 33],
  [129, 10],
  [33, 513],
].flatMap(([rows, cols]) => [
  {
    name: `addBias rows=${rows} cols=${cols}`,
    run: (gpu: Gpu) =>
      scoped(gpu, async (t) => {
        const y = rand(rows * cols);
        const b = rand(cols);
        const yb = t(gpu.upload(y));
        gpu.record(planAddBias(gpu, yb, t(gpu.upload(b)), rows, cols));
        return {
          maxAbsErr: ref.maxAbsDiff(await gpu.readF32(yb, 0, rows * cols), ref.addBiasRef(y, b, rows, cols)),
          tol: 1e-6,
        };
      }),
  },
  {
    name: `biasGrad rows=${rows} cols=${cols}`,
    run: (gpu: Gpu) =>
      scoped(gpu, async (t) => {
        const dy = rand(rows * cols);
        const db = t(gpu.storage(cols));
        gpu.record(planBiasGrad(gpu, t(gpu.upload(dy)), db, rows, cols));
        return {
          maxAbsErr: ref.maxAbsDiff(await gpu.readF32(db, 0, cols), ref.biasGradRef(dy, rows, cols)),
          tol: 2e-6 * rows + 1e-6,
        };
      }),
  },
]);

/**
 * Column sums as a tree of row chunks (reduce_rows.wgsl): one level and
 * several, chunks that do not divide the rows, the narrow-row `tree` entry
 * and the wide `columns` one, a row stride wider than the columns, a result
 * slot, a scale and accumulation into what dst holds.
 */
const columnSumShapes: {
  rows: number;
  cols: number;
  stride?: number;
  accumulate?: boolean;
  dstOffset?: number;
  scale?: number;
}[] = [
  { rows: 1, cols: 1 },
  { rows: 300, cols: 10 },
  { rows: 70001, cols: 3, accumulate: true, dstOffset: 5, scale: 0.25 },
  { rows: 65, cols: 33 },
  { rows: 4099, cols: 65, stride: 70, accumulate: true },
  { rows: 131, cols: 513, scale: 1 / 131 },
];
const columnSumCases: OracleCase[] = columnSumShapes.flatMap((shape) =>
  perReduction((reduction) => columnSumCase({ ...shape, reduction })),
);
function columnSumCase(c: (typeof columnSumShapes)[number] & { reduction: Reduction }): OracleCase {
  return {
    name: `columnSum rows=${c.rows} cols=${c.cols}${c.stride ? ` stride=${c.stride}` : ''}${c.accumulate ? ' accumulate' : ''}${c.dstOffset ? ` at ${c.dstOffset}` : ''}`,
    run: (gpu: Gpu) =>
      scoped(gpu, async (t) => {
        const stride = c.stride ?? c.cols;
        const off = c.dstOffset ?? 0;
        const src = rand(c.rows * stride);
        const init = rand(off + c.cols);
        const dst = t(gpu.upload(init));
        gpu.record(planColumnSum(gpu, t(gpu.upload(src)), dst, c, (w, l) => t(gpu.storage(w, l))));
        const want = Array.from({ length: c.cols }, (_, j) => {
          let sum = 0;
          for (let r = 0; r < c.rows; r++) sum += src[r * stride + j];
          return (c.accumulate ? init[off + j] : 0) + (c.scale ?? 1) * sum;
        });
        return { maxAbsErr: ref.maxAbsDiff(await gpu.readF32(dst, off, c.cols), want), tol: 2e-7 * c.rows + 2e-6 };
      }),
  };
}

const biasStepCases: OracleCase[] = [
  [7, 33],
  [1000, 10],
  [4099, 64],
].map(([rows, cols]) => ({
  name: `biasGrad (row tree) rows=${rows} cols=${cols}`,
  run: (gpu: Gpu) =>
    scoped(gpu, async (t) => {
      const dy = rand(rows * cols);
      const db = t(gpu.storage(cols));
      gpu.record(planBiasGradSteps(gpu, t(gpu.upload(dy)), db, rows, cols, (w, l) => t(gpu.storage(w, l))));
      return {
        maxAbsErr: ref.maxAbsDiff(await gpu.readF32(db, 0, cols), ref.biasGradRef(dy, rows, cols)),
        tol: 2e-7 * rows + 2e-6,
      };
    }),
}));

/**
 * Matmuls split over K (the weight-gradient shape: K long, the output small):
 * every kernel variant and transpose, K not a multiple of the slice.
 */
const splitShapes: [number, number, number][] = [
  [40, 36, 1000],
  [7, 33, 777],
];
const splitKCases: OracleCase[] = splitShapes.flatMap(([m, n, k]) =>
  (['tiled', 'direct', 'wide', 'blocked'] as MatmulVariant[]).flatMap((variant) =>
    (
      [
        [true, false],
        [false, false],
        [false, true],
      ] as [boolean, boolean][]
    )
      .filter(
        ([ta]) =>
          variant === 'tiled' ||
          (n % 4 === 0 && (ta ? m % 4 === 0 : k % 4 === 0) && (variant !== 'wide' || (m >= 32 && n >= 32))),
      )
      .map(([ta, tb]) => ({
        name: `matmul split-K ${variant} ${ta ? 'Aᵀ' : 'A'}·${tb ? 'Bᵀ' : 'B'} m=${m} n=${n} k=${k}`,
        run: (gpu: Gpu) =>
          scoped(gpu, async (t) => {
            const o = { m, n, k, transA: ta, transB: tb, variant };
            const { slices } = matmulSplitK(gpu, o);
            if (slices < 2) throw new Error(`expected a split over K, got ${slices} slice`);
            const A = rand(m * k);
            const B = rand(k * n);
            const c = t(gpu.storage(m * n));
            gpu.record(planMatmulSteps(gpu, t(gpu.upload(A)), t(gpu.upload(B)), c, o, (w, l) => t(gpu.storage(w, l))));
            return {
              maxAbsErr: ref.maxAbsDiff(await gpu.readF32(c, 0, m * n), ref.matmulRef(A, B, m, n, k, ta, tb)),
              tol: 2e-7 * k + 2e-6,
            };
          }),
      })),
  ),
);

const xentCases: OracleCase[] = [
  [1, 1],
  [7, 10],
  [129, 33],
  [33, 513],
].map(([batch, classes]) => ({
  name: `softmax cross-entropy batch=${batch} classes=${classes} (logits up to ±80)`,
  run: (gpu) =>
    scoped(gpu, async (t) => {
      const logits = rand(batch * classes, 80);
      const labels = randLabels(batch, classes);
      const [dl, lr, cr, res] = [batch * classes, batch, batch, 4].map((n) => t(gpu.storage(n)));
      gpu.record([
        planSoftmaxXent(
          gpu,
          { logits: t(gpu.upload(logits)), labels: t(gpu.upload(labels)), dLogits: dl, lossRows: lr, correct: cr },
          batch,
          classes,
        ),
        planSum(gpu, lr, res, batch, { scale: 1 / batch }),
        planSum(gpu, cr, res, batch, { outIndex: 1 }),
      ]);
      const want = ref.softmaxXentRef(logits, labels, batch, classes);
      const r = await gpu.readF32(res, 0, 2);
      const err = Math.max(
        ref.maxAbsDiff(await gpu.readF32(lr, 0, batch), want.lossRows) / 80,
        ref.maxAbsDiff(await gpu.readF32(cr, 0, batch), want.correct),
        ref.maxAbsDiff(await gpu.readF32(dl, 0, batch * classes), want.dLogits),
        Math.abs(r[0] - want.meanLoss) / 80,
        Math.abs(r[1] - want.correct.reduce((a, b) => a + b, 0)),
      );
      return { maxAbsErr: err, tol: 1e-5 };
    }),
}));

const sumCases: OracleCase[] = [1, 7, 513, 10007].map((n) => ({
  name: `sum n=${n}`,
  run: (gpu) =>
    scoped(gpu, async (t) => {
      const x = rand(n);
      const out = t(gpu.storage(4));
      gpu.record(planSum(gpu, t(gpu.upload(x)), out, n, { outIndex: 2, scale: 0.5 }));
      const [got] = await gpu.readF32(out, 2, 1);
      return { maxAbsErr: Math.abs(got - 0.5 * x.reduce((a, b) => a + b, 0)), tol: 1e-6 * Math.sqrt(n) + 1e-6 };
    }),
}));

const sumTreeCases: OracleCase[] = [1, 257, 70001].flatMap((n) =>
  perReduction((reduction) => ({
    name: `sum (workgroup tree over rows) n=${n}`,
    run: (gpu) =>
      scoped(gpu, async (t) => {
        const x = rand(n);
        const out = t(gpu.storage(4));
        gpu.record(
          planSumTree(gpu, t(gpu.upload(x)), out, n, { outIndex: 2, scale: 0.5, reduction }, (w, l) =>
            t(gpu.storage(w, l)),
          ),
        );
        const [got] = await gpu.readF32(out, 2, 1);
        return { maxAbsErr: Math.abs(got - 0.5 * x.reduce((a, b) => a + b, 0)), tol: 1e-6 * Math.sqrt(n) + 1e-6 };
      }),
  })),
);

const elementwiseCases: OracleCase[] = [1, 33, 4099].map((n) => ({
  name: `add, axpy, scale n=${n}`,
  run: (gpu) =>
    scoped(gpu, async (t) => {
      const a = rand(n);
      const d = rand(n);
      const ab = t(gpu.upload(a));
      const db = t(gpu.upload(d));
      gpu.record([...planAdd(gpu, ab, db, n), ...planAxpy(gpu, -0.25, ab, db, n), ...planScale(gpu, 3, db, n)]);
      return {
        maxAbsErr: ref.maxAbsDiff(
          await gpu.readF32(db, 0, n),
          Array.from(d, (v, i) => 3 * (v + a[i] - 0.25 * a[i])),
        ),
        tol: 2e-6,
      };
    }),
}));

const f16Cases: OracleCase[] = [1, 7, 33, 513].map((n) => ({
  name: `f16 pack+unpack n=${n}`,
  run: (gpu) =>
    scoped(gpu, async (t) => {
      // Magnitudes from 1e-3 to 1e3, plus exact halves.
      const x = rand(n, 1).map((v, i) => (i % 5 === 0 ? 0.5 : v * 10 ** ((i % 7) - 3)));
      const packed = t(gpu.storage(packedWords(n)));
      const back = t(gpu.storage(n));
      gpu.record([planPackF16(gpu, t(gpu.upload(x)), packed, n), planUnpackF16(gpu, packed, back, n)]);
      const got = await gpu.readF32(back, 0, n);
      // One f16 ULP of slack: WGSL leaves the rounding direction of pack2x16float to the implementation.
      let worst = 0;
      for (let i = 0; i < n; i++)
        worst = Math.max(
          worst,
          Math.abs(got[i] - ref.roundToF16(x[i])) / Math.max(Math.abs(x[i]) * 2 ** -10, 2 ** -24),
        );
      return { maxAbsErr: worst, tol: 1 };
    }),
}));

/** The whole MLP: loss and every gradient element against the CPU executor over its unfused graph (test/nn/model-check.ts). */
const mlpCases: OracleCase[] = (
  [
    [[33, 7, 5], 'relu', 7],
    [[20, 16, 12, 3], 'geluTanh', 5],
    [[9, 4, 2], 'tanh', 1],
  ] as [number[], Activation, number][]
).map(([widths, act, batch]) => ({
  name: `mlp ${widths.join('-')} ${act} batch=${batch}: loss and gradients`,
  run: async (gpu) => {
    const model = new Mlp(gpu, {
      kind: 'mlp',
      inputSize: widths[0],
      hidden: widths.slice(1, -1),
      classes: widths[widths.length - 1],
      activation: act,
      seed: 5,
    });
    try {
      const c = await checkModel(model, rand(batch * widths[0]), [...randLabels(batch, widths[widths.length - 1])]);
      return {
        maxAbsErr: c.gradMass > 1e-3 ? Math.max(Math.abs(c.loss - c.cpuLoss), c.gradError) : Infinity,
        tol: 2e-5,
      };
    } finally {
      model.destroy();
    }
  },
}));

export const DENSE_CASES: OracleCase[] = [
  ...matmulCases,
  ...directCases,
  ...wideCases,
  ...blockedCases,
  ...fusedMatmulCases,
  ...biasCases,
  ...columnSumCases,
  ...biasStepCases,
  ...splitKCases,
  ...xentCases,
  ...sumCases,
  ...sumTreeCases,
  ...elementwiseCases,
  ...f16Cases,
  ...mlpCases,
];
