/**
 * Attention, causal and full (src/nn/ops/attention): gradchecks against the
 * f64 oracle and finite differences, and the kernels (output, probabilities,
 * the packed qkv gradient, with and without ACCUMULATE) against the f64
 * reference, up to the transformer workload's shape.
 */
import type { GradcheckInput } from '../../../src/nn/gradcheck.ts';
import { attentionOp } from '../../../src/nn/ops/attention/index.ts';
import {
  planAttentionBackward,
  planAttentionForward,
  type AttentionShape,
} from '../../../src/nn/ops/attention/kernel.ts';
import { attentionBackwardRef, attentionRef } from '../../../src/nn/ops/attention/reference.ts';
import { planTiledAttentionBackward, planTiledAttentionForward } from '../../../src/nn/ops/attention/tiled-kernel.ts';
import { draws, type OracleCase, plus, relErr, scoped } from '../../oracles/oracle-case.ts';
import type { OpCase } from '../op-cases.ts';

const s = (...shape: number[]): GradcheckInput => ({ shape });

export const CASES: OpCase[] = [
  { op: attentionOp, label: 'qkv[2,5,24] 2 heads causal', inputs: [s(2, 5, 24)], attrs: { heads: 2 } },
  { op: attentionOp, label: 'qkv[1,4,18] 3 heads full', inputs: [s(1, 4, 18)], attrs: { heads: 3, causal: false } },
  // From T = 128 the op plans the tiled kernels (the last tile of 16 only partly filled at T = 131).
  { op: attentionOp, label: 'qkv[1,131,24] 2 heads causal (tiled)', inputs: [s(1, 131, 24)], attrs: { heads: 2 } },
  {
    op: attentionOp,
    label: 'qkv[1,128,36] 3 heads full (tiled)',
    inputs: [s(1, 128, 36)],
    attrs: { heads: 3, causal: false },
  },
];

const { rand } = draws('attention');

/**
 * [shape, accumulate, the one runtime that runs it]. Two sizes are there for a limit of Mesa's llvmpipe alone, its
 * loop cap (kernel.ts), and run under Deno, whose adapter that is; under Node the same kernels run the other shapes.
 * Under Dawn's SwiftShader they were the slowest cases: 43 s of the 418 s of every case, at a load average near 17.
 */
type Shape = [AttentionShape, boolean, 'deno'?];
const attentionShapes: Shape[] = [
  [{ batch: 1, T: 1, heads: 1, width: 1 }, false],
  [{ batch: 2, T: 5, heads: 2, width: 8 }, true],
  [{ batch: 2, T: 5, heads: 2, width: 8, causal: false }, false],
  [{ batch: 3, T: 7, heads: 3, width: 12 }, false],
  // The transformer workload's shape per sample (it trains at batch 256; the kernels index samples alike).
  [{ batch: 16, T: 32, heads: 4, width: 64 }, false],
  // The longest row lavapipe runs whole at heads of 64 (its 65,535-iteration loop cap; kernel.ts refuses longer).
  [{ batch: 1, T: 480, heads: 1, width: 64 }, false, 'deno'],
];
const ROW_ORACLE_CASES: OracleCase[] = attentionShapes.map(([s, accumulate, runtime]) => ({
  runtime,
  name: `attention ${s.causal === false ? 'full' : 'causal'} batch=${s.batch} T=${s.T} heads=${s.heads} width=${s.width}${accumulate ? ' (accumulate)' : ''}`,
  run: (gpu) =>
    scoped(gpu, async (t) => {
      const nq = s.batch * s.T * 3 * s.width;
      const ny = s.batch * s.T * s.width;
      const np = s.batch * s.heads * s.T * s.T;
      const [qkv, dy, d0] = [rand(nq, 2), rand(ny), rand(nq)];
      const [qb, y, probs, dscores, dqkv] = [
        t(gpu.upload(qkv)),
        t(gpu.storage(ny)),
        t(gpu.storage(np)),
        t(gpu.storage(np)),
        t(accumulate ? gpu.upload(d0) : gpu.storage(nq)),
      ];
      gpu.record([
        planAttentionForward(gpu, s, { qkv: qb, y, probs }),
        ...planAttentionBackward(gpu, s, { qkv: qb, probs, dy: t(gpu.upload(dy)), dscores, dqkv }, accumulate),
      ]);
      const want = attentionRef(qkv, s);
      const dWant = attentionBackwardRef(qkv, dy, s);
      return {
        maxAbsErr: Math.max(
          relErr(await gpu.readF32(y, 0, ny), want.y),
          relErr(await gpu.readF32(probs, 0, np), want.probs),
          relErr(await gpu.readF32(dqkv, 0, nq), accumulate ? plus(dWant, d0) : dWant),
        ),
        tol: 2e-5,
      };
    }),
}));

// The tiled kernels, from shapes smaller than a tile to GPT-2's context (T = 1024 at heads of 64, which
// the row kernel cannot run on lavapipe): output, the row log-sum-exp and the packed qkv gradient.
const tiledShapes: Shape[] = [
  [{ batch: 1, T: 1, heads: 1, width: 1 }, false],
  [{ batch: 2, T: 5, heads: 2, width: 8 }, true],
  [{ batch: 2, T: 37, heads: 2, width: 40, causal: false }, false],
  [{ batch: 3, T: 48, heads: 3, width: 12 }, false],
  [{ batch: 1, T: 200, heads: 2, width: 128 }, true],
  [{ batch: 1, T: 1024, heads: 1, width: 64 }, false, 'deno'],
];
const TILED_ORACLE_CASES: OracleCase[] = tiledShapes.map(([s, accumulate, runtime]) => ({
  runtime,
  name: `attention tiled ${s.causal === false ? 'full' : 'causal'} batch=${s.batch} T=${s.T} heads=${s.heads} width=${s.width}${accumulate ? ' (accumulate)' : ''}`,
  run: (gpu) =>
    scoped(gpu, async (t) => {
      const nq = s.batch * s.T * 3 * s.width;
      const ny = s.batch * s.T * s.width;
      const rows = s.batch * s.heads * s.T;
      const [qkv, dy, d0] = [rand(nq, 2), rand(ny), rand(nq)];
      const [qb, y, lse, delta, dqkv] = [
        t(gpu.upload(qkv)),
        t(gpu.storage(ny)),
        t(gpu.storage(rows)),
        t(gpu.storage(rows)),
        t(accumulate ? gpu.upload(d0) : gpu.storage(nq)),
      ];
      gpu.record([
        planTiledAttentionForward(gpu, s, { qkv: qb, y, lse }),
        ...planTiledAttentionBackward(gpu, s, { qkv: qb, y, lse, dy: t(gpu.upload(dy)), delta, dqkv }, accumulate),
      ]);
      const want = attentionRef(qkv, s);
      const dWant = attentionBackwardRef(qkv, dy, s);
      return {
        maxAbsErr: Math.max(
          relErr(await gpu.readF32(y, 0, ny), want.y),
          relErr(await gpu.readF32(lse, 0, rows), want.lse),
          relErr(await gpu.readF32(dqkv, 0, nq), accumulate ? plus(dWant, d0) : dWant),
        ),
        tol: 2e-5,
      };
    }),
}));

export const ORACLE_CASES: OracleCase[] = [...ROW_ORACLE_CASES, ...TILED_ORACLE_CASES];
