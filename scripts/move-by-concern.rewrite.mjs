/**
 * The path arithmetic of scripts/move-by-concern.mjs: given the moves (old repository path →
 * new), the text of one file as the move leaves it, and what the moved folders import.
 */
import path from 'node:path';

const posix = path.posix;
/** Files where a relative string is a path relative to the file itself (imports, `new URL(…, import.meta.url)`). */
const CODE = /\.(ts|tsx|mts|cts|js|mjs|cjs|json|html)$/;
/** A quoted relative path; template literals with `${…}` inside are not paths we can follow. */
const RELATIVE_STRING = /(['"`])(\.{1,2}\/[^'"`\s$]*?)\1/g;
/** A repository path of a moved folder's file in any text (comments, docs, spawn arguments, `dist/src/…js`). */
const REPO_PATH = /(?<![\w@-])src\/(?:distributed|collectives|cli)\/[\w./-]*\w/g;
/** The same without `src/`, as the docs often write it (`distributed/config-types.ts`). */
const SHORT_PATH = /(?<![\w/.@-])(?:distributed|collectives|cli)\/[\w./-]*\w/g;
const IMPORT =
  /(?:^|\n)\s*(import|export)\s(type\s)?[^;]*?from\s+['"](\.{1,2}\/[^'"]+)['"]|(typeof\s+)?import\(\s*['"](\.{1,2}\/[^'"]+)['"]\s*\)/g;

/** A moved file's new path; also for the built forms of a source (`x.js`, `x.d.ts` for `x.ts`). */
export function movedPath(repoPath, moves) {
  if (moves.has(repoPath)) return moves.get(repoPath);
  const built = /^(.*)\.(js|d\.ts|mjs)$/.exec(repoPath);
  const source = built && moves.get(`${built[1]}.ts`);
  return source ? `${source.slice(0, -3)}.${built[2]}` : null;
}

function relativeSpec(fromFile, target, trailingSlash) {
  let spec = posix.relative(posix.dirname(fromFile), target);
  if (!spec.startsWith('.')) spec = `./${spec}`;
  return trailingSlash ? `${spec}/` : spec;
}

/** Relative strings of `file` (at `oldFile` before the move, `newFile` after) that must change. */
function rewriteRelative(oldFile, newFile, text, moves, exists, warnings) {
  return text.replace(RELATIVE_STRING, (whole, quote, spec) => {
    const trailingSlash = spec.endsWith('/');
    const oldTarget = posix.normalize(posix.join(posix.dirname(oldFile), spec)).replace(/\/$/, '');
    if (oldTarget.startsWith('..')) return whole;
    const newTarget = movedPath(oldTarget, moves) ?? oldTarget;
    if (newTarget === oldTarget && newFile === oldFile) return whole;
    if (!exists(oldTarget)) {
      if (newFile !== oldFile) warnings.push(`${oldFile}: '${spec}' names nothing in the repository; left as it is`);
      return whole;
    }
    return `${quote}${relativeSpec(newFile, newTarget, trailingSlash)}${quote}`;
  });
}

/**
 * `text` of `file` as it must read after the moves: relative strings re-pointed from the file's
 * new place to their targets' new places, and repository paths of moved files renamed.
 */
export function rewriteText(file, text, moves, exists) {
  const warnings = [];
  const newFile = moves.get(file) ?? file;
  let out = CODE.test(file) ? rewriteRelative(file, newFile, text, moves, exists, warnings) : text;
  out = out.replace(REPO_PATH, (p) => movedPath(p, moves) ?? p);
  out = out.replace(SHORT_PATH, (p) => movedPath(`src/${p}`, moves)?.slice(4) ?? p);
  return { text: out, warnings };
}

/** The relative imports of a source file, resolved to repository paths (from where it was). */
export function importTargets(oldFile, text) {
  return importsWithKind(oldFile, text).map((i) => i.target);
}

/** The same, each with whether it brings types alone (`import type`, `export type`, `typeof import(…)`). */
function importsWithKind(oldFile, text) {
  const out = [];
  for (const m of text.matchAll(IMPORT)) {
    const target = posix.normalize(posix.join(posix.dirname(oldFile), m[3] ?? m[5]));
    out.push({ target, typeOnly: Boolean(m[2] ?? m[4]) });
  }
  return out;
}

/** The folder a file belongs to as a layer: its own folder inside the placed ones, else src/<top>. */
export function layerFolder(repoPath) {
  const parts = repoPath.split('/');
  if (parts[0] !== 'src') return parts[0];
  if (['distributed', 'collectives', 'cli'].includes(parts[1])) return posix.dirname(repoPath);
  return parts.length > 2 ? `src/${parts[1]}` : 'src';
}

/** Where an unplaced file probably belongs: the new folder most of its imports went to. */
export function suggestFolder(file, text, moves) {
  const counts = new Map();
  const home = file.split('/').slice(0, 2).join('/');
  for (const target of importTargets(file, text)) {
    const moved = moves.get(target);
    if (!moved || !moved.startsWith(`${home}/`)) continue;
    const folder = posix.dirname(moved);
    counts.set(folder, (counts.get(folder) ?? 0) + 1);
  }
  const best = [...counts].sort((a, b) => b[1] - a[1])[0];
  return best ? `${best[0]}/ (${best[1]} of its imports go there)` : `no import points anywhere; read it`;
}

/**
 * The folder-level import graph after the moves, for the folders that move: each edge says
 * whether only types cross it; and the cycles, of all imports and of those that bring values.
 * `sources` are [new path, text, old path] triples.
 */
export function folderGraph(sources, moves) {
  const edges = new Map();
  const placed = (f) => /^src\/(distributed|collectives|cli)(\/|$)/.test(f);
  for (const [newPath, text, oldPath] of sources) {
    const from = layerFolder(newPath);
    for (const { target, typeOnly } of importsWithKind(oldPath, text)) {
      const to = layerFolder(moves.get(target) ?? target);
      if (from === to || !(placed(from) || placed(to))) continue;
      if (!edges.has(from)) edges.set(from, new Map());
      edges.get(from).set(to, (edges.get(from).get(to) ?? true) && typeOnly);
    }
  }
  const valueEdges = new Map([...edges].map(([f, tos]) => [f, [...tos].filter(([, t]) => !t).map(([to]) => to)]));
  const allEdges = new Map([...edges].map(([f, tos]) => [f, [...tos.keys()]]));
  const cycles = (g) => stronglyConnected(g).filter((c) => c.length > 1);
  return { edges, cycles: cycles(allEdges), valueCycles: cycles(valueEdges) };
}

/** Tarjan's strongly connected components of a graph given as node → successors. */
function stronglyConnected(edges) {
  const index = new Map();
  const low = new Map();
  const stack = [];
  const onStack = new Set();
  const out = [];
  const visit = (v) => {
    index.set(v, index.size);
    low.set(v, index.get(v));
    stack.push(v);
    onStack.add(v);
    for (const w of edges.get(v) ?? []) {
      if (!index.has(w)) visit(w);
      if (onStack.has(w)) low.set(v, Math.min(low.get(v), low.get(w)));
    }
    if (low.get(v) !== index.get(v)) return;
    const component = [];
    for (let w = null; w !== v;) {
      w = stack.pop();
      onStack.delete(w);
      component.push(w);
    }
    out.push(component.sort());
  };
  for (const v of edges.keys()) if (!index.has(v)) visit(v);
  return out;
}
