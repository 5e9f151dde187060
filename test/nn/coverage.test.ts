/**
 * Drift checks, no GPU needed: every registered op has a gradcheck case
 * (the op's test/nn/ops/<op>.cases.ts, gathered by test/nn/op-cases.ts) and
 * every op folder its test file, the generated ops barrel is what the op
 * folders give now, every op folder exports only ops, functional forms and
 * layers, and every shader file has a registered kernel (which warmUp
 * compiles). That every shader is exercised by
 * an oracle case is checked at the end of test/gpu/oracles.test.ts, where the
 * cases run.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { OPS_INDEX, opFolders, renderOpsIndex } from '../../scripts/gen-ops-index.mjs';
import { KERNELS } from '../../src/gpu/kernels/index.ts';
import { F } from '../../src/nn/functional.ts';
import { Module } from '../../src/nn/module.ts';
import { registeredOps } from '../../src/nn/op.ts';
import * as ops from '../../src/nn/ops/index.ts';
import { importsOf, shaderFiles, shaderParts } from './coverage.ts';
import { shaderFileOf } from '../../src/gpu/shaders.ts';
import { caseName, OP_CASES } from './op-cases.ts';

const CASES_DIR = fileURLToPath(new URL('./ops/', import.meta.url));

describe('coverage', () => {
  it('every registered op has a gradcheck case', () => {
    const names = registeredOps().map((o) => o.name);
    expect(names.length).toBeGreaterThan(5);
    const covered = new Set(OP_CASES.map(caseName));
    const missing = names.filter((n) => !covered.has(n));
    expect(missing, `ops without a gradcheck (add test/nn/ops/<op>.cases.ts): ${missing.join(', ')}`).toEqual([]);
  });

  it('every op folder has its test file test/nn/ops/<op>.cases.ts, and every test file an op folder', () => {
    // A composition (rmsnorm) registers no op of its own, so the gradcheck
    // check above cannot see that its cases are missing; the file names can.
    const folders = opFolders();
    const files = readdirSync(CASES_DIR)
      .filter((f) => f.endsWith('.cases.ts'))
      .map((f) => f.slice(0, -'.cases.ts'.length));
    expect(
      folders.filter((f) => !files.includes(f)),
      'op folders without their test file test/nn/ops/<op>.cases.ts (its gradchecks and oracle cases)',
    ).toEqual([]);
    expect(
      files.filter((f) => !folders.includes(f)),
      'test/nn/ops/*.cases.ts files named after no op folder under src/nn/ops/',
    ).toEqual([]);
  });

  it('the generated barrel src/nn/ops/index.ts is up to date with the op folders', () => {
    // Tools run outside npm's scripts (npx vitest, npx tsc, an editor) read the
    // barrel as it is on disk: after an op folder is added or removed it is stale
    // until the generator runs again.
    const folders = opFolders();
    expect(folders.length).toBeGreaterThan(5);
    const barrel = readFileSync(OPS_INDEX, 'utf8');
    const missing = folders.filter((f) => !barrel.includes(`export * from './${f}/index.ts';`));
    const run = 'run `node scripts/gen-ops-index.mjs` (npm runs it on install and before test and start)';
    expect(
      missing,
      `src/nn/ops/index.ts is generated and stale: it lacks the op folders ${missing.join(', ')}; ${run}`,
    ).toEqual([]);
    expect(
      barrel === renderOpsIndex(),
      `src/nn/ops/index.ts is generated and stale (it differs from what the op folders give); ${run}`,
    ).toBe(true);
  });

  it('op folders export ops, functional forms (all in nn.F) and layers, nothing else', () => {
    const odd = Object.entries(ops).filter(([name, v]) => {
      if (typeof v === 'function') return /^[A-Z]/.test(name) ? !(v.prototype instanceof Module) : !(name in F);
      return !(typeof v === 'object' && v !== null && 'cpu' in v && 'plan' in v);
    });
    expect(
      odd.map(([name]) => name),
      'exports of src/nn/ops/*/index.ts that are neither an op, a functional form nor a layer (export helpers from kernel.ts or reference.ts)',
    ).toEqual([]);
    expect(Object.keys(F).length).toBeGreaterThan(20);
  });

  it('every shaders/*.wgsl file has a registered kernel, and every kernel a file', () => {
    const files = shaderFiles();
    const listed = new Set(Object.values(KERNELS).map((k) => shaderFileOf(k.shader)));
    expect(
      files.filter((f) => !listed.has(f)),
      'shader files no defineKernel names (src/gpu/kernels/*.ts, src/nn/ops/*/kernel.ts)',
    ).toEqual([]);
    expect(
      [...listed].filter((k) => !files.includes(k)),
      'KERNELS entries without a shader file',
    ).toEqual([]);
  });

  it('every shader part is imported, and each flavour of a part has its plain part', () => {
    const parts = shaderParts();
    const imported = new Set([...shaderFiles(), ...parts].flatMap(importsOf));
    const plain = parts.filter((p) => !p.endsWith('.subgroups'));
    expect(
      plain.filter((p) => !imported.has(p)),
      'parts no shader imports',
    ).toEqual([]);
    expect(
      parts.filter((p) => p.endsWith('.subgroups') && !plain.includes(p.slice(0, -'.subgroups'.length))),
      'subgroup flavours without a plain part',
    ).toEqual([]);
    expect(parts.length).toBeGreaterThan(0);
  });
});
