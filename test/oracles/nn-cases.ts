/**
 * Oracle cases for the neural-network kernels (layer norm, GELU, softmax,
 * cross-entropy, embedding, attention, dropout), forward and backward, on
 * seeded random inputs against the float64 references in the
 * ops' folders (src/nn/ops/<op>/reference.ts). Runtime-agnostic: vitest runs them under
 * Node, test/deno/run-oracles.ts under Deno.
 *
 * Errors are relative to the largest reference value (at least 1): the
 * kernels sum in f32, so sums over n terms carry about n·2⁻²⁴ relative error;
 * pointwise transcendental functions are not correctly rounded on GPUs (1e-5).
 * Backward kernels also run once with ACCUMULATE (adding into a random
 * gradient) to check that path.
 */
import type { Gpu } from '../../src/gpu/gpu.ts';
import { planAttentionBackward, planAttentionForward, type AttentionShape } from '../../src/nn/ops/attention/kernel.ts';
import { checkTargets, planCrossEntropy } from '../../src/nn/ops/cross-entropy/kernel.ts';
import { dropoutThreshold, planDropoutAdvance, planDropoutBackward, planDropoutForward } from '../../src/nn/ops/dropout/kernel.ts';
import { planEmbeddingBackward, planEmbeddingForward } from '../../src/nn/ops/embedding/kernel.ts';
import { planGeluBackward, planGeluForward } from '../../src/nn/ops/gelu/kernel.ts';
import { planLayerNormBackward, planLayerNormForward } from '../../src/nn/ops/layernorm/kernel.ts';
import { planSoftmaxBackward, planSoftmaxForward } from '../../src/nn/ops/softmax/kernel.ts';
import * as ref from './op-references.ts';
import { seededUniform } from '../../src/engine/random.ts';
import type { OracleCase } from './dense-cases.ts';

let seedCounter = 9001;
export function rand(n: number, scale = 1, offset = 0): Float32Array {
  const u = seededUniform(seedCounter++ * 7919);
  return Float32Array.from({ length: n }, () => (2 * u() - 1) * scale + offset);
}
export function randInts(n: number, below: number): Uint32Array {
  const u = seededUniform(seedCounter++ * 104729);
  return Uint32Array.from({ length: n }, () => Math.floor(u() * below));
}

/** max |got − want| / max(1, max |want|). NaN anywhere counts as Infinity. */
export function relErr(got: ArrayLike<number>, want: ArrayLike<number>): number {
  let scale = 1;
  for (let i = 0; i < want.length; i++) scale = Math.max(scale, Math.abs(want[i]));
  let err = got.length >= want.length ? 0 : Infinity;
  for (let i = 0; i < want.length; i++) {
    const d = Math.abs(got[i] - want[i]);
    err = Math.max(err, Number.isNaN(d) ? Infinity : d / scale);
  }
  return err;
}

export const plus = (a: ArrayLike<number>, b: ArrayLike<number>): Float64Array => Float64Array.from(a, (v, i) => v + b[i]);

/** Runs `work` with a tracker that frees every buffer it made afterwards. */
export async function scoped<T>(gpu: Gpu, work: (t: (b: GPUBuffer) => GPUBuffer) => Promise<T>): Promise<T> {
  const made: GPUBuffer[] = [];
  try {
    return await work((b) => (made.push(b), b));
  } finally {
    for (const b of made) b.destroy();
  }
}

const layerNormCases: OracleCase[] = ([[1, 1, false], [3, 7, true], [129, 64, false], [1000, 33, true], [8192, 64, true]] as [number, number, boolean][]).map(([rows, cols, accumulate]) => ({
  name: `layerNorm forward+backward rows=${rows} cols=${cols}${accumulate ? ' (accumulate)' : ''}`,
  run: (gpu) =>
    scoped(gpu, async (t) => {
      // An offset of 3 checks that the variance does not cancel.
      const [x, w, b, dy] = [rand(rows * cols, 2, 3), rand(cols, 1, 1), rand(cols), rand(rows * cols)];
      const [dx0, dw0, db0] = [rand(rows * cols), rand(cols), rand(cols)];
      const [xb, wb, y, stats] = [t(gpu.upload(x)), t(gpu.upload(w)), t(gpu.storage(rows * cols)), t(gpu.storage(2 * rows))];
      const [dxb, dwb, dbb] = accumulate ? [t(gpu.upload(dx0)), t(gpu.upload(dw0)), t(gpu.upload(db0))] : [t(gpu.storage(rows * cols)), t(gpu.storage(cols)), t(gpu.storage(cols))];
      gpu.record([
        planLayerNormForward(gpu, { rows, cols }, { x: xb, weight: wb, bias: t(gpu.upload(b)), y, stats }),
        ...planLayerNormBackward(gpu, { rows, cols }, { x: xb, weight: wb, stats, dy: t(gpu.upload(dy)), dx: dxb, dweight: dwb, dbias: dbb }, { accumulate, accumulateParams: accumulate }),
      ]);
      const want = ref.layerNormRef(x, w, b, rows, cols);
      const grads = ref.layerNormBackwardRef(x, w, dy, rows, cols);
      const base = (v: Float64Array, v0: Float32Array) => (accumulate ? plus(v, v0) : v);
      const stat = await gpu.readF32(stats, 0, 2 * rows);
      return {
        maxAbsErr: Math.max(
          relErr(await gpu.readF32(y, 0, rows * cols), want.y),
          relErr(stat.filter((_, i) => i % 2 === 0), want.mean),
          relErr(stat.filter((_, i) => i % 2 === 1), want.rstd) / 1e3, // rstd of a 1-wide row is 1/sqrt(eps)
          relErr(await gpu.readF32(dxb, 0, rows * cols), base(grads.dx, dx0)),
          relErr(await gpu.readF32(dwb, 0, cols), base(grads.dw, dw0)) / Math.max(1, rows / 256),
          relErr(await gpu.readF32(dbb, 0, cols), base(grads.db, db0)) / Math.max(1, rows / 256),
        ),
        tol: 2e-5,
      };
    }),
}));

const geluCases: OracleCase[] = ([[1, false], [7, true], [4099, false]] as [number, boolean][]).map(([n, accumulate]) => ({
  name: `gelu (erf) forward+backward n=${n}${accumulate ? ' (accumulate)' : ''}`,
  run: (gpu) =>
    scoped(gpu, async (t) => {
      // [-10, 10] reaches both tails; a few exact points too.
      const x = rand(n, 10).map((v, i) => [0, -1, 1, 5.5, -5.5][i] ?? v);
      const dy = rand(n);
      const dx0 = rand(n);
      const [xb, y, dxb] = [t(gpu.upload(x)), t(gpu.storage(n)), t(accumulate ? gpu.upload(dx0) : gpu.storage(n))];
      gpu.record([planGeluForward(gpu, xb, y, n), planGeluBackward(gpu, xb, t(gpu.upload(dy)), dxb, n, accumulate)]);
      const dx = Float64Array.from(x, (v, i) => dy[i] * ref.geluRef.df(v) + (accumulate ? dx0[i] : 0));
      return { maxAbsErr: Math.max(relErr(await gpu.readF32(y, 0, n), Array.from(x, ref.geluRef.f)), relErr(await gpu.readF32(dxb, 0, n), dx)), tol: 1e-5 };
    }),
}));

const softmaxCases: OracleCase[] = [[1, 1], [7, 33], [129, 10], [64, 513]].map(([rows, cols]) => ({
  name: `softmax forward+backward rows=${rows} cols=${cols}`,
  run: (gpu) =>
    scoped(gpu, async (t) => {
      const x = rand(rows * cols, 20);
      const dy = rand(rows * cols);
      const [y, dx] = [t(gpu.storage(rows * cols)), t(gpu.storage(rows * cols))];
      gpu.record([planSoftmaxForward(gpu, t(gpu.upload(x)), y, rows, cols), planSoftmaxBackward(gpu, y, t(gpu.upload(dy)), dx, rows, cols)]);
      const want = ref.softmaxRef(x, rows, cols);
      return { maxAbsErr: Math.max(relErr(await gpu.readF32(y, 0, rows * cols), want), relErr(await gpu.readF32(dx, 0, rows * cols), ref.softmaxBackwardRef(want, dy, rows, cols))), tol: 1e-5 };
    }),
}));

/** [positions, classes, fraction of targets ignored]; the last one ignores everything (loss 0, zero gradient). */
const crossEntropyCases: OracleCase[] = [[1, 1, 0], [7, 27, 0.3], [8192, 27, 0.4], [5, 3, 1]].map(([positions, classes, ignored]) => ({
  name: `crossEntropy positions=${positions} classes=${classes} ignored≈${ignored * 100}%`,
  run: (gpu) =>
    scoped(gpu, async (t) => {
      const logits = rand(positions * classes, 30);
      const u = seededUniform(positions * 31 + classes);
      const targets = checkTargets(Array.from(randInts(positions, classes), (v) => (u() < ignored ? -1 : v)), positions, classes);
      const [dl, rows, result] = [t(gpu.storage(positions * classes)), t(gpu.storage(3 * positions)), t(gpu.storage(8))];
      gpu.record(planCrossEntropy(gpu, { logits: t(gpu.upload(logits)), targets: t(gpu.upload(targets)), dlogits: dl, rowStats: rows, result }, positions, classes, { outIndex: 4 }));
      const want = ref.crossEntropyRef(logits, targets, positions, classes);
      const [loss, correct, count] = await gpu.readF32(result, 4, 3);
      return {
        maxAbsErr: Math.max(
          relErr([loss], [want.loss]),
          Math.abs(count - want.count),
          Math.abs(correct - want.correct),
          relErr(await gpu.readF32(dl, 0, positions * classes), want.dlogits) * Math.max(1, want.count),
        ),
        tol: 1e-5,
      };
    }),
}));

const embeddingCases: OracleCase[] = ([[7, 3, 5, false], [33, 27, 16, true], [1001, 5, 7, true], [8192, 32, 64, false]] as [number, number, number, boolean][]).map(([rows, vocab, dim, accumulate]) => ({
  name: `embedding gather+scatter rows=${rows} vocab=${vocab} dim=${dim}${accumulate ? ' (accumulate)' : ''}`,
  run: (gpu) =>
    scoped(gpu, async (t) => {
      const ids = randInts(rows, vocab);
      const [w, dy, dw0] = [rand(vocab * dim), rand(rows * dim), rand(vocab * dim)];
      const s = { rows, vocab, dim };
      const idb = t(gpu.upload(ids));
      const [out, dw] = [t(gpu.storage(rows * dim)), t(accumulate ? gpu.upload(dw0) : gpu.storage(vocab * dim))];
      gpu.record([planEmbeddingForward(gpu, s, idb, t(gpu.upload(w)), out), ...planEmbeddingBackward(gpu, s, idb, t(gpu.upload(dy)), dw, accumulate, (n, l) => t(gpu.storage(n, l)))]);
      const dwWant = ref.embeddingBackwardRef(ids, dy, rows, vocab, dim);
      return {
        maxAbsErr: Math.max(relErr(await gpu.readF32(out, 0, rows * dim), ref.embeddingRef(ids, w, rows, dim)), relErr(await gpu.readF32(dw, 0, vocab * dim), accumulate ? plus(dwWant, dw0) : dwWant)),
        tol: 2e-6 * Math.sqrt(rows),
      };
    }),
}));

const attentionShapes: [AttentionShape, boolean][] = [
  [{ batch: 1, T: 1, heads: 1, width: 1 }, false],
  [{ batch: 2, T: 5, heads: 2, width: 8 }, true],
  [{ batch: 2, T: 5, heads: 2, width: 8, causal: false }, false],
  [{ batch: 3, T: 7, heads: 3, width: 12 }, false],
  // The transformer workload's shape per sample (it trains at batch 256; the kernels index samples alike).
  [{ batch: 16, T: 32, heads: 4, width: 64 }, false],
];
const attentionCases: OracleCase[] = attentionShapes.map(([s, accumulate]) => ({
  name: `attention ${s.causal === false ? 'full' : 'causal'} batch=${s.batch} T=${s.T} heads=${s.heads} width=${s.width}${accumulate ? ' (accumulate)' : ''}`,
  run: (gpu) =>
    scoped(gpu, async (t) => {
      const nq = s.batch * s.T * 3 * s.width;
      const ny = s.batch * s.T * s.width;
      const np = s.batch * s.heads * s.T * s.T;
      const [qkv, dy, d0] = [rand(nq, 2), rand(ny), rand(nq)];
      const [qb, y, probs, dscores, dqkv] = [t(gpu.upload(qkv)), t(gpu.storage(ny)), t(gpu.storage(np)), t(gpu.storage(np)), t(accumulate ? gpu.upload(d0) : gpu.storage(nq))];
      gpu.record([planAttentionForward(gpu, s, { qkv: qb, y, probs }), ...planAttentionBackward(gpu, s, { qkv: qb, probs, dy: t(gpu.upload(dy)), dscores, dqkv }, accumulate)]);
      const want = ref.attentionRef(qkv, s);
      const dWant = ref.attentionBackwardRef(qkv, dy, s);
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

const dropoutCases: OracleCase[] = [[1, 0.5], [4099, 0.3], [10007, 0]].map(([n, p]) => ({
  name: `dropout p=${p} n=${n}: mask per (seed, step), forward = backward, kept fraction`,
  run: (gpu) =>
    scoped(gpu, async (t) => {
      const o = { n, p, seed: 1234 };
      const [x, dy] = [rand(n), rand(n)];
      const state = t(gpu.upload(new Uint32Array([4])));
      const [y, dx] = [t(gpu.storage(n)), t(gpu.storage(n))];
      // advance: the step becomes 5, for forward and backward alike.
      gpu.record([planDropoutAdvance(gpu, state), planDropoutForward(gpu, o, state, t(gpu.upload(x)), y), planDropoutBackward(gpu, o, state, t(gpu.upload(dy)), dx)]);
      const [step] = await gpu.readU32(state, 0, 1);
      const got = await gpu.readF32(y, 0, n);
      const kept = ref.dropoutMaskRef(n, p, o.seed, 5).reduce((a, b) => a + b, 0) / n;
      const other = ref.dropoutMaskRef(n, p, o.seed, 6);
      const sameAsNextStep = ref.dropoutMaskRef(n, p, o.seed, 5).every((m, i) => m === other[i]);
      // 6 standard deviations of a binomial fraction.
      const fractionOff = n > 100 ? Math.max(0, Math.abs(kept - (1 - p)) - 6 * Math.sqrt((p * (1 - p)) / n)) : 0;
      return {
        maxAbsErr: Math.max(
          Math.abs(step - 5),
          relErr(got, ref.dropoutRef(x, p, o.seed, 5)),
          relErr(await gpu.readF32(dx, 0, n), ref.dropoutRef(dy, p, o.seed, 5)),
          fractionOff,
          p > 0 && n > 100 && sameAsNextStep ? 1 : 0,
          dropoutThreshold(p) === (p === 0 ? 0 : Math.floor(p * 2 ** 32)) ? 0 : 1,
        ),
        tol: 1e-6,
      };
    }),
}));

export const NN_CASES: OracleCase[] = [...layerNormCases, ...geluCases, ...softmaxCases, ...crossEntropyCases, ...embeddingCases, ...attentionCases, ...dropoutCases];
