import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { importsOf, parseLayerRules, sourceFiles, violations } from './import-rules.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const rules = parseLayerRules(fs.readFileSync(path.join(root, 'docs/ARCHITECTURE.md'), 'utf8'));

describe('the layer table of docs/ARCHITECTURE.md', () => {
  it('is read as rules for every folder it lists', () => {
    expect([...rules.keys()]).toEqual(
      expect.arrayContaining([
        'src/core',
        'src/gpu',
        'src/nn',
        'src/engine',
        'src/comm',
        'src/collectives',
        'src/distributed/api',
        'src/distributed/train',
        'src/distributed/robust',
        'src/distributed/session',
        'src/distributed/observe',
        'src/distributed/reduce',
        'src/cli',
        'server',
        'demo',
      ]),
    );
    expect([...rules.get('src/core')!]).toEqual([]);
    expect([...rules.get('src/gpu')!]).toEqual(['src/core', 'src/optimizers']);
    expect(rules.get('server')!.has('src/signaling')).toBe(true);
  });

  it('holds for every import in src, server, deploy and demo', () => {
    const files = sourceFiles(root, ['src', 'server', 'deploy', 'demo']);
    expect(files.length).toBeGreaterThan(100);
    const edges = files.flatMap((f) => importsOf(f, fs.readFileSync(path.join(root, f), 'utf8')));
    const found = violations(rules, edges).map(
      (v) => `${v.from} imports ${v.to}: ${v.fromLayer} may not import ${v.toLayer}`,
    );
    expect(found, found.join('\n')).toEqual([]);
  });

  it('fails on an upward import, naming the file and both layers', () => {
    const edges = importsOf(
      'src/gpu/kernels/x.ts',
      "import { Module } from '../../nn/module.ts';\nexport { y } from '../../core/errors.ts';",
    );
    expect(edges.map((e) => e.to)).toEqual(['src/nn/module.ts', 'src/core/errors.ts']);
    expect(violations(rules, edges)).toEqual([
      { from: 'src/gpu/kernels/x.ts', to: 'src/nn/module.ts', fromLayer: 'src/gpu', toLayer: 'src/nn' },
    ]);
  });

  it('sees dynamic imports with a literal path', () => {
    const edges = importsOf('src/comm/x.ts', "const m = await import('../distributed/train/trainer.ts');");
    expect(violations(rules, edges)).toHaveLength(1);
  });
});
