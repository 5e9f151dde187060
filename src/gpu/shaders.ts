/**
 * The shader registry: WGSL source text by key, where the key is the file name
 * in `shaders/` without `.wgsl` (`shaders/matmul.wgsl` → `matmul`).
 *
 * Node and Deno fill it from disk (`shaders.node.ts`, called by `acquireGpu`).
 * The page fills it from Vite's bundle, before acquiring a device:
 *
 *   registerShaders(import.meta.glob('../shaders/*.wgsl', { query: '?raw', import: 'default', eager: true }));
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

export function hasShader(key: string): boolean {
  return sources.has(key);
}

export function registeredShaderKeys(): string[] {
  return [...sources.keys()].sort();
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
