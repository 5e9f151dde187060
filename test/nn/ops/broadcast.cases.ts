/**
 * addBroadcast, mul and scale (src/nn/ops/broadcast): gradchecks against the
 * f64 oracle and finite differences, and the kernels (the broadcasting
 * binary op, the reductions that give each input its gradient, scale)
 * against the f64 reference.
 */
import type { Gpu } from '../../../src/gpu/gpu.ts';
import type { GradcheckInput } from '../../../src/nn/gradcheck.ts';
import { addBroadcastOp, mulOp, scaleOp } from '../../../src/nn/ops/broadcast/index.ts';
import {
  broadcastShape,
  planBroadcastBinary,
  planBroadcastReduce,
  planScaleTo,
  sizeOf,
} from '../../../src/nn/ops/broadcast/kernel.ts';
import { broadcastBinaryRef, broadcastReduceRef } from '../../../src/nn/ops/broadcast/reference.ts';
import { draws, type OracleCase, plus, relErr, scoped } from '../../oracles/oracle-case.ts';
import type { OpCase } from '../op-cases.ts';

const s = (...shape: number[]): GradcheckInput => ({ shape });

export const CASES: OpCase[] = [
  { op: addBroadcastOp, label: 'a[2,3,4] + b[3,1]', inputs: [s(2, 3, 4), s(3, 1)] },
  { op: addBroadcastOp, label: 'a[4] − b[2,4] (alpha −1)', inputs: [s(4), s(2, 4)], attrs: { alpha: -1 } },
  { op: mulOp, label: 'a[2,1,4] · b[3,1]', inputs: [s(2, 1, 4), s(3, 1)] },
  { op: scaleOp, label: 'x[3,5] · 0.125', inputs: [s(3, 5)], attrs: { alpha: 0.125 } },
];

const { rand } = draws('broadcast');

/** [op, a shape, b shape, alpha]: forward, then both inputs' gradients (mul: times the other input). */
const broadcastShapes: ['add' | 'mul', number[], number[], number][] = [
  ['add', [1], [1], 1],
  ['add', [2, 3, 4, 5], [4, 1], 1],
  ['add', [7, 3], [7, 3], -1],
  ['mul', [7], [3, 1], 1],
  ['mul', [1, 3, 1, 5], [2, 1, 4, 1], 1],
  ['mul', [64, 32, 16], [32, 16], 1],
  // Long broadcast dimensions: the gradient is reduced in slices, then the slices summed (several, the last one short).
  ['add', [300, 8, 4], [8, 4], 1],
  ['mul', [130, 3, 5], [1, 3, 1], 1],
];
const broadcastCases: OracleCase[] = broadcastShapes.map(([op, aShape, bShape, alpha], i) => ({
  name: `${op}${alpha === -1 ? ' (subtract)' : ''} [${aShape}] with [${bShape}] + both gradients${i % 2 ? ' (accumulate)' : ''}`,
  run: (gpu: Gpu) =>
    scoped(gpu, async (t) => {
      const accumulate = i % 2 === 1;
      const shape = broadcastShape(aShape, bShape);
      const n = sizeOf(shape);
      const [a, b, dy, da0, db0] = [
        rand(sizeOf(aShape)),
        rand(sizeOf(bShape)),
        rand(n),
        rand(sizeOf(aShape)),
        rand(sizeOf(bShape)),
      ];
      const [ab, bb, dyb] = [t(gpu.upload(a)), t(gpu.upload(b)), t(gpu.upload(dy))];
      const out = t(gpu.storage(n));
      const [da, db] = accumulate
        ? [t(gpu.upload(da0)), t(gpu.upload(db0))]
        : [t(gpu.storage(a.length)), t(gpu.storage(b.length))];
      const mul = op === 'mul';
      gpu.record([
        planBroadcastBinary(gpu, op, ab, aShape, bb, bShape, out, { alpha }),
        ...planBroadcastReduce(gpu, dyb, shape, da, aShape, {
          accumulate,
          other: mul ? { buffer: bb, shape: bShape } : undefined,
        }),
        ...planBroadcastReduce(gpu, dyb, shape, db, bShape, {
          accumulate,
          alpha: mul ? 1 : alpha,
          other: mul ? { buffer: ab, shape: aShape } : undefined,
        }),
      ]);
      const daWant = broadcastReduceRef(dy, shape, aShape, 1, mul ? { data: b, shape: bShape } : undefined);
      const dbWant = broadcastReduceRef(
        dy,
        shape,
        bShape,
        mul ? 1 : alpha,
        mul ? { data: a, shape: aShape } : undefined,
      );
      return {
        maxAbsErr: Math.max(
          relErr(await gpu.readF32(out, 0, n), broadcastBinaryRef(op, a, aShape, b, bShape, alpha)),
          relErr(await gpu.readF32(da, 0, a.length), accumulate ? plus(daWant, da0) : daWant),
          relErr(await gpu.readF32(db, 0, b.length), accumulate ? plus(dbWant, db0) : dbWant),
        ),
        tol: 2e-7 * (n / Math.min(a.length, b.length)) + 2e-6,
      };
    }),
}));

const scaleCases: OracleCase[] = [1, 4099].map((n) => ({
  name: `scale into, then accumulate n=${n}`,
  run: (gpu: Gpu) =>
    scoped(gpu, async (t) => {
      const x = rand(n);
      const xb = t(gpu.upload(x));
      const out = t(gpu.storage(n));
      gpu.record([planScaleTo(gpu, 2.5, xb, out, n), planScaleTo(gpu, -0.5, xb, out, n, true)]);
      return {
        maxAbsErr: relErr(
          await gpu.readF32(out, 0, n),
          Array.from(x, (v) => 2 * v),
        ),
        tol: 1e-6,
      };
    }),
}));

export const ORACLE_CASES: OracleCase[] = [...broadcastCases, ...scaleCases];
