/**
 * docs/ARCHITECTURE.md's layer table as a checkable rule: each row names a
 * folder and what it may import; every relative import between two folders
 * of the table must be allowed by the importing folder's row. The table is
 * the single source: the test reads it, so the docs and the check cannot drift.
 */
import fs from 'node:fs';
import path from 'node:path';

/** folder (as the table writes it, e.g. `src/gpu`) → folders it may import; '*' = any. */
export type LayerRules = Map<string, Set<string>>;

export interface ImportEdge {
  from: string;
  to: string;
}

export interface Violation extends ImportEdge {
  fromLayer: string;
  toLayer: string;
}

const ANY = '*';

/**
 * Reads the `| folder | what | may import |` rows. The last column names
 * folders of the table (`core` for src/core, `server`, `src/signaling`);
 * "everything" allows all; any other word, and words in parentheses, explain.
 */
export function parseLayerRules(markdown: string): LayerRules {
  const rows: [string, string][] = [];
  for (const line of markdown.split('\n')) {
    const cells = line.split('|').map((c) => c.trim());
    const folder = /^`([\w/]+?)\/?`$/.exec(cells[1] ?? '')?.[1];
    if (folder && cells.length >= 5) rows.push([folder, cells[cells.length - 2].replace(/\([^)]*\)/g, '')]);
  }
  const folders = new Set(rows.map(([f]) => f));
  const rules: LayerRules = new Map();
  for (const [folder, column] of rows) {
    const allowed = new Set<string>();
    if (/\beverything\b/.test(column)) allowed.add(ANY);
    for (const word of column.replace(/`/g, '').split(/[,\s]+/)) {
      const name = word.replace(/\/$/, '');
      if (folders.has(name)) allowed.add(name);
      else if (folders.has(`src/${name}`)) allowed.add(`src/${name}`);
    }
    rules.set(folder, allowed);
  }
  return rules;
}

/** The table row a repository path belongs to (the longest folder that prefixes it), or null. */
export function layerOf(file: string, rules: LayerRules): string | null {
  let best: string | null = null;
  for (const folder of rules.keys()) {
    if ((file === folder || file.startsWith(`${folder}/`)) && (!best || folder.length > best.length)) best = folder;
  }
  return best;
}

function allows(rules: LayerRules, fromLayer: string, toLayer: string): boolean {
  const allowed = rules.get(fromLayer);
  if (!allowed) return false;
  if (allowed.has(ANY)) return true;
  return allowed.has(toLayer);
}

export function violations(rules: LayerRules, edges: readonly ImportEdge[]): Violation[] {
  const out: Violation[] = [];
  for (const e of edges) {
    const fromLayer = layerOf(e.from, rules);
    const toLayer = layerOf(e.to, rules);
    if (!fromLayer || !toLayer || fromLayer === toLayer) continue;
    if (!allows(rules, fromLayer, toLayer)) out.push({ ...e, fromLayer, toLayer });
  }
  return out;
}

const IMPORT =
  /(?:^|\n)\s*(?:import|export)\s[^;]*?from\s+['"](\.{1,2}\/[^'"]+)['"]|import\(\s*['"](\.{1,2}\/[^'"]+)['"]\s*\)/g;

/** Relative imports (static, re-exports, literal dynamic ones) of one source text, resolved to repository paths. */
export function importsOf(file: string, source: string): ImportEdge[] {
  const edges: ImportEdge[] = [];
  for (const m of source.matchAll(IMPORT)) {
    const target = path.posix.normalize(path.posix.join(path.posix.dirname(file), m[1] ?? m[2]));
    edges.push({ from: file, to: target });
  }
  return edges;
}

/** Every .ts file under `dirs` of `root`, as repository paths with forward slashes. */
export function sourceFiles(root: string, dirs: readonly string[]): string[] {
  const out: string[] = [];
  const walk = (rel: string): void => {
    for (const entry of fs.readdirSync(path.join(root, rel), { withFileTypes: true })) {
      if (entry.name === 'node_modules' || entry.name === 'dist') continue;
      const child = `${rel}/${entry.name}`;
      if (entry.isDirectory()) walk(child);
      else if (/\.tsx?$/.test(entry.name)) out.push(child);
    }
  };
  for (const d of dirs) if (fs.existsSync(path.join(root, d))) walk(d);
  return out;
}
