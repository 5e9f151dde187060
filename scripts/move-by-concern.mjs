#!/usr/bin/env node
/**
 * Issue 36, item 5: src/distributed, src/collectives and src/cli by concern, one folder per
 * concern and each folder a row of docs/ARCHITECTURE.md's layer table. A one-off tool: the
 * lead runs it once on the merged tree, commits what it did, and deletes it.
 *
 *   node scripts/move-by-concern.mjs --plan              what it would do, the folders' imports; changes nothing
 *   node scripts/move-by-concern.mjs [--allow-unplaced]  do it (a clean git tree only)
 *
 * It `git mv`s every file in MOVES, then rewrites every path that named a moved file: relative
 * imports, re-exports, `import()`, `typeof import()`, `new URL('./…', import.meta.url)` and any
 * other relative string that resolves to a file or folder of the repository (in the moved files,
 * relative to where they were), and repository paths in text (`src/cli/main.ts` in tests, bin/,
 * package.json, docs, comments; `dist/src/…js` too). Last it splices the new layer rows
 * (scripts/move-by-concern.layers.md) into docs/ARCHITECTURE.md and checks every import against
 * the new table with test/architecture/import-rules.ts.
 *
 * A file in those folders that MOVES does not name is "unplaced": it is listed with the folder
 * its imports suggest, and the script stops before changing anything unless --allow-unplaced
 * (then it stays where it is, and its imports are still rewritten).
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { MOVES, SPECIAL_EDITS } from './move-by-concern.table.mjs';
import { folderGraph, rewriteText, suggestFolder } from './move-by-concern.rewrite.mjs';
import { spliceLayerTable, widenRows } from './move-by-concern.layers.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const SELF_PREFIX = 'scripts/move-by-concern.';
const ARCHITECTURE = 'docs/ARCHITECTURE.md';
/** The folders whose files are placed by MOVES. */
const PLACED_FOLDERS = ['src/distributed', 'src/collectives', 'src/cli'];
/** Folders of one concern already, which stay: a file added there meanwhile is not unplaced. */
const STAYS = (file) => /^src\/(collectives\/algorithms|distributed\/reduce)\//.test(file);
const USAGE = 'usage: node scripts/move-by-concern.mjs [--plan] [--allow-unplaced]';
/** Where paths are rewritten: every tracked text file here (the root's files by name). */
const REWRITE_DIRS = ['src', 'server', 'test', 'bench', 'demo', 'scripts', 'examples', 'bin', 'deploy', 'docs'];
const REWRITE_ROOT_FILES = [
  'README.md',
  'package.json',
  'vitest.config.ts',
  'tsconfig.json',
  'tsconfig.build.json',
  '.gitignore',
];

const git = (...args) => execFileSync('git', args, { cwd: ROOT, encoding: 'utf8' });
const tracked = (...paths) =>
  git('ls-files', '-z', '--', ...paths)
    .split('\0')
    .filter(Boolean);

function fail(message) {
  console.error(`move-by-concern: ${message}`);
  process.exit(1);
}

/** The table against the tree: which moves apply, which name files that are gone, which files are unplaced. */
function survey() {
  const present = new Set(tracked(...PLACED_FOLDERS));
  const moves = new Map();
  const gone = [];
  const done = [];
  for (const [from, to] of Object.entries(MOVES)) {
    if (present.has(from) && from !== to) moves.set(from, to);
    else if (!present.has(from) && existsSync(path.join(ROOT, to))) done.push(from);
    else if (!present.has(from)) gone.push(from);
  }
  const targets = new Set(moves.values());
  for (const [from, to] of moves) {
    if (present.has(to) && !moves.has(to)) fail(`${from} would move onto ${to}, which exists and stays`);
    if (moves.has(to)) fail(`${from} moves to ${to}, itself a file that moves: the table must not chain`);
  }
  if (targets.size !== moves.size) fail('two files of the table move to the same path');
  const unplaced = [...present].filter((f) => !(f in MOVES) && !STAYS(f));
  return { moves, gone, done, unplaced };
}

function printUnplaced(unplaced, moves) {
  for (const file of unplaced) {
    const source = readFileSync(path.join(ROOT, file), 'utf8');
    console.log(`unplaced: ${file}  (suggestion: ${suggestFolder(file, source, moves)})`);
  }
}

/** Every tracked text file whose paths may need rewriting, but this tool's own. */
function rewriteCandidates() {
  const files = [...tracked(...REWRITE_DIRS), ...tracked(...REWRITE_ROOT_FILES)];
  return files.filter((f) => !f.startsWith(SELF_PREFIX) && isText(f));
}

function isText(file) {
  const full = path.join(ROOT, file);
  if (!existsSync(full) || statSync(full).size > 2_000_000) return false;
  return !readFileSync(full).includes(0);
}

/** The planned rewrite of every candidate: new path → new text (only files whose text or place changes). */
function planRewrites(moves) {
  const exists = (repoPath) => existsSync(path.join(ROOT, repoPath));
  const out = new Map();
  const warnings = [];
  for (const file of rewriteCandidates()) {
    const text = readFileSync(path.join(ROOT, file), 'utf8');
    const result = rewriteText(file, text, moves, exists);
    warnings.push(...result.warnings);
    const edited = applySpecialEdits(file, result.text, moves, warnings);
    if (edited !== text || moves.has(file)) out.set(moves.get(file) ?? file, edited);
  }
  // The new layer rows go in now, so that a table they cannot be spliced into stops the script before any move.
  const architecture = out.get(ARCHITECTURE) ?? readFileSync(path.join(ROOT, ARCHITECTURE), 'utf8');
  out.set(ARCHITECTURE, spliceLayerTable(architecture));
  return { rewrites: out, warnings };
}

function applySpecialEdits(file, text, moves, warnings) {
  let out = text;
  for (const edit of SPECIAL_EDITS.filter((e) => e.file === file)) {
    const [from, to] = [edit.from, edit.to(moves)];
    if (!out.includes(from)) warnings.push(`${file}: the text to edit is not there (${edit.why}): ${from}`);
    else out = out.split(from).join(to);
  }
  return out;
}

function printPlan(state, rewrites) {
  console.log(`moves: ${state.moves.size}; files rewritten: ${rewrites.size}`);
  for (const [from, to] of state.moves) console.log(`  ${from} -> ${to}`);
  for (const file of state.gone) console.log(`not in this tree (a file another branch adds, or one gone): ${file}`);
  printUnplaced(state.unplaced, state.moves);
}

function printFolderGraph(moves) {
  const files = tracked('src', 'server', 'deploy', 'demo').filter((f) => /\.tsx?$/.test(f) && isText(f));
  const sources = files.map((f) => [moves.get(f) ?? f, readFileSync(path.join(ROOT, f), 'utf8'), f]);
  const { edges, cycles, valueCycles } = folderGraph(sources, moves);
  console.log('\nimports between the new folders (after the move; "type" where only types cross):');
  for (const [from, tos] of [...edges].sort()) {
    const names = [...tos].sort().map(([to, typeOnly]) => (typeOnly ? `${to} (type)` : to));
    console.log(`  ${from} -> ${names.join(', ')}`);
  }
  for (const c of cycles) console.log(`folder cycle: ${c.join(' -> ')}`);
  for (const c of valueCycles) console.log(`folder cycle of value imports: ${c.join(' -> ')}`);
}

/** Longer paths make longer lines: the formatter the project checks (test/architecture/format.test.ts) reflows them. */
function formatCode(files) {
  const code = files.filter((f) => /\.(ts|tsx|mts|js|mjs|cjs)$/.test(f));
  const prettier = path.join(ROOT, 'node_modules/prettier/bin/prettier.cjs');
  execFileSync(process.execPath, [prettier, '--write', '--log-level', 'warn', ...code], {
    cwd: ROOT,
    stdio: 'inherit',
  });
}

function requireCleanTree() {
  const dirty = git('status', '--porcelain')
    .split('\n')
    .filter((l) => l && l !== '?? node_modules');
  if (dirty.length) fail(`the git tree is not clean; commit or stash first:\n${dirty.join('\n')}`);
}

function apply(state, rewrites) {
  for (const [from, to] of state.moves) {
    mkdirSync(path.dirname(path.join(ROOT, to)), { recursive: true });
    git('mv', from, to);
  }
  for (const [file, text] of rewrites) writeFileSync(path.join(ROOT, file), text);
  formatCode([...rewrites.keys()]);
}

/** The imports the layer table (as docs/ARCHITECTURE.md now has it) does not allow, by the layer test's own rules. */
async function layerViolations() {
  const { tsImport } = await import('tsx/esm/api');
  const rules = await tsImport('../test/architecture/import-rules.ts', import.meta.url);
  const table = rules.parseLayerRules(readFileSync(path.join(ROOT, ARCHITECTURE), 'utf8'));
  const files = rules.sourceFiles(ROOT, ['src', 'server', 'deploy', 'demo']);
  const edges = files.flatMap((f) => rules.importsOf(f, readFileSync(path.join(ROOT, f), 'utf8')));
  return rules.violations(table, edges);
}

/** Widens the rows of the table that imports outgrew (work merged after the table was written), and says which. */
async function fitLayerTable() {
  const found = await layerViolations();
  if (!found.length) return true;
  const seen = new Set();
  for (const v of found) {
    const pair = `${v.fromLayer} may now import ${v.toLayer}`;
    if (!seen.has(pair)) console.log(`widened: ${pair} (${v.from} imports ${v.to})`);
    seen.add(pair);
  }
  const architecture = path.join(ROOT, ARCHITECTURE);
  writeFileSync(architecture, widenRows(readFileSync(architecture, 'utf8'), found));
  const left = await layerViolations();
  for (const v of left)
    console.log(`layer rule broken: ${v.from} imports ${v.to}: ${v.fromLayer} may not import ${v.toLayer}`);
  return left.length === 0;
}

async function main(argv) {
  const unknown = argv.filter((a) => !['--plan', '--allow-unplaced'].includes(a));
  if (unknown.length) fail(`unknown argument ${unknown.join(' ')}\n${USAGE}`);
  const planOnly = argv.includes('--plan');
  const state = survey();
  if (!state.moves.size && state.done.length) return console.log('move-by-concern: already done; nothing to move');
  if (state.done.length) fail(`half done: these moved already, the rest not: ${state.done.join(', ')}`);
  const { rewrites, warnings } = planRewrites(state.moves);
  if (planOnly) {
    printPlan(state, rewrites);
    printFolderGraph(state.moves);
    for (const w of warnings) console.log(`warning: ${w}`);
    return;
  }
  requireCleanTree();
  if (state.unplaced.length && !argv.includes('--allow-unplaced')) {
    printUnplaced(state.unplaced, state.moves);
    fail(
      `${state.unplaced.length} unplaced file(s): add them to MOVES (scripts/move-by-concern.table.mjs) or pass --allow-unplaced`,
    );
  }
  apply(state, rewrites);
  printPlan(state, rewrites);
  for (const w of warnings) console.log(`warning: ${w}`);
  const layered = await fitLayerTable();
  console.log(
    `done: ${state.moves.size} files moved, ${rewrites.size} written. Next: node scripts/gen-ops-index.mjs && npx tsc -p tsconfig.json && npx vitest run test/architecture`,
  );
  if (!layered) process.exitCode = 2;
}

await main(process.argv.slice(2));
