/**
 * Two rules of shape for src/ and server/, read from the syntax tree (oxc-parser):
 * no function longer than a screen, and no import cycle among the files, a
 * type-only import counting as much as any other (a cycle of types is still two
 * files that cannot be read, moved or tested one without the other).
 */
import path from 'node:path';
import { parseSync } from 'oxc-parser';
import type { ImportEdge } from './import-rules.ts';

/** One function of a file: its name as the messages print it (see `nameOf`) and its length in lines. */
export interface FunctionLength {
  file: string;
  name: string;
  line: number;
  lines: number;
}

/** What the shape rules need of one source file. */
export interface FileShape {
  functions: FunctionLength[];
  imports: ImportEdge[];
}

type Node = { type: string; start: number; end: number; [key: string]: unknown };

const FUNCTION_TYPES = new Set(['FunctionDeclaration', 'FunctionExpression', 'ArrowFunctionExpression']);

function isNode(value: unknown): value is Node {
  return typeof value === 'object' && value !== null && typeof (value as Node).type === 'string';
}

function identifierName(node: unknown): string | null {
  if (!isNode(node)) return null;
  if (node.type === 'Identifier' || node.type === 'PrivateIdentifier') return node.name as string;
  if (node.type === 'Literal') return String(node.value);
  return null;
}

/** 1-based line of each offset: the offsets where lines start, searched by bisection. */
function lineCounter(source: string): (offset: number) => number {
  const starts = [0];
  for (let i = 0; i < source.length; i++) if (source.charCodeAt(i) === 10) starts.push(i + 1);
  return (offset) => {
    let lo = 0;
    let hi = starts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (starts[mid] <= offset) lo = mid;
      else hi = mid - 1;
    }
    return lo + 1;
  };
}

/**
 * The name a function goes by: its own (`function f`), the variable, property or
 * class member it is assigned to (`Class.method`, `ws.onopen`), else `(anonymous)`.
 * A function inside another is named after it (`connect/fail`), so names are
 * stable keys for an allow-list and say where to look.
 */
function nameOf(fn: Node, parent: Node | null, className: string | null, source: string): string {
  const own = identifierName(fn.id);
  if (own) return own;
  if (!parent) return '(anonymous)';
  if (parent.type === 'VariableDeclarator') return identifierName(parent.id) ?? '(anonymous)';
  if (parent.type === 'MethodDefinition' || parent.type === 'PropertyDefinition') {
    const key = identifierName(parent.key) ?? '[computed]';
    return className ? `${className}.${key}` : key;
  }
  if (parent.type === 'Property') return identifierName(parent.key) ?? '[computed]';
  if (parent.type === 'AssignmentExpression' && isNode(parent.left)) {
    return source.slice(parent.left.start, parent.left.end);
  }
  return '(anonymous)';
}

function relativeImport(file: string, node: Node): string | null {
  const sourceNode = node.source;
  if (!isNode(sourceNode) || sourceNode.type !== 'Literal' || typeof sourceNode.value !== 'string') return null;
  if (!sourceNode.value.startsWith('.')) return null;
  return path.posix.normalize(path.posix.join(path.posix.dirname(file), sourceNode.value));
}

const IMPORT_TYPES = new Set([
  'ImportDeclaration', // `import type` included
  'ExportNamedDeclaration',
  'ExportAllDeclaration',
  'ImportExpression', // import('./x.ts') with a literal path
  'TSImportType', // typeof import('./x.ts')
]);

/** Every function of `source` with its length, and every relative import, type-only ones included. */
export function shapeOf(file: string, source: string): FileShape {
  const parsed = parseSync(file, source);
  if (parsed.errors.length > 0) throw new Error(`${file} does not parse: ${parsed.errors[0].message}`);
  const lineOf = lineCounter(source);
  const shape: FileShape = { functions: [], imports: [] };
  const visit = (node: Node, parent: Node | null, outer: string | null, className: string | null): void => {
    let enclosing = outer;
    let enclosingClass = className;
    if (IMPORT_TYPES.has(node.type)) {
      const to = relativeImport(file, node);
      if (to) shape.imports.push({ from: file, to });
    }
    if (node.type === 'ClassDeclaration' || node.type === 'ClassExpression') {
      enclosingClass = identifierName(node.id) ?? '(anonymous class)';
    }
    if (FUNCTION_TYPES.has(node.type) && node.body) {
      const name = nameOf(node, parent, className, source);
      enclosing = outer ? `${outer}/${name}` : name;
      const line = lineOf(node.start);
      shape.functions.push({ file, name: enclosing, line, lines: lineOf(node.end) - line + 1 });
    }
    for (const key in node) {
      const child = node[key];
      if (Array.isArray(child)) {
        for (const c of child) if (isNode(c)) visit(c, node, enclosing, enclosingClass);
      } else if (isNode(child)) visit(child, node, enclosing, enclosingClass);
    }
  };
  visit(parsed.program as unknown as Node, null, null, null);
  return shape;
}

/** Functions longer than `limit` lines, longest first. */
export function longFunctions(shapes: readonly FileShape[], limit: number): FunctionLength[] {
  return shapes
    .flatMap((s) => s.functions.filter((f) => f.lines > limit))
    .sort((a, b) => b.lines - a.lines || a.file.localeCompare(b.file));
}

/**
 * The import cycles among `files`: each strongly connected group of two or more
 * files (or a file importing itself), as a list of its files and which of the
 * group each imports. Tarjan's algorithm, iterative so a deep chain cannot
 * overflow the stack.
 */
export function importCycles(files: readonly string[], edges: readonly ImportEdge[]): ImportEdge[][] {
  const known = new Set(files);
  const next = new Map<string, string[]>(files.map((f) => [f, []]));
  for (const e of edges) if (known.has(e.from) && known.has(e.to)) next.get(e.from)!.push(e.to);
  const groups = stronglyConnected(files, next);
  const cycles: ImportEdge[][] = [];
  for (const group of groups) {
    const members = new Set(group);
    const inside = group
      .flatMap((from) => [...new Set(next.get(from))].filter((to) => members.has(to)).map((to) => ({ from, to })))
      .sort((a, b) => a.from.localeCompare(b.from) || a.to.localeCompare(b.to));
    if (group.length > 1 || inside.length > 0) cycles.push(inside);
  }
  return cycles;
}

function stronglyConnected(files: readonly string[], next: Map<string, string[]>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const onStack = new Set<string>();
  const stack: string[] = [];
  const groups: string[][] = [];
  for (const root of files) {
    if (index.has(root)) continue;
    const work: { file: string; child: number }[] = [{ file: root, child: 0 }];
    index.set(root, index.size);
    low.set(root, index.get(root)!);
    stack.push(root);
    onStack.add(root);
    while (work.length > 0) {
      const frame = work[work.length - 1];
      const children = next.get(frame.file)!;
      if (frame.child < children.length) {
        const to = children[frame.child++];
        if (!index.has(to)) {
          index.set(to, index.size);
          low.set(to, index.get(to)!);
          stack.push(to);
          onStack.add(to);
          work.push({ file: to, child: 0 });
        } else if (onStack.has(to)) low.set(frame.file, Math.min(low.get(frame.file)!, index.get(to)!));
        continue;
      }
      work.pop();
      if (work.length > 0) {
        const parent = work[work.length - 1].file;
        low.set(parent, Math.min(low.get(parent)!, low.get(frame.file)!));
      }
      if (low.get(frame.file) === index.get(frame.file)) {
        const group: string[] = [];
        let member: string;
        do {
          member = stack.pop()!;
          onStack.delete(member);
          group.push(member);
        } while (member !== frame.file);
        groups.push(group.sort());
      }
    }
  }
  return groups;
}
