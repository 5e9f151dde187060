/**
 * What an oracle case is (a kernel run on the GPU against an f64 CPU
 * reference, returning its worst error and the tolerance), and the helpers
 * the case files share: the GPU layer's lists here in test/oracles/ and each
 * op's own file, test/nn/ops/<op>.cases.ts. Runtime-agnostic, like the cases:
 * vitest runs them under Node, test/deno/run-oracles.ts under Deno.
 */
import type { Gpu } from '../../src/gpu/gpu.ts';
import type { Reduction } from '../../src/gpu/kernels/common.ts';
import { seededUniform } from '../../src/engine/random.ts';

export interface OracleResult {
  maxAbsErr: number;
  tol: number;
}
export interface OracleCase {
  name: string;
  /**
   * The one runtime whose adapter runs this case, for a size that tests a limit of that adapter alone (lavapipe's
   * loop cap, under Deno); the same kernels run at smaller sizes under both. Absent: both runtimes run it.
   */
  runtime?: 'node' | 'deno';
  run(gpu: Gpu): Promise<OracleResult>;
}

/** The cases that `runtime` runs: every case but those another runtime's adapter runs alone. */
export function casesFor(cases: OracleCase[], runtime: 'node' | 'deno'): OracleCase[] {
  return cases.filter((c) => c.runtime === undefined || c.runtime === runtime);
}

/**
 * A reduction kernel's case once per variant (docs/KERNELS.md, "Subgroups"): `make('workgroup')` under its own
 * name on both runtimes, forced (so Node runs it too), and `make('subgroup')` named `… (subgroups)` under Node
 * alone, whose adapter (Dawn) offers subgroups where Deno's (wgpu) does not.
 */
export function perReduction(make: (reduction: Reduction) => OracleCase): OracleCase[] {
  const sub = make('subgroup');
  return [make('workgroup'), { ...sub, name: `${sub.name} (subgroups)`, runtime: 'node' }];
}

/** A seed from a name (FNV-1a), so that what a name draws does not depend on what else is in the list. */
export function seedOf(name: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 0x01000193) >>> 0;
  return 1000 + (h % 1_000_000);
}

/**
 * Seeded random inputs for one case file, drawn in the order its cases run
 * from a seed of the file's key (the op's name): adding, removing or
 * reordering another file's cases draws none of this file's inputs anew.
 */
export function draws(key: string): {
  rand(n: number, scale?: number, offset?: number): Float32Array;
  randInts(n: number, below: number): Uint32Array;
} {
  let next = seedOf(key);
  return {
    /** n values uniform in [offset − scale, offset + scale]. */
    rand(n, scale = 1, offset = 0) {
      const u = seededUniform(next++ * 7919);
      return Float32Array.from({ length: n }, () => (2 * u() - 1) * scale + offset);
    },
    /** n integers in [0, below). */
    randInts(n, below) {
      const u = seededUniform(next++ * 104729);
      return Uint32Array.from({ length: n }, () => Math.floor(u() * below));
    },
  };
}

/**
 * max |got − want| / max(1, max |want|). NaN anywhere counts as Infinity.
 * Errors relative to the largest reference value: kernels sum in f32, so a
 * sum over n terms carries about n·2⁻²⁴ relative error; pointwise
 * transcendental functions are not correctly rounded on GPUs (1e-5).
 */
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

export const plus = (a: ArrayLike<number>, b: ArrayLike<number>): Float64Array =>
  Float64Array.from(a, (v, i) => v + b[i]);

/** Runs `work` with a tracker that frees every buffer it made afterwards (keeps long oracle runs from piling up memory). */
export async function scoped<T>(gpu: Gpu, work: (t: (b: GPUBuffer) => GPUBuffer) => Promise<T>): Promise<T> {
  const made: GPUBuffer[] = [];
  try {
    return await work((b) => (made.push(b), b));
  } finally {
    for (const b of made) b.destroy();
  }
}
