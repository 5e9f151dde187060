/**
 * Command-line words for the benchmarks that run under Deno and Node alike
 * (the CLI's own `argv`), and the `--name value` reading the simple ones use.
 */
import { argv } from '../src/cli/host.node.ts';

export const args: readonly string[] = argv;

/** The value after `--name`, or `fallback` when the flag or its value is missing. */
export function opt(name: string, fallback: string): string {
  const i = args.indexOf(`--${name}`);
  return i >= 0 && args[i + 1] ? args[i + 1] : fallback;
}
