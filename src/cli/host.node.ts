/**
 * The process the CLI runs in (Node or Deno; both provide `node:process`):
 * arguments, output streams, exit status, and re-executing ourselves under the
 * other runtime. Kept apart so the rest of src/cli stays free of `process`.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import process from 'node:process';
import { fileURLToPath } from 'node:url';
import { detectRuntime, type RuntimeName } from '../core/runtime.ts';

export const argv: readonly string[] = process.argv.slice(2);
export const stdout = process.stdout;
export const stderr = process.stderr;
export const stderrIsTTY = Boolean(process.stderr.isTTY);

export function setExitCode(code: number): void {
  process.exitCode = code;
}

/** Writes one line to stdout and resolves once it has been handed to the OS (so `exit` cannot cut it off). */
export function printLine(text: string, to: NodeJS.WriteStream = process.stdout): Promise<void> {
  return new Promise((resolve) => to.write(text + '\n', () => resolve()));
}

const repoRoot = fileURLToPath(new URL('../../', import.meta.url));

/** The executable that runs `runtime`: Deno from node_modules (the `deno` npm package) or PATH; Node as this process or PATH. */
export function runtimeExecutable(runtime: 'deno' | 'node'): string {
  if (runtime === 'deno') {
    const local = `${repoRoot}node_modules/.bin/deno`;
    return existsSync(local) ? local : 'deno';
  }
  return detectRuntime() === 'node' ? process.execPath : 'node';
}

/** The command line that starts the ringtrain CLI under `runtime`. */
export function cliCommand(runtime: 'deno' | 'node'): string[] {
  if (runtime === 'deno') return [runtimeExecutable('deno'), 'run', '-A', `${repoRoot}src/cli/main.ts`];
  return [runtimeExecutable('node'), `${repoRoot}bin/ringtrain.js`];
}

/**
 * Runs the same CLI arguments under the other runtime with our stdio, and
 * resolves with its exit code. Signals we receive are passed on, so Ctrl-C
 * stops the child, not only us.
 */
export function reexecUnder(runtime: 'deno' | 'node', args: readonly string[]): Promise<number> {
  const [exe, ...pre] = cliCommand(runtime);
  return new Promise((resolve) => {
    const child = spawn(exe, [...pre, ...args], { stdio: 'inherit' });
    const forward = (sig: NodeJS.Signals) => child.kill(sig);
    process.on('SIGINT', forward);
    process.on('SIGTERM', forward);
    child.on('error', (err) => {
      process.stderr.write(
        `ringtrain: cannot start ${runtime} (${exe}): ${err.message}. ` +
          (runtime === 'deno' ? 'Run npm ci (it installs Deno from npm) or install Deno.\n' : 'Install Node 20 or newer.\n'),
      );
      resolve(127);
    });
    child.on('exit', (code, signal) => {
      process.off('SIGINT', forward);
      process.off('SIGTERM', forward);
      resolve(code ?? (signal ? 128 + 1 : 1));
    });
  });
}

/** A second signal sooner than this after the first is the same Ctrl-C arriving twice (from the terminal and from a parent that forwards it). */
const SAME_INTERRUPT_MS = 500;

/**
 * An AbortSignal that fires on the first Ctrl-C (SIGINT) or SIGTERM, so a
 * long job can stop cleanly; a later second signal exits at once. `dispose`
 * removes the handlers.
 */
export function interruptSignal(onFirst: () => void): { signal: AbortSignal; dispose(): void } {
  const controller = new AbortController();
  let firstAt = 0;
  const handler = (sig: NodeJS.Signals) => {
    if (controller.signal.aborted) {
      if (Date.now() - firstAt > SAME_INTERRUPT_MS) process.exit(128 + (sig === 'SIGINT' ? 2 : 15));
      return;
    }
    firstAt = Date.now();
    controller.abort();
    onFirst();
  };
  process.on('SIGINT', handler);
  process.on('SIGTERM', handler);
  return {
    signal: controller.signal,
    dispose() {
      process.off('SIGINT', handler);
      process.off('SIGTERM', handler);
    },
  };
}

export function currentRuntime(): RuntimeName {
  return detectRuntime();
}
