/**
 * Drift checks, no GPU needed: every registered op has a gradcheck case
 * (test/nn/op-cases.ts) and every shader file a KERNELS entry (which warmUp
 * compiles). That every shader is exercised by an oracle case is checked at
 * the end of test/gpu/oracles.test.ts, where the cases run.
 */
import { describe, expect, it } from 'vitest';
import { KERNELS } from '../../src/gpu/kernels/index.ts';
import { registeredOps } from '../../src/nn/op.ts';
import '../../src/nn/ops/index.ts';
import { shaderFiles } from './coverage.ts';
import { OP_CASES } from './op-cases.ts';

describe('coverage', () => {
  it('every registered op has a gradcheck case', () => {
    const names = registeredOps().map((o) => o.name);
    expect(names.length).toBeGreaterThan(5);
    const covered = new Set(OP_CASES.map((c) => c.op.name));
    const missing = names.filter((n) => !covered.has(n));
    expect(missing, `ops without a case in test/nn/op-cases.ts: ${missing.join(', ')}`).toEqual([]);
  });

  it('every shaders/*.wgsl file has a KERNELS entry, and every entry a file', () => {
    const files = shaderFiles();
    const listed = new Set(Object.values(KERNELS).map((k) => k.shader));
    expect(files.filter((f) => !listed.has(f)), 'shader files missing from KERNELS (src/gpu/kernels/index.ts)').toEqual([]);
    expect([...listed].filter((k) => !files.includes(k)), 'KERNELS entries without a shader file').toEqual([]);
  });
});
