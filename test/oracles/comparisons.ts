/**
 * Oracle cases that compare several output tensors, each with its own
 * tolerance (conv2d, max-pool, the whole CNN), and the seeded inputs they
 * draw. Plain functions of a Gpu, so vitest (Node) and the Deno runner share
 * them.
 */
import type { Gpu } from '../../src/gpu/gpu.ts';
import { mulberry32 } from '../../src/data/random.ts';
import type { OracleCase, OracleResult } from './oracle-case.ts';

export interface ComparedCase {
  name: string;
  /** Runs the kernel(s) and returns one comparison per output tensor. */
  run(gpu: Gpu): Promise<Comparison[]>;
}

export interface Comparison {
  what: string;
  maxError: number;
  tolerance: number;
  /** Element count compared (a test checks it is the full tensor). */
  count: number;
}

/** Seeded values uniform in [-1, 1]. */
export function seededUniform(count: number, seed: number): Float32Array {
  const random = mulberry32(seed);
  return Float32Array.from({ length: count }, () => random() * 2 - 1);
}

/** Seeded values from {-1, 0, 1}: many exact ties, the hard case for argmax. */
export function seededTies(count: number, seed: number): Float32Array {
  const random = mulberry32(seed);
  return Float32Array.from({ length: count }, () => Math.floor(random() * 3) - 1);
}

export function maxAbsError(gpuValues: Float32Array, cpuValues: Float32Array): number {
  if (gpuValues.length !== cpuValues.length) return Infinity;
  let worst = 0;
  for (let i = 0; i < cpuValues.length; i++) {
    const e = Math.abs(gpuValues[i] - cpuValues[i]);
    if (!(e <= worst)) worst = Number.isNaN(e) ? Infinity : e; // NaN never passes
  }
  return worst;
}

/** A case as the shared oracle list takes it: its worst comparison (relative to its tolerance). */
export function asOracleCase(c: ComparedCase): OracleCase {
  return {
    name: c.name,
    async run(gpu): Promise<OracleResult> {
      const results = await c.run(gpu);
      const badness = (r: Comparison) => (r.tolerance > 0 ? r.maxError / r.tolerance : r.maxError > 0 ? Infinity : 0);
      const worst = results.reduce((a, b) => (badness(b) > badness(a) ? b : a));
      return { maxAbsErr: worst.maxError, tol: worst.tolerance };
    },
  };
}

/** Shape as a label: `{ n: 2, cin: 7 }` → `n2 cin7`. */
export const shapeLabel = (s: object): string =>
  Object.entries(s)
    .map(([k, v]) => `${k}${v}`)
    .join(' ');
