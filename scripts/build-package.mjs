// What `npm pack` (prepack) ships, built from the sources: dist/ holds src/ and
// server/ as JavaScript with .d.ts declarations (tsconfig.build.json), and
// demo/dist the built page. The repository itself never needs this: it runs the
// .ts sources (bin/ringtrain.js, vitest, Deno). `--clean` (postpack) removes
// dist/ again, so that nothing in the repository can run a stale build.
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { writeOpsIndex } from './gen-ops-index.mjs';

const root = dirname(dirname(fileURLToPath(import.meta.url)));
const bin = (name) => join(root, 'node_modules', '.bin', name);

function run(cmd, args) {
  const r = spawnSync(cmd, args, { cwd: root, stdio: 'inherit' });
  if (r.status !== 0)
    throw new Error(`build-package: ${[cmd, ...args].join(' ')} failed (${r.error?.message ?? `exit ${r.status}`})`);
}

function filesUnder(dir) {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? filesUnder(path) : [path];
  });
}

// TypeScript rewrites `./x.ts` to `./x.js` in the JavaScript it emits
// (rewriteRelativeImportExtensions) but keeps `.ts` in declarations, which a
// user's compiler refuses without allowImportingTsExtensions: point them at
// the .d.ts files beside them.
const TS_SPECIFIER = /((?:from\s+|import\()\s*)(['"])(\.{1,2}\/[^'"]*?)\.ts\2/g;

function rewriteDeclarations(dir) {
  let changed = 0;
  for (const file of filesUnder(dir).filter((f) => f.endsWith('.d.ts'))) {
    const text = readFileSync(file, 'utf8');
    const next = text.replace(TS_SPECIFIER, (_m, lead, quote, path) => `${lead}${quote}${path}.js${quote}`);
    if (next !== text) {
      writeFileSync(file, next);
      changed++;
    }
  }
  return changed;
}

rmSync(join(root, 'dist'), { recursive: true, force: true });
if (process.argv.includes('--clean')) process.exit(0);
writeOpsIndex();
run(bin('tsc'), ['-p', 'tsconfig.build.json']);
const rewritten = rewriteDeclarations(join(root, 'dist'));
run(bin('vite'), ['build', 'demo', '--logLevel', 'warn']);
console.log(`build-package: dist/ built (${rewritten} declaration files pointed at .js), demo/dist built`);
