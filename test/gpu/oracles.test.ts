/**
 * Every kernel against its CPU oracle, under Node (Dawn). The same cases run under Deno in test/deno, with the few
 * sizes that test a limit of Deno's adapter alone (`OracleCase.runtime`).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { acquireGpu } from '../../src/gpu/device.ts';
import type { Gpu } from '../../src/gpu/gpu.ts';
import { casesFor, ORACLE_CASES } from '../oracles/cases.ts';
import { shaderFiles } from '../nn/coverage.ts';
import { KERNELS } from '../../src/gpu/kernels/index.ts';

describe('oracles (node)', () => {
  let gpu: Gpu;
  /** Shader keys the cases compiled pipelines of: every shaders/*.wgsl file must be among them. */
  const exercised = new Set<string>();
  beforeAll(async () => {
    gpu = await acquireGpu();
    const pipeline = gpu.pipeline.bind(gpu);
    gpu.pipeline = (key, options) => (exercised.add(key), pipeline(key, options));
  });
  afterAll(() => gpu?.destroy());

  it('has cases', () => {
    expect(casesFor(ORACLE_CASES, 'node').length).toBeGreaterThan(50);
  });

  for (const c of casesFor(ORACLE_CASES, 'node')) {
    it(c.name, async () => {
      const { maxAbsErr, tol } = await c.run(gpu);
      expect(maxAbsErr, `${c.name}: max |gpu - cpu| = ${maxAbsErr}, tolerance ${tol}`).toBeLessThanOrEqual(tol);
    });
  }

  // Last in the file: vitest runs a file's tests in order, so every case above has run.
  it('every shaders/*.wgsl file, and every subgroup version of one, is exercised by some oracle case', () => {
    // A shader that needs a feature this adapter lacks (matmul_f16 on SwiftShader) runs under Deno's lavapipe.
    const unsupported = new Set(
      Object.values(KERNELS)
        .filter((k) => k.requires && !gpu.device.features.has(k.requires))
        .map((k) => k.shader),
    );
    const kernels = new Set([...shaderFiles(), ...Object.values(KERNELS).map((k) => k.shader)]);
    const missing = [...kernels].filter((k) => !exercised.has(k) && !unsupported.has(k));
    expect(
      missing,
      `shaders with no oracle case: ${missing.join(', ')}; add a case to test/oracles/ (or the op's test/nn/ops/<op>.cases.ts)`,
    ).toEqual([]);
  });
});
