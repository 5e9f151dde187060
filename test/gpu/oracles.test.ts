/** Every kernel against its CPU oracle, under Node (Dawn). The same cases run under Deno in test/deno. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { acquireGpu } from '../../src/gpu/device.ts';
import type { Gpu } from '../../src/gpu/gpu.ts';
import { ORACLE_CASES } from '../oracles/cases.ts';

describe('oracles (node)', () => {
  let gpu: Gpu;
  beforeAll(async () => {
    gpu = await acquireGpu();
  });
  afterAll(() => gpu?.destroy());

  it('has cases', () => {
    expect(ORACLE_CASES.length).toBeGreaterThan(50);
  });

  for (const c of ORACLE_CASES) {
    it(c.name, async () => {
      const { maxAbsErr, tol } = await c.run(gpu);
      expect(maxAbsErr, `${c.name}: max |gpu - cpu| = ${maxAbsErr}, tolerance ${tol}`).toBeLessThanOrEqual(tol);
    });
  }
});
