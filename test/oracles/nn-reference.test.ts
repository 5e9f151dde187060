/**
 * The references themselves, on the CPU: every backward against central
 * finite differences of its forward (f64, in the style of
 * torch.autograd.gradcheck), erf against tabulated values, and the clear
 * errors the kernel wrappers raise on bad input. The GPU kernels are checked
 * against these references in each op's test/nn/ops/<op>.cases.ts.
 */
import { describe, expect, it } from 'vitest';
import { ErrorCode, RingtrainError } from '../../src/core/errors.ts';
import { seededUniform } from '../../src/engine/random.ts';
import { broadcastShape } from '../../src/nn/ops/broadcast/kernel.ts';
import { checkTargets } from '../../src/nn/ops/cross-entropy/kernel.ts';
import { checkIds } from '../../src/nn/ops/embedding/kernel.ts';
import { permutedShape } from '../../src/nn/ops/permute/kernel.ts';
import * as nn from './op-references.ts';
import * as tr from './op-references.ts';

function random(n: number, seed: number, scale = 1): Float64Array {
  const u = seededUniform(seed);
  return Float64Array.from({ length: n }, () => (2 * u() - 1) * scale);
}

/**
 * Largest |analytic − numeric| / max(1e-3, |numeric|) over every element of x,
 * where numeric is the central difference of Σ f(x)·dy.
 */
function gradError(
  f: (x: Float64Array) => ArrayLike<number>,
  x: Float64Array,
  dy: ArrayLike<number>,
  analytic: ArrayLike<number>,
  h = 1e-6,
): number {
  const objective = (v: Float64Array) => {
    const y = f(v);
    let s = 0;
    for (let i = 0; i < y.length; i++) s += y[i] * dy[i];
    return s;
  };
  let worst = 0;
  for (let j = 0; j < x.length; j++) {
    const up = x.slice();
    const down = x.slice();
    up[j] += h;
    down[j] -= h;
    const numeric = (objective(up) - objective(down)) / (2 * h);
    worst = Math.max(worst, Math.abs(analytic[j] - numeric) / Math.max(1e-3, Math.abs(numeric)));
  }
  return worst;
}

const TOL = 1e-5;

describe('CPU references: backward = finite differences of forward', () => {
  it('layer norm: input, weight and bias', () => {
    const [rows, cols] = [3, 5];
    const [x, w, b, dy] = [random(rows * cols, 1, 2), random(cols, 2), random(cols, 3), random(rows * cols, 4)];
    const g = nn.layerNormBackwardRef(x, w, dy, rows, cols);
    expect(gradError((v) => nn.layerNormRef(v, w, b, rows, cols).y, x, dy, g.dx)).toBeLessThan(TOL);
    expect(gradError((v) => nn.layerNormRef(x, v, b, rows, cols).y, w, dy, g.dw)).toBeLessThan(TOL);
    expect(gradError((v) => nn.layerNormRef(x, w, v, rows, cols).y, b, dy, g.db)).toBeLessThan(TOL);
  });

  it('GELU (erf)', () => {
    const x = random(50, 5, 6);
    const dy = random(50, 6);
    expect(
      gradError(
        (v) => v.map(nn.geluRef.f),
        x,
        dy,
        Array.from(x, (v, i) => dy[i] * nn.geluRef.df(v)),
      ),
    ).toBeLessThan(TOL);
  });

  it('row softmax', () => {
    const [rows, cols] = [4, 6];
    const [x, dy] = [random(rows * cols, 7, 3), random(rows * cols, 8)];
    expect(
      gradError(
        (v) => nn.softmaxRef(v, rows, cols),
        x,
        dy,
        nn.softmaxBackwardRef(nn.softmaxRef(x, rows, cols), dy, rows, cols),
      ),
    ).toBeLessThan(TOL);
  });

  it('cross-entropy with ignored targets: the gradient of the mean over counted positions', () => {
    const [positions, classes] = [6, 5];
    const logits = random(positions * classes, 9, 3);
    const targets = [0, -1, 4, 2, -1, 1];
    const want = nn.crossEntropyRef(logits, targets, positions, classes);
    expect(want.count).toBe(4);
    expect(
      gradError((v) => [nn.crossEntropyRef(v, targets, positions, classes).loss], logits, [1], want.dlogits),
    ).toBeLessThan(TOL);
    // Ignored rows: no gradient at all.
    expect(Array.from(want.dlogits.subarray(classes, 2 * classes))).toEqual(new Array(classes).fill(0));
  });

  it('embedding: scatter-add of repeated ids', () => {
    const [rows, vocab, dim] = [7, 4, 3];
    const ids = [0, 3, 3, 1, 0, 3, 2];
    const [w, dy] = [random(vocab * dim, 10), random(rows * dim, 11)];
    expect(
      gradError((v) => nn.embeddingRef(ids, v, rows, dim), w, dy, nn.embeddingBackwardRef(ids, dy, rows, vocab, dim)),
    ).toBeLessThan(TOL);
  });

  for (const causal of [true, false]) {
    it(`attention (${causal ? 'causal' : 'full'}): q, k and v through the packed qkv`, () => {
      const s = { batch: 2, T: 4, heads: 2, width: 6, causal };
      const qkv = random(s.batch * s.T * 3 * s.width, 12, 1.5);
      const dy = random(s.batch * s.T * s.width, 13);
      expect(gradError((v) => nn.attentionRef(v, s).y, qkv, dy, nn.attentionBackwardRef(qkv, dy, s))).toBeLessThan(TOL);
    });
  }

  it('causal attention: a position never sees a later one', () => {
    const s = { batch: 1, T: 5, heads: 1, width: 2 };
    const qkv = random(5 * 6, 14);
    const changed = qkv.slice();
    for (let j = 0; j < 6; j++) changed[4 * 6 + j] += 1; // the last position's q, k, v
    const [a, b] = [nn.attentionRef(qkv, s).y, nn.attentionRef(changed, s).y];
    expect(Array.from(a.subarray(0, 8))).toEqual(Array.from(b.subarray(0, 8)));
    expect(a[8]).not.toBe(b[8]);
  });

  it('dropout: backward is forward (same mask), masks differ by step and seed', () => {
    const x = random(64, 15);
    expect(gradError((v) => nn.dropoutRef(v, 0.25, 3, 1), x, x, nn.dropoutRef(x, 0.25, 3, 1))).toBeLessThan(TOL);
    const m = (seed: number, step: number) => Array.from(nn.dropoutMaskRef(1000, 0.25, seed, step)).join('');
    expect(m(3, 1)).toBe(m(3, 1));
    expect(m(3, 1)).not.toBe(m(3, 2));
    expect(m(3, 1)).not.toBe(m(4, 1));
  });

  it('batched matmul: both operands, every transpose, shared operands', () => {
    const shapes: tr.BmmRefShape[] = [
      { batch: 2, m: 3, n: 4, k: 5 },
      { batch: 2, m: 3, n: 2, k: 4, transA: true },
      { batch: 3, m: 2, n: 3, k: 4, transA: true, transB: true, broadcastB: true },
      { batch: 3, m: 2, n: 3, k: 2, transB: true, broadcastA: true },
    ];
    for (const s of shapes) {
      const a = random((s.broadcastA ? 1 : s.batch) * s.m * s.k, 16);
      const b = random((s.broadcastB ? 1 : s.batch) * s.k * s.n, 17);
      const dc = random(s.batch * s.m * s.n, 18);
      const g = tr.bmmBackwardRef(a, b, dc, s);
      expect(
        gradError((v) => tr.bmmRef(v, b, s), a, dc, g.da),
        JSON.stringify(s),
      ).toBeLessThan(TOL);
      expect(
        gradError((v) => tr.bmmRef(a, v, s), b, dc, g.db),
        JSON.stringify(s),
      ).toBeLessThan(TOL);
    }
  });

  it('broadcast add and mul: the reduction is the gradient of each operand', () => {
    const [aShape, bShape] = [
      [2, 1, 4],
      [3, 1],
    ];
    const shape = tr.broadcastShapeRef(aShape, bShape)!;
    expect(shape).toEqual([2, 3, 4]);
    const [a, b, dy] = [random(8, 19), random(3, 20), random(24, 21)];
    expect(
      gradError(
        (v) => tr.broadcastBinaryRef('add', v, aShape, b, bShape, -0.5),
        a,
        dy,
        tr.broadcastReduceRef(dy, shape, aShape),
      ),
    ).toBeLessThan(TOL);
    expect(
      gradError(
        (v) => tr.broadcastBinaryRef('add', a, aShape, v, bShape, -0.5),
        b,
        dy,
        tr.broadcastReduceRef(dy, shape, bShape, -0.5),
      ),
    ).toBeLessThan(TOL);
    expect(
      gradError(
        (v) => tr.broadcastBinaryRef('mul', v, aShape, b, bShape),
        a,
        dy,
        tr.broadcastReduceRef(dy, shape, aShape, 1, { data: b, shape: bShape }),
      ),
    ).toBeLessThan(TOL);
    expect(
      gradError(
        (v) => tr.broadcastBinaryRef('mul', a, aShape, v, bShape),
        b,
        dy,
        tr.broadcastReduceRef(dy, shape, bShape, 1, { data: a, shape: aShape }),
      ),
    ).toBeLessThan(TOL);
  });

  it('permute, slice and concat: the backward maps are their adjoints', () => {
    const shape = [2, 3, 4];
    const x = random(24, 22);
    const perm = [2, 0, 1];
    const dy = random(24, 23);
    const inv = [1, 2, 0];
    expect(
      gradError(
        (v) => tr.permuteRef(v, shape, perm),
        x,
        dy,
        tr.permuteRef(
          dy,
          perm.map((d) => shape[d]),
          inv,
        ),
      ),
    ).toBeLessThan(TOL);
    const dSlice = random(2 * 2 * 4, 24);
    expect(
      gradError((v) => tr.sliceRef(v, shape, 1, 1, 2), x, dSlice, tr.sliceBackwardRef(dSlice, shape, 1, 1, 2)),
    ).toBeLessThan(TOL);
    const [p, q] = [random(2 * 1 * 4, 25), random(2 * 2 * 4, 26)];
    const dCat = random(24, 27);
    const f = (v: Float64Array) =>
      tr.concatRef(
        [
          { data: v, shape: [2, 1, 4] },
          { data: q, shape: [2, 2, 4] },
        ],
        1,
      );
    expect(gradError(f, p, dCat, tr.sliceRef(dCat, shape, 1, 0, 1))).toBeLessThan(TOL);
  });

  it('MSE', () => {
    const [p, t] = [random(9, 28), random(9, 29)];
    expect(gradError((v) => [tr.mseRef(v, t).loss], p, [1], tr.mseRef(p, t).dpred)).toBeLessThan(TOL);
  });
});

describe('erf and GELU against tabulated values', () => {
  it('erf to 1e-13 (tabulated values, both sides of the series/fraction switch)', () => {
    const table: [number, number][] = [
      [0, 0],
      [0.1, 0.1124629160182849],
      [1, 0.8427007929497149],
      [2, 0.9953222650189527],
      [2.4, 0.9993114861033549],
      [2.6, 0.9997639655834707],
      [3.1, 0.9999883513426328],
      [4, 0.9999999845827421],
      [-0.5, -0.5204998778130465],
    ];
    for (const [x, want] of table) expect(Math.abs(nn.erf(x) - want), `erf(${x})`).toBeLessThan(1e-15);
  });
  it('GELU is the erf form, not the tanh approximation: gelu(1) = 0.8413447460685429', () => {
    expect(Math.abs(nn.geluRef.f(1) - 0.8413447460685429)).toBeLessThan(1e-15);
    expect(Math.abs(nn.geluRef.f(-3) - -0.0040496940948901)).toBeLessThan(1e-12);
  });
});

describe('bad input gets a clear error', () => {
  const code = (f: () => unknown) => {
    try {
      f();
    } catch (e) {
      return e instanceof RingtrainError ? `${e.code}: ${e.message}` : String(e);
    }
    return 'no error';
  };
  it('targets: only classes and -1', () => {
    expect(Array.from(checkTargets([0, -1, 2], 3, 3))).toEqual([0, -1, 2]);
    expect(Array.from(checkTargets([0, 1, 2], 3, 3, [1, 0, 1]))).toEqual([0, -1, 2]);
    expect(code(() => checkTargets([0, -2], 2, 3))).toMatch(`${ErrorCode.InvalidArgument}: target 1 is -2`);
    expect(code(() => checkTargets([3], 1, 3))).toMatch(/target 0 is 3; targets must be integers in \[0, 3\) or -1/);
    expect(code(() => checkTargets([0.5], 1, 3))).toMatch(/target 0 is 0.5/);
    expect(code(() => checkTargets([0], 2, 3))).toMatch(/expected 2 targets, got 1/);
  });
  it('token ids: within the vocabulary', () => {
    expect(code(() => checkIds([0, 27], 2, 27))).toMatch(
      `${ErrorCode.InvalidArgument}: token id 1 is 27; ids must be integers in [0, 27)`,
    );
  });
  it('broadcasting and permutations name both shapes', () => {
    expect(code(() => broadcastShape([2, 3], [4, 3], 'add'))).toMatch('add: shapes [2, 3] and [4, 3] do not broadcast');
    expect(code(() => permutedShape([2, 3], [0, 0]))).toMatch(
      'transpose: [0, 0] is not a permutation of the 2 dimensions of [2, 3]',
    );
  });
});
