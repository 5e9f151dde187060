/**
 * The process the CLI runs in (Node or Deno; both provide `node:process`):
 * arguments, output streams, exit status, and re-executing ourselves under the
 * other runtime. Kept apart so the rest of src/cli stays free of `process`.
 */
import { spawn } from 'node:child_process';
import process from 'node:process';
import { fileURLToPath } from 'node:url';
import { findDeno } from '../core/find-deno.node.ts';
import { nodeRuntimeFlags } from '../core/node-flags.node.ts';
import { PACKAGE_ROOT, RUNS_SOURCES } from '../core/package-root.node.ts';
import { detectRuntime, type RuntimeName } from '../core/runtime.ts';
import {
  chooseRuntime,
  parseAdapterDescription,
  type AdapterDescription,
  type ConcreteRuntime,
  type RuntimeChoice,
  WITHOUT_DENO,
} from './runtime-choice.ts';

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

/**
 * The CLI's own child processes (workers, the adapter probe, a re-execution
 * under the other runtime) run what this process runs: the repository's .ts
 * sources (through tsx, or Deno) or an install's built JavaScript.
 */
const OWN_EXTENSION = RUNS_SOURCES ? 'ts' : 'js';

/** A file of src/cli (this folder), as it exists here: `main.ts` in the repository, `main.js` in an install. */
function cliFile(stem: string): string {
  return fileURLToPath(new URL(`./${stem}.${OWN_EXTENSION}`, import.meta.url));
}

/** `node` arguments that run one of our files: the sources need tsx's loader, the built code nothing. */
function nodeArgsFor(file: string): string[] {
  return [...nodeRuntimeFlags(), ...(RUNS_SOURCES ? ['--import', 'tsx', file] : [file])];
}

/** What to tell a person who has no Deno: commands that work in their own project, not only in ours. */
const INSTALL_DENO_HINT =
  'install Deno (npm install deno, in this project; or https://docs.deno.com/runtime/getting_started/installation/), or pass --runtime node';

/** The executable that runs `runtime`: Deno as findDeno finds it (`deno` when none, for spawn to name the failure); Node as this process or PATH. */
export function runtimeExecutable(runtime: 'deno' | 'node'): string {
  if (runtime === 'deno') return findDeno() ?? 'deno';
  return detectRuntime() === 'node' ? process.execPath : 'node';
}

/** The command line that starts the ringtrain CLI under `runtime`. */
export function cliCommand(runtime: 'deno' | 'node'): string[] {
  if (runtime === 'deno') return [runtimeExecutable('deno'), 'run', '-A', cliFile('main')];
  return [runtimeExecutable('node'), ...nodeArgsFor(cliFile('main'))];
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
          (runtime === 'deno' ? `To train under Deno, ${INSTALL_DENO_HINT}.\n` : 'Install Node 20 or newer.\n'),
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

/** How long the adapter probe may take (starting Node and a Vulkan driver) before we decide without it. */
const PROBE_TIMEOUT_MS = 60_000;

/**
 * Asks Node + Dawn, in a child process (probe-adapter.node.ts), which adapter
 * it gets. Never throws: a probe that cannot start or answer reports
 * `found: false` with the reason.
 */
export function probeNodeAdapter(): Promise<AdapterDescription> {
  const exe = runtimeExecutable('node');
  return new Promise((resolve) => {
    const child = spawn(exe, nodeArgsFor(cliFile('probe-adapter.node')), {
      cwd: PACKAGE_ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    const timer = setTimeout(() => child.kill('SIGKILL'), PROBE_TIMEOUT_MS);
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    child.on('error', (e) => {
      clearTimeout(timer);
      resolve({ found: false, error: `cannot start ${exe}: ${e.message}` });
    });
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      const line = out.trim().split('\n').pop() ?? '';
      try {
        resolve(parseAdapterDescription(line, 'the adapter probe'));
      } catch {
        const why =
          signal === 'SIGKILL'
            ? `no answer in ${PROBE_TIMEOUT_MS / 1000} s`
            : `exit ${code}${err ? `: ${err.trim().split('\n').pop()}` : ''}`;
        resolve({ found: false, error: `the Node adapter probe failed (${why})` });
      }
    });
  });
}

/**
 * Under Deno, WebGPU is built in: ask it directly (no child process). It sees
 * the same Vulkan devices Dawn would, and says whether the adapter is a
 * software one.
 */
async function probeOwnAdapter(): Promise<AdapterDescription> {
  try {
    const gpu = (globalThis as { navigator?: { gpu?: GPU } }).navigator?.gpu;
    const adapter = await gpu?.requestAdapter();
    if (!adapter) return { found: false, error: 'Deno found no WebGPU adapter' };
    const info = adapter.info as GPUAdapterInfo & { isFallbackAdapter?: boolean };
    const legacy = (adapter as GPUAdapter & { isFallbackAdapter?: boolean }).isFallbackAdapter;
    return {
      found: true,
      description: info?.description || info?.device || '',
      vendor: info?.vendor ?? '',
      architecture: info?.architecture ?? '',
      isFallbackAdapter: Boolean(info?.isFallbackAdapter ?? legacy ?? false),
    };
  } catch (err) {
    return { found: false, error: String(err) };
  }
}

export interface RuntimeDecision extends RuntimeChoice {
  /** True when --runtime auto (the default) decided; false when the user named the runtime. */
  auto: boolean;
}

/** How `--runtime auto` learns this machine's adapter: a probe of the runtime that would train. */
let adapterProbe: () => Promise<AdapterDescription> = () =>
  detectRuntime() === 'deno' ? probeOwnAdapter() : probeNodeAdapter();

/**
 * Replaces the adapter probe for this process, for a program that embeds the
 * CLI and knows the adapter better (or simulates one); the shipped CLI never calls it.
 */
export function setAdapterProbe(probe: () => Promise<AdapterDescription>): void {
  adapterProbe = probe;
}

/**
 * The runtime to train under: the one named, or for 'auto' (and when none is
 * given) the choice by adapter (chooseRuntime), from `probe`, among the runtimes
 * installed. Without Deno the answer is Node whatever the adapter, so no probe runs.
 */
export async function decideRuntime(
  requested: ConcreteRuntime | 'auto' | undefined,
  probe: () => Promise<AdapterDescription> = adapterProbe,
  denoInstalled: () => boolean = () => detectRuntime() === 'deno' || findDeno() !== undefined,
): Promise<RuntimeDecision> {
  if (requested === 'node' || requested === 'deno')
    return { runtime: requested, why: `--runtime ${requested}`, auto: false };
  if (!denoInstalled()) return { ...WITHOUT_DENO, auto: true };
  return { ...chooseRuntime(await probe()), auto: true };
}

/** The first line of a training command's output when auto chose the runtime. */
export function runtimeLine(d: RuntimeDecision): string {
  return `ringtrain: runtime ${d.runtime} (${d.auto ? 'auto: ' : ''}${d.why})`;
}
