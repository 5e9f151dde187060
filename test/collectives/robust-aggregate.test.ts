/**
 * Robust aggregation (src/collectives/robust/robust-aggregate.ts, centered-clip.ts)
 * over memory links against f64 CPU oracles: sizes 1-5 × lengths, every
 * rule; a wild rank is ignored by the median and the trimmed mean and bounded
 * by centered clipping, also through DistributedOptimizer (stand-in model: the
 * optimizer's path is tested).
 */
import { describe, expect, it } from 'vitest';
import { createMemoryRing } from '../../src/comm/rings.ts';
import { clipWeights, CENTERED_CLIP_ROUNDS } from '../../src/collectives/robust/centered-clip.ts';
import {
  aggregateColumns,
  parseAggregation,
  robustAllreduce,
  trimmedCount,
  type Aggregation,
} from '../../src/collectives/robust/robust-aggregate.ts';
import { mulberry32 } from '../../src/core/random.ts';
import { DistributedOptimizer } from '../../src/distributed/api/optimizer.ts';
import type { Model } from '../../src/engine/model.ts';
import type { Optimizer } from '../../src/engine/optimizer.ts';

/** The oracle: per element, sort the ranks' values (NaN last) and apply the rule in f64. */
function oracle(inputs: Float32Array[], a: Aggregation): Float32Array {
  const n = inputs.length;
  const m = inputs[0].length;
  const k = a.rule === 'trimmed-mean' ? Math.floor(a.trim * n + 1e-9) : 0;
  return Float32Array.from({ length: m }, (_, i) => {
    const col = inputs.map((x) => x[i]);
    if (a.rule === 'mean') return col.reduce((s, v) => s + v, 0) / n;
    const key = (v: number) => (Number.isNaN(v) ? Infinity : v);
    col.sort((x, y) => key(x) - key(y));
    if (a.rule === 'median') return n % 2 ? col[(n - 1) / 2] : (col[n / 2 - 1] + col[n / 2]) / 2;
    const kept = col.slice(k, n - k);
    return kept.reduce((s, v) => s + v, 0) / kept.length;
  });
}

/** Centered clipping's oracle in f64: whole-vector deviation norms, median radius unless tau is given, Jacobi rounds. */
function clipOracle(
  inputs: Float32Array[],
  reference: Float32Array | undefined,
  tau: number | undefined,
  rounds = CENTERED_CLIP_ROUNDS,
): Float64Array {
  const n = inputs.length;
  const m = inputs[0].length;
  const v = Float64Array.from({ length: m }, (_, i) => reference?.[i] ?? 0);
  for (let round = 0; round < rounds; round++) {
    const norms = inputs.map((x) => Math.sqrt(x.reduce((s, xi, i) => s + (xi - v[i]) ** 2, 0)));
    const finite = norms.filter(Number.isFinite).sort((a, b) => a - b);
    const h = finite.length >> 1;
    const radius = tau ?? (finite.length % 2 ? finite[h] : (finite[h - 1] + finite[h]) / 2);
    const w = norms.map((d) => (!Number.isFinite(d) ? 0 : d <= radius ? 1 : radius / d));
    const step = Float64Array.from(
      { length: m },
      (_, i) => inputs.reduce((s, x, r) => (w[r] > 0 ? s + w[r] * (x[i] - v[i]) : s), 0) / n,
    );
    for (let i = 0; i < m; i++) v[i] += step[i];
  }
  return v;
}

const RULES: Aggregation[] = [
  parseAggregation('mean'),
  parseAggregation('median'),
  parseAggregation('trimmed-mean:0.25'),
  parseAggregation('trimmed-mean:0.34'),
];

function inputs(size: number, n: number, seed: number): Float32Array[] {
  const r = mulberry32(seed);
  return Array.from({ length: size }, () =>
    Float32Array.from({ length: n }, () => (r() - 0.5) * 10 ** Math.floor(r() * 6 - 3)),
  );
}

describe('robustAllreduce matches the CPU oracle', () => {
  for (const size of [1, 2, 3, 4, 5]) {
    it(`${size} rank(s), lengths 0, 7, 1000, 10000, every rule: the same answer on every rank, equal to the oracle`, async () => {
      for (const n of [0, 7, 1000, 10000]) {
        for (const a of RULES) {
          if (a.rule === 'trimmed-mean' && 2 * trimmedCount(a.trim, size) >= size) continue;
          const comms = createMemoryRing(size);
          const data = inputs(size, n, size * 100 + n);
          const out = await Promise.all(comms.map((c, r) => robustAllreduce(c, data[r], a, { name: 'g' })));
          const want = oracle(data, a);
          for (const [r, o] of out.entries())
            expect(Array.from(o), `rank ${r}, n ${n}, ${a.rule}:${a.trim}`).toEqual(Array.from(want));
          comms.forEach((c) => c.close());
        }
      }
    });
  }
});

describe('centered clipping matches its CPU oracle', () => {
  for (const size of [1, 2, 3, 4, 5]) {
    it(`${size} rank(s), lengths 0, 7, 1000, 10000, from zeros and from a reference, median radius and tau: the same bits on every rank, within f32 rounding of the oracle`, async () => {
      for (const n of [0, 7, 1000, 10000]) {
        const data = inputs(size, n, size * 100 + n + 1);
        const reference = inputs(1, n, n + 7)[0];
        for (const [a, ref] of [
          [parseAggregation('centered-clip'), undefined],
          [parseAggregation('centered-clip'), reference],
          [parseAggregation('centered-clip:0.5'), reference],
        ] as const) {
          const comms = createMemoryRing(size);
          const out = await Promise.all(
            comms.map((c, r) => robustAllreduce(c, data[r], a, { name: 'g', reference: ref })),
          );
          const want = clipOracle(data, ref, a.tau);
          const scale = Math.max(1e-30, ...data.flatMap((x) => Array.from(x, Math.abs)));
          for (const [r, o] of out.entries()) {
            expect(Array.from(o), `rank ${r} against rank 0`).toEqual(Array.from(out[0]));
            let worst = 0;
            for (let i = 0; i < n; i++) worst = Math.max(worst, Math.abs(o[i] - want[i]));
            expect(
              worst / scale,
              `rank ${r}, n ${n}, tau ${a.tau}: the largest error, relative to the largest input`,
            ).toBeLessThanOrEqual(2e-6);
          }
          comms.forEach((c) => c.close());
        }
      }
    });
  }

  it('clip weights: 1 within the radius, radius/norm beyond it, 0 for a non-finite norm; the radius is the median of the finite norms', () => {
    expect(clipWeights([1, 2, 8], undefined)).toEqual([1, 1, 0.25]);
    expect(clipWeights([1, 3, NaN, Infinity], undefined)).toEqual([1, 2 / 3, 0, 0]);
    expect(clipWeights([1, 4], 2)).toEqual([1, 0.5]);
    expect(clipWeights([0, 0, 0], undefined)).toEqual([1, 1, 1]);
  });
});

describe('robust rules ignore a wild rank', () => {
  it('median and trimmed mean of 4 ranks where one sends -20x, NaN or 1e30 stay within the honest values; the mean does not', () => {
    const honest = [
      [1, 2],
      [1.5, 2.5],
      [0.5, 3],
    ];
    for (const wild of [
      [-20, -50],
      [NaN, NaN],
      [1e30, -1e30],
    ]) {
      const rows = Float32Array.from([...honest.flat(), ...wild]);
      const out = new Float32Array(2);
      for (const spec of ['median', 'trimmed-mean:0.25']) {
        aggregateColumns(rows, 4, 2, parseAggregation(spec), out);
        expect(out[0], `${spec} with ${wild}`).toBeGreaterThanOrEqual(0.5);
        expect(out[0]).toBeLessThanOrEqual(1.5);
        expect(out[1]).toBeGreaterThanOrEqual(2);
        expect(out[1]).toBeLessThanOrEqual(3);
      }
      aggregateColumns(rows, 4, 2, parseAggregation('mean'), out);
      expect(out[0] >= 0.5 && out[0] <= 1.5).toBe(false);
    }
  });

  it('refuses malformed rules (F < 0.5 always leaves a rank: 2·floor(F·N) < N)', () => {
    for (const bad of [
      'avg',
      'median:1',
      'trimmed-mean',
      'trimmed-mean:0.5',
      'trimmed-mean:-1',
      'mean:x:y',
      'centered-clip:',
      'centered-clip:0',
      'centered-clip:-1',
      'centered-clip:Infinity',
      'centered-clip:x',
    ]) {
      expect(() => parseAggregation(bad), bad).toThrow(/aggregation/);
    }
    expect(parseAggregation('trimmed-mean:0.25')).toEqual({ rule: 'trimmed-mean', trim: 0.25 });
    expect(parseAggregation('centered-clip')).toEqual({ rule: 'centered-clip', trim: 0 });
    expect(parseAggregation('centered-clip:2.5')).toEqual({ rule: 'centered-clip', trim: 0, tau: 2.5 });
    expect([1, 2, 3, 4, 8].map((n) => trimmedCount(0.25, n))).toEqual([0, 0, 0, 1, 2]);
  });
});

describe('DistributedOptimizer with a robust aggregation', () => {
  /** A stand-in model whose gradients are given and whose written gradients are kept (the optimizer's own logic is what is tested). */
  function stubModel(grads: Float32Array) {
    const written: Float32Array[] = [];
    const model = {
      layout: [{ name: 'w', shape: [grads.length], offset: 0, length: grads.length }],
      readGrads: async () => grads.slice(),
      writeGrads: (g: Float32Array) => void written.push(g.slice()),
    };
    return { model: model as unknown as Model, written };
  }
  const inner = { step: () => {} } as unknown as Optimizer;

  it('median: a rank sending -20× gradients does not move the applied gradient outside the honest ones; mean: it does', async () => {
    const honest = [Float32Array.from([1, 2, 3]), Float32Array.from([1.2, 1.8, 3.3])];
    const wild = Float32Array.from([-20, -40, -60]);
    for (const [spec, robust] of [
      ['median', true],
      ['mean', false],
    ] as const) {
      const comms = createMemoryRing(3);
      const stubs = [...honest, wild].map(stubModel);
      const opts = comms.map(
        (c, r) => new DistributedOptimizer(c, stubs[r].model, inner, { aggregation: parseAggregation(spec) }),
      );
      await Promise.all(opts.map((o) => o.step(0.1)));
      for (const s of stubs) {
        const g = s.written[0];
        for (let i = 0; i < 3; i++)
          expect(
            g[i] >= Math.min(honest[0][i], honest[1][i]) && g[i] <= Math.max(honest[0][i], honest[1][i]),
            `${spec} element ${i}: ${g[i]}`,
          ).toBe(robust);
      }
      comms.forEach((c) => c.close());
    }
  });

  it('centered-clip: a rank sending -20x gradients moves the applied gradient by a bounded amount, closing in on the honest mean as the reference follows it; NaN pulls nowhere', async () => {
    const honest = [
      Float32Array.from([1, 2, 3]),
      Float32Array.from([1.2, 1.8, 3.3]),
      Float32Array.from([0.8, 2.2, 2.7]),
    ];
    const mean = [1, 2, 3];
    const dist = (g: Float32Array) => Math.hypot(...mean.map((x, i) => g[i] - x));
    for (const wild of [Float32Array.from([-20, -40, -60]), Float32Array.from([NaN, 1, 1e30])]) {
      const comms = createMemoryRing(4);
      const stubs = [...honest, wild].map(stubModel);
      const opts = comms.map(
        (c, r) =>
          new DistributedOptimizer(c, stubs[r].model, inner, { aggregation: parseAggregation('centered-clip') }),
      );
      for (let t = 0; t < 3; t++) await Promise.all(opts.map((o) => o.step(0.1)));
      const first = dist(stubs[0].written[0]);
      const last = dist(stubs[0].written[2]);
      // The mean of these four is 4.5 (NaN: not finite) away from the honest mean. From a zero reference
      // three rounds leave about 1/8 of the way (0.47); then the reference follows the honest mean and the
      // wild rank's pull is bounded by the radius (the median deviation): within the honest vectors' own
      // distance from their mean (0.41).
      expect(first, `${wild}: first step`).toBeLessThan(0.6);
      expect(last, `${wild}: third step`).toBeLessThan(0.25);
      expect(last).toBeLessThan(first);
      for (const s of stubs) expect(Array.from(s.written[2])).toEqual(Array.from(stubs[0].written[2]));
      comms.forEach((c) => c.close());
    }
  });

  it('refuses a robust rule with lossy compression', () => {
    const comms = createMemoryRing(1);
    expect(
      () =>
        new DistributedOptimizer(comms[0], stubModel(new Float32Array(2)).model, inner, {
          aggregation: parseAggregation('median'),
          compression: 'fp16',
        }),
    ).toThrow(
      /aggregation 'median' compares every peer's exact gradients; compression 'fp16' sends rounded gradients: drop one/,
    );
    comms.forEach((c) => c.close());
  });
});
