/**
 * The shader registry: WGSL source text by key, where the key is the file name
 * in `shaders/` without `.wgsl` (`shaders/matmul.wgsl` → `matmul`).
 *
 * Node and Deno fill it from disk (`shaders.node.ts`, called by `acquireGpu`).
 * The page fills it from Vite's bundle, before acquiring a device:
 *
 *   registerShaders(import.meta.glob('../shaders/*.wgsl', { query: '?raw', import: 'default', eager: true }));
 *
 * WGSL has no includes, so the loader has two small ones (docs/KERNELS.md, "Shader parts"):
 * - `// #import _name` on a line of its own is replaced by the text of `shaders/_name.wgsl`, a *part*
 *   (functions and workgroup variables, no entry point; its file name starts with `_`), once per module.
 * - A key ending in `+subgroups` (`cross_entropy+subgroups`) compiles `shaders/cross_entropy.wgsl` with
 *   `enable subgroups;` first, and each imported part from its `.subgroups` flavour where one exists
 *   (`_group_reduce.subgroups.wgsl` for `_group_reduce`): one shader text, two reductions.
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';

const sources = new Map<string, string>();

/** `../shaders/matmul.wgsl` → `matmul`; a bare key stays as it is. */
export function shaderKeyOf(pathOrKey: string): string {
  const base = pathOrKey.split(/[\\/]/).pop() ?? pathOrKey;
  return base.endsWith('.wgsl') ? base.slice(0, -'.wgsl'.length) : base;
}

/** Adds (or replaces) shader sources. Keys may be paths (as `import.meta.glob` gives them) or bare keys. */
export function registerShaders(record: Record<string, string>): void {
  for (const [path, text] of Object.entries(record)) {
    if (typeof text !== 'string') {
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `shader ${path} is not text; import it with { query: '?raw', import: 'default' }`,
        { path },
      );
    }
    sources.set(shaderKeyOf(path), text);
  }
}

/** The suffix of a shader key that compiles its file with subgroup operations (see the file's comment). */
export const SUBGROUPS_SUFFIX = '+subgroups';

/** `cross_entropy+subgroups` → `cross_entropy`: the file a (possibly flavoured) key compiles. */
export function shaderFileOf(key: string): string {
  return key.endsWith(SUBGROUPS_SUFFIX) ? key.slice(0, -SUBGROUPS_SUFFIX.length) : key;
}

export function hasShader(key: string): boolean {
  return sources.has(shaderFileOf(key));
}

export function registeredShaderKeys(): string[] {
  return [...sources.keys()].sort();
}

const IMPORT_LINE = /^\/\/ #import (\S+)[ \t]*$/gm;

/** The WGSL a module of `key` compiles: its file with every part it imports inlined, flavoured as the key says. */
export function moduleSource(key: string): string {
  const subgroups = key.endsWith(SUBGROUPS_SUFFIX);
  const file = shaderFileOf(key);
  const body = inlineParts(file, subgroups, new Set(), [file]);
  return subgroups ? `enable subgroups;\n${body}` : body;
}

function inlineParts(key: string, subgroups: boolean, done: Set<string>, chain: string[]): string {
  return shaderSource(key).replace(IMPORT_LINE, (_line, name: string) => {
    if (!name.startsWith('_')) {
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `shaders/${chain[0]}.wgsl imports "${name}", which is not a part: only files named _<name>.wgsl (no entry point) can be imported`,
        { shader: chain[0], part: name },
      );
    }
    const part = subgroups && sources.has(`${name}.subgroups`) ? `${name}.subgroups` : name;
    if (chain.includes(part)) {
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `shader parts import each other in a cycle: ${[...chain, part].join(' → ')}; move what both need into a third part`,
        { chain: [...chain, part] },
      );
    }
    if (done.has(part)) return `// (${part} is imported above)`;
    done.add(part);
    return inlineParts(part, subgroups, done, [...chain, part]);
  });
}

export function shaderSource(key: string): string {
  const text = sources.get(key);
  if (text === undefined) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `no WGSL shader "${key}" is registered; in the browser call registerShaders(import.meta.glob('../shaders/*.wgsl', { query: '?raw', import: 'default', eager: true })) before acquireGpu(), in Node/Deno check that shaders/${key}.wgsl exists`,
      { key, registered: registeredShaderKeys() },
    );
  }
  return text;
}
