/**
 * Gradchecks of linear (x·Wᵀ + b, optional fused ReLU) (src/nn/ops/linear) against the f64 oracle and finite
 * differences, and its f16-mixed path's kernels against an f64 reference.
 */
import { ErrorCode, RingtrainError } from '../../../src/core/errors.ts';
import type { Gpu } from '../../../src/gpu/gpu.ts';
import { planUnpackF16 } from '../../../src/gpu/kernels/f16.ts';
import type { MatmulShape } from '../../../src/gpu/kernels/matmul.ts';
import { gradcheck, type GradcheckInput } from '../../../src/nn/gradcheck.ts';
import { type LinearAttrs, linearOp } from '../../../src/nn/ops/linear/index.ts';
import {
  chooseF16Variant,
  type F16MatmulVariant,
  halfWords,
  planCastF16,
  planMatmulF16,
} from '../../../src/nn/ops/linear/kernel.ts';
import { linearF16Reference } from '../../../src/nn/ops/linear/reference.ts';
import { draws, type OracleCase, type OracleResult, relErr, scoped, seedOf } from '../../oracles/oracle-case.ts';
import type { OpCase } from '../op-cases.ts';

const s = (...shape: number[]): GradcheckInput => ({ shape });

export const CASES: OpCase[] = [
  { op: linearOp, label: 'x[5,7] W[3,7] b[3]', inputs: [s(5, 7), s(3, 7), s(3)] },
  {
    op: linearOp,
    label: 'x[2,3,8] W[36,8] b[36], fused relu',
    inputs: [s(2, 3, 8), s(36, 8), s(36)],
    attrs: { relu: true },
  },
  { op: linearOp, label: 'x[33,64] W[40,64], no bias (wide/direct shapes)', inputs: [s(33, 64), s(40, 64)] },
];

/*
 * The f16-mixed path (--precision f16-mixed; needs 'shader-f16', which lavapipe has and SwiftShader
 * does not): the kernels against an f64 reference of f16-rounded operands, to f32 rounding; the op
 * against its (f32) oracle to f16's rounding; overflow raising the flag. On an adapter without the
 * feature each case checks the refusal instead.
 */
const { rand } = draws('linear');

/** Runs `work` where the adapter has shader-f16; elsewhere requires planning to refuse, naming the feature. */
async function withF16(gpu: Gpu, work: () => Promise<OracleResult>): Promise<OracleResult> {
  if (gpu.hasShaderF16) return work();
  try {
    planCastF16(gpu, gpu.dummy, gpu.dummy, 1, gpu.dummy);
  } catch (err) {
    const named = err instanceof RingtrainError && err.code === ErrorCode.InvalidArgument;
    return { maxAbsErr: named && /shader-f16/.test(err.message) ? 0 : Infinity, tol: 0 };
  }
  return { maxAbsErr: Infinity, tol: 0 };
}

type F16Shape = MatmulShape & { bias?: boolean; relu?: boolean; variant?: F16MatmulVariant };

const describe = (s: F16Shape) =>
  `${s.variant ?? 'chosen'} ${s.transA ? 'Aᵀ' : 'A'}·${s.transB ? 'Bᵀ' : 'B'}${s.bias ? '+bias' : ''}${s.relu ? ' relu' : ''} m=${s.m} n=${s.n} k=${s.k}`;

/** A and B cast to f16 on the GPU, then matmulF16 (the forced or the chosen program): against the f64 product of the f16-rounded operands. */
function f16MatmulCase(s: F16Shape): OracleCase {
  return {
    name: `matmulF16 ${describe(s)}`,
    run: (gpu) =>
      withF16(gpu, () =>
        scoped(gpu, async (t) => {
          const [a, b, bias] = [rand(s.m * s.k, 2), rand(s.k * s.n, 2), rand(s.n)];
          const [a16, b16] = [t(gpu.storage(halfWords(a.length))), t(gpu.storage(halfWords(b.length)))];
          const [flag, c] = [t(gpu.storage(1)), t(gpu.storage(s.m * s.n))];
          gpu.record([
            planCastF16(gpu, t(gpu.upload(a)), a16, a.length, flag),
            planCastF16(gpu, t(gpu.upload(b)), b16, b.length, flag),
            planMatmulF16(gpu, a16, b16, c, { ...s, bias: s.bias ? t(gpu.upload(bias)) : undefined }),
          ]);
          // As x [m, k] and W [n, k]: the reference's layout.
          const x = s.transA ? transpose(a, s.k, s.m) : a;
          const w = s.transB ? b : transpose(b, s.k, s.n);
          const want = linearF16Reference(x, w, s.bias ? bias : null, s.m, s.k, s.n).map((v) =>
            s.relu ? Math.max(v, 0) : v,
          );
          const [flagged] = await gpu.readU32(flag, 0, 1);
          const err = relErr(await gpu.readF32(c, 0, s.m * s.n), want);
          return { maxAbsErr: flagged === 0 ? err : Infinity, tol: 2e-7 * s.k + 2e-6 };
        }),
      ),
  };
}

/**
 * Every program on the same f16 operands: the same bits as matmul_f16.wgsl ('direct'), since each sums an
 * entry's exact f32 products over k in the same order. The error is the number of words that differ.
 */
function f16SameBitsCase(s: F16Shape, variants: F16MatmulVariant[]): OracleCase {
  return {
    name: `matmulF16 ${variants.join(', ')} bitwise equal to direct: ${describe(s)}`,
    run: (gpu) =>
      withF16(gpu, () =>
        scoped(gpu, async (t) => {
          const [a, b, bias] = [rand(s.m * s.k, 2), rand(s.k * s.n, 2), rand(s.n)];
          const [a16, b16, flag] = [
            t(gpu.storage(halfWords(a.length))),
            t(gpu.storage(halfWords(b.length))),
            t(gpu.storage(1)),
          ];
          const biasBuf = s.bias ? t(gpu.upload(bias)) : undefined;
          const outs = (['direct', ...variants] as const).map(() => t(gpu.storage(s.m * s.n)));
          gpu.record([
            planCastF16(gpu, t(gpu.upload(a)), a16, a.length, flag),
            planCastF16(gpu, t(gpu.upload(b)), b16, b.length, flag),
            ...(['direct', ...variants] as const).map((variant, i) =>
              planMatmulF16(gpu, a16, b16, outs[i], { ...s, bias: biasBuf, variant }),
            ),
          ]);
          const want = await gpu.readU32(outs[0], 0, s.m * s.n);
          let differ = 0;
          for (const out of outs.slice(1)) {
            const got = await gpu.readU32(out, 0, s.m * s.n);
            for (let i = 0; i < got.length; i++) if (got[i] !== want[i]) differ++;
          }
          return { maxAbsErr: differ, tol: 0 };
        }),
      ),
  };
}

/** The table's choice by adapter kind and shape (the words transformer's products at batch 256), and a forced wide program refused on a shape it cannot take. */
const f16ChoiceCase: OracleCase = {
  name: 'matmulF16 program by adapter and shape',
  run: async () => {
    const cpu = { info: { isFallbackAdapter: true } } as Gpu;
    const gpuLike = { info: { isFallbackAdapter: false } } as Gpu;
    const picks: [Gpu, F16Shape, F16MatmulVariant][] = [
      [cpu, { m: 8192, n: 192, k: 64, transB: true }, 'wide'], // qkv forward
      [cpu, { m: 192, n: 64, k: 8192, transA: true }, 'wide'], // its dW
      [cpu, { m: 8192, n: 64, k: 192 }, 'wide'], // its dx
      [cpu, { m: 8192, n: 27, k: 64, transB: true }, 'direct'], // a 27-token head: n not a multiple of 4
      [cpu, { m: 64, n: 64, k: 8192, transA: true }, 'wide'], // 4 blocks: f16 has no split over K
      [cpu, { m: 16, n: 128, k: 512 }, 'direct'], // m < 32
      [gpuLike, { m: 8192, n: 192, k: 64, transB: true }, 'tiled'],
      [gpuLike, { m: 7, n: 5, k: 3 }, 'tiled'],
    ];
    const wrong = picks.filter(([g, s, want]) => chooseF16Variant(g, s) !== want).length;
    let refused = false;
    try {
      chooseF16Variant(cpu, { m: 64, n: 30, k: 64, variant: 'wide' });
    } catch (err) {
      refused = err instanceof RingtrainError && err.code === ErrorCode.InvalidArgument && /n=30/.test(err.message);
    }
    return { maxAbsErr: wrong + (refused ? 0 : 1), tol: 0 };
  },
};

function transpose(v: Float32Array, rows: number, cols: number): Float32Array {
  const out = new Float32Array(v.length);
  for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) out[c * rows + r] = v[r * cols + c];
  return out;
}

/** Values past f16's range, infinities and NaN: the flag rises, the stored halves are clamped (NaN as 0). */
const castOverflowCase: OracleCase = {
  name: 'castF16 overflow: flag raised, values clamped',
  run: (gpu) =>
    withF16(gpu, () =>
      scoped(gpu, async (t) => {
        const src = Float32Array.from([1.5, 7e4, -1e5, Infinity, -Infinity, NaN, 65504, -0.25]);
        const want = [1.5, 65504, -65504, 65504, -65504, 0, 65504, -0.25];
        const [half, back, flag] = [
          t(gpu.storage(halfWords(src.length))),
          t(gpu.storage(src.length)),
          t(gpu.storage(1)),
        ];
        gpu.record([planCastF16(gpu, t(gpu.upload(src)), half, src.length, flag)]);
        gpu.record([planUnpackF16(gpu, half, back, src.length)]);
        const inRange = t(gpu.upload(Float32Array.from([65504, -3, 0.001]))); // at the edge: no flag
        const [half2, flag2] = [t(gpu.storage(2)), t(gpu.storage(1))];
        gpu.record([planCastF16(gpu, inRange, half2, 3, flag2)]);
        const [raised] = await gpu.readU32(flag, 0, 1);
        const [quiet] = await gpu.readU32(flag2, 0, 1);
        const values = relErr(await gpu.readF32(back, 0, src.length), want);
        return { maxAbsErr: raised === 1 && quiet === 0 ? values : Infinity, tol: 0 };
      }),
    ),
};

/** The op with attrs.f16 through the planner: forward and gradients against the f32 oracle, to f16 operand rounding. */
function f16Gradcheck(label: string, inputs: GradcheckInput[], attrs: LinearAttrs): OracleCase {
  const tol = { forward: 5e-3, backward: 5e-3, numeric: 1e-4 };
  return {
    name: `gradcheck linear f16-mixed ${label}`,
    run: (gpu) =>
      withF16(gpu, async () => {
        const r = await gradcheck(gpu, linearOp, inputs, { ...attrs, f16: true }, { seed: seedOf(`f16 ${label}`) });
        return {
          maxAbsErr: Math.max(r.forward / tol.forward, r.backward / tol.backward, r.numeric / tol.numeric),
          tol: 1,
        };
      }),
  };
}

export const ORACLE_CASES: OracleCase[] = [
  f16MatmulCase({ m: 1, n: 1, k: 1 }),
  f16MatmulCase({ m: 7, n: 5, k: 33, transB: true, bias: true }),
  f16MatmulCase({ m: 33, n: 40, k: 64, transB: true, relu: true, bias: true }),
  f16MatmulCase({ m: 40, n: 64, k: 33, transA: true }),
  f16MatmulCase({ m: 33, n: 64, k: 40 }),
  f16MatmulCase({ m: 129, n: 130, k: 257, transB: true }),
  // The wide program (CPU adapters' choice at these shapes): every transpose, the epilogue, edge blocks shifted back.
  f16MatmulCase({ m: 33, n: 40, k: 64, transB: true, relu: true, bias: true, variant: 'wide' }),
  f16MatmulCase({ m: 40, n: 36, k: 33, transA: true, variant: 'wide' }),
  f16MatmulCase({ m: 65, n: 68, k: 40, variant: 'wide' }),
  // The tiled program (GPUs' choice): any shape, partial tiles of 64 and of K's 16.
  f16MatmulCase({ m: 1, n: 1, k: 1, variant: 'tiled' }),
  f16MatmulCase({ m: 7, n: 5, k: 33, transB: true, bias: true, relu: true, variant: 'tiled' }),
  f16MatmulCase({ m: 65, n: 70, k: 37, transA: true, variant: 'tiled' }),
  f16MatmulCase({ m: 33, n: 66, k: 129, variant: 'tiled' }),
  f16SameBitsCase({ m: 64, n: 96, k: 256, transB: true, bias: true, relu: true }, ['wide', 'tiled']),
  f16SameBitsCase({ m: 96, n: 64, k: 260, transA: true }, ['wide', 'tiled']),
  f16SameBitsCase({ m: 70, n: 64, k: 96 }, ['wide', 'tiled']),
  f16ChoiceCase,
  castOverflowCase,
  f16Gradcheck('x[5,7] W[3,7] b[3]', [s(5, 7), s(3, 7), s(3)], {}),
  f16Gradcheck('x[2,3,8] W[36,8] b[36], fused relu', [s(2, 3, 8), s(36, 8), s(36)], { relu: true }),
  f16Gradcheck('x[33,64] W[40,64], no bias', [s(33, 64), s(40, 64)], {}),
];
