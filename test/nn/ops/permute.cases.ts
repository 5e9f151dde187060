/**
 * permute, slice and concat (src/nn/ops/permute): gradchecks against the f64
 * oracle and finite differences, and the strided-copy kernels against the
 * f64 reference.
 */
import type { Gpu } from '../../../src/gpu/gpu.ts';
import type { GradcheckInput } from '../../../src/nn/gradcheck.ts';
import { concatOp, permuteOp, sliceOp } from '../../../src/nn/ops/permute/index.ts';
import {
  inversePermutation,
  planConcat,
  planFill,
  planTranspose,
  planWindowCopy,
} from '../../../src/nn/ops/permute/kernel.ts';
import { concatRef, permuteRef, sliceBackwardRef, sliceRef } from '../../../src/nn/ops/permute/reference.ts';
import { sizeOfShape } from '../../../src/nn/ops/strides.ts';
import { draws, type OracleCase, relErr, scoped } from '../../oracles/oracle-case.ts';
import type { OpCase } from '../op-cases.ts';

const s = (...shape: number[]): GradcheckInput => ({ shape });

export const CASES: OpCase[] = [
  { op: permuteOp, label: 'x[2,3,4,5] by [0,2,1,3]', inputs: [s(2, 3, 4, 5)], attrs: { perm: [0, 2, 1, 3] } },
  { op: permuteOp, label: 'x[3,4] transposed', inputs: [s(3, 4)], attrs: { perm: [1, 0] } },
  { op: sliceOp, label: 'x[2,9,3] axis 1 [3,7)', inputs: [s(2, 9, 3)], attrs: { axis: 1, start: 3, length: 4 } },
  { op: concatOp, label: '[2,3] [2,1] [2,4] on axis 1', inputs: [s(2, 3), s(2, 1), s(2, 4)], attrs: { axis: 1 } },
];

const { rand } = draws('permute');

const permuteCases: OracleCase[] = (
  [
    [[5], [0]],
    [
      [2, 3, 4, 5],
      [0, 2, 1, 3],
    ],
    [
      [2, 3, 4, 5],
      [3, 1, 0, 2],
    ],
    [
      [16, 32, 12],
      [0, 2, 1],
    ],
  ] as [number[], number[]][]
).map(([shape, perm]) => ({
  name: `transpose [${shape}] by [${perm}], and back (accumulate)`,
  run: (gpu: Gpu) =>
    scoped(gpu, async (t) => {
      const n = sizeOfShape(shape);
      const x = rand(n);
      const [y, back] = [t(gpu.storage(n)), t(gpu.upload(x))];
      // back = x + permute⁻¹(permute(x)) = 2x.
      gpu.record([
        planTranspose(gpu, t(gpu.upload(x)), shape, perm, y),
        planTranspose(
          gpu,
          y,
          perm.map((d) => shape[d]),
          inversePermutation(perm),
          back,
          true,
        ),
      ]);
      return {
        maxAbsErr: Math.max(
          relErr(await gpu.readF32(y, 0, n), permuteRef(x, shape, perm)),
          relErr(
            await gpu.readF32(back, 0, n),
            Array.from(x, (v) => 2 * v),
          ),
        ),
        tol: 1e-6,
      };
    }),
}));

const sliceCases: OracleCase[] = (
  [
    [[7], 0, 2, 3],
    [[2, 3, 4, 5], 2, 1, 2],
    [[4, 6, 5], 0, 3, 1],
    [[32, 3, 64], 1, 1, 1],
  ] as [number[], number, number, number][]
).map(([shape, axis, start, length]) => ({
  name: `slice [${shape}] axis ${axis} [${start}, ${start + length}) and its backward (fill + window write)`,
  run: (gpu: Gpu) =>
    scoped(gpu, async (t) => {
      const n = sizeOfShape(shape);
      const partN = (n / shape[axis]) * length;
      const [x, dy] = [rand(n), rand(partN)];
      const [part, dx] = [t(gpu.storage(partN)), t(gpu.upload(rand(n)))];
      gpu.record([
        planWindowCopy(gpu, t(gpu.upload(x)), shape, axis, start, length, part, false),
        planFill(gpu, dx, n),
        planWindowCopy(gpu, dx, shape, axis, start, length, t(gpu.upload(dy)), true),
      ]);
      return {
        maxAbsErr: Math.max(
          relErr(await gpu.readF32(part, 0, partN), sliceRef(x, shape, axis, start, length)),
          relErr(await gpu.readF32(dx, 0, n), sliceBackwardRef(dy, shape, axis, start, length)),
        ),
        tol: 1e-7,
      };
    }),
}));

const concatCases: OracleCase[] = (
  [
    [
      [
        [2, 3],
        [2, 5],
        [2, 1],
      ],
      1,
    ],
    [
      [
        [3, 4, 2],
        [1, 4, 2],
      ],
      0,
    ],
    [
      [
        [2, 2, 3, 1],
        [2, 2, 3, 4],
      ],
      3,
    ],
  ] as [number[][], number][]
).map(([shapes, axis]) => ({
  name: `concat ${shapes.map((s) => `[${s}]`).join(' ')} on axis ${axis}`,
  run: (gpu: Gpu) =>
    scoped(gpu, async (t) => {
      const parts = shapes.map((shape) => ({ data: rand(sizeOfShape(shape)), shape }));
      const n = parts.reduce((s, p) => s + p.data.length, 0);
      const out = t(gpu.storage(n));
      gpu.record(
        planConcat(
          gpu,
          parts.map((p) => ({ buffer: t(gpu.upload(p.data)), shape: p.shape })),
          axis,
          out,
        ),
      );
      return { maxAbsErr: relErr(await gpu.readF32(out, 0, n), concatRef(parts, axis)), tol: 1e-7 };
    }),
}));

export const ORACLE_CASES: OracleCase[] = [...permuteCases, ...sliceCases, ...concatCases];
