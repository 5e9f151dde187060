/**
 * Oracle cases for the generic tensor kernels: batched matmul, broadcasting
 * add/sub/mul with the reductions that give broadcast inputs their gradient,
 * scale, permute / slice / concat (one strided copy) and MSE, against the
 * float64 references in the ops' folders (src/nn/ops/<op>/reference.ts).
 */
import type { Gpu } from '../../src/gpu/gpu.ts';
import { planBmm, type BmmShape } from '../../src/nn/ops/bmm/kernel.ts';
import { broadcastShape, planBroadcastBinary, planBroadcastReduce, planScaleTo, sizeOf } from '../../src/nn/ops/broadcast/kernel.ts';
import { planMseGrad, planMseLoss } from '../../src/nn/ops/mse/kernel.ts';
import { inversePermutation, planConcat, planFill, planTranspose, planWindowCopy } from '../../src/nn/ops/permute/kernel.ts';
import * as ref from './op-references.ts';
import type { OracleCase } from './dense-cases.ts';
import { plus, rand, relErr, scoped } from './nn-cases.ts';

const bmmShapes: BmmShape[] = [
  { batch: 1, m: 1, n: 1, k: 1 },
  { batch: 3, m: 5, n: 7, k: 9 },
  { batch: 4, m: 9, n: 6, k: 5, transA: true },
  { batch: 4, m: 8, n: 17, k: 16, transB: true, accumulate: true },
  { batch: 2, m: 7, n: 3, k: 4, transA: true, transB: true },
  { batch: 5, m: 6, n: 10, k: 12, broadcastB: true, transB: true },
  { batch: 64, m: 32, n: 16, k: 32, broadcastA: true },
];
const bmmCases: OracleCase[] = bmmShapes.map((s) => ({
  name: `bmm ${s.transA ? 'Aᵀ' : 'A'}·${s.transB ? 'Bᵀ' : 'B'} batch=${s.batch} m=${s.m} n=${s.n} k=${s.k}${s.broadcastA ? ' shared A' : ''}${s.broadcastB ? ' shared B' : ''}${s.accumulate ? ' (accumulate)' : ''}`,
  run: (gpu: Gpu) =>
    scoped(gpu, async (t) => {
      const a = rand((s.broadcastA ? 1 : s.batch) * s.m * s.k);
      const b = rand((s.broadcastB ? 1 : s.batch) * s.k * s.n);
      const c0 = rand(s.batch * s.m * s.n);
      const c = t(s.accumulate ? gpu.upload(c0) : gpu.storage(c0.length));
      gpu.record(planBmm(gpu, t(gpu.upload(a)), t(gpu.upload(b)), c, s));
      const want = ref.bmmRef(a, b, s);
      return { maxAbsErr: relErr(await gpu.readF32(c, 0, c0.length), s.accumulate ? plus(want, c0) : want), tol: 2e-7 * s.k + 2e-6 };
    }),
}));

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
      const [a, b, dy, da0, db0] = [rand(sizeOf(aShape)), rand(sizeOf(bShape)), rand(n), rand(sizeOf(aShape)), rand(sizeOf(bShape))];
      const [ab, bb, dyb] = [t(gpu.upload(a)), t(gpu.upload(b)), t(gpu.upload(dy))];
      const out = t(gpu.storage(n));
      const [da, db] = accumulate ? [t(gpu.upload(da0)), t(gpu.upload(db0))] : [t(gpu.storage(a.length)), t(gpu.storage(b.length))];
      const mul = op === 'mul';
      gpu.record([
        planBroadcastBinary(gpu, op, ab, aShape, bb, bShape, out, { alpha }),
        ...planBroadcastReduce(gpu, dyb, shape, da, aShape, { accumulate, other: mul ? { buffer: bb, shape: bShape } : undefined }),
        ...planBroadcastReduce(gpu, dyb, shape, db, bShape, { accumulate, alpha: mul ? 1 : alpha, other: mul ? { buffer: ab, shape: aShape } : undefined }),
      ]);
      const daWant = ref.broadcastReduceRef(dy, shape, aShape, 1, mul ? { data: b, shape: bShape } : undefined);
      const dbWant = ref.broadcastReduceRef(dy, shape, bShape, mul ? 1 : alpha, mul ? { data: a, shape: aShape } : undefined);
      return {
        maxAbsErr: Math.max(
          relErr(await gpu.readF32(out, 0, n), ref.broadcastBinaryRef(op, a, aShape, b, bShape, alpha)),
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
      return { maxAbsErr: relErr(await gpu.readF32(out, 0, n), Array.from(x, (v) => 2 * v)), tol: 1e-6 };
    }),
}));

const permuteCases: OracleCase[] = ([[[5], [0]], [[2, 3, 4, 5], [0, 2, 1, 3]], [[2, 3, 4, 5], [3, 1, 0, 2]], [[16, 32, 12], [0, 2, 1]]] as [number[], number[]][]).map(([shape, perm]) => ({
  name: `transpose [${shape}] by [${perm}], and back (accumulate)`,
  run: (gpu: Gpu) =>
    scoped(gpu, async (t) => {
      const n = sizeOf(shape);
      const x = rand(n);
      const [y, back] = [t(gpu.storage(n)), t(gpu.upload(x))];
      // back = x + permute⁻¹(permute(x)) = 2x.
      gpu.record([planTranspose(gpu, t(gpu.upload(x)), shape, perm, y), planTranspose(gpu, y, perm.map((d) => shape[d]), inversePermutation(perm), back, true)]);
      return { maxAbsErr: Math.max(relErr(await gpu.readF32(y, 0, n), ref.permuteRef(x, shape, perm)), relErr(await gpu.readF32(back, 0, n), Array.from(x, (v) => 2 * v))), tol: 1e-6 };
    }),
}));

const sliceCases: OracleCase[] = ([[[7], 0, 2, 3], [[2, 3, 4, 5], 2, 1, 2], [[4, 6, 5], 0, 3, 1], [[32, 3, 64], 1, 1, 1]] as [number[], number, number, number][]).map(([shape, axis, start, length]) => ({
  name: `slice [${shape}] axis ${axis} [${start}, ${start + length}) and its backward (fill + window write)`,
  run: (gpu: Gpu) =>
    scoped(gpu, async (t) => {
      const n = sizeOf(shape);
      const partN = (n / shape[axis]) * length;
      const [x, dy] = [rand(n), rand(partN)];
      const [part, dx] = [t(gpu.storage(partN)), t(gpu.upload(rand(n)))];
      gpu.record([planWindowCopy(gpu, t(gpu.upload(x)), shape, axis, start, length, part, false), planFill(gpu, dx, n), planWindowCopy(gpu, dx, shape, axis, start, length, t(gpu.upload(dy)), true)]);
      return {
        maxAbsErr: Math.max(relErr(await gpu.readF32(part, 0, partN), ref.sliceRef(x, shape, axis, start, length)), relErr(await gpu.readF32(dx, 0, n), ref.sliceBackwardRef(dy, shape, axis, start, length))),
        tol: 1e-7,
      };
    }),
}));

const concatCases: OracleCase[] = ([[[[2, 3], [2, 5], [2, 1]], 1], [[[3, 4, 2], [1, 4, 2]], 0], [[[2, 2, 3, 1], [2, 2, 3, 4]], 3]] as [number[][], number][]).map(([shapes, axis]) => ({
  name: `concat ${shapes.map((s) => `[${s}]`).join(' ')} on axis ${axis}`,
  run: (gpu: Gpu) =>
    scoped(gpu, async (t) => {
      const parts = shapes.map((shape) => ({ data: rand(sizeOf(shape)), shape }));
      const n = parts.reduce((s, p) => s + p.data.length, 0);
      const out = t(gpu.storage(n));
      gpu.record(planConcat(gpu, parts.map((p) => ({ buffer: t(gpu.upload(p.data)), shape: p.shape })), axis, out));
      return { maxAbsErr: relErr(await gpu.readF32(out, 0, n), ref.concatRef(parts, axis)), tol: 1e-7 };
    }),
}));

const mseCases: OracleCase[] = [1, 7, 10007].map((n) => ({
  name: `mse loss + gradient (scaled by an upstream gradient) n=${n}`,
  run: (gpu: Gpu) =>
    scoped(gpu, async (t) => {
      const [pred, target] = [rand(n, 3), rand(n)];
      const [result, dpred] = [t(gpu.storage(4)), t(gpu.storage(n))];
      const [pb, tb] = [t(gpu.upload(pred)), t(gpu.upload(target))];
      gpu.record([...planMseLoss(gpu, { pred: pb, target: tb, result }, n, 1, (w, l) => t(gpu.storage(w, l))), planMseGrad(gpu, { pred: pb, target: tb, dpred }, n, { gradScale: 0.5, upstream: t(gpu.upload(new Float32Array([-3]))) })]);
      const want = ref.mseRef(pred, target);
      const [loss] = await gpu.readF32(result, 1, 1);
      return { maxAbsErr: Math.max(relErr([loss], [want.loss]), relErr(await gpu.readF32(dpred, 0, n), want.dpred.map((g) => -1.5 * g))), tol: 1e-6 * Math.sqrt(n) + 1e-6 };
    }),
}));

export const TENSOR_CASES: OracleCase[] = [...bmmCases, ...broadcastCases, ...scaleCases, ...permuteCases, ...sliceCases, ...concatCases, ...mseCases];
