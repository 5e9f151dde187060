/**
 * The output of the processes a command starts (launch's workers, run's
 * workers), as a person reads it in one terminal: each line prefixed with its
 * worker, no colour codes inside the prefixed lines, no Vulkan noise, and a
 * process that could not start named with the reason the system gave.
 */
import { ensureRuntimeDir } from '../core/runtime-dir.node.ts';

/** CSI sequences (colours, cursor moves) and OSC sequences (titles, links), as terminals and Node's util.inspect write them. */
const ANSI = /\u001b\[[0-?]*[ -/]*[@-~]|\u001b\][^\u0007\u001b]*(?:\u0007|\u001b\\)/g;

export function stripAnsi(text: string): string {
  return text.replace(ANSI, '');
}

/** A child's line under its prefix: a colour code would run on into the prefix of the next line, or show as `[32m` in a log. */
export function prefixedLine(prefix: string, line: string): string {
  return `${prefix} ${stripAnsi(line)}\n`;
}

/**
 * The environment for a child whose lines are prefixed: no colours (Node and
 * Deno honour NO_COLOR; FORCE_COLOR would win over it, so it goes), and a
 * private XDG_RUNTIME_DIR when none is set, so its Vulkan stays quiet.
 */
export function prefixedChildEnv(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = { ...env, NO_COLOR: '1' };
  delete out.FORCE_COLOR;
  ensureRuntimeDir(out);
  return out;
}

/** Why a process did not start: the system's code (ENOENT, EACCES) and what it tried to run. */
export function spawnFailure(exe: string, err: Error & { code?: string }): string {
  const why =
    err.code === 'ENOENT'
      ? 'no such file (ENOENT)'
      : err.code === 'EACCES'
        ? 'not executable (EACCES)'
        : (err.code ?? '');
  return `cannot start ${exe}: ${why ? `${why}; ` : ''}${err.message}`;
}
