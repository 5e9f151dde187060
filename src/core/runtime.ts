/** Which of the three runtimes this code runs in. One source tree serves all three. */
export type RuntimeName = 'deno' | 'node' | 'browser';

export function detectRuntime(): RuntimeName {
  const g = globalThis as Record<string, unknown>;
  if (typeof g.Deno !== 'undefined') return 'deno';
  const proc = g.process as { versions?: { node?: string } } | undefined;
  if (proc?.versions?.node) return 'node';
  return 'browser';
}
