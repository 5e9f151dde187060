/**
 * `--runtimes node,deno` for the benchmarks that measure one runtime per
 * process (one adapter each): the bench starts itself again under each
 * runtime in turn, with the same flags, and passes on each run's JSON line.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { cliCommand } from '../src/cli/host.node.ts';
import { args, opt } from './args.ts';

const root = fileURLToPath(new URL('../', import.meta.url));

/** Runs `script` (a path from the repository root) under each runtime of --runtimes; false when the flag is absent (measure here). */
export function runUnderEachRuntime(script: string): boolean {
  const runtimes = opt('runtimes', '');
  if (!runtimes) return false;
  const rest = args.filter((a, i) => a !== '--runtimes' && args[i - 1] !== '--runtimes');
  for (const runtime of runtimes.split(',') as ('node' | 'deno')[]) {
    const [exe] = cliCommand(runtime);
    const argv = runtime === 'deno' ? ['run', '-A', script, ...rest] : ['--import', 'tsx', script, ...rest];
    const r = spawnSync(exe, argv, {
      cwd: root,
      encoding: 'utf8',
      maxBuffer: 1 << 24,
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const line = r.stdout.trim().split('\n').pop() ?? '';
    if (r.status !== 0 || !line.startsWith('{'))
      throw new Error(`${script} under ${runtime} failed (exit ${r.status}); its stderr is above`);
    console.log(line);
  }
  return true;
}
