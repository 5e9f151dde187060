/** Which of the three runtimes this code runs in. One source tree serves all three. */
export type RuntimeName = 'deno' | 'node' | 'browser';

export function detectRuntime(): RuntimeName {
  const g = globalThis as Record<string, unknown>;
  if (typeof g.Deno !== 'undefined') return 'deno';
  const proc = g.process as { versions?: { node?: string } } | undefined;
  if (proc?.versions?.node) return 'node';
  return 'browser';
}

/**
 * A Node built-in module (`node:crypto`, …) where the runtime has one (Node, and Deno's Node
 * compatibility), else undefined (a page): code that runs in every runtime takes it as a faster
 * path, never as the only one.
 */
export function nodeBuiltin<T>(name: string): T | undefined {
  const proc = (globalThis as Record<string, unknown>).process as
    { getBuiltinModule?: (name: string) => unknown } | undefined;
  return proc?.getBuiltinModule?.(name) as T | undefined;
}
