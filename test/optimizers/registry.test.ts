/**
 * The optimizer registry without a GPU: every optimizer has its test file and a shader that binds
 * what the runner binds, the generated barrel is current, and definitions and settings are
 * checked, with messages that say what to do.
 */
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { OPTIMIZERS_INDEX, renderOptimizersIndex } from '../../scripts/gen-ops-index.mjs';
import { ErrorCode } from '../../src/core/errors.ts';
import {
  defineOptimizer,
  optimizerNamed,
  optimizerNames,
  requireOptimizer,
  resolveSettings,
} from '../../src/optimizers/index.ts';
import { OPTIMIZER_CASE_FILES } from './optimizer-cases.ts';

const shaderText = (name: string) =>
  readFileSync(fileURLToPath(new URL(`../../shaders/${name}.wgsl`, import.meta.url)), 'utf8');

describe('the optimizer registry', () => {
  it('holds sgd and adamw, and every optimizer has its test file test/optimizers/<name>.cases.ts (and back)', () => {
    expect(optimizerNames()).toEqual(expect.arrayContaining(['sgd', 'adamw']));
    expect(Object.keys(OPTIMIZER_CASE_FILES).sort()).toEqual([...optimizerNames()].sort());
    for (const [name, file] of Object.entries(OPTIMIZER_CASE_FILES))
      expect(file.ORACLE_CASES.length, `${name}.cases.ts has no ORACLE_CASES`).toBeGreaterThan(0);
  });

  it('the generated barrel src/optimizers/index.ts is up to date with the files', () => {
    expect(
      readFileSync(OPTIMIZERS_INDEX, 'utf8') === renderOptimizersIndex(),
      'src/optimizers/index.ts is generated and stale; run `node scripts/gen-ops-index.mjs`',
    ).toBe(true);
  });

  for (const name of optimizerNames()) {
    it(`${name}: its shader binds the uniform, param, grad and each state buffer, and its uniform fills the struct`, () => {
      const d = optimizerNamed(name)!;
      expect(existsSync(fileURLToPath(new URL(`../../shaders/${d.shader}.wgsl`, import.meta.url)))).toBe(true);
      const wgsl = shaderText(d.shader);
      const bindings = [...wgsl.matchAll(/@binding\((\d+)\)\s*var<([\w, ]+)>\s*(\w+)/g)];
      expect(bindings.map((b) => Number(b[1]))).toEqual([...Array(3 + d.state.length).keys()]);
      expect(bindings[0][2]).toBe('uniform');
      expect(bindings[2][2]).toBe('storage, read');
      for (const b of bindings.slice(3)) expect(b[2]).toBe('storage, read_write');
      const struct = /struct\s+\w+\s*\{([^}]*)\}/.exec(wgsl)![1];
      const fields = struct.split(',').filter((f) => f.trim() !== '');
      const defaults = resolveSettings(d, {}, name);
      expect(d.uniform(defaults, 1)).toHaveLength(fields.length);
      expect(d.uniform(defaults, 1).every(Number.isFinite)).toBe(true);
    });
  }

  it('resolves settings with their defaults and refuses what the optimizer does not read or allow', () => {
    const sgd = requireOptimizer('sgd', 'test');
    expect(resolveSettings(sgd, { lr: 0.1 }, 'optim.SGD')).toEqual({ lr: 0.1, momentum: 0.9, weightDecay: 0 });
    expect(() => resolveSettings(sgd, { betas: [0.9, 0.99] }, 'optim.SGD')).toThrow(
      /optim\.SGD takes lr, momentum, weightDecay; it does not read betas/,
    );
    expect(() => resolveSettings(sgd, { momentum: 1.5 }, 'optim.SGD')).toThrow(/momentum must be a number in \[0, 1\]/);
    const adamw = requireOptimizer('adamw', 'test');
    expect(() => resolveSettings(adamw, { betas: [0.9] }, 'optim.AdamW')).toThrow(
      /betas must be a pair of numbers, each in \[0, 1\], got \[0\.9\]/,
    );
    expect(() => requireOptimizer('adam', 'train')).toThrow(
      expect.objectContaining({
        code: ErrorCode.InvalidArgument,
        message: expect.stringMatching(/unknown optimizer "adam"; use one of .*adamw/),
      }),
    );
  });

  it('refuses a definition without lr or weightDecay, a bad default and a second one under a taken name', () => {
    const base = {
      className: 'Test',
      summary: 'test',
      shader: 'sgd',
      state: ['velocity'],
      uniform: () => [0, 0, 0],
    };
    const lr = { default: 0.1, min: 0, max: 1, help: 'lr' };
    expect(() => defineOptimizer({ ...base, name: 'no-decay', settings: { lr } })).toThrow(
      /every optimizer takes 'weightDecay'/,
    );
    expect(() =>
      defineOptimizer({ ...base, name: 'bad-default', settings: { lr: { ...lr, default: 2 }, weightDecay: lr } }),
    ).toThrow(/lr must be a number in \[0, 1\], got 2/);
    expect(() => defineOptimizer({ ...base, name: 'Upper', settings: { lr, weightDecay: lr } })).toThrow(/lower-case/);
    expect(() => defineOptimizer({ ...base, name: 'sgd', settings: { lr, weightDecay: lr } })).toThrow(
      /an optimizer of this name is already defined/,
    );
    expect(optimizerNames()).not.toContain('no-decay');
  });
});
